"""Figures that explain themselves, checked through the matplotlib objects (not pixels): axes
from 0, the band and the seed count in every legend or title, algorithms told apart by line
style and marker (bars by hatch), legends off the axes, and trajectories.png drawing the
coordinates that moved."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gsjax import plotting  # noqa: E402
from gsjax.oco import plotting as oco_plotting  # noqa: E402

NAMES = ("linucb", "lazy", "async_lazy")
S, R, D, K = 5, 12, 6, 3


@pytest.fixture
def figures(monkeypatch):
    """The figures the plotting functions draw, kept open instead of saved."""
    kept = []

    def keep(fig, path):
        kept.append(fig)
        return path

    monkeypatch.setattr(plotting, "_save", keep)
    monkeypatch.setattr(oco_plotting, "_save", keep)
    yield kept
    for fig in kept:
        plotting._plt().close(fig)


def _arrays(seeds: int = S, moving=(1, 4)) -> dict:
    """A synthetic bandit run: curves rising from well above 0, and actions in which only the
    coordinates ``moving`` change (coordinate 4 more than 1)."""
    rng = np.random.default_rng(0)
    out = {"rounds": np.arange(10, 10 * R + 1, 10),
           "problem/s_star": rng.integers(0, 2, (seeds, D)).astype(np.float32),
           "problem/scopes": np.tile(np.arange(D).reshape(K, 2), (seeds, 1, 1)),
           "problem/scope_mask": np.ones((seeds, K, 2), bool)}
    for a, name in enumerate(NAMES):
        base = 30.0 + a + rng.uniform(0, 1, (seeds, 1))
        out[f"{name}/cum_movement"] = base + np.cumsum(rng.uniform(0, 0.1, (seeds, R)), 1)
        out[f"{name}/cum_regret"] = 50.0 + np.cumsum(rng.uniform(0, 5, (seeds, R)), 1)
        action = np.zeros((seeds, R, D), np.float32)
        for j, flips in zip(moving, (2, 5)):
            for s in range(seeds):
                for t in np.sort(rng.choice(np.arange(1, R), flips, replace=False)):
                    action[s, t:, j] = 1.0 - action[s, t - 1, j]
        out[f"{name}/action"] = action
        for f in ("updates", "changes"):
            out[f"{name}/totals/{f}"] = rng.integers(1, 50, (seeds, K))
        out[f"{name}/totals/prediction_regret"] = out[f"{name}/cum_regret"][:, -1]
    return out


def _lines(ax):
    """The algorithms' lines (those the legend names)."""
    labels = set(NAMES)
    return [ln for ln in ax.get_lines() if ln.get_label() in labels]


def _legend_off_the_axes(fig, ax, legend):
    fig.canvas.draw()
    box, leg = ax.get_window_extent(), legend.get_window_extent()
    assert leg.x0 >= box.x1 or leg.y1 <= box.y0, (leg, box)


@pytest.mark.parametrize("field", ["cum_movement", "cum_regret"])
def test_curves_start_at_zero_name_the_band_and_tell_algorithms_apart(figures, field):
    arr = _arrays()
    plotting.plot_curves(arr, "x.png", field, "cumulative")
    fig = figures[-1]
    ax = fig.axes[0]
    assert ax.get_ylim()[0] == 0.0  # the data sit far above 0
    legend = ax.get_legend()
    assert legend.get_title().get_text() == f"mean ± 1 s.e. over {S} seeds"
    assert [t.get_text() for t in legend.get_texts()] == list(NAMES)
    lines = _lines(ax)
    assert len({ln.get_linestyle() for ln in lines}) == len(NAMES)
    assert len({ln.get_marker() for ln in lines}) == len(NAMES)
    _legend_off_the_axes(fig, ax, legend)
    # The drawn mean and band are the seeds' mean and standard error (float64 NumPy).
    x = arr[f"{NAMES[0]}/{field}"].astype(np.float64)
    np.testing.assert_allclose(lines[0].get_ydata(), x.mean(0))
    edges = [ln for ln in ax.get_lines() if ln.get_label().startswith("_")
             and ln.get_color() == lines[0].get_color()]
    se = x.std(0, ddof=1) / np.sqrt(S)
    np.testing.assert_allclose(sorted(e.get_ydata()[0] for e in edges),
                               [x.mean(0)[0] - se[0], x.mean(0)[0] + se[0]])


def test_a_curve_below_zero_keeps_its_lowest_band_visible(figures):
    arr = _arrays()
    arr["lazy/cum_regret"] = arr["lazy/cum_regret"] - 80.0
    plotting.plot_curves(arr, "x.png", "cum_regret", "regret")
    x = arr["lazy/cum_regret"]
    lowest = (x.mean(0) - x.std(0, ddof=1) / np.sqrt(S)).min()
    assert figures[-1].axes[0].get_ylim()[0] == pytest.approx(lowest)


def test_one_seed_says_there_is_no_band(figures):
    plotting.plot_curves(_arrays(seeds=1), "x.png", "cum_movement", "movement")
    assert figures[-1].axes[0].get_legend().get_title().get_text() == "one seed (no band)"


def test_trajectories_show_the_coordinates_that_moved(figures):
    arr = _arrays(moving=(1, 4))
    np.testing.assert_array_equal(plotting.moved_coordinates(arr, 2), [1, 4])
    np.testing.assert_array_equal(plotting.moved_coordinates(arr, 1), [4])  # 4 moved more
    plotting.plot_trajectories(arr, "t.png", max_coords=2)
    fig = figures[-1]
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title().split(":")[0] for ax in axes] == ["coordinate 1", "coordinate 4"]
    assert all("100% of runs" in ax.get_title() for ax in axes)
    legend = axes[-1].get_legend()
    assert legend.get_title().get_text() == f"mean ± 1 s.e. over {S} seeds"
    _legend_off_the_axes(fig, axes[-1], legend)
    for ax, j in zip(axes, (1, 4)):
        assert ax.get_ylim()[0] == 0.0
        for line, name in zip(_lines(ax), NAMES):
            # Mean over seeds of the cumulative |change| between records, by loops.
            a = arr[f"{name}/action"][..., j].astype(np.float64)
            want = np.zeros(R)
            for s in range(S):
                total = 0.0
                for t in range(R):
                    total += abs(a[s, t] - a[s, t - 1]) if t else 0.0
                    want[t] += total / S
            np.testing.assert_allclose(line.get_ydata(), want)
    assert len({ln.get_linestyle() for ln in _lines(axes[0])}) == len(NAMES)


def test_per_criterion_names_its_error_bars_and_hatches_its_bars(figures):
    plotting.plot_per_criterion(_arrays(), "p.png")
    fig = figures[-1]
    legend = fig.axes[1].get_legend()
    assert legend.get_title().get_text() == f"bars: mean ± 1 s.e. over {S} seeds"
    _legend_off_the_axes(fig, fig.axes[1], legend)
    hatches = {c.patches[0].get_hatch() for c in fig.axes[0].containers if hasattr(c, "patches")}
    assert len(hatches) == len(NAMES)


def test_threshold_and_grid_name_their_seed_counts(figures):
    arr = _arrays()
    arr["problem/s_star"] = np.asarray([0.3], np.float32)
    for name in NAMES:
        arr[f"{name}/action"] = arr[f"{name}/action"][..., :1]
        arr[f"{name}/totals/movement_cost"] = arr[f"{name}/cum_movement"][:, -1]
    plotting.plot_threshold(arr, "th.png")
    fig = figures[-1]
    assert f"over {S} seeds" in fig.axes[0].get_legend().get_title().get_text()
    assert fig.axes[1].get_title() == f"mean ± 1 s.e. over {S} seeds"
    assert fig.axes[1].get_ylim()[0] == 0.0
    assert {ln.get_linestyle() for ln in _lines(fig.axes[0])} == {"-", "--", "-."}
    grid = {"grid/names": np.asarray(["beta"]), "grid/values": np.asarray([[0.5], [1.0]])}
    for name in NAMES:
        for f in ("prediction_regret", "movement_cost"):
            grid[f"{name}/totals/{f}"] = np.ones((2, S))
        grid[f"{name}/cum_regret"] = np.ones((2, S, R))
    plotting.plot_grid(grid, "g.png")
    assert f"over {S} seeds" in figures[-1].axes[0].get_ylabel()


def _oco_summary(seeds: int = 7) -> dict:
    rows = []
    for a in (0.5, 0.75):
        q = {"means": [1.0, 2.0, 4.0], "exponent": 1.0}
        rows.append({"entry": "lazy", "horizons": [10, 20, 40], "budget_exponent": a,
                     "loss_regret": q, "movement": q, "total_regret": q,
                     "paper": {"loss_regret": 0.5, "movement": 0.5, "total_regret": 0.5}})
    point = {key: {"mean": [1.0, 2.0], "stderr": [0.1, 0.2]}
             for key in ("loss_regret_per_component", "movement_per_component", "switches")}
    return {"meta": {"name": "oco", "seeds": seeds, "move_cost": 1.0, "horizons": [40]},
            "fits": rows,
            "algorithms": {n: {"horizons": {"40": [point]}} for n in ("lazy", "ogd")}}


def test_oco_figures_name_their_seeds_and_keep_legends_off_the_data(figures):
    summary = _oco_summary()
    oco_plotting.plot_rates(summary, "lazy", "r.png")
    fig = figures[-1]
    assert "means over 7 seeds" in fig._suptitle.get_text()
    ax = fig.axes[0]
    markers = [ln.get_marker() for ln in ax.get_lines() if not ln.get_label().startswith("_")]
    assert len(markers) == 2 and len(set(markers)) == 2
    _legend_off_the_axes(fig, ax, ax.get_legend())
    oco_plotting.plot_per_component(summary, "c.png")
    fig = figures[-1]
    legend = fig.axes[2].get_legend()
    assert legend.get_title().get_text() == "bars: mean ± 1 s.e. over 7 seeds"
    _legend_off_the_axes(fig, fig.axes[2], legend)


def test_per_criterion_of_many_criteria_draws_lines_of_the_means(figures):
    """Beyond MAX_BAR_GROUPS criteria: one line per algorithm over the criterion ids, its
    points the per-criterion means over seeds (no tick label per criterion)."""
    k = plotting.MAX_BAR_GROUPS + 1
    rng = np.random.default_rng(3)
    arr = {}
    for name in NAMES:
        arr[f"{name}/cum_regret"] = np.ones((S, R))
        arr[f"{name}/totals/prediction_regret"] = np.ones(S)
        for f in ("updates", "changes"):
            arr[f"{name}/totals/{f}"] = rng.integers(1, 50, size=(S, k)).astype(np.int32)
    plotting.plot_per_criterion(arr, "p.png")
    fig = figures[-1]
    legend = fig.axes[1].get_legend()
    assert legend.get_title().get_text() == f"lines: mean ± 1 s.e. over {S} seeds"
    for ax, f in zip(fig.axes, ("updates", "changes")):
        assert len(ax.get_xticklabels()) < k
        means = _lines(ax)
        assert tuple(ln.get_label() for ln in means) == NAMES
        for ln, name in zip(means, NAMES):
            want = [sum(int(arr[f"{name}/totals/{f}"][s, i]) for s in range(S)) / S
                    for i in range(k)]
            np.testing.assert_allclose(ln.get_ydata(), want)
