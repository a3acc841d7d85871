"""Run an algorithm on a problem: one ``lax.scan`` per run, ``vmap`` over seeds.

Keys (DESIGN section 3): seed ``i`` uses ``fold_in(root, i)`` for its GLOBAL id ``i``; round
``t = 1..T`` uses ``key_t = fold_in(seed_key, t)`` and ``init`` uses ``fold_in(seed_key, 0)``.
Inside a round, ``fold_in(key_t, 0)`` draws the environment's noise, ``fold_in(key_t, 1)`` is
the ``act`` key and ``fold_in(key_t, 2)`` the ``update`` key. A seed's run is therefore the
same in a batch of 1, 4 or 1000 seeds, and the same whatever rounds are run in a call.

Per-round outputs are reduced on device: totals over the run (:class:`RunTotals`) and, every
``record_every`` rounds, the cumulative curves and the played state (:class:`Records`). With
``record_every = 1`` every round is kept: the action, and (by differencing the cumulative
arrays) the round's prediction regret, movement cost, which criteria triggered, were updated and
changed value; the coordinates that changed are where consecutive actions differ.
Round ``t``'s movement is ``move_cost * ||s_t - s_{t-1}||_1`` with ``s_0`` the problem's start,
so the first move is charged like any other. A criterion's "change" in round ``t`` means some
coordinate of its scope took a new value (``s_t != s_{t-1}``), whatever triggered it.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gsjax.algorithms.base import AgentParams, BanditAlgorithm, BanditState
from gsjax.problem import Problem, Structure, observe

__all__ = ["RunTotals", "Records", "seed_keys", "run", "make_sweep", "sweep", "SweepResult"]


class RunTotals(NamedTuple):
    """Sums over the rounds of one run."""

    prediction_regret: jax.Array  # () sum_t L(s_t) - L(s*)
    movement_cost: jax.Array  # () sum_t move_cost * ||s_t - s_{t-1}||_1
    updates: jax.Array  # (k,) int32 rounds in which criterion i was re-optimised
    changes: jax.Array  # (k,) int32 rounds in which a coordinate of N(i) changed value
    triggers: jax.Array  # (k,) int32 rounds in which criterion i's trigger condition held
    reoptimisations: jax.Array  # () int32 rounds with an LCB re-minimisation
    max_lcb_residual: jax.Array  # () largest solver residual over the run


class Records(NamedTuple):
    """Values at rounds ``record_every, 2 record_every, ..., T`` (leading axis R)."""

    cum_regret: jax.Array  # (R,) cumulative prediction regret
    cum_movement: jax.Array  # (R,) cumulative movement cost
    cum_updates: jax.Array  # (R, k) int32 cumulative updates (re-optimisations) per criterion
    cum_changes: jax.Array  # (R, k) int32 cumulative value changes per criterion
    cum_triggers: jax.Array  # (R, k) int32 cumulative trigger firings per criterion
    action: jax.Array  # (R, n) state played at the recorded round


def seed_keys(root_key: jax.Array, seed_ids: jax.Array) -> jax.Array:
    """Per-seed keys ``fold_in(root, i)`` for global seed ids (S,)."""
    return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(root_key, seed_ids)


def run(
    seed_key: jax.Array,
    algo: BanditAlgorithm,
    structure: Structure,
    problem: Problem,
    params: AgentParams,
    move_cost,
    horizon: int,
    record_every: int = 1,
) -> tuple[BanditState, RunTotals, Records]:
    """One seed, ``horizon`` rounds (static), as nested ``lax.scan``s.

    Args:
      seed_key: this seed's key (``fold_in(root, seed_id)``).
      algo: a :class:`BanditAlgorithm`.
      structure, problem: the environment.
      params: the algorithm's float hyperparameters.
      move_cost: () movement weight ``lambda`` of the regret.
      horizon: number of rounds ``T``; must be a multiple of ``record_every``.
      record_every: keep the curves every this many rounds.

    Returns:
      ``(final_state, totals, records)``.
    """
    if horizon % record_every:
        raise ValueError(f"horizon {horizon} is not a multiple of record_every {record_every}")
    k = structure.num_criteria
    dtype = problem.theta.dtype
    state = algo.init(jax.random.fold_in(seed_key, 0), params, problem)
    zero_i = jnp.zeros((k,), jnp.int32)
    totals = RunTotals(
        prediction_regret=jnp.zeros((), dtype),
        movement_cost=jnp.zeros((), dtype),
        updates=zero_i,
        changes=zero_i,
        triggers=zero_i,
        reoptimisations=jnp.zeros((), jnp.int32),
        max_lcb_residual=jnp.zeros((), dtype),
    )

    def round_(carry, t):
        state, s_prev, tot = carry
        key_t = jax.random.fold_in(seed_key, t)
        action, state = algo.act(jax.random.fold_in(key_t, 1), state, params, problem)
        fb = observe(jax.random.fold_in(key_t, 0), structure, problem, action)
        state, info = algo.update(jax.random.fold_in(key_t, 2), state, action, fb, params, problem)
        changed = action != s_prev  # (n,)
        crit_changed = jnp.any(changed[problem.scopes] & problem.scope_mask, axis=-1)
        tot = RunTotals(
            prediction_regret=tot.prediction_regret + (fb.expected_loss - problem.loss_star),
            movement_cost=tot.movement_cost + move_cost * jnp.sum(jnp.abs(action - s_prev)),
            updates=tot.updates + info.updated.astype(jnp.int32),
            changes=tot.changes + crit_changed.astype(jnp.int32),
            triggers=tot.triggers + info.triggered.astype(jnp.int32),
            reoptimisations=tot.reoptimisations + info.reoptimised.astype(jnp.int32),
            max_lcb_residual=jnp.maximum(tot.max_lcb_residual, info.lcb_residual),
        )
        return (state, action, tot), action

    def block(carry, t0):
        carry, actions = jax.lax.scan(round_, carry, t0 + jnp.arange(1, record_every + 1))
        tot = carry[2]
        rec = Records(
            cum_regret=tot.prediction_regret,
            cum_movement=tot.movement_cost,
            cum_updates=tot.updates,
            cum_changes=tot.changes,
            cum_triggers=tot.triggers,
            action=actions[-1],
        )
        return carry, rec

    starts = jnp.arange(0, horizon, record_every)
    (state, _, totals), records = jax.lax.scan(block, (state, problem.s0, totals), starts)
    return state, totals, records


class SweepResult(NamedTuple):
    """Host copies of a sweep's outputs (leading axis: seeds) and its timings."""

    totals: RunTotals
    records: Records
    compile_seconds: float
    run_seconds: float


def make_sweep(
    algo: BanditAlgorithm,
    structure: Structure,
    horizon: int,
    record_every: int = 1,
    problem_per_seed: bool = False,
):
    """``jit(vmap(run))`` over seed keys (and over problems when drawn per seed).

    The returned function is ``f(keys (S,), problem, params, move_cost) -> (totals, records)``.
    Called with a single key, XLA compiles a size-1 ``vmap`` whose float results may differ in
    the last bits from a larger batch's; :func:`sweep` pads that case.
    """

    def one(key, problem, params, move_cost):
        _, totals, records = run(
            key, algo, structure, problem, params, move_cost, horizon, record_every
        )
        return totals, records

    in_axes = (0, 0 if problem_per_seed else None, None, None)
    return jax.jit(jax.vmap(one, in_axes=in_axes))


def sweep(
    root_key: jax.Array,
    seed_ids,
    algo: BanditAlgorithm,
    structure: Structure,
    problem: Problem,
    params: AgentParams,
    move_cost,
    horizon: int,
    record_every: int = 1,
    problem_per_seed: bool = False,
) -> SweepResult:
    """Compile, run and time a seed sweep; compile time is reported apart from run time.

    A single seed is run as a batch of two (the seed twice) and the copy dropped: XLA compiles
    a size-1 ``vmap`` differently, and its float results could differ from the same seed's row
    in a larger batch in the last bits.
    """
    seed_ids = jnp.asarray(seed_ids, jnp.uint32)
    num = seed_ids.shape[0]
    if num == 1:
        seed_ids = jnp.concatenate([seed_ids, seed_ids])
        if problem_per_seed:
            problem = jax.tree_util.tree_map(lambda a: jnp.concatenate([a, a]), problem)
    keys = seed_keys(root_key, seed_ids)
    fn = make_sweep(algo, structure, horizon, record_every, problem_per_seed)
    move_cost = jnp.asarray(move_cost, problem.theta.dtype)
    t0 = time.perf_counter()
    compiled = fn.lower(keys, problem, params, move_cost).compile()
    t1 = time.perf_counter()
    totals, records = compiled(keys, problem, params, move_cost)
    totals, records = jax.block_until_ready((totals, records))
    t2 = time.perf_counter()
    totals, records = jax.device_get((totals, records))
    if num == 1:
        totals, records = jax.tree_util.tree_map(lambda a: a[:1], (totals, records))
    return SweepResult(totals, records, compile_seconds=t1 - t0, run_seconds=t2 - t1)
