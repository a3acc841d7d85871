r"""``gsjax tune``: hyperparameters by gradient descent through whole runs.

The objective is the mean over tuning seeds of a run's regret, prediction regret plus movement
cost, ``sum_t (L(s_t) - L(s*)) + lambda sum_t ||s_t - s_{t-1}||_1``:

* bandit configs: of the RELAXED algorithm (:mod:`gsjax.relaxed`; settings from the config's
  ``[relaxed]`` table), differentiable in ``beta``, ``lambda_reg`` and the trigger threshold
  (``environment = "adult"``: on the smoothed environment, :func:`gsjax.fairness.smooth`, whose
  loss is not a step function of the threshold);
* ``kind = "oco"`` configs (Section 6): of the algorithm itself, which needs no relaxation for
  its step size: the coins ``u_t < p`` do not depend on ``eta`` and the projection is a clip,
  so the run is differentiable in ``eta`` almost everywhere (the adversary's target is a step
  function of the previous state: no gradient flows through it).

Parameterisation (choice): Adam (optax) on the LOGARITHM of every positive quantity, so that
steps are relative and positivity needs no projection: ``log beta`` (one value shared by the
criteria, as the config's ``beta``), ``log lambda_reg_i`` (one per criterion), ``log log c``
for the trigger (``c > 1`` whatever the step), ``log eta_scale``. The seeds are fixed during
tuning (common random numbers), so the objective is a deterministic function of the
parameters; the reported ``final`` point is the iterate with the lowest objective seen, or
(``--select hard``, bandit configs) the one whose HARD run has the lowest regret on the tuning
seeds.

Outputs (``--out DIR``): ``tune.json`` in the issue's schema::

    {"params": {NAME: {"initial": x, "final": x}},
     "objective": {"initial": {"mean", "stderr"}, "final": {"mean", "stderr"}},
     "heldout_hard": {"initial": {"mean", "stderr"}, "final": {"mean", "stderr"}},
     "gradient_check": {"max_rel_error": x}}

``heldout_hard`` is the HARD algorithm's regret (prediction + movement) on seeds not used for
tuning (global ids ``S .. S + H - 1``). ``gradient_check`` compares the autodiff gradient of the
objective at the initial point with central finite differences of the same objective
(step ``1e-6`` in the log-parameters; float64 by default); the error of component ``i`` is
``|g_i - fd_i| / max(|fd_i|, 1e-6 max_j |fd_j|)``. ``trace.json`` holds the objective and the
parameters at every step, the evaluation counts (seed-rounds) and wall times.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from gsjax import experiment, relaxed, results, runner
from gsjax.config import ConfigError, RelaxedConfig, find_config, load_config
from gsjax.oco import algorithms as algs
from gsjax.oco.config import config_kind, load_oco_config
from gsjax.oco.experiment import entry_params, spec_of
from gsjax.oco.problem import make_problem
from gsjax.oco.runner import run_seed

__all__ = ["TUNABLE", "tune", "add_parser"]

TUNABLE = ("beta", "lambda_reg", "trigger", "eta_scale")
_BANDIT_PARAMS = ("beta", "lambda_reg", "trigger")
_ALWAYS_SOLVE = ("linucb", "joint_linucb")  # no trigger to tune
_FD_STEP = 1e-6


def _parse_names(params) -> list[str]:
    names = [p.strip() for p in (params.split(",") if isinstance(params, str) else params)]
    names = [p for p in names if p]
    if not names:
        raise ConfigError("--params", f"name at least one parameter; allowed: {list(TUNABLE)}")
    for p in names:
        if p not in TUNABLE:
            raise ConfigError("--params", f"unknown parameter {p!r}; allowed: {list(TUNABLE)}")
    if len(set(names)) != len(names):
        raise ConfigError("--params", f"parameters must be distinct; got {names}")
    return names


def _check_counts(steps, lr, seeds, heldout):
    if steps < 0:
        raise ConfigError("--steps", f"must be >= 0, got {steps}")
    if not (lr > 0 and math.isfinite(lr)):
        raise ConfigError("--lr", f"must be a finite number > 0, got {lr}")
    if seeds is not None and seeds < 1:
        raise ConfigError("--seeds", f"must be >= 1, got {seeds}")
    if heldout is not None and heldout < 1:
        raise ConfigError("--heldout-seeds", f"must be >= 1, got {heldout}")


def _sets(overrides, seeds, horizon, *more) -> list[str]:
    """The ``--set`` overrides, then ``more``, then the ``--seeds`` and ``--horizon`` ones."""
    sets = [*overrides, *more]
    if seeds is not None:
        sets.append(f"seeds={seeds}")
    if horizon is not None:
        sets.append(f"horizon={horizon}")
    return sets


def _pick_entry(cfg, algorithm: str | None,
                preferred=lambda e: e.algorithm in ("lazy", "async_lazy")):
    """The entry named ``algorithm``; by default the first ``preferred`` entry, else the first
    (bandit: every algorithm has a relaxed form, the first lazy or async entry is preferred)."""
    entries = list(cfg.algorithms)
    if algorithm is None:
        return ([e for e in entries if preferred(e)] or entries)[0]
    for e in entries:
        if e.name == algorithm:
            return e
    raise ConfigError("--algorithm", f"no entry {algorithm!r}; entries: "
                                     f"{[e.name for e in entries]}")


def _descend(f, u0: dict, steps: int, lr: float, log):
    """Adam on the log-parameters of ``f(u) -> (objective, aux)``; returns (jitted f, best u,
    trace, gradient check)."""
    value = runner.jit(f)
    value_and_grad = runner.jit(jax.value_and_grad(f, has_aux=True))
    opt = optax.adam(lr)
    u = {k: jnp.asarray(v) for k, v in u0.items()}
    st = opt.init(u)
    trace = []
    best = (float("inf"), u)
    g0 = None
    for i in range(steps + 1):
        (val, _), g = value_and_grad(u)
        val = float(val)
        if not math.isfinite(val):
            raise FloatingPointError(f"objective is {val} at step {i}")
        if g0 is None:
            g0 = g
        trace.append({"step": i, "objective": val,
                      "u": {k: np.asarray(v).tolist() for k, v in u.items()}})
        if val < best[0]:
            best = (val, u)
        if log is not None:
            log(f"step {i:3d}: objective {val:.4f}")
        if i == steps:
            break
        upd, st = opt.update(g, st, u)
        u = optax.apply_updates(u, upd)
    # Finite differences of the same objective at the initial point.
    flat0, unravel = ravel_pytree({k: jnp.asarray(v) for k, v in u0.items()})
    gflat, _ = ravel_pytree(g0)
    fd = np.zeros(flat0.shape[0])
    for j in range(flat0.shape[0]):
        hi = float(value(unravel(flat0.at[j].add(_FD_STEP)))[0])
        lo = float(value(unravel(flat0.at[j].add(-_FD_STEP)))[0])
        fd[j] = (hi - lo) / (2 * _FD_STEP)
    ga = np.asarray(gflat, np.float64)
    scale = max(np.max(np.abs(fd)), 1e-300)
    rel = np.abs(ga - fd) / np.maximum(np.abs(fd), 1e-6 * scale)
    check = {"max_rel_error": float(np.max(rel)), "autodiff": ga.tolist(), "finite_difference":
             fd.tolist(), "step": _FD_STEP, "evaluations": 2 * int(flat0.shape[0])}
    return value, best[1], trace, check


def _result(params: dict, objective, heldout, check: dict) -> dict:
    """``tune.json``; ``objective`` and ``heldout`` are the per-seed values at the initial and
    the final point."""
    def pair(x):
        return {"initial": results.mean_stderr(x[0]), "final": results.mean_stderr(x[1])}

    return {"params": params, "objective": pair(objective), "heldout_hard": pair(heldout),
            "gradient_check": {"max_rel_error": check["max_rel_error"]}}


def _meta(path, entry, kind: str, dtype: str, overrides, S: int, H: int, T: int, steps: int,
          lr: float, check: dict, wall: dict, **own) -> dict:
    """``trace.json``'s ``meta``: the run's facts with the family's ``own`` ones, the work in
    seed-rounds and the wall times."""
    rounds = {"tuning_gradient_steps": (steps + 1) * S * T,
              "gradient_check": check["evaluations"] * S * T, "heldout_hard": 2 * H * T}
    return {"config": str(path), "algorithm": entry.name, "kind": kind, "dtype": dtype,
            "overrides": list(overrides), "tuning_seeds": S, "heldout_seeds": H, "horizon": T,
            "steps": steps, "lr": lr, **own, "seed_rounds": rounds, "wall_seconds": wall,
            "gradient_check": check}


# ---------------------------------------------------------------------------------------------
# Bandit configs (the relaxed form of any algorithm)
# ---------------------------------------------------------------------------------------------


def _tune_bandit(path, names, steps, lr, seeds, heldout, horizon, algorithm, overrides, dtype,
                 log, select="relaxed"):
    cfg = load_config(path, _sets(overrides, seeds, horizon, f"dtype={dtype}"))
    entry = _pick_entry(cfg, algorithm)
    for p in names:
        if p not in _BANDIT_PARAMS:
            raise ConfigError("--params", f"{p!r} applies to kind = 'oco' configs; a bandit "
                                          f"config tunes {list(_BANDIT_PARAMS)}")
    if "trigger" in names and entry.algorithm in _ALWAYS_SOLVE:
        raise ConfigError("--params", f"'trigger' has no effect on {entry.algorithm} (it "
                                      "re-optimises every round)")
    if "beta" in names and entry.agent.beta_mode != "constant":
        raise ConfigError("--params", "'beta' is tuned only with agent.beta_mode = 'constant'")
    if "beta" in names and entry.agent.beta <= 0:
        raise ConfigError("--params", "'beta' is tuned in log space: the initial beta must be "
                                      f"> 0, got {entry.agent.beta}")
    rc = cfg.relaxed or RelaxedConfig()
    cfg = dataclasses.replace(cfg, grid=(), algorithms=(entry,))
    S, T = cfg.seeds, cfg.horizon
    H = heldout or S
    t_build = time.perf_counter()
    built = experiment.build(cfg)
    held = experiment.build(dataclasses.replace(cfg, seeds=H), seed_start=S)
    ba = built.algorithms[0]
    fdtype = built.dtype
    root = jax.random.key(cfg.root_seed)
    keys = runner.seed_keys(root, jnp.arange(S))
    rp = relaxed.relax_params(rc.temperature, rc.solve_temperature, rc.tie_break, fdtype)
    obj = relaxed.make_objective(entry.algorithm, built.structure, ba.spec, T,
                                 built.problem_per_seed, rc.block)
    base = ba.params
    k = built.structure.num_criteria
    # One log-parameter per name: log beta (shared by the criteria), log lambda_reg_i, log log c.
    field = {"beta": "beta", "lambda_reg": "lambda_reg", "trigger": "log_trigger"}
    u0 = {n: jnp.log(getattr(base, field[n])) for n in _BANDIT_PARAMS if n in names}
    if "beta" in u0:
        u0["beta"] = jnp.log(jnp.asarray(entry.agent.beta, fdtype))

    def to_params(u):
        p = base._replace(**{field[n]: jnp.exp(v) for n, v in u.items()})
        return p._replace(beta=jnp.broadcast_to(p.beta, (k,))) if "beta" in u else p

    def hard(b, seed_ids, us):
        """(G, S) the HARD run's regret (prediction + movement) at each point of ``us``, all in
        one grid sweep (one compilation)."""
        stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *[to_params(u) for u in us])
        res = runner.sweep(root, seed_ids, ba.algo, b.structure, b.problem, stacked,
                           jnp.full((len(us),), ba.move_cost, fdtype), T, cfg.record_every,
                           b.problem_per_seed, grid=True)
        return np.asarray(res.totals.prediction_regret + res.totals.movement_cost)

    # The relaxed runs' environment (Adult's step-function loss smoothed); held-out runs stay hard.
    rprob = built.structure.env.relaxed(built.problem, rc)

    def f(u):
        return obj(to_params(u), rp, keys, rprob, ba.move_cost)

    t0 = time.perf_counter()
    value, u_best, trace, check = _descend(f, u0, steps, lr, log)
    sel_step = min(range(len(trace)), key=lambda i: trace[i]["objective"])
    if select == "hard":  # the iterate with the lowest HARD regret on the tuning seeds
        us = [{k: jnp.asarray(v, fdtype) for k, v in t["u"].items()} for t in trace]
        tun = np.mean(hard(built, np.arange(S), us), 1)
        for t, v in zip(trace, tun):
            t["hard_tuning"] = float(v)
        sel_step = int(np.argmin(tun))
        u_best = us[sel_step]
    t1 = time.perf_counter()

    def show(name, u):
        p = to_params(u)
        if name == "beta":
            return float(p.beta[0])
        if name == "lambda_reg":
            return np.asarray(p.lambda_reg, np.float64).tolist()
        return float(np.exp(p.log_trigger))  # the ratio c

    result = _result({n: {"initial": show(n, u0), "final": show(n, u_best)} for n in names},
                     [np.asarray(tot.prediction_regret + tot.movement_cost)
                      for tot in (value(u0)[1], value(u_best)[1])],
                     hard(held, np.arange(S, S + H), [u0, u_best]), check)
    t2 = time.perf_counter()
    meta = _meta(path, entry, "bandit", dtype, overrides, S, H, T, steps, lr, check,
                 {"build": t0 - t_build, "tuning": t1 - t0, "evaluation": t2 - t1},
                 relaxed=dataclasses.asdict(rc), trigger_reported_as="ratio c (> 1)",
                 select=select, selected_step=sel_step)
    meta["seed_rounds"]["select_hard"] = (steps + 1) * S * T if select == "hard" else 0
    return result, trace, meta


# ---------------------------------------------------------------------------------------------
# OCO configs (Section 6): OGD's step size
# ---------------------------------------------------------------------------------------------


def _tune_oco(path, names, steps, lr, seeds, heldout, horizon, algorithm, overrides, point, log):
    for p in names:
        if p != "eta_scale":
            raise ConfigError("--params", f"{p!r} is a bandit parameter; a kind = 'oco' config "
                                          "tunes ['eta_scale']")
    cfg = load_oco_config(path, _sets(overrides, seeds, horizon))
    entry = _pick_entry(cfg, algorithm, lambda e: e.algorithm != "ogd")
    T, S = cfg.horizons[0], cfg.seeds
    H = heldout or S
    spec = spec_of(cfg)
    with jax.enable_x64(cfg.dtype == "float64"):
        dtype = jnp.float64 if cfg.dtype == "float64" else jnp.float32
        pc = cfg.problem
        problem = make_problem(spec, pc.s0, pc.target_low, pc.target_high, pc.weights, pc.drift,
                               dtype)
        params, budgets = entry_params(cfg, entry, T, dtype)
        if not 0 <= point < params.p.shape[0]:
            raise ConfigError("--point", f"entry {entry.name!r} has {params.p.shape[0]} budget "
                                         f"points; got {point}")
        base = algs.OCOParams(p=params.p[point:point + 1], eta=params.eta[point:point + 1])
        algo = algs.make(entry.algorithm, spec)
        root = jax.random.key(cfg.root_seed)
        keys = runner.seed_keys(root, jnp.arange(S, dtype=jnp.uint32))
        hkeys = runner.seed_keys(root, jnp.arange(S, S + H, dtype=jnp.uint32))

        def per_seed(u, ks):
            prm = base._replace(eta=base.eta * jnp.exp(u["eta_scale"]))
            res, _ = jax.vmap(lambda key: run_seed(key, algo, spec, problem, prm, T))(ks)
            return (res.loss_regret.sum(-1) + cfg.move_cost * res.movement.sum(-1))[:, 0]

        def f(u):
            tot = per_seed(u, keys)
            return jnp.mean(tot), tot

        u0 = {"eta_scale": jnp.zeros((), dtype)}
        t0 = time.perf_counter()
        value, u_best, trace, check = _descend(f, u0, steps, lr, log)
        t1 = time.perf_counter()
        held = runner.jit(per_seed)
        scale0 = entry.eta_scale
        final = scale0 * float(jnp.exp(u_best["eta_scale"]))
        result = _result({"eta_scale": {"initial": scale0, "final": final}},
                         [value(u)[1] for u in (u0, u_best)],
                         [held(u, hkeys) for u in (u0, u_best)], check)
        t2 = time.perf_counter()
    meta = _meta(path, entry, "oco", cfg.dtype, overrides, S, H, T, steps, lr, check,
                 {"tuning": t1 - t0, "evaluation": t2 - t1},
                 budget=np.asarray(budgets[point]).tolist(), point=point,
                 eta_initial=np.asarray(base.eta[0]).tolist())
    return result, trace, meta


def tune(config, params, steps: int = 30, lr: float = 0.1, seeds: int | None = None,
         heldout_seeds: int | None = None, horizon: int | None = None,
         algorithm: str | None = None, overrides=(), dtype: str = "float64", point: int = 0,
         select: str = "relaxed", out=None, log=print) -> dict:
    """Tune ``params`` (names from :data:`TUNABLE`) of one entry of ``config``; see the module
    docstring. Returns the ``tune.json`` dict; with ``out`` writes ``tune.json`` and
    ``trace.json`` there.

    Args:
      config: a config path or built-in name.
      params: names, a list or a comma-separated string.
      steps: Adam steps; lr: Adam's step size on the log-parameters.
      seeds: tuning seeds (global ids ``0 .. S-1``; default the config's); heldout_seeds:
        seeds ``S .. S+H-1`` for the hard evaluation (default ``S``).
      horizon: overrides the config's (OCO: the first of its horizons is used).
      algorithm: the entry to tune (default: the first lazy entry).
      overrides: ``--set`` strings.
      dtype: bandit configs run in this dtype (default float64: the finite-difference check
        needs it); OCO configs keep their own.
      point: OCO only: the entry's budget point.
      select: which iterate is ``final``: ``"relaxed"`` (lowest relaxed objective) or
        ``"hard"`` (lowest hard regret on the tuning seeds: one hard run of the tuning seeds
        per iterate). OCO configs tune the hard run itself: both are the same.
    """

    names = _parse_names(params)
    _check_counts(steps, lr, seeds, heldout_seeds)
    if dtype not in ("float32", "float64"):
        raise ConfigError("--dtype", f"must be 'float32' or 'float64', got {dtype!r}")
    if select not in ("relaxed", "hard"):
        raise ConfigError("--select", f"must be 'relaxed' or 'hard', got {select!r}")
    path = find_config(str(config))
    if config_kind(path) == "oco":
        result, trace, meta = _tune_oco(path, names, steps, lr, seeds, heldout_seeds, horizon,
                                        algorithm, overrides, point, log)
    else:
        result, trace, meta = _tune_bandit(path, names, steps, lr, seeds, heldout_seeds,
                                           horizon, algorithm, overrides, dtype, log, select)
    if out is not None:
        o = Path(out)
        o.mkdir(parents=True, exist_ok=True)
        results.write_json(o / "tune.json", result)
        results.write_json(o / "trace.json", {"meta": meta, "trace": trace})
        if log is not None:
            log(f"wrote {o}/tune.json")
    return result


def _cmd_tune(args) -> int:
    tune(args.config, args.params, steps=args.steps, lr=args.lr, seeds=args.seeds,
         heldout_seeds=args.heldout_seeds, horizon=args.horizon, algorithm=args.algorithm,
         overrides=list(args.set or []), dtype=args.dtype, point=args.point,
         select=args.select,
         out=args.out or Path("runs") / "tune" / Path(args.config).stem,
         log=(lambda *a, **k: None) if args.quiet else print)
    return 0


def add_parser(sub) -> None:
    """Register ``gsjax tune`` on the CLI's subparsers."""
    t = sub.add_parser("tune", help="tune beta, lambda_reg, the trigger or OGD's step size by "
                                    "gradient descent through whole (relaxed) runs")
    t.add_argument("config", help="config path or built-in name")
    t.add_argument("--params", required=True,
                   help=f"comma-separated, from {','.join(TUNABLE)}")
    t.add_argument("--steps", type=int, default=30, help="Adam steps (default 30)")
    t.add_argument("--lr", type=float, default=0.1,
                   help="Adam step size on the log-parameters (default 0.1)")
    t.add_argument("--seeds", type=int, help="tuning seeds (default: the config's)")
    t.add_argument("--heldout-seeds", type=int, help="held-out seeds (default: as many)")
    t.add_argument("--horizon", type=int, help="override the horizon T")
    t.add_argument("--algorithm", help="the entry to tune (default: the first lazy one)")
    t.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    t.add_argument("--dtype", default="float64", help="bandit configs: float64 (default) or "
                                                      "float32")
    t.add_argument("--point", type=int, default=0, help="OCO: the entry's budget point")
    t.add_argument("--select", default="relaxed", choices=("relaxed", "hard"),
                   help="final iterate: lowest relaxed objective (default) or lowest hard "
                        "regret on the tuning seeds")
    t.add_argument("--out", type=Path, help="output folder (default runs/tune/NAME)")
    t.add_argument("--quiet", action="store_true")
    t.set_defaults(func=_cmd_tune)
