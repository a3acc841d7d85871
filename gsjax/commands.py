"""The ``gsjax`` command's top level (its commands, their one-line helps, its version),
importing no other gsjax module: :mod:`gsjax.__main__` answers ``--help`` with it before JAX
is loaded (a 4 s import); :func:`gsjax.cli.build_parser` extends it.
"""

from __future__ import annotations

import argparse
import importlib.metadata

__all__ = ["COMMANDS", "DESCRIPTION", "version", "top_parser"]

DESCRIPTION = "Graph-structured continuous-state linear bandits with movement costs."

#: Every command of ``gsjax``, in the order of ``gsjax --help``, with its one-line help.
COMMANDS = {
    "run": "run one experiment config",
    "list": "list the built-in configs with their descriptions",
    "merge": "combine run folders over disjoint seed ranges into one",
    "check": "validate a config and build its problem, without running",
    "plot": "redraw the figures of a run folder from its saved arrays",
    "tuner": "ask/tell tuning of a live system (state kept in a file)",
    "tune": "tune beta, lambda_reg, the trigger or OGD's step size by gradient descent through "
            "whole (relaxed) runs",
    "reproduce": "run every paper experiment and write report.md",
}


def version() -> str:
    """The installed package's version (``gsjax.__version__``, which no module may import)."""
    try:
        return importlib.metadata.version("gsjax")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def top_parser() -> argparse.ArgumentParser:
    """The parser's top level: ``--help``, ``--version`` and the command's name. A command's
    own arguments are left unparsed (use ``parse_known_args``); the full parser reads them."""
    p = argparse.ArgumentParser(prog="gsjax", description=DESCRIPTION)
    p.add_argument("--version", action="version", version=f"gsjax {version()}")
    sub = p.add_subparsers(dest="command", required=True)
    for name, about in COMMANDS.items():
        sub.add_parser(name, help=about, add_help=False)
    return p
