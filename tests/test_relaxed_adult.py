"""``gsjax tune`` on the UCI Adult threshold task (Section 7.3): the smoothed environment.

Checked against independent computations: the exact loss by direct counting
(:func:`gsjax.fairness.loss_terms`) and the exact piece table, the smoothed loss and batch loss
written out here in NumPy float64, central finite differences of the relaxed objective, and an
ordinary hard ``run_experiment`` on the held-out seed range.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import cli, experiment, fairness, relaxed, runner
from gsjax.config import load_config

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "section7_3.toml"
# Linear features and the soft vertex solver keep the compiles short; the environment (data,
# classifier, smoothing) is the same whatever the features.
SETS = ["dtype=float64", "seeds=2", "horizon=24", "problem.adult.gap_estimator=signed",
        "problem.features=linear", "agent.solver=vertex"]


@pytest.fixture(scope="module")
def built():
    with jax.enable_x64(True):
        cfg = load_config(CONFIG, SETS)
        entry = next(e for e in cfg.algorithms if e.name == "lazy")
        yield experiment.build(dataclasses.replace(cfg, algorithms=(entry,)))


@pytest.fixture(scope="module")
def smooth(built):
    return fairness.smooth(built.problem, 0.01)


def _np_smoothed_loss(scores, labels, male, tau, h):
    """L_h(tau) by direct float64 sums (a different formula for sigma than the package's)."""
    tau = np.atleast_1d(np.asarray(tau, np.float64))
    x = np.clip((np.asarray(scores, np.float64)[None, :] - tau[:, None]) / h, -700, 700)
    p = 1.0 / (1.0 + np.exp(-x))
    y = np.asarray(labels, bool)
    m = np.asarray(male, bool)
    err = np.mean(np.where(y, 1.0 - p, p), axis=1)
    tpr_m = p[:, y & m].sum(1) / np.sum(y & m)
    tpr_f = p[:, y & ~m].sum(1) / np.sum(y & ~m)
    return err + np.abs(tpr_m - tpr_f)


def test_smoothed_loss_tends_to_the_exact_loss(built):
    """L_h -> L as h -> 0: the integral error shrinks with h, and away from the scores L_h is
    the exact loss (direct counting) to within the tails of sigma."""
    d = built.problem.env_data
    scores, labels, male = (np.asarray(a) for a in (d.scores, d.labels, d.male))
    rng = np.random.default_rng(0)
    taus = np.sort(rng.uniform(0.0, 1.0, 200))
    exact = np.array([fairness.loss_terms(scores, labels, male, t) for t in taus])
    exact = exact[:, 0] + np.abs(exact[:, 1] - exact[:, 2])
    # the package's table agrees with direct counting (the reference for the rest)
    np.testing.assert_allclose(np.asarray(jax.vmap(lambda t: fairness.exact_loss(d, t))(
        jnp.asarray(taus))), exact, atol=1e-12)
    errors = [np.mean(np.abs(_np_smoothed_loss(scores, labels, male, taus, h) - exact))
              for h in (0.02, 0.01, 0.005, 0.0025)]
    assert all(a > b for a, b in zip(errors, errors[1:])), errors
    assert errors[-1] < 0.5 * errors[0] and errors[0] < 0.02, errors
    # Away from every score (distance >= 30 h), |L_h - L| is below N sigma(-30) (1/N + 2/n_f).
    h = 1e-6
    gap = np.min(np.abs(scores[None, :] - taus[:, None]), axis=1)
    far = gap >= 30 * h
    assert far.sum() > 50
    e, tm, tf = fairness.smoothed_loss_terms(scores, labels, male, taus[far], h)
    np.testing.assert_allclose(e + np.abs(tm - tf), exact[far], atol=1e-8)
    np.testing.assert_allclose(_np_smoothed_loss(scores, labels, male, taus[far], h),
                               exact[far], atol=1e-8)


def test_interpolated_table_is_the_direct_sum(built, smooth):
    """The regret term (table of L_h + linear interpolation) against the direct sum."""
    h = 0.01
    d = smooth.env_data
    rng = np.random.default_rng(1)
    taus = np.concatenate([rng.uniform(0.0, 1.0, 300), [0.0, 1.0, built.problem.s_star[0]]])
    got = np.asarray(jax.vmap(lambda t: fairness.smoothed_loss(d, t))(jnp.asarray(taus)))
    want = _np_smoothed_loss(d.scores, d.labels, d.male, taus, h)
    np.testing.assert_allclose(got, want, atol=5e-6)
    # the hard environment is untouched: same arrays, no smoothing fields
    assert built.problem.env_data.bandwidth is None and built.problem.env_data.smooth_table is None
    assert d.scores is built.problem.env_data.scores
    with pytest.raises(ValueError, match="bandwidth"):
        fairness.smooth(built.problem, 0.0)


def _np_batch_loss(p, y, m, estimator, inv_pos_share):
    """The batch loss of predictions ``p`` (soft or 0/1) on rows ``(y, m)``, NumPy float64."""
    loss = np.mean(np.where(y, 1.0 - p, p))
    if estimator == "plain":
        return loss + abs(np.sum(p * (y & m)) / max(np.sum(y & m), 1)
                          - np.sum(p * (y & ~m)) / max(np.sum(y & ~m), 1))
    z = p * y * np.where(m, inv_pos_share[0], -inv_pos_share[1])
    if estimator == "signed":
        return loss + np.mean(z)
    za, zb = np.mean(z[:len(z) // 2]), np.mean(z[len(z) // 2:])
    return loss + 0.5 * (np.sign(za) * zb + np.sign(zb) * za)


def test_smoothed_batch_loss(built, smooth):
    """Same rows as the hard batch (same key); NumPy float64 formula at h = 0.01 for each gap
    estimator; the hard batch loss (indicators) as h -> 0; d y / d tau against central
    differences; the hard observe is not routed through the smoothing."""
    hard = built.problem.env_data
    d = smooth.env_data
    tiny = d._replace(bandwidth=jnp.asarray(1e-9, jnp.float64))
    ips = np.asarray(hard.inv_pos_share)
    for estimator in ("plain", "signed", "split"):
        spec = dataclasses.replace(built.structure.env.spec, gap_estimator=estimator)
        vg = jax.jit(jax.value_and_grad(
            lambda t, k, dd: fairness.smoothed_batch_loss(k, spec, dd, t)))  # noqa: B023
        for i in range(2):
            key = jax.random.key(10 + i)
            tau = jnp.asarray(0.35 + 0.45 * i, jnp.float64)
            idx = np.asarray(jax.random.randint(key, (spec.batch_size,), 0, hard.scores.shape[0]))
            u, y = np.asarray(hard.scores)[idx], np.asarray(hard.labels)[idx]
            m = np.asarray(hard.male)[idx]
            p = 1.0 / (1.0 + np.exp(-(u - float(tau)) / 0.01))
            val, g = vg(tau, key, d)
            assert float(val) == pytest.approx(_np_batch_loss(p, y, m, estimator, ips),
                                               abs=1e-12), estimator
            # h -> 0: the hard batch loss of the same rows (no batch score within 1e-6 of tau)
            assert np.min(np.abs(u - float(tau))) > 1e-6
            hard_y = _np_batch_loss((u >= float(tau)).astype(float), y, m, estimator, ips)
            assert float(vg(tau, key, tiny)[0]) == pytest.approx(hard_y, abs=1e-12), estimator
            fd = (float(vg(tau + 1e-6, key, d)[0]) - float(vg(tau - 1e-6, key, d)[0])) / 2e-6
            assert abs(fd) > 1e-3 and float(g) == pytest.approx(fd, rel=1e-5), estimator
    fb = jax.jit(lambda k, dd, t: fairness.observe(k, spec, dd, t[None]))(key, hard, tau)
    assert float(fb.y[0]) == pytest.approx(hard_y, abs=1e-12)
    j = np.searchsorted(np.asarray(hard.thresholds), float(tau))
    assert float(fb.expected_loss) == float(np.asarray(hard.table)[j])


def test_relaxed_gradient_matches_central_finite_differences(built, smooth):
    """The relaxed objective on the smoothed environment (soft vertex solver here; the PGD path
    is checked through the CLI test's gradient_check): autodiff in (log beta, log log c) vs
    central differences. The prediction regret carries a gradient; on the hard environment its
    gradient is exactly 0 (L and the observations are step functions of tau)."""
    b = built
    with jax.enable_x64(True):
        ba = b.algorithms[0]
        keys = runner.seed_keys(jax.random.key(0), jnp.arange(2))
        obj = relaxed.make_objective("lazy", b.structure, ba.spec, 24, b.problem_per_seed)
        rp = relaxed.relax_params(0.1, 0.1, dtype=jnp.float64)

        def regret(u, prob):
            p = ba.params._replace(beta=jnp.exp(u[0]) * jnp.ones(1), log_trigger=jnp.exp(u[1]))
            return obj(p, rp, keys, prob, ba.move_cost)[1].prediction_regret.mean()

        u0 = jnp.array([np.log(0.5), np.log(np.log(2.0))])
        g = np.asarray(jax.jit(jax.grad(regret))(u0, smooth))
        f = jax.jit(regret)
        h = 1e-6
        fd = np.array([(f(u0.at[i].add(h), smooth) - f(u0.at[i].add(-h), smooth)) / (2 * h)
                       for i in range(2)])
    assert np.all(np.isfinite(g)) and np.min(np.abs(fd)) > 1e-3, fd  # a real gradient
    np.testing.assert_allclose(g, fd, rtol=1e-4)


@pytest.mark.parametrize("solver", [
    ["problem.features=linear", "agent.solver=vertex"],
    pytest.param(["agent.pgd_steps=10"], marks=pytest.mark.slow),  # the config's PGD (~1 min)
], ids=["vertex", "pgd"])
def test_tune_cli_on_section7_3(tmp_path, solver):
    """``gsjax tune section7_3`` (no longer refused) writes the schema, and its autodiff
    gradient agrees with central differences (``gradient_check``; with the config's PGD solver
    this checks the unrolled soft PGD)."""
    out = tmp_path / "out"
    sets = ["problem.adult.gap_estimator=signed", "relaxed.block=24", "relaxed.temperature=0.1",
            "relaxed.solve_temperature=0.1", *solver]
    argv = ["tune", "section7_3", "--params", "beta,trigger", "--steps", "1", "--seeds", "2",
            "--heldout-seeds", "2", "--horizon", "24", "--out", str(out), "--quiet"]
    for s in sets:
        argv += ["--set", s]
    assert cli.main(argv) == 0
    res = json.loads((out / "tune.json").read_text())
    assert set(res) == {"params", "objective", "heldout_hard", "gradient_check"}
    assert res["params"]["beta"]["initial"] == pytest.approx(1.0)
    assert res["params"]["trigger"]["initial"] == pytest.approx(2.0)
    for block in ("objective", "heldout_hard"):
        for when in ("initial", "final"):
            assert set(res[block][when]) == {"mean", "stderr"}
            assert np.isfinite(res[block][when]["mean"])
    assert res["objective"]["final"]["mean"] <= res["objective"]["initial"]["mean"]
    trace = json.loads((out / "trace.json").read_text())
    meta = trace["meta"]
    assert meta["relaxed"]["loss_bandwidth"] == 0.01
    assert np.min(np.abs(meta["gradient_check"]["finite_difference"])) > 1e-3
    assert res["gradient_check"]["max_rel_error"] < 1e-3


def test_tune_runs_the_joint_estimator_on_a_factor_graph(tmp_path):
    """Every algorithm has a relaxed form: the joint estimator on the factor environment is
    tuned like the others, its autodiff gradient agreeing with central finite differences."""
    out = tmp_path / "o"
    assert cli.main(["tune", "figure2_joint", "--params", "beta,trigger", "--algorithm",
                     "joint_lazy", "--steps", "1", "--seeds", "2", "--heldout-seeds", "2",
                     "--horizon", "24", "--set", "problem.factor.num_nodes=3", "--set",
                     "relaxed.block=6", "--out", str(out), "--quiet"]) == 0
    res = json.loads((out / "tune.json").read_text())
    for block in ("objective", "heldout_hard"):
        assert all(np.isfinite(res[block][w]["mean"]) for w in ("initial", "final"))
    assert res["gradient_check"]["max_rel_error"] < 1e-3
    meta = json.loads((out / "trace.json").read_text())["meta"]
    assert np.min(np.abs(meta["gradient_check"]["finite_difference"])) > 1e-6
