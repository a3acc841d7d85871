"""Async-LazyGraphLinUCB: per-criterion triggers, local re-optimisation (Section 5.1).

See :mod:`gsjax.algorithms._ucb` for the exact rules.
"""

from gsjax.algorithms._ucb import make_ucb
from gsjax.algorithms.base import AgentSpec, BanditAlgorithm
from gsjax.problem import Structure

__all__ = ["make"]


def make(structure: Structure, spec: AgentSpec) -> BanditAlgorithm:
    """Bind the static structure and spec; returns ``(init, act, update)``."""
    return make_ucb("async_lazy", structure, spec)
