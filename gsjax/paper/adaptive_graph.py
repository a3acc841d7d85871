r"""Section 5.2: adaptive graph refinement -- recovery against warm-up and signal, and regret.

From a config with ``[paper].gamma_sweep``, ``tau_sweep`` and ``recovery_seeds``
(``configs/adaptive_graph.toml``; ``theta*`` drawn with distribution ``"signal"``, so every real
coefficient has magnitude in ``[gamma, 2 gamma]``, ``gamma = problem.theta.scale``):

1. **Recovery.** For each ``gamma`` and ``tau``, the entry ``adaptive`` is run for ``tau``
   rounds on ``recovery_seeds`` seeds (one ``vmap``) and its refined scopes are compared with
   the true ones: the recovery rate (every criterion's scope exact), and the mean numbers of
   false and missed neighbours per seed. Beside it, a Gaussian approximation: each estimated
   coefficient ``~ N(theta, sigma^2 [Sigma^{-1}]_jj / tau)`` independently, with ``Sigma =
   E[s s^T] = I/12 + 11^T/4`` of the uniform warm-up (linear features; ``[Sigma^{-1}]_jj =
   12 (1 - 3 / (1 + 3 n))``), edges' ``|theta| ~ U(gamma, 2 gamma)``. It ignores the ridge
   bias and the correlations between coefficients.
2. **Regret.** For each ``gamma``, ``gsjax run`` of the config with ``signal_gamma = gamma`` and
   ``warmup = tau(gamma)``, the smallest ``tau`` of the sweep whose measured recovery is at
   least 0.9 (the largest if none is): adaptive vs lazy with the true graph known vs lazy on the
   complete super-graph (Corollary 5), same seeds and noise, cumulative regret curves, and the
   first recorded round from which the adaptive learner's mean total regret (prediction +
   movement) stays below the super-graph's ("break-even"), beside ``gamma^-4``.

    python -m gsjax.paper.adaptive_graph configs/adaptive_graph.toml --out runs/adaptive_graph \
        --seeds 50 --docs docs/reproduce/adaptive_graph
"""

from __future__ import annotations

import dataclasses

import argparse
import math
import time
from pathlib import Path

import numpy as np

from gsjax import runner
from gsjax.algorithms import adaptive as A
from gsjax.config import find_config, load_config
from gsjax.experiment import build, run_config
from gsjax.paper._common import copy_outputs, script_section
from gsjax.plotting import _plt, _save
from gsjax.problem import seed_axes
from gsjax.results import read_npz, write_json, write_text

__all__ = ["recovery_grid", "approx_recovery", "regret_runs", "tables", "plot", "run_all",
           "report_section", "main"]


def approx_recovery(tau: int, gamma: float, sigma: float, n: int, edges: int, non_edges: int,
                    lam: float = 1.0) -> float:
    """Gaussian approximation of the exact-recovery probability (see the module docstring)."""
    var = sigma ** 2 * 12.0 * (1.0 - 3.0 / (1.0 + 3.0 * n)) / max(tau, 1)
    sd = math.sqrt(var)
    h = gamma / 2
    phi = lambda z: 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))
    p_null = phi(h / sd) - phi(-h / sd)
    mags = gamma * (1.0 + (np.arange(200) + 0.5) / 200)  # |theta| ~ U(gamma, 2 gamma)
    p_edge = float(np.mean([1.0 - (phi((h - m) / sd) - phi((-h - m) / sd)) for m in mags]))
    return p_null ** non_edges * p_edge ** edges


def recovery_grid(path, overrides=(), log=print) -> dict:
    """Recovery rate of the true graph for every (gamma, tau) of the config's sweeps."""
    import jax
    import jax.numpy as jnp


    base = load_config(path, list(overrides))
    paper = base.paper
    seeds = int(paper.get("recovery_seeds", base.seeds))
    entry = next(e for e in base.algorithms if e.name == "adaptive")
    rows = []
    for gamma in paper["gamma_sweep"]:
        cfg = load_config(path, [*overrides, f"problem.theta.scale={gamma}", f"seeds={seeds}"])
        built = build(cfg)
        ba = next(b for b in built.algorithms if b.name == entry.name)
        pax = seed_axes(built.problem, built.problem_per_seed)
        truth = np.asarray(jax.vmap(A.true_slots, in_axes=(pax,))(built.problem))
        sizes = built.scopes.mask.sum(axis=1)
        n = built.structure.num_coords
        edges = int(np.sum(sizes - 1))
        non_edges = int(np.sum(n - sizes))
        sigma = float(np.max(cfg.problem.noise.sigma))
        keys = runner.seed_keys(jax.random.key(cfg.root_seed), jnp.arange(seeds, dtype=jnp.uint32))
        for tau in paper["tau_sweep"]:
            spec = dataclasses.replace(ba.spec, warmup=tau, signal_gamma=gamma, refined="lazy")
            algo = A.make(built.structure, spec)
            f = runner.jit(jax.vmap(lambda key, prob: runner.run(
                key, algo, built.structure, prob, ba.params, ba.move_cost, tau, tau)[0].graph,
                in_axes=(0, pax)))
            t0 = time.perf_counter()
            kept = np.asarray(f(keys, built.problem))
            secs = time.perf_counter() - t0
            ok = np.all(kept == truth, axis=(1, 2))
            p = float(ok.mean())
            rows.append({
                "gamma": gamma, "tau": tau, "seeds": seeds, "recovery": p,
                "recovery_stderr": math.sqrt(p * (1 - p) / seeds),
                "false_neighbours": float(np.mean(np.sum(kept & ~truth, axis=(1, 2)))),
                "missed_neighbours": float(np.mean(np.sum(~kept & truth, axis=(1, 2)))),
                "approx": approx_recovery(tau, gamma, sigma, n, edges, non_edges),
                "seconds": secs,
            })
            log(f"gamma {gamma} tau {tau}: recovery {p:.3f} (approx {rows[-1]['approx']:.3f}), "
                f"{secs:.1f} s")
    return {"rows": rows, "edges": edges, "non_edges": non_edges, "n": n}


def regret_runs(path, out, grid: dict, overrides=(), seeds=None, log=print) -> list[dict]:
    """One ``gsjax run`` per gamma with ``warmup = tau(gamma)``; summaries and curves."""

    base = load_config(path, list(overrides))
    out = Path(out)
    rows = []
    for gamma in base.paper["gamma_sweep"]:
        cand = [r for r in grid["rows"] if r["gamma"] == gamma]
        good = [r["tau"] for r in cand if r["recovery"] >= 0.9]
        tau = min(good) if good else max(r["tau"] for r in cand)
        extra = [f"problem.theta.scale={gamma}", f"name={base.name}_g{gamma}"]
        for e in base.algorithms:
            if e.algorithm == "adaptive_lazy" and e.agent.warmup:
                extra += [f"algorithms.{e.name}.warmup={tau}",
                          f"algorithms.{e.name}.signal_gamma={gamma}"]
        if seeds is not None:
            extra.append(f"seeds={seeds}")
        cfg = load_config(path, [*overrides, *extra])
        folder = out / f"gamma{gamma}"
        s = run_config(cfg, folder, log=log, figures=False)
        arr = read_npz(folder / "arrays.npz")
        curves = {name: (np.mean(arr[f"{name}/cum_regret"] + arr[f"{name}/cum_movement"], axis=0)
                         ).tolist() for name in s["algorithms"]}
        rounds = arr["rounds"].tolist()
        a, sup = np.array(curves["adaptive"]), np.array(curves["supergraph"])
        below = a < sup
        idx = next((i for i in range(len(below)) if below[i:].all()), None)
        rows.append({
            "gamma": gamma, "tau": tau, "seeds": cfg.seeds, "horizon": cfg.horizon,
            "gamma_pow_minus4": gamma ** -4,
            "break_even_round": None if idx is None else int(rounds[idx]),
            "algorithms": {n: {k: x[k] for k in ("prediction_regret", "movement_cost",
                                                  "total_regret", "total_updates",
                                                  "compile_seconds", "run_seconds")}
                           for n, x in s["algorithms"].items()},
            "rounds": rounds, "curves": curves,
            "adaptive_recovery": s["algorithms"]["adaptive"].get("learned_graph", {}).get(
                "exact_recovery"),
        })
    return rows


def _f(x: dict, digits: int = 0) -> str:
    return f"{x['mean']:.{digits}f} ± {x['stderr']:.{digits}f}"


def tables(result: dict) -> list[str]:
    """Markdown: the recovery grid, then regret and movement per gamma."""
    grid = result["grid"]
    gammas = sorted({r["gamma"] for r in grid["rows"]})
    taus = sorted({r["tau"] for r in grid["rows"]})
    seeds = grid["rows"][0]["seeds"]
    lines = [f"Recovery rate of the true graph (every criterion's scope exact), {seeds} seeds; "
             "in brackets the Gaussian approximation:", "",
             "| gamma \\ tau | " + " | ".join(str(t) for t in taus) + " |",
             "|---|" + "---|" * len(taus)]
    for g in gammas:
        cells = []
        for t in taus:
            r = next(r for r in grid["rows"] if r["gamma"] == g and r["tau"] == t)
            cells.append(f"{r['recovery']:.2f} ({r['approx']:.2f})")
        lines.append(f"| {g} | " + " | ".join(cells) + " |")
    return lines + [""] + regret_table(result)


def regret_table(result: dict) -> list[str]:
    """Markdown: regret and movement per gamma (with the adaptive arm's measured recovery)."""
    names = list(result["regret"][0]["algorithms"])
    lines = ["Total regret (prediction + movement) and movement at T, mean ± s.e.:", "",
              "| gamma | tau(gamma) | gamma^-4 | " + " | ".join(f"`{n}` total / movement"
                                                            for n in names)
              + " | break-even round (adaptive < supergraph) | recovery of `adaptive` |",
              "|---|---|---|" + "---|" * len(names) + "---|---|"]
    for r in result["regret"]:
        cells = [f"{_f(r['algorithms'][n]['total_regret'])} / "
                 f"{_f(r['algorithms'][n]['movement_cost'])}" for n in names]
        be = r["break_even_round"]
        be = str(be) if be is not None else "> " + str(r["horizon"])
        rec = r.get("adaptive_recovery")
        rec = "–" if rec is None else f"{rec['mean']:.2f}"
        lines.append(f"| {r['gamma']} | {r['tau']} | {r['gamma_pow_minus4']:.0f} | "
                     + " | ".join(cells) + f" | {be} | {rec} |")
    r0 = result["regret"][0]
    lines += ["", f"{r0['seeds']} seeds × T = {r0['horizon']} rounds per gamma."]
    return lines


def plot(result: dict, path) -> Path:
    """Recovery against tau per gamma; cumulative total regret of the arms per gamma."""

    plt = _plt()
    regs = result["regret"]
    measured = not any(r.get("given") for r in result["grid"]["rows"])
    first = 1 if measured else 0
    fig, axes = plt.subplots(1, first + len(regs), figsize=(4.2 * (first + len(regs)), 3.6),
                             squeeze=False)
    axes = axes[0]
    ax = axes[0]
    for g in sorted({r["gamma"] for r in result["grid"]["rows"]}) if measured else ():
        rows = [r for r in result["grid"]["rows"] if r["gamma"] == g]
        taus = [r["tau"] for r in rows]
        line = ax.errorbar(taus, [r["recovery"] for r in rows],
                           yerr=[r["recovery_stderr"] for r in rows], fmt="o-", ms=4, capsize=2,
                           label=f"γ = {g}")
        ax.plot(taus, [r["approx"] for r in rows], ls=":", color=line[0].get_color())
    if measured:
        ax.set_xscale("log")
        ax.set_xlabel("warm-up τ (rounds)")
        ax.set_ylabel("recovery rate (dotted: Gaussian approx.)")
        ax.legend(fontsize=8)
        ax.set_title("sparsity test |θ̂| > γ/2")
    for ax, r in zip(axes[first:], regs):
        for name, c in r["curves"].items():
            ax.plot(r["rounds"], c, label=name, lw=1.2)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("round t")
        ax.set_ylabel("mean cumulative regret + movement")
        ax.set_title(f"γ = {r['gamma']}, τ = {r['tau']}")
        ax.legend(fontsize=7)
    return _save(fig, Path(path))


def given_taus(path, taus: dict, overrides=()) -> dict:
    """A stand-in for :func:`recovery_grid` when every gamma's warm-up is given
    (``taus[gamma] = tau``): one row per gamma, recovery not measured (NaN)."""

    gammas = load_config(path, list(overrides)).paper["gamma_sweep"]
    missing = [g for g in gammas if g not in taus]
    if missing:
        raise ValueError(f"--tau missing for gamma {missing} (the config's gamma_sweep: {gammas})")
    return {"rows": [{"gamma": g, "tau": taus[g], "recovery": float("nan"), "given": True}
                     for g in gammas]}


def run_all(path, out, overrides=(), seeds=None, log=print, taus=None,
            horizon=None) -> tuple[dict, list[str]]:
    """Recovery grid, regret runs, ``adaptive_graph.{json,png,md}`` in ``out``; returns the
    result and its markdown lines (the command first). With ``taus`` ({gamma: tau} for every
    gamma) the recovery grid is skipped and those warm-ups are used; ``horizon`` sets ``T`` of
    the regret runs."""

    out = Path(out)
    overrides = list(overrides)
    if horizon is not None:
        overrides += [f"horizon={horizon}", f"record_every={max(1, horizon // 200)}"]
    t0 = time.perf_counter()
    grid = given_taus(path, taus, overrides) if taus else recovery_grid(path, overrides, log=log)
    t1 = time.perf_counter()
    regret = regret_runs(path, out, grid, overrides, seeds, log=log)
    t2 = time.perf_counter()
    result = {"config": str(path), "overrides": overrides, "grid": grid, "regret": regret,
              "seconds": {"recovery": t1 - t0, "regret": t2 - t1}}
    write_json(out / "adaptive_graph.json", result)
    plot(result, out / "adaptive_graph.png")
    cmd = (f"python -m gsjax.paper.adaptive_graph {Path(path).stem}"
           + "".join(f" --set {o}" for o in overrides)
           + (f" --seeds {seeds}" if seeds else "")
           + "".join(f" --tau {g}={t}" for g, t in (taus or {}).items()))
    md = [f"Command: `{cmd}` ({t1 - t0:.0f} s recovery grid, {t2 - t1:.0f} s regret runs)", ""]
    md += tables(result) if not taus else regret_table(result)
    write_text(out / "adaptive_graph.md", "\n".join(md) + "\n")
    return result, md


def report_section(path, out, quick: bool, log) -> list[str]:
    """The ``gsjax reproduce --long`` section (quick: 4 seeds, 200 rounds, a 2 x 8 recovery grid)."""

    cfg = load_config(path)
    over = (["seeds=4", "horizon=200", "record_every=10", "paper.tau_sweep=[25,100]",
             "paper.recovery_seeds=8"] if quick else [])
    folder = Path(out) / cfg.name
    _, md = run_all(path, folder, over, log=log)
    return script_section(cfg, md, "adaptive_graph.png")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gsjax.paper.adaptive_graph",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--out", default="runs/adaptive_graph")
    ap.add_argument("--set", action="append", default=[], help="dotted.key=value override")
    ap.add_argument("--seeds", type=int, help="seeds of the regret runs (default: the config's)")
    ap.add_argument("--horizon", type=int, help="T of the regret runs (default: the config's)")
    ap.add_argument("--tau", action="append", default=[], metavar="GAMMA=TAU",
                    help="the warm-up for one gamma; given for every gamma, the recovery grid "
                         "is skipped")
    ap.add_argument("--docs", help="also copy adaptive_graph.{png,json,md} to this folder")
    args = ap.parse_args(argv)

    out = Path(args.out)
    taus = {float(a.split("=")[0]): int(a.split("=")[1]) for a in args.tau} or None
    _, md = run_all(find_config(args.config), out, args.set, args.seeds, taus=taus,
                    horizon=args.horizon)
    print("\n".join(md))
    if args.docs:
        print(f"copied to {copy_outputs(out, args.docs, 'adaptive_graph')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
