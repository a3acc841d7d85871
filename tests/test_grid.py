"""[grid] runs: one compiled program over a grid of float hyperparameters, each point equal to
the ordinary run with those values set."""

import json

import numpy as np
import pytest

from gsjax import experiment
from gsjax.config import parse_config

BASE = {
    "name": "grid",
    "seeds": 4,
    "horizon": 30,
    "record_every": 10,
    "problem": {"structure": "blocks", "num_blocks": 3, "block_dim": 2},
    "agent": {"lambda_reg": 0.5, "beta": 0.7, "move_cost": 1.0},
    "algorithms": {"lazy": {}, "async_lazy": {"lambda_reg": [0.2, 0.5, 1.0]}},
    "grid": {"beta": [0.25, 1.5], "move_cost": [0.0, 2.0], "trigger_ratio": [2.0, 4.0]},
}


def test_every_grid_point_equals_the_ordinary_run():
    cfg = parse_config(BASE)
    res = experiment.run_experiment(cfg)
    points = experiment.grid_points(cfg)
    assert len(points) == 8
    assert points[1] == {"beta": 0.25, "move_cost": 0.0, "trigger_ratio": 4.0}  # last axis fastest
    no_grid = {k: v for k, v in BASE.items() if k != "grid"}
    for g in (0, 3, 6):
        sets = [f"agent.{k}={v}" for k, v in points[g].items()]
        # The async entry overrides lambda_reg, not the grid's fields: the grid still applies.
        single = experiment.run_experiment(parse_config(no_grid, sets))
        for name in ("lazy", "async_lazy"):
            a = res.runs[name].totals
            b = single.runs[name].totals
            for field in a._fields:
                np.testing.assert_array_equal(
                    np.asarray(getattr(a, field))[g], np.asarray(getattr(b, field)), err_msg=field
                )
    # Movement weight 0 gives zero movement cost; the trigger ratio changes the update counts.
    lazy = res.runs["lazy"].totals
    assert np.all(lazy.movement_cost[[0, 1, 4, 5]] == 0)
    assert np.all(lazy.movement_cost[[2, 3, 6, 7]] > 0)
    assert lazy.reoptimisations[0].sum() > lazy.reoptimisations[1].sum()


def test_grid_summary_and_heatmap(tmp_path):
    raw = dict(BASE, grid={"beta": [0.25, 1.5], "lambda_reg": [0.1, 1.0, 3.0]})
    raw["algorithms"] = {"lazy": {}}
    cfg = parse_config(raw)
    summary = experiment.run_config(cfg, tmp_path, log=lambda *a: None)
    assert (tmp_path / "grid.png").is_file() and (tmp_path / "movement.png").is_file()
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["grid"]["axes"] == {"beta": [0.25, 1.5], "lambda_reg": [0.1, 1.0, 3.0]}
    rows = s["grid"]["points"]
    assert len(rows) == 6
    totals = [r["algorithms"]["lazy"]["total_regret"]["mean"] for r in rows]
    best = s["algorithms"]["lazy"]
    assert best["grid_point"] == rows[int(np.argmin(totals))]["point"]
    assert best["total_regret"]["mean"] == pytest.approx(min(totals))
    z = np.load(tmp_path / "arrays.npz")
    assert z["lazy/totals/movement_cost"].shape == (6, 4)
    assert z["grid/values"].shape == (6, 2)
