"""The scripts in examples/ run as documented (docs/how-to/examples.md) and print what they say.

Each runs in a subprocess from the repository root, as a user would run it, and its JSON output
is checked against a computation of its own: brute force over the box's vertices (linear losses
are minimised at a vertex), the loop's own bookkeeping, or the ordinary library run the example
mirrors (marked slow: one more compiled run each).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(*argv: str) -> dict:
    env = dict(os.environ, GSJAX_CACHE_DIR="off", PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _vertex_losses(theta_rows, scopes, n):
    """Every vertex of [0, 1]^n and its total linear loss sum_i <theta_i, s[scope_i]>."""
    vertices = np.array(list(itertools.product((0.0, 1.0), repeat=n)))
    loss = sum(vertices[:, scope] @ np.asarray(row[:len(scope)], np.float64)
               for row, scope in zip(theta_rows, scopes))
    return vertices, loss


def test_own_graph():
    out = _run("examples/own_graph.py", "--seeds", "8", "--horizon", "1000")
    scopes = [[0, 1], [1, 2], [2, 3, 4], [4, 5], [5, 0]]  # as in the script
    vertices, loss = _vertex_losses(out["theta"], scopes, 6)
    # the library's s* is the brute-force minimiser, and the never-moving policy's regret is
    # T (L(s0) - L*) in float64
    np.testing.assert_allclose(out["s_star"], vertices[np.argmin(loss)])
    l_start = sum(0.5 * np.sum(np.asarray(row[:len(s)])) for row, s in zip(out["theta"], scopes))
    assert out["stay_at_s0"]["total_regret"] == pytest.approx(1000 * (l_start - loss.min()),
                                                             rel=1e-5)
    for name in ("lazy", "linucb"):
        r = out[name]
        assert np.isfinite(r["total_regret"]) and r["prediction_regret"] >= 0
        assert r["total_regret"] < 0.1 * out["stay_at_s0"]["total_regret"], name
    assert out["linucb"]["reoptimisations"] == 1000  # every round
    assert 0 < out["lazy"]["reoptimisations"] < 100  # the doubling trigger: O(log T) per criterion


@functools.cache
def _grid():
    return _run("examples/grid_sweep.py")


def test_grid_sweep_names_the_argmin():
    out = _grid()
    assert len(out["points"]) == 4 * 3
    assert {tuple(sorted(p["point"].items())) for p in out["points"]} == {
        (("beta", b), ("trigger_ratio", c))
        for b in out["axes"]["beta"] for c in out["axes"]["trigger_ratio"]}
    best = min(out["points"], key=lambda p: p["total_regret"])
    assert out["best"] == {"point": best["point"], "total_regret": best["total_regret"]}
    # a smaller trigger ratio re-optimises at least as often, at every beta
    for b in out["axes"]["beta"]:
        counts = [p["reoptimisations"] for c in sorted(out["axes"]["trigger_ratio"])
                  for p in out["points"] if p["point"] == {"beta": b, "trigger_ratio": c}]
        assert counts == sorted(counts, reverse=True), (b, counts)


@pytest.mark.slow
def test_grid_sweep_best_point_equals_the_ordinary_run():
    """With the vertex solver a grid point is the ordinary run with its values, bit for bit."""
    import tomllib

    from gsjax import experiment, parse_config

    out = _grid()
    text = (REPO / "examples" / "grid_sweep.py").read_text()
    raw = tomllib.loads(text.split('CONFIG = """')[1].split('"""')[0])
    raw.pop("grid")
    raw["agent"].update(out["best"]["point"])
    summary = experiment.summarise(experiment.run_experiment(parse_config(raw)))
    assert summary["algorithms"]["lazy"]["total_regret"]["mean"] == out["best"]["total_regret"]


def test_tuner_loop():
    out = _run("examples/tuner_loop.py")
    assert out["rounds"] == 400
    # the loop's own count of movement is the learner's, and a redeployment needs a re-solve
    assert out["movement_measured"] == pytest.approx(out["movement_status"], abs=1e-9)
    assert 0 < out["redeploys"] <= out["reoptimisations"] < 400
    # the learner beats never moving, and ends on the best vertex of the hidden losses
    theta = np.asarray(out["theta"])
    vertices, loss = _vertex_losses(theta, [[0, 1], [2, 3], [4, 5]], 6)
    assert out["regret_tuner"] < 0.2 * out["regret_stay_at_start"]
    np.testing.assert_array_equal(out["final_setting"], vertices[np.argmin(loss)])


@functools.cache
def _tune():
    return _run("examples/gradient_tune.py")


def test_gradient_tune():
    out = _tune()
    h, se = out["heldout_hard_regret"], out["heldout_hard_stderr"]
    assert out["gradient_check_max_rel_error"] < 1e-6  # exact gradient: no relaxation in OCO
    assert out["eta_scale"]["initial"] == 1.0 and out["eta_scale"]["final"] < 1.0
    assert h["final"] < h["initial"] - 5 * (se["initial"] + se["final"])


@pytest.mark.slow
def test_gradient_tune_heldout_equals_gsjax_run(tmp_path):
    """The held-out regret tune.json reports is what `gsjax run` gives at the tuned step."""
    out = _tune()
    env = dict(os.environ, GSJAX_CACHE_DIR="off", PYTHONPATH=str(REPO))
    eta = out["eta_scale"]["final"]
    subprocess.run(
        [sys.executable, "-m", "gsjax", "run", "section6_tradeoff", "--seeds", "32",
         "--seed-start", "16", "--horizon", "2000", "--set", "problem.s0=0.0",
         "--set", "move_cost=10", "--set", f"algorithms.lazy_ogd.eta_scale={eta!r}",
         "--out", str(tmp_path / "run"), "--quiet"], cwd=REPO, env=env, check=True)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    point = summary["algorithms"]["lazy_ogd"]["horizons"]["2000"][15]
    assert point["budget_exponent"] == 0.85
    assert point["total_regret"]["mean"] == pytest.approx(out["heldout_hard_regret"]["final"],
                                                         rel=1e-9)
