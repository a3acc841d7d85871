"""gsjax.oco (paper Section 6): Randomized Lazy OGD against independent references.

Every check compares with something computed here independently: a float64 NumPy loop of the
algorithm (fed the coins re-derived from the documented key rule), closed forms, brute force
over a grid, or a binomial bound.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import checkpoint, cli
from gsjax.config import ConfigError
from gsjax.oco import OCOParams, OCOSpec, make, make_problem, step_size
from gsjax.oco import runner
from gsjax.oco.config import config_kind, load_oco_config, parse_oco_config
from gsjax.oco.experiment import run_and_write
from gsjax.oco.problem import best_fixed_l1, best_fixed_squared, gradient_bounds
from gsjax.runner import NonFiniteFeedback

REPO = Path(__file__).resolve().parent.parent
OCO_CONFIGS = sorted(p for p in (REPO / "configs").glob("section6_*.toml"))


def _params(p, eta, k, dtype=jnp.float64):
    """OCOParams for a list of budget points: p, eta scalars or (k,) rows."""
    b = lambda v: jnp.asarray(np.broadcast_to(np.asarray(v, np.float64)[..., None]  # noqa: E731
                                              if np.ndim(v) == 1 else np.asarray(v), (len(v), k)),
                              dtype)
    return OCOParams(p=b(p), eta=b(eta))


def _sweep(spec, name, p, eta, horizon, seeds, low=0.0, high=1.0, weight=1.0, drift=0.05,
           s0=0.5, record=0):
    prob = make_problem(spec, s0, low, high, weight, drift, jnp.float64)
    params = _params(p, eta, spec.num_components)
    return runner.sweep(jax.random.key(0), np.arange(seeds), make(name, spec), spec, prob,
                        params, horizon, record, seeds)


# --------------------------------------------------------------------------- references


def _round_keys(seed, horizon, j):
    """fold_in(fold_in(fold_in(root, seed), t), j) for t = 1..T: the documented key rule."""
    seed_key = jax.random.fold_in(jax.random.key(0), seed)
    ts = jnp.arange(1, horizon + 1, dtype=jnp.uint32)
    return jax.vmap(lambda t: jax.random.fold_in(jax.random.fold_in(seed_key, t), j))(ts)


def _coins(seed, horizon, p, shape):
    """The coins u_t < p, u_t uniform from the round's act key (j = 1)."""
    u = jax.vmap(lambda k: jax.random.uniform(k, shape, jnp.float64))(_round_keys(seed, horizon, 1))
    return np.asarray(u) < np.asarray(p)


def _coin_targets(seed, horizon, low, high, n):
    """z_t in {low, high} from the round's environment key (j = 0)."""
    heads = jax.vmap(lambda k: jax.random.bernoulli(k, 0.5, (n,)))(_round_keys(seed, horizon, 0))
    return np.where(np.asarray(heads), high, low).astype(np.float64)


def _numpy_lazy_ogd(loss, coins, eta, k, d, horizon, s0, low, high, weight, targets, adversary,
                    given_z=None):
    """Float64 loop: Randomized Lazy OGD with given coins (T, k); returns totals per component."""
    n = k * d
    w = np.full(n, s0, np.float64)
    s = w.copy()
    low, high, weight = (np.broadcast_to(np.asarray(v, np.float64), (n,)) for v in (low, high, weight))
    eta_n = np.repeat(np.asarray(eta, np.float64), d)
    f = (lambda u: u * u) if loss == "squared" else np.abs
    df = (lambda u: 2.0 * u) if loss == "squared" else np.sign
    sum_s = np.zeros(n)
    zs, ss, ws = [], [], []
    L = np.zeros(n)
    VL = np.zeros(n)
    move = np.zeros(n)
    changes = np.zeros(k, int)
    for t in range(1, horizon + 1):
        sum_s = sum_s + s
        if targets == "adversarial":
            ref = s if adversary == "previous" else sum_s / t
            z = np.where(ref >= (low + high) / 2, low, high)
        else:
            z = given_z[t - 1]
        mask = np.repeat(coins[t - 1], d)
        s_new = np.where(mask, w, s)
        L += weight * f(s_new - z)
        VL += weight * f(w - z)
        move += np.abs(s_new - s)
        changes += (s_new != s).reshape(k, d).any(-1)
        w = np.clip(w - eta_n * weight * df(w - z), 0.0, 1.0)
        s = s_new
        zs.append(z)
        ss.append(s.copy())
        ws.append(w.copy())
    zs = np.asarray(zs)
    if loss == "squared":
        s_star = np.clip(zs.mean(0), 0.0, 1.0)
    else:
        s_star = np.clip(np.sort(zs, axis=0)[(horizon - 1) // 2], 0.0, 1.0)
    L_star = (weight * f(s_star - zs)).sum(0)
    comp = lambda x: x.reshape(k, d).sum(-1)  # noqa: E731
    return dict(loss_regret=comp(L - L_star), virtual_regret=comp(VL - L_star),
                movement=comp(move), switches=coins.sum(0), changes=changes, s_star=s_star,
                s=np.asarray(ss), w=np.asarray(ws))


# --------------------------------------------------------------------------- tests


def test_p_one_is_plain_ogd_exactly(x64):
    spec = OCOSpec(loss="squared", targets="drift", num_components=2, block_dim=2)
    eta = [0.05, 0.013]
    ogd = _sweep(spec, "ogd", [1.0, 1.0], eta, 60, 4, record=1)
    for name in ("lazy_ogd", "componentwise_lazy_ogd"):
        lazy = _sweep(spec, name, [1.0, 1.0], eta, 60, 4, record=1)
        for a, b in zip(jax.tree_util.tree_leaves((ogd.result, ogd.records)),
                        jax.tree_util.tree_leaves((lazy.result, lazy.records))):
            np.testing.assert_array_equal(a, b)
    assert np.all(ogd.result.switches == 60)


@pytest.mark.parametrize("loss,targets,adversary,name", [
    ("squared", "adversarial", "previous", "lazy_ogd"),
    ("l1", "adversarial", "mean", "componentwise_lazy_ogd"),
    ("squared", "coin", "previous", "componentwise_lazy_ogd"),
    ("l1", "coin", "previous", "lazy_ogd"),
])
def test_matches_numpy_float64_reference_step_for_step(x64, loss, targets, adversary, name):
    k, d, T = 2, 2, 40
    spec = OCOSpec(loss=loss, targets=targets, adversary=adversary, num_components=k, block_dim=d)
    p = np.array([0.3, 0.7]) if name == "componentwise_lazy_ogd" else np.array([0.4, 0.4])
    eta = np.array([0.07, 0.03])
    low, high, weight = -0.2, 1.1, np.array([1.0, 0.5, 2.0, 1.5])
    seeds = 3
    out = _sweep(spec, name, [p], [eta], T, seeds, low=low, high=high, weight=weight, record=1)
    shape = (k,) if name == "componentwise_lazy_ogd" else ()
    for seed in range(seeds):
        coins = np.broadcast_to(_coins(seed, T, p if shape else p[0], shape).reshape(T, -1), (T, k))
        z = _coin_targets(seed, T, low, high, k * d) if targets == "coin" else None
        ref = _numpy_lazy_ogd(loss, coins, eta, k, d, T, 0.5, low, high, weight, targets,
                              adversary, z)
        got = jax.tree_util.tree_map(lambda a: a[seed, 0], out.result)
        for field in ("loss_regret", "virtual_regret", "movement", "s_star"):
            np.testing.assert_allclose(getattr(got, field), ref[field], rtol=1e-10, atol=1e-10,
                                       err_msg=field)
        np.testing.assert_array_equal(got.switches, ref["switches"])
        np.testing.assert_array_equal(got.changes, ref["changes"])
        np.testing.assert_allclose(out.records.s[seed, 0], ref["s"], rtol=0, atol=1e-12)
        np.testing.assert_allclose(out.records.w[seed, 0], ref["w"], rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["lazy_ogd", "componentwise_lazy_ogd"])
def test_switch_count_is_binomial_with_mean_M(x64, name):
    """Switches per seed ~ Binomial(T, p): the mean over S seeds is within 5 sd of T p =
    M, the sample variance near T p (1 - p); component-wise coins are uncorrelated."""
    T, S = 400, 512
    spec = OCOSpec(loss="squared", targets="iid", num_components=3, block_dim=1)
    ps = [[0.05, 0.05, 0.05], [0.25, 0.25, 0.25]] if name == "lazy_ogd" else [[0.02, 0.1, 0.5]]
    out = _sweep(spec, name, ps, [[0.01] * 3] * len(ps), T, S)
    sw = out.result.switches.astype(np.float64)  # (S, P, k)
    for j, prow in enumerate(ps):
        for i, p in enumerate(prow):
            x = sw[:, j, i]
            sd_mean = math.sqrt(T * p * (1 - p) / S)
            assert abs(x.mean() - T * p) < 5 * sd_mean, (p, x.mean(), T * p)
            # sample variance of S draws: relative sd ~ sqrt(2/S) (binomial ~ normal here)
            assert abs(x.var(ddof=1) / (T * p * (1 - p)) - 1) < 5 * math.sqrt(2 / S) + 0.05
    if name == "lazy_ogd":  # one coin for the whole state
        assert np.all(sw[..., 0:1] == sw)
    else:
        c = np.corrcoef(sw[:, 0, :].T)
        assert np.all(np.abs(c[np.triu_indices(3, 1)]) < 5 / math.sqrt(S))
    assert np.all(out.result.changes <= out.result.switches)


@pytest.mark.parametrize("targets", ["iid", "drift", "switch", "random_switch", "adversarial"])
def test_iterates_stay_in_the_box(x64, targets):
    """Targets outside [0,1] and large steps: s_t and w_t stay in the box, z in its range."""
    spec = OCOSpec(loss="squared", targets=targets, num_components=2, block_dim=2, switch_period=7)
    out = _sweep(spec, "componentwise_lazy_ogd", [[0.3, 0.9]], [[0.8, 2.5]], 80, 3,
                 low=-1.0, high=2.0, drift=0.7, record=1)
    for a in (out.records.s, out.records.w, out.result.s_star):
        assert np.all(a >= 0.0) and np.all(a <= 1.0)
    assert np.all(out.result.loss_regret + out.result.loss_star >= 0)


@pytest.mark.parametrize("horizon", [7, 8])
def test_best_fixed_point_against_brute_force(x64, horizon):
    """Squared: clipped mean; L1: clipped lower median (odd and even counts), targets partly
    outside the box: the exact minimiser's loss equals a fine grid's minimum (to the grid's
    resolution) and is never above it."""
    rng = np.random.default_rng(horizon)
    n = 5
    zs = rng.uniform(-0.6, 1.6, size=(horizon, n))
    zs[:, 0] = rng.uniform(1.05, 1.5, horizon)  # all above the box: s* = 1
    zs[:, 1] = rng.uniform(-0.5, -0.1, horizon)  # all below: s* = 0
    weight = rng.uniform(0.5, 2.0, n)
    grid = np.linspace(0.0, 1.0, 20001)
    sq = weight * ((grid[:, None, None] - zs[None]) ** 2).sum(1)  # (grid, n)
    l1 = weight * np.abs(grid[:, None, None] - zs[None]).sum(1)
    s_sq, loss_sq = best_fixed_squared(jnp.asarray(zs.sum(0)), jnp.asarray((zs ** 2).sum(0)),
                                       horizon, jnp.asarray(weight))
    s_l1, loss_l1 = best_fixed_l1(jnp.asarray(zs), jnp.asarray(weight))
    for s, loss, brute in ((s_sq, loss_sq, sq), (s_l1, loss_l1, l1)):
        s, loss = np.asarray(s), np.asarray(loss)
        assert np.all(loss <= brute.min(0) + 1e-9)
        assert np.all(loss >= brute.min(0) - weight * horizon * 1e-4)
        # and the loss is the objective evaluated at s
    np.testing.assert_allclose(loss_l1, weight * np.abs(np.asarray(s_l1) - zs).sum(0), rtol=1e-12)
    np.testing.assert_allclose(loss_sq, weight * ((np.asarray(s_sq) - zs) ** 2).sum(0), rtol=1e-10)
    np.testing.assert_allclose(s_sq[:2], [1.0, 0.0])
    np.testing.assert_allclose(s_l1[:2], [1.0, 0.0])


def test_l1_median_exhaustive_small_even_case(x64):
    """Even count, median interval straddling the box edge: every point of the interval's part
    in [0,1] is optimal, and the returned point is one of them (exhaustive over a grid)."""
    zs = np.array([[-0.4], [-0.1], [0.3], [0.9]])  # median interval [-0.1, 0.3]
    s, loss = best_fixed_l1(jnp.asarray(zs), jnp.ones(1))
    grid = np.linspace(0, 1, 1001)
    obj = np.abs(grid[:, None] - zs[:, 0]).sum(1)
    assert float(loss[0]) == pytest.approx(obj.min())
    assert 0.0 <= float(s[0]) <= 0.3


def test_step_rule_minimises_its_bound_and_is_ogd_at_p_one():
    D, G, T = math.sqrt(2), 2 * math.sqrt(2), 10_000
    assert step_size("lazy", T, T, D, G) == pytest.approx(D / (G * math.sqrt(T)))
    assert step_size("ogd", T, 50, D, G) == pytest.approx(D / (G * math.sqrt(T)))
    for M in (30.0, 464.0, 5000.0):
        p = M / T
        etas = np.geomspace(1e-7, 1, 200001)
        bound = D ** 2 / (2 * etas) + etas * G ** 2 * T / 2 * (2 / p - 1)
        assert step_size("lazy", T, M, D, G) == pytest.approx(etas[np.argmin(bound)], rel=1e-3)
        lam = 3.0
        bound_m = bound + lam * T * etas * math.sqrt(2) * G
        assert step_size("movement", T, M, D, G, lam, coords=2) == pytest.approx(
            etas[np.argmin(bound_m)], rel=1e-3)
    assert step_size("constant", T, 10, D, G, eta=0.2, scale=0.5) == 0.1


def test_gradient_bound_holds_on_random_points():
    spec = OCOSpec(loss="squared", num_components=2, block_dim=2)
    low, high, w = np.array([-0.5, 0, 0.2, 0]), np.array([1.0, 1.5, 0.3, 1]), np.array([1, 2, 3, .5])
    g_comp, g_all = gradient_bounds(spec, low, high, w)
    rng = np.random.default_rng(0)
    s = rng.uniform(0, 1, (20000, 4))
    z = low + (high - low) * rng.integers(0, 2, (20000, 4))  # range ends: worst cases
    g = 2 * w * (s - z)
    assert np.linalg.norm(g, axis=1).max() <= g_all + 1e-12
    assert np.linalg.norm(g[:, :2], axis=1).max() <= g_comp[0] + 1e-12


def test_a_seed_does_not_depend_on_the_batch(x64):
    spec = OCOSpec(loss="l1", targets="drift", num_components=2, block_dim=1)
    prob = make_problem(spec, 0.5, 0.0, 1.0, 1.0, 0.05, jnp.float64)
    params = _params([[0.2, 0.6]], [[0.05, 0.02]], 2)
    algo = make("componentwise_lazy_ogd", spec)
    big = runner.sweep(jax.random.key(0), np.arange(6), algo, spec, prob, params, 50).result
    small = runner.sweep(jax.random.key(0), np.array([4, 2]), algo, spec, prob, params, 50).result
    for a, b in zip(small, big):
        np.testing.assert_array_equal(a, np.asarray(b)[[4, 2]])


BAD = [
    ('kind = "oco"\nname = "x"\n[problem]\nloss = "huber"\n[algorithms.ogd]', "problem.loss"),
    ('kind = "oco"\nname = "x"\nbudget_exponents = [1.5]\n[algorithms.lazy_ogd]',
     "budget_exponents[0]"),
    ('kind = "oco"\nname = "x"\n[algorithms.lazy_ogd]\nbudget_exponents = [[0.5, 0.5]]',
     "algorithms.lazy_ogd.budget_exponents[0]"),
    ('kind = "oco"\nname = "x"\n[algorithms.componentwise_lazy_ogd]\nbudget_exponents = [[0.5]]',
     "algorithms.componentwise_lazy_ogd.budget_exponents[0]"),
    ('kind = "oco"\nname = "x"\n[algorithms.ogd]\nbudgets = [10]', "algorithms.ogd.budgets"),
    ('kind = "oco"\nname = "x"\n[algorithms.lazy_ogd]', "algorithms.lazy_ogd.budget_exponents"),
    ('kind = "oco"\nname = "x"\n[algorithms.a]\nalgorithm = "sgd"', "algorithms.a.algorithm"),
    ('kind = "oco"\nname = "x"\n[algorithms.ogd]\nstep_rule = "constant"', "algorithms.ogd.eta"),
    ('kind = "oco"\nname = "x"\n[problem]\ntarget_low = 0.6\ntarget_high = 0.4\n[algorithms.ogd]',
     "problem.target_high"),
    ('kind = "oco"\nname = "x"\nhorizon = [100, 300]\nrecord_every = 200\n[algorithms.ogd]',
     "record_every"),
    ('kind = "oco"\nname = "x"\nseeds = 0\n[algorithms.ogd]', "seeds"),
    ('kind = "oco"\nname = "x"\n[problem]\nweights = [1, 2, 3]\n[algorithms.ogd]', "problem.weights"),
    ('kind = "oco"\nname = "x"\nbogus = 1\n[algorithms.ogd]', "bogus"),
]


@pytest.mark.parametrize("text,field", BAD, ids=[f for _, f in BAD])
def test_bad_config_names_the_field(tmp_path, text, field):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_oco_config(p)
    assert e.value.field == field


def test_budget_above_horizon_is_refused_before_compute(tmp_path, capsys):
    p = tmp_path / "c.toml"
    p.write_text('kind = "oco"\nname = "x"\nhorizon = 50\n[algorithms.lazy_ogd]\nbudgets = [80]\n')
    assert cli.main(["run", str(p), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert "algorithms.lazy_ogd.budgets[0]" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_config_round_trip_and_kind():
    from gsjax.oco.config import oco_config_to_dict

    for path in OCO_CONFIGS:
        assert config_kind(path) == "oco"
        cfg = load_oco_config(path)
        assert parse_oco_config(json.loads(json.dumps(oco_config_to_dict(cfg)))) == cfg
    assert config_kind(REPO / "configs" / "section7_2.toml") == "bandit"


def test_gsjax_run_end_to_end(tmp_path, figures):
    path = REPO / "configs" / "section6_heterogeneous.toml"
    out = tmp_path / "out"
    argv = ["run", str(path), "--seeds", "2", "--horizon", "100", "--out", str(out), "--quiet"]
    assert cli.main(argv) == 0
    for f in ("config.json", "summary.json", "arrays.npz", "trajectory.png", "per_component.png"):
        assert (out / f).is_file(), f
    s = json.loads((out / "summary.json").read_text())
    cfg = load_oco_config(path)
    assert set(s["algorithms"]) == {e.name for e in cfg.algorithms}
    z = np.load(out / "arrays.npz")
    for name, a in s["algorithms"].items():
        pts = a["horizons"]["100"]
        lr = z[f"{name}/T100/loss_regret"].sum(-1)  # (S, P)
        mv = z[f"{name}/T100/movement"].sum(-1)
        for j, pt in enumerate(pts):
            assert pt["loss_regret"]["mean"] == pytest.approx(lr[:, j].mean())
            assert pt["total_regret"]["mean"] == pytest.approx(
                lr[:, j].mean() + cfg.move_cost * mv[:, j].mean())
        # M <= T and p = M / T
        np.testing.assert_allclose(z[f"{name}/T100/p"], z[f"{name}/T100/budgets"] / 100)
    assert cli.main(["check", str(path)]) == 0


TINY = [p for p in OCO_CONFIGS if p.stem != "section6_heterogeneous"]  # that one: end to end


@pytest.mark.parametrize("path", TINY, ids=[p.stem for p in TINY])
def test_every_section6_config_runs_at_a_tiny_size(path):
    from gsjax.oco.experiment import run_experiment, summarise

    cfg = load_oco_config(path, ["seeds=2", "horizon=[60, 120]", "record_seeds=0"])
    s = summarise(run_experiment(cfg))
    assert set(s["algorithms"]) == {e.name for e in cfg.algorithms}
    for a in s["algorithms"].values():
        for pts in a["horizons"].values():
            assert all(np.isfinite(pt["total_regret"]["mean"]) for pt in pts)
    assert s["fits"]  # two horizons: exponents are fitted


# --------------------------------------------------------------------------- the shared runner


def _leaves_equal(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


SHARED_CASES = [("squared", "adversarial"), ("l1", "drift")]  # L1: targets kept in the carry


def _shared_case(loss, targets):
    spec = OCOSpec(loss=loss, targets=targets, num_components=2, block_dim=2)
    prob = make_problem(spec, 0.5, -0.1, 1.2, 1.0, 0.1, jnp.float64)
    params = _params([[0.3, 0.6], [1.0, 1.0]], [[0.05, 0.02], [0.03, 0.03]], 2)
    return spec, prob, params, make("componentwise_lazy_ogd", spec)


@pytest.mark.parametrize("loss,targets", SHARED_CASES)
def test_chunked_and_resumed_sweeps_equal_the_whole_one(x64, loss, targets):
    """Chunks of 10 rounds, and a sweep resumed from the checkpoint of its third chunk, give
    the one-chunk sweep's results and records bit for bit."""
    spec, prob, params, algo = _shared_case(loss, targets)
    args = (jax.random.key(2), np.arange(3), algo, spec, prob, params, 60, 5, 2)
    whole = runner.sweep(*args)
    saved = []
    chunked = runner.sweep(*args, chunk_rounds=10,
                           on_chunk=lambda leaves, done, rec, *_: saved.append((leaves, done, rec)))
    assert [s[1] for s in saved] == [10, 20, 30, 40, 50, 60]
    ran = []
    leaves, done, _ = saved[2]  # after round 30; on_chunk hands each chunk's records
    resumed = runner.sweep(*args, chunk_rounds=10, start=(leaves, done, [s[2] for s in saved[:3]]),
                           progress=lambda done, total: ran.append(done))
    assert ran == [40, 50, 60]
    for other in (chunked, resumed):
        _leaves_equal((whole.result, whole.records), (other.result, other.records))
    assert whole.records.s.shape == (2, 2, 12, 4)  # (record seeds, points, records, n)


OCO_RESUME = """
kind = "oco"
name = "resume_oco"
seeds = 3
horizon = [40, 80]
record_every = 4
record_seeds = 2
budget_exponents = [0.5, 1.0]
[problem]
loss = "{loss}"
targets = "{targets}"
num_components = 2
[algorithms.lazy_ogd]
[algorithms.ogd]
"""


def test_interrupted_run_resumed_by_the_cli_equals_uninterrupted(tmp_path, capsys,
                                                                compile_cache):
    """Stopped after a checkpoint (mid-way through the third run), ``gsjax run --resume``
    finishes it with the uninterrupted run's arrays and summary, bit for bit (L1 loss: the
    targets kept in the carry go through the checkpoint too)."""
    path = tmp_path / "c.toml"
    path.write_text(OCO_RESUME.format(loss="l1", targets="drift"))
    cfg = load_oco_config(path)
    quiet = lambda *a, **k: None  # noqa: E731
    ref = run_and_write(cfg, tmp_path / "ref", log=quiet, figures=False, chunk_rounds=8)

    def stop_mid_way(name, horizon, seeds):
        def update(done, total):
            if name == "lazy_ogd/T80" and done == 24:
                raise KeyboardInterrupt
        return update

    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        run_and_write(cfg, out, log=quiet, figures=False, chunk_rounds=8, progress=stop_mid_way)
    ck = checkpoint.load(out, runner.SweepOutput,
                         {"result": runner.OCOResult, "records": runner.OCORecords})
    assert sorted(ck["completed"]) == ["lazy_ogd/T40", "ogd/T40"]
    assert (ck["current"], ck["rounds_done"]) == ("lazy_ogd/T80", 24)
    assert not (out / "summary.json").exists()
    capsys.readouterr()
    assert cli.main(["run", "--resume", str(out), "--chunk", "8"]) == 0
    assert (f"resuming from {out}: lazy_ogd/T40, ogd/T40 done, lazy_ogd/T80 at round 24"
            in capsys.readouterr().out)
    assert not (out / checkpoint.FILENAME).exists()
    want, got = np.load(tmp_path / "ref" / "arrays.npz"), np.load(out / "arrays.npz")
    assert sorted(want.files) == sorted(got.files)
    for key in want.files:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    summary = json.loads((out / "summary.json").read_text())
    for part in ("algorithms", "fits", "tradeoff"):  # as JSON: a nan stderr equals itself
        assert json.dumps(summary[part]) == json.dumps(ref[part]), part


def test_resume_refuses_another_configs_checkpoint(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(OCO_RESUME.format(loss="squared", targets="adversarial"))
    out = tmp_path / "out"

    def stop(name, horizon, seeds):
        def update(done, total):
            raise KeyboardInterrupt
        return update

    with pytest.raises(KeyboardInterrupt):
        run_and_write(load_oco_config(path), out, log=lambda *a: None, figures=False,
                      chunk_rounds=8, progress=stop)
    other = load_oco_config(path, ["seeds=4"])
    with pytest.raises(ConfigError) as e:
        run_and_write(other, out, log=lambda *a: None, figures=False, chunk_rounds=8)
    assert e.value.field == "<resume>"


def test_bad_chunk_is_refused_by_the_cli(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text(OCO_RESUME.format(loss="squared", targets="adversarial"))
    argv = ["run", str(path), "--out", str(tmp_path / "o"), "--quiet", "--chunk", "6"]
    assert cli.main(argv) == 2
    assert "--chunk" in capsys.readouterr().err


def test_nonfinite_target_names_the_seed_and_round(x64):
    """A random walk whose step overflows to inf (drift near the float64 maximum) makes the
    reflected target NaN; the sweep stops at the end of that chunk, before checkpointing it,
    naming the global seed id and the round found here from the documented key rule."""
    spec = OCOSpec(loss="squared", targets="drift", num_components=2, block_dim=1)
    drift = np.finfo(np.float64).max / 2.5  # a step overflows when |xi| > ~2.5
    prob = make_problem(spec, 0.5, 0.0, 1.0, 1.0, drift, jnp.float64)
    seed_ids, T = np.array([5, 6, 7]), 80
    first = []
    for seed in seed_ids:
        keys = _round_keys(int(seed), T, 0)
        xi = np.asarray(jax.vmap(lambda k: jax.random.normal(k, (2,), jnp.float64))(keys))
        with np.errstate(over="ignore"):
            bad = np.flatnonzero(np.isinf(drift * xi).any(-1))
        first.append(bad[0] + 1 if len(bad) else T + 1)
    want = int(np.argmin(first))
    assert first[want] <= T, "no overflow in this horizon: pick another drift"
    saved = []
    with pytest.raises(NonFiniteFeedback) as e:
        runner.sweep(jax.random.key(0), seed_ids, make("lazy_ogd", spec), spec, prob,
                     _params([0.5], [0.05], 2), T, 5, 3, chunk_rounds=5,
                     on_chunk=lambda leaves, done, rec, *_: saved.append(done))
    assert (e.value.seed_id, e.value.round) == (int(seed_ids[want]), first[want])
    assert f"seed {seed_ids[want]}" in str(e.value) and f"round {first[want]}" in str(e.value)
    assert all(done < first[want] for done in saved)
    assert len(saved) == (first[want] - 1) // 5 > 0  # the chunks before it were saved


SHARDED = """
import json, jax, jax.numpy as jnp, numpy as np
from gsjax.oco import OCOParams, OCOSpec, make, make_problem, runner
assert jax.device_count() == 2, jax.devices()
jax.config.update("jax_enable_x64", True)
out = {}
for loss, targets in (("squared", "adversarial"), ("l1", "drift")):
    spec = OCOSpec(loss=loss, targets=targets, num_components=2, block_dim=2)
    prob = make_problem(spec, 0.5, -0.1, 1.2, 1.0, 0.1, jnp.float64)
    params = OCOParams(p=jnp.asarray([[0.3, 0.6], [1.0, 1.0]]), eta=jnp.full((2, 2), 0.04))
    # 3 seeds: not a multiple of 2, so the padding is exercised
    args = (jax.random.key(1), np.arange(3), make("componentwise_lazy_ogd", spec), spec, prob,
            params, 40, 5, 3)
    a = runner.sweep(*args, chunk_rounds=10, shard=False)
    b = runner.sweep(*args, chunk_rounds=10, shard=True)
    la, lb = (jax.tree_util.tree_leaves((r.result, r.records)) for r in (a, b))
    out[loss] = [bool(np.array_equal(x, y)) for x, y in zip(la, lb)]
print(json.dumps(out))
"""


def test_sharded_sweep_equals_unsharded_on_two_devices():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    proc = subprocess.run([sys.executable, "-c", SHARDED], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(out) == {"squared", "l1"}
    for loss, same in out.items():
        assert same and all(same), (loss, same)
