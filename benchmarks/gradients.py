"""Issue 20: the two gradient estimators of the expected hard regret, and baselines at equal
hard compute.

``bias``: on a small case, every estimator's bias and variance against central differences of
the SMOOTHED hard objective ``F_sigma(u) = E_eps E_seeds f_hard(u + sigma eps)`` (Monte Carlo:
``--mc`` draws common to the + and - side, on a pool of ``batches x seeds`` seeds), and wall time
per estimate (after compilation):

* ``es``: :func:`gsjax.es.antithetic_gradient`, ``--pairs`` pairs, on ``--seeds`` seeds (one
  batch), ``--repeats`` independent draws per batch;
* ``pathwise``: autodiff of the relaxed run on one batch of seeds, at each ``--taus``
  temperature (tau = tau_s), full unroll and truncated at ``--windows``.

Bias = mean over batches (and draws) minus the reference; variance = over batches (and draws).

``compare``: on a config (bandit, or ``kind = "oco"``: ``--params eta_scale``), every method
gets the same budget of HARD runs of the tuning seeds (``--budgets``, in points; a row's
``compute_seed_rounds`` is what the method spent, points x seeds x T), and its choice is scored
on the same held-out seeds, paired (against random search, and against TPE when it ran):

* ``random``: uniform in a box of the log-knobs (bandit: beta, lambda_reg, pgd_lr within a
  factor 4 of the config's value, the trigger ratio c in [1.1, 16]; OCO: eta_scale within a
  factor 8), the config's point first; the best on the tuning seeds is chosen;
* ``grid``: the largest n^d <= budget grid on the same box (n >= 2; skipped otherwise);
* ``tpe``: Optuna's ``TPESampler(multivariate=True)`` on the same box, the config's point first;
* ``es``: Adam (``--lr``) on the antithetic ES estimate (``--pairs`` P, ``--sigma``), steps such
  that (steps + 1)(2P + 1) <= budget; the iterate with the lowest hard tuning regret is chosen;
* ``pathwise``: Adam (``--pw-lr``) on autodiff: bandit configs through the RELAXED run (the
  config's ``[relaxed]`` settings), each iterate then run hard on the tuning seeds to choose
  (2 runs of the tuning seeds an iterate); OCO configs through the hard run itself (1 run an
  iterate). One path serves every budget (it is deterministic): budget B takes its first
  iterates.

``plot``: one figure per setting of ``docs/tune/comparison.json`` (``comparison_SETTING.png``).

    python benchmarks/gradients.py bias --config section7_2 --horizon 200 --params beta,trigger
    python benchmarks/gradients.py compare --config section7_2 --horizon 1000 \\
        --params 'beta[*],lambda_reg,trigger[*]' --seeds 16 --heldout 32 --budgets 17,51,153
    python benchmarks/gradients.py compare --config section6_tradeoff --params eta_scale \\
        --horizon 10000 --point 15 --set problem.s0=0.0 --set move_cost=10 \\
        --methods random,grid,es,tpe,pathwise
    python benchmarks/gradients.py plot
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from gsjax import es, runner
from gsjax.config import find_config
from gsjax.oco.config import config_kind
from gsjax.tune import BanditTuning, OCOTuning, _adam

_BOX = {"beta": math.log(4.0), "lambda_reg": math.log(4.0), "pgd_lr": math.log(4.0)}
_TRIGGER = (math.log(math.log(1.1)), math.log(math.log(16.0)))


def _flat_names(bt):
    """The field of every component of the flat knob vector (ravel order: sorted names)."""
    out = []
    for name in sorted(bt.u0):
        kn = next(k for k in bt.knobs if k.name == name)
        out += [kn.field] * int(np.size(bt.u0[name]))
    return out


def box(bt):
    """``(x0, lo, hi)`` of a :class:`BanditTuning`'s flat log-knobs: beta, lambda_reg, pgd_lr
    within a factor 4 of the config's value, the trigger ratio c in [1.1, 16]."""
    x0, _ = bt.flat()
    fields = _flat_names(bt)
    lo = np.array([_TRIGGER[0] if f == "trigger" else x0[i] - _BOX[f]
                   for i, f in enumerate(fields)])
    hi = np.array([_TRIGGER[1] if f == "trigger" else x0[i] + _BOX[f]
                   for i, f in enumerate(fields)])
    return x0, lo, hi


def random_points(x0, lo, hi, n: int, rng) -> np.ndarray:
    """``(n, d)`` points: ``x0`` first, then uniform in the box ``[lo, hi]`` (log-knobs, so
    log-uniform in the knobs)."""
    pts = lo + (hi - lo) * rng.random((n, x0.shape[0]))
    pts[0] = x0
    return pts


def grid_points(lo, hi, budget: int):
    """The largest ``n^d <= budget`` grid (``n >= 2`` points an axis, both ends included), or
    ``None`` when ``2^d > budget``."""
    d = lo.shape[0]
    n = int(math.floor(budget ** (1.0 / d) + 1e-9))
    if n < 2:
        return None
    axes = [np.linspace(lo[i], hi[i], n) for i in range(d)]
    return np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, d)


def _hard_means(bt, xs, b=None, ids=None):
    _, to_u = bt.flat()
    return bt.hard(b or bt.built, bt.seed_ids if ids is None else ids,
                   [to_u(x) for x in xs])


# ---------------------------------------------------------------------------------------------
# bias / variance
# ---------------------------------------------------------------------------------------------


def bias(a) -> dict:
    names = [n.strip() for n in a.params.split(",")]
    sets = list(a.set or [])
    pool = BanditTuning(a.config, names, seeds=a.batches * a.seeds, horizon=a.horizon,
                        overrides=sets, algorithm=a.algorithm)
    x0, to_u = pool.flat()
    d = x0.shape[0]
    rng = np.random.default_rng(a.seed)
    # Reference: central differences of F_sigma on the pool of seeds.
    t0 = time.perf_counter()
    deltas = rng.standard_normal((a.mc, d))
    pts = []
    for j in range(d):
        e = np.eye(d)[j] * a.h
        pts += [x0 + e + a.sigma * deltas, x0 - e + a.sigma * deltas]
    vals = _hard_means(pool, np.concatenate(pts)).mean(1).reshape(d, 2, a.mc)
    dif = (vals[:, 0] - vals[:, 1]) / (2 * a.h)
    ref, ref_se = dif.mean(1), dif.std(1, ddof=1) / math.sqrt(a.mc)
    out = {"setting": {k: v for k, v in vars(a).items() if k != "func"},
           "knobs": sorted(pool.u0), "reference": {"grad": ref.tolist(), "stderr":
                                                   ref_se.tolist(),
                                                   "wall_s": time.perf_counter() - t0},
           "estimators": []}
    print(f"reference grad {np.round(ref, 3)} +- {np.round(ref_se, 3)}", flush=True)

    batches = [BanditTuning(a.config, names, seeds=a.seeds, horizon=a.horizon, overrides=sets,
                            algorithm=a.algorithm, seed_start=b * a.seeds)
               for b in range(a.batches)]

    def summarise(name, ests, walls, extra):
        ests = np.asarray(ests)
        mean = ests.mean(0)
        row = {"estimator": name, **extra, "n": len(ests), "mean": mean.tolist(),
               "bias": (mean - ref).tolist(), "var": ests.var(0, ddof=1).tolist(),
               "rel_bias": float(np.linalg.norm(mean - ref) / np.linalg.norm(ref)),
               "rel_rmse": float(np.sqrt(np.mean(np.sum((ests - ref) ** 2, 1)))
                                 / np.linalg.norm(ref)),
               "cos_mean": float(np.mean([e @ ref / (np.linalg.norm(e) * np.linalg.norm(ref)
                                                     + 1e-300) for e in ests])),
               "wall_s_per_estimate": float(np.median(walls)),
               "hard_points": extra.get("hard_points", 0)}
        out["estimators"].append(row)
        print(f"{name} {extra}: rel bias {row['rel_bias']:.3f}, rel rmse {row['rel_rmse']:.3f},"
              f" cos {row['cos_mean']:.3f}, wall {row['wall_s_per_estimate']:.3f} s", flush=True)

    for P in a.pairs:
        ests, walls = [], []
        for bt in batches:
            for r in range(a.repeats + 1):
                eps = es.perturbations(rng, P, d)
                t1 = time.perf_counter()
                e = es.antithetic_gradient(lambda q, bt=bt: _hard_means(bt, q).mean(1), x0,
                                           a.sigma, eps)
                if r:  # the first call of each batch compiles
                    ests.append(e.grad)
                    walls.append(time.perf_counter() - t1)
        summarise("es", ests, walls, {"pairs": P, "hard_points": 2 * P})
    for win in [None, *a.windows]:
        vgs = [runner.jit(jax.grad(lambda u, rp, bt=bt: bt.relaxed(u, rp)[0]))
               for bt in (BanditTuning(a.config, names, seeds=a.seeds, horizon=a.horizon,
                                       overrides=sets, algorithm=a.algorithm,
                                       seed_start=b * a.seeds, window=win)
                          for b in range(a.batches))]
        for tau in a.taus:
            rp = batches[0].rp._replace(temperature=jnp.asarray(tau, pool.dtype),
                                        solve_temperature=jnp.asarray(tau, pool.dtype))
            ests, walls = [], []
            for vg, bt in zip(vgs, batches):
                u = to_u(x0)
                jax.block_until_ready(vg(u, rp))
                t1 = time.perf_counter()
                g = vg(u, rp)
                jax.block_until_ready(g)
                walls.append(time.perf_counter() - t1)
                from jax.flatten_util import ravel_pytree

                ests.append(np.asarray(ravel_pytree(g)[0], np.float64))
            summarise("pathwise", ests, walls, {"tau": tau, "window": win})
    return out


# ---------------------------------------------------------------------------------------------
# compare at equal hard compute
# ---------------------------------------------------------------------------------------------


def _paired(a, b):
    from scipy import stats

    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    p = float(stats.ttest_rel(a, b).pvalue) if np.any(d != 0) else 1.0
    return float(d.mean()), p


class _Bandit:
    """A bandit config's knobs (:class:`BanditTuning`) as ``compare`` sees them: the flat
    log-knobs ``x0`` and their box, hard regret per seed on the tuning / held-out seeds, and the
    pathwise path (Adam on the RELAXED run's gradient; each iterate's hard run on the tuning
    seeds picks the best: 2 runs of the tuning seeds per iterate)."""

    pathwise_cost = 2  # one relaxed gradient evaluation + one hard run, per iterate

    def __init__(self, a):
        names = [n.strip() for n in a.params.split(",")]
        self.bt = bt = BanditTuning(a.config, names, seeds=a.seeds, heldout=a.heldout,
                                    horizon=a.horizon, overrides=list(a.set or []),
                                    algorithm=a.algorithm)
        self.x0, self.lo, self.hi = box(bt)
        self.S, self.T = bt.S, bt.T

    def tune(self, xs):
        return _hard_means(self.bt, xs)

    def held(self, xs):
        return _hard_means(self.bt, xs, self.bt.held, self.bt.held_ids)

    def pathwise(self, steps: int, lr: float):
        """``(iterates (n, d), hard tuning means (n,), cumulative wall (n,))``."""
        bt = self.bt
        x0, to_u = bt.flat()
        vg = runner.jit(jax.value_and_grad(bt.relaxed, has_aux=True))
        jax.block_until_ready(vg(bt.u0, bt.rp))  # compile outside the clock
        walls = []

        def step(u, i):
            t0 = time.perf_counter()
            (val, _), g = vg(u, bt.rp)
            jax.block_until_ready(g)
            walls.append(time.perf_counter() - t0)
            return val, g, {}

        _, trace, _ = _adam(step, bt.u0, steps, lr, None)
        xs = np.array([np.asarray(jax.flatten_util.ravel_pytree(
            {k: jnp.asarray(v) for k, v in t["u"].items()})[0], np.float64) for t in trace])
        self.tune(xs[:1])
        t0 = time.perf_counter()
        vals = self.tune(xs).mean(1)
        per_hard = (time.perf_counter() - t0) / len(xs)
        return xs, vals, np.cumsum(np.asarray(walls) + per_hard)


class _OCO:
    """A ``kind = "oco"`` config's step size (``log eta_scale``, :class:`gsjax.tune.OCOTuning`):
    box ``eta_scale`` within a factor 8 of the entry's; pathwise is autodiff of the hard run
    itself (no relaxation), so each iterate costs one run of the tuning seeds and its value is
    the hard regret there."""

    pathwise_cost = 1

    def __init__(self, a):
        names = [n.strip() for n in a.params.split(",")]
        self.ot = ot = OCOTuning.from_path(find_config(a.config), names, seeds=a.seeds,
                                           heldout=a.heldout, horizon=a.horizon,
                                           overrides=list(a.set or []), algorithm=a.algorithm,
                                           point=a.point)
        self.x0 = np.zeros(1)
        self.lo, self.hi = np.array([-math.log(8.0)]), np.array([math.log(8.0)])
        self.S, self.T = ot.S, ot.T

    def _us(self, xs):
        return [{"eta_scale": float(x[0])} for x in np.atleast_2d(xs)]

    def tune(self, xs):
        return self.ot.hard(self.ot.keys, self._us(xs))

    def held(self, xs):
        return self.ot.hard(self.ot.hkeys, self._us(xs))

    def pathwise(self, steps: int, lr: float):
        ot = self.ot
        vg = runner.jit(jax.value_and_grad(lambda u: jnp.mean(ot.per_seed(u, ot.keys))))
        jax.block_until_ready(vg(ot.u0))
        walls = []

        def step(u, i):
            t0 = time.perf_counter()
            val, g = vg(u)
            jax.block_until_ready(g)
            walls.append(time.perf_counter() - t0)
            return val, g, {}

        _, trace, _ = _adam(step, ot.u0, steps, lr, None)
        xs = np.array([[t["u"]["eta_scale"]] for t in trace], np.float64)
        return xs, np.array([t["objective"] for t in trace]), np.cumsum(walls)


def compare(a) -> list[dict]:
    st = _OCO(a) if config_kind(find_config(a.config)) == "oco" else _Bandit(a)
    x0, lo, hi = st.x0, st.lo, st.hi
    d, S, T = x0.shape[0], st.S, st.T
    setting = a.label or f"{a.config} T={T}"
    methods = set(a.methods.split(","))
    if a.tpe:
        methods.add("tpe")
    unknown = methods - {"random", "es", "tpe", "grid", "pathwise"}
    if unknown:
        raise SystemExit(f"--methods: unknown {sorted(unknown)}")
    rows = []
    path = None
    if "pathwise" in methods:  # one deterministic path; budget B takes its first iterates
        steps = max(a.budgets) // st.pathwise_cost - 1
        path = st.pathwise(steps, a.pw_lr)
        print(f"pathwise: {steps + 1} iterates, hard tuning regret "
              f"{path[1][0]:.1f} -> min {path[1].min():.1f}", flush=True)
    for budget in a.budgets:
        held = {}  # method -> (held-out per seed, wall, hard points used)
        rng = np.random.default_rng(a.seed + budget)
        # random search: `budget` hard points (the config's point first)
        t0 = time.perf_counter()
        pts = random_points(x0, lo, hi, budget, rng)
        tun = st.tune(pts).mean(1)
        best = pts[int(np.argmin(tun))]
        held["random"] = (st.held([best])[0], time.perf_counter() - t0, budget)
        if "grid" in methods:
            g = grid_points(lo, hi, budget)
            if g is not None:
                t0 = time.perf_counter()
                best = g[int(np.argmin(st.tune(g).mean(1)))]
                held["grid"] = (st.held([best])[0], time.perf_counter() - t0, len(g))
        # es: steps so that (steps + 1)(2P + 1) <= budget
        steps = budget // (2 * a.pairs + 1) - 1
        if "es" in methods and steps >= 0:
            t0 = time.perf_counter()
            erng = np.random.default_rng(a.seed + 7919 * budget)
            xs, vals = [], []

            def step(u, i):
                x = np.asarray(jax.flatten_util.ravel_pytree(u)[0], np.float64)
                eps = es.perturbations(erng, a.pairs, d)
                v = st.tune(np.concatenate([x + a.sigma * eps, x - a.sigma * eps,
                                            x[None]])).mean(1)
                xs.append(x)
                vals.append(float(v[-1]))
                g = (v[:a.pairs] - v[a.pairs:2 * a.pairs])[:, None] * eps
                g = g.sum(0) / (2 * a.sigma * a.pairs)
                return float(v[-1]), jax.flatten_util.ravel_pytree(u)[1](jnp.asarray(g)), {}

            u0 = {"x": jnp.asarray(x0)}
            _adam(step, u0, steps, a.lr, None)
            xb = xs[int(np.argmin(vals))]
            held["es"] = (st.held([xb])[0], time.perf_counter() - t0,
                          (steps + 1) * (2 * a.pairs + 1))
        if "tpe" in methods:  # Optuna's TPE, one hard point per trial, in the random search's box
            import optuna

            optuna.logging.set_verbosity(optuna.logging.WARNING)
            t0 = time.perf_counter()
            study = optuna.create_study(sampler=optuna.samplers.TPESampler(
                seed=a.seed + budget, multivariate=True))
            study.enqueue_trial({f"x{i}": float(x0[i]) for i in range(d)})

            def objective(trial):
                x = np.array([trial.suggest_float(f"x{i}", lo[i], hi[i]) for i in range(d)])
                return float(st.tune([x]).mean())

            study.optimize(objective, n_trials=budget)
            xb = np.array([study.best_params[f"x{i}"] for i in range(d)])
            held["tpe"] = (st.held([xb])[0], time.perf_counter() - t0, budget)
        if path is not None:
            n = budget // st.pathwise_cost
            if n >= 1:
                xs, vals, walls = path
                xb = xs[int(np.argmin(vals[:n]))]
                held["pathwise"] = (st.held([xb])[0], float(walls[n - 1]),
                                    n * st.pathwise_cost)
        for m, (h, w, used) in held.items():
            diff, p = _paired(h, held["random"][0])
            row = {"setting": setting, "knobs": d, "method": m,
                   "compute_seed_rounds": int(used * S * T),
                   "heldout_mean": float(np.mean(h)),
                   "heldout_stderr": float(np.std(h, ddof=1) / math.sqrt(len(h))),
                   "paired_diff_vs_random": diff, "paired_p_vs_random": p,
                   "hard_points": int(used), "budget": int(budget), "wall_s": w}
            if "tpe" in held:
                row["paired_diff_vs_tpe"], row["paired_p_vs_tpe"] = _paired(h, held["tpe"][0])
            rows.append(row)
            print(json.dumps(row), flush=True)
    d0 = st.held([x0])[0]
    rows.append({"setting": setting, "knobs": d, "method": "defaults", "compute_seed_rounds": 0,
                 "heldout_mean": float(np.mean(d0)),
                 "heldout_stderr": float(np.std(d0, ddof=1) / math.sqrt(len(d0))),
                 "paired_diff_vs_random": None, "paired_p_vs_random": None})
    return rows


_PLOT_STYLE = {"random": ("tab:gray", "o"), "grid": ("tab:brown", "s"),
               "tpe": ("tab:blue", "^"), "es": ("tab:red", "D"),
               "pathwise": ("tab:green", "v")}


def plot(a) -> list[str]:
    """One figure per setting of ``--rows`` (``comparison.json``) with two budgets or more
    (the others: only the table): held-out hard regret against
    the hard compute spent, one line per method through the mean over draws (``seed``), each
    draw's point with its held-out standard error; the defaults as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = json.loads(Path(a.rows).read_text())
    settings = a.settings.split(",") if a.settings else sorted({r["setting"] for r in rows})
    out = []
    for setting in settings:
        mine = [r for r in rows if r["setting"] == setting]
        if len({r.get("budget") for r in mine if r["method"] != "defaults"}) < 2:
            print(f"{setting}: one budget, no figure\n" + summary_table(mine), flush=True)
            continue
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        methods = [m for m in _PLOT_STYLE if any(r["method"] == m for r in mine)]
        seeds = sorted({r.get("seed", 0) for r in mine})
        for j, m in enumerate(methods):
            col, mk = _PLOT_STYLE[m]
            rs = sorted((r for r in mine if r["method"] == m),
                        key=lambda r: r["compute_seed_rounds"])
            shift = 1.0 + 0.025 * (j - len(methods) / 2)  # spread the markers a little
            for k, sd in enumerate(seeds):
                rr = [r for r in rs if r.get("seed", 0) == sd]
                ax.errorbar([r["compute_seed_rounds"] * shift for r in rr],
                            [r["heldout_mean"] for r in rr],
                            yerr=[r["heldout_stderr"] for r in rr], fmt=mk, color=col,
                            ms=4, alpha=0.45 if len(seeds) > 1 else 1.0, capsize=2,
                            lw=0.8)
            line_x, line_y = [], []
            for b in sorted({r["budget"] for r in rs}):
                rb = [r for r in rs if r["budget"] == b]
                line_x.append(np.mean([r["compute_seed_rounds"] for r in rb]) * shift)
                line_y.append(np.mean([r["heldout_mean"] for r in rb]))
            ax.plot(line_x, line_y, "-", color=col, marker=mk, label=m)
        dflt = [r for r in mine if r["method"] == "defaults"]
        if dflt:
            ax.axhline(dflt[0]["heldout_mean"], color="k", ls="--", lw=0.8,
                       label="config's defaults")
        ax.set_xscale("log")
        ticks = sorted({(r["compute_seed_rounds"], r["hard_points"]) for r in mine
                        if r["method"] == "random"})
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xticks([t for t, _ in ticks], [f"{t / 1e6:.3g}M\n({n} pts)" for t, n in ticks])
        ax.set_xlabel("hard compute spent tuning (seed-rounds; hard points)")
        ax.set_ylabel("held-out hard regret (mean over held-out seeds)")
        knobs = mine[0]["knobs"]
        ax.set_title(f"{setting} ({knobs} knob{'s' if knobs > 1 else ''}, "
                     f"{len(seeds)} draw{'s' if len(seeds) > 1 else ''})", fontsize=10)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = Path(a.outdir) / f"comparison_{setting}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(str(path))
        print(f"wrote {path}", flush=True)
        print(summary_table(mine), flush=True)
    return out


def summary_table(rows) -> str:
    """Markdown: per budget, each method's held-out mean over the draws, and in how many draws
    it beat random search / TPE (paired, p < 0.05) out of the draws."""
    methods = [m for m in _PLOT_STYLE if any(r["method"] == m for r in rows)]
    lines = ["| hard points | " + " | ".join(methods) + " |",
             "|---|" + "---|" * len(methods)]
    for b in sorted({r["budget"] for r in rows if "budget" in r}):
        cells = []
        for m in methods:
            rb = [r for r in rows if r["method"] == m and r.get("budget") == b]
            if not rb:
                cells.append("–")
                continue
            cell = f"{np.mean([r['heldout_mean'] for r in rb]):.1f}"
            if m != "random":
                wins = sum(r["paired_diff_vs_random"] < 0 and r["paired_p_vs_random"] < 0.05
                           for r in rb)
                loss = sum(r["paired_diff_vs_random"] > 0 and r["paired_p_vs_random"] < 0.05
                           for r in rb)
                cell += f" ({wins}+/{loss}− vs random"
                if m != "tpe" and all("paired_p_vs_tpe" in r for r in rb):
                    w = sum(r["paired_diff_vs_tpe"] < 0 and r["paired_p_vs_tpe"] < 0.05
                            for r in rb)
                    lo = sum(r["paired_diff_vs_tpe"] > 0 and r["paired_p_vs_tpe"] < 0.05
                             for r in rb)
                    cell += f", {w}+/{lo}− vs tpe"
                cell += ")"
            cells.append(cell)
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _append(path: Path, rows: list[dict], seed: int, command: str) -> None:
    """Add ``rows`` (with ``seed`` and ``command``) to the list in ``path``, replacing the rows
    of the same setting, seed, method and compute (a rerun)."""
    old = json.loads(path.read_text()) if path.exists() else []

    def key(r):
        return (r["setting"], r.get("seed"), r["method"], r["compute_seed_rounds"],
                r.get("budget"))

    new = [{**r, "seed": seed, "command": command} for r in rows]
    keys = {key(r) for r in new}
    path.write_text(json.dumps([r for r in old if key(r) not in keys] + new, indent=1) + "\n")


def main(argv=None) -> int:
    import jax.flatten_util  # noqa: F401

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(required=True)
    for name, fn in (("bias", bias), ("compare", compare)):
        p = sub.add_parser(name)
        p.set_defaults(func=fn)
        p.add_argument("--config", default="section7_2")
        p.add_argument("--params", default="beta,trigger")
        p.add_argument("--horizon", type=int, default=200)
        p.add_argument("--seeds", type=int, default=8)
        p.add_argument("--algorithm")
        p.add_argument("--set", action="append")
        p.add_argument("--sigma", type=float, default=0.3)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--out", type=Path)
    b = sub.choices["bias"]
    b.add_argument("--batches", type=int, default=4)
    b.add_argument("--mc", type=int, default=128)
    b.add_argument("--h", type=float, default=0.1)
    b.add_argument("--pairs", type=lambda s: [int(x) for x in s.split(",")], default=[4, 16])
    b.add_argument("--repeats", type=int, default=4)
    b.add_argument("--taus", type=lambda s: [float(x) for x in s.split(",")],
                   default=[0.05, 0.01, 0.002])
    b.add_argument("--windows", type=lambda s: [int(x) for x in s.split(",")], default=[20])
    c = sub.choices["compare"]
    c.add_argument("--heldout", type=int, default=32)
    c.add_argument("--budgets", type=lambda s: [int(x) for x in s.split(",")],
                   default=[17, 51, 153])
    c.add_argument("--pairs", type=int, default=8)
    c.add_argument("--lr", type=float, default=0.1, help="es: Adam's step size")
    c.add_argument("--pw-lr", type=float, default=0.1, help="pathwise: Adam's step size")
    c.add_argument("--methods", default="random,es",
                   help="comma-separated from random,grid,es,tpe,pathwise (random always runs)")
    c.add_argument("--point", type=int, default=0, help="OCO configs: the entry's budget point")
    c.add_argument("--label")
    c.add_argument("--tpe", action="store_true", help="also Optuna's TPE (pip install optuna)")
    c.add_argument("--append", type=Path,
                   help="add the rows (with seed and command) to this comparison.json, "
                        "replacing rows of the same setting, --seed, method and compute")
    pl = sub.add_parser("plot", help="a figure per setting of comparison.json")
    pl.set_defaults(func=plot)
    pl.add_argument("--rows", default="docs/tune/comparison.json")
    pl.add_argument("--outdir", default="docs/tune")
    pl.add_argument("--settings", help="comma-separated (default: every setting)")
    a = ap.parse_args(argv)
    if a.func is plot:
        plot(a)
        return 0
    command = "python benchmarks/gradients.py " + " ".join(sys.argv[1:] if argv is None
                                                           else argv)
    with jax.enable_x64(True):
        t0 = time.perf_counter()
        res = a.func(a)
    res = {"command": command, "wall_s": time.perf_counter() - t0, "result": res}
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(res, indent=1, default=str))
    if a.func is compare and a.append:
        _append(a.append, res["result"], a.seed, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
