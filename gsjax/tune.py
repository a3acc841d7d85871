r"""``gsjax tune``: hyperparameters by gradient descent through whole runs.

The objective is the mean over tuning seeds of a run's regret plus movement cost,
``sum_t (L(s_t) - L(s*)) + lambda sum_t ||s_t - s_{t-1}||_1``:

* bandit configs: of the RELAXED algorithm (:mod:`gsjax.relaxed`, the config's ``[relaxed]``
  table), differentiable in ``beta``, ``lambda_reg`` and the trigger threshold (``environment =
  "adult"``: on the smoothed environment, :func:`gsjax.fairness.smooth`);
* ``kind = "oco"`` configs (Section 6): of the algorithm itself: the coins ``u_t < p`` do not
  depend on ``eta`` and the projection is a clip, so the run is differentiable in ``eta`` almost
  everywhere (no gradient flows through the adversary's target).

Adam (optax) runs on the LOGARITHM of every positive quantity (relative steps, no projection):
``log beta``, ``log lambda_reg_i``, ``log log c`` for the trigger (``c > 1``), ``log
eta_scale``. The seeds are fixed (common random numbers); ``final`` is the iterate with the
lowest objective, or (``--select hard``) the lowest HARD regret on the tuning seeds.

Outputs (``--out DIR``): ``tune.json``::

    {"params": {NAME: {"initial": x, "final": x}},
     "objective": {"initial": {"mean", "stderr"}, "final": {"mean", "stderr"}},
     "heldout_hard": {"initial": {"mean", "stderr"}, "final": {"mean", "stderr"}},
     "gradient_check": {"max_rel_error": x}}

``heldout_hard``: the HARD algorithm's regret on the seeds ``S .. S + H - 1``.
``gradient_check``: the autodiff gradient at the initial point against central differences
(step ``1e-6`` in the log-parameters), error ``|g_i - fd_i| / max(|fd_i|, 1e-6 max_j |fd_j|)``.
``trace.json``: the objective and parameters at every step, the work (seed-rounds), wall times.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from gsjax import es, experiment, relaxed, results, runner
from gsjax.config import ConfigError, RelaxedConfig, find_config, load_config, pick_entry
from gsjax.oco import algorithms as algs
from gsjax.oco.config import config_kind, load_oco_config
from gsjax.oco.experiment import build_problem, entry_params
from gsjax.oco.runner import run_seed
from gsjax.problem import seed_axes

__all__ = ["TUNABLE", "tune", "add_parser"]

TUNABLE = ("beta", "lambda_reg", "trigger", "pgd_lr", "eta_scale")
_BANDIT_PARAMS = ("beta", "lambda_reg", "trigger", "pgd_lr")
_ALWAYS_SOLVE = ("linucb", "joint_linucb")  # no trigger to tune
_FD_STEP = 1e-6
_KNOB = re.compile(r"^([A-Za-z_]+)(?:\[\s*(\*|-?\d+)\s*\])?$")
_PER_CRITERION = ("beta", "lambda_reg", "trigger")


class Knob(NamedTuple):
    """One ``--params`` entry: ``field`` (a :data:`TUNABLE` name) and ``index``: ``None`` (one
    knob: shared by the criteria, ``lambda_reg`` one value each), ``"*"`` (one knob per
    criterion) or an integer (criterion ``i`` alone; the others keep their value)."""

    name: str
    field: str
    index: object


def _parse_names(params) -> list[str]:
    names = [p.strip() for p in (params.split(",") if isinstance(params, str) else params)]
    names = [p for p in names if p]
    _refuse(not names, "--params", f"name at least one parameter; allowed: {list(TUNABLE)}")
    for p in names:
        m = _KNOB.match(p)
        _refuse(m is None or m.group(1) not in TUNABLE, "--params",
                f"unknown parameter {p!r}; allowed: {list(TUNABLE)}, per criterion "
                f"{list(_PER_CRITERION)} as NAME[i] or NAME[*]")
        _refuse(m.group(2) is not None and m.group(1) not in _PER_CRITERION, "--params",
                f"{p!r}: {m.group(1)!r} is one value; per-criterion knobs are "
                f"{list(_PER_CRITERION)}")
    _refuse(len(set(names)) != len(names), "--params", f"parameters must be distinct; got {names}")
    return names


def knobs(names, k: int) -> list[Knob]:
    """The :class:`Knob` of each name for ``k`` criteria (a ``ConfigError`` for an index out of
    range or a field named twice: plain and indexed, or ``[*]`` and ``[i]``)."""
    out = []
    for p in names:
        field, idx = _KNOB.match(p).groups()
        if idx not in (None, "*"):
            idx = int(idx)
            _refuse(not 0 <= idx < k, "--params",
                    f"{p!r}: index out of range; the config has {k} criteria (0..{k - 1})")
        out.append(Knob(p, field, idx))
    for f in {kn.field for kn in out}:
        mine = [kn for kn in out if kn.field == f]
        _refuse(len(mine) > 1 and any(not isinstance(kn.index, int) for kn in mine), "--params",
                f"{[kn.name for kn in mine]} overlap: name {f!r} once, as NAME, NAME[*] or "
                f"distinct NAME[i]")
    return out


def _refuse(bad: bool, field: str, message: str) -> None:
    if bad:
        raise ConfigError(field, message)


def _sets(overrides, seeds, horizon, *more) -> list[str]:
    """The ``--set`` overrides, then ``more``, then the ``--seeds`` and ``--horizon`` ones."""
    extra = {"seeds": seeds, "horizon": horizon}
    return [*overrides, *more, *(f"{k}={v}" for k, v in extra.items() if v is not None)]


def _pick_entry(cfg, algorithm: str | None,
                preferred=lambda e: e.algorithm in ("lazy", "async_lazy")):
    """The entry named ``algorithm``, else the first ``preferred`` one, else the first."""
    return pick_entry(cfg, algorithm, preferred=preferred)


def _adam(step, u0: dict, steps: int, lr: float, log):
    """Adam on the log-parameters; ``step(u, i) -> (objective, gradient, extra)`` (``extra``
    joins the trace entry). Returns (u with the lowest objective, trace, first gradient)."""
    opt = optax.adam(lr)
    u = {k: jnp.asarray(v) for k, v in u0.items()}
    st, trace, best, g0 = opt.init(u), [], (float("inf"), u), None
    for i in range(steps + 1):
        val, g, extra = step(u, i)
        val = float(val)
        if not math.isfinite(val):
            raise FloatingPointError(f"objective is {val} at step {i}")
        g0 = g if g0 is None else g0
        trace.append({"step": i, "objective": val,
                      "u": {k: np.asarray(v).tolist() for k, v in u.items()}, **extra})
        if val < best[0]:
            best = (val, u)
        if log is not None:
            log(f"step {i:3d}: objective {val:.4f}")
        if i < steps:
            upd, st = opt.update({k: jnp.asarray(v, u[k].dtype) for k, v in g.items()}, st, u)
            u = optax.apply_updates(u, upd)
    return best[1], trace, g0


def _fd_check(value, u0: dict, g0) -> dict:
    """Central finite differences of ``value(u)[0]`` at ``u0`` against the gradient ``g0``."""
    flat0, unravel = ravel_pytree({k: jnp.asarray(v) for k, v in u0.items()})
    fd = np.zeros(flat0.shape[0])
    for j in range(flat0.shape[0]):
        hi, lo = (float(value(unravel(flat0.at[j].add(h)))[0]) for h in (_FD_STEP, -_FD_STEP))
        fd[j] = (hi - lo) / (2 * _FD_STEP)
    ga = np.asarray(ravel_pytree(g0)[0], np.float64)
    scale = max(np.max(np.abs(fd)), 1e-300)
    rel = np.abs(ga - fd) / np.maximum(np.abs(fd), 1e-6 * scale)
    return {"max_rel_error": float(np.max(rel)), "autodiff": ga.tolist(), "finite_difference":
            fd.tolist(), "step": _FD_STEP, "evaluations": 2 * int(flat0.shape[0])}


def _result(params: dict, objective, heldout, check: dict) -> dict:
    """``tune.json``; ``objective``, ``heldout``: per-seed values, initial and final point."""
    objective, heldout = ({"initial": results.mean_stderr(a), "final": results.mean_stderr(b)}
                          for a, b in (objective, heldout))
    return {"params": params, "objective": objective, "heldout_hard": heldout,
            "gradient_check": {"max_rel_error": check["max_rel_error"]}}


def _meta(path, entry, kind: str, dtype: str, overrides, S: int, H: int, T: int, steps: int,
          lr: float, check: dict, wall: dict, **own) -> dict:
    """``trace.json``'s ``meta``: the run's facts, the family's ``own``, work and wall times."""
    rounds = {"tuning_gradient_steps": (steps + 1) * S * T,
              "gradient_check": check["evaluations"] * S * T, "heldout_hard": 2 * H * T}
    return {"config": str(path), "algorithm": entry.name, "kind": kind, "dtype": dtype,
            "overrides": list(overrides), "tuning_seeds": S, "heldout_seeds": H, "horizon": T,
            "steps": steps, "lr": lr, **own, "seed_rounds": rounds, "wall_seconds": wall,
            "gradient_check": check}


# Bandit configs (the relaxed form of any algorithm)


class BanditTuning:
    """The pieces of a bandit tuning problem (shared by the estimators, the tests and
    ``benchmarks/gradients.py``): the knobs, their log-parameters ``u0`` at the config's values,
    ``to_params(u)``, the relaxed objective ``relaxed(u, rp)``, the hard runs ``hard(...)``."""

    def __init__(self, path, names, seeds=None, heldout=None, horizon=None, algorithm=None,
                 overrides=(), dtype="float64", window=None, seed_start=0):
        cfg = load_config(path, _sets(overrides, seeds, horizon, f"dtype={dtype}"))
        entry = _pick_entry(cfg, algorithm)
        for p in names:
            _refuse(_KNOB.match(p).group(1) not in _BANDIT_PARAMS, "--params",
                    f"{p!r} applies to kind = 'oco' configs; a bandit config tunes "
                    f"{list(_BANDIT_PARAMS)}")
        fields = {_KNOB.match(p).group(1) for p in names}
        _refuse("trigger" in fields and entry.algorithm in _ALWAYS_SOLVE, "--params",
                f"'trigger' has no effect on {entry.algorithm} (it re-optimises every round)")
        _refuse("beta" in fields and entry.agent.beta_mode != "constant", "--params",
                "'beta' is tuned only with agent.beta_mode = 'constant'")
        _refuse("beta" in fields and entry.agent.beta <= 0, "--params",
                f"'beta' is tuned in log space: the initial beta must be > 0, got "
                f"{entry.agent.beta}")
        rc = cfg.relaxed or RelaxedConfig()
        cfg = dataclasses.replace(cfg, grid=(), algorithms=(entry,))
        S, T = cfg.seeds, cfg.horizon
        H = heldout or S
        _refuse(window is not None and (window < 1 or T % window), "--window",
                f"must divide the horizon ({T}); got {window}")
        self.cfg, self.entry, self.rc, self.S, self.H, self.T = cfg, entry, rc, S, H, T
        self.seed_ids = np.arange(seed_start, seed_start + S)  # tuning seeds (global ids)
        self.held_ids = np.arange(seed_start + S, seed_start + S + H)
        self.built = built = experiment.build(cfg, seed_start=seed_start)
        self.held = experiment.build(dataclasses.replace(cfg, seeds=H), seed_start=seed_start + S)
        ba = self.ba = built.algorithms[0]
        fdtype = self.dtype = built.dtype
        k = self.k = built.structure.num_criteria
        self.knobs = kns = knobs(names, k)
        self.per_trigger = any(kn.field == "trigger" and kn.index is not None for kn in kns)
        _refuse(self.per_trigger and entry.algorithm.startswith("joint"), "--params",
                f"per-criterion triggers need a node-wise estimator; {entry.algorithm} has one "
                f"joint trigger")
        self.root = root = jax.random.key(cfg.root_seed)
        self.keys = keys = runner.seed_keys(root, jnp.asarray(self.seed_ids, jnp.uint32))
        self.rp = relaxed.relax_params(rc.temperature, rc.solve_temperature, rc.tie_break, fdtype)
        blk = rc.block if window is None else None
        obj = relaxed.make_objective(entry.algorithm, built.structure, ba.spec, T,
                                     built.problem_per_seed, blk, window=window)
        base = self.base = ba.params
        # log beta, log lambda_reg, log log c, log pgd_lr: the initial values.
        field = {f: "log_trigger" if f == "trigger" else f for f in _BANDIT_PARAMS}
        self.u0 = {}
        for kn in kns:
            v = getattr(base, field[kn.field])
            if kn.field == "beta" and kn.index is None:
                v = jnp.asarray(entry.agent.beta, fdtype)
            elif kn.field == "trigger" and kn.index is not None:
                v = jnp.broadcast_to(v, (k,))
            if isinstance(kn.index, int):
                v = v[kn.index]
            self.u0[kn.name] = jnp.log(v)

        def to_params(u):
            p = base
            if self.per_trigger:
                p = p._replace(log_trigger=jnp.broadcast_to(p.log_trigger, (k,)))
            for kn in kns:
                f = field[kn.field]
                v = jnp.exp(u[kn.name])
                if kn.index is None:
                    p = p._replace(**{f: jnp.broadcast_to(v, (k,)) if f == "beta" else v})
                elif kn.index == "*":
                    p = p._replace(**{f: v})
                else:
                    p = p._replace(**{f: getattr(p, f).at[kn.index].set(v)})
            return p

        self.to_params = to_params
        # The relaxed runs' environment (Adult's step-function loss smoothed); hard runs are hard.
        rprob = built.structure.env.relaxed(built.problem, rc)

        def relaxed_(u, rp):
            return obj(to_params(u), rp, keys, rprob, ba.move_cost)

        self.relaxed = relaxed_
        self._hard_fns = {}  # id(built experiment) -> its jitted hard grid (hard())

    def hard(self, b, seed_ids, us):
        """(G, S) the HARD run's regret (prediction + movement) at each point of ``us`` on the
        seeds ``seed_ids`` of the built experiment ``b`` (``self.built`` or ``self.held``); one
        jitted program per ``b``, reused from call to call (ES calls it every step)."""
        ba, T = self.ba, self.T
        fn = self._hard_fns.get(id(b))
        if fn is None:
            def one(key, prob, params):
                _, tot, _ = runner.run(key, ba.algo, b.structure, prob, params, ba.move_cost, T, T)
                return tot.prediction_regret + tot.movement_cost

            def grid(keys, prob, ustack):
                params = jax.vmap(self.to_params)(ustack)
                pax = seed_axes(prob, b.problem_per_seed)
                return jax.vmap(jax.vmap(one, in_axes=(0, pax, None)),
                                in_axes=(None, None, 0))(keys, prob, params)

            fn = self._hard_fns[id(b)] = jax.jit(grid)
        ustack = {n: jnp.asarray(np.stack([np.asarray(u[n]) for u in us]), self.dtype)
                  for n in self.u0}
        keys = runner.seed_keys(self.root, jnp.asarray(np.asarray(seed_ids), jnp.uint32))
        return np.asarray(fn(keys, b.problem, ustack))

    def flat(self):
        """``(x0, to_u)``: the knobs as one float64 vector and its inverse."""
        flat0, unravel = ravel_pytree(self.u0)
        return np.asarray(flat0, np.float64), lambda x: unravel(jnp.asarray(x, self.dtype))

    def show(self, kn: Knob, u):
        """The value reported for a knob: beta, lambda_reg, pgd_lr as they are, the trigger as
        the ratio c; a list per criterion for ``NAME[*]`` (and plain ``lambda_reg``)."""
        v = np.exp(np.asarray(u[kn.name], np.float64))
        return (np.exp(v) if kn.field == "trigger" else v).tolist()

    def point(self, u) -> dict:
        """Every criterion's beta, lambda_reg, trigger ratio c, and pgd_lr at ``u``."""
        p = self.to_params(u)
        lt = np.broadcast_to(np.asarray(p.log_trigger, np.float64), (self.k,))
        return {"beta": np.asarray(p.beta, np.float64).tolist(),
                "lambda_reg": np.asarray(p.lambda_reg, np.float64).tolist(),
                "trigger_ratio": np.exp(lt).tolist(), "pgd_lr": float(p.pgd_lr)}


def _temperatures(rc, anneal, steps):
    """``(tau, tau_s)`` at each step: the config's, or geometric from them to ``anneal`` (the
    last step's trigger temperature; the solve temperature keeps its ratio to it)."""
    tau0 = rc.temperature
    ts0 = rc.temperature if rc.solve_temperature is None else rc.solve_temperature
    rs = [1.0 if anneal is None or steps == 0 else (anneal / tau0) ** (i / steps)
          for i in range(steps + 1)]
    return [(tau0 * r, ts0 * r) for r in rs]


def _tune_bandit(path, names, steps, lr, seeds, heldout, horizon, algorithm, overrides, dtype,
                 log, select="relaxed", estimator="pathwise", sigma=0.3, pairs=8, es_seed=0,
                 anneal=None, window=None):
    t_build = time.perf_counter()
    bt = BanditTuning(path, names, seeds, heldout, horizon, algorithm, overrides, dtype, window)
    S, H, T, rc, fdtype, u0 = bt.S, bt.H, bt.T, bt.rc, bt.dtype, bt.u0
    value = runner.jit(lambda u: bt.relaxed(u, bt.rp))
    own = {}
    t0 = time.perf_counter()
    if estimator == "pathwise":
        temps = _temperatures(rc, anneal, steps)
        vg = runner.jit(jax.value_and_grad(bt.relaxed, has_aux=True))

        def step(u, i):
            rp = relaxed.relax_params(*temps[i], rc.tie_break, fdtype)
            (val, _), g = vg(u, rp)
            return val, g, ({"temperature": temps[i][0]} if anneal is not None else {})

        u_best, trace, g0 = _adam(step, u0, steps, lr, log)
        check = _fd_check(value, u0, g0)
        own.update(anneal=anneal, window=window)
    else:  # es: the smoothed HARD objective; one sweep of 2P perturbed points and the centre
        to_u, rng = bt.flat()[1], np.random.default_rng(es_seed)

        def step(u, i):
            flat, unravel = ravel_pytree(u)
            x, centre = np.asarray(flat, np.float64), {}

            def values(pts):
                tot = np.mean(bt.hard(bt.built, bt.seed_ids, [to_u(q) for q in pts] + [u]), 1)
                centre["v"] = float(tot[-1])
                return tot[:-1]

            est = es.antithetic_gradient(values, x, sigma, es.perturbations(rng, pairs, x.shape[0]))
            g = jax.tree_util.tree_map(jnp.asarray, unravel(jnp.asarray(est.grad)))
            return centre["v"], g, {"smoothed": est.smoothed}

        u_best, trace, _ = _adam(step, u0, steps, lr, log)
        check = {"max_rel_error": None, "evaluations": 0,
                 "note": "es estimates the smoothed hard objective's gradient: no autodiff"}
        own.update(sigma=sigma, pairs=pairs, es_seed=es_seed)
    sel_step = min(range(len(trace)), key=lambda i: trace[i]["objective"])
    select_hard = select == "hard" and estimator == "pathwise"
    if select_hard:
        us = [{k: jnp.asarray(v, fdtype) for k, v in t["u"].items()} for t in trace]
        tun = np.mean(bt.hard(bt.built, bt.seed_ids, us), 1)
        for t, v in zip(trace, tun):
            t["hard_tuning"] = float(v)
        sel_step = int(np.argmin(tun))
        u_best = us[sel_step]
    t1 = time.perf_counter()

    if estimator == "es":  # the objective is the hard run's on the tuning seeds
        objective = list(bt.hard(bt.built, bt.seed_ids, [u0, u_best]))
    else:
        objective = [np.asarray(tot.prediction_regret + tot.movement_cost)
                     for tot in (value(u0)[1], value(u_best)[1])]
    result = _result({kn.name: {"initial": bt.show(kn, u0), "final": bt.show(kn, u_best)}
                      for kn in bt.knobs}, objective,
                     bt.hard(bt.held, bt.held_ids, [u0, u_best]), check)
    t2 = time.perf_counter()
    meta = _meta(path, bt.entry, "bandit", dtype, overrides, S, H, T, steps, lr, check,
                 {"build": t0 - t_build, "tuning": t1 - t0, "evaluation": t2 - t1},
                 relaxed=dataclasses.asdict(rc), trigger_reported_as="ratio c (> 1)",
                 select=select, selected_step=sel_step, estimator=estimator, **own,
                 point={"initial": bt.point(u0), "final": bt.point(u_best)})
    meta["seed_rounds"]["select_hard"] = (steps + 1) * S * T if select_hard else 0
    if estimator == "es":
        meta["seed_rounds"].update(tuning_gradient_steps=0,
                                   tuning_hard=(steps + 1) * (2 * pairs + 1) * S * T)
    return result, trace, meta


# OCO configs (Section 6): OGD's step size


class OCOTuning:
    """The pieces of an OCO tuning problem (OGD's step size): ``u0`` (``log eta_scale``
    relative to the entry's), ``per_seed(u, keys)`` the total regret (loss regret + movement
    cost) per seed, ``keys`` / ``hkeys`` the tuning / held-out seeds, ``hard(keys, us)`` for
    many points. Call it under ``jax.enable_x64(cfg.dtype == "float64")``."""

    @classmethod
    def from_path(cls, path, names, seeds=None, heldout=None, horizon=None, algorithm=None,
                  overrides=(), point=0) -> "OCOTuning":
        """The config at ``path`` with ``overrides`` (and ``seeds``, ``horizon``) applied."""
        return cls(load_oco_config(path, _sets(overrides, seeds, horizon)), names, heldout,
                   algorithm, point)

    def __init__(self, cfg, names, heldout=None, algorithm=None, point=0):
        for p in names:
            _refuse(p != "eta_scale", "--params",
                    f"{p!r} is a bandit parameter; a kind = 'oco' config tunes ['eta_scale']")
        self.cfg = cfg
        entry = self.entry = _pick_entry(cfg, algorithm, lambda e: e.algorithm != "ogd")
        T, S = self.T, self.S = cfg.horizons[0], cfg.seeds
        H = self.H = heldout or S
        spec, problem, dtype = build_problem(cfg)
        self.dtype = dtype
        params, budgets = entry_params(cfg, entry, T, dtype)
        _refuse(not 0 <= point < params.p.shape[0], "--point",
                f"entry {entry.name!r} has {params.p.shape[0]} budget points; got {point}")
        self.budget = np.asarray(budgets[point])
        base = self.base = algs.OCOParams(p=params.p[point:point + 1],
                                          eta=params.eta[point:point + 1])
        algo = algs.make(entry.algorithm, spec)
        root = jax.random.key(cfg.root_seed)
        self.keys = runner.seed_keys(root, jnp.arange(S, dtype=jnp.uint32))
        self.hkeys = runner.seed_keys(root, jnp.arange(S, S + H, dtype=jnp.uint32))

        def per_seed(u, ks):
            prm = base._replace(eta=base.eta * jnp.exp(u["eta_scale"]))
            res, _ = jax.vmap(lambda key: run_seed(key, algo, spec, problem, prm, T))(ks)
            return (res.loss_regret.sum(-1) + cfg.move_cost * res.movement.sum(-1))[:, 0]

        self.per_seed = per_seed
        self.u0 = {"eta_scale": jnp.zeros((), dtype)}
        self._grid = jax.jit(jax.vmap(per_seed, in_axes=(0, None)))

    def hard(self, keys, us):
        """(G, S) the total regret at each point of ``us`` on the seeds of ``keys``."""
        ustack = {"eta_scale": jnp.asarray(np.stack([np.asarray(u["eta_scale"]) for u in us]),
                                           self.dtype)}
        return np.asarray(self._grid(ustack, keys))


def _tune_oco(path, names, steps, lr, seeds, heldout, horizon, algorithm, overrides, point, log):
    cfg = load_oco_config(path, _sets(overrides, seeds, horizon))
    with jax.enable_x64(cfg.dtype == "float64"):
        ot = OCOTuning(cfg, names, heldout, algorithm, point)
        S, H, T, entry, keys = ot.S, ot.H, ot.T, ot.entry, ot.keys

        def f(u):
            tot = ot.per_seed(u, keys)
            return jnp.mean(tot), tot

        def step(u, i):
            (val, _), g = vg(u)
            return val, g, {}

        t0 = time.perf_counter()
        u0, value, vg = ot.u0, runner.jit(f), runner.jit(jax.value_and_grad(f, has_aux=True))
        u_best, trace, g0 = _adam(step, u0, steps, lr, log)
        check = _fd_check(value, u0, g0)
        t1 = time.perf_counter()
        held = runner.jit(ot.per_seed)
        scale0 = entry.eta_scale
        final = scale0 * float(jnp.exp(u_best["eta_scale"]))
        result = _result({"eta_scale": {"initial": scale0, "final": final}},
                         [value(u)[1] for u in (u0, u_best)],
                         [held(u, ot.hkeys) for u in (u0, u_best)], check)
        t2 = time.perf_counter()
    meta = _meta(path, entry, "oco", cfg.dtype, overrides, S, H, T, steps, lr, check,
                 {"tuning": t1 - t0, "evaluation": t2 - t1},
                 budget=ot.budget.tolist(), point=point,
                 eta_initial=np.asarray(ot.base.eta[0]).tolist())
    return result, trace, meta


def tune(config, params, steps: int = 30, lr: float = 0.1, seeds: int | None = None,
         heldout_seeds: int | None = None, horizon: int | None = None,
         algorithm: str | None = None, overrides=(), dtype: str = "float64", point: int = 0,
         select: str = "relaxed", out=None, log=print, estimator: str = "pathwise",
         sigma: float = 0.3, pairs: int = 8, es_seed: int = 0, anneal: float | None = None,
         window: int | None = None) -> dict:
    """Tune ``params`` (names from :data:`TUNABLE`) of one entry of ``config`` (see the module
    docstring); returns the ``tune.json`` dict and, with ``out``, writes ``tune.json`` and
    ``trace.json`` there.

    Args:
      config: a config path or built-in name; params: names (a list or comma-separated).
      steps, lr: Adam's steps and step size on the log-parameters.
      seeds: tuning seeds ``0 .. S-1``; heldout_seeds: seeds ``S .. S+H-1`` (default ``S``).
      horizon, overrides: override the config (OCO: its first horizon); ``--set`` strings.
      algorithm: the entry to tune (default: the first lazy entry).
      dtype: bandit configs only (float64: the finite-difference check needs it).
      point: OCO only: the entry's budget point.
      select: ``final`` is the iterate with the lowest ``"relaxed"`` objective or the lowest
        ``"hard"`` regret on the tuning seeds (one hard run per iterate).
      estimator: bandit configs: ``"pathwise"`` (autodiff through the relaxed run) or ``"es"``
        (:mod:`gsjax.es` on the HARD objective: ``pairs`` pairs at scale ``sigma`` in the
        log-knobs, directions from ``es_seed``; ``final`` has the lowest hard regret).
      anneal: pathwise, ``select = "hard"``: the last step's temperature, reached
        geometrically from the config's (the solve temperature scaled alike).
      window: pathwise: no gradient flows through the agent's state across a boundary of
        ``window`` rounds (must divide the horizon).
    """
    names = _parse_names(params)
    _refuse(steps < 0, "--steps", f"must be >= 0, got {steps}")
    _refuse(not (lr > 0 and math.isfinite(lr)), "--lr", f"must be a finite number > 0, got {lr}")
    _refuse(seeds is not None and seeds < 1, "--seeds", f"must be >= 1, got {seeds}")
    _refuse(heldout_seeds is not None and heldout_seeds < 1, "--heldout-seeds",
            f"must be >= 1, got {heldout_seeds}")
    _refuse(dtype not in ("float32", "float64"), "--dtype",
            f"must be 'float32' or 'float64', got {dtype!r}")
    _refuse(select not in ("relaxed", "hard"), "--select",
            f"must be 'relaxed' or 'hard', got {select!r}")
    _refuse(estimator not in ("pathwise", "es"), "--estimator",
            f"must be 'pathwise' or 'es', got {estimator!r}")
    _refuse(not (sigma > 0 and math.isfinite(sigma)), "--sigma",
            f"must be a finite number > 0, got {sigma}")
    _refuse(pairs < 1, "--pairs", f"must be >= 1, got {pairs}")
    if anneal is not None:
        _refuse(not (anneal > 0 and math.isfinite(anneal)), "--anneal",
                f"must be a finite temperature > 0, got {anneal}")
        _refuse(select != "hard" or estimator != "pathwise", "--anneal",
                "needs --estimator pathwise and --select hard (the relaxed objectives of "
                "different temperatures do not compare)")
    _refuse(window is not None and estimator != "pathwise", "--window",
            "applies to --estimator pathwise")
    path = find_config(str(config))
    if config_kind(path) == "oco":
        _refuse(estimator != "pathwise" or anneal is not None or window is not None,
                "--estimator", "kind = 'oco' configs tune the run itself (pathwise, no relaxation)")
        result, trace, meta = _tune_oco(path, names, steps, lr, seeds, heldout_seeds, horizon,
                                        algorithm, overrides, point, log)
    else:
        result, trace, meta = _tune_bandit(path, names, steps, lr, seeds, heldout_seeds,
                                           horizon, algorithm, overrides, dtype, log, select,
                                           estimator, sigma, pairs, es_seed, anneal, window)
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
         select=args.select, estimator=args.estimator, sigma=args.sigma, pairs=args.pairs,
         es_seed=args.es_seed, anneal=args.anneal, window=args.window,
         out=args.out or Path("runs") / "tune" / Path(args.config).stem,
         log=(lambda *a, **k: None) if args.quiet else print)
    return 0


def add_parser(sub) -> None:
    """Register ``gsjax tune`` on the CLI's subparsers."""
    t = sub.add_parser("tune", help="tune beta, lambda_reg, the trigger or OGD's step size by "
                                    "gradient descent through whole (relaxed) runs")
    t.add_argument("config", help="config path or built-in name")
    t.add_argument("--params", required=True,
                   help=f"comma-separated, from {','.join(TUNABLE)}; per criterion "
                        "NAME[i] or NAME[*] (beta, lambda_reg, trigger)")
    t.add_argument("--steps", type=int, default=30, help="Adam steps (default 30)")
    t.add_argument("--lr", type=float, default=0.1,
                   help="Adam step size on the log-parameters (default 0.1)")
    t.add_argument("--seeds", type=int, help="tuning seeds (default: the config's)")
    t.add_argument("--heldout-seeds", type=int, help="held-out seeds (default: as many)")
    t.add_argument("--horizon", type=int, help="override the horizon T")
    t.add_argument("--algorithm", help="the entry to tune (default: the first lazy one)")
    t.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    t.add_argument("--dtype", default="float64",
                   help="bandit configs: float64 (default) or float32")
    t.add_argument("--point", type=int, default=0, help="OCO: the entry's budget point")
    t.add_argument("--select", default="relaxed", choices=("relaxed", "hard"),
                   help="final iterate: lowest relaxed objective (default) or lowest hard "
                        "regret on the tuning seeds")
    t.add_argument("--estimator", default="pathwise", choices=("pathwise", "es"),
                   help="bandit configs: pathwise (autodiff through the relaxed run, default) "
                        "or es (antithetic Gaussian smoothing of the hard run)")
    t.add_argument("--sigma", type=float, default=0.3,
                   help="es: perturbation scale in the log-knobs (default 0.3)")
    t.add_argument("--pairs", type=int, default=8, help="es: antithetic pairs a step (default 8)")
    t.add_argument("--es-seed", type=int, default=0, help="es: seed of the directions")
    t.add_argument("--anneal", type=float,
                   help="pathwise: the last step's temperature (geometric from the config's; "
                        "needs --select hard)")
    t.add_argument("--window", type=int,
                   help="pathwise: truncate the gradient at every WINDOW rounds")
    t.add_argument("--out", type=Path, help="output folder (default runs/tune/NAME)")
    t.add_argument("--quiet", action="store_true")
    t.set_defaults(func=_cmd_tune)
