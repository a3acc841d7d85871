r"""When to re-minimise the LCB, and over which coordinates (DESIGN section 2).

A schedule turns the round's trigger into a :class:`Decision`:

* :func:`every_round` -- LinUCB: every round, all coordinates, every criterion updated and reset.
* :func:`doubling` -- LazyGraphLinUCB (Section 4): when ANY criterion fires, all coordinates,
  every criterion updated; ``reference = "global"`` resets every reference, ``"own"`` the
  firing criteria's.
* :func:`per_criterion` -- Async-LazyGraphLinUCB (Section 5.1): the firing criteria re-minimise
  the union of their scopes; only they are updated and reset.
* :func:`forced` -- everything, whatever the trigger (Section 5.2's refinement round).

``decide(L, fired, logdet, logdet_ref, union, n, own=None, per=None)``: ``L`` a
:class:`~gsjax.algorithms.decisions.Logic` (hard or soft), ``fired`` (k,) truth values,
``union(criteria) -> (n,)`` the OR of their scopes, ``own``/``per``: ``AgentParams``'
``own_reference``/``per_criterion`` (traced; ``None``: static). With both traced,
:func:`doubling` and :func:`per_criterion` trace to one program.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["Decision", "Schedule", "every_round", "doubling", "per_criterion", "forced",
           "BY_KIND"]


class Decision(NamedTuple):
    """What a schedule decided after a round's update (truth values of the kernel's Logic)."""

    reoptimise: jax.Array  # () re-minimise
    free: jax.Array  # (n,) the coordinates the solver may move (soft: the policy's gate)
    updated: jax.Array  # (k,) criteria counting an update (the paper's "moves")
    logdet_ref: jax.Array  # (k,) the references after this round


class Schedule(NamedTuple):
    """``decide`` and whether it re-minimises every round (``always_solves``: no ``cond``)."""

    name: str
    always_solves: bool
    decide: Callable[..., Decision]


def every_round() -> Schedule:
    def decide(L, fired, logdet, logdet_ref, union, n: int, own=None, per=None) -> Decision:
        return Decision(L.true(()), L.true((n,)), L.true((fired.shape[0],)), logdet)

    return Schedule("every_round", True, decide)


def doubling(reference: str = "global") -> Schedule:
    if reference not in ("global", "own"):
        raise ValueError(f"unknown reference {reference!r}; allowed: ('global', 'own')")

    def decide(L, fired, logdet, logdet_ref, union, n: int, own=None, per=None) -> Decision:
        if per is not None:
            own = float(reference == "own") if own is None else own
            return _lazy_traced(L, fired, logdet, logdet_ref, union, n, own, per)
        reopt = L.any(fired)
        updated = jnp.broadcast_to(reopt, fired.shape)
        if own is None:
            reset = updated if reference == "global" else fired
        else:
            reset = jnp.where(own > 0, fired, updated)
        return Decision(reopt, jnp.broadcast_to(reopt, (n,)), updated,
                        L.select(reset, logdet, logdet_ref))

    return Schedule(f"doubling_{reference}", False, decide)


def per_criterion() -> Schedule:
    def decide(L, fired, logdet, logdet_ref, union, n: int, own=None, per=None) -> Decision:
        if per is not None:  # the reading matters only where per is 0 (global lazy)
            return _lazy_traced(L, fired, logdet, logdet_ref, union, n,
                                0.0 if own is None else own, per)
        return Decision(L.any(fired), union(fired), fired, L.select(fired, logdet, logdet_ref))

    return Schedule("per_criterion", False, decide)


def _lazy_traced(L, fired, logdet, logdet_ref, union, n: int, own, per) -> Decision:
    """:func:`doubling` (``per == 0``; reading ``own``) or :func:`per_criterion` (``per > 0``),
    selected by traced values (both compute the union of the fired scopes)."""
    reopt = L.any(fired)
    every = jnp.broadcast_to(reopt, fired.shape)
    async_ = per > 0
    updated = jnp.where(async_, fired, every)
    reset = jnp.where(async_ | (own > 0), fired, every)
    free = jnp.where(async_, union(fired), jnp.broadcast_to(reopt, (n,)))
    return Decision(reopt, free, updated, L.select(reset, logdet, logdet_ref))


def forced(L, decision: Decision, flag, logdet) -> Decision:
    """``decision``, or, where ``flag`` holds, everything free, updated and reset."""
    return Decision(*(L.force(x, flag) for x in decision[:3]),
                    jnp.where(flag, logdet, decision.logdet_ref))


#: The schedules of the per-criterion algorithms, by name (``reference``: doubling only).
BY_KIND = {
    "linucb": lambda reference="global": every_round(),
    "lazy": doubling,
    "async_lazy": lambda reference="global": per_criterion(),
}
