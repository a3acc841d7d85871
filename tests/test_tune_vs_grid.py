"""``python -m gsjax.paper.tune_vs_grid``: the grid's choice and the held-out scores, against
an independent [grid] run (bandit) and ordinary runs with ``eta_scale`` set (OCO)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gsjax import experiment
from gsjax.paper import tune_vs_grid
from gsjax.config import ConfigError, load_config

BANDIT = """
name = "tvg_tiny"
seeds = 3
horizon = 20
dtype = "float64"
[problem]
structure = "blocks"
num_blocks = 2
block_dim = 2
[problem.theta]
distribution = "normal"
per_seed = true
[problem.noise]
sigma = 0.5
[agent]
lambda_reg = [0.3, 1.0]
beta = 0.5
[algorithms.lazy]
"""

OCO = """
kind = "oco"
name = "tvg_oco"
seeds = 3
horizon = [200]
[problem]
s0 = 0.0
[algorithms.lazy]
algorithm = "lazy_ogd"
budget_exponents = [0.5, 0.8]
"""


def test_choose_takes_the_first_minimum():
    assert tune_vs_grid.choose([[3.0, 1.0], [1.0, 2.0], [1.0, 3.0]]) == 1  # means 2, 1.5, 2
    assert tune_vs_grid.choose([[5.0], [1.0], [1.0]]) == 1  # a tie: the first


def _fake_tune_dir(d, cfg_path, point):
    """A tune output folder (the fields tune_vs_grid reads) whose final point is ``point``."""
    d.mkdir()
    meta = {"config": str(cfg_path), "algorithm": "lazy", "tuning_seeds": 3, "heldout_seeds": 2,
            "horizon": 20, "overrides": [], "dtype": "float64", "steps": 0, "lr": 0.1}
    (d / "trace.json").write_text(json.dumps({"meta": meta, "trace": []}))
    (d / "tune.json").write_text(json.dumps({
        "params": {"beta": {"initial": 0.5, "final": point[0]},
                   "trigger": {"initial": 2.0, "final": point[1]}},
        "heldout_hard": {"final": {"mean": 0.0, "stderr": 0.0}},
        "gradient_check": {"max_rel_error": 0.0}}))


def test_bandit_grid_choice_and_scores(tmp_path):
    """Against one independent [grid] run (what ``gsjax run --set grid...`` runs) over the
    global seeds 0..4: its first 3 seeds are the tuning seeds, the last 2 the held-out ones."""
    path = tmp_path / "tiny.toml"
    path.write_text(BANDIT)
    grid = {"beta": [0.5, 4.0], "trigger_ratio": [2.0, 4.0]}  # (0.5, 2.0): the defaults
    tdir = tmp_path / "tune"
    _fake_tune_dir(tdir, path, (4.0, 4.0))
    res = tune_vs_grid.run(grid=grid, tune_dirs=[tdir], heldout_grid=False,
                           out=tmp_path / "cmp", log=None)
    assert (res["tuning_seeds"], res["heldout_seeds"], res["algorithm"]) == (3, 2, "lazy")
    cfg = load_config(path, ["seeds=5", *(f"grid.{k}={v}" for k, v in grid.items())])
    t = experiment.run_experiment(cfg).runs["lazy"].totals
    tot = np.asarray(t.prediction_regret + t.movement_cost)  # (4 points, 5 seeds)
    points = experiment.grid_points(cfg)
    g = int(np.argmin(tot[:, :3].mean(1)))
    ch = res["grid"]["chosen"]
    assert ch["point"] == points[g]
    assert ch["tuning"]["mean"] == pytest.approx(tot[g, :3].mean(), rel=1e-12)
    assert ch["heldout"]["mean"] == pytest.approx(tot[g, 3:].mean(), rel=1e-12)
    held_at = lambda pt: tot[points.index(pt), 3:]  # noqa: E731
    assert res["defaults"]["heldout"]["mean"] == pytest.approx(
        held_at({"beta": 0.5, "trigger_ratio": 2.0}).mean(), rel=1e-12)
    tuned = held_at({"beta": 4.0, "trigger_ratio": 4.0})
    assert res["tuned"][0]["heldout"]["mean"] == pytest.approx(tuned.mean(), rel=1e-12)
    assert res["tuned"][0]["minus_grid_choice"]["mean"] == pytest.approx(
        (tuned - tot[g, 3:]).mean(), rel=1e-9, abs=1e-9)
    assert res["grid"]["seed_rounds"]["selection"] == 4 * 3 * 20
    assert json.loads((tmp_path / "cmp" / "compare.json").read_text())["grid"]["chosen"] == ch
    with pytest.raises(ConfigError, match="tuning_seeds"):
        tune_vs_grid.run(grid=grid, tune_dirs=[tdir], seeds=2, heldout_grid=False, log=None)


def test_oco_eta_scale_grid(tmp_path):
    from gsjax.oco.config import load_oco_config
    from gsjax.oco.experiment import run_experiment

    path = tmp_path / "oco.toml"
    path.write_text(OCO)
    scales = [0.25, 1.0, 4.0]  # 1.0: the entry's own (the defaults)
    res = tune_vs_grid.run(path, {"eta_scale": scales}, heldout_seeds=2, point=1,
                           heldout_grid=False, log=None)

    def ordinary(scale):  # global seeds 0..4: tuning 0..2, held-out 3..4
        cfg = load_oco_config(path, ["seeds=5", f"algorithms.lazy.eta_scale={scale}"])
        r = run_experiment(cfg).runs[("lazy", 200)].out.result
        return (r.loss_regret.sum(-1) + cfg.move_cost * r.movement.sum(-1))[:, 1]

    tot = [ordinary(s) for s in scales]
    g = int(np.argmin([t[:3].mean() for t in tot]))
    ch = res["grid"]["chosen"]
    assert ch["point"] == {"eta_scale": scales[g]}
    assert ch["tuning"]["mean"] == pytest.approx(tot[g][:3].mean(), rel=1e-12)
    assert ch["heldout"]["mean"] == pytest.approx(tot[g][3:].mean(), rel=1e-12)
    assert res["defaults"]["heldout"]["mean"] == pytest.approx(tot[1][3:].mean(), rel=1e-12)
    with pytest.raises(ConfigError, match="--grid"):
        tune_vs_grid.run(path, {"beta": [1.0]}, log=None)


@pytest.mark.slow  # -m slow: seven compiled programs, ~30 s of CPU on 2 cores
def test_tune_select_hard(tmp_path):
    """``gsjax tune --select hard``: the final point is the iterate whose hard run has the lowest
    regret on the tuning seeds; step 0 (the defaults) scores as a one-point grid does, and the
    comparison re-scores the final point as tune.json does."""
    from gsjax.tune import tune

    path = tmp_path / "tiny.toml"
    path.write_text(BANDIT)
    tdir = tmp_path / "tune"
    res = tune(path, "beta,trigger", steps=2, lr=0.5, heldout_seeds=2, select="hard", out=tdir,
               log=None)
    tr = json.loads((tdir / "trace.json").read_text())
    hard = [t["hard_tuning"] for t in tr["trace"]]
    sel = tr["meta"]["selected_step"]
    assert tr["meta"]["select"] == "hard" and sel == int(np.argmin(hard))
    u = tr["trace"][sel]["u"]
    assert res["params"]["beta"]["final"] == pytest.approx(np.exp(u["beta"]), rel=1e-12)
    cmp = tune_vs_grid.run(grid={"beta": [0.5], "trigger_ratio": [2.0]}, tune_dirs=[tdir],
                           heldout_grid=False, log=None)
    assert cmp["grid"]["chosen"]["tuning"]["mean"] == pytest.approx(hard[0], rel=1e-12)
    assert cmp["tuned"][0]["heldout"]["mean"] == pytest.approx(
        res["heldout_hard"]["final"]["mean"], rel=1e-9)
