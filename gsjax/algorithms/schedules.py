r"""When to re-minimise the LCB, and over which coordinates: the schedules of DESIGN section 2.

A schedule turns the round's trigger condition (criterion ``i`` triggers when
``log det V_i - log det V_i(ref) > log c``) into a :class:`Decision`: whether to re-minimise,
the coordinates left free, the criteria that count an update, and the new references.

* :func:`every_round` -- standard LinUCB: every round, all coordinates, every criterion updated
  and every reference reset.
* :func:`doubling` -- LazyGraphLinUCB (Section 4): when ANY criterion triggers, all
  coordinates, every criterion updated; ``reference = "global"`` resets every reference,
  ``"own"`` only the triggering criteria's (Lemma 2 counts doublings so).
* :func:`per_criterion` -- Async-LazyGraphLinUCB (Section 5.1): the triggering set ``A_t``
  re-minimises the coordinates in ``union_{i in A_t} N(i)``, only ``A_t`` updated and reset.

:func:`forced` adds a round in which everything is re-minimised whatever the trigger (the
refinement round of Section 5.2). An estimator with one joint determinant (Section 5.3) is a
schedule over one "criterion".

``decide(L, fired, logdet, logdet_ref, union, n, own=None, per=None)``: ``L`` is the kernel's
:class:`~gsjax.algorithms.decisions.Logic` (hard booleans or soft gates: one schedule serves
both), ``fired`` its truth values (k,) of the trigger, ``logdet`` and ``logdet_ref`` are (k,),
``union(criteria) -> (n,)`` the OR of the marked criteria's scopes (the estimator's: the
problem's scopes, or a learned graph's; called only by the schedules that need it), ``n`` the
number of coordinates, ``own`` the reference reading as a traced value
(``AgentParams.own_reference``; ``None``: the schedule's static ``reference``) and ``per``
whether the lazy kinds decide per criterion (async) as a traced value
(``AgentParams.per_criterion``; ``None``: the schedule's own kind). With both traced,
:func:`doubling` and :func:`per_criterion` trace to the same program (:func:`_lazy_traced`),
so ``lazy`` and ``async_lazy`` compile once.
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
        del logdet_ref, union, own, per
        k = fired.shape[0]
        return Decision(L.true(()), L.true((n,)), L.true((k,)), logdet)

    return Schedule("every_round", True, decide)


def doubling(reference: str = "global") -> Schedule:
    if reference not in ("global", "own"):
        raise ValueError(f"unknown reference {reference!r}; allowed: ('global', 'own')")

    def decide(L, fired, logdet, logdet_ref, union, n: int, own=None, per=None) -> Decision:
        if per is not None:
            own = float(reference == "own") if own is None else own
            return _lazy_traced(L, fired, logdet, logdet_ref, union, n, own, per)
        del union
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
        del n, own
        return Decision(L.any(fired), union(fired), fired, L.select(fired, logdet, logdet_ref))

    return Schedule("per_criterion", False, decide)


def _lazy_traced(L, fired, logdet, logdet_ref, union, n: int, own, per) -> Decision:
    """:func:`doubling` (``per == 0``; reading ``own``) or :func:`per_criterion` (``per > 0``),
    chosen by traced values: the same decision, selected (the union of the fired scopes is
    computed by both). The schedules come here whenever ``per`` is given; their programs
    coincide when ``own`` is traced too (:func:`gsjax.algorithms.base.with_reference` sets
    both), else a static reading is folded in."""
    reopt = L.any(fired)
    every = jnp.broadcast_to(reopt, fired.shape)
    async_ = per > 0
    updated = jnp.where(async_, fired, every)
    reset = jnp.where(async_ | (own > 0), fired, every)
    free = jnp.where(async_, union(fired), jnp.broadcast_to(reopt, (n,)))
    return Decision(reopt, free, updated, L.select(reset, logdet, logdet_ref))


def forced(L, decision: Decision, flag, logdet) -> Decision:
    """``decision``, except that when ``flag`` (a bool) holds every coordinate is free, every
    criterion updated and every reference reset."""
    return Decision(L.force(decision.reoptimise, flag), L.force(decision.free, flag),
                    L.force(decision.updated, flag),
                    jnp.where(flag, logdet, decision.logdet_ref))


#: The schedules of the per-criterion algorithms, by name (``reference``: doubling only).
BY_KIND = {
    "linucb": lambda reference="global": every_round(),
    "lazy": doubling,
    "async_lazy": lambda reference="global": per_criterion(),
}
