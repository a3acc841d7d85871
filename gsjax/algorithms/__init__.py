"""Bandit algorithms, registered by name: every one is a recipe of :mod:`gsjax.algorithms.kernel`.

``REGISTRY[name](structure, spec, logic=HARD) -> BanditAlgorithm``; ``logic`` is
:data:`~gsjax.algorithms.decisions.HARD` (the paper's algorithms) or
:func:`~gsjax.algorithms.decisions.soft` (their relaxed form); :func:`register` adds more.
"""

from gsjax.algorithms import adaptive, joint_lazy
from gsjax.algorithms.base import (AgentParams, AgentSpec, BanditAlgorithm, BanditInfo,
                                   BanditState, SolveRequest)
from gsjax.algorithms.decisions import HARD, Logic
from gsjax.algorithms.kernel import node_recipe

__all__ = ["REGISTRY", "register", "make", "AgentParams", "AgentSpec", "BanditAlgorithm",
           "BanditInfo", "BanditState", "SolveRequest", "HARD", "Logic"]

REGISTRY = {
    "linucb": node_recipe("linucb"),
    "lazy": node_recipe("lazy"),  # Section 4; spec.reference "global" | "own"
    "async_lazy": node_recipe("async_lazy"),  # Section 5.1
    "joint_lazy": joint_lazy.make_lazy,  # Section 5.3, factor-graph problems only
    "joint_linucb": joint_lazy.make_linucb,
    "adaptive_lazy": adaptive.make,  # Section 5.2
}
"""Every bandit algorithm by name: ``REGISTRY[name](structure, spec, logic=HARD)`` returns
its :class:`BanditAlgorithm` (``init`` / ``act`` / ``update``). :func:`register` adds one."""


def register(name: str, factory) -> None:
    """Add an algorithm factory ``factory(structure, spec, logic=HARD) -> BanditAlgorithm``."""
    if name in REGISTRY:
        raise ValueError(f"algorithm {name!r} is already registered")
    REGISTRY[name] = factory


def make(name: str, structure, spec, logic: Logic = HARD) -> BanditAlgorithm:
    """Look up and build an algorithm; unknown names list the registered ones."""
    try:
        factory = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; registered: {sorted(REGISTRY)}") from None
    return factory(structure, spec, logic)
