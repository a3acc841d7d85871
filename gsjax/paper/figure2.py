r"""Figure 2 (Section 5.3): joint vs node-wise regret on a dense clique, swept over ``k``.

A config with ``[paper].k_sweep = [k, ...]`` and ``[paper].pairs = [[node-wise entry, joint
entry], ...]`` (``configs/figure2_joint.toml``) is run once per ``k`` with
``--set problem.factor.num_nodes=k`` (same root seed, so the same seeds, problems and noise for
every algorithm at a given ``k``). For each pair and ``k`` the measured ratio

.. math::
    \rho(k) = \overline{\mathrm{Reg}}_T^{\,node} / \overline{\mathrm{Reg}}_T^{\,joint}

(mean prediction regret at ``T`` over seeds) is put beside :math:`\sqrt k`, the paper's claim,
with a standard error from the delta method on the two means (seeds treated as independent
between the two algorithms, which overstates the error of paired seeds), and the fitted
exponent ``a`` of :math:`\rho \propto k^a` (least squares on ``log rho`` vs ``log k``; the paper's
bound gives ``a = 1/2``).

    python -m gsjax.paper.figure2 configs/figure2_joint.toml --out runs/figure2 \
        --docs docs/reproduce/figure2

writes ``runs/figure2/k{K}/`` (one ``gsjax run`` folder per ``k``), ``figure2.json``,
``figure2.md`` and ``figure2.png`` (copied to ``--docs`` when given). ``gsjax reproduce`` calls
:func:`report_section`.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from gsjax.config import find_config, load_config
from gsjax.experiment import run_config
from gsjax.paper._common import copy_outputs
from gsjax.plotting import _plt, _save
from gsjax.results import write_json, write_text

__all__ = ["run_k_sweep", "ratio_table", "plot", "report_section", "main"]


def _ratio(node: dict, joint: dict) -> tuple[float, float]:
    mn, sn = node["mean"], node["stderr"]
    mj, sj = joint["mean"], joint["stderr"]
    r = mn / mj
    return r, abs(r) * math.sqrt((sn / mn) ** 2 + (sj / mj) ** 2)


def run_k_sweep(path, out, overrides=(), ks=None, log=print) -> dict:
    """Run the config once per ``k``; returns the ``figure2.json`` content."""

    out = Path(out)
    base = load_config(path, list(overrides))
    paper = base.paper
    ks = list(ks if ks is not None else paper["k_sweep"])
    pairs = [tuple(p) for p in paper["pairs"]]
    rows = []
    for k in ks:
        cfg = load_config(path, [*overrides, f"problem.factor.num_nodes={k}",
                                 f"name={base.name}_k{k}"])
        log(f"-- k = {k}")
        s = run_config(cfg, out / f"k{k}", log=log, figures=False)
        row = {"k": k, "algorithms": {}}
        for name, a in s["algorithms"].items():
            row["algorithms"][name] = {
                key: a[key] for key in ("algorithm", "prediction_regret", "movement_cost",
                                        "total_regret", "total_updates", "reoptimisations")
            }
        for node, joint in pairs:
            r, se = _ratio(s["algorithms"][node]["prediction_regret"],
                           s["algorithms"][joint]["prediction_regret"])
            row[f"ratio {node}/{joint}"] = {"mean": r, "stderr": se}
        row["sqrt_k"] = math.sqrt(k)
        row["compile_seconds"] = s["meta"]["compile_seconds"]
        row["run_seconds"] = s["meta"]["run_seconds"]
        rows.append(row)
    fits = {}
    for node, joint in pairs:
        key = f"ratio {node}/{joint}"
        x = np.log([r["k"] for r in rows])
        y = np.log([r[key]["mean"] for r in rows])
        fits[key] = float(np.polyfit(x, y, 1)[0]) if len(rows) > 1 else float("nan")
    result = {
        "config": str(path), "overrides": list(overrides), "seeds": base.seeds,
        "horizon": base.horizon, "pairs": [list(p) for p in pairs], "rows": rows,
        "fitted_exponent": fits, "paper_exponent": 0.5,
    }
    write_json(out / "figure2.json", result)
    return result


def ratio_table(result: dict) -> list[str]:
    """Markdown: regret per algorithm and k, and each pair's ratio beside sqrt(k)."""
    names = list(result["rows"][0]["algorithms"])
    pairs = result["pairs"]
    head = "| k | " + " | ".join(f"`{n}` regret" for n in names)
    head += "".join(f" | ratio `{a}`/`{b}`" for a, b in pairs) + " | √k (paper) |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in result["rows"]:
        cells = [str(r["k"])]
        for n in names:
            pr = r["algorithms"][n]["prediction_regret"]
            cells.append(f"{pr['mean']:.1f} ± {pr['stderr']:.1f}")
        for a, b in pairs:
            q = r[f"ratio {a}/{b}"]
            cells.append(f"{q['mean']:.2f} ± {q['stderr']:.2f}")
        cells.append(f"{r['sqrt_k']:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    fit = ", ".join(f"{key}: {v:.2f}" for key, v in result["fitted_exponent"].items())
    lines += ["", f"Fitted exponent a of ratio ∝ k^a over k = "
                  f"{[r['k'] for r in result['rows']]}: {fit} (paper's bound: 0.5)."]
    return lines


def plot(result: dict, path) -> Path:
    """Two panels: regret at T against k (log-log), and the ratios against sqrt(k)."""

    plt = _plt()
    ks = np.array([r["k"] for r in result["rows"]], float)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
    for name in result["rows"][0]["algorithms"]:
        m = np.array([r["algorithms"][name]["prediction_regret"]["mean"] for r in result["rows"]])
        se = np.array([r["algorithms"][name]["prediction_regret"]["stderr"] for r in result["rows"]])
        style = "-" if name.startswith("joint") else "--"
        ax0.errorbar(ks, m, yerr=se, fmt="o" + style, ms=4, capsize=2, label=name)
    ax0.set_xscale("log", base=2)
    ax0.set_yscale("log")
    ax0.set_xlabel("k (nodes sharing the factor)")
    ax0.set_ylabel(f"prediction regret at T = {result['horizon']}")
    ax0.legend(fontsize=8)
    ax0.set_title("regret (mean ± s.e.)")
    for a, b in result["pairs"]:
        q = [r[f"ratio {a}/{b}"] for r in result["rows"]]
        ax1.errorbar(ks, [x["mean"] for x in q], yerr=[x["stderr"] for x in q], fmt="o-", ms=4,
                     capsize=2, label=f"{a} / {b}")
    ax1.plot(ks, np.sqrt(ks), "k:", label="√k (paper)")
    ax1.plot(ks, ks, color="0.6", ls="-.", lw=1, label="k")
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log", base=2)
    ax1.set_xlabel("k")
    ax1.set_ylabel("node-wise regret / joint regret")
    ax1.legend(fontsize=8)
    ax1.set_title(f"measured ratio, {result['seeds']} seeds")
    return _save(fig, Path(path))


def report_section(path, out, quick: bool, log) -> list[str]:
    """The ``gsjax reproduce`` section of a ``k_sweep`` config."""

    cfg = load_config(path)
    over = ["seeds=4", f"horizon={min(cfg.horizon, 200)}", "record_every=1"] if quick else []
    res = run_k_sweep(path, Path(out) / cfg.name, over, log=log)
    plot(res, Path(out) / cfg.name / "figure2.png")
    paper = cfg.paper
    cmd = f"python -m gsjax.paper.figure2 {Path(path).name}" + "".join(f" --set {o}" for o in over)
    lines = [
        f"## {cfg.name} (paper Section {paper.get('section', '?')}, {paper.get('figure', '')})",
        "",
        cfg.description.strip(),
        "",
        f"{res['seeds']} seeds × {res['horizon']} rounds per k; prediction regret mean ± standard "
        f"error. Command: `{cmd}`.",
        "",
    ]
    lines += ratio_table(res)
    lines += ["", f"Paper's claim: {paper.get('claims', '')}", "",
              f"![{cfg.name}]({cfg.name}/figure2.png)", ""]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gsjax.paper.figure2", description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--out", default="runs/figure2")
    ap.add_argument("--set", action="append", default=[], help="dotted.key=value override")
    ap.add_argument("--k", type=int, action="append", help="k values (default: [paper].k_sweep)")
    ap.add_argument("--docs", help="also copy figure2.{png,json,md} to this folder")
    args = ap.parse_args(argv)

    path = find_config(args.config)
    res = run_k_sweep(path, args.out, args.set, args.k)
    out = Path(args.out)
    plot(res, out / "figure2.png")
    cmd = f"python -m gsjax.paper.figure2 {args.config}" + "".join(f" --set {o}" for o in args.set)
    md = [f"Command: `{cmd}`", ""] + ratio_table(res)
    write_text(out / "figure2.md", "\n".join(md) + "\n")
    print("\n".join(md))
    if args.docs:
        print(f"copied to {copy_outputs(out, args.docs, 'figure2')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
