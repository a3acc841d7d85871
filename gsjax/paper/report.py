"""``gsjax reproduce``: run every paper experiment config and write one Markdown report.

A config takes part when its ``[paper]`` table is non-empty. Its numbers are put beside the
paper's (the ``[paper]`` table holds them). ``[paper].sensitivity`` lists variants, each
``{label = "...", set = ["key=value", ...]}``, run with the same seeds and reported in one
table. Everything in the report is computed from the runs it makes; nothing is typed in.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from gsjax import results
from gsjax.config import ConfigError, config_dirs, load_config
from gsjax.experiment import run_config
from gsjax.paper.section6 import report_section as oco_section
from gsjax.oco.config import config_kind, load_oco_config
from gsjax.paper import adaptive_graph, dp_scale, large_graphs
from gsjax.paper._common import script_section
from gsjax.paper.figure2 import report_section
from gsjax.results import write_text

__all__ = ["paper_configs", "reproduce", "experiment_section", "script_section", "add_parser",
           "SCRIPTS"]

#: The long experiments named by a config's ``[paper].script``: modules with a report_section.
SCRIPTS = {m.__name__: m for m in (adaptive_graph, large_graphs, dp_scale)}


def paper_configs(long: bool = False) -> list[Path]:
    """Config files with a non-empty ``[paper]`` table, in name order; with ``long`` also those
    whose ``[paper].script`` names a module (Sections 5.1 and 5.2 at scale, tens of minutes)."""
    out = {}

    for d in config_dirs():
        for p in sorted(d.glob("*.toml")):
            # kind = "oco" configs (Section 6) have their own schema and report section.
            load = load_oco_config if config_kind(p) == "oco" else load_config
            paper = load(p).paper
            # A config whose [paper].script names a module (a longer experiment, Sections 5.1
            # and 5.2 at scale) is run by that module's command, not by the report.
            if p.stem not in out and paper and (long or not paper.get("script")):
                out[p.stem] = p
    return [out[k] for k in sorted(out)]


def _quick_overrides(cfg) -> list[str]:
    return ["seeds=4", f"horizon={min(cfg.horizon, 200)}", "record_every=1"]


def _fmt(ms: dict, digits: int = 1) -> str:
    return f"{ms['mean']:.{digits}f} ± {ms['stderr']:.{digits}f}"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b > 0 else "–"


def _main_table(summary: dict) -> list[str]:
    lines = [
        "| algorithm | rule | prediction regret | movement cost | re-optimisations (all criteria) | value changes (all criteria) |",
        "|---|---|---|---|---|---|",
    ]
    for name, a in summary["algorithms"].items():
        lines.append(
            f"| `{name}` | {a['algorithm']} | {_fmt(a['prediction_regret'])} | {_fmt(a['movement_cost'], 2)} "
            f"| {_fmt(a['total_updates'])} | {_fmt(a['total_changes'])} |"
        )
    return lines


def _clique_table(summary: dict, arrays_lambda: np.ndarray) -> list[str]:
    """Table 2 in full: per clique, global vs async updates and changes."""
    algos = summary["algorithms"]
    glob = [n for n, a in algos.items() if a["algorithm"] == "lazy"]
    asyn = [n for n, a in algos.items() if a["algorithm"] == "async_lazy"]
    if not glob or not asyn:
        return []
    an = asyn[0]
    head = "| clique | λ_reg | " + " | ".join(f"`{g}` updates" for g in glob)
    head += f" | `{an}` updates | " + " | ".join(f"waste `{g}`/`{an}`" for g in glob)
    head += " | " + " | ".join(f"`{g}` changes" for g in glob) + f" | `{an}` changes |"
    ncol = head.count("|") - 1
    lines = [head, "|" + "---|" * ncol]
    a_up = algos[an]["updates_per_criterion"]
    a_ch = algos[an]["changes_per_criterion"]
    k = len(a_up["mean"])
    for i in range(k):
        row = [str(i), f"{arrays_lambda[i]:.2f}"]
        for g in glob:
            u = algos[g]["updates_per_criterion"]
            row.append(f"{u['mean'][i]:.1f} ± {u['stderr'][i]:.1f}")
        row.append(f"{a_up['mean'][i]:.1f} ± {a_up['stderr'][i]:.1f}")
        for g in glob:
            row.append(_ratio(algos[g]["updates_per_criterion"]["mean"][i], a_up["mean"][i]))
        for g in glob:
            c = algos[g]["changes_per_criterion"]
            row.append(f"{c['mean'][i]:.1f} ± {c['stderr'][i]:.1f}")
        row.append(f"{a_ch['mean'][i]:.1f} ± {a_ch['stderr'][i]:.1f}")
        lines.append("| " + " | ".join(row) + " |")
    row = ["all", "–"]
    for g in glob:
        row.append(_fmt(algos[g]["total_updates"]))
    row.append(_fmt(algos[an]["total_updates"]))
    for g in glob:
        row.append(_ratio(algos[g]["total_updates"]["mean"], algos[an]["total_updates"]["mean"]))
    for g in glob:
        row.append(_fmt(algos[g]["total_changes"]))
    row.append(_fmt(algos[an]["total_changes"]))
    lines.append("| " + " | ".join(row) + " |")
    return lines


def _sensitivity_table(rows: list[tuple[str, dict]]) -> list[str]:
    if not rows:
        return []
    names = list(rows[0][1]["algorithms"])
    head = "| variant | " + " | ".join(f"`{n}` regret / movement / updates / changes" for n in names) + " |"
    lines = [head, "|" + "---|" * (len(names) + 1)]
    for label, s in rows:
        cells = []
        for n in names:
            a = s["algorithms"].get(n)
            if a is None:
                cells.append("–")
                continue
            cells.append(
                f"{a['prediction_regret']['mean']:.0f} / {a['movement_cost']['mean']:.1f} / "
                f"{a['total_updates']['mean']:.0f} / {a['total_changes']['mean']:.1f}"
            )
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def experiment_section(path: Path, out: Path, quick: bool, log) -> list[str]:
    """Run one paper config (and its sensitivity variants); return its report lines."""

    cfg = load_config(path)
    if cfg.paper.get("script"):  # a module with its own report section (gsjax.paper.large_graphs, ...)
        module = SCRIPTS.get(cfg.paper["script"])
        if module is None:
            raise ConfigError("paper.script", f"unknown experiment module "
                              f"{cfg.paper['script']!r}; known: {sorted(SCRIPTS)}")
        return module.report_section(path, out, quick, log)
    if "k_sweep" in cfg.paper:  # Section 5.3 / Figure 2: one run per k (gsjax.paper.figure2)

        return report_section(path, out, quick, log)
    base_over = _quick_overrides(cfg) if quick else []
    cfg = load_config(path, base_over)
    paper = cfg.paper
    run_dir = out / cfg.name
    summary = run_config(cfg, run_dir, log=log)
    arrays = results.read_npz(run_dir / "arrays.npz")
    cmd = f"gsjax run {path.stem}" + "".join(f" --set {o}" for o in base_over)
    lines = [
        f"## {cfg.name} (paper Section {paper.get('section', '?')}"
        + (f", {paper['figure']}" if "figure" in paper else "")
        + (f", {paper['table']}" if "table" in paper else "")
        + ")",
        "",
        cfg.description.strip(),
        "",
        f"{cfg.seeds} seeds × {cfg.horizon} rounds, {cfg.dtype}; mean ± standard error over seeds. "
        f"Command: `{cmd}`.",
        "",
    ]
    lines += _main_table(summary)
    lines.append("")
    first_lazy = next((n for n, a in summary["algorithms"].items() if a["algorithm"] == "lazy"), None)
    if first_lazy:
        lam = arrays[f"{first_lazy}/lambda_reg"]
        table = _clique_table(summary, lam)
        if table:
            lines += ["Per clique (the paper's Table 2 in full; waste = global updates / async updates):", ""]
            lines += table + [""]
    if paper:
        lines += ["Paper's numbers for comparison:", ""]
        for key, val in paper.items():
            if key in ("sensitivity",):
                continue
            lines.append(f"- {key}: {val}")
        lines.append("")
    for fig in summary["meta"].get("figures", []):
        lines.append(f"![{cfg.name} {fig}]({cfg.name}/{fig})")
    lines.append("")

    variants = paper.get("sensitivity", [])
    if variants:
        rows = [("as configured", summary)]
        for v in variants:
            over = list(base_over) + list(v.get("set", []))
            vcfg = load_config(path, over)
            vdir = out / f"{cfg.name}__{_slug(v['label'])}"
            log(f"-- sensitivity: {v['label']}")
            rows.append((v["label"], run_config(vcfg, vdir, log=log, figures=False)))
        lines += [
            "Sensitivity (each cell: prediction regret / movement cost / re-optimisations summed "
            "over criteria / value changes summed over criteria; means over seeds). Each row is "
            f"`{cmd} --set KEY=VALUE ...` with the overrides in its label:",
            "",
        ]
        lines += _sensitivity_table(rows) + [""]
        if summary["meta"].get("num_coords") == 1:
            lines += ["Converged threshold and movement ratio per variant:", ""]
            lines += _threshold_table(rows) + [""]
    elif summary["meta"].get("num_coords") == 1:
        lines += _threshold_table([("as configured", summary)]) + [""]
    return lines


def _threshold_table(rows: list[tuple[str, dict]]) -> list[str]:
    """One-coordinate states (Section 7.3): ``s*``, each algorithm's state at round T and
    total movement, and the first algorithm's movement over each other's."""
    names = list(rows[0][1]["algorithms"])
    head = "| variant | τ* | " + " | ".join(f"`{n}` τ_T" for n in names)
    head += " | " + " | ".join(f"`{n}` movement" for n in names)
    head += "".join(f" | movement `{names[0]}` / `{n}`" for n in names[1:]) + " |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for label, s in rows:
        algos = s["algorithms"]
        cells = [label, f"{s['meta']['s_star'][0]:.3f}" if "s_star" in s["meta"] else "–"]
        for n in names:
            fs = algos.get(n, {}).get("final_state")
            cells.append(f"{fs['mean'][0]:.3f} ± {fs['stderr'][0]:.3f}" if fs else "–")
        for n in names:
            cells.append(_fmt(algos[n]["movement_cost"], 2) if n in algos else "–")
        for n in names[1:]:
            ok = n in algos and names[0] in algos
            cells.append(_ratio(algos[names[0]]["movement_cost"]["mean"],
                                algos[n]["movement_cost"]["mean"]) if ok else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _slug(s: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in s).strip("_")[:60]


def reproduce(out: Path, quick: bool = False, only=None, log=print, long: bool = False) -> Path:
    """Run the paper configs and write ``out/report.md``; returns its path.

    The long experiments (configs with ``[paper].script``) run with ``long`` or when named in
    ``only``."""
    import jax

    out = Path(out)
    t0 = time.perf_counter()
    configs = paper_configs(long=long or bool(only))
    if only:
        configs = [p for p in configs if p.stem in set(only)]
    lines = [
        "# gsjax: the paper's experiments, reproduced",
        "",
        f"jax {jax.__version__} on {', '.join(str(d) for d in jax.devices())}"
        + (" — QUICK MODE: tiny sizes, not comparable with the paper" if quick else ""),
        "",
    ]

    for p in configs:
        log(f"== {p.stem}")
        section = oco_section if config_kind(p) == "oco" else experiment_section
        lines += section(p, out, quick, log)
    minutes = (time.perf_counter() - t0) / 60
    lines.append(f"Total wall time: {minutes:.1f} min" if minutes >= 1 else
                 f"Total wall time: {math.ceil(minutes * 60)} s")
    path = write_text(out / "report.md", "\n".join(lines) + "\n")
    log(f"wrote {path}")
    return path


def add_parser(sub) -> None:
    """``gsjax reproduce``: every paper experiment, one ``report.md``."""
    rp = sub.add_parser("reproduce", help="run every paper experiment and write report.md")
    rp.add_argument("--out", default="runs/reproduce", help="output folder")
    rp.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test, not the paper's)")
    rp.add_argument("--only", action="append", help="only these experiments (repeatable; a long "
                                                    "experiment named here runs too)")
    rp.add_argument("--long", action="store_true",
                    help="also the long experiments: adaptive_graph (Section 5.2; 8.4 min at 50 "
                         "seeds), large_graphs (Section 5.1 at scale; 70 s on 2 CPU "
                         "cores) and dp_scale (Section 5.1 with the exact solver up to 10^4 "
                         "nodes, T = 10^4: days on 2 CPU cores; resumable, finished runs are "
                         "read)")
    rp.set_defaults(func=_cmd_reproduce)



def _cmd_reproduce(args) -> int:
    reproduce(Path(args.out), quick=args.quick, only=args.only, log=print, long=args.long)
    return 0
