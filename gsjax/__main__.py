"""``python -m gsjax`` = the ``gsjax`` console script."""

import sys

from gsjax.cli import main

sys.exit(main())
