"""From a validated config to a run folder: :func:`build` (JAX objects, late checks),
:func:`run_experiment` (every entry over the same seeds), :func:`summarise` (``summary.json``),
and the run-folder steps :mod:`gsjax.oco.experiment` shares (:func:`run_sweeps`, ...).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import dataclasses
import functools
import itertools
import math
import os
import subprocess
import time
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gsjax import checkpoint, distributed, dp, factor, fairness, graphs, plotting, results
from gsjax.algorithms import REGISTRY, AgentParams, AgentSpec, BanditAlgorithm
from gsjax.algorithms.base import with_reference
from gsjax.algorithms.kernel import NODE_KINDS, check_solver, dp_applies
from gsjax.config import (AdaptiveAgentConfig, AgentConfig, ConfigError, ExperimentConfig,
                          ProblemConfig, config_hash, config_to_dict, parse_config)
from gsjax.lcb import MAX_VERTEX_COORDS
from gsjax.problem import (DRAW_AXES, Problem, Structure, feature_dim, make_problem,
                           make_structure, seed_axes)
from gsjax.results import flatten, mean_stderr, read_json, read_npz
from gsjax.runner import (Records, RunTotals, SweepResult, auto_chunk, carry_record,
                          make_chunked, seed_keys, sweep)
from gsjax.xla import jit

__all__ = ["BuiltAlgorithm", "Built", "ExperimentResult", "ENVIRONMENTS", "grid_points", "build",
           "run_experiment", "memory_estimate", "memory_needed", "available_memory",
           "check_memory", "summarise", "learned_graph_summary", "arrays", "merge", "merge_parts",
           "run_meta", "run_sweeps", "checkpoint_interval", "CHECKPOINT_EVERY_ENV", "run_folder",
           "write_folder", "remove_run", "run_config", "write_results"]

RUN_FILE_SUFFIXES = (".json", ".npz", ".png")  # the kinds of file a run writes in its folder


class BuiltAlgorithm(NamedTuple):
    name: str  # the config entry's name
    kind: str  # registered algorithm name
    algo: BanditAlgorithm
    spec: AgentSpec
    params: AgentParams
    move_cost: float
    fallback: str | None = None  # why solver 'dp' fell back to spec.solver (agent.dp_fallback)


class Built(NamedTuple):
    cfg: ExperimentConfig
    scopes: graphs.Scopes
    structure: Structure
    problem: Problem  # drawn per seed: the draws lead with the seed axis (problem.seed_axes)
    problem_per_seed: bool
    algorithms: tuple[BuiltAlgorithm, ...]
    dtype: object
    seed_start: int = 0  # global id of the first seed


class ExperimentResult(NamedTuple):
    built: Built
    seed_ids: np.ndarray
    horizon: int
    runs: dict  # name -> SweepResult


def grid_points(cfg: ExperimentConfig) -> list[dict]:
    """The ``[grid]`` points in order (Cartesian product, first axis slowest); ``[{}]`` if none."""
    if not cfg.grid:
        return [{}]
    names = [name for name, _ in cfg.grid]
    return [dict(zip(names, vals)) for vals in itertools.product(*(v for _, v in cfg.grid))]


def _model_scopes(pc: ProblemConfig) -> graphs.Scopes:
    """The scopes of ``[problem]``'s structure: blocks, a graph's neighbourhoods, or explicit."""
    if pc.structure == "scopes":
        return graphs.scopes_from_rows([list(r) for r in pc.scopes], pc.num_coords)
    if pc.block_dims is not None:  # blocks of unequal sizes: consecutive coordinates
        ends = np.cumsum(pc.block_dims)
        return graphs.scopes_from_rows(
            [list(range(e - d, e)) for d, e in zip(pc.block_dims, ends)], int(ends[-1]))
    if pc.structure == "blocks":
        return graphs.block_scopes(pc.num_blocks, pc.block_dim)
    n = pc.num_nodes
    if pc.graph == "edges":
        edges = pc.edges
    elif pc.graph == "chain":
        edges = graphs.chain_edges(n)
    elif pc.graph == "grid":
        edges = graphs.grid_edges(*pc.grid_shape)
    elif pc.graph == "complete":
        edges = graphs.complete_edges(n)
    else:
        edges = graphs.random_bounded_degree_edges(n, pc.max_degree, pc.num_edges, pc.graph_seed)
    return graphs.graph_scopes(n, edges)


def _noise_sigma_per_criterion(pc: ProblemConfig, scopes: graphs.Scopes) -> np.ndarray:
    """Each criterion's noise standard deviation (for the OFUL radius)."""
    if pc.noise.kind == "independent":
        return np.broadcast_to(np.asarray(pc.noise.sigma, float), (scopes.index.shape[0],)).copy()
    sig = np.broadcast_to(np.asarray(pc.noise.sigma, float), (scopes.num_coords,))
    var = np.where(scopes.mask, sig[scopes.index] ** 2, 0.0).sum(axis=1)
    return np.sqrt(var)


def _adaptive_options(ac: AgentConfig) -> dict:
    """``adaptive_lazy``'s static options (Section 5.2): an adaptive entry's record has them."""
    if not isinstance(ac, AdaptiveAgentConfig):
        return {}
    return {"warmup": ac.warmup, "signal_gamma": ac.signal_gamma or 0.0,
            "refined": ac.refined or "lazy"}


_SPEC_FIELDS = ("solver", "pgd_steps", "pgd_starts", "pgd_optimizer", "pgd_include_current",
                "pgd_gap", "beta_mode", "reference", "refresh_every", "refresh_method",
                "gram_summation")


def _agent(ac: AgentConfig, k: int, sigma_k: np.ndarray, dtype, algorithm: str = ""
           ) -> tuple[AgentSpec, AgentParams]:
    """The entry's spec and params; the lazy kinds' reading and per-criterion decision are
    traced, so ``lazy`` (either reading) and ``async_lazy`` share a program (:func:`_algorithm`)."""
    spec = AgentSpec(**{f: getattr(ac, f) for f in _SPEC_FIELDS}, **_adaptive_options(ac))
    params = AgentParams.create(
        k, lambda_reg=ac.lambda_reg, beta=ac.beta, pgd_lr=ac.pgd_lr,
        trigger_ratio=ac.trigger_ratio, oful_delta=ac.oful_delta, oful_S=ac.oful_S,
        oful_sigma=sigma_k if ac.oful_sigma is None else ac.oful_sigma, oful_L=ac.oful_L,
        dtype=dtype)
    if algorithm in ("lazy", "async_lazy"):
        params = with_reference(params, spec, per_criterion=algorithm == "async_lazy")
    return spec, params


def _algorithm(name: str, structure: Structure, spec: AgentSpec, made: dict):
    """``REGISTRY[name](structure, spec)``, but the lazy kinds (traced reading, :func:`_agent`)
    share one object per spec up to its reading, kept in ``made``: their sweeps compile once."""
    if name not in ("lazy", "async_lazy"):
        return REGISTRY[name](structure, spec)
    key = dataclasses.replace(spec, reference="global")
    try:
        if key not in made:
            made[key] = REGISTRY["lazy"](structure, key)
    except TypeError:  # an unhashable spec: its own object
        return REGISTRY[name](structure, spec)
    return made[key]


def _dp_spec(spec: AgentSpec, scopes, structure: Structure, entry, plans: dict):
    """``(spec with the DP plan, None)``, ``(spec with agent.dp_fallback's solver, reason)`` if
    the tables are too wide, or a ConfigError (a ``pgd_gap`` entry never falls back)."""
    ac = entry.agent
    field = f"algorithms.{entry.name}." + ("solver" if spec.solver == "dp" else "pgd_gap")
    key = (ac.dp_max_table, ac.dp_exact_ties)
    if key not in plans:
        try:
            plans[key] = dp.make_plan(scopes, max_table=key[0], exact_ties=key[1])
        except dp.TooWide as err:
            plans[key] = err
    plan = plans[key]
    too_wide = isinstance(plan, dp.TooWide)
    if too_wide and spec.pgd_gap:
        raise ConfigError(field, f"{plan}: the exact minimum PGD is measured against")
    if too_wide and dp_applies(structure, entry.algorithm in NODE_KINDS):
        if ac.dp_fallback != "none":
            return dataclasses.replace(spec, solver=ac.dp_fallback), plan.reason
        raise ConfigError(field, f"{plan} (or set agent.dp_fallback = 'pgd' to fall back)")
    # an entry the DP cannot take is refused by check_solver, fallback or not
    spec = dataclasses.replace(spec, dp_plan=None if too_wide else plan)
    try:
        check_solver(structure, spec, per_criterion=entry.algorithm in NODE_KINDS)
    except ValueError as err:
        raise ConfigError(field, str(err)) from None
    return spec, None


def build(cfg: ExperimentConfig, seed_start: int = 0) -> Built:
    """Build the structure, problem and algorithms of a config; raises ConfigError early.
    ``seed_start``: the global id of the first seed (problems drawn per seed use global ids)."""
    if cfg.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    dtype = jnp.float64 if cfg.dtype == "float64" else jnp.float32
    if cfg.horizon % cfg.record_every:
        raise ConfigError("record_every",
                          f"must divide horizon ({cfg.horizon}); got {cfg.record_every}")
    pc = cfg.problem
    seed_ids = jnp.arange(seed_start, seed_start + cfg.seeds, dtype=jnp.uint32)
    scopes, structure, problem, per_seed = ENVIRONMENTS[pc.environment](pc, seed_ids, dtype)
    k = structure.num_criteria
    sigma_k = _noise_sigma_per_criterion(pc, scopes)
    built_algos, plans, made = [], {}, {}
    for entry in cfg.algorithms:
        ac = entry.agent
        if (ac.solver == "vertex" and not structure.disjoint
                and structure.num_coords > MAX_VERTEX_COORDS):
            raise ConfigError(f"algorithms.{entry.name}.solver",
                              "vertex enumeration over overlapping scopes needs n <= "
                              f"{MAX_VERTEX_COORDS} coordinates (here n = "
                              f"{structure.num_coords}); use 'pgd'")
        if entry.algorithm not in REGISTRY:
            raise ConfigError(f"algorithms.{entry.name}.algorithm",
                              f"unknown algorithm {entry.algorithm!r}; registered: "
                              f"{sorted(REGISTRY)}")
        spec, params = _agent(ac, k, sigma_k, dtype, entry.algorithm)
        fallback = None
        if spec.solver == "dp" or (spec.pgd_gap and spec.solver == "pgd"):
            spec, fallback = _dp_spec(spec, scopes, structure, entry, plans)
        elif spec.pgd_gap:
            raise ConfigError(f"algorithms.{entry.name}.pgd_gap",
                              f"only with solver 'pgd' (this entry's is {spec.solver!r})")
        for key, default in (("refresh_method", "cholesky"), ("gram_summation", "plain")):
            if getattr(spec, key) != default and entry.algorithm not in NODE_KINDS:
                raise ConfigError(f"algorithms.{entry.name}.{key}",
                                  f"only for the per-criterion ridge of {', '.join(NODE_KINDS)} "
                                  f"(this entry's algorithm is {entry.algorithm!r})")
        move_cost = ac.move_cost
        if cfg.grid:
            per_point = [dataclasses.replace(ac, **point) for point in grid_points(cfg)]
            stacked = [_agent(p, k, sigma_k, dtype, entry.algorithm)[1] for p in per_point]
            params = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *stacked)
            move_cost = jnp.asarray([p.move_cost for p in per_point], dtype)
        algo = _algorithm(entry.algorithm, structure, spec, made)
        built_algos.append(
            BuiltAlgorithm(entry.name, entry.algorithm, algo, spec, params, move_cost, fallback))
    return Built(cfg, scopes, structure, problem, per_seed, tuple(built_algos), dtype, seed_start)


#: True while :func:`memory_needed` builds: problems are shapes only (``jax.eval_shape``).
_SHAPES_ONLY = contextvars.ContextVar("gsjax_shapes_only", default=False)


def _draw(make, pc: ProblemConfig, seed_ids, dtype, **kwargs):
    """``(problem, per_seed)`` from ``make``, once or per global seed id (``theta.per_seed``)."""
    th = pc.theta
    make = functools.partial(
        make, **kwargs, theta_distribution=th.distribution, theta_values=th.values,
        theta_scale=th.scale, noise_sigma=pc.noise.sigma, s0=pc.s0,
        rff_lengthscale=pc.rff_lengthscale, dtype=dtype)
    problem_key = jax.random.key(th.seed)
    call = jax.eval_shape if _SHAPES_ONLY.get() else (lambda f, x: jit(f)(x))
    if th.per_seed and th.distribution != "explicit":
        keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(problem_key, seed_ids)
        return call(jax.vmap(make, out_axes=DRAW_AXES), keys), True
    return call(make, problem_key), False


def _build_linear(pc: ProblemConfig, seed_ids, dtype):
    """The graph-structured linear model (:mod:`gsjax.problem`); explicit theta rows checked."""
    scopes = _model_scopes(pc)
    structure = make_structure(scopes, pc.features, pc.noise.kind, pc.rff_dim)
    if pc.theta.distribution == "explicit":
        counts = [feature_dim(structure.features, int(m), structure.rff_dim)
                  for m in scopes.mask.sum(axis=1)]
        for i, row in enumerate(pc.theta.values):
            if len(row) != counts[i]:
                scope = list(scopes.index[i][scopes.mask[i]])
                raise ConfigError(f"problem.theta.values[{i}]",
                                  f"criterion {i} has {counts[i]} {pc.features} features "
                                  f"(scope {scope}); got {len(row)} values")
    return (scopes, structure, *_draw(make_problem, pc, seed_ids, dtype,
                                         structure=structure, scopes=scopes))


def _build_factor(pc: ProblemConfig, seed_ids, dtype):
    """Section 5.3: a factor graph (:mod:`gsjax.factor`); theta rows are checked per factor."""
    fc = pc.factor
    if fc.layout == "clique":
        layout = factor.clique_layout(fc.num_nodes, fc.num_coords)
    else:
        layout = factor.FactorLayout(fc.num_coords, fc.num_nodes, tuple(c for c, _ in fc.factors),
                                     tuple(v for _, v in fc.factors))
    structure, scopes = factor.make_factor_structure(
        layout, pc.features, pc.noise.kind, pc.rff_dim, fc.mixing)
    return (scopes, structure, *_draw(factor.make_factor_problem, pc, seed_ids, dtype,
                                      structure=structure, layout=layout,
                                      mixing_seed=fc.mixing_seed))


def _build_adult(pc: ProblemConfig, seed_ids, dtype):
    """Section 7.3: the loss from UCI Adult data (:mod:`gsjax.fairness`), shared by all seeds."""
    scopes = _model_scopes(pc)
    structure = make_structure(scopes, pc.features, pc.noise.kind, pc.rff_dim)
    a = pc.adult
    structure, problem = fairness.make_adult_problem(
        structure, scopes, batch_size=a.batch_size, gap_estimator=a.gap_estimator,
        classifier_seed=a.classifier_seed, classifier_steps=a.classifier_steps,
        classifier_l2=a.classifier_l2, raw_data=a.raw_data, s0=pc.s0, dtype=dtype)
    return scopes, structure, problem, False


#: ``problem.environment`` -> ``builder(problem_config, seed_ids, dtype)`` returning
#: ``(scopes, structure, problem, drawn_per_seed)``.
ENVIRONMENTS = {"linear": _build_linear, "factor": _build_factor, "adult": _build_adult}


#: Bytes of a run's records up to which its default chunks may be fewer than 20
#: (:func:`gsjax.runner.auto_chunk`'s ``round_work``): a chunk's records wait on the device.
RECORDS_IN_ONE_CHUNK = 2**26

#: Environment variable: the least seconds between two checkpoints of a run
#: (:func:`checkpoint_interval`); ``0`` writes one after every chunk.
CHECKPOINT_EVERY_ENV = "GSJAX_CHECKPOINT_EVERY"
DEFAULT_CHECKPOINT_EVERY = 10.0


def checkpoint_interval(seconds: float | None = None, field: str = "--checkpoint-every") -> float:
    """The least seconds between two checkpoints: ``seconds``, else ``$GSJAX_CHECKPOINT_EVERY``,
    else :data:`DEFAULT_CHECKPOINT_EVERY`; a negative or unreadable value is a one-line
    :class:`ConfigError` naming ``field`` (or the variable)."""
    if seconds is None:
        text = os.environ.get(CHECKPOINT_EVERY_ENV, "").strip()
        if not text:
            return DEFAULT_CHECKPOINT_EVERY
        field = CHECKPOINT_EVERY_ENV
        try:
            seconds = float(text)
        except ValueError:
            raise ConfigError(field, f"expected a number of seconds, got {text!r}") from None
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds >= 0):
        raise ConfigError(field, f"expected seconds >= 0, got {seconds!r}")
    return float(seconds)


def run_sweeps(jobs, seeds: int, folder, digest: str, seed_start: int, log=None, progress=None,
               result=SweepResult, types=None, fixed_chunk: bool = False,
               checkpoint_every: float | None = None, clock=None) -> dict:
    """Run the named sweeps in order; returns ``{name: result}``. ``jobs``: ``(name, horizon,
    chunk_rounds, run)``, ``run(start=, on_chunk=, progress=, chunk_rounds=)`` a bound sweep;
    ``progress(name, horizon, seeds)`` gives a run's ``callback(done, horizon)``. Given a
    ``folder``, a checkpoint is saved at a chunk's end once ``checkpoint_every`` seconds
    (:func:`checkpoint_interval`, by ``clock``) have passed, and one of the same config
    (``digest``) and seed range is resumed (``result``, ``types``: as
    :func:`gsjax.checkpoint.load`), its chunk cut to divide the checkpoint's round unless
    ``fixed_chunk`` (then refused). Only process 0 reads and writes ``folder``."""
    ck = None if folder is None else _load_checkpoint(folder, result, types)
    if ck is not None and (ck["config_hash"], ck["seed_start"]) != (digest, seed_start):
        raise ConfigError("<resume>", f"{folder} holds a checkpoint of a different config or seed "
                          f"range (config hash {ck['config_hash'][:12]}, seed start "
                          f"{ck['seed_start']}; this run: {digest[:12]}, {seed_start}); refusing "
                          "to mix them: use another --out, or delete its checkpoint.npz to start "
                          "over")
    writer = distributed.is_writer()
    if folder is not None and writer:  # the folder is ours now: a killed write's tmps go
        results.remove_orphan_tmps_in(folder, RUN_FILE_SUFFIXES)
        results.remove_orphan_tmps_in(Path(folder) / checkpoint.PARTS, (".npz",))
    if ck is not None and log is not None:
        log(f"resuming from {folder}: {', '.join(ck['completed']) or 'none'} done, "
            f"{ck['current']} at round {ck['rounds_done']}")
        if ck["processes"] != distributed.process_count():
            log(f"the checkpoint was written by {ck['processes']} process(es), this run has "
                f"{distributed.process_count()}: its seeds are spread anew (same numbers)")
    done = {} if ck is None else dict(ck["completed"])
    parts = checkpoint.Parts.of(ck)  # what the checkpoints stand on (the writer thread's)
    clock = clock or time.monotonic
    every, last = checkpoint_interval(checkpoint_every), [clock()]
    saver = _Saver()  # its drain stays registered until its last write is done or cut off
    with distributed.flush_before_exit(saver.drain), saver:
        for name, horizon, chunk, run in jobs:
            if name in done:
                continue
            start = on_chunk = None
            if ck is not None and ck["current"] == name:
                start = (ck["carry_leaves"], ck["rounds_done"], ck["records"], ck["seconds"])
                chunk = _resumed_chunk(name, chunk, start[1], fixed_chunk, log)
            if folder is not None:  # all gather the carry; process 0 writes it in the background
                def on_chunk(leaves, rounds, records, seconds, name=name, finished=dict(done)):
                    if writer and clock() - last[0] < every:  # its records wait for the next
                        saver.submit(parts.hold, name, rounds, records)
                    elif writer:
                        last[0] = clock()
                        saver.submit(parts.save, folder, digest, seed_start, finished, name,
                                     leaves, rounds, records,
                                     processes=distributed.process_count(), seconds=seconds)
            callback = None if progress is None else progress(name, horizon, seeds)
            done[name] = run(start=start, on_chunk=on_chunk, chunk_rounds=chunk, progress=callback)
    return done


class _Saver:
    """Checkpoints written in order on a thread; each write waited for (errors re-raised)."""

    _pending = _last = None

    def __enter__(self):
        self._pool = concurrent.futures.ThreadPoolExecutor(1, "gsjax-checkpoint")
        return self

    def submit(self, fn, *args, **kwargs) -> None:
        self.wait()
        self._pending = self._last = self._pool.submit(fn, *args, **kwargs)

    def wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def drain(self, timeout: float = 600.0) -> None:
        """Let the last write finish (from another thread; ``_pending`` may be cleared)."""
        last = self._last
        if last is not None:
            concurrent.futures.wait([last], timeout=timeout)

    def __exit__(self, *exc):
        try:
            self.wait()
        finally:
            self._pool.shutdown()
        return False


def _load_checkpoint(folder, result, types):
    """:func:`gsjax.checkpoint.load` (read by process 0), its damage a ``<resume>`` error."""
    try:
        session = distributed.current()
        if session is None:
            return checkpoint.load(folder, result, types)
        data = distributed.from_writer(session, "checkpoint", lambda: checkpoint.pack(folder))
        return None if data is None else checkpoint.load(folder, result, types, data=data)
    except checkpoint.Unreadable as e:
        raise ConfigError("<resume>", str(e)) from None


def _resumed_chunk(name: str, chunk: int, rounds_done: int, fixed: bool, log) -> int:
    """The chunk size a run resumed at ``rounds_done`` goes on with (a divisor of both)."""
    if rounds_done % chunk == 0:
        return chunk
    if fixed:
        raise ConfigError("--chunk", f"the checkpoint stopped {name} at round {rounds_done}: "
                          "resume with the interrupted run's chunk size (a divisor of it), got "
                          f"{chunk}")
    cut = math.gcd(chunk, rounds_done)
    if log is not None:
        log(f"{name}: the checkpoint stopped at round {rounds_done}; going on in chunks of {cut} "
            f"rounds (the default {chunk} does not divide it)")
    return cut


def _default_chunk(cfg: ExperimentConfig, built: Built) -> int:
    """:func:`gsjax.runner.auto_chunk`, a round's work counted for vertex-solver runs only."""
    k, n = built.structure.num_criteria, built.structure.num_coords
    lanes = cfg.seeds * (len(grid_points(cfg)) if cfg.grid else 1)
    # a record: regret, movement, the action in dtype; updates, changes, triggers in int32
    row = (2 + n) * np.dtype(built.dtype).itemsize + 3 * k * 4
    counted = (all(ba.spec.solver == "vertex" for ba in built.algorithms)
               and lanes * (cfg.horizon // cfg.record_every) * row <= RECORDS_IN_ONE_CHUNK)
    return auto_chunk(cfg.horizon, cfg.record_every, round_work=lanes * k if counted else 0.0)


def run_experiment(cfg: ExperimentConfig, built: Built | None = None, log=None,
                   seed_start: int = 0, chunk_rounds: int | None = None, progress=None,
                   checkpoint_dir=None, buffer: int | None = None,
                   checkpoint_every: float | None = None) -> ExperimentResult:
    """Run every algorithm entry of ``cfg`` over global seed ids ``seed_start ..``; ``built``: a
    :func:`build` result to reuse (its ``seed_start`` counts); ``log``: one line per algorithm;
    ``checkpoint_dir``, ``checkpoint_every``, ``progress``: as :func:`run_sweeps`. The numbers
    depend neither on ``chunk_rounds`` (default :func:`gsjax.runner.auto_chunk`) nor on
    ``buffer`` (the compacted sweeps' solver buffer per device, :func:`gsjax.runner.sweep`)."""
    fixed_chunk = chunk_rounds is not None
    built = build(cfg, seed_start) if built is None else built
    if chunk_rounds is None:
        chunk_rounds = _default_chunk(cfg, built)
    seed_ids = np.arange(built.seed_start, built.seed_start + cfg.seeds)
    root = jax.random.key(cfg.root_seed)

    def run(ba, **hooks):
        res = sweep(root, seed_ids, ba.algo, built.structure, built.problem, ba.params,
                    ba.move_cost, cfg.horizon, cfg.record_every, built.problem_per_seed,
                    grid=bool(cfg.grid), buffer=buffer, **hooks)
        if log is None:
            return res
        t, timing = res.totals, f"compile {res.compile_seconds:.1f}s, run {res.run_seconds:.1f}s"
        if cfg.grid:
            total = np.mean(t.prediction_regret + t.movement_cost, axis=-1)
            g = int(np.argmin(total))
            log(f"{ba.name:>14s}: {len(total)} grid points, best {grid_points(cfg)[g]} "
                f"total regret {total[g]:.2f} ({timing})")
        else:
            log(f"{ba.name:>14s}: regret {float(np.mean(t.prediction_regret)):10.2f}  "
                f"movement {float(np.mean(t.movement_cost)):9.2f}  "
                f"updates {float(np.mean(t.updates.sum(-1))):8.1f}  ({timing})")
        return res

    jobs = [(ba.name, cfg.horizon, chunk_rounds, functools.partial(run, ba))
            for ba in built.algorithms]
    runs = run_sweeps(jobs, cfg.seeds, checkpoint_dir, config_hash(cfg), built.seed_start, log,
                      progress, fixed_chunk=fixed_chunk, checkpoint_every=checkpoint_every)
    return ExperimentResult(built, seed_ids, cfg.horizon, runs)


def _nbytes(tree) -> int:
    """Bytes of the arrays (or ``jax.ShapeDtypeStruct``s) of a pytree."""
    return sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize
               for x in jax.tree_util.tree_leaves(tree))


def memory_estimate(carry, record, records: int, seeds: int, shared=None) -> int:
    """Bytes a run holds, a lower bound (XLA's temporaries come on top): ``seeds`` x (``carry``
    + ``records`` x ``record``) + ``shared`` once; pytrees of arrays or ``ShapeDtypeStruct``s
    of ONE seed (a ``[grid]`` run's with its grid axis)."""
    return seeds * (_nbytes(carry) + records * _nbytes(record)) + _nbytes(shared)


def memory_needed(cfg: ExperimentConfig, seed_start: int = 0) -> int:
    """:func:`memory_estimate` of a run of ``cfg``: the largest carry of its algorithms (run
    one after another) and the per-seed problem for every seed, plus every algorithm's records,
    from the shapes of a one-seed build's initial carry (``jax.eval_shape``: nothing compiled,
    no round or DP solve traced)."""
    token = _SHAPES_ONLY.set(True)
    try:
        one = build(dataclasses.replace(cfg, seeds=1), seed_start)
    finally:
        _SHAPES_ONLY.reset(token)
    keys = seed_keys(jax.random.key(cfg.root_seed), jnp.zeros((1,), jnp.uint32))
    carries = []
    for ba in one.algorithms:
        init_fn, _ = make_chunked(ba.algo, one.structure, cfg.record_every, cfg.record_every,
                                  one.problem_per_seed, grid=bool(cfg.grid))
        with dp.shapes_only():  # the DP's answer has the shape of its start: not traced
            carries.append(jax.eval_shape(init_fn, keys, one.problem, ba.params))
    record = [carry_record(c) for c in carries]  # a record is fields of the carry
    axes = seed_axes(one.problem, one.problem_per_seed) or [None] * len(one.problem)
    per_seed = [v for v, ax in zip(one.problem, axes) if ax is not None]
    shared = [v for v, ax in zip(one.problem, axes) if ax is None]
    return memory_estimate((max(carries, key=_nbytes), per_seed), record,
                           cfg.horizon // cfg.record_every, cfg.seeds, shared)


def available_memory() -> tuple[int, str] | None:
    """``(bytes, where)`` a run may use: the devices' free memory where reported (GPU, TPU),
    else the host's (``MemAvailable`` of /proc/meminfo, else ``sysconf``); None if unknown."""
    devices = jax.local_devices()  # this process's (all of them, in a single-process run)
    stats = devices[0].memory_stats()
    if stats and "bytes_limit" in stats:
        free = stats["bytes_limit"] - stats.get("bytes_in_use", 0)
        return free * len(devices), f"free on {len(devices)} x {devices[0].device_kind}"
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024, "available on the host"
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "free on the host"
    except (OSError, ValueError, AttributeError):
        return None


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**28 else f"{n / 2**20:,.1f} MiB"


def check_memory(need: int, seeds: int, available=None) -> None:
    """A one-line ConfigError on ``seeds`` when ``need`` bytes (:func:`memory_needed`) exceed
    ``available`` (``(bytes, where)``, default :func:`available_memory`)."""
    available = available_memory() if available is None else available
    if available is None or need <= available[0]:
        return
    raise ConfigError("seeds", f"{seeds} seeds would hold at least {_gib(need)} (carry, "
                               f"records, problem), more than the {_gib(available[0])} "
                               f"{available[1]}: use fewer seeds, a larger record_every "
                               "(--set record_every=N), or split the seeds over runs with "
                               "--seed-start and join them with gsjax merge")


def _algo_summary(t, kind: str) -> dict:
    """Summary of one algorithm's totals with a leading seed axis."""
    return {
        "algorithm": kind,
        "prediction_regret": mean_stderr(t.prediction_regret),
        "movement_cost": mean_stderr(t.movement_cost),
        "total_regret": mean_stderr(t.prediction_regret + t.movement_cost),
        "total_updates": mean_stderr(t.updates.sum(-1)),
        "total_changes": mean_stderr(t.changes.sum(-1)),
        "updates_per_criterion": mean_stderr(t.updates),
        "changes_per_criterion": mean_stderr(t.changes),
        "triggers_per_criterion": mean_stderr(t.triggers),
        "reoptimisations": mean_stderr(t.reoptimisations),
        "max_lcb_residual": float(np.max(t.max_lcb_residual)),
    }


def learned_graph_summary(final: dict) -> dict:
    """Summary of the seeds' learned graphs: ``learned_neighbours`` against ``true_neighbours``,
    both (S, k, n) bool (a criterion's own coordinate is its neighbour in both)."""
    learned = np.asarray(final["learned_neighbours"], bool)
    truth = np.asarray(final["true_neighbours"], bool)
    same_truth = bool(np.all(truth == truth[:1]))
    return {
        "exact_recovery": mean_stderr(np.all(learned == truth, axis=(1, 2)).astype(np.float64)),
        "false_neighbours": mean_stderr(np.sum(learned & ~truth, axis=(1, 2))),
        "missed_neighbours": mean_stderr(np.sum(~learned & truth, axis=(1, 2))),
        "neighbour_frequency": learned.mean(axis=0).tolist(),
        "true_neighbours": truth[0].astype(int).tolist() if same_truth else None,
    }


def summarise(result: ExperimentResult) -> dict:
    """The ``summary.json`` content; a ``[grid]`` run's ``algorithms[NAME]`` describes the point
    of lowest mean total regret (its ``grid_point``), ``grid`` lists every point."""
    b, cfg = result.built, result.built.cfg
    kinds = {ba.name: ba.kind for ba in b.algorithms}
    points = grid_points(cfg)
    algos = {}
    grid_rows = [{"point": p, "algorithms": {}} for p in points] if cfg.grid else None
    for name, res in result.runs.items():
        timing = {"compile_seconds": res.compile_seconds, "run_seconds": res.run_seconds}
        if cfg.grid:
            per = [_algo_summary(jax.tree_util.tree_map(lambda a: a[g], res.totals), kinds[name])
                   for g in range(len(points))]
            for row, summ in zip(grid_rows, per):
                row["algorithms"][name] = summ
            best = int(np.argmin([p["total_regret"]["mean"] for p in per]))
            algos[name] = {**per[best], "grid_point": points[best], **timing}
        else:
            algos[name] = {**_algo_summary(res.totals, kinds[name]), **timing}
            # The state played at round T (the converged threshold in Section 7.3).
            algos[name]["final_state"] = mean_stderr(np.asarray(res.records.action)[:, -1, :])
            if res.final and "learned_neighbours" in res.final:  # adaptive_lazy (Section 5.2)
                algos[name]["learned_graph"] = learned_graph_summary(res.final)
    for ba in b.algorithms:  # a 'dp' entry's solver: the DP with its width, or the fallback
        if ba.fallback is not None:
            algos[ba.name].update(solver_used=ba.spec.solver, solver_fallback=ba.fallback)
        elif ba.spec.solver == "dp":
            algos[ba.name].update(solver_used="dp", dp_width=ba.spec.dp_plan.limits.width)
    p = b.problem
    meta = {
        "name": cfg.name,
        "seeds": int(len(result.seed_ids)),
        # The global seed ids, start included and stop excluded.
        "seed_range": {"start": int(result.seed_ids[0]), "stop": int(result.seed_ids[-1]) + 1},
        "horizon": int(result.horizon),
        "dtype": cfg.dtype,
        "num_criteria": b.structure.num_criteria,
        "num_coords": b.structure.num_coords,
        "features": b.structure.features,
        **run_meta(result.runs.values()),
        "s_star_residual_max": float(np.max(np.asarray(p.s_star_residual))),
    }
    if not b.problem_per_seed:
        meta["s_star"] = np.asarray(p.s_star).tolist()
        meta["loss_star"] = float(p.loss_star)
    meta.update(b.structure.env.describe(p))  # the Adult data, the factor graph's sizes
    out = {"algorithms": algos, "meta": meta}
    if cfg.grid:
        out["grid"] = {"axes": {k: list(v) for k, v in cfg.grid}, "points": grid_rows}
    return out


def run_meta(runs) -> dict:
    """The machine and the timings (summed over the sweep results ``runs``) in a ``meta``."""
    return {"jax_version": jax.__version__, "devices": [str(d) for d in jax.devices()],
            "compile_seconds": sum(r.compile_seconds for r in runs),
            "run_seconds": sum(r.run_seconds for r in runs)}


def arrays(result: ExperimentResult) -> dict[str, np.ndarray]:
    """Flat name -> array mapping for ``arrays.npz`` (per algorithm ``NAME/field``), leading
    with the seed axis, or ``(G, S)`` for a ``[grid]`` run (``grid/values`` (G, P))."""
    b, cfg = result.built, result.built.cfg
    out = {"rounds": np.arange(cfg.record_every, cfg.horizon + 1, cfg.record_every),
           "seed_ids": np.asarray(result.seed_ids)}
    axes = seed_axes(b.problem, b.problem_per_seed)
    for f in ("theta", "s_star", "loss_star", "scopes", "scope_mask"):
        x = np.asarray(getattr(b.problem, f))
        if axes is not None and getattr(axes, f) is None:  # a shared field, repeated per seed
            x = np.broadcast_to(x, (len(result.seed_ids), *x.shape))
        out[f"problem/{f}"] = x
    if cfg.grid:
        out["grid/names"] = np.asarray([name for name, _ in cfg.grid])
        out["grid/values"] = np.asarray([[pt[n] for n, _ in cfg.grid] for pt in grid_points(cfg)])
    for ba in b.algorithms:
        out[f"{ba.name}/lambda_reg"] = np.asarray(ba.params.lambda_reg)
    for name, res in result.runs.items():
        out.update(flatten(f"{name}/totals", res.totals))
        out.update(flatten(name, res.records))
        out.update(flatten(f"{name}/final", res.final))
    return out


def merge_parts(folders, parse) -> list[tuple[Path, object, dict, dict]]:
    """The run folders of a merge as ``(folder, config, arrays, summary)`` in seed order, configs
    read with ``parse``; a one-line ``<merge>`` error unless all hold readable runs of one
    config but for ``seeds`` whose seed ids form one contiguous range."""
    parts = []
    for folder in map(Path, folders):
        for f in ("config.json", "arrays.npz", "summary.json"):
            if not (folder / f).is_file():
                raise ConfigError("<merge>", f"{folder}/{f} not found: not a gsjax run folder")
        try:
            files = (read_json(folder / "config.json"), read_npz(folder / "arrays.npz"),
                     read_json(folder / "summary.json"))
            seed_ids = files[1]["seed_ids"]
            if not (isinstance(files[0], dict) and isinstance(files[2], dict) and seed_ids.size):
                raise ValueError("not a run's files")
        except Exception as e:  # a damaged npz raises BadZipFile, zlib.error, EOFError, ...
            raise ConfigError("<merge>", f"{folder}: its files cannot be read ({type(e).__name__}"
                                         f": {' '.join(str(e).split())})") from None
        kind = files[0].get("kind", "bandit")
        if parts and kind != parts[0][1].get("kind", "bandit"):
            raise ConfigError("<merge>", f"{folder}: a {kind} run, {parts[0][0]} is not")
        parts.append((folder, *files))
    if not parts:
        raise ConfigError("<merge>", "no run folders given")
    parts = [(folder, parse(raw), arr, summary) for folder, raw, arr, summary in parts]
    parts.sort(key=lambda p: int(p[2]["seed_ids"][0]))
    first_dir, base, first = parts[0][:3]
    expected = int(first["seed_ids"][0])
    for folder, cfg, arr, _ in parts:
        if dataclasses.replace(cfg, seeds=base.seeds) != base:
            raise ConfigError("<merge>",
                              f"{folder}: config differs from {first_dir}'s (other than seeds)")
        if int(arr["seed_ids"][0]) != expected:
            raise ConfigError("<merge>", f"{folder}: seeds start at {int(arr['seed_ids'][0])}, "
                              f"expected {expected} (the folders must cover one contiguous, "
                              "non-overlapping range)")
        expected = int(arr["seed_ids"][-1]) + 1
    return parts


def merge(folders) -> ExperimentResult:
    """Combine run folders of one config over a contiguous seed range (:func:`merge_parts`),
    e.g. one per host: per-seed arrays concatenated in seed order, timings summed."""
    parts = merge_parts(folders, parse_config)
    first = parts[0][2]
    cfg = dataclasses.replace(parts[0][1], seeds=sum(len(p[2]["seed_ids"]) for p in parts))
    built = build(cfg, seed_start=int(first["seed_ids"][0]))
    axis = 1 if cfg.grid else 0

    def cat(key):
        return np.concatenate([p[2][key] for p in parts], axis=axis)

    runs = {}
    for name in (ba.name for ba in built.algorithms):
        totals = RunTotals(*[cat(f"{name}/totals/{f}") for f in RunTotals._fields])
        records = Records(*[cat(f"{name}/{f}") for f in Records._fields])
        compile_s, run_s = (sum(p[3]["algorithms"][name][t] for p in parts)
                            for t in ("compile_seconds", "run_seconds"))
        prefix = f"{name}/final/"
        final = {key.removeprefix(prefix): cat(key) for key in first if key.startswith(prefix)}
        runs[name] = SweepResult(totals, records, compile_s, run_s, final or None)
    seed_ids = np.concatenate([p[2]["seed_ids"] for p in parts])
    return ExperimentResult(built, seed_ids, cfg.horizon, runs)


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent,
                              capture_output=True, text=True, timeout=5).stdout.strip() or None
    except Exception:
        return None


def write_folder(out_dir, config: dict, summary: dict, arr: dict, plot=None, log=print,
                 figures: bool | None = None) -> dict:
    """Write a run folder atomically, file by file: ``config.json``, ``arrays.npz``, the
    figures ``plot(folder)`` draws (named in ``meta.figures``) unless ``figures`` is False
    (None: :func:`gsjax.plotting.figures_default`), ``summary.json``; returns ``summary``.
    Leftover temporary files go first; in a multi-process run only process 0 writes."""
    if not distributed.is_writer():
        return summary
    out = Path(out_dir)
    results.remove_orphan_tmps_in(out, RUN_FILE_SUFFIXES)
    results.write_json(out / "config.json", config)
    results.write_npz(out / "arrays.npz", arr)
    if plot is not None and (plotting.figures_default() if figures is None else figures):
        summary["meta"]["figures"] = [p.name for p in plot(out)]
    results.write_json(out / "summary.json", summary)
    log(f"wrote {out}/summary.json")
    if summary["meta"].get("figures"):
        log(f"figures: {', '.join(str(out / f) for f in summary['meta']['figures'])}")
    return summary


def remove_run(folder) -> list[Path]:
    """Delete the files a run wrote in ``folder`` (its JSON, arrays, the figures its summary
    names, the checkpoint and its parts), other files staying; returns the paths deleted."""
    out = Path(folder)
    try:
        figures = [Path(f).name for f in read_json(out / "summary.json")["meta"]["figures"]]
    except (OSError, ValueError, KeyError, TypeError):
        figures = []
    removed = []
    for name in (checkpoint.FILENAME, "summary.json", "arrays.npz", *figures, "config.json"):
        path = out / name
        if path.is_file():
            path.unlink()
            removed.append(path)
    if (out / checkpoint.PARTS).is_dir():
        checkpoint.remove(out)
        removed.append(out / checkpoint.PARTS)
    return removed


def write_results(res, out_dir, log=print, figures: bool | None = None, extra_meta=None) -> dict:
    """Write the run folder of an :class:`ExperimentResult` (:func:`write_folder`)."""
    cfg = res.built.cfg
    summary = summarise(res)
    summary["meta"].update(config_hash=config_hash(cfg), git_commit=_git_commit(),
                           **(extra_meta or {}))
    arr = arrays(res)
    plot = lambda out: plotting.plot_all(arr, out, name=cfg.name)  # noqa: E731
    return write_folder(out_dir, config_to_dict(cfg), summary, arr, plot, log, figures)


@contextlib.contextmanager
def run_folder(out_dir, config: dict, checkpoints: bool = True):
    """The folder of a run under way, its ``config.json`` written first (unless a checkpoint's
    is there). Yields ``(folder, checkpoint folder or None)``; with ``checkpoints``, the
    checkpoint is removed once the block has written the results."""
    out = Path(out_dir)
    writer = distributed.is_writer()  # a multi-process run: process 0 only
    if writer:
        out.mkdir(parents=True, exist_ok=True)
        if not (out / checkpoint.FILENAME).exists():
            results.write_json(out / "config.json", config)
    yield out, (out if checkpoints else None)
    if checkpoints and writer:
        checkpoint.remove(out)


def run_config(cfg: ExperimentConfig, out_dir, log=print, figures: bool | None = None,
               seed_start: int = 0, progress=None, chunk_rounds: int | None = None,
               checkpoints: bool = True, buffer: int | None = None,
               checkpoint_every: float | None = None) -> dict:
    """Run a validated config into a folder (:func:`run_folder`, :func:`write_results`);
    returns the summary. ``seed_start``: the global id of the first seed (hosts split a sweep
    into disjoint ranges, ``gsjax merge`` joins them); the rest as :func:`run_experiment`."""
    t0 = time.perf_counter()
    built = build(cfg, seed_start)
    with run_folder(out_dir, config_to_dict(cfg), checkpoints) as (out, ck_dir):
        log(f"{cfg.name}: {cfg.seeds} seeds x {cfg.horizon} rounds, "
            f"{built.structure.num_criteria} criteria over {built.structure.num_coords} "
            "coordinates")
        res = run_experiment(cfg, built, log=log, chunk_rounds=chunk_rounds, progress=progress,
                             checkpoint_dir=ck_dir, buffer=buffer,
                             checkpoint_every=checkpoint_every)
        return write_results(res, out, log=log, figures=figures,
                             extra_meta={"wall_seconds": time.perf_counter() - t0,
                                         "seed_start": seed_start, **distributed.meta()})
