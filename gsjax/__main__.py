"""The ``gsjax`` command (console script and ``python -m gsjax``).

The top of the package: :func:`gsjax.cli.main` (every library command) plus the paper's
``reproduce`` from :mod:`gsjax.paper.report`, which nothing else imports.
"""

import sys

from gsjax import cli
from gsjax.paper import report

__all__ = ["main"]


def main(argv=None) -> int:
    """``gsjax COMMAND ...``: the library's commands and ``reproduce``."""
    return cli.main(argv, extra=(report.add_parser,))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
