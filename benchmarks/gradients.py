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

``compare``: on a config, random search (log-uniform in a box around the config's values), ES
(Adam on the ES estimate; every iterate's hard regret on the tuning seeds is seen, the lowest
one is chosen) and, optionally, pathwise (``--select hard``), each given the same number of HARD
points on the tuning seeds (pathwise: its relaxed gradient evaluations are reported beside),
scored on the same held-out seeds, paired. Rows in the schema of ``docs/tune/comparison.json``.

    python benchmarks/gradients.py bias --config section7_2 --horizon 200 --params beta,trigger
    python benchmarks/gradients.py compare --config section7_2 --horizon 1000 \\
        --params 'beta[*],lambda_reg,trigger[*]' --seeds 16 --heldout 32 --budgets 17,51,153
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
from gsjax.tune import BanditTuning, _adam

_BOX = {"beta": math.log(4.0), "lambda_reg": math.log(4.0), "pgd_lr": math.log(4.0)}
_TRIGGER = (math.log(math.log(1.1)), math.log(math.log(16.0)))


def _flat_names(bt):
    """The field of every component of the flat knob vector (ravel order: sorted names)."""
    out = []
    for name in sorted(bt.u0):
        kn = next(k for k in bt.knobs if k.name == name)
        out += [kn.field] * int(np.size(bt.u0[name]))
    return out


def random_points(bt, n: int, rng) -> np.ndarray:
    """``(n, d)`` log-knobs: the config's point first, then log-uniform in the box (beta,
    lambda_reg, pgd_lr within a factor 4 of the config's value; trigger ratio c in [1.1, 16])."""
    x0, _ = bt.flat()
    fields = _flat_names(bt)
    lo = np.array([_TRIGGER[0] if f == "trigger" else x0[i] - _BOX[f]
                   for i, f in enumerate(fields)])
    hi = np.array([_TRIGGER[1] if f == "trigger" else x0[i] + _BOX[f]
                   for i, f in enumerate(fields)])
    pts = lo + (hi - lo) * rng.random((n, x0.shape[0]))
    pts[0] = x0
    return pts


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


def compare(a) -> list[dict]:
    names = [n.strip() for n in a.params.split(",")]
    bt = BanditTuning(a.config, names, seeds=a.seeds, heldout=a.heldout, horizon=a.horizon,
                      overrides=list(a.set or []), algorithm=a.algorithm)
    x0, to_u = bt.flat()
    d, S, T = x0.shape[0], bt.S, bt.T
    rows, held = [], {}
    setting = a.label or f"{a.config} T={T}"
    for budget in a.budgets:
        rng = np.random.default_rng(a.seed + budget)
        # random search: `budget` hard points (the config's point first)
        t0 = time.perf_counter()
        pts = random_points(bt, budget, rng)
        tun = _hard_means(bt, pts).mean(1)
        best = pts[int(np.argmin(tun))]
        wall = time.perf_counter() - t0
        held[("random", budget)] = (_hard_means(bt, [best], bt.held, bt.held_ids)[0], wall)
        # es: steps so that (steps + 1)(2P + 1) <= budget
        steps = budget // (2 * a.pairs + 1) - 1
        if steps >= 0:
            t0 = time.perf_counter()
            erng = np.random.default_rng(a.seed + 7919 * budget)

            def step(u, i):
                x = np.asarray(jax.flatten_util.ravel_pytree(u)[0], np.float64)
                eps = es.perturbations(erng, a.pairs, d)
                v = _hard_means(bt, np.concatenate([x + a.sigma * eps, x - a.sigma * eps,
                                                    x[None]])).mean(1)
                g = (v[:a.pairs] - v[a.pairs:2 * a.pairs])[:, None] * eps
                g = g.sum(0) / (2 * a.sigma * a.pairs)
                return float(v[-1]), jax.flatten_util.ravel_pytree(u)[1](jnp.asarray(g)), {}

            u_best, trace, _ = _adam(step, bt.u0, steps, a.lr, None)
            wall = time.perf_counter() - t0
            xb = np.asarray(jax.flatten_util.ravel_pytree(u_best)[0], np.float64)
            held[("es", budget)] = (_hard_means(bt, [xb], bt.held, bt.held_ids)[0], wall)
        if a.tpe:  # Optuna's TPE, one hard point per trial, in the random search's box
            import optuna

            optuna.logging.set_verbosity(optuna.logging.WARNING)
            t0 = time.perf_counter()
            box = random_points(bt, 1, rng)  # only for the shape
            fields = _flat_names(bt)
            lo = np.array([_TRIGGER[0] if f == "trigger" else x0[i] - _BOX[f]
                           for i, f in enumerate(fields)])
            hi = np.array([_TRIGGER[1] if f == "trigger" else x0[i] + _BOX[f]
                           for i, f in enumerate(fields)])
            study = optuna.create_study(sampler=optuna.samplers.TPESampler(
                seed=a.seed + budget, multivariate=True))
            study.enqueue_trial({f"x{i}": float(x0[i]) for i in range(d)})

            def objective(trial):
                x = np.array([trial.suggest_float(f"x{i}", lo[i], hi[i]) for i in range(d)])
                return float(_hard_means(bt, [x]).mean())

            study.optimize(objective, n_trials=budget)
            xb = np.array([study.best_params[f"x{i}"] for i in range(d)])
            del box
            wall = time.perf_counter() - t0
            held[("tpe", budget)] = (_hard_means(bt, [xb], bt.held, bt.held_ids)[0], wall)
        for (m, bud), (h, w) in list(held.items()):
            if bud != budget:
                continue
            r = held[("random", budget)][0]
            diff, p = _paired(h, r)
            rows.append({"setting": setting, "knobs": d, "method": m,
                         "compute_seed_rounds": int(budget * S * T),
                         "heldout_mean": float(np.mean(h)),
                         "heldout_stderr": float(np.std(h, ddof=1) / math.sqrt(len(h))),
                         "paired_diff_vs_random": diff, "paired_p_vs_random": p,
                         "wall_s": w})
            print(json.dumps(rows[-1]), flush=True)
    d0 = _hard_means(bt, [x0], bt.held, bt.held_ids)[0]
    rows.append({"setting": setting, "knobs": d, "method": "defaults", "compute_seed_rounds": 0,
                 "heldout_mean": float(np.mean(d0)),
                 "heldout_stderr": float(np.std(d0, ddof=1) / math.sqrt(len(d0))),
                 "paired_diff_vs_random": None, "paired_p_vs_random": None})
    return rows


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
    c.add_argument("--lr", type=float, default=0.1)
    c.add_argument("--label")
    c.add_argument("--tpe", action="store_true", help="also Optuna's TPE (pip install optuna)")
    a = ap.parse_args(argv)
    with jax.enable_x64(True):
        t0 = time.perf_counter()
        res = a.func(a)
    res = {"command": "python benchmarks/gradients.py " + " ".join(sys.argv[1:] if argv is None
                                                                   else argv),
           "wall_s": time.perf_counter() - t0, "result": res}
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
