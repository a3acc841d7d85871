"""Issue 20: per-criterion knobs, the smoothed (ES) estimator of the hard objective, truncated
and annealed pathwise gradients.

Independent references: central finite differences of the same relaxed objective (float64),
the scalar knob's gradient (the chain rule: a tied vector's components sum to it), a closed-form
smoothed objective (a cubic), Monte-Carlo central differences of the smoothed HARD objective
(many draws, a statistical bound), and the hard runner (``runner.run``) seed by seed.
"""

from __future__ import annotations

import json
from itertools import product

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import cli, es, runner
from gsjax.problem import seed_rows
from gsjax.tune import BanditTuning, _temperatures

TOML = """
name = "knobs_tiny"
seeds = 2
horizon = 20
dtype = "float64"
[problem]
structure = "blocks"
num_blocks = 3
block_dim = 2
[problem.theta]
distribution = "normal"
per_seed = true
[problem.noise]
sigma = 0.5
[agent]
lambda_reg = [0.3, 1.0, 0.6]
beta = 0.5
[algorithms.lazy]
[relaxed]
temperature = 0.1
solve_temperature = 0.05
"""


@pytest.fixture(scope="module")
def cfg_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("knobs") / "tiny.toml"
    p.write_text(TOML)
    return p


def _grad(bt, u):  # jitted: one compile, not one per operation (was 16 s of 21)
    return jax.jit(jax.grad(lambda v: bt.relaxed(v, bt.rp)[0]))(u)


def test_per_criterion_gradient_matches_central_differences(cfg_path):
    with jax.enable_x64(True):
        bt = BanditTuning(cfg_path, ["beta[*]", "lambda_reg", "trigger[*]"], seeds=2)
        u = bt.u0
        assert u["beta[*]"].shape == (3,) and u["trigger[*]"].shape == (3,)
        g = _grad(bt, u)
        f = jax.jit(lambda v: bt.relaxed(v, bt.rp)[0])
        h = 1e-6
        checked = 0
        for name in u:
            for i in range(3):
                up = dict(u, **{name: u[name].at[i].add(h)})
                dn = dict(u, **{name: u[name].at[i].add(-h)})
                fd = (float(f(up)) - float(f(dn))) / (2 * h)
                assert float(g[name][i]) == pytest.approx(fd, rel=1e-4, abs=1e-6), (name, i)
                checked += abs(fd) > 1e-3
        assert checked >= 6  # most components carry a real gradient


@pytest.mark.slow  # -m slow: three relaxed programs compiled (the FD test above checks each component)
def test_tied_vector_gradient_sums_to_the_scalar_knob(cfg_path):
    with jax.enable_x64(True):
        vec = BanditTuning(cfg_path, ["beta[*]", "trigger[*]"], seeds=2)
        sca = BanditTuning(cfg_path, ["beta", "trigger"], seeds=2)
        gv, gs = _grad(vec, vec.u0), _grad(sca, sca.u0)
        for f in ("beta", "trigger"):
            assert float(jnp.sum(gv[f + "[*]"])) == pytest.approx(float(gs[f]), rel=1e-9)
        # One component alone is that component of the vector's gradient.
        one = BanditTuning(cfg_path, ["beta[2]", "trigger[0]"], seeds=2)
        g1 = _grad(one, one.u0)
        assert float(g1["beta[2]"]) == pytest.approx(float(gv["beta[*]"][2]), rel=1e-9)
        assert float(g1["trigger[0]"]) == pytest.approx(float(gv["trigger[*]"][0]), rel=1e-9)


@pytest.mark.parametrize("argv, field", [
    (["--params", "beta[3]"], "--params"),
    (["--params", "beta[x]"], "--params"),
    (["--params", "pgd_lr[0]"], "--params"),
    (["--params", "gamma[0]"], "--params"),
    (["--params", "beta,beta[1]"], "--params"),
    (["--params", "trigger[*],trigger[0]"], "--params"),
    (["--params", "beta", "--estimator", "es", "--anneal", "0.01"], "--anneal"),
    (["--params", "beta", "--anneal", "0.01"], "--anneal"),
    (["--params", "beta", "--window", "7"], "--window"),
    (["--params", "beta", "--estimator", "es", "--pairs", "0"], "--pairs"),
    (["--params", "beta", "--estimator", "es", "--sigma", "-1"], "--sigma"),
])
def test_bad_knobs_exit_2(tmp_path, cfg_path, capsys, argv, field):
    assert cli.main(["tune", str(cfg_path), "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}:") and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()


def test_es_estimate_mean_is_the_smoothed_gradient_of_a_cubic():
    """f(x) = sum a_i x_i^3 + b.x: F_sigma has gradient 3 a_i (x_i^2 + sigma^2) + b_i exactly
    (the sigma^2 term is what smoothing adds; the test resolves it)."""
    rng = np.random.default_rng(1)
    a, b = np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.0, -1.0])
    x, sigma = np.array([0.4, -0.2, 1.0]), 0.5

    def f(pts):
        return (a * pts ** 3).sum(-1) + pts @ b

    R = 4000
    ests = np.stack([es.antithetic_gradient(f, x, sigma, es.perturbations(rng, 4, 3)).grad
                     for _ in range(R)])
    mean, se = ests.mean(0), ests.std(0, ddof=1) / np.sqrt(R)
    truth = 3 * a * (x ** 2 + sigma ** 2) + b
    assert np.all(np.abs(mean - truth) < 4.5 * se), (mean, truth, se)
    unsmoothed = 3 * a * x ** 2 + b
    assert np.all(np.abs(mean - unsmoothed) > 10 * se)  # the bound resolves the smoothing


def test_es_on_a_hard_run_matches_monte_carlo_differences_of_the_smoothed_objective(cfg_path):
    """On the hard run (piecewise constant in the knobs for fixed seeds): the ES estimate with
    many pairs against central differences of F_sigma, each F computed by Monte Carlo with
    independent draws (common to the + and - side); bound: 4.5 combined standard errors plus
    the central difference's own O(h^2) bias (|F'''| h^2 / 6: 5 % allowed)."""
    with jax.enable_x64(True):
        bt = BanditTuning(cfg_path, ["beta", "trigger"], seeds=2)
        x0, to_u = bt.flat()
        sigma, h, P, M = 0.4, 0.2, 4000, 4000
        rng = np.random.default_rng(7)
        eps = es.perturbations(rng, P, 2)
        deltas = rng.standard_normal((M, 2))
        pts = [x0 + sigma * eps, x0 - sigma * eps]
        for j in range(2):
            e = np.eye(2)[j] * h
            pts += [x0 + e + sigma * deltas, x0 - e + sigma * deltas]
        pts = np.concatenate(pts)
        vals = bt.hard(bt.built, np.arange(2), [to_u(q) for q in pts]).mean(1)
        v_es = vals[:2 * P]
        est = es.antithetic_gradient(lambda _: v_es, x0, sigma, eps)
        per_pair = (v_es[:P] - v_es[P:])[:, None] * eps / (2 * sigma)
        se_es = per_pair.std(0, ddof=1) / np.sqrt(P)
        rest = vals[2 * P:].reshape(2, 2, M)
        d = (rest[:, 0] - rest[:, 1]) / (2 * h)  # (2, M)
        fd, se_fd = d.mean(1), d.std(1, ddof=1) / np.sqrt(M)
        bound = 4.5 * np.sqrt(se_es ** 2 + se_fd ** 2) + 0.05 * np.abs(fd)
        assert np.all(np.abs(est.grad - fd) < bound), (est.grad, fd, bound)
        assert np.max(np.abs(fd) / bound) > 2  # the bound resolves a real gradient


@pytest.mark.slow  # -m slow: three relaxed programs compiled
def test_window_keeps_the_value_and_the_full_window_is_the_full_gradient(cfg_path):
    with jax.enable_x64(True):
        full = BanditTuning(cfg_path, ["beta", "trigger"], seeds=2)
        w20 = BanditTuning(cfg_path, ["beta", "trigger"], seeds=2, window=20)
        w5 = BanditTuning(cfg_path, ["beta", "trigger"], seeds=2, window=5)
        vals = [float(b.relaxed(b.u0, b.rp)[0]) for b in (full, w20, w5)]
        assert vals[1] == pytest.approx(vals[0], rel=1e-12)
        assert vals[2] == pytest.approx(vals[0], rel=1e-12)
        g = [_grad(b, b.u0) for b in (full, w20, w5)]
        for k in ("beta", "trigger"):
            assert float(g[1][k]) == pytest.approx(float(g[0][k]), rel=1e-9)
        assert abs(float(g[2]["beta"]) - float(g[0]["beta"])) > 1e-6 * abs(float(g[0]["beta"]))


def test_anneal_schedule_is_geometric():
    from gsjax.config import RelaxedConfig

    temps = _temperatures(RelaxedConfig(temperature=0.1, solve_temperature=0.05), 0.001, 4)
    assert temps[0] == pytest.approx((0.1, 0.05)) and temps[-1] == pytest.approx((0.001, 0.0005))
    r = [temps[i + 1][0] / temps[i][0] for i in range(4)]
    assert np.allclose(r, 0.01 ** 0.25)


def test_es_cli_reports_per_criterion_and_scores_hard(tmp_path, cfg_path):
    """``--estimator es`` with per-criterion knobs: every knob reported per criterion; the
    held-out score of the final point is the hard runner's, seed by seed, at that point."""
    out = tmp_path / "out"
    rc = cli.main(["tune", str(cfg_path), "--params", "beta[*],trigger[1]", "--steps", "2",
                   "--estimator", "es", "--pairs", "3", "--lr", "0.3", "--heldout-seeds", "2",
                   "--out", str(out), "--quiet"])
    assert rc == 0
    res = json.loads((out / "tune.json").read_text())
    tr = json.loads((out / "trace.json").read_text())
    assert res["params"]["beta[*]"]["initial"] == pytest.approx([0.5] * 3)
    assert res["params"]["trigger[1]"]["initial"] == pytest.approx(2.0)
    fin = tr["meta"]["point"]["final"]
    assert fin["beta"] == pytest.approx(res["params"]["beta[*]"]["final"], rel=1e-12)
    assert fin["trigger_ratio"][1] == pytest.approx(res["params"]["trigger[1]"]["final"])
    assert fin["trigger_ratio"][0] == pytest.approx(2.0) and fin["trigger_ratio"][2] == 2.0
    assert tr["meta"]["seed_rounds"]["tuning_hard"] == 3 * 7 * 2 * 20
    # The trace's objective is the hard regret at the iterate; final = the lowest one.
    objs = [t["objective"] for t in tr["trace"]]
    assert res["objective"]["final"]["mean"] == pytest.approx(min(objs), rel=1e-12)
    with jax.enable_x64(True):
        bt = BanditTuning(cfg_path, ["beta"], seeds=2)
        p = bt.base._replace(beta=jnp.asarray(fin["beta"]),
                             log_trigger=jnp.log(jnp.asarray(fin["trigger_ratio"])))
        tots = []
        for sid in (2, 3):
            held = bt.held
            prob = seed_rows(held.problem, sid - 2)
            _, tot, _ = runner.run(jax.random.fold_in(bt.root, sid), bt.ba.algo,
                                   held.structure, prob, p, bt.ba.move_cost, 20, 20)
            tots.append(float(tot.prediction_regret + tot.movement_cost))
    assert res["heldout_hard"]["final"]["mean"] == pytest.approx(np.mean(tots), rel=1e-9)


@pytest.mark.slow  # -m slow: ~30 s alone on 2 cores (more under load)
def test_tune_vs_grid_scores_per_criterion_points(tmp_path, cfg_path):
    from gsjax.paper import tune_vs_grid

    tdir = tmp_path / "t"
    res = cli.main(["tune", str(cfg_path), "--params", "beta[*],lambda_reg[0]", "--steps", "1",
                    "--heldout-seeds", "2", "--out", str(tdir), "--quiet"])
    assert res == 0
    tj = json.loads((tdir / "tune.json").read_text())
    cmp = tune_vs_grid.run(grid={"beta": [0.5]}, tune_dirs=[tdir], heldout_grid=False,
                           iterates=True, log=None)
    assert cmp["tuned"][0]["heldout"]["mean"] == pytest.approx(
        tj["heldout_hard"]["final"]["mean"], rel=1e-9)
    assert cmp["defaults"]["heldout"]["mean"] == pytest.approx(
        tj["heldout_hard"]["initial"]["mean"], rel=1e-9)


def test_equal_compute_comparison_small(tmp_path, cfg_path):
    """``benchmarks/gradients.py compare`` on the tiny config: the rows' schema and compute; a
    budget of one hard point is the config's point, so random search's held-out score is the
    ordinary hard run of the held-out seeds (``run_experiment``); random points stay in the box."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks import gradients

    out = tmp_path / "cmp.json"
    assert gradients.main(["compare", "--config", str(cfg_path), "--horizon", "20", "--seeds",
                           "2", "--heldout", "3", "--params", "beta[*],trigger", "--budgets",
                           "1,3", "--pairs", "1", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["result"]
    keys = {"setting", "knobs", "method", "compute_seed_rounds", "heldout_mean",
            "heldout_stderr", "paired_diff_vs_random", "paired_p_vs_random"}
    assert all(keys <= set(r) for r in rows)
    by = {(r["method"], r["compute_seed_rounds"]): r for r in rows}
    assert set(by) == {("random", 40), ("random", 120), ("es", 120), ("defaults", 0)}
    assert all(r["knobs"] == 4 for r in rows)
    assert by[("random", 40)]["heldout_mean"] == by[("defaults", 0)]["heldout_mean"]
    from gsjax import experiment
    from gsjax.config import load_config

    with jax.enable_x64(True):
        cfg = load_config(cfg_path, ["dtype=float64", "seeds=3", "horizon=20"])
        cfg = type(cfg)(**{**cfg.__dict__, "algorithms": cfg.algorithms[:1]})
        hard = experiment.run_experiment(cfg, seed_start=2).runs["lazy"].totals
        tot = np.asarray(hard.prediction_regret + hard.movement_cost)
        assert by[("defaults", 0)]["heldout_mean"] == pytest.approx(tot.mean(), rel=1e-9)
        bt = BanditTuning(cfg_path, ["beta[*]", "trigger"], seeds=2)
        x0, lo, hi = gradients.box(bt)
        pts = gradients.random_points(x0, lo, hi, 200, np.random.default_rng(0))
        assert np.array_equal(pts[0], x0)
        beta = pts[1:, :3]  # ravel order: beta[*] (3), trigger
        assert np.all(np.abs(beta - np.log(0.5)) <= np.log(4.0) + 1e-12)
        c = np.exp(np.exp(pts[1:, 3]))
        assert c.min() >= 1.1 - 1e-9 and c.max() <= 16 + 1e-9


OCO_TOML = """
kind = "oco"
name = "knobs_oco"
seeds = 3
horizon = [200]
[problem]
s0 = 0.0
[algorithms.lazy]
algorithm = "lazy_ogd"
budget_exponents = [0.5, 0.8]
"""


def test_grid_points_is_the_largest_full_grid():
    lo, hi = np.array([0.0, -1.0]), np.array([1.0, 1.0])
    g = _gradients().grid_points(lo, hi, 10)  # 3 x 3 <= 10 < 4 x 4
    want = [(a, b) for a, b in product([0.0, 0.5, 1.0], [-1.0, 0.0, 1.0])]
    assert sorted(map(tuple, g.tolist())) == sorted(want)
    assert _gradients().grid_points(lo, hi, 3) is None  # 2 x 2 > 3
    assert len(_gradients().grid_points(lo[:1], hi[:1], 7)) == 7


def _gradients():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks import gradients

    return gradients


def test_oco_compare_matches_ordinary_runs(tmp_path):
    """``compare`` on a ``kind = "oco"`` config (``gsjax.tune.OCOTuning``): the grid's choice,
    the defaults and every pathwise iterate's tuning value are those of ordinary runs
    (``run_experiment``) with ``eta_scale`` set; the pathwise gradient agrees with central
    differences of the same hard objective."""
    from gsjax.oco.config import load_oco_config
    from gsjax.oco.experiment import run_experiment

    gradients = _gradients()
    path = tmp_path / "oco.toml"
    path.write_text(OCO_TOML)

    def ordinary(scale):  # global seeds 0..4: tuning 0..2, held-out 3..4
        cfg = load_oco_config(path, ["seeds=5", f"algorithms.lazy.eta_scale={scale!r}"])
        r = run_experiment(cfg).runs[("lazy", 200)].out.result
        return np.asarray(r.loss_regret.sum(-1) + cfg.move_cost * r.movement.sum(-1))[:, 1]

    out = tmp_path / "cmp.json"
    assert gradients.main(["compare", "--config", str(path), "--params", "eta_scale",
                           "--horizon", "200", "--seeds", "3", "--heldout", "2", "--point", "1",
                           "--budgets", "3", "--pairs", "1", "--methods",
                           "random,grid,es,pathwise", "--out", str(out)]) == 0
    rows = {r["method"]: r for r in json.loads(out.read_text())["result"]}
    assert set(rows) == {"random", "grid", "es", "pathwise", "defaults"}
    scales = [1 / 8, 1.0, 8.0]  # the 3-point grid on [1/8, 8] (log scale)
    tot = [ordinary(s) for s in scales]
    g = int(np.argmin([t[:3].mean() for t in tot]))
    assert rows["grid"]["heldout_mean"] == pytest.approx(tot[g][3:].mean(), rel=1e-9)
    assert rows["defaults"]["heldout_mean"] == pytest.approx(tot[1][3:].mean(), rel=1e-9)
    assert rows["es"]["heldout_mean"] == pytest.approx(tot[1][3:].mean(), rel=1e-9)  # 0 steps
    assert rows["pathwise"]["hard_points"] == 3
    assert rows["pathwise"]["compute_seed_rounds"] == 3 * 3 * 200

    with jax.enable_x64(True):
        a = type("A", (), dict(config=str(path), params="eta_scale", seeds=3, heldout=2,
                               horizon=200, set=None, algorithm=None, point=1))
        st = gradients._OCO(a)
        xs, vals, _ = st.pathwise(2, 0.3)
        for x, v in zip(xs, vals):
            assert v == pytest.approx(ordinary(float(np.exp(x[0])))[:3].mean(), rel=1e-9)
        f = jax.jit(lambda u: jnp.mean(st.ot.per_seed(u, st.ot.keys)))
        g0 = float(jax.grad(f)(st.ot.u0)["eta_scale"])
        h = 1e-5
        fd = (float(f({"eta_scale": jnp.asarray(h)})) - float(f({"eta_scale": jnp.asarray(-h)})))
        assert g0 == pytest.approx(fd / (2 * h), rel=1e-4)


def test_append_replaces_a_rerun_and_the_table_counts_paired_wins(tmp_path):
    """``compare --append`` replaces rows of the same setting, seed, method, compute and budget
    and keeps the rest; the summary table averages over draws and counts significant paired
    wins/losses (hand-made rows)."""
    g = _gradients()
    path = tmp_path / "cmp.json"

    def row(m, seed, mean, d, p, dt=None, pt=None, budget=5):
        r = {"setting": "s", "knobs": 2, "method": m, "compute_seed_rounds": budget * 10,
             "heldout_mean": mean, "heldout_stderr": 1.0, "paired_diff_vs_random": d,
             "paired_p_vs_random": p, "budget": budget, "hard_points": budget}
        if dt is not None:
            r.update(paired_diff_vs_tpe=dt, paired_p_vs_tpe=pt)
        return r

    g._append(path, [row("random", 0, 10.0, 0.0, 1.0), row("es", 0, 99.0, 89.0, 0.01)], 0, "a")
    g._append(path, [row("random", 1, 12.0, 0.0, 1.0)], 1, "b")
    g._append(path, [row("es", 0, 8.0, -2.0, 0.01, -1.0, 0.2),
                     row("tpe", 0, 9.0, -1.0, 0.5, 0.0, 1.0)], 0, "c")  # es rerun
    rows = json.loads(path.read_text())
    assert sorted((r["method"], r["seed"], r["command"]) for r in rows) == [
        ("es", 0, "c"), ("random", 0, "a"), ("random", 1, "b"), ("tpe", 0, "c")]
    more = rows + [row("es", 1, 14.0, 2.0, 0.04, 3.0, 0.01)]
    table = g.summary_table(more)
    line = [ln for ln in table.splitlines() if ln.startswith("| 5 |")][0]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == "11.0"  # random: (10 + 12) / 2
    assert cells[2] == "9.0 (0+/0− vs random)"  # tpe
    assert cells[3] == "11.0 (1+/1− vs random, 0+/1− vs tpe)"  # es: (8 + 14) / 2
