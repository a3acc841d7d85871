"""The Section 6 part of ``gsjax reproduce``: one ``kind = "oco"`` paper config run and
reported as Markdown tables (measured exponents beside the paper's, the trade-off, the
components, the means)."""

from __future__ import annotations

from pathlib import Path

from gsjax.oco.config import load_oco_config
from gsjax.oco.experiment import run_and_write

__all__ = ["report_section", "QUICK_OVERRIDES", "fit_table", "means_table", "tradeoff_table",
           "component_table"]

QUICK_OVERRIDES = ["seeds=8", "horizon=[100, 400]"]


def _fmt(ms: dict, digits: int = 1) -> str:
    return f"{ms['mean']:.{digits}f} ± {ms['stderr']:.{digits}f}"


def _alpha(a) -> str:
    for num, den in ((2, 3), (1, 3), (3, 4), (1, 2)):
        if isinstance(a, float) and abs(a - num / den) < 1e-3:
            return f"{num}/{den}"
    return f"{a:g}" if isinstance(a, float) else str(a)


def fit_table(summary: dict) -> list[str]:
    """The measured exponents beside the paper's, one row per entry and budget exponent."""
    if not summary["fits"]:
        return []
    lines = [
        "| entry | step rule | M | loss regret: measured / paper | movement: measured / paper bound "
        "/ path bound | total (λ = {:g}): measured / paper | switches: measured |".format(
            summary["meta"]["move_cost"]),
        "|---|---|---|---|---|---|---|",
    ]
    for f in summary["fits"]:
        def ex(q):
            e = f[q]
            if e["exponent"] is None:
                return "–"
            if e["stderr"] is None or e["stderr"] != e["stderr"]:  # deterministic, 2 horizons
                return f"{e['exponent']:.3f}"
            return f"{e['exponent']:.3f} ± {e['stderr']:.3f}"
        p = f["paper"]
        lines.append(
            f"| `{f['entry']}` | {f['step_rule']} | T^{_alpha(f['budget_exponent'])} | "
            f"{ex('loss_regret')} / {p['loss_regret']:.3f} | {ex('movement')} / "
            f"{p['movement']:.3f} / {p['movement_path_bound']:.3f} | {ex('total_regret')} / "
            f"{p['total_regret']:.3f} | {ex('switches')} |")
    return lines


def means_table(summary: dict) -> list[str]:
    """Loss regret, movement, total regret, switches per entry, horizon and budget."""
    lines = ["| entry | T | M (per component) | loss regret | movement | total regret | "
             "switches (per component) |", "|---|---|---|---|---|---|---|"]
    for name, a in summary["algorithms"].items():
        for T, pts in a["horizons"].items():
            for p in pts:
                M = "/".join(f"{m:.0f}" for m in p["M"])
                sw = "/".join(f"{m:.1f}" for m in p["switches"]["mean"])
                lines.append(f"| `{name}` | {T} | {M} | {_fmt(p['loss_regret'])} | "
                             f"{_fmt(p['movement'], 2)} | {_fmt(p['total_regret'])} | {sw} |")
    return lines


def tradeoff_table(summary: dict) -> list[str]:
    if not summary["tradeoff"]:
        return []
    lines = ["| entry | T | λ | best M (grid) | its total regret | total at M = T | "
             "paper-bound optimum M* |", "|---|---|---|---|---|---|---|"]
    for t in summary["tradeoff"]:
        lines.append(f"| `{t['entry']}` | {t['horizon']} | {t['lambda']:g} | {t['best_M']:.0f} | "
                     f"{t['best_total_regret']:.1f} | {t['total_regret_at_M_equal_T']:.1f} | "
                     f"{t['paper_bound_optimum_M']:.0f} |")
    return lines


def component_table(summary: dict) -> list[str]:
    """Per component loss regret and switches, for entries with one budget point."""
    T = str(max(summary["meta"]["horizons"]))
    rows = [(n, a["horizons"][T][0]) for n, a in summary["algorithms"].items()
            if len(a["horizons"][T]) == 1]
    if not rows:
        return []
    k = len(rows[0][1]["loss_regret_per_component"]["mean"])
    lines = ["| entry | " + " | ".join(f"comp {i}: M / switches / loss regret" for i in range(k))
             + " | all: total regret |", "|" + "---|" * (k + 2)]
    for name, p in rows:
        cells = []
        for i in range(k):
            lr = p["loss_regret_per_component"]
            cells.append(f"{p['M'][i]:.0f} / {p['switches']['mean'][i]:.0f} / "
                         f"{lr['mean'][i]:.1f} ± {lr['stderr'][i]:.1f}")
        lines.append(f"| `{name}` | " + " | ".join(cells) + f" | {_fmt(p['total_regret'])} |")
    return lines


def report_section(path: Path, out: Path, quick: bool, log) -> list[str]:
    """Run one ``kind = "oco"`` paper config and return its Markdown report lines."""
    over = list(QUICK_OVERRIDES) if quick else []
    cfg = load_oco_config(path, over)
    run_dir = Path(out) / cfg.name
    summary = run_and_write(cfg, run_dir, log=log)
    paper = cfg.paper
    cmd = f"gsjax run {path.stem}" + "".join(f" --set '{o}'" for o in over)
    lines = [f"## {cfg.name} (paper Section {paper.get('section', '6')})", "",
             cfg.description.strip(), "",
             f"{cfg.seeds} seeds, horizons {list(cfg.horizons)}, {cfg.dtype}; mean ± standard "
             f"error over seeds; λ = {cfg.move_cost:g}. Command: `{cmd}`.", ""]
    for table in (fit_table(summary), tradeoff_table(summary), component_table(summary),
                  means_table(summary)):
        if table:
            lines += table + [""]
    if paper:
        lines += ["Paper's statements for comparison:", ""]
        lines += [f"- {k}: {v}" for k, v in paper.items()] + [""]
    for fig in summary["meta"].get("figures", []):
        lines.append(f"![{cfg.name} {fig}]({cfg.name}/{fig})")
    lines.append("")
    return lines
