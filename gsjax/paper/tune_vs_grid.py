r"""``gsjax tune`` against a grid search, compared fairly.

Both methods see only the TUNING seeds ``0 .. S-1``; both are scored, with the HARD algorithm,
on the same HELD-OUT seeds ``S .. S+H-1`` (those of ``tune.json``):

* **grid**: every point of the grid runs the hard algorithm on the tuning seeds. Bandit configs
  use the sweep feature itself (a ``[grid]`` run, what
  ``gsjax run CONFIG --seeds S --set 'grid.beta=[...]' ...`` runs, one compiled program).
  ``kind = "oco"`` configs have no ``[grid]`` table, so the grid over ``eta_scale`` is the OCO
  runner's vmap over parameter points (the one a budget sweep uses), at the tuned entry's budget
  point. The point with the lowest mean total regret on the tuning seeds (the first one on a
  tie) is the grid's choice, then scored on the held-out seeds.
* **tuned**: the ``final`` point of each ``--tune`` folder, re-scored here on the held-out seeds
  (``tune.json`` holds only its mean and standard error; the per-seed values give the paired
  differences).

Cost, in seed-rounds (one seed for one round): the grid spends ``G S T`` on selection (hard
forward runs); ``gsjax tune`` spends ``(steps + 1) S T`` on gradient evaluations, each a
forward AND a backward pass of the relaxed run (bandits; the relaxed run also re-solves every
round, so a seed-round costs more than a hard one; the wall times say how much), plus the
gradient check (``2 P S T`` forward only). Each method spends ``H T`` more per point it scores on
the held-out seeds.

Also written, as a reference only: every grid point scored on the held-out seeds, and the best of
them (chosen on the held-out seeds: not a method, the best the grid could have done).

``--iterates`` scores every Adam iterate of each ``--tune`` folder (from its ``trace.json``) with
the hard algorithm on the tuning and on the held-out seeds: the final point chosen by the lowest
relaxed objective (what ``gsjax tune`` reports), by the lowest hard regret on the tuning seeds,
and the last iterate.

    python -m gsjax.paper.tune_vs_grid --tune runs/tune/s72_bt \
        --grid beta=0.0625,0.125,0.25,0.5,1,2 --grid trigger_ratio=1.25,1.5,2,4,8,16 \
        --out runs/tune/s72_vs_grid

The settings (config, ``--set`` overrides, seeds, horizon, entry, OCO budget point) come from
the first ``--tune`` folder's ``trace.json``, or from the command line (a config and no
``--tune``: the grid alone). Writes ``compare.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from gsjax import experiment, results, runner
from gsjax.config import ConfigError, find_config, load_config
from gsjax.oco import algorithms as algs
from gsjax.oco.config import config_kind, load_oco_config
from gsjax.oco.experiment import entry_params, spec_of
from gsjax.oco.problem import make_problem
from gsjax.oco.runner import sweep
from gsjax.tune import _KNOB, _pick_entry

__all__ = ["run", "choose", "main"]

# Must match between the comparison and every --tune folder (the held-out count may differ:
# the held-out seeds start at S either way, and the tuned points are re-scored here).
_SETTING_KEYS = ("config", "algorithm", "tuning_seeds", "horizon")


def choose(totals) -> int:
    """Index of the grid point with the lowest mean over seeds (``totals`` is ``(G, S)``); the
    first one on a tie."""
    means = np.mean(np.asarray(totals, np.float64), axis=1)
    return int(np.argmin(means))


def _hard_overrides(overrides) -> list[str]:
    """The overrides that change the hard run ([relaxed] settings do not)."""
    return [s for s in overrides if not s.strip().startswith("relaxed.")]


# ---------------------------------------------------------------------------------------------
# Bandit configs: the [grid] sweep, and hard runs at given points
# ---------------------------------------------------------------------------------------------


class _Bandit:
    # The [grid] fields gsjax tune tunes (and that points() sets): beta, c, lambda_reg.
    GRID_NAMES = ("beta", "trigger_ratio", "lambda_reg")

    def __init__(self, path, overrides, seeds, heldout, horizon, algorithm, dtype):

        sets = list(overrides) + [f"dtype={dtype}", f"seeds={seeds}"]
        if horizon is not None:
            sets.append(f"horizon={horizon}")
        cfg = load_config(path, sets)
        if cfg.grid:
            raise ConfigError("grid", "the config has a [grid] table; give the grid with --grid")
        self.entry = _pick_entry(cfg, algorithm)
        self.cfg = dataclasses.replace(cfg, algorithms=(self.entry,))
        self.path, self.sets, self.S, self.H, self.T = path, sets, seeds, heldout, cfg.horizon

    def grid(self, axes: dict, seed_start: int, seeds: int):
        """``(points, totals (G, seeds), wall s)`` of a ``[grid]`` run of the entry."""

        gsets = [f"grid.{k}=[{','.join(repr(float(v)) for v in vals)}]" for k, vals in axes.items()]
        cfg = load_config(self.path, self.sets + gsets + [f"seeds={seeds}"])
        cfg = dataclasses.replace(cfg, algorithms=(self.entry,))
        t0 = time.perf_counter()
        res = experiment.run_experiment(cfg, seed_start=seed_start)
        wall = time.perf_counter() - t0
        tot = res.runs[self.entry.name].totals
        return (experiment.grid_points(cfg),
                np.asarray(tot.prediction_regret + tot.movement_cost, np.float64), wall)

    def points(self, points: list[dict], seed_start: int, seeds: int):
        """``totals (G, seeds)`` of the hard entry at each point (keys: ``beta``,
        ``trigger_ratio``, ``lambda_reg``), one compiled program (the grid path of the runner)."""
        import jax
        import jax.numpy as jnp


        built = experiment.build(dataclasses.replace(self.cfg, seeds=seeds), seed_start)
        ba = built.algorithms[0]
        base, k, dt = ba.params, built.structure.num_criteria, built.dtype
        plist = []
        # Per-criterion trigger ratios (gsjax tune's trigger[i]): every point's log c is (k,).
        per = any(isinstance(pt.get("trigger_ratio"), (list, tuple)) for pt in points)
        for pt in points:
            p = base
            if "beta" in pt:
                p = p._replace(beta=jnp.broadcast_to(jnp.asarray(pt["beta"], dt), (k,)))
            if "trigger_ratio" in pt:
                p = p._replace(log_trigger=jnp.asarray(np.log(pt["trigger_ratio"]), dt))
            if "lambda_reg" in pt:
                p = p._replace(lambda_reg=jnp.broadcast_to(jnp.asarray(pt["lambda_reg"], dt),
                                                           (k,)))
            if "pgd_lr" in pt:
                p = p._replace(pgd_lr=jnp.asarray(pt["pgd_lr"], dt))
            if per:
                p = p._replace(log_trigger=jnp.broadcast_to(p.log_trigger, (k,)))
            plist.append(p)
        params = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *plist)
        mc = jnp.full((len(points),), ba.move_cost, dt)
        res = runner.sweep(jax.random.key(self.cfg.root_seed),
                           np.arange(seed_start, seed_start + seeds), ba.algo, built.structure,
                           built.problem, params, mc, self.cfg.horizon, self.cfg.record_every,
                           built.problem_per_seed, grid=True)
        return np.asarray(res.totals.prediction_regret + res.totals.movement_cost, np.float64)

    def defaults(self) -> dict:
        a = self.entry.agent
        lam = a.lambda_reg
        return {"beta": float(a.beta), "trigger_ratio": float(a.trigger_ratio),
                "lambda_reg": [float(x) for x in lam] if isinstance(lam, tuple) else float(lam)}

    @staticmethod
    def _per_criterion(names) -> bool:
        return any("[" in n or n == "pgd_lr" for n in names)

    def from_tune(self, params: dict, meta: dict | None = None) -> dict:
        """A point from ``tune.json``'s ``params`` (final values); per-criterion knobs: every
        criterion's values from ``trace.json``'s ``meta.point.final``."""
        if self._per_criterion(params):
            return dict(meta["point"]["final"])
        out = {}
        if "beta" in params:
            out["beta"] = float(params["beta"]["final"])
        if "trigger" in params:
            out["trigger_ratio"] = float(params["trigger"]["final"])
        if "lambda_reg" in params:
            out["lambda_reg"] = list(params["lambda_reg"]["final"])
        return out

    def from_u(self, u: dict, meta: dict | None = None) -> dict:
        """A point from a ``trace.json`` iterate (log-parameters); per-criterion knobs start
        from ``meta.point.initial`` (every criterion's values)."""
        if self._per_criterion(u):
            pt = {k: (list(v) if isinstance(v, list) else v)
                  for k, v in meta["point"]["initial"].items()}
            k = len(pt["beta"])
            key = {"beta": "beta", "lambda_reg": "lambda_reg", "trigger": "trigger_ratio",
                   "pgd_lr": "pgd_lr"}
            for name, v in u.items():
                field, idx = _KNOB.match(name).groups()
                val = np.exp(np.asarray(v, np.float64))
                if field == "trigger":
                    val = np.exp(val)
                if idx is None:
                    pt[key[field]] = (float(val) if field == "pgd_lr"
                                      else np.broadcast_to(val, (k,)).tolist())
                elif idx == "*":
                    pt[key[field]] = val.tolist()
                else:
                    pt[key[field]][int(idx)] = float(val)
            return pt
        out = {}
        if "beta" in u:
            out["beta"] = float(math.exp(u["beta"]))
        if "trigger" in u:
            out["trigger_ratio"] = float(math.exp(math.exp(u["trigger"])))
        if "lambda_reg" in u:
            out["lambda_reg"] = np.exp(np.asarray(u["lambda_reg"], np.float64)).tolist()
        return out


# ---------------------------------------------------------------------------------------------
# OCO configs: a grid over eta_scale at one budget point
# ---------------------------------------------------------------------------------------------


class _OCO:
    GRID_NAMES = ("eta_scale",)

    def __init__(self, path, overrides, seeds, heldout, horizon, algorithm, point):

        sets = list(overrides) + [f"seeds={seeds}"]
        if horizon is not None:
            sets.append(f"horizon={horizon}")
        cfg = load_oco_config(path, sets)
        if algorithm is not None:  # the entry gsjax tune picks (gsjax.tune._tune_oco)
            ents = [e for e in cfg.algorithms if e.name == algorithm]
            if not ents:
                raise ConfigError("--algorithm", f"no entry {algorithm!r}")
        else:
            ents = [e for e in cfg.algorithms if e.algorithm != "ogd"] or list(cfg.algorithms)
        self.cfg, self.entry, self.point = cfg, ents[0], point
        self.S, self.H, self.T = seeds, heldout, cfg.horizons[0]

    def points(self, points: list[dict], seed_start: int, seeds: int):
        """``totals (G, seeds)``: loss regret + lambda movement at each ``eta_scale``."""
        import jax
        import jax.numpy as jnp


        cfg, e = self.cfg, self.entry
        spec = spec_of(cfg)
        with jax.enable_x64(cfg.dtype == "float64"):
            dt = jnp.float64 if cfg.dtype == "float64" else jnp.float32
            pc = cfg.problem
            problem = make_problem(spec, pc.s0, pc.target_low, pc.target_high, pc.weights,
                                   pc.drift, dt)
            params, _ = entry_params(cfg, e, self.T, dt)
            if not 0 <= self.point < params.p.shape[0]:
                raise ConfigError("--point", f"entry {e.name!r} has {params.p.shape[0]} budget "
                                             f"points; got {self.point}")
            unit = params.eta[self.point] / e.eta_scale  # the rule's step at eta_scale = 1
            scales = jnp.asarray([pt["eta_scale"] for pt in points], dt)
            prm = algs.OCOParams(p=jnp.repeat(params.p[self.point][None], len(points), 0),
                                 eta=scales[:, None] * unit[None])
            out = sweep(jax.random.key(cfg.root_seed), np.arange(seed_start, seed_start + seeds),
                        algs.make(e.algorithm, spec), spec, problem, prm, self.T)
            r = out.result
            tot = r.loss_regret.sum(-1) + cfg.move_cost * r.movement.sum(-1)  # (seeds, G)
        return np.asarray(tot, np.float64).T

    def grid(self, axes: dict, seed_start: int, seeds: int):
        pts = [{"eta_scale": float(v)} for v in axes["eta_scale"]]
        t0 = time.perf_counter()
        tot = self.points(pts, seed_start, seeds)
        return pts, tot, time.perf_counter() - t0

    def defaults(self) -> dict:
        return {"eta_scale": float(self.entry.eta_scale)}

    def from_tune(self, params: dict, meta: dict | None = None) -> dict:
        return {"eta_scale": float(params["eta_scale"]["final"])}

    def from_u(self, u: dict, meta: dict | None = None) -> dict:
        return {"eta_scale": float(self.entry.eta_scale * math.exp(u["eta_scale"]))}


# ---------------------------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------------------------


def _read_tune(d) -> tuple[dict, dict]:
    d = Path(d)
    try:
        res = json.loads((d / "tune.json").read_text())
        trace = json.loads((d / "trace.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError("--tune", f"{d}: no readable tune.json / trace.json ({e})") from None
    return res, trace


def run(config=None, grid: dict | None = None, tune_dirs=(), seeds=None, heldout_seeds=None,
        horizon=None, algorithm=None, overrides=None, point=None, dtype=None,
        iterates: bool = False, heldout_grid: bool = True, out=None, log=print) -> dict:
    """The comparison; returns the ``compare.json`` dict (see the module docstring).

    ``grid`` maps grid names (bandit: the ``[grid]`` fields; OCO: ``eta_scale``) to values.
    Settings left ``None`` come from the first tune folder's ``trace.json`` (else the config's
    own; ``heldout_seeds`` defaults to ``seeds``)."""

    log = log or (lambda *a, **k: None)
    tunes = [(str(d),) + _read_tune(d) for d in tune_dirs]
    meta0 = tunes[0][2]["meta"] if tunes else {}
    config = config if config is not None else meta0.get("config")
    if config is None:
        raise ConfigError("config", "give a config or a --tune folder")
    path = find_config(str(config))
    kind = config_kind(path)
    pick = lambda v, key, default=None: v if v is not None else meta0.get(key, default)  # noqa
    overrides = list(pick(overrides, "overrides", []))
    algorithm = pick(algorithm, "algorithm")
    horizon = pick(horizon, "horizon")
    S = pick(seeds, "tuning_seeds")
    if kind == "oco":
        point = pick(point, "point", 0)
        S = S or load_oco_config(path, overrides).seeds
    else:
        dtype = dtype or meta0.get("dtype", "float64")
        S = S or load_config(path, overrides).seeds
    H = pick(heldout_seeds, "heldout_seeds") or S
    if kind == "oco":
        m = _OCO(path, overrides, S, H, horizon, algorithm, point)
    else:
        m = _Bandit(path, overrides, S, H, horizon, algorithm, dtype)
    T = m.T
    setting = {"config": str(path), "algorithm": m.entry.name, "tuning_seeds": S,
               "heldout_seeds": H, "horizon": T}
    for d, _, tr in tunes:  # every tune folder must be of this very setting
        mt = tr["meta"]
        for key in _SETTING_KEYS:
            mine = setting[key]
            theirs = str(find_config(mt[key])) if key == "config" else mt.get(key)
            if theirs != mine:
                raise ConfigError("--tune", f"{d}: {key} = {theirs!r}, the comparison's is "
                                            f"{mine!r}")
        if _hard_overrides(mt.get("overrides", [])) != _hard_overrides(overrides):
            raise ConfigError("--tune", f"{d}: overrides {mt.get('overrides')} differ from "
                                        f"{overrides}")
        if kind == "oco" and mt.get("point") != point:
            raise ConfigError("--tune", f"{d}: budget point {mt.get('point')}, not {point}")
    if not grid:
        raise ConfigError("--grid", "give at least one grid axis")
    for name in grid:
        if name not in m.GRID_NAMES:
            raise ConfigError("--grid", f"unknown axis {name!r}; allowed: {list(m.GRID_NAMES)}")

    # The grid: selection on the tuning seeds, its choice scored on the held-out seeds.
    log(f"grid: {math.prod(len(v) for v in grid.values())} points x {S} tuning seeds x {T}")
    pts, tot_tune, wall_sel = m.grid(grid, 0, S)
    g = choose(tot_tune)
    G = len(pts)
    result = {**setting, "kind": kind, "overrides": overrides}
    if kind == "oco":
        result["point"] = point
    t0 = time.perf_counter()
    fixed = [m.defaults(), pts[g]]
    tuned_pts = [m.from_tune(res["params"], tr.get("meta")) for _, res, tr in tunes]
    held = m.points(fixed + tuned_pts, S, H)  # (2 + n_tuned, H)
    wall_held = time.perf_counter() - t0
    grid_out = {
        "axes": {k: [float(v) for v in vals] for k, vals in grid.items()},
        "points": [{"point": p, "tuning": results.mean_stderr(tot_tune[i])} for i, p in enumerate(pts)],
        "chosen": {"index": g, "point": pts[g], "tuning": results.mean_stderr(tot_tune[g]),
                   "heldout": results.mean_stderr(held[1])},
        "seed_rounds": {"selection": G * S * T, "scoring": H * T},
        "wall_seconds": {"selection": wall_sel},
    }
    log(f"grid choice (tuning seeds) {pts[g]}: tuning {tot_tune[g].mean():.1f}, held-out "
        f"{held[1].mean():.1f}; defaults held-out {held[0].mean():.1f}")
    if heldout_grid:
        _, tot_held, wall_hg = m.grid(grid, S, H)
        for i in range(G):
            grid_out["points"][i]["heldout"] = results.mean_stderr(tot_held[i])
        b = choose(tot_held)
        grid_out["heldout_best"] = {"index": b, "point": pts[b], "heldout": results.mean_stderr(tot_held[b]),
                                    "note": "chosen on the held-out seeds: a reference, not a "
                                            "method"}
        grid_out["seed_rounds"]["heldout_all_points"] = G * H * T
        grid_out["wall_seconds"]["heldout_all_points"] = wall_hg
        log(f"grid best on the held-out seeds {pts[b]}: {tot_held[b].mean():.1f}")
    result["grid"] = grid_out
    result["defaults"] = {"point": fixed[0], "heldout": results.mean_stderr(held[0])}

    rows = []
    for j, (d, res, tr) in enumerate(tunes):
        mt = tr["meta"]
        h = held[2 + j]
        steps = int(mt["steps"])
        row = {
            "dir": d, "point": tuned_pts[j], "lr": mt.get("lr"), "steps": steps,
            "relaxed": mt.get("relaxed"), "select": mt.get("select", "relaxed"),
            "selected_step": mt.get("selected_step"),
            "heldout": results.mean_stderr(h),
            "heldout_in_tune_json": {**res["heldout_hard"]["final"],
                                     "seeds": mt.get("heldout_seeds")},
            "minus_grid_choice": results.mean_stderr(h - held[1]), "minus_defaults": results.mean_stderr(h - held[0]),
            "gradient_check_max_rel_error": res["gradient_check"]["max_rel_error"],
            "gradient_evaluations": steps + 1,
            "seed_rounds": mt.get("seed_rounds"), "wall_seconds": mt.get("wall_seconds"),
        }
        if iterates:
            row["iterates"] = _iterates(m, tr["trace"], S, H, tr.get("meta"))
        rows.append(row)
        log(f"tuned {d}: {tuned_pts[j]} held-out {h.mean():.1f} (grid choice "
            f"{held[1].mean():.1f}, defaults {held[0].mean():.1f})")
    result["tuned"] = rows
    result["wall_seconds"] = {"heldout_scoring": wall_held}
    if out is not None:
        o = Path(out)
        o.mkdir(parents=True, exist_ok=True)
        results.write_json(o / "compare.json", result)
        log(f"wrote {o}/compare.json")
    return result


def _iterates(m, trace, S, H, meta=None) -> dict:
    """Every iterate scored hard on the tuning and held-out seeds; three selection rules."""
    pts = [m.from_u(t["u"], meta) for t in trace]
    tun = m.points(pts, 0, S).mean(1)
    hel = m.points(pts, S, H)
    obj = np.asarray([t["objective"] for t in trace])
    rules = {"lowest_relaxed_objective": int(np.argmin(obj)),
             "lowest_hard_tuning_regret": int(np.argmin(tun)), "last": len(pts) - 1}
    return {
        "steps": [{"step": t["step"], "point": p, "relaxed_objective": t["objective"],
                   "tuning_hard": float(a), "heldout_hard": float(b)}
                  for t, p, a, b in zip(trace, pts, tun, hel.mean(1))],
        "selected": {r: {"step": i, "point": pts[i], "heldout": results.mean_stderr(hel[i])}
                     for r, i in rules.items()},
        "seed_rounds": len(pts) * (S + H) * m.T,
    }


def _parse_axis(text: str) -> tuple[str, list[float]]:
    name, sep, vals = text.partition("=")
    if not sep:
        raise ConfigError("--grid", f"expected NAME=v1,v2,..., got {text!r}")
    try:
        values = [float(v) for v in vals.strip().strip("[]").split(",") if v.strip()]
    except ValueError:
        raise ConfigError("--grid", f"{text!r}: values must be numbers") from None
    if not values:
        raise ConfigError("--grid", f"{text!r}: no values")
    return name.strip(), values


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gsjax.paper.tune_vs_grid",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("config", nargs="?", help="config (default: the first --tune folder's)")
    ap.add_argument("--tune", action="append", default=[], metavar="DIR",
                    help="a gsjax tune output folder (repeatable)")
    ap.add_argument("--grid", action="append", default=[], metavar="NAME=v1,v2,...",
                    required=True)
    ap.add_argument("--seeds", type=int)
    ap.add_argument("--heldout-seeds", type=int)
    ap.add_argument("--horizon", type=int)
    ap.add_argument("--algorithm")
    ap.add_argument("--set", action="append", metavar="KEY=VALUE")
    ap.add_argument("--point", type=int)
    ap.add_argument("--iterates", action="store_true",
                    help="score every Adam iterate of each --tune folder (hard runs)")
    ap.add_argument("--no-heldout-grid", action="store_true",
                    help="skip scoring every grid point on the held-out seeds")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    try:
        grid = dict(_parse_axis(a) for a in args.grid)
        run(args.config, grid, args.tune, args.seeds, args.heldout_seeds, args.horizon,
            args.algorithm, args.set, args.point, iterates=args.iterates,
            heldout_grid=not args.no_heldout_grid, out=args.out,
            log=None if args.quiet else print)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
