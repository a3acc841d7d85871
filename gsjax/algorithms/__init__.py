"""Bandit algorithms, registered by name.

``REGISTRY[name](structure, spec) -> BanditAlgorithm``. Later algorithms register themselves
with :func:`register`.
"""

from gsjax.algorithms import adaptive, async_lazy, joint_lazy, lazy, linucb
from gsjax.algorithms.base import (
    AgentParams,
    AgentSpec,
    BanditAlgorithm,
    BanditInfo,
    BanditState,
    SolveRequest,
)

__all__ = [
    "REGISTRY",
    "register",
    "make",
    "AgentParams",
    "AgentSpec",
    "BanditAlgorithm",
    "BanditInfo",
    "BanditState",
    "SolveRequest",
]

REGISTRY = {
    "linucb": linucb.make,
    "lazy": lazy.make,
    "async_lazy": async_lazy.make,
    "joint_lazy": joint_lazy.make_lazy,  # Section 5.3, factor-graph problems only
    "joint_linucb": joint_lazy.make_linucb,
    "adaptive_lazy": adaptive.make,  # Section 5.2
}


def register(name: str, factory) -> None:
    """Add an algorithm factory ``factory(structure, spec) -> BanditAlgorithm``."""
    if name in REGISTRY:
        raise ValueError(f"algorithm {name!r} is already registered")
    REGISTRY[name] = factory


def make(name: str, structure, spec) -> BanditAlgorithm:
    """Look up and build an algorithm; unknown names list the registered ones."""
    try:
        factory = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; registered: {sorted(REGISTRY)}") from None
    return factory(structure, spec)
