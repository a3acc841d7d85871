"""Run an OCO algorithm on :mod:`gsjax.runner`'s loop, ``vmap`` over budget points and seeds.

Keys (as :mod:`gsjax.runner`): seed ``i`` uses ``fold_in(root, i)`` for its GLOBAL id; init key
``fold_in(seed_key, 0)`` (targets ``fold_in(init, 0)``, algorithm ``fold_in(init, 1)``); round
``t`` ``key_t = fold_in(seed_key, t)``, with ``fold_in(key_t, j)`` for the targets (``j = 0``),
``act`` (1) and ``update`` (2).

Budget points (``OCOParams`` with a leading axis ``G``) are vmapped INSIDE a seed, with the
seed's keys unbatched: a round's random numbers are shared by every budget point (common random
numbers). The loop is :func:`gsjax.runner.drive`'s; the hindsight comparator is computed at the
end (:func:`hindsight`). For ``loss = "l1"`` the carry also holds ``z_1..z_T`` (a median needs
every target; ``T x G x n`` per seed).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gsjax.oco.algorithms import OCOAlgorithm, OCOParams, OCOState
from gsjax.oco.problem import (OCOProblem, OCOSpec, TargetState, best_fixed_l1,
                               best_fixed_squared, coord_loss, per_component, target_reset,
                               target_step)
from gsjax.runner import check_chunk, check_rounds, drive, jit, scan_blocks, seed_batch, unpad

__all__ = ["OCOTotals", "OCORecords", "OCOResult", "OCOCarry", "init_carry", "advance",
           "hindsight", "run_seed", "make_chunked", "sweep", "SweepOutput"]


class OCOTotals(NamedTuple):
    """Sums over the rounds of one run (one seed, one budget point)."""

    loss: jax.Array  # (k,) sum_t f_{t,i}(s_t), learner's loss per component
    virtual_loss: jax.Array  # (k,) sum_t f_{t,i}(w_t), the virtual iterate's loss
    movement: jax.Array  # (k,) sum_t ||s_t - s_{t-1}||_1 over the component (lambda not applied)
    switches: jax.Array  # (k,) int32 rounds in which component i deployed w_t (coins)
    changes: jax.Array  # (k,) int32 rounds in which a coordinate of component i changed value
    sum_z: jax.Array  # (n,) sum_t z_t
    sum_z2: jax.Array  # (n,) sum_t z_t^2


class OCORecords(NamedTuple):
    """Values at rounds ``record_every, 2 record_every, ..., T`` (leading axis R)."""

    cum_loss: jax.Array  # (R, k)
    cum_movement: jax.Array  # (R, k)
    cum_switches: jax.Array  # (R, k) int32
    s: jax.Array  # (R, n) deployed state
    w: jax.Array  # (R, n) virtual iterate after the round's update


class OCOResult(NamedTuple):
    """One run, reduced: regret against the exact best fixed point in hindsight."""

    loss_regret: jax.Array  # (k,) sum_t f_{t,i}(s_t) - f_{t,i}(s*)
    virtual_regret: jax.Array  # (k,) sum_t f_{t,i}(w_t) - f_{t,i}(s*)
    movement: jax.Array  # (k,) l1 movement (multiply by lambda for the movement cost)
    switches: jax.Array  # (k,) int32
    changes: jax.Array  # (k,) int32
    loss_star: jax.Array  # (k,) sum_t f_{t,i}(s*)
    s_star: jax.Array  # (n,) best fixed point in hindsight


class OCOCarry(NamedTuple):
    """What one seed carries from round to round (all but the last two fields: axis G first)."""

    state: OCOState
    targets: TargetState
    s_prev: jax.Array  # (G, n) the state played last round (s0 before round 1)
    totals: OCOTotals
    first_nonfinite: jax.Array  # () int32 first round with a NaN/inf target or loss (0: none)
    zs: jax.Array | None  # (T, G, n) the targets of every round (L1 loss), else None


def init_carry(seed_key, algo: OCOAlgorithm, spec: OCOSpec, problem: OCOProblem,
               params: OCOParams, horizon: int) -> OCOCarry:
    """The carry of one seed before round 1, at every budget point of ``params``."""
    num = params.p.shape[0]
    k_init = jax.random.fold_in(seed_key, 0)
    state = jax.vmap(algo.init, in_axes=(None, 0, None))(jax.random.fold_in(k_init, 1), params,
                                                          problem)
    zk = jnp.zeros((spec.num_components,), problem.s0.dtype)
    zi, zn = jnp.zeros(zk.shape, jnp.int32), jnp.zeros_like(problem.s0)
    lanes = (target_reset(jax.random.fold_in(k_init, 0), spec, problem), problem.s0,
             OCOTotals(zk, zk, zk, zi, zi, zn, zn))
    lanes = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (num,) + a.shape), lanes)
    zs = jnp.zeros((horizon, num, spec.n), zn.dtype) if spec.loss == "l1" else None
    return OCOCarry(state, *lanes, jnp.zeros((), jnp.int32), zs)


def _lane(algo, spec, problem, ke, ka, ku, t, state, tstate, s_prev, tot, prm):
    """Round ``t`` at one budget point: targets, act, update, totals."""
    z, tstate = target_step(ke, tstate, s_prev, t, spec, problem)
    action, state = algo.act(ka, state, prm, problem)
    state, info = algo.update(ku, state, action, z, prm, problem)
    changed = per_component(spec, (action != s_prev).astype(jnp.int32)) > 0
    tot = OCOTotals(
        loss=tot.loss + per_component(spec, coord_loss(spec, action, z, problem.weight)),
        virtual_loss=tot.virtual_loss + per_component(spec, info.virtual_loss),
        movement=tot.movement + per_component(spec, jnp.abs(action - s_prev)),
        switches=tot.switches + info.switched.astype(jnp.int32),
        changes=tot.changes + changed.astype(jnp.int32),
        sum_z=tot.sum_z + z,
        sum_z2=tot.sum_z2 + z * z,
    )
    return state, tstate, action, tot, z


def _record(carry: OCOCarry) -> OCORecords:
    tot = carry.totals
    return OCORecords(tot.loss, tot.movement, tot.switches, carry.s_prev, carry.state.w)


def advance(carry: OCOCarry, t0, seed_key, algo: OCOAlgorithm, spec: OCOSpec,
            problem: OCOProblem, params: OCOParams, num_rounds: int,
            record_every: int) -> tuple[OCOCarry, OCORecords]:
    """Rounds ``t0+1 .. t0+num_rounds`` of one seed (``t0`` may be traced); records
    ``(R, G, ...)``."""
    lanes = jax.vmap(lambda *a: _lane(algo, spec, problem, *a),
                     in_axes=(None, None, None, None, 0, 0, 0, 0, 0))

    def round_(carry: OCOCarry, t) -> OCOCarry:
        key_t = jax.random.fold_in(seed_key, t)
        ke, ka, ku = (jax.random.fold_in(key_t, j) for j in range(3))
        state, tstate, action, tot, z = lanes(ke, ka, ku, t, carry.state, carry.targets,
                                              carry.s_prev, carry.totals, params)
        bad = ~(jnp.all(jnp.isfinite(z)) & jnp.all(jnp.isfinite(tot.loss)))
        first = jnp.where((carry.first_nonfinite == 0) & bad, jnp.asarray(t, jnp.int32),
                          carry.first_nonfinite)
        zs = None if carry.zs is None else carry.zs.at[t - 1].set(z)
        return OCOCarry(state, tstate, action, tot, first, zs)

    return scan_blocks(round_, _record, carry, num_rounds, record_every, t0)


def hindsight(carry: OCOCarry, spec: OCOSpec, problem: OCOProblem, horizon: int) -> OCOResult:
    """The regret of a finished run against the exact best fixed point (one seed, ``(G, ...)``)."""
    tot = carry.totals
    if carry.zs is not None:
        s_star, loss_star = best_fixed_l1(jnp.swapaxes(carry.zs, 0, 1), problem.weight)
    else:
        s_star, loss_star = best_fixed_squared(tot.sum_z, tot.sum_z2, horizon, problem.weight)
    loss_star = per_component(spec, loss_star)
    return OCOResult(tot.loss - loss_star, tot.virtual_loss - loss_star, tot.movement,
                     tot.switches, tot.changes, loss_star, s_star)


def run_seed(seed_key, algo: OCOAlgorithm, spec: OCOSpec, problem: OCOProblem,
             params: OCOParams, horizon: int, record_every: int = 0):
    """One seed, every budget point of ``params`` (leading axis G), ``horizon`` rounds, in one
    differentiable scan: ``(OCOResult (G, ...), OCORecords (G, R, ...) or None)``;
    ``record_every = 0`` keeps no records."""
    carry = init_carry(seed_key, algo, spec, problem, params, horizon)
    carry, records = advance(carry, 0, seed_key, algo, spec, problem, params, horizon,
                             record_every or horizon)
    records = jax.tree_util.tree_map(lambda a: jnp.swapaxes(a, 0, 1), records)
    return hindsight(carry, spec, problem, horizon), (records if record_every else None)


def make_chunked(algo: OCOAlgorithm, spec: OCOSpec, horizon: int, chunk_rounds: int,
                 record_every: int, record_seeds: int):
    """Jitted ``(init_fn, chunk_fn)`` for :func:`gsjax.runner.drive`, vmapped over seeds:
    ``init_fn(keys, problem, params) -> carry``, ``chunk_fn(carry, t0, keys, problem, params)
    -> (carry, records)``, the records of the first ``record_seeds`` seeds only,
    ``(R, record_seeds, G, ...)``."""
    init = jax.vmap(lambda key, prob, prm: init_carry(key, algo, spec, prob, prm, horizon),
                    in_axes=(0, None, None))
    step = jax.vmap(
        lambda c, t0, key, prob, prm: advance(c, t0, key, algo, spec, prob, prm, chunk_rounds,
                                              record_every),
        in_axes=(0, None, 0, None, None), out_axes=(0, 1))

    def chunk(carry, t0, keys, problem, params):
        carry, records = step(carry, t0, keys, problem, params)
        return carry, jax.tree_util.tree_map(lambda a: a[:, :record_seeds], records)

    return jax.jit(init), jax.jit(chunk)


class SweepOutput(NamedTuple):
    """Host results of :func:`sweep` and its timings."""

    result: OCOResult  # host arrays (S, G, ...)
    records: OCORecords | None  # host arrays (record_seeds, G, R, ...)
    compile_seconds: float
    run_seconds: float


def sweep(root_key, seed_ids, algo: OCOAlgorithm, spec: OCOSpec, problem: OCOProblem,
          params: OCOParams, horizon: int, record_every: int = 0, record_seeds: int = 0,
          chunk_rounds: int | None = None, shard: bool | None = None, start=None,
          on_chunk=None, progress=None) -> SweepOutput:
    """Every seed of ``seed_ids`` (global ids) at every budget point; host results.

    Records are kept for the first ``record_seeds`` seeds every ``record_every`` rounds (``0``:
    none). ``chunk_rounds``, ``shard``, ``start``/``on_chunk``, ``progress`` and the
    :class:`~gsjax.runner.NonFiniteFeedback` check are :func:`gsjax.runner.drive`'s.
    """
    check_rounds(horizon, "horizon", "sweep")
    keep = bool(record_every and record_seeds)
    every = record_every or check_chunk(chunk_rounds, horizon, 1)
    chunk_rounds = check_chunk(chunk_rounds, horizon, every)
    batch = seed_batch(root_key, seed_ids, problem, shard=shard)
    init_fn, chunk_fn = make_chunked(algo, spec, horizon, chunk_rounds, every,
                                     record_seeds if keep else 0)
    carry, records, compile_s, run_s = drive(
        init_fn, chunk_fn, batch, params, (), horizon, chunk_rounds,
        lambda c: c.first_nonfinite, start=start, on_chunk=on_chunk, progress=progress)
    result = jit(jax.vmap(lambda c, prob: hindsight(c, spec, prob, horizon),
                              in_axes=(0, None)))(carry, batch.problem)
    result = unpad(jax.device_get(result), batch)
    if keep:
        rnum = min(record_seeds, batch.num)
        records = jax.tree_util.tree_map(lambda a: np.swapaxes(a[:rnum], 1, 2), records)
    return SweepOutput(result, records if keep else None, compile_s, run_s)
