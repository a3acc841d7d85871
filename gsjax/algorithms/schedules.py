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

``decide(triggered, logdet, logdet_ref, coords_of, n)``: ``triggered``, ``logdet`` and
``logdet_ref`` are (k,); ``coords_of(criteria) -> (n,) bool`` is the union of the marked
criteria's scopes (the estimator's: the problem's scopes, or a learned graph's; called only by
the schedules that need it), ``n`` the number of coordinates. Every output is computed with ``jnp`` on these arrays, so a schedule is traced once
into whatever kernel uses it.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["Decision", "Schedule", "every_round", "doubling", "per_criterion", "forced",
           "BY_KIND"]


class Decision(NamedTuple):
    """What a schedule decided after a round's update."""

    reoptimise: jax.Array  # () bool
    free: jax.Array  # (n,) bool, the coordinates the solver may move
    updated: jax.Array  # (k,) bool, criteria counting an update (the paper's "moves")
    logdet_ref: jax.Array  # (k,) the references after this round


class Schedule(NamedTuple):
    """``decide`` and whether it re-minimises every round (``always_solves``: no ``cond``)."""

    name: str
    always_solves: bool
    decide: Callable[..., Decision]


def every_round() -> Schedule:
    def decide(triggered, logdet, logdet_ref, coords_of, n: int) -> Decision:
        del logdet_ref, coords_of
        k = triggered.shape[0]
        return Decision(jnp.ones((), bool), jnp.ones((n,), bool), jnp.ones((k,), bool), logdet)

    return Schedule("every_round", True, decide)


def doubling(reference: str = "global") -> Schedule:
    if reference not in ("global", "own"):
        raise ValueError(f"unknown reference {reference!r}; allowed: ('global', 'own')")

    def decide(triggered, logdet, logdet_ref, coords_of, n: int) -> Decision:
        del coords_of
        reopt = jnp.any(triggered)
        updated = jnp.broadcast_to(reopt, triggered.shape)
        reset = updated if reference == "global" else triggered
        return Decision(reopt, jnp.ones((n,), bool), updated, jnp.where(reset, logdet, logdet_ref))

    return Schedule(f"doubling_{reference}", False, decide)


def per_criterion() -> Schedule:
    def decide(triggered, logdet, logdet_ref, coords_of, n: int) -> Decision:
        del n
        return Decision(jnp.any(triggered), coords_of(triggered), triggered,
                        jnp.where(triggered, logdet, logdet_ref))

    return Schedule("per_criterion", False, decide)


def forced(decision: Decision, flag, logdet) -> Decision:
    """``decision``, except that when ``flag`` holds every coordinate is free, every criterion
    updated and every reference reset."""
    return Decision(decision.reoptimise | flag, decision.free | flag, decision.updated | flag,
                    jnp.where(flag, logdet, decision.logdet_ref))


#: The schedules of the per-criterion algorithms, by name (``reference``: doubling only).
BY_KIND = {
    "linucb": lambda reference="global": every_round(),
    "lazy": doubling,
    "async_lazy": lambda reference="global": per_criterion(),
}
