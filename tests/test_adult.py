"""Section 7.3: the UCI Adult data, the classifier, the threshold environment and its config.

Every expected value is computed here independently (NumPy float64 counting, brute force over
a grid, statistical bounds), never copied from an output of the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import adult, cli, experiment, fairness, graphs
from gsjax import problem as P
from gsjax.config import ConfigError, load_config, parse_config

REPO = Path(__file__).resolve().parent.parent
RAW = REPO.parent / "shared" / "data" / "adult"
CONFIG = REPO / "configs" / "section7_3.toml"


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------


def test_shipped_data_row_counts_and_citation():
    table = adult.load()
    assert table.num_train == 30162
    assert table.num_rows - table.num_train == 15060
    assert table.num_rows == 45222
    for name, col in table.columns.items():
        assert col.shape == (45222,), name
        assert col.dtype.itemsize <= 4, name
    assert set(table.categories["sex"]) == {"Female", "Male"}
    # adult.names: P(>50K) = 23.93 % over all 48,842 rows, 24.78 % without unknowns.
    y = table.columns["income"]
    assert abs(y.mean() - 0.2478) < 5e-5
    with np.load(adult.shipped_path(), allow_pickle=False) as z:
        assert "10.24432/C5XW20" in str(z["source"]) and "CC BY 4.0" in str(z["source"])
    assert adult.shipped_path().stat().st_size < 400 * 1024


@pytest.mark.skipif(not RAW.is_dir(), reason="raw UCI Adult files not on this machine")
def test_raw_files_parse_to_the_shipped_arrays():
    shipped, raw = adult.load(), adult.load(RAW)
    assert raw.num_train == shipped.num_train
    assert raw.categories == shipped.categories
    assert raw.columns.keys() == shipped.columns.keys()
    for name in shipped.columns:
        assert raw.columns[name].dtype == shipped.columns[name].dtype, name
        np.testing.assert_array_equal(raw.columns[name], shipped.columns[name], err_msg=name)
    # Independent count of complete rows straight from the text files.
    def complete(path, skip):
        lines = path.read_text().splitlines()[skip:]
        return sum(1 for ln in lines if ln.strip() and "?" not in ln)

    assert complete(RAW / "adult.data", 0) == 30162
    assert complete(RAW / "adult.test", 1) == 15060


# ---------------------------------------------------------------------------
# Classifier
# ---------------------------------------------------------------------------


def test_classifier_accuracy_and_determinism():
    clf = adult.train_logistic_regression(seed=0, steps=200, l2=1e-4)
    table = adult.load()
    scores, labels, male = adult.held_out_scores(clf, table)
    assert scores.shape == (15060,) and scores.dtype == np.float32
    acc = np.mean((scores.astype(np.float64) >= 0.5) == labels)
    assert acc >= 0.84, acc  # logistic regression on Adult: about 0.85
    assert abs(acc - clf.test_accuracy) < 1e-12
    # Same key, same weights (recomputed, not from the in-memory cache).
    X, y = adult.encode(table)
    n = table.num_train
    p1, _ = adult._fit_jit(jnp.asarray(X[:n]), jnp.asarray(y[:n]), jax.random.key(0), 30, 1e-4)
    p2, _ = adult._fit_jit(jnp.asarray(X[:n]), jnp.asarray(y[:n]), jax.random.key(0), 30, 1e-4)
    np.testing.assert_array_equal(np.asarray(p1["w"]), np.asarray(p2["w"]))
    # The features are standardised with training statistics only.
    num = X[:n, -len(adult.NUMERIC):].astype(np.float64)
    np.testing.assert_allclose(num.mean(0), 0.0, atol=1e-4)
    np.testing.assert_allclose(num.std(0), 1.0, atol=1e-4)


# ---------------------------------------------------------------------------
# The exact loss and its minimiser on hand-made fixtures
# ---------------------------------------------------------------------------


def _fixture(n=60, seed=0, ties=True):
    rng = np.random.default_rng(seed)
    scores = rng.uniform(0, 1, n)
    if ties:
        scores = np.round(scores, 1)  # many equal scores, and exact 0.0 / 1.0
    labels = rng.uniform(size=n) < scores  # higher scores more often positive
    male = rng.uniform(size=n) < 0.6
    return scores.astype(np.float32), labels, male


def _numpy_loss(scores, labels, male, tau):
    """L(tau) by direct counting in float64, written independently of gsjax."""
    s = scores.astype(np.float64)
    pred = s >= float(np.float32(tau))
    acc = np.mean(pred == labels)
    tprs = []
    for g in (male, ~male):
        pos = labels & g
        tprs.append(np.sum(pred & pos) / pos.sum() if pos.sum() else 0.0)
    return (1 - acc) + abs(tprs[0] - tprs[1])


@pytest.mark.parametrize("ties", [True, False])
def test_exact_loss_matches_numpy_on_a_fixture(ties):
    scores, labels, male = _fixture(ties=ties)
    data = fairness.make_data(scores, labels, male, jnp.float32)
    taus = np.concatenate([np.linspace(0, 1, 101), np.unique(scores), [0.0, 1.0]])
    got = jax.vmap(lambda t: fairness.exact_loss(data, t))(jnp.asarray(taus, jnp.float32))
    want = np.array([_numpy_loss(scores, labels, male, t) for t in taus])
    np.testing.assert_allclose(np.asarray(got, np.float64), want, atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_minimiser_against_brute_force(seed):
    scores, labels, male = _fixture(n=80, seed=seed, ties=seed == 0)
    u, table = fairness.loss_table(scores, labels, male)
    tau, loss, (lo, hi) = fairness.exact_minimiser(u, table)
    grid = np.linspace(0, 1, 20001)
    brute = np.array([_numpy_loss(scores, labels, male, t) for t in grid])
    assert 0.0 <= tau <= 1.0 and lo <= tau <= hi
    assert abs(_numpy_loss(scores, labels, male, tau) - loss) < 1e-12
    assert loss <= brute.min() + 1e-12  # nothing on the grid beats it
    # The grid is fine enough here to land in the best interval.
    assert abs(brute.min() - loss) < 1e-12


def test_adult_problem_s_star_is_the_exact_minimum():
    _, problem = _adult_problem()
    d = problem.env_data
    scores, labels, male = (np.asarray(x) for x in (d.scores, d.labels, d.male))
    tau = float(problem.s_star[0])
    at_star = _numpy_loss(scores, labels, male, tau)
    assert abs(at_star - float(problem.loss_star)) < 1e-6
    # No "predict positive iff score >= c" rule, over every distinct score c, does better:
    # cumulative counts over the sorted scores, in float64.
    cand = np.unique(scores)
    order = np.argsort(scores)
    ss, ll, mm = scores[order], labels[order], male[order]
    above = lambda mask: mask.sum() - np.searchsorted(ss[mask], cand, side="left")  # noqa: E731
    tp_m, tp_f, fp = above(ll & mm), above(ll & ~mm), above(~ll)
    fn = ll.sum() - tp_m - tp_f
    err_all = (fp + fn) / len(ss) + np.abs(tp_m / (ll & mm).sum() - tp_f / (ll & ~mm).sum())
    assert float(problem.loss_star) <= err_all.min() + 1e-6
    assert abs(tau - 0.85) < 0.1  # our classifier's optimum lies in the paper's "fair region"


def test_adult_problem_holds_no_linear_model_arrays():
    """No noise scales or random Fourier features: the loss and its noise come from the data;
    theta* (never read) is zero, one row of the quadratic features' 3 entries."""
    _, problem = _adult_problem()
    assert problem.noise_sigma is None
    assert problem.rff_omega is None and problem.rff_phase is None
    np.testing.assert_array_equal(np.asarray(problem.theta), np.zeros((1, 3), np.float32))


# ---------------------------------------------------------------------------
# Batch feedback
# ---------------------------------------------------------------------------


def _adult_problem(batch_size=100, estimator="plain"):
    scopes = graphs.block_scopes(1, 1)
    st = P.make_structure(scopes, "quadratic", "independent")
    return fairness.make_adult_problem(st, scopes, batch_size=batch_size,
                                       gap_estimator=estimator)


def _terms(data, B, tau, num, estimator="plain"):
    """Per-draw (error rate, gap estimate) of ``num`` batches, recomputed on the host."""
    spec = fairness.FairnessSpec(B, estimator)
    keys = jax.random.split(jax.random.key(7), num)
    y = jax.jit(jax.vmap(lambda k: fairness.batch_loss(k, spec, data, jnp.float32(tau))))(keys)
    idx = jax.vmap(lambda k: jax.random.randint(k, (B,), 0, data.scores.shape[0]))(keys)
    idx = np.asarray(idx)
    scores, labels = np.asarray(data.scores)[idx], np.asarray(data.labels)[idx]
    err = np.mean((scores >= np.float32(tau)) != labels, axis=1)
    return np.asarray(y, np.float64), err


def test_batch_error_rate_is_unbiased():
    """Mean over 20k batches of the error term within 4 standard errors of the full-data one."""
    _, problem = _adult_problem()
    d = problem.env_data
    scores, labels, male = (np.asarray(x) for x in (d.scores, d.labels, d.male))
    for tau in (0.3, 0.85):
        y, err = _terms(d, 50, tau, 20000, "plain")
        full_err = np.mean((scores >= np.float32(tau)) != labels)
        se = err.std(ddof=1) / np.sqrt(err.size)
        assert abs(err.mean() - full_err) < 4 * se, (tau, err.mean(), full_err, se)
        # The observed loss is this error plus the plain gap (>= 0) of the same batch.
        assert np.all(y - err >= -1e-6)


def test_plain_gap_is_biased_and_signed_is_not():
    """E|X| >= |EX|: the plain estimate overshoots L; the signed one is unbiased where D >= 0."""
    _, problem = _adult_problem()
    d = problem.env_data
    scores, labels, male = (np.asarray(x) for x in (d.scores, d.labels, d.male))
    tau = 0.85
    err, tpr_m, tpr_f = fairness.loss_terms(scores, labels, male, tau)
    assert tpr_m >= tpr_f  # so the signed estimator targets L here
    L = _numpy_loss(scores, labels, male, tau)
    n = 20000
    plain, _ = _terms(d, 50, tau, n, "plain")
    signed, _ = _terms(d, 50, tau, n, "signed")
    split, _ = _terms(d, 50, tau, n, "split")
    se = lambda x: x.std(ddof=1) / np.sqrt(n)  # noqa: E731
    assert plain.mean() - L > 10 * se(plain)  # clearly biased upwards
    assert abs(signed.mean() - L) < 4 * se(signed)  # unbiased within 4 standard errors
    assert abs(signed.mean() - L) < abs(plain.mean() - L)
    assert split.mean() - L < 4 * se(split)  # the split estimator never overshoots
    assert abs(split.mean() - L) < abs(plain.mean() - L)


def test_observe_dispatches_and_vmaps_over_seeds():
    st, problem = _adult_problem(batch_size=64)
    s = jnp.full((1,), 0.6, jnp.float32)
    keys = jax.random.split(jax.random.key(0), 5)
    fb = jax.vmap(lambda k: P.observe(P.round_draws(k, 1), st, problem, s))(keys)
    assert fb.y.shape == (5, 1) and fb.expected_loss.shape == (5,)
    d = problem.env_data
    want = _numpy_loss(*(np.asarray(x) for x in (d.scores, d.labels, d.male)), 0.6)
    np.testing.assert_allclose(np.asarray(fb.expected_loss), want, atol=1e-6)
    # A seed's feedback does not depend on the batch of seeds around it.
    one = P.observe(P.round_draws(keys[3], 1), st, problem, s)
    np.testing.assert_array_equal(np.asarray(one.y), np.asarray(fb.y[3]))


# ---------------------------------------------------------------------------
# Config and end to end
# ---------------------------------------------------------------------------


def _raw_cfg(**adult_over):
    return {
        "name": "a",
        "problem": {
            "structure": "blocks", "num_blocks": 1, "block_dim": 1, "features": "quadratic",
            "environment": "adult", "adult": {"batch_size": 32, **adult_over},
        },
        "agent": {"solver": "pgd"},
        "algorithms": {"linucb": {}, "lazy": {}},
    }


@pytest.mark.parametrize("mutate, field", [
    (lambda r: r["problem"]["adult"].update(batch_size=0), "problem.adult.batch_size"),
    (lambda r: r["problem"]["adult"].update(gap_estimator="x"), "problem.adult.gap_estimator"),
    (lambda r: r["problem"]["adult"].update(batch_size=1, gap_estimator="split"),
     "problem.adult.batch_size"),
    (lambda r: r["problem"]["adult"].update(classifier_steps=0), "problem.adult.classifier_steps"),
    (lambda r: r["problem"]["adult"].update(classifier_l2=-1.0), "problem.adult.classifier_l2"),
    (lambda r: r["problem"]["adult"].update(bogus=1), "problem.adult.bogus"),
    (lambda r: r["problem"]["adult"].update(raw_data="/nonexistent"), "problem.adult.raw_data"),
    (lambda r: r["problem"].update(num_blocks=2), "problem.num_blocks"),
    (lambda r: r["problem"].update(block_dim=3), "problem.block_dim"),
    (lambda r: r["problem"].update(noise={"sigma": 0.1}), "problem.noise"),
    (lambda r: r["problem"].update(environment="mnist"), "problem.environment"),
    (lambda r: r["problem"].update(environment="linear"), "problem.adult"),
])
def test_bad_adult_configs_name_the_field(mutate, field):
    raw = _raw_cfg()
    mutate(raw)
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    assert e.value.field == field, e.value


def test_adult_features_default_to_quadratic():
    raw = _raw_cfg()
    del raw["problem"]["features"]
    assert parse_config(raw).problem.features == "quadratic"
    raw["agent"] = {}  # the vertex solver is exact only for linear features
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    assert e.value.field == "agent.solver"


def test_adult_config_round_trips():
    from gsjax.config import config_to_dict

    cfg = load_config(CONFIG)
    assert cfg.problem.environment == "adult"
    assert parse_config(config_to_dict(cfg)) == cfg
    assert cfg.seeds == 10


def test_section7_3_config_runs_end_to_end(tmp_path, figures):
    out = tmp_path / "run"
    assert cli.main(["run", str(CONFIG), "--seeds", "2", "--horizon", "20", "--set",
                     "record_every=2", "--out", str(out), "--quiet"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert set(s["algorithms"]) == {"linucb", "lazy"}
    meta = s["meta"]["adult"]
    assert meta["classifier_test_accuracy"] >= 0.84
    z = np.load(out / "arrays.npz")
    for name in ("linucb", "lazy"):
        act = z[f"{name}/action"]
        assert act.shape == (2, 10, 1) and np.all((act >= 0) & (act <= 1))
        assert z[f"{name}/totals/prediction_regret"].min() >= 0.0  # tau* is the exact minimum
        assert s["algorithms"][name]["final_state"]["mean"][0] == pytest.approx(act[:, -1, 0].mean())
    assert s["algorithms"]["linucb"]["total_updates"]["mean"] == 20
    assert (out / "threshold.png").is_file()
