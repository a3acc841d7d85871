"""Run an OCO algorithm: ``lax.scan`` over rounds, ``vmap`` over budget points and seeds.

Keys (DESIGN section 3, as :mod:`gsjax.runner`): seed ``i`` uses ``fold_in(root, i)`` for its
GLOBAL id; its init key is ``fold_in(seed_key, 0)`` (target process ``fold_in(init, 0)``,
algorithm ``fold_in(init, 1)``); round ``t = 1..T`` uses ``key_t = fold_in(seed_key, t)``, with
``fold_in(key_t, 0)`` for the targets, ``fold_in(key_t, 1)`` for ``act`` (the coins) and
``fold_in(key_t, 2)`` for ``update``. A seed's run is therefore the same in any batch of seeds.

Budget points (a grid of ``OCOParams`` with a leading axis ``G``) are vmapped INSIDE a seed,
with the seed's keys unbatched: the random numbers of a round are drawn once per seed and shared
by every budget point (common random numbers: the coin ``u_t < p`` of a larger ``p`` fires
whenever a smaller one's does, and oblivious targets are identical).

Per-round outputs are reduced on device (:class:`OCOTotals`); the hindsight comparator is
computed on device at the end of the scan (:class:`OCOResult`). The L1 comparator needs every
target (a median), so for ``loss = "l1"`` the scan also outputs ``z_t`` and seeds are run in
chunks whose targets fit ``target_bytes``.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gsjax.oco.algorithms import OCOAlgorithm, OCOParams
from gsjax.oco.problem import (
    OCOProblem,
    OCOSpec,
    best_fixed_l1,
    best_fixed_squared,
    coord_loss,
    per_component,
    target_reset,
    target_step,
)

__all__ = ["OCOTotals", "OCORecords", "OCOResult", "run_seed", "make_sweep", "sweep",
           "SweepOutput"]


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


def _zero_totals(spec: OCOSpec, dtype) -> OCOTotals:
    zk = jnp.zeros((spec.num_components,), dtype)
    zi = jnp.zeros((spec.num_components,), jnp.int32)
    zn = jnp.zeros((spec.n,), dtype)
    return OCOTotals(zk, zk, zk, zi, zi, zn, zn)


def run_seed(seed_key, algo: OCOAlgorithm, spec: OCOSpec, problem: OCOProblem,
             params: OCOParams, horizon: int, record_every: int = 0):
    """One seed, every budget point of ``params`` (leading axis G), ``horizon`` rounds.

    Returns ``(OCOResult (G, ...), OCORecords (G, R, ...) or None)``; ``record_every = 0``
    keeps no records.
    """
    num = params.p.shape[0]
    dtype = problem.s0.dtype
    k_init = jax.random.fold_in(seed_key, 0)
    state = jax.vmap(algo.init, in_axes=(None, 0, None))(jax.random.fold_in(k_init, 1), params,
                                                          problem)
    tstate = target_reset(jax.random.fold_in(k_init, 0), spec, problem)
    tstate = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (num,) + a.shape), tstate)
    s_prev = jnp.broadcast_to(problem.s0, (num, spec.n))
    tot = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (num,) + a.shape),
                                 _zero_totals(spec, dtype))
    keep_z = spec.loss == "l1"

    def lane(ke, ka, ku, t, state, tstate, s_prev, tot, prm):
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
        return (state, tstate, action, tot), z

    def round_(carry, t):
        key_t = jax.random.fold_in(seed_key, t)
        ke, ka, ku = (jax.random.fold_in(key_t, j) for j in range(3))
        carry, z = jax.vmap(lane, in_axes=(None, None, None, None, 0, 0, 0, 0, 0))(
            ke, ka, ku, t, *carry, params)
        return carry, (z if keep_z else None)

    carry = (state, tstate, s_prev, tot)
    every = record_every if record_every else horizon
    if horizon % every:
        raise ValueError(f"horizon {horizon} is not a multiple of record_every {every}")

    def block(carry, t0):
        carry, zs = jax.lax.scan(round_, carry, t0 + jnp.arange(1, every + 1, dtype=jnp.int32))
        st, _, s_played, tt = carry
        rec = OCORecords(tt.loss, tt.movement, tt.switches, s_played, st.w) if record_every else None
        return carry, (rec, zs)

    carry, (records, zs) = jax.lax.scan(block, carry,
                                        jnp.arange(0, horizon, every, dtype=jnp.int32))
    tot = carry[3]
    if keep_z:
        zs = jnp.swapaxes(zs.reshape((horizon,) + zs.shape[2:]), 0, 1)  # (G, T, n)
        s_star, loss_star = best_fixed_l1(zs, problem.weight)
    else:
        s_star, loss_star = best_fixed_squared(tot.sum_z, tot.sum_z2, horizon, problem.weight)
    loss_star = per_component(spec, loss_star)
    result = OCOResult(
        loss_regret=tot.loss - loss_star,
        virtual_regret=tot.virtual_loss - loss_star,
        movement=tot.movement,
        switches=tot.switches,
        changes=tot.changes,
        loss_star=loss_star,
        s_star=s_star,
    )
    if records is not None:
        records = jax.tree_util.tree_map(lambda a: jnp.swapaxes(a, 0, 1), records)  # (G, R, ...)
    return result, records


def make_sweep(algo: OCOAlgorithm, spec: OCOSpec, horizon: int, record_every: int = 0):
    """``jit(vmap(run_seed))``: ``f(seed_keys (S,), problem, params) -> (result, records)``
    with outputs ``(S, G, ...)``."""

    def one(key, problem, params):
        return run_seed(key, algo, spec, problem, params, horizon, record_every)

    return jax.jit(jax.vmap(one, in_axes=(0, None, None)))


class SweepOutput(NamedTuple):
    result: OCOResult  # host arrays (S, G, ...)
    records: OCORecords | None  # host arrays (record_seeds, G, R, ...)
    compile_seconds: float
    run_seconds: float


def sweep(root_key, seed_ids, algo: OCOAlgorithm, spec: OCOSpec, problem: OCOProblem,
          params: OCOParams, horizon: int, record_every: int = 0, record_seeds: int = 0,
          target_bytes: float = 2.0e8) -> SweepOutput:
    """Every seed of ``seed_ids`` (global ids) at every budget point; host results.

    Seeds run in chunks of one compiled size (the last chunk padded with copies of the first
    seed, dropped afterwards); the L1 loss keeps ``G x T x n`` targets per seed on device, so
    its chunks hold at most ``target_bytes`` of them. Records (for figures) come from a second,
    small sweep over the first ``record_seeds`` seeds; its keys are the same, so its runs are
    the same runs.
    """
    seed_ids = np.asarray(seed_ids, np.uint32)
    num = len(seed_ids)
    num_points = int(params.p.shape[0])
    chunk = num
    if spec.loss == "l1":
        per_seed = num_points * horizon * spec.n * problem.s0.dtype.itemsize
        chunk = max(1, min(num, int(target_bytes // max(per_seed, 1))))
    chunk = max(chunk, 2)  # a size-1 vmap compiles differently (see gsjax.runner.sweep)
    # Small sweeps keep every seed's records in the one compiled program (no second compile).
    rec_bytes = (num * num_points * (horizon // max(record_every, 1))
                 * (3 * spec.num_components + 2 * spec.n) * 8)
    inline = bool(record_seeds and record_every and chunk >= num and rec_bytes <= 5e7)
    fn = make_sweep(algo, spec, horizon, record_every if inline else 0)
    keys_all = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(root_key, jnp.asarray(seed_ids))
    t0 = time.perf_counter()
    first = _pad(keys_all[:chunk], chunk)
    compiled = fn.lower(first, problem, params).compile()
    t1 = time.perf_counter()
    pieces = []
    records = None
    for begin in range(0, num, chunk):
        keys = _pad(keys_all[begin:begin + chunk], chunk)
        res, rec = compiled(keys, problem, params)
        res = jax.device_get(jax.block_until_ready(res))
        pieces.append(jax.tree_util.tree_map(lambda a: a[: min(chunk, num - begin)], res))
        if inline:
            rnum = min(record_seeds, num)
            records = jax.tree_util.tree_map(lambda a: np.asarray(a)[:rnum], jax.device_get(rec))
    result = jax.tree_util.tree_map(lambda *xs: np.concatenate(xs, axis=0), *pieces)
    t2 = time.perf_counter()
    if record_seeds and record_every and not inline:
        rnum = min(record_seeds, num)
        rfn = make_sweep(algo, spec, horizon, record_every)
        _, records = rfn(_pad(keys_all[:rnum], max(rnum, 2)), problem, params)
        records = jax.tree_util.tree_map(lambda a: np.asarray(a)[:rnum], jax.device_get(records))
    return SweepOutput(result, records, t1 - t0, t2 - t1)


def _pad(keys, size: int):
    if keys.shape[0] == size:
        return keys
    fill = jnp.repeat(keys[:1], size - keys.shape[0], axis=0)
    return jnp.concatenate([keys, fill])
