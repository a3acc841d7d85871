"""Figures of an OCO run, drawn only from its ``summary.json`` and ``arrays.npz`` contents.

* ``rates_<entry>.png`` (>= 2 horizons): loss regret, movement and total regret against T,
  log-log, one line per budget exponent, fitted slope beside the paper's;
* ``tradeoff_<entry>.png`` (>= 3 budgets): loss regret, lambda x movement and total regret
  against M at the largest horizon, one total per lambda;
* ``per_component.png``: loss regret and switches per component, entry by entry (one budget
  point each), at the largest horizon;
* ``trajectory.png``: one seed's virtual iterate and deployed state, coordinate 0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gsjax.plotting import _MARKERS, _finish, _grouped_bars, _legend, _over_seeds, _plt, _save

__all__ = ["plot_all", "plot_rates", "plot_tradeoff", "plot_per_component", "plot_trajectory"]


def _fmt_alpha(a) -> str:
    for num, den in ((2, 3), (1, 3), (3, 4)):
        if abs(a - num / den) < 1e-3:
            return f"{num}/{den}"
    return f"{a:g}"


def plot_rates(summary: dict, entry: str, path) -> Path:
    rows = [f for f in summary["fits"] if f["entry"] == entry]
    Ts = np.asarray(rows[0]["horizons"], float)
    fig, axes = _plt().subplots(1, 3, figsize=(13, 3.8))
    for ax, q, title in zip(axes, ("loss_regret", "movement", "total_regret"),
                            ("loss regret", "movement (l1)",
                             f"total regret (λ = {summary['meta']['move_cost']:g})")):
        for m, row in enumerate(rows):
            means = np.asarray(row[q]["means"], float)
            if np.any(means <= 0):
                continue
            e = row[q]["exponent"]
            line, = ax.loglog(Ts, means, "-", marker=_MARKERS[m % len(_MARKERS)], lw=1.2, ms=4,
                              label=f"M=T^{_fmt_alpha(row['budget_exponent'])}: {e:.3f} "
                                    f"(paper {row['paper'][q]:.3g})")
            ref = means[0] * (Ts / Ts[0]) ** row["paper"][q]
            ax.loglog(Ts, ref, ":", color=line.get_color(), lw=1)
        ax.set_title(f"{title}\nmeasured exponent (paper's, dotted)", fontsize=9)
        _finish(ax, 7 if ax.get_legend_handles_labels()[0] else None,  # none: all means <= 0
                which="both", xlabel="T", below=True)
    axes[0].set_ylabel(f"mean over {summary['meta']['seeds']} seeds")
    fig.suptitle(f"{summary['meta']['name']}: {entry}; means over {summary['meta']['seeds']} "
                 "seeds (the exponents' s.e. are in summary.json)", fontsize=10, y=1.04)
    return _save(fig, path)


def plot_tradeoff(summary: dict, entry: str, path, move_costs) -> Path:
    hs = summary["algorithms"][entry]["horizons"]
    T = max(hs, key=int)
    pts = [hs[T][i] for i in np.argsort([p["M"][0] for p in hs[T]])]
    M = np.asarray([p["M"][0] for p in pts])
    lr, lr_se = (np.asarray([p["loss_regret"][s] for p in pts]) for s in ("mean", "stderr"))
    mv = np.asarray([p["movement"]["mean"] for p in pts])
    fig, ax = _plt().subplots(figsize=(6.2, 4.0))
    ax.errorbar(M, lr, yerr=lr_se, fmt="o-", color="k", lw=1.4, ms=3, label="loss regret")
    for m, lam in enumerate(move_costs):
        line, = ax.plot(M, lr + lam * mv, "-", marker=_MARKERS[(m + 1) % len(_MARKERS)], lw=1.2,
                        ms=4, label=f"total, λ = {lam:g}")
        ax.plot(M, lam * mv, "--", color=line.get_color(), lw=1,
                label=f"λ·movement, λ = {lam:g}")
        j = int(np.argmin(lr + lam * mv))
        ax.plot([M[j]], [lr[j] + lam * mv[j]], "*", color=line.get_color(), ms=12)
    seeds = summary["meta"]["seeds"]
    ax.set_title(f"{summary['meta']['name']}: {entry}, T = {T} (★ best M per λ)", fontsize=9)
    _finish(ax, 7, which="both", xscale="log", yscale="log",
            xlabel="switching budget M (expected switches)", ylabel=f"mean over {seeds} seeds",
            legend_title=f"loss regret: {_over_seeds(seeds)}")
    return _save(fig, path)


def plot_per_component(summary: dict, path) -> Path | None:
    T = str(max(summary["meta"]["horizons"]))
    entries = [(n, a["horizons"][T][0]) for n, a in summary["algorithms"].items()
               if len(a["horizons"][T]) == 1]
    if len(entries) < 2:  # a comparison of single-budget entries (section6_heterogeneous)
        return None
    k = len(entries[0][1]["loss_regret_per_component"]["mean"])
    fig, axes = _plt().subplots(1, 3, figsize=(14, 3.8))
    for ax, key, title in zip(axes, ("loss_regret_per_component", "movement_per_component",
                                     "switches"), ("loss regret", "movement (l1)", "switches")):
        series = [(name, pt[key]["mean"], pt[key]["stderr"]) for name, pt in entries]
        _grouped_bars(ax, series, [f"comp {i}" for i in range(k)])
        ax.set_title(f"{title} per component, T = {T}", fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes[2].set_yscale("log")
    _legend(axes[2], 7, title=f"bars: {_over_seeds(summary['meta']['seeds'])}")
    return _save(fig, path)


def plot_trajectory(cfg, arrays: dict, path, max_points: int = 3) -> Path | None:
    T = min(cfg.horizons)
    e = next((e for e in cfg.algorithms
              if e.algorithm != "ogd" and f"{e.name}/T{T}/records/s" in arrays), None)
    if e is None:
        return None
    pre = f"{e.name}/T{T}"
    rounds = arrays[f"{pre}/rounds"]
    s, w, M = arrays[f"{pre}/records/s"], arrays[f"{pre}/records/w"], arrays[f"{pre}/budgets"]
    pts = np.unique(np.linspace(0, len(M) - 1, min(max_points, len(M))).astype(int))
    fig, axes = _plt().subplots(len(pts), 1, figsize=(8, 2.2 * len(pts)), squeeze=False)
    for ax, j in zip(axes[:, 0], pts):
        ax.plot(rounds, w[0, j, :, 0], lw=0.8, color="0.6", label="virtual iterate w_t")
        ax.step(rounds, s[0, j, :, 0], where="post", lw=1.3, color="C0", label="deployed s_t")
        ax.set_ylabel("coordinate 0")
        ax.set_title(f"{e.name}, T = {T}, M = {M[j, 0]:.0f} (seed 0)", fontsize=9)
        ax.grid(alpha=0.3)
    _legend(axes[0, 0], 7, title="one seed (seed 0), no band")
    axes[-1, 0].set_xlabel("round")
    fig.tight_layout()
    return _save(fig, path)


def plot_all(cfg, summary: dict, arrays: dict, out_dir) -> list[Path]:
    out = Path(out_dir)
    fitted = sorted({f["entry"] for f in summary["fits"]
                     if f["budget_exponent"] != 1.0 or f["algorithm"] != "ogd"})
    paths = [plot_rates(summary, name, out / f"rates_{name}.png") for name in fitted]
    paths += [plot_tradeoff(summary, name, out / f"tradeoff_{name}.png", cfg.move_costs)
              for name in sorted({t["entry"] for t in summary["tradeoff"]})]
    optional = (plot_per_component(summary, out / "per_component.png"),
                plot_trajectory(cfg, arrays, out / "trajectory.png"))
    return paths + [p for p in optional if p is not None]

