"""The ``gsjax`` command (console script and ``python -m gsjax``): :func:`gsjax.cli.main` plus
the paper's ``reproduce`` (:mod:`gsjax.paper.report`). ``--help``, ``--version`` and a typo are
answered by :func:`gsjax.commands.top_parser` before anything imports JAX.
"""

import importlib
import sys
from typing import TYPE_CHECKING

from gsjax import commands

if TYPE_CHECKING:  # imported by main() once the command is known (the layer test sees them)
    from gsjax import cli
    from gsjax.paper import report

__all__ = ["main"]


def main(argv=None) -> int:
    """``gsjax COMMAND ...``: the library's commands and ``reproduce``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    commands.top_parser().parse_known_args(argv)  # exits on --help, --version or a typo
    cli = importlib.import_module("gsjax.cli")
    report = importlib.import_module("gsjax.paper.report")
    return cli.main(argv, extra=(report.add_parser,), host_cores=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
