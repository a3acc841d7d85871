"""From an :class:`~gsjax.oco.config.OCOConfig` to results: per horizon ``T`` and entry, all
budget points run in one program (:mod:`gsjax.oco.runner`), with :mod:`gsjax.experiment`'s run
folder and checkpoints (run ``ENTRY/T{T}``); :func:`fit_exponents` fits exponents in ``T``
beside the paper's (Section 6.3), :func:`tradeoff` the best budget.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gsjax import results
from gsjax.config import ConfigError, default_record_every, dict_hash
from gsjax.experiment import (memory_estimate, merge_parts, run_folder, run_meta, run_sweeps,
                              write_folder)
from gsjax.oco import algorithms as algs
from gsjax.oco import plotting
from gsjax.oco.config import OCOConfig, OCOEntry, oco_config_to_dict, parse_oco_config
from gsjax.oco.problem import OCOProblem, OCOSpec, diameters, gradient_bounds, make_problem
from gsjax.oco.runner import OCORecords, OCOResult, SweepOutput, hindsight, make_chunked, sweep
from gsjax.runner import auto_chunk, seed_keys

__all__ = ["spec_of", "build_problem", "budget_matrix", "entry_params", "check", "record_every",
           "config_digest", "OCORun", "OCOExperiment", "run_experiment", "summarise",
           "fit_exponents", "tradeoff", "arrays", "merge", "write_results", "run_and_write",
           "paper_exponents", "replot", "memory_needed"]


def spec_of(cfg: OCOConfig) -> OCOSpec:
    pc = cfg.problem
    return OCOSpec(loss=pc.loss, targets=pc.targets, adversary=pc.adversary,
                   num_components=pc.num_components, block_dim=pc.block_dim,
                   switch_period=pc.switch_period)


def build_problem(cfg: OCOConfig) -> tuple[OCOSpec, OCOProblem, jnp.dtype]:
    """``(spec, problem, dtype)`` of a config; call it under ``jax.enable_x64`` for float64."""
    spec, pc = spec_of(cfg), cfg.problem
    dtype = jnp.float64 if cfg.dtype == "float64" else jnp.float32
    return spec, make_problem(spec, pc.s0, pc.target_low, pc.target_high, pc.weights, pc.drift,
                              dtype), dtype


def budget_matrix(entry: OCOEntry, horizon: int, k: int) -> np.ndarray:
    """Budgets ``M`` per point and component, ``(P, k)``; ConfigError if ``M > T``."""
    if entry.budget_kind == "none":
        return np.full((1, k), float(horizon))
    key = "budget_exponents" if entry.budget_kind == "exponent" else "budgets"
    rows = []
    for i, b in enumerate(entry.budgets):
        vals = np.broadcast_to(np.asarray(b, np.float64), (k,))
        M = float(horizon) ** vals if entry.budget_kind == "exponent" else vals.copy()
        if np.any(M > horizon):
            raise ConfigError(f"algorithms.{entry.name}.{key}[{i}]",
                              f"budget {M.max():g} exceeds the horizon T = {horizon}")
        rows.append(np.minimum(M, horizon))
    return np.stack(rows)


def entry_params(cfg: OCOConfig, entry: OCOEntry, horizon: int, dtype) -> tuple:
    """``(OCOParams (P, k), budgets (P, k))`` of one entry at one horizon (host-side rule)."""
    spec, pc = spec_of(cfg), cfg.problem
    k = spec.num_components
    g_comp, g_all = gradient_bounds(spec, pc.target_low, pc.target_high, pc.weights)
    d_comp, d_all = diameters(spec)
    budgets = budget_matrix(entry, horizon, k)
    etas = np.empty_like(budgets)
    for j, M in enumerate(budgets):
        if entry.algorithm == "componentwise_lazy_ogd":
            etas[j] = [algs.step_size(entry.step_rule, horizon, M[i], d_comp, g_comp[i],
                                      cfg.move_cost, spec.block_dim, entry.eta, entry.eta_scale)
                       for i in range(k)]
        else:
            etas[j] = algs.step_size(entry.step_rule, horizon, M[0], d_all, g_all,
                                     cfg.move_cost, spec.n, entry.eta, entry.eta_scale)
    params = algs.OCOParams(p=jnp.asarray(budgets / horizon, dtype), eta=jnp.asarray(etas, dtype))
    return params, budgets


def check(cfg: OCOConfig) -> None:
    """The checks that need a horizon (budgets <= T), before anything is compiled."""
    for T in cfg.horizons:
        for e in cfg.algorithms:
            budget_matrix(e, T, cfg.problem.num_components)


def record_every(cfg: OCOConfig, horizon: int) -> int:
    """The record interval at one horizon: the config's, or the default for ``horizon``."""
    return cfg.record_every or default_record_every(horizon)


def config_digest(cfg: OCOConfig) -> str:
    """SHA-256 hex digest of the canonical JSON of the resolved config, the entries hashed in
    order (as :func:`gsjax.config.config_hash` for bandit configs); checkpoints carry it."""
    return dict_hash(oco_config_to_dict(cfg))


class OCORun(NamedTuple):
    entry: OCOEntry
    horizon: int
    budgets: np.ndarray  # (P, k)
    p: np.ndarray  # (P, k)
    eta: np.ndarray  # (P, k)
    out: SweepOutput  # result fields (S, P, ...)
    record_every: int


_POINT_FIELDS = ("budgets", "p", "eta")  # OCORun's per-point arrays (in arrays.npz too)


class OCOExperiment(NamedTuple):
    cfg: OCOConfig
    seed_ids: np.ndarray
    runs: dict  # (entry name, T) -> OCORun


def _plan(cfg: OCOConfig, dtype, chunk_rounds: int | None = None) -> dict:
    """Run name ``ENTRY/T{T}`` -> ``(entry, T, record interval, chunk, params, budgets)``."""
    plan = {}
    for T in cfg.horizons:
        every = record_every(cfg, T)
        chunk = auto_chunk(T, every) if chunk_rounds is None else chunk_rounds
        for e in cfg.algorithms:
            plan[f"{e.name}/T{T}"] = (e, T, every, chunk, *entry_params(cfg, e, T, dtype))
    return plan


def run_experiment(cfg: OCOConfig, seed_start: int = 0, log=None,
                   chunk_rounds: int | None = None, checkpoint_dir=None,
                   progress=None, checkpoint_every: float | None = None) -> OCOExperiment:
    """Run every entry at every horizon over the same seeds. ``chunk_rounds``: rounds per
    compiled chunk (default :func:`gsjax.runner.auto_chunk` per horizon; the numbers do not
    depend on it); the rest as :func:`gsjax.experiment.run_sweeps`."""
    check(cfg)
    seed_ids = np.arange(seed_start, seed_start + cfg.seeds, dtype=np.uint32)
    with jax.enable_x64(cfg.dtype == "float64"):
        spec, problem, dtype = build_problem(cfg)
        root = jax.random.key(cfg.root_seed)
        plan = _plan(cfg, dtype, chunk_rounds)

        def run(e, T, every, params, budgets, **hooks):
            out = sweep(root, seed_ids, algs.make(e.algorithm, spec), spec, problem, params, T,
                        every, cfg.record_seeds, **hooks)
            if log is not None:
                tot = out.result.loss_regret.sum(-1).mean(0)
                mv = out.result.movement.sum(-1).mean(0)
                log(f"{e.name:>16s} T={T:<7d} {len(budgets)} budgets: loss regret "
                    f"{_span(tot)}, movement {_span(mv)} (compile {out.compile_seconds:.1f}s, "
                    f"run {out.run_seconds:.1f}s)")
            return out

        done = run_sweeps([(name, T, chunk, functools.partial(run, e, T, every, params, budgets))
                           for name, (e, T, every, chunk, params, budgets) in plan.items()],
                          cfg.seeds, checkpoint_dir, config_digest(cfg), seed_start, log,
                          progress, SweepOutput, {"result": OCOResult, "records": OCORecords},
                          fixed_chunk=chunk_rounds is not None,
                          checkpoint_every=checkpoint_every)
    runs = {(e.name, T): OCORun(e, T, budgets, np.asarray(params.p), np.asarray(params.eta),
                                done[name], every)
            for name, (e, T, every, _, params, budgets) in plan.items()}
    return OCOExperiment(cfg, seed_ids, runs)


def memory_needed(cfg: OCOConfig) -> int:
    """:func:`gsjax.experiment.memory_estimate` of a run of ``cfg``: the largest carry, every
    run's results for every seed and its records for the first ``record_seeds``, from
    ``jax.eval_shape`` on one seed (nothing compiled)."""
    check(cfg)
    carry, kept = 0, 0
    with jax.enable_x64(cfg.dtype == "float64"):
        spec, problem, dtype = build_problem(cfg)
        keys = seed_keys(jax.random.key(cfg.root_seed), jnp.zeros((1,), jnp.uint32))
        for e, T, every, _, params, _ in _plan(cfg, dtype).values():
            init_fn, chunk_fn = make_chunked(algs.make(e.algorithm, spec), spec, T, every, every,
                                             cfg.record_seeds)
            c = jax.eval_shape(init_fn, keys, problem, params)
            record = jax.eval_shape(chunk_fn, c, 0, keys, problem, params)[1]
            result = jax.eval_shape(jax.vmap(lambda c, prob, T=T: hindsight(c, spec, prob, T),
                                             in_axes=(0, None)), c, problem)
            carry = max(carry, memory_estimate(c, None, 0, cfg.seeds))
            kept += memory_estimate(result, None, 0, cfg.seeds)
            kept += memory_estimate(None, record, T // every, min(cfg.record_seeds, cfg.seeds))
    return carry + kept


def _span(x) -> str:
    x = np.atleast_1d(x)
    return f"{x[0]:.1f}" if len(x) == 1 else f"{x.min():.1f}..{x.max():.1f}"


def _point_label(run: OCORun, j: int) -> str | float | list:
    e = run.entry
    if e.budget_kind == "none":
        return "M=T"
    b = e.budgets[j]
    return list(b) if isinstance(b, tuple) else b


def summarise_point(run: OCORun, j: int, move_cost: float) -> dict:
    r = run.out.result
    lr, mv = r.loss_regret[:, j], r.movement[:, j]
    return {
        ("budget_exponent" if run.entry.budget_kind == "exponent" else "budget"):
            _point_label(run, j),
        "M": run.budgets[j].tolist(),
        "p": run.p[j].tolist(),
        "eta": run.eta[j].tolist(),
        "loss_regret": results.mean_stderr(lr.sum(-1)),
        "virtual_regret": results.mean_stderr(r.virtual_regret[:, j].sum(-1)),
        "movement": results.mean_stderr(mv.sum(-1)),
        "lambda_movement": results.mean_stderr(move_cost * mv.sum(-1)),
        "total_regret": results.mean_stderr(lr.sum(-1) + move_cost * mv.sum(-1)),
        "switches": results.mean_stderr(r.switches[:, j]),
        "changes": results.mean_stderr(r.changes[:, j]),
        "loss_regret_per_component": results.mean_stderr(lr),
        "movement_per_component": results.mean_stderr(mv),
        "total_regret_per_component": results.mean_stderr(lr + move_cost * mv),
    }


def paper_exponents(alpha: float) -> dict:
    """Section 6.3 at ``M = T^alpha``: the bound's exponents (loss regret ``T/sqrt(M)``,
    movement ``lambda D M``, total ``max(a, 1-a/2)``), and movement's refined one."""
    return {"loss_regret": 1.0 - alpha / 2.0, "movement": alpha,
            "total_regret": max(alpha, 1.0 - alpha / 2.0), "movement_path_bound": alpha / 2.0}


def _wls_slope(x, y, se):
    """Slope and its standard error of y ~ c + e x, weights 1/se^2 (unit weights if se == 0)."""
    x, y, se = (np.asarray(v, np.float64) for v in (x, y, se))
    weighted = bool(np.all(se > 0))  # else (a deterministic run) OLS, its s.e. from residuals
    w = 1.0 / se**2 if weighted else np.ones_like(x)
    xm, ym = (np.sum(w * v) / np.sum(w) for v in (x, y))
    sxx = np.sum(w * (x - xm) ** 2)
    slope = np.sum(w * (x - xm) * (y - ym)) / sxx
    if weighted:
        return float(slope), float(math.sqrt(1.0 / sxx))
    if len(x) <= 2:
        return float(slope), float("nan")
    resid = y - (ym + slope * (x - xm))
    return float(slope), float(math.sqrt(np.sum(resid**2) / (len(x) - 2) / sxx))


def _per_seed(r: OCOResult, q: str, j: int, move_cost: float) -> np.ndarray:
    """(S,) quantity ``q`` of budget point ``j``, summed over the components."""
    if q == "total_regret":
        return r.loss_regret[:, j].sum(-1) + move_cost * r.movement[:, j].sum(-1)
    return getattr(r, q)[:, j].sum(-1).astype(np.float64)


def fit_exponents(exp: OCOExperiment) -> list[dict]:
    """Log-log exponents in T per entry and budget exponent ``a`` (needs >= 2 horizons):
    ``log E[.] = c + e log T`` by weighted least squares (``Var log mean ~ (se/mean)^2``),
    beside :func:`paper_exponents`."""
    cfg = exp.cfg
    if len(cfg.horizons) < 2:
        return []
    out = []
    for e in cfg.algorithms:
        if e.budget_kind not in ("exponent", "none"):
            continue
        alphas = [1.0] if e.budget_kind == "none" else list(e.budgets)
        for j, a in enumerate(alphas):
            if isinstance(a, tuple):
                continue
            row = {"entry": e.name, "algorithm": e.algorithm, "step_rule": e.step_rule,
                   "budget_exponent": a, "horizons": list(cfg.horizons),
                   "paper": paper_exponents(a)}
            for q in ("loss_regret", "movement", "total_regret", "switches"):
                ms = [results.mean_stderr(_per_seed(exp.runs[(e.name, T)].out.result, q, j,
                                                    cfg.move_cost)) for T in cfg.horizons]
                means, ses = (np.asarray([m[x] for m in ms]) for x in ("mean", "stderr"))
                slope, sse = (_wls_slope(np.log(cfg.horizons), np.log(means), ses / means)
                              if np.all(means > 0) else (None, None))
                row[q] = {"exponent": slope, "stderr": sse, "means": means.tolist()}
            out.append(row)
    return out


def tradeoff(exp: OCOExperiment) -> list[dict]:
    """Per entry with >= 3 scalar budget points, horizon and lambda: the M minimising the mean
    total regret, beside the paper's bound optimum ``M* = (G T / (sqrt 2 lambda))^{2/3}``
    (from ``lambda D M + D G sqrt 2 T / sqrt M``)."""
    cfg, pc = exp.cfg, exp.cfg.problem
    _, g_all = gradient_bounds(spec_of(cfg), pc.target_low, pc.target_high, pc.weights)
    out = []
    for e in cfg.algorithms:
        if (e.budget_kind == "none" or any(isinstance(b, tuple) for b in e.budgets)
                or len(e.budgets) < 3):
            continue
        for T in cfg.horizons:
            run = exp.runs[(e.name, T)]
            r = run.out.result
            M = run.budgets[:, 0]
            for lam in cfg.move_costs:
                tot = (r.loss_regret.sum(-1) + lam * r.movement.sum(-1)).mean(0)
                j = int(np.argmin(tot))
                m_paper = min(float(T), (g_all * T / (math.sqrt(2.0) * lam)) ** (2.0 / 3.0)) \
                    if lam > 0 else float(T)
                out.append({"entry": e.name, "horizon": T, "lambda": lam, "best_M": float(M[j]),
                            "best_point": _point_label(run, j), "best_total_regret": float(tot[j]),
                            "total_regret_at_M_equal_T": float(tot[np.argmax(M)]),
                            "paper_bound_optimum_M": m_paper})
    return out


def summarise(exp: OCOExperiment) -> dict:
    """The ``summary.json`` content."""
    cfg = exp.cfg
    runs = {}
    for (name, T), run in exp.runs.items():
        runs.setdefault(name, {"algorithm": run.entry.algorithm, "step_rule": run.entry.step_rule,
                               "horizons": {}})
        runs[name]["horizons"][str(T)] = [summarise_point(run, j, cfg.move_cost)
                                          for j in range(len(run.budgets))]
    return {
        "meta": {"kind": "oco", "name": cfg.name, "seeds": cfg.seeds,
                 "horizons": list(cfg.horizons), "seed_start": int(exp.seed_ids[0]),
                 "dtype": cfg.dtype, "move_cost": cfg.move_cost,
                 **run_meta([r.out for r in exp.runs.values()])},
        "algorithms": runs,
        "fits": fit_exponents(exp),
        "tradeoff": tradeoff(exp),
    }


def arrays(exp: OCOExperiment) -> dict:
    """Flat ``name/T{T}/field`` arrays for ``arrays.npz`` (results ``(S, P, ...)``)."""
    out = {"seed_ids": exp.seed_ids}
    for (name, T), run in exp.runs.items():
        pre = f"{name}/T{T}"
        out.update(results.flatten(pre, run.out.result))
        out.update({f"{pre}/{f}": getattr(run, f) for f in _POINT_FIELDS})
        if run.out.records is not None:
            out[f"{pre}/rounds"] = np.arange(run.record_every, T + 1, run.record_every)
            out.update(results.flatten(f"{pre}/records", run.out.records))
    return out


def merge(folders) -> tuple[OCOExperiment, dict]:
    """Combine run folders of one config over disjoint seed ranges, as
    :func:`gsjax.experiment.merge` (the first ``record_seeds`` seeds' records kept); returns the
    experiment and the folders' summed ``meta`` timings (for :func:`write_results`)."""
    parts = merge_parts(folders, parse_oco_config)
    arrs = [arr for _, _, arr, _ in parts]
    seed_ids = np.concatenate([arr["seed_ids"] for arr in arrs])
    cfg = dataclasses.replace(parts[0][1], seeds=len(seed_ids))
    check(cfg)

    def cat(prefix, fields, keep=None):  # None when the folders have no such arrays
        if f"{prefix}/{fields[0]}" not in arrs[0]:
            return None
        return [np.concatenate([arr[f"{prefix}/{f}"] for arr in arrs])[:keep] for f in fields]

    runs = {}
    for e in cfg.algorithms:
        for T in cfg.horizons:
            pre = f"{e.name}/T{T}"
            records = cat(f"{pre}/records", OCORecords._fields, cfg.record_seeds)
            out = SweepOutput(OCOResult(*cat(pre, OCOResult._fields)),
                              None if records is None else OCORecords(*records), 0.0, 0.0)
            runs[(e.name, T)] = OCORun(e, T, *(arrs[0][f"{pre}/{f}"] for f in _POINT_FIELDS),
                                       out, record_every(cfg, T))
    timings = {t: sum(summary["meta"][t] for *_, summary in parts)
               for t in ("compile_seconds", "run_seconds")}
    return OCOExperiment(cfg, seed_ids, runs), timings


def write_results(exp: OCOExperiment, out_dir, log=print, figures: bool | None = None,
                  extra_meta=None) -> dict:
    """Write the run folder of an experiment (:func:`gsjax.experiment.write_folder`)."""
    summary = summarise(exp)
    summary["meta"].update(extra_meta or {})
    arr = arrays(exp)
    plot = lambda out: plotting.plot_all(exp.cfg, summary, arr, out)  # noqa: E731
    return write_folder(out_dir, oco_config_to_dict(exp.cfg), summary, arr, plot, log, figures)


def run_and_write(cfg: OCOConfig, out_dir, log=print, figures: bool | None = None,
                  seed_start: int = 0, chunk_rounds: int | None = None, progress=None,
                  checkpoints: bool = True, checkpoint_every: float | None = None) -> dict:
    """Run a validated config into a folder, as :func:`gsjax.experiment.run_config`."""
    t0 = time.perf_counter()
    check(cfg)
    with run_folder(out_dir, oco_config_to_dict(cfg), checkpoints) as (out, ck_dir):
        log(f"{cfg.name}: {cfg.seeds} seeds x horizons {list(cfg.horizons)}, "
            f"{cfg.problem.loss} loss, {cfg.problem.targets} targets, "
            f"{cfg.problem.num_components} components x {cfg.problem.block_dim}")
        exp = run_experiment(cfg, seed_start=seed_start, log=log, chunk_rounds=chunk_rounds,
                             checkpoint_dir=ck_dir, progress=progress,
                             checkpoint_every=checkpoint_every)
        return write_results(exp, out, log=log, figures=figures,
                             extra_meta={"wall_seconds": time.perf_counter() - t0})


def replot(run_dir) -> list[Path]:
    """Redraw a run folder's figures from its ``config.json``, ``summary.json``, ``arrays.npz``."""
    d = Path(run_dir)
    cfg = parse_oco_config(results.read_json(d / "config.json"))
    return plotting.plot_all(cfg, results.read_json(d / "summary.json"),
                             results.read_npz(d / "arrays.npz"), d)
