"""Run an algorithm on a problem: one ``lax.scan`` per run, ``vmap`` over seeds.

Keys (DESIGN section 3): seed ``i`` uses ``fold_in(root, i)`` for its GLOBAL id ``i``; ``init``
uses ``fold_in(seed_key, 0)``, round ``t = 1..T`` ``key_t = fold_in(seed_key, t)``. The
environment reads :func:`gsjax.problem.round_draws` (Philox normals keyed by the seed key with
the round in the counter; ``fold_in(key_t, 0)`` for ``jax.random``); ``fold_in(key_t, 1)`` is
the ``act`` key, ``fold_in(key_t, 2)`` the ``update`` key. A seed's run is thus the same in any
batch of seeds and whatever rounds a call runs. Programs are compiled with
:func:`gsjax.xla.compiler_options` (:func:`gsjax.xla.jit`, re-exported here, and :func:`drive`).

Outputs are reduced on device: totals over the run (:class:`RunTotals`) and, every
``record_every`` rounds, cumulative curves and the played state (:class:`Records`). Round
``t``'s movement is ``move_cost * ||s_t - s_{t-1}||_1`` (``s_0`` the problem's start); a
criterion "changes" when a coordinate of its scope takes a new value, whatever triggered it.

The round is written once (:func:`_round_fn`): per seed (under ``vmap`` the reference form,
:func:`advance`) and for a batch that solves only the seeds that re-optimise
(:func:`advance_compact`). The loop is shared with :mod:`gsjax.oco.runner`.
"""

from __future__ import annotations

import collections
import functools
import os
import time
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from gsjax import distributed
from gsjax.xla import COMPILER_OPTIONS, compiler_options, jit
from gsjax.algorithms.base import AgentParams, BanditAlgorithm, BanditState
from gsjax.problem import (Draws, Problem, Structure, at_scopes, observe, round_draws,
                           seed_axes, seed_rows)

__all__ = [
    "RunTotals", "Records", "Carry", "SweepResult", "SeedBatch", "NonFiniteFeedback",
    "seed_keys", "init_carry", "carry_record", "advance", "advance_compact", "run", "make_chunked",
    "make_sweep", "sweep", "auto_chunk", "check_rounds", "check_chunk", "scan_blocks",
    "seed_batch", "unpad", "drive", "jit", "compiler_options", "COMPILER_OPTIONS",
    "default_cache_dir", "use_compilation_cache",
]


def default_cache_dir() -> Path | None:
    """Where the command line keeps compiled programs: ``$GSJAX_CACHE_DIR`` (``off``, ``0`` or
    empty: no cache), else ``$XDG_CACHE_HOME/gsjax/xla`` (``~/.cache/gsjax/xla``)."""
    env = os.environ.get("GSJAX_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "0", "off", "none") else Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gsjax" / "xla"


def use_compilation_cache(directory) -> str | None:
    """Turn on JAX's persistent compilation cache in ``directory`` (created) and return its
    path; ``None`` leaves the cache as it is, and a cache JAX already has is kept."""
    if directory is None:
        return None
    if current := jax.config.jax_compilation_cache_dir:
        return current
    path = Path(directory).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    # every program: which ones are cached must not depend on the machine's load
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return str(path)


class RunTotals(NamedTuple):
    """Sums over the rounds of one run."""

    prediction_regret: jax.Array  # () sum_t L(s_t) - L(s*)
    movement_cost: jax.Array  # () sum_t move_cost * ||s_t - s_{t-1}||_1
    updates: jax.Array  # (k,) int32 rounds in which criterion i was re-optimised
    changes: jax.Array  # (k,) int32 rounds in which a coordinate of N(i) changed value
    triggers: jax.Array  # (k,) int32 rounds in which criterion i's trigger condition held
    reoptimisations: jax.Array  # () int32 rounds with an LCB re-minimisation
    max_lcb_residual: jax.Array  # () largest solver residual over the run
    first_nonfinite: jax.Array  # () int32 first round with NaN/inf feedback (0: none)


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


def _accumulate(structure: Structure, tot: RunTotals, problem: Problem, action, s_prev, fb, info,
                move_cost, t) -> RunTotals:
    """Round ``t``'s contribution to the totals of one seed."""
    bad = ~(jnp.all(jnp.isfinite(fb.y)) & jnp.isfinite(fb.expected_loss))
    changed = action != s_prev  # (n,)
    crit_changed = jnp.any(at_scopes(structure, changed, problem.scopes) & problem.scope_mask, axis=-1)
    return RunTotals(
        prediction_regret=tot.prediction_regret + (fb.expected_loss - problem.loss_star),
        movement_cost=tot.movement_cost + move_cost * jnp.sum(jnp.abs(action - s_prev)),
        updates=tot.updates + info.updated.astype(tot.updates.dtype),
        changes=tot.changes + crit_changed.astype(jnp.int32),
        triggers=tot.triggers + info.triggered.astype(jnp.int32),
        reoptimisations=tot.reoptimisations + info.reoptimised.astype(tot.reoptimisations.dtype),
        max_lcb_residual=jnp.maximum(tot.max_lcb_residual, info.lcb_residual),
        first_nonfinite=jnp.where((tot.first_nonfinite == 0) & bad, jnp.asarray(t, jnp.int32),
                                  tot.first_nonfinite),
    )


class Carry(NamedTuple):
    """What a run carries from round to round (per seed, or with leading batch axes)."""

    state: BanditState
    s_prev: jax.Array  # (n,) the state played last round (s0 before round 1)
    totals: RunTotals


def check_rounds(value, name: str, where: str) -> int:
    """A count of rounds: an integer >= 1 (``ValueError`` naming ``where: name`` otherwise)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < 1:
        raise ValueError(f"{where}: {name}: must be an integer >= 1 (a number of rounds), "
                         f"got {value!r}")
    return int(value)


def scan_blocks(round_fn, record_fn, carry, num_rounds: int, record_every: int, t0=0,
                checkpoint: bool = False):
    """Rounds ``t0+1 .. t0+num_rounds`` (``t0`` may be traced): a scan over record blocks of
    a scan over rounds. ``round_fn(carry, t) -> carry``; ``record_fn(carry)`` is kept at the end
    of every block of ``record_every`` rounds. ``checkpoint``: each block is
    ``jax.checkpoint``-ed (reverse mode keeps block-boundary carries plus one block)."""
    check_rounds(num_rounds, "num_rounds", "runner")
    check_rounds(record_every, "record_every", "runner")
    if num_rounds % record_every:
        raise ValueError(f"horizon {num_rounds} is not a multiple of record_every {record_every}")

    def no_output(carry, t):
        return round_fn(carry, t), None

    def block(carry, start):
        carry, _ = jax.lax.scan(no_output, carry, start + jnp.arange(1, record_every + 1))
        return carry, record_fn(carry)

    if checkpoint:
        block = jax.checkpoint(block)
    return jax.lax.scan(block, carry, t0 + jnp.arange(0, num_rounds, record_every))


def carry_record(carry: Carry) -> Records:
    """A bandit record: the cumulative totals and the state played (the carry's ``s_prev``)."""
    tot = carry.totals
    return Records(cum_regret=tot.prediction_regret, cum_movement=tot.movement_cost,
                   cum_updates=tot.updates, cum_changes=tot.changes, cum_triggers=tot.triggers,
                   action=carry.s_prev)


def init_carry(seed_key, algo: BanditAlgorithm, structure: Structure, problem: Problem,
               params: AgentParams) -> Carry:
    """The carry before round 1 of one seed: ``init`` with key ``fold_in(seed_key, 0)`` (a
    relaxed algorithm's update counts are probabilities, so floats)."""
    state = algo.init(jax.random.fold_in(seed_key, 0), params, problem)
    dtype, k = problem.dtype, structure.num_criteria
    counts = dtype if algo.relaxed else jnp.int32
    zero_i = jnp.zeros((k,), jnp.int32)
    totals = RunTotals(
        prediction_regret=jnp.zeros((), dtype), movement_cost=jnp.zeros((), dtype),
        updates=jnp.zeros((k,), counts), changes=zero_i, triggers=zero_i,
        reoptimisations=jnp.zeros((), counts), max_lcb_residual=jnp.zeros((), dtype),
        first_nonfinite=jnp.zeros((), jnp.int32),
    )
    return Carry(state, problem.s0, totals)


#: Up to this many seeds a device (float32 ranks exact), a round whose requests fit one buffer
#: finds them with ``top_k``; beyond, ``jnp.nonzero``.
TOP_K_SEEDS = 2**24


def _solve_compacted(solve, keys, states, requests, params, problem, pax, buffer: int,
                     exact: bool = False):
    """``solve`` (vmapped) on the seeds whose request asks for it, gathered ``buffer`` at a time
    (``top_k`` when they fit one buffer, else ``jnp.nonzero``) and scattered back, so a round
    costs what its triggers cost. ``exact``: the residual is 0, not scattered."""
    mask = requests.reoptimise
    num = mask.shape[0]
    num_chunks = (jnp.sum(mask.astype(jnp.int32)) + buffer - 1) // buffer
    padded = -(-num // buffer) * buffer

    def all_requests():
        return jnp.nonzero(mask, size=padded, fill_value=num)[0].astype(jnp.int32)

    def one_buffer():
        rank = (num - jnp.arange(num, dtype=jnp.int32)).astype(jnp.float32)  # > 0
        top, idx = jax.lax.top_k(jnp.where(mask, rank, 0.0), buffer)
        return jnp.where(top > 0, idx, num)

    ranked = num <= TOP_K_SEEDS  # float32 ranks exact: a round within one buffer uses top_k
    if ranked:
        fits = num_chunks <= 1
        idx_all = jax.lax.cond(fits, lambda: jnp.zeros((padded,), jnp.int32), all_requests)
    else:
        idx_all = all_requests()

    def chunk_seeds(c):  # seed ids of chunk c, padded with num
        nth = lambda: jax.lax.dynamic_slice(idx_all, (c * buffer,), (buffer,))  # noqa: E731
        return jax.lax.cond(fits, one_buffer, nth) if ranked else nth()

    def take(tree, idx):
        return jax.tree_util.tree_map(lambda a: a[idx], tree)

    def body(c, carry):
        s_out, r_out = carry
        idx = chunk_seeds(c)
        gidx = jnp.minimum(idx, num - 1)  # padding entries read a real row, then are dropped
        prob = problem if pax is None else seed_rows(problem, gidx)
        s_b, r_b = solve(keys[gidx], take(states, gidx), take(requests, gidx), params, prob)
        s_out = s_out.at[idx].set(s_b, mode="drop")
        return s_out, r_out if exact else r_out.at[idx].set(r_b, mode="drop")

    return jax.lax.fori_loop(0, num_chunks, body, (states.s, jnp.zeros((num,), states.s.dtype)))


def _round_fn(algo: BanditAlgorithm, structure: Structure, problem, params, move_cost, keys,
              buffer: int | None = None, pax=None):
    """The round ``(carry, t) -> carry`` of one seed (``buffer=None``) or of the seeds ``keys``
    stepped together (problem axis ``pax``), solving those that ask (:func:`_solve_compacted`)."""
    if buffer is None:
        lift = lambda f, *axes: f  # noqa: E731
        update = algo.update
    else:
        lift = lambda f, *axes: jax.vmap(f, in_axes=axes)  # noqa: E731
        prepare = lift(algo.prepare, 0, 0, 0, 0, None, pax)
        solve = lift(algo.solve, 0, 0, 0, None, pax)
        buffer = min(buffer, keys.shape[0])

        def update(key, states, action, fb, params, problem):
            states, requests, info = prepare(key, states, action, fb, params, problem)
            if algo.always_solves:
                s_new, resid = solve(key, states, requests, params, problem)
            else:
                s_new, resid = _solve_compacted(solve, key, states, requests, params, problem,
                                                pax, buffer, algo.exact)
            return states._replace(s=s_new), info._replace(lcb_residual=resid)

    fold = lift(jax.random.fold_in, 0, None)
    draws = lift(round_draws, 0, None)
    act = lift(algo.act, 0, 0, None, pax)
    # the round counter stays one scalar for the batch (a batched normals loop costs more)
    see = lift(lambda d, prob, s: observe(d, structure, prob, s), Draws(0, None, 0), pax, 0)
    accumulate = lift(lambda *a: _accumulate(structure, *a), 0, pax, 0, 0, 0, 0, None, None)

    def round_(carry: Carry, t) -> Carry:
        state, s_prev, tot = carry
        key_t = fold(keys, t)
        action, state = act(fold(key_t, 1), state, params, problem)
        fb = see(draws(keys, t)._replace(round=jnp.asarray(t, jnp.uint32)), problem, action)
        state, info = update(fold(key_t, 2), state, action, fb, params, problem)
        tot = accumulate(tot, problem, action, s_prev, fb, info, move_cost, t)
        return Carry(state, action, tot)

    return round_


def advance(carry: Carry, t0, seed_key: jax.Array, algo: BanditAlgorithm, structure: Structure,
            problem: Problem, params: AgentParams, move_cost, num_rounds: int,
            record_every: int = 1, checkpoint: bool = False) -> tuple[Carry, Records]:
    """Rounds ``t0+1 .. t0+num_rounds`` of one seed (``t0`` may be traced); ``checkpoint``:
    rematerialise each record block in reverse mode (:func:`scan_blocks`)."""
    round_ = _round_fn(algo, structure, problem, params, move_cost, seed_key)
    return scan_blocks(round_, carry_record, carry, num_rounds, record_every, t0, checkpoint)


def advance_compact(carry: Carry, t0, seed_keys_: jax.Array, algo: BanditAlgorithm,
                    structure: Structure, problem: Problem, params: AgentParams, move_cost,
                    num_rounds: int, record_every: int = 1, buffer: int = 8,
                    problem_per_seed: bool = False) -> tuple[Carry, Records]:
    """Rounds ``t0+1 .. t0+num_rounds`` of a batch of seeds, solving only those that trigger:
    the results of ``vmap(advance)`` (not reverse-mode differentiable); records round-major,
    ``(R, S, ...)``."""
    pax = seed_axes(problem, problem_per_seed)
    round_ = _round_fn(algo, structure, problem, params, move_cost, seed_keys_, buffer, pax)
    return scan_blocks(round_, carry_record, carry, num_rounds, record_every, t0)


def run(seed_key: jax.Array, algo: BanditAlgorithm, structure: Structure, problem: Problem,
        params: AgentParams, move_cost, horizon: int, record_every: int = 1,
        ) -> tuple[BanditState, RunTotals, Records]:
    """One seed (key ``fold_in(root, seed_id)``), ``horizon`` rounds (static, a multiple of
    ``record_every``), as nested ``lax.scan``s: ``(final_state, totals, records)``.
    ``move_cost`` is the movement weight ``lambda`` of the regret."""
    check_rounds(horizon, "horizon", "run")
    check_rounds(record_every, "record_every", "run")
    carry = init_carry(seed_key, algo, structure, problem, params)
    carry, records = advance(carry, 0, seed_key, algo, structure, problem, params, move_cost,
                             horizon, record_every)
    return carry.state, carry.totals, records


def _by_seed(spec: PartitionSpec) -> NamedSharding:
    """``spec`` on a mesh ``("seeds",)`` over every device (of every process); an Auto axis, as
    vmap refuses operands of different shardings on Explicit ones."""
    mesh = jax.make_mesh((jax.device_count(),), ("seeds",),
                         axis_types=(jax.sharding.AxisType.Auto,))
    return NamedSharding(mesh, spec)


class NonFiniteFeedback(FloatingPointError):
    """The environment returned NaN or infinite feedback; the run stops at that chunk."""

    def __init__(self, seed_id: int, round_: int, grid_point: int | None = None):
        self.seed_id, self.round, self.grid_point = seed_id, round_, grid_point
        where = f" at grid point {grid_point}" if grid_point is not None else ""
        super().__init__(f"non-finite feedback (NaN or inf) from the environment for seed "
                         f"{seed_id}{where} in round {round_}")


class SweepResult(NamedTuple):
    """Host copies of a sweep's outputs (leading axis: seeds) and its timings."""

    totals: RunTotals
    records: Records
    compile_seconds: float
    run_seconds: float
    final: dict | None = None  # algo.describe of each seed's final state (host arrays), or None


def _check_finite(first_bad: np.ndarray, seed_ids, grid: bool) -> None:
    """Raise :class:`NonFiniteFeedback` naming the earliest bad round, before any checkpoint."""
    if not np.any(first_bad > 0):
        return
    rounds = np.where(first_bad > 0, first_bad, np.iinfo(np.int32).max)
    idx = np.unravel_index(int(np.argmin(rounds)), rounds.shape)
    seed = int(np.asarray(seed_ids)[idx[-1]])
    raise NonFiniteFeedback(seed, int(rounds[idx]), int(idx[0]) if grid else None)


#: The least work (seed-criterion-rounds) :func:`auto_chunk` gives a chunk: ~0.1 s of the
#: Section 7.2 round on 2 CPU cores, against ~3 ms of host work per chunk (RESULTS.md).
MIN_CHUNK_WORK = 1e7


def auto_chunk(horizon: int, record_every: int, max_chunks: int = 20,
               round_work: float = 0.0) -> int:
    """Smallest multiple of ``record_every`` dividing ``horizon`` into at most ``max_chunks``
    chunks and, given ``round_work`` (one round's work, e.g. seeds x criteria), into at most
    ``horizon x round_work / MIN_CHUNK_WORK`` (at least one): a short run in few chunks (each
    costs host work), a long one in ``max_chunks`` (progress, checkpoints)."""
    check_rounds(horizon, "horizon", "auto_chunk")
    check_rounds(record_every, "record_every", "auto_chunk")
    if round_work > 0:
        max_chunks = max(1, min(max_chunks, int(horizon * round_work // MIN_CHUNK_WORK)))
    for c in range(record_every, horizon + 1, record_every):
        if horizon % c == 0 and horizon // c <= max_chunks:
            return c
    return horizon


def make_chunked(algo: BanditAlgorithm, structure: Structure, chunk_rounds: int,
                 record_every: int = 1, problem_per_seed: bool = False, compact: bool = False,
                 buffer: int = 8, grid: bool = False, shard: bool = False):
    """Jitted ``(init_fn, chunk_fn)`` for running a sweep chunk by chunk, the same objects for
    the same arguments (the last few kept) so that :func:`drive` reuses their programs.

    ``init_fn(keys, problem, params) -> carry`` and
    ``chunk_fn(carry, t0, keys, problem, params, move_cost) -> (carry, records)`` for rounds
    ``t0+1 .. t0+chunk_rounds`` (``t0`` traced: one program serves every chunk); records
    round-major, ``(R, S, ...)`` or ``(R, G, S, ...)`` under a grid. ``shard``: a compacted
    chunk runs under ``shard_map``, each device compacting its own seeds (``buffer`` per
    device) with no traffic between devices.
    """
    check_rounds(chunk_rounds, "chunk_rounds", "make_chunked")
    check_rounds(record_every, "record_every", "make_chunked")
    args = (algo, structure, chunk_rounds, record_every, problem_per_seed, compact, buffer, grid,
            shard)
    try:
        return _chunked(*args)
    except TypeError:  # an unhashable part (a structure holding arrays): built anew
        return _chunked.__wrapped__(*args)


@functools.lru_cache(maxsize=8)
def _chunked(algo, structure, chunk_rounds, record_every, problem_per_seed, compact, buffer,
             grid, shard):

    def init(keys, problem, params):
        return jax.vmap(lambda key, prob: init_carry(key, algo, structure, prob, params),
                        in_axes=(0, seed_axes(problem, problem_per_seed)))(keys, problem)

    if compact:

        def chunk(carry, t0, keys, problem, params, move_cost):
            return advance_compact(carry, t0, keys, algo, structure, problem, params, move_cost,
                                   chunk_rounds, record_every, buffer, problem_per_seed)

    else:

        def chunk(carry, t0, keys, problem, params, move_cost):
            return jax.vmap(
                lambda c, key, prob: advance(c, t0, key, algo, structure, prob, params,
                                             move_cost, chunk_rounds, record_every),
                in_axes=(0, 0, seed_axes(problem, problem_per_seed)), out_axes=(0, 1),
            )(carry, keys, problem)
    if grid:
        init = jax.vmap(init, in_axes=(None, None, 0))
        chunk = jax.vmap(chunk, in_axes=(0, None, None, None, 0, 0), out_axes=(0, 1))
    if shard and compact:
        chunk = _per_device(chunk, problem_per_seed, grid)
    return jax.jit(init), jax.jit(chunk)


def _problem_layout(problem: Problem, per_seed: bool, by_seed, shared):
    """``problem``'s layout on the seed mesh: ``by_seed`` for its per-seed fields, ``shared``
    for the others (shardings or partition specs alike)."""
    if not per_seed:
        return shared
    return Problem(*(jax.tree_util.tree_map(lambda _, ax=ax: shared if ax is None else by_seed, v)
                     for v, ax in zip(problem, seed_axes(problem))))


def _per_device(chunk, problem_per_seed: bool, grid: bool):
    """``chunk`` under ``shard_map`` over the seed mesh: each device its own seeds."""
    seeds = PartitionSpec(None, "seeds") if grid else PartitionSpec("seeds")
    rec = PartitionSpec(None, None, "seeds") if grid else PartitionSpec(None, "seeds")
    by_seed, shared = PartitionSpec("seeds"), PartitionSpec()
    mesh = _by_seed(shared).mesh

    def run(carry, t0, keys, problem, params, move_cost):
        pspec = _problem_layout(problem, problem_per_seed, by_seed, shared)
        return jax.shard_map(chunk, mesh=mesh,
                             in_specs=(seeds, shared, by_seed, pspec, shared, shared),
                             out_specs=(seeds, rec), check_vma=False,
                             )(carry, t0, keys, problem, params, move_cost)

    return run


def make_sweep(algo: BanditAlgorithm, structure: Structure, horizon: int, record_every: int = 1,
               **options):
    """A jitted ``f(keys (S,), problem, params, move_cost) -> (totals, records)``; ``options``:
    :func:`make_chunked`'s ``problem_per_seed``, ``compact`` (``False``: ``jit(vmap(run))``,
    the reference form), ``buffer`` and ``grid`` (``params`` and ``move_cost`` with a leading
    axis ``G``, outputs ``(G, S, ...)``). A single key's floats may differ in the last bits
    from a larger batch's (:func:`sweep` pads it)."""
    init_fn, chunk_fn = make_chunked(algo, structure, horizon, record_every, **options)
    axis = 2 if options.get("grid") else 1  # records seed-first, as drive returns them

    def whole(keys, problem, params, move_cost):
        carry = init_fn(keys, problem, params)
        carry, records = chunk_fn(carry, 0, keys, problem, params, move_cost)
        return carry.totals, jax.tree_util.tree_map(lambda a: jnp.moveaxis(a, 0, axis), records)

    return jit(whole)


class SeedBatch(NamedTuple):
    """A sweep's seeds as its compiled program sees them (see :func:`seed_batch`)."""

    seed_ids: jax.Array  # (S',) uint32 global ids, padded with copies of the first
    keys: jax.Array  # (S',) fold_in(root, id), on the seed mesh when sharded
    problem: object  # the problem (padded too when drawn per seed), placed when sharded
    num: int  # the real seeds: the first ``num`` rows
    shard: bool


def seed_batch(root_key, seed_ids, problem, problem_per_seed: bool = False,
               shard: bool | None = None) -> SeedBatch:
    """Pad a sweep's seeds with copies of the first (:func:`unpad` drops them) to at least two
    (a size-1 ``vmap`` compiles differently) and, sharded (``shard=None``: when there are
    several devices), a multiple of the device count; place them (and a per-seed problem)."""
    seed_ids = jnp.asarray(seed_ids, jnp.uint32)
    num = seed_ids.shape[0]
    if num < 1:
        raise ValueError("sweep: seed_ids: expected at least one seed, got none")
    ndev = jax.device_count()
    if shard is None:
        shard = ndev > 1
    target = max(2, -(-num // ndev) * ndev if shard else num)
    if target > num:
        fill = jnp.full((target - num,), seed_ids[0], jnp.uint32)
        seed_ids = jnp.concatenate([seed_ids, fill])
        if problem_per_seed:
            rows = jnp.concatenate([jnp.arange(num), jnp.zeros((target - num,), int)])
            problem = seed_rows(problem, rows)
    keys = seed_keys(root_key, seed_ids)
    if shard:  # the seed axis split over the devices; a shared problem (field) replicated
        by_seed, replicated = _by_seed(PartitionSpec("seeds")), _by_seed(PartitionSpec())
        keys = distributed.place(keys, by_seed)
        problem = distributed.place(
            problem, _problem_layout(problem, problem_per_seed, by_seed, replicated))
    return SeedBatch(seed_ids, keys, problem, num, bool(shard))


def unpad(tree, batch: SeedBatch, grid: bool = False):
    """``tree`` without the padding seeds of ``batch`` (seed axis 0, or 1 under a grid)."""
    if batch.seed_ids.shape[0] == batch.num:
        return tree
    index = (slice(None), slice(0, batch.num)) if grid else (slice(0, batch.num),)
    return jax.tree_util.tree_map(lambda a: a[index], tree)


def check_chunk(chunk_rounds, horizon: int, record_every: int) -> int:
    """``chunk_rounds`` (None: the whole horizon), checked to divide ``horizon`` and be a
    multiple of ``record_every``."""
    chunk_rounds = horizon if chunk_rounds is None else int(chunk_rounds)
    if chunk_rounds < 1 or horizon % chunk_rounds or chunk_rounds % record_every:
        raise ValueError(
            f"chunk_rounds {chunk_rounds} must divide horizon {horizon} and be a multiple of "
            f"record_every {record_every}"
        )
    return chunk_rounds


def _repad(x, size: int, num: int, axis: int):
    """``x`` with ``size`` rows on its seed ``axis``: the ``num`` real seeds, then copies of the
    first (:func:`seed_batch`'s padding)."""
    x = np.asarray(x)
    if x.ndim <= axis or x.shape[axis] == size:
        return x
    real = np.take(x, np.arange(num), axis=axis)
    pad = np.repeat(np.take(x, [0], axis=axis), size - num, axis=axis)
    return np.concatenate([real, pad], axis=axis)


#: Compiled programs of recent sweeps by (jitted function, its arguments' types and shardings).
_PROGRAMS: collections.OrderedDict = collections.OrderedDict()
_KEEP_PROGRAMS = 8


def _compiled(fn, *args):
    """``fn.lower(*args).compile(compiler_options())``, kept for the same ``fn`` and argument
    types, so a second sweep of one program neither traces nor compiles."""
    leaves, treedef = jax.tree_util.tree_flatten(args)
    key = (fn, treedef, tuple((jax.typeof(x), getattr(x, "sharding", None)) for x in leaves))
    try:
        hit = _PROGRAMS.pop(key, None)
    except TypeError:  # unhashable: compiled anew
        return fn.lower(*args).compile(compiler_options())
    if hit is None:
        hit = fn.lower(*args).compile(compiler_options())
    _PROGRAMS[key] = hit
    while len(_PROGRAMS) > _KEEP_PROGRAMS:
        _PROGRAMS.popitem(last=False)
    return hit


def drive(init_fn, chunk_fn, batch: SeedBatch, params, chunk_args: tuple, horizon: int,
          chunk_rounds: int, first_bad, grid: bool = False, start=None, on_chunk=None,
          progress=None):
    """Run a sweep chunk by chunk: the loop every runner shares.

    ``init_fn(keys, problem, params) -> carry`` and ``chunk_fn(carry, t0, keys, problem,
    params, *chunk_args) -> (carry, records)`` (jitted, records round-major) are compiled once.
    After each chunk ``first_bad(carry)`` (first non-finite round per seed, seed axis last) is
    checked (:class:`NonFiniteFeedback`), then ``on_chunk(carry_leaves, rounds_done,
    chunk_records, seconds)`` gets host copies (records seed-first) and the ``(compile, run)``
    seconds so far, and ``progress(rounds_done, horizon)`` is called. ``start=(carry_leaves,
    rounds_done, records_so_far[, seconds])`` resumes (records as pieces in round order).
    Returns ``(carry, records, compile_seconds, run_seconds)``: host records joined on the
    round axis (1, or 2 under a grid), padding included; seconds of the whole run.
    """
    keys, problem = batch.keys, batch.problem
    axis = 2 if grid else 1
    carry_shapes = jax.eval_shape(init_fn, keys, problem, params)
    if batch.shard:
        # One carry sharding across chunks: a reused executable refuses another one.
        spec = PartitionSpec(None, "seeds") if grid else PartitionSpec("seeds")
        c_shard = jax.tree_util.tree_map(lambda _: _by_seed(spec), carry_shapes)
        init_fn = jax.jit(init_fn, out_shardings=c_shard)
        chunk_fn = jax.jit(chunk_fn, out_shardings=(c_shard, None))
    before = (0.0, 0.0) if start is None or len(start) < 4 else tuple(start[3])
    t0 = time.perf_counter()
    if start is None:
        init_c = _compiled(init_fn, keys, problem, params)
        t1 = time.perf_counter()
        carry = jax.block_until_ready(init_c(keys, problem, params))
        done, pieces = 0, []
    else:
        leaves, done, so_far = start[:3]
        if done % chunk_rounds:
            raise ValueError(f"resuming at round {done}: chunk_rounds {chunk_rounds} must divide "
                             "it (use the chunk size of the interrupted run)")
        # a checkpoint padded for another device count: its real seeds, padded anew
        want = [x.shape for x in jax.tree_util.tree_leaves(carry_shapes)]
        if [np.shape(x) for x in leaves] != want:
            size, seed_axis = batch.seed_ids.shape[0], axis - 1
            leaves = [_repad(x, size, batch.num, seed_axis) for x in leaves]
            so_far = jax.tree_util.tree_map(lambda x: _repad(x, size, batch.num, seed_axis),
                                            so_far)
        treedef = jax.tree_util.tree_structure(carry_shapes)
        carry = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(x) for x in leaves])
        if batch.shard:
            carry = distributed.place(carry, c_shard)
        pieces = list(so_far) if done else []
        t1 = time.perf_counter()
    t2 = time.perf_counter()
    # Lowered on the real carry, so the chunk is compiled for its shardings too.
    chunk_c = _compiled(chunk_fn, carry, jnp.int32(0), keys, problem, params, *chunk_args)
    t3 = time.perf_counter()

    def spent(now):  # (compile, run) seconds of the whole run so far
        return before[0] + (t1 - t0) + (t3 - t2), before[1] + (t2 - t1) + (now - t3)

    def finish(carry, rec, rounds):  # a finished chunk's host work
        _check_finite(np.asarray(distributed.host(first_bad(carry))), batch.seed_ids, grid)
        # seed-first on the host (a view), not a transpose on the device
        pieces.append(jax.tree_util.tree_map(lambda a: np.moveaxis(a, 0, axis),
                                             distributed.host(rec)))
        if on_chunk is not None:
            on_chunk(jax.tree_util.tree_leaves(distributed.host(carry)), rounds, pieces[-1],
                     spent(time.perf_counter()))
        if progress is not None:
            progress(rounds, horizon)

    # Pipelined: chunk i + 1 is dispatched before chunk i's host work, which then overlaps it.
    finished = None
    for begin in range(done, horizon, chunk_rounds):
        carry, rec = chunk_c(carry, jnp.int32(begin), keys, problem, params, *chunk_args)
        if finished is not None:
            finish(*finished)
        finished = (carry, rec, begin + chunk_rounds)
    if finished is not None:
        finish(*finished)
    carry = jax.block_until_ready(carry)
    seconds = spent(time.perf_counter())
    records = jax.tree_util.tree_map(lambda *xs: np.concatenate(xs, axis=axis), *pieces)
    return (carry, records, *seconds)


def sweep(root_key: jax.Array, seed_ids, algo: BanditAlgorithm, structure: Structure,
          problem: Problem, params: AgentParams, move_cost, horizon: int, record_every: int = 1,
          problem_per_seed: bool = False, compact: bool | None = None, buffer: int | None = None,
          shard: bool | None = None, grid: bool = False, chunk_rounds: int | None = None,
          progress=None, start=None, on_chunk=None) -> SweepResult:
    """Compile, run and time a seed sweep; compile time is reported apart from run time.

    The seeds are padded and, with ``shard`` (default: when there are several devices), split
    over the devices (:func:`seed_batch`); neither changes a number. ``compact=None`` chooses
    :func:`advance_compact` for algorithms that do not re-optimise every round; ``buffer=None``
    uses ``max(2, seeds // 16)`` per device. ``grid=True``: ``params`` leaves and ``move_cost``
    have a leading grid axis; results are ``(G, S, ...)``. ``chunk_rounds`` (default the whole
    horizon; it must divide ``horizon`` and be a multiple of ``record_every``), ``progress``,
    ``on_chunk``/``start`` (checkpoint and resume) and :class:`NonFiniteFeedback` are
    :func:`drive`'s.
    """
    check_rounds(horizon, "horizon", "sweep")
    check_rounds(record_every, "record_every", "sweep")
    batch = seed_batch(root_key, seed_ids, problem, problem_per_seed, shard)
    if compact is None:
        compact = not algo.always_solves
    per_device = int(batch.seed_ids.shape[0]) // (jax.device_count() if batch.shard else 1)
    if buffer is None:
        buffer = max(2, per_device // 16)
    chunk_rounds = check_chunk(chunk_rounds, horizon, record_every)
    init_fn, chunk_fn = make_chunked(algo, structure, chunk_rounds, record_every,
                                     problem_per_seed, compact, buffer, grid, batch.shard)
    move_cost = jnp.asarray(move_cost, problem.dtype)
    carry, records, compile_s, run_s = drive(
        init_fn, chunk_fn, batch, params, (move_cost,), horizon, chunk_rounds,
        lambda c: c.totals.first_nonfinite, grid, start, on_chunk, progress)
    totals = distributed.host(carry.totals)
    describe = jax.vmap(algo.describe, in_axes=(0, seed_axes(batch.problem, problem_per_seed)))
    if grid:
        describe = jax.vmap(describe, in_axes=(0, None))
    final = distributed.host(jit(describe)(carry.state, batch.problem)) or None
    totals, records, final = unpad((totals, records, final), batch, grid)
    return SweepResult(totals, records, compile_seconds=compile_s, run_seconds=run_s,
                       final=final)
