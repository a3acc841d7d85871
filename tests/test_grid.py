"""[grid] runs: one compiled program over a grid of float hyperparameters, each point equal to
the ordinary run with those values set: bit for bit with the exact solvers (vertex), to float32
rounding with PGD (its iterates may round differently in the grid's program)."""

import json

import numpy as np
import pytest

from gsjax import experiment
from gsjax.config import find_config, parse_config, read_toml
from gsjax.runner import RunTotals

BASE = {
    "name": "grid",
    "seeds": 4,
    "horizon": 30,
    "record_every": 10,
    "problem": {"structure": "blocks", "num_blocks": 3, "block_dim": 2},
    "agent": {"lambda_reg": 0.5, "beta": 0.7, "move_cost": 1.0, "solver": "vertex"},
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
            np.testing.assert_array_equal(np.asarray(res.runs[name].records.action)[g],
                                          np.asarray(single.runs[name].records.action))
    # Movement weight 0 gives zero movement cost; the trigger ratio changes the update counts.
    lazy = res.runs["lazy"].totals
    assert np.all(lazy.movement_cost[[0, 1, 4, 5]] == 0)
    assert np.all(lazy.movement_cost[[2, 3, 6, 7]] > 0)
    assert lazy.reoptimisations[0].sum() > lazy.reoptimisations[1].sum()


#: Exact in a grid's program as in the ordinary one: the counts of every round.
COUNTS = ("updates", "changes", "triggers", "reoptimisations", "first_nonfinite")


def test_a_pgd_grid_point_equals_the_ordinary_run_to_rounding():
    """Section 7.3 (Adult, quadratic features, PGD, float32): XLA vectorises the PGD steps over
    (grid point, seed) in the grid's program and over seeds in the ordinary one, and may round
    some iterates differently; continuous states carry that on (here, 3 seeds x 40 rounds: the
    thresholds differ by ~1e-6, the movement by ~1e-6 relative). The counts are identical, the
    played states and the float totals agree to 1e-4."""
    raw = read_toml(find_config("section7_3"))
    raw.update(seeds=3, horizon=40, record_every=10)
    raw.pop("paper")
    res = experiment.run_experiment(parse_config({**raw, "grid": {"beta": [0.5, 2.0]}}))
    single = experiment.run_experiment(parse_config(raw, ["agent.beta=0.5"]))
    for name in ("linucb", "lazy"):
        a, b = res.runs[name], single.runs[name]
        for field in RunTotals._fields:
            x, y = np.asarray(getattr(a.totals, field))[0], np.asarray(getattr(b.totals, field))
            if field in COUNTS:
                np.testing.assert_array_equal(x, y, err_msg=field)
            elif field == "max_lcb_residual":  # the solver's own residual, ~1e-2
                np.testing.assert_allclose(x, y, rtol=0, atol=1e-5, err_msg=field)
            else:
                np.testing.assert_allclose(x, y, rtol=1e-4, err_msg=field)
        np.testing.assert_allclose(np.asarray(a.records.action)[0], np.asarray(b.records.action),
                                   rtol=0, atol=1e-4)


def test_grid_summary_and_heatmap(tmp_path, figures):
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
