"""Figures drawn only from saved results (``arrays.npz`` + ``summary.json``), with matplotlib's
Agg backend; the helpers (bands, grouped bars, legends, saving) serve :mod:`gsjax.oco.plotting`
and the paper's figures too.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from gsjax.results import atomic_write_bytes

__all__ = ["figures_default", "plot_all", "plot_trajectories", "moved_coordinates", "plot_curves",
           "plot_per_criterion", "plot_grid", "best_grid_slice", "plot_threshold"]


def figures_default() -> bool:
    """Whether a run folder gets its figures when the caller does not say: yes, unless
    ``$GSJAX_FIGURES`` is ``off``, ``0``, ``no`` or ``false`` (``gsjax plot DIR`` draws later)."""
    return os.environ.get("GSJAX_FIGURES", "on").strip().lower() not in ("off", "0", "no", "false")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return atomic_write_bytes(Path(path), buf.getvalue())


def _mean_se(x, single=0.0):
    """Mean over the first axis (the seeds) and its standard error (``single`` for one seed)."""
    x = np.asarray(x, np.float64)
    se = x.std(0, ddof=1) / np.sqrt(x.shape[0]) if x.shape[0] > 1 else single
    return x.mean(0), se


_LINES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_HATCHES = ("", "//", "..", "xx", "\\\\", "--", "++", "oo")


def _style(i: int) -> dict:
    """The i-th algorithm's colour, line style and marker: told apart without colour too."""
    return {"color": f"C{i % 10}", "ls": _LINES[i % len(_LINES)],
            "marker": _MARKERS[i % len(_MARKERS)]}


def _over_seeds(n: int, what: str = "mean ± 1 s.e.") -> str:
    """What a band or an error bar is, with the seed count (one seed: no band)."""
    return f"{what} over {n} seeds" if n > 1 else "one seed (no band)"


def _band(ax, x, mean, half, label, alpha=0.15, i=None, **line):
    """A line with a shaded band ``mean +- half``: ``i``, the algorithm's :func:`_style` (spaced
    markers, the band's edges drawn); ``line``, plot keywords over it."""
    style = {} if i is None else _style(i)
    style.update(line)
    if "marker" in style:  # spaced along the drawn line (log axes too), staggered
        style.update(markevery=(0.03 * (i % 4), 0.12), ms=4)
    ax.plot(x, mean, lw=1.5, label=label, **style)
    ax.fill_between(x, mean - half, mean + half, alpha=alpha, color=style.get("color"), lw=0)
    if i is not None:  # the band's edges in the line's style: overlapping bands stay apart
        edge = {"color": style["color"], "ls": style["ls"], "lw": 0.7, "alpha": 0.8}
        ax.plot(x, mean - half, **edge)
        ax.plot(x, mean + half, **edge)


def _grouped_bars(ax, series, labels, capsize=0.0):
    """One group of bars per label, one bar (own colour and hatch) per ``(name, means, errors)``."""
    width = 0.8 / max(len(series), 1)
    idx = np.arange(len(labels))
    for a, (name, mean, err) in enumerate(series):
        ax.bar(idx + a * width, mean, width, yerr=err, label=name, capsize=capsize,
               color=f"C{a % 10}", hatch=_HATCHES[a % len(_HATCHES)], edgecolor="white",
               error_kw={"ecolor": "k", "lw": 1})
    ax.set_xticks(idx + width * (len(series) - 1) / 2, labels)


def _legend(ax, fontsize: float = 8, below: bool = False, title: str | None = None):
    """A legend off the data: right of the axes, or ``below`` them (panels side by side)."""
    where = ({"loc": "upper center", "bbox_to_anchor": (0.5, -0.16)} if below
             else {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0)})
    return ax.legend(fontsize=fontsize, title=title, title_fontsize=fontsize, borderaxespad=0,
                     **where)


def _finish(ax, legend: float | None = 8, grid: str = "both", which: str = "major",
            below: bool = False, legend_title: str | None = None, **props):
    """``ax.set(**props)``, a :func:`_legend` of font size ``legend`` (None: none) and a light
    grid on ``grid`` (an axis or "both") at the ``which`` ticks."""
    ax.set(**props)
    if legend:
        _legend(ax, legend, below, legend_title)
    ax.grid(alpha=0.3, axis=grid, which=which)


def _names(arrays: dict) -> list[str]:
    return [key.split("/")[0] for key in arrays if key.endswith("/cum_regret")]


def _seeds(arrays: dict) -> int:
    """The number of seeds of a run's arrays (the seed axis is last for ``[grid]`` totals)."""
    return int(arrays[f"{_names(arrays)[0]}/totals/prediction_regret"].shape[-1])


def moved_coordinates(arrays: dict, max_coords: int = 4) -> np.ndarray:
    """The (at most ``max_coords``) coordinates whose recorded values moved most (``|s_t -
    s_{t-1}|`` summed over seeds, records, algorithms), in index order; ties to the lower index."""
    moves = sum(np.abs(np.diff(arrays[f"{n}/action"].astype(np.float64), axis=1)).sum((0, 1))
                for n in _names(arrays))
    return np.sort(np.argsort(-moves, kind="stable")[:max_coords])


def plot_trajectories(arrays: dict, path, max_coords: int = 4, title: str = ""):
    """A panel per coordinate that moved most (:func:`moved_coordinates`): per algorithm, the
    mean over seeds of its cumulative movement between records (+-1 s.e. band; rounds on a log
    axis over two decades), and the share of runs that changed it. Cumulative movement, not the
    played value: ``s*`` is mostly drawn per seed, so mean values only blur the seeds' optima.
    """
    names = _names(arrays)
    rounds = arrays["rounds"]
    coords = moved_coordinates(arrays, max_coords)
    fig, axes = _plt().subplots(1, len(coords), figsize=(4.2 * len(coords), 3.4), squeeze=False)
    for ax, j in zip(axes[0], coords):
        changed = []
        for i, name in enumerate(names):
            steps = np.abs(np.diff(arrays[f"{name}/action"][..., j].astype(np.float64), axis=1,
                                   prepend=arrays[f"{name}/action"][:, :1, j]))
            _band(ax, rounds, *_mean_se(np.cumsum(steps, axis=1)), name, i=i)
            changed.append(steps.sum(1) > 0)
        ax.set_title(f"coordinate {j}: changed in {np.mean(changed):.0%} of runs", fontsize=9)
        ax.set(xlabel="round t", ylim=(0, None))
        if rounds[-1] >= 100 * rounds[0]:
            ax.set_xscale("log")  # most moves come early
        ax.grid(alpha=0.3)
    every = int(rounds[1] - rounds[0]) if len(rounds) > 1 else int(rounds[0])
    axes[0, 0].set_ylabel(f"cumulative |change| of s_t[j]\n(between records, every {every})")
    _legend(axes[0, -1], title=_over_seeds(_seeds(arrays)))
    fig.suptitle(title or "the coordinates that moved most: cumulative movement", y=1.04)
    return _save(fig, path)


def plot_curves(arrays: dict, path, field: str, ylabel: str, title: str = ""):
    """Mean over seeds of a cumulative curve, +-1 s.e. band; y from 0 (or the lowest band)."""
    fig, ax = _plt().subplots(figsize=(6.4, 3.8))
    lowest = 0.0
    for i, name in enumerate(_names(arrays)):
        mean, se = _mean_se(arrays[f"{name}/{field}"])
        _band(ax, arrays["rounds"], mean, se, name, i=i)
        lowest = min(lowest, float(np.min(mean - se)))
    ax.set_ylim(bottom=lowest)
    _finish(ax, xlabel="round t", ylabel=ylabel, title=title,
            legend_title=_over_seeds(_seeds(arrays)))
    return _save(fig, path)


#: Criteria up to which :func:`plot_per_criterion` draws bars; beyond, lines over the ids.
MAX_BAR_GROUPS = 40


def plot_per_criterion(arrays: dict, path, title: str = ""):
    """Mean updates (re-optimisations) and actual changes per criterion and algorithm: bars up
    to :data:`MAX_BAR_GROUPS` criteria, lines beyond (ticks for 10^4 criteria take minutes)."""
    names = [n for n in _names(arrays) if f"{n}/totals/updates" in arrays]
    k = arrays[f"{names[0]}/totals/updates"].shape[-1]
    bars = k <= MAX_BAR_GROUPS
    fig, axes = _plt().subplots(1, 2, figsize=(11, 3.8), sharey=False)
    for ax, field, label in zip(axes, ("updates", "changes"),
                                ("re-optimisations", "value changes")):
        series = [(name, *_mean_se(arrays[f"{name}/totals/{field}"], None)) for name in names]
        if bars:
            _grouped_bars(ax, series, [str(i) for i in range(k)], capsize=2)
        else:
            for a, (name, mean, err) in enumerate(series):
                _band(ax, np.arange(k), mean, 0.0 if err is None else err, name, i=a)
        if field == "updates":
            ax.set_yscale("log")  # LinUCB re-optimises every round: orders of magnitude apart
        _finish(ax, legend=None, grid="y", xlabel="criterion (clique) id",
                ylabel=f"{label} per run")
    _legend(axes[1], title=f"{'bars' if bars else 'lines'}: {_over_seeds(_seeds(arrays))}")
    fig.suptitle(title or "updates vs actual changes per criterion")
    return _save(fig, path)


def _grid_total(arrays: dict, name: str) -> np.ndarray:
    """(G,) mean over seeds of prediction regret + movement cost at each grid point."""
    tot = arrays[f"{name}/totals/prediction_regret"] + arrays[f"{name}/totals/movement_cost"]
    return tot.astype(np.float64).mean(axis=-1)


def best_grid_slice(arrays: dict) -> dict:
    """A copy of grid arrays reduced, per algorithm, to its best point (lowest total regret)."""
    out = {k: v for k, v in arrays.items() if not k.startswith("grid/")}
    for name in _names(arrays):
        g = int(np.argmin(_grid_total(arrays, name)))
        out.update({key: val[g] for key, val in arrays.items() if key.startswith(f"{name}/")})
    return out


def plot_grid(arrays: dict, path, title: str = ""):
    """Mean total regret over the grid, a panel per algorithm: a line for one axis, else a heat
    map over the first two axes (minimum over the rest)."""
    names = _names(arrays)
    axes_names = [str(a) for a in arrays["grid/names"]]
    values = arrays["grid/values"]
    levels = [np.unique(values[:, j]) for j in range(len(axes_names))]
    seeds = _seeds(arrays)
    fig, axs = _plt().subplots(1, len(names), figsize=(5.6 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axs[0], names):
        total = _grid_total(arrays, name)
        if len(axes_names) == 1:
            order = np.argsort(values[:, 0])
            ax.plot(values[order, 0], total[order], marker="o")
            ax.set(xlabel=axes_names[0], ylabel=f"mean total regret over {seeds} seeds")
        else:
            grid = np.full((len(levels[0]), len(levels[1])), np.inf)
            for g, row in enumerate(values):
                i, j = (int(np.searchsorted(levels[a], row[a])) for a in (0, 1))
                grid[i, j] = min(grid[i, j], total[g])
            im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
            ax.set_xticks(range(len(levels[1])), [f"{v:g}" for v in levels[1]])
            ax.set_yticks(range(len(levels[0])), [f"{v:g}" for v in levels[0]])
            ax.set(xlabel=axes_names[1], ylabel=axes_names[0])
            for (i, j), v in np.ndenumerate(grid):
                ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=7, color="w")
            fig.colorbar(im, ax=ax, shrink=0.8, label=f"mean total regret over {seeds} seeds")
        ax.set_title(name)
    fig.suptitle(title or "grid: mean total regret (prediction + movement)")
    return _save(fig, path)


def plot_threshold(arrays: dict, path, title: str = ""):
    """One-coordinate states (Section 7.3, Figure 5): the mean played state with a band of +-1
    standard deviation ACROSS seeds and ``s*`` dashed; total movement cost per algorithm (+-1
    s.e.); every seed's state at round T against ``s*``."""
    names = _names(arrays)
    n = _seeds(arrays)
    s_star = float(arrays["problem/s_star"][0])
    fig, axes = _plt().subplots(1, 3, figsize=(15, 3.8),
                                gridspec_kw={"width_ratios": [2.2, 1, 1]})
    rng = np.random.default_rng(0)  # horizontal jitter only, for legibility
    for i, name in enumerate(names):  # per algorithm: trajectory, movement, final states
        c, x = f"C{i}", arrays[f"{name}/action"][..., 0].astype(np.float64)  # (S, R)
        _band(axes[0], arrays["rounds"], x.mean(0), x.std(0), name, color=c, alpha=0.2,
              ls=_style(i)["ls"])
        mean, se = _mean_se(arrays[f"{name}/totals/movement_cost"])
        axes[1].bar(i, mean, yerr=se, color=c, capsize=4)
        axes[1].text(i, mean, f"{mean:.1f}", ha="center", va="bottom", fontsize=8)
        final = arrays[f"{name}/action"][:, -1, 0]
        axes[2].scatter(i + rng.uniform(-0.15, 0.15, final.shape), final, s=10, color=c,
                        alpha=0.6)
        axes[2].errorbar(i + 0.3, final.mean(), yerr=final.std(), fmt="o", color=c, capsize=3)
    axes[0].axhline(s_star, color="k", ls="--", lw=1, label=f"τ* = {s_star:.3f}")
    _finish(axes[0], xlabel="round t", ylabel="threshold τ_t", ylim=(-0.02, 1.02), below=True,
            legend_title=_over_seeds(n, "mean ± 1 sd (spread)"))
    axes[1].set_xticks(range(len(names)), names)
    _finish(axes[1], legend=None, grid="y", ylabel="cumulative movement cost at T",
            ylim=(0, None), title=_over_seeds(n))
    axes[2].axhline(s_star, color="k", ls="--", lw=1)
    axes[2].set_xticks(range(len(names)), names)
    _finish(axes[2], legend=None, grid="y", ylabel="τ_T (each seed; mean ± 1 sd)",
            ylim=(-0.02, 1.02), title=f"{n} seeds")
    fig.suptitle(title or "threshold trajectory, movement, converged threshold")
    return _save(fig, path)


def plot_all(arrays: dict, out_dir, name: str = "") -> list[Path]:
    """Every standard figure of a run folder; returns the paths written. A ``[grid]`` run gets
    ``grid.png`` and the other figures at each algorithm's best point."""
    out = Path(out_dir)
    paths = []
    if "grid/values" in arrays:
        paths.append(plot_grid(arrays, out / "grid.png", title=f"{name}: grid"))
        arrays = best_grid_slice(arrays)
        name = f"{name} (best grid point)"
    paths += [
        plot_trajectories(arrays, out / "trajectories.png",
                          title=f"{name}: the coordinates that moved most"),
        plot_curves(arrays, out / "movement.png", "cum_movement", "cumulative movement cost",
                    title=f"{name}: movement cost"),
        plot_curves(arrays, out / "regret.png", "cum_regret", "cumulative prediction regret",
                    title=f"{name}: prediction regret"),
    ]
    names = _names(arrays)
    if names and arrays[f"{names[0]}/totals/updates"].shape[-1] > 1:
        paths.append(plot_per_criterion(arrays, out / "per_criterion.png", title=name))
    if arrays["problem/s_star"].shape == (1,):  # one coordinate: a threshold (Section 7.3)
        paths.append(plot_threshold(arrays, out / "threshold.png", title=name))
    return paths
