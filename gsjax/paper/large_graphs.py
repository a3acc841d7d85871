r"""Section 5.1 at scale: async vs global lazy updates on sparse graphs of growing ``k``.

A config with ``[paper].k_sweep``, ``stiffness_range = [lo, hi]`` and ``stiffness_seed``
(``configs/large_graphs.toml``) is run once per ``k`` with ``problem.num_nodes = k``,
``problem.num_edges = k`` (a random graph of degree ``<= max_degree``, mean degree 2) and
``agent.lambda_reg`` drawn log-uniformly in ``[lo, hi]`` (NumPy ``default_rng(seed)``, one value
per node). Per ``k`` it reports, for ``lazy`` (global trigger) and ``async_lazy``, the updates
(criteria re-optimised, summed over criteria), value changes, movement, regret, and the waste
factors ``global updates / async updates`` and ``global movement / async movement``, with the
compile and run time of each sweep.

    python -m gsjax.paper.large_graphs configs/large_graphs.toml --out runs/large_graphs \
        --seeds 10=100 --seeds 100=100 --seeds 1000=10 --horizon 200 \
        --docs docs/reproduce/large_graphs

(``--seeds K=S`` sets the seed count of one ``k``; ``--horizon`` sets ``T`` for every ``k``.)
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from gsjax.config import find_config, load_config
from gsjax.experiment import run_config
from gsjax.paper._common import copy_outputs, pm, ratio, script_section
from gsjax.plotting import _plt, _save
from gsjax.results import write_json, write_text

__all__ = ["stiffness", "run_k_sweep", "table", "plot", "run_all", "report_section", "main"]


def stiffness(k: int, lo: float, hi: float, seed: int) -> np.ndarray:
    """(k,) log-uniform stiffness ``lambda_reg,i`` in ``[lo, hi]``."""
    return np.exp(np.random.default_rng(seed).uniform(math.log(lo), math.log(hi), k))


def run_k_sweep(path, out, overrides=(), seeds=None, horizon=None, log=print) -> dict:
    """Run the config once per ``k``; returns the ``large_graphs.json`` content."""

    out = Path(out)
    base = load_config(path, list(overrides))
    paper = base.paper
    lo, hi = paper["stiffness_range"]
    seeds = dict(seeds or {})
    rows = []
    for k in paper["k_sweep"]:
        lam = stiffness(k, lo, hi, paper.get("stiffness_seed", 0))
        extra = [f"problem.num_nodes={k}", f"problem.num_edges={k}", f"name={base.name}_k{k}",
                 "agent.lambda_reg=[" + ",".join(f"{x:.6g}" for x in lam) + "]"]
        if k in seeds:
            extra.append(f"seeds={seeds[k]}")
        if horizon is not None:
            extra += [f"horizon={horizon}", f"record_every={max(1, horizon // 10)}"]
        cfg = load_config(path, [*overrides, *extra])
        log(f"-- k = {k}: {cfg.seeds} seeds x {cfg.horizon} rounds")
        s = run_config(cfg, out / f"k{k}", log=log, figures=False)
        a, g = s["algorithms"]["async_lazy"], s["algorithms"]["lazy"]
        row = {"k": k, "seeds": cfg.seeds, "horizon": cfg.horizon, "algorithms": {}}
        for name, x in (("lazy", g), ("async_lazy", a)):
            row["algorithms"][name] = {key: x[key] for key in (
                "prediction_regret", "movement_cost", "total_regret", "total_updates",
                "total_changes", "reoptimisations", "compile_seconds", "run_seconds")}
            row["algorithms"][name]["seconds_per_seed"] = x["run_seconds"] / cfg.seeds
        row["waste_updates"] = ratio(g["total_updates"], a["total_updates"])
        row["waste_movement"] = ratio(g["movement_cost"], a["movement_cost"])
        row["waste_changes"] = ratio(g["total_changes"], a["total_changes"])
        rows.append(row)
    result = {"config": str(path), "overrides": list(overrides), "rows": rows,
              "stiffness_range": [lo, hi]}
    write_json(out / "large_graphs.json", result)
    return result


def table(result: dict) -> list[str]:
    """Markdown: per k, updates / movement / regret of both schedules and the waste factors."""
    head = ("| k | seeds × T | updates global | updates async | waste (updates) | movement global "
            "| movement async | waste (movement) | regret global | regret async | "
            "run s / seed (global, async) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in result["rows"]:
        g, a = r["algorithms"]["lazy"], r["algorithms"]["async_lazy"]
        lines.append(
            f"| {r['k']} | {r['seeds']} × {r['horizon']} | {pm(g['total_updates'], 0)} | "
            f"{pm(a['total_updates'], 0)} | {pm(r['waste_updates'], 2)} | "
            f"{pm(g['movement_cost'])} | {pm(a['movement_cost'])} | "
            f"{pm(r['waste_movement'], 2)} | {pm(g['prediction_regret'])} | "
            f"{pm(a['prediction_regret'])} | {g['seconds_per_seed']:.3f}, "
            f"{a['seconds_per_seed']:.3f} |")
    return lines


def plot(result: dict, path) -> Path:
    """Waste factors against k (log-log)."""

    plt = _plt()
    ks = np.array([r["k"] for r in result["rows"]], float)
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for key, label in (("waste_updates", "updates: global / async"),
                       ("waste_movement", "movement: global / async"),
                       ("waste_changes", "value changes: global / async")):
        q = [r[key] for r in result["rows"]]
        ax.errorbar(ks, [x["mean"] for x in q], yerr=[x["stderr"] for x in q], fmt="o-", ms=4,
                    capsize=2, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("k (nodes; random graph, degree <= 3)")
    ax.set_ylabel("waste factor")
    ax.legend(fontsize=8)
    ax.set_title("global lazy vs async, heterogeneous stiffness")
    return _save(fig, Path(path))


def run_all(path, out, overrides=(), seeds=None, horizon=None, log=print
            ) -> tuple[dict, list[str]]:
    """The k sweep, ``large_graphs.{json,png,md}`` in ``out``; returns the result and its
    markdown lines (the command first). ``seeds``: {k: S}; ``horizon``: T for every k."""

    out = Path(out)
    res = run_k_sweep(path, out, overrides, seeds, horizon, log=log)
    plot(res, out / "large_graphs.png")
    cmd = (f"python -m gsjax.paper.large_graphs {Path(path).stem}"
           + "".join(f" --set {o}" for o in overrides)
           + "".join(f" --seeds {k}={s}" for k, s in (seeds or {}).items())
           + (f" --horizon {horizon}" if horizon else ""))
    md = [f"Command: `{cmd}`", ""] + table(res)
    write_text(out / "large_graphs.md", "\n".join(md) + "\n")
    return res, md


def report_section(path, out, quick: bool, log) -> list[str]:
    """The ``gsjax reproduce --long`` section: the config's seeds (100 per k) at T = 200, the
    size docs/paper/section5_1.md reports (70 s on 2 CPU cores); quick: 4 seeds x 20 rounds."""

    cfg = load_config(path)
    seeds = {k: 4 for k in cfg.paper["k_sweep"]} if quick else None
    _, md = run_all(path, Path(out) / cfg.name, (), seeds, 20 if quick else 200, log=log)
    return script_section(cfg, md, "large_graphs.png")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gsjax.paper.large_graphs",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--out", default="runs/large_graphs")
    ap.add_argument("--set", action="append", default=[], help="dotted.key=value override")
    ap.add_argument("--seeds", action="append", default=[], help="K=S: seeds for that k")
    ap.add_argument("--horizon", type=int, help="T for every k")
    ap.add_argument("--docs", help="also copy large_graphs.{png,json,md} to this folder")
    args = ap.parse_args(argv)

    seeds = {int(a.split("=")[0]): int(a.split("=")[1]) for a in args.seeds}
    _, md = run_all(find_config(args.config), args.out, args.set, seeds, args.horizon)
    print("\n".join(md))
    if args.docs:
        print(f"copied to {copy_outputs(args.out, args.docs, 'large_graphs')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
