"""Ridge statistics (gsjax.linalg) against float64 NumPy, float32 drift, trigger counts."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import graphs, linalg, runner
from gsjax import problem as P
from gsjax.algorithms import AgentParams, AgentSpec, make


def _np_gram_path(lam: float, xs: np.ndarray) -> np.ndarray:
    """(N, d, d) float64 Gram matrices lam I + cumulative sum of outer products."""
    d = xs.shape[1]
    outer = xs[:, :, None] * xs[:, None, :]
    return lam * np.eye(d) + np.cumsum(outer, axis=0)


def _scan_updates(stats, xs, ys, refresh_every):
    """Scan linalg.update over (xs, ys); refresh None = never, 1 = always (Python bool)."""

    def body(st, inp):
        t, x, y = inp
        if refresh_every is None:
            flag = False
        elif refresh_every == 1:
            flag = True
        else:
            flag = (t % refresh_every) == 0
        st = linalg.update(st, x, y, flag)
        return st, (st.logdet, st.inv)

    ts = jnp.arange(1, xs.shape[0] + 1)
    return jax.lax.scan(body, stats, (ts, xs, ys))


# --------------------------------------------------------------------------------------------
# float64 exactness
# --------------------------------------------------------------------------------------------


def test_init_is_the_prior(x64):
    lam, d = 0.37, 3
    st = linalg.init(jnp.asarray(lam), d, jnp.float64)
    np.testing.assert_allclose(linalg.gram(st), lam * np.eye(d), rtol=1e-15)
    np.testing.assert_array_equal(st.data_gram, np.zeros((d, d)))
    np.testing.assert_allclose(st.inv, np.eye(d) / lam, rtol=1e-15)
    np.testing.assert_allclose(st.b, 0.0)
    np.testing.assert_allclose(st.logdet, np.linalg.slogdet(lam * np.eye(d))[1], rtol=1e-14)


@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_sherman_morrison_and_logdet_lemma_match_numpy(x64, d):
    """200 incremental rank-one updates (no refresh) vs np.linalg.inv / slogdet of the sum."""
    rng = np.random.default_rng(d)
    n_upd, lam = 200, 0.5
    xs = rng.normal(size=(n_upd, d))
    ys = rng.normal(size=n_upd)
    st0 = linalg.init(jnp.asarray(lam), d, jnp.float64)
    final, (logdets, invs) = jax.jit(lambda s, x, y: _scan_updates(s, x, y, None))(
        st0, jnp.asarray(xs), jnp.asarray(ys)
    )
    grams = _np_gram_path(lam, xs)
    ref_logdet = np.linalg.slogdet(grams)[1]
    ref_inv = np.linalg.inv(grams)
    np.testing.assert_allclose(np.asarray(logdets), ref_logdet, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(np.asarray(invs), ref_inv, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(linalg.gram(final), grams[-1], rtol=1e-13)
    np.testing.assert_allclose(final.b, (xs * ys[:, None]).sum(0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        linalg.theta_hat(final), np.linalg.solve(grams[-1], final.b), rtol=1e-8, atol=1e-10
    )
    # Symmetric by construction (symmetrised every step).
    np.testing.assert_array_equal(np.asarray(final.inv), np.asarray(final.inv).T)


def test_single_rank_one_step(x64):
    rng = np.random.default_rng(7)
    a = rng.normal(size=(4, 4))
    v = a @ a.T + 0.3 * np.eye(4)
    x = rng.normal(size=4)
    inv_new = linalg.sherman_morrison(jnp.asarray(np.linalg.inv(v)), jnp.asarray(x))
    np.testing.assert_allclose(inv_new, np.linalg.inv(v + np.outer(x, x)), rtol=1e-10, atol=1e-12)
    inc = linalg.logdet_increment(jnp.asarray(np.linalg.inv(v)), jnp.asarray(x))
    expected = np.linalg.slogdet(v + np.outer(x, x))[1] - np.linalg.slogdet(v)[1]
    np.testing.assert_allclose(inc, expected, rtol=1e-12)


@pytest.mark.parametrize("d", [1, 2, 3, 6])
def test_refresh_matches_numpy(x64, d):
    rng = np.random.default_rng(10 + d)
    a = rng.normal(size=(d, 2 * d))
    gram = a @ a.T + 0.05 * np.eye(d)
    inv, logdet = linalg.refresh(jnp.asarray(a @ a.T), jnp.asarray(0.05))
    assert inv.shape == (d, d) and logdet.shape == ()
    np.testing.assert_allclose(inv, np.linalg.inv(gram), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(logdet, np.linalg.slogdet(gram)[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(inv), np.asarray(inv).T, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("mode", ["python_true", "python_false", "traced_true", "traced_false"])
def test_update_refresh_flag(x64, mode):
    """do_refresh True recomputes from the Gram matrix; False advances the (poisoned) inverse.

    The stored inverse and log-det are deliberately WRONG: the refresh path must ignore them
    (result = NumPy's inverse of the new Gram matrix), the incremental path must carry them
    (result = Sherman-Morrison applied to the poisoned inverse, computed here in NumPy).
    """
    d, lam = 3, 0.8
    rng = np.random.default_rng(3)
    xs = rng.normal(size=(5, d))
    gram = lam * np.eye(d) + xs.T @ xs
    poison_inv = np.linalg.inv(gram) + 0.1 * np.eye(d)
    poison_logdet = 123.0
    st = linalg.RidgeStats(
        data_gram=jnp.asarray(xs.T @ xs), lam=jnp.asarray(lam), inv=jnp.asarray(poison_inv),
        b=jnp.zeros(d),
        logdet=jnp.asarray(poison_logdet),
    )
    x, y = rng.normal(size=d), 0.7
    refresh = mode.endswith("true")
    if mode.startswith("python"):
        out = linalg.update(st, jnp.asarray(x), jnp.asarray(y), refresh)
    else:
        out = jax.jit(lambda s, f: linalg.update(s, jnp.asarray(x), jnp.asarray(y), f))(
            st, jnp.asarray(refresh)
        )
    new_gram = gram + np.outer(x, x)
    np.testing.assert_allclose(linalg.gram(out), new_gram, rtol=1e-14)
    np.testing.assert_allclose(out.b, x * y, rtol=1e-14)
    if refresh:
        np.testing.assert_allclose(out.inv, np.linalg.inv(new_gram), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(out.logdet, np.linalg.slogdet(new_gram)[1], rtol=1e-12)
    else:
        u = poison_inv @ x
        sm = poison_inv - np.outer(u, u) / (1.0 + x @ u)
        np.testing.assert_allclose(out.inv, 0.5 * (sm + sm.T), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(out.logdet, poison_logdet + np.log1p(x @ poison_inv @ x),
                                   rtol=1e-12)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_statistics_without_a_carried_inverse(x64, d):
    """``carry_inverse=False``: no ``inv`` in the statistics; after 30 updates ``inverse``,
    ``theta_hat`` and ``logdet`` equal NumPy's on the Gram sums, and the carried form's
    (refreshed every update) to rounding; an update that asks not to refresh is refused."""
    lam = 0.3
    rng = np.random.default_rng(40 + d)
    xs, ys = rng.normal(size=(30, d)), rng.normal(size=30)
    light = linalg.init(jnp.asarray(lam), d, jnp.float64, carry_inverse=False)
    full = linalg.init(jnp.asarray(lam), d, jnp.float64)
    assert light.inv is None
    np.testing.assert_allclose(linalg.inverse(light), np.eye(d) / lam, rtol=1e-15)
    for x, y in zip(xs, ys):
        light = linalg.update(light, jnp.asarray(x), jnp.asarray(y), True)
        full = linalg.update(full, jnp.asarray(x), jnp.asarray(y), True)
    assert light.inv is None
    gram = lam * np.eye(d) + xs.T @ xs
    np.testing.assert_allclose(linalg.inverse(light), np.linalg.inv(gram), rtol=1e-9)
    np.testing.assert_allclose(linalg.theta_hat(light), np.linalg.solve(gram, xs.T @ ys),
                               rtol=1e-9)
    np.testing.assert_allclose(light.logdet, np.linalg.slogdet(gram)[1], rtol=1e-12)
    np.testing.assert_array_equal(linalg.inverse(light), full.inv)
    np.testing.assert_array_equal(light.logdet, full.logdet)
    with pytest.raises(ValueError, match="refresh every update"):
        linalg.update(light, jnp.asarray(xs[0]), jnp.asarray(1.0), False)


def test_node_kernels_carry_no_inverse_when_refreshing_every_round():
    """The ridge kernels keep ``V^{-1}`` out of their state at ``refresh_every = 1`` (its
    default) and carry it otherwise; both give the same run (same policy and counts)."""
    scopes = graphs.block_scopes(2, 2)
    structure = P.make_structure(scopes, "linear", "independent")
    problem = P.make_problem(jax.random.key(0), structure, scopes, noise_sigma=0.5)
    params = AgentParams.create(2, beta=0.5, lambda_reg=0.05)
    outs = {}
    for every in (1, 4):
        spec = AgentSpec(refresh_every=every)
        algo = make("lazy", structure, spec)
        state = jax.eval_shape(algo.init, jax.random.key(1), params, problem)
        assert (state.stats.inv is None) == (every == 1)
        outs[every] = jax.jit(lambda key: runner.run(  # one program, not one per operation
            key, algo, structure, problem, params, 1.0, 64)[1])(jax.random.key(2))
    np.testing.assert_allclose(outs[1].prediction_regret, outs[4].prediction_regret, rtol=1e-4)
    np.testing.assert_array_equal(outs[1].updates, outs[4].updates)
    assert int(outs[1].reoptimisations) > 1


# --------------------------------------------------------------------------------------------
# float32 drift
# --------------------------------------------------------------------------------------------

# Measured on CPU (this test's features and key), max over the 10^5 updates:
#   refresh          max |logdet_f32 - logdet_f64|   max rel. Frobenius error of V^{-1}
#   never            3.2e-4                          1.8e-5
#   every 1          3.5e-5                          3.2e-5
#   every 16         3.8e-5                          3.2e-5
#   every 64         4.4e-5                          3.1e-5
#   every 256        5.2e-5                          3.0e-5
# Asserted for the refreshed variants: logdet error < 5e-4 and inverse error < 3e-4 (about
# 10x margin). The "never" variant is measured and must stay finite only.
DRIFT_LOGDET_BOUND = 5e-4
DRIFT_INV_BOUND = 3e-4


def test_float32_drift_uniform_features(x64):
    n_upd, lam, d = 100_000, 0.01, 2
    xs64 = np.asarray(jax.random.uniform(jax.random.key(0), (n_upd, d), jnp.float64))
    grams = _np_gram_path(lam, xs64)
    ref_logdet = np.linalg.slogdet(grams)[1]
    ref_inv = np.linalg.inv(grams)
    ref_norm = np.linalg.norm(ref_inv, axis=(1, 2))

    xs = jnp.asarray(xs64, jnp.float32)
    ys = jnp.zeros((n_upd,), jnp.float32)
    st0 = linalg.init(jnp.asarray(lam, jnp.float32), d, jnp.float32)
    errs = {}
    for r in (None, 1, 16, 64, 256):
        _, (ld, inv) = jax.jit(lambda s, x, y, r=r: _scan_updates(s, x, y, r))(st0, xs, ys)
        assert ld.dtype == jnp.float32
        ld = np.asarray(ld, np.float64)
        inv = np.asarray(inv, np.float64)
        assert np.all(np.isfinite(ld)) and np.all(np.isfinite(inv))
        e_ld = np.abs(ld - ref_logdet).max()
        e_inv = (np.linalg.norm(inv - ref_inv, axis=(1, 2)) / ref_norm).max()
        errs[r] = (e_ld, e_inv)
    for r in (1, 16, 64, 256):
        e_ld, e_inv = errs[r]
        assert e_ld < DRIFT_LOGDET_BOUND, (r, errs)
        assert e_inv < DRIFT_INV_BOUND, (r, errs)


def test_float32_drift_repeated_vertex(x64):
    """The worst case the bandit produces: the same vertex feature (1, 1) over and over.

    V^{-1} then has eigenvalues 1/lambda and ~1/(2t): incremental float32 log-det leaves the
    float64 value by more than log 2 within the first ~10^3 updates (DESIGN section 2; measured:
    at update 969), while refreshing from the Gram matrix every update keeps it within 0.1 over
    10^4 updates (measured: 0.024).
    """
    n_upd, lam, d = 10_000, 0.01, 2
    xs64 = np.ones((n_upd, d))
    ref_logdet = np.linalg.slogdet(_np_gram_path(lam, xs64))[1]
    xs = jnp.ones((n_upd, d), jnp.float32)
    ys = jnp.zeros((n_upd,), jnp.float32)
    st0 = linalg.init(jnp.asarray(lam, jnp.float32), d, jnp.float32)
    scan = jax.jit(_scan_updates, static_argnums=3)
    _, (ld_never, _) = scan(st0, xs, ys, None)
    _, (ld_always, _) = scan(st0, xs, ys, 1)
    err_never = np.abs(np.asarray(ld_never, np.float64) - ref_logdet)
    err_always = np.abs(np.asarray(ld_always, np.float64) - ref_logdet)
    assert err_never[:2000].max() > math.log(2.0)
    assert err_always.max() < 0.1


# --------------------------------------------------------------------------------------------
# Trigger counts: float32 vs float64 through the runner (DESIGN section 2)
# --------------------------------------------------------------------------------------------

# Zero noise on purpose: the float32 and float64 problems draw DIFFERENT normal variates from
# the same key (jax.random.normal depends on the dtype), so with noise the two runs would differ
# for reasons other than arithmetic. With sigma = 0 (and theta* given explicitly, as drawn
# theta* also depends on the dtype) the only difference is rounding, and the vertex solver
# makes the learner replay the same few vertices -- the ill-conditioned case.


def _lazy_triggers(dtype, scopes, theta, refresh_every, make_params, horizon=10_000):
    structure = P.make_structure(scopes, "linear", "independent")
    prob = P.make_problem(
        jax.random.key(1), structure, scopes, theta_distribution="explicit",
        theta_values=theta, noise_sigma=0.0, dtype=dtype,
    )
    k = structure.num_criteria
    algo = make("lazy", structure, AgentSpec(refresh_every=refresh_every))
    params = make_params(k, dtype, lambda_reg=0.01, beta=1.0)
    fn = jax.jit(
        lambda kk, p, pa: runner.run(kk, algo, structure, p, pa, 0.1, horizon,
                                     record_every=horizon)
    )
    _, totals, _ = fn(jax.random.key(3), prob, params)
    return np.asarray(totals.triggers), int(totals.reoptimisations)


def _chain_theta(num_nodes, seed):
    scopes = graphs.graph_scopes(num_nodes, graphs.chain_edges(num_nodes))
    rng = np.random.default_rng(seed)
    return scopes, [list(rng.normal(size=int(m.sum()))) for m in scopes.mask]


BLOCK_THETAS = {"mixed": [[-1.0, 0.5], [-0.5, -1.0]], "negative": [[-1.0, -0.5], [-0.3, -1.0]]}


@pytest.mark.parametrize("name", sorted(BLOCK_THETAS))
def test_lazy_trigger_counts_float32_equal_float64_blocks(x64, make_params, name):
    """2 blocks x d=2, lambda_reg = 0.01, 10^4 rounds, default refresh_every = 1."""
    scopes, theta = graphs.block_scopes(2, 2), BLOCK_THETAS[name]
    trig64, reopt64 = _lazy_triggers(jnp.float64, scopes, theta, 1, make_params)
    trig32, reopt32 = _lazy_triggers(jnp.float32, scopes, theta, 1, make_params)
    assert reopt64 > 5  # the trigger does fire: ~log2 of the determinant growth
    np.testing.assert_array_equal(trig32, trig64)
    assert reopt32 == reopt64


@pytest.mark.parametrize(
    "num_nodes,seed",
    [
        (3, 0),
        (4, 1),
        pytest.param(3, 2, marks=pytest.mark.xfail(strict=True, reason=(
            "a known float32 limit, documented in gsjax.linalg: here the float64 log det "
            "crosses log 2 by 1.4e-4 (round 4100), finer than float32 resolves; the data Gram "
            "S is kept exact (integer entries), but the Cholesky factor of lambda I + S with "
            "lambda = 0.01 against entries ~4000 (ulp ~5e-4) is not. Use dtype float64"))),
    ],
)
def test_lazy_trigger_counts_float32_equal_float64_chain(x64, make_params, num_nodes, seed):
    """Chain graphs: overlapping scopes, so no exactly tied vertices (unlike symmetric blocks);
    the float64 trajectory is the same for every refresh_every, so only float32 error differs."""
    scopes, theta = _chain_theta(num_nodes, seed)
    trig64, reopt64 = _lazy_triggers(jnp.float64, scopes, theta, 1, make_params)
    trig32, reopt32 = _lazy_triggers(jnp.float32, scopes, theta, 1, make_params)
    assert reopt64 > 5
    np.testing.assert_array_equal(trig32, trig64)
    assert reopt32 == reopt64


def test_noisy_lazy_triggers_float32_match_float64_seed_by_seed(x64, make_params):
    """With noise: a float32 and a float64 run of the same seeds see the same theta* and the
    same noise (every draw is float32, then cast: gsjax.problem.Draws), so they can be
    compared seed by seed. Section 7.2's shape (10 blocks x d = 2), lambda_reg = 0.01,
    sigma = 0.5, 10^4 rounds, 4 seeds: the trigger counts agree criterion by criterion up to
    float32 rounding of the log-det near the threshold (measured: at most one firing apart)."""
    scopes = graphs.block_scopes(10, 2)
    structure = P.make_structure(scopes, "linear", "independent")
    horizon, seeds = 10_000, 4
    out = {}
    for dtype in (jnp.float32, jnp.float64):
        prob = P.make_problem(jax.random.key(5), structure, scopes, noise_sigma=0.5, s0=0.5,
                              dtype=dtype)
        out[dtype] = prob, runner.sweep(
            jax.random.key(9), np.arange(seeds), make("lazy", structure, AgentSpec()),
            structure, prob, make_params(10, dtype, lambda_reg=0.01, beta=0.5), 1.0, horizon,
            horizon)
    (p32, r32), (p64, r64) = out[jnp.float32], out[jnp.float64]
    np.testing.assert_array_equal(np.asarray(p32.theta, np.float64), np.asarray(p64.theta))
    draws = [P.draw_noise(P.round_draws(jax.random.key(2), 77), structure, p)
             for p in (p32, p64)]
    np.testing.assert_array_equal(np.asarray(draws[0], np.float64), np.asarray(draws[1]))
    t32, t64 = np.asarray(r32.totals.triggers), np.asarray(r64.totals.triggers)
    assert t64.sum() > 10 * seeds  # the triggers do fire
    assert np.max(np.abs(t32 - t64)) <= 1, (t32, t64)


@pytest.mark.parametrize("d", [3, 4, 6, 8])
def test_unrolled_refresh_matches_numpy(x64, d):
    """refresh_method 'unrolled' (the Cholesky factorisation written out) against float64
    NumPy's inverse and log-determinant, and symmetric exactly."""
    rng = np.random.default_rng(40 + d)
    a = rng.normal(size=(d, 2 * d))
    gram = a @ a.T + 0.05 * np.eye(d)
    inv, logdet = linalg.refresh(jnp.asarray(a @ a.T), jnp.asarray(0.05), "unrolled")
    np.testing.assert_allclose(inv, np.linalg.inv(gram), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(logdet, np.linalg.slogdet(gram)[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(inv), np.asarray(inv).T)
    with pytest.raises(ValueError, match="method"):
        linalg.refresh(jnp.asarray(a @ a.T), jnp.asarray(0.05), "qr")


@pytest.mark.parametrize("d", [3, 5])
def test_unrolled_refresh_float32_as_accurate_as_lapack(d):
    """In float32, over 2000 Gram matrices of {0, 1} features (integer entries, as the DP's
    vertices give) with lambda in [0.01, 2]: the unrolled log det and inverse are as close to
    float64 as LAPACK's Cholesky is (within 2x its largest error, plus one ulp)."""
    rng = np.random.default_rng(7 + d)
    x = rng.integers(0, 2, size=(2000, 300, d)).astype(np.float64)
    gram = np.einsum("nti,ntj->nij", x, x)
    lam = rng.uniform(0.01, 2.0, 2000)
    v = gram + lam[:, None, None] * np.eye(d)
    ref_inv, ref_ld = np.linalg.inv(v), np.linalg.slogdet(v)[1]
    errs = {}
    for method in linalg.REFRESH_METHODS:
        inv, ld = jax.jit(jax.vmap(lambda s, l: linalg.refresh(s, l, method)))(
            jnp.asarray(gram, jnp.float32), jnp.asarray(lam, jnp.float32))
        errs[method] = (np.max(np.abs(np.asarray(ld, np.float64) - ref_ld)),
                        np.max(np.abs(np.asarray(inv, np.float64) - ref_inv)
                               / np.max(np.abs(ref_inv), axis=(1, 2), keepdims=True)))
    ulp = float(np.spacing(np.float32(np.max(np.abs(ref_ld)))))
    for j in range(2):
        assert errs["unrolled"][j] <= 2 * errs["cholesky"][j] + ulp, errs


@pytest.mark.parametrize("num_nodes,seed", [(3, 0), (4, 1)])
def test_unrolled_lazy_trigger_counts_float32_equal_float64_chain(x64, make_params, num_nodes,
                                                                  seed):
    """The chains above (scopes of 2 and 3 features, lambda_reg = 0.01, 10^4 rounds) with the
    unrolled refresh: float32 trigger counts equal float64's, as with LAPACK's."""
    scopes, theta = _chain_theta(num_nodes, seed)
    out = {}
    for dtype in (jnp.float64, jnp.float32):
        structure = P.make_structure(scopes, "linear", "independent")
        prob = P.make_problem(jax.random.key(1), structure, scopes, theta_distribution="explicit",
                              theta_values=theta, noise_sigma=0.0, dtype=dtype)
        algo = make("lazy", structure, AgentSpec(refresh_method="unrolled"))
        params = make_params(structure.num_criteria, dtype, lambda_reg=0.01, beta=1.0)
        _, totals, _ = jax.jit(lambda kk, p, pa: runner.run(
            kk, algo, structure, p, pa, 0.1, 10_000, record_every=10_000))(
            jax.random.key(3), prob, params)
        out[dtype] = (np.asarray(totals.triggers), int(totals.reoptimisations))
    assert out[jnp.float64][1] > 5
    np.testing.assert_array_equal(out[jnp.float32][0], out[jnp.float64][0])
    assert out[jnp.float32][1] == out[jnp.float64][1]


def _gram_sums(xs, compensated):
    """The data Gram matrix after ``update`` of every row of ``xs`` (jit, lax.scan)."""
    def step(st, x):
        return linalg.update(st, x, jnp.float32(0.0), True), None

    st = linalg.init(jnp.float32(0.178196), xs.shape[1], jnp.float32, carry_inverse=False,
                     compensated=compensated)
    return jax.jit(lambda xs: jax.lax.scan(step, st, xs)[0])(xs)


def test_compensated_gram_keeps_v_positive_definite():
    """The failure seen in a 10^4-round float32 PGD run on a grid (dp_grid_100_pgd, seed 95,
    round 7355): a coordinate at 0.9998 beside one at 1.0 for 7345 rounds. The plain float32
    sum rounds S_01 up and S_00 down (Cauchy--Schwarz broken by more than lambda = 0.178: V
    indefinite, log det NaN); the compensated sum stays within a few float32 ulps of the
    float64 sum, V positive definite."""
    xs = np.tile(np.float32([0.9998, 1.0]), (7345, 1))
    exact = xs.astype(np.float64).T @ xs.astype(np.float64)
    plain, comp = (_gram_sums(jnp.asarray(xs), c) for c in (False, True))
    s = np.asarray(plain.data_gram, np.float64)
    assert s[0, 1] ** 2 > s[0, 0] * s[1, 1] + 0.178 * (s[0, 0] + s[1, 1])  # indefinite V
    assert np.isnan(float(plain.logdet))
    c = np.asarray(comp.data_gram, np.float64)
    assert np.abs(c - exact).max() <= 4 * np.spacing(np.float32(exact.max()))
    assert np.all(np.linalg.eigvalsh(c + 0.178196 * np.eye(2)) > 0.1)
    assert np.isfinite(float(comp.logdet))
    np.testing.assert_allclose(float(comp.logdet), np.linalg.slogdet(
        exact + 0.178196 * np.eye(2))[1], rtol=1e-3)


def test_compensated_gram_at_vertices_is_the_plain_sum():
    """0/1 features: every partial sum is a small integer, exact in float32; the compensation
    stays zero and the statistics are the plain ones bit for bit."""
    xs = jnp.asarray(np.random.default_rng(0).integers(0, 2, (3000, 4)), jnp.float32)
    plain, comp = (_gram_sums(xs, c) for c in (False, True))
    assert np.array_equal(np.asarray(plain.data_gram), np.asarray(comp.data_gram))
    assert np.array_equal(np.asarray(plain.logdet), np.asarray(comp.logdet))
    assert not np.any(np.asarray(comp.gram_err))


def test_gram_summation_config():
    """agent.gram_summation: 'compensated' runs with the DP (vertex states) give the plain runs'
    totals bit for bit; with PGD (fractional states) the same counts here and regret within
    float32 noise; refused outside the per-criterion ridge and for unknown values; a config
    that does not set it keeps its hash."""
    from gsjax import experiment
    from gsjax.config import ConfigError, config_hash, parse_config

    base = {"name": "r", "seeds": 3, "horizon": 60, "record_every": 30,
            "problem": {"structure": "graph", "graph": "edges", "num_nodes": 8,
                        "edges": [[i, (i + 1) % 8] for i in range(8)]},
            "agent": {"solver": "dp", "lambda_reg": 0.05},
            # one compiled program (LinUCB's ridge estimator is theirs, in a program of its own)
            "algorithms": {"lazy": {}, "async_lazy": {}}}

    def totals(agent):
        cfg = parse_config({**base, "agent": {**base["agent"], **agent}})
        res = experiment.run_experiment(cfg, experiment.build(cfg), log=None)
        return {n: jax.tree_util.tree_map(np.asarray, r.totals) for n, r in res.runs.items()}

    plain, comp = totals({}), totals({"gram_summation": "compensated"})
    for name in plain:
        for a, b in zip(plain[name], comp[name]):
            assert np.array_equal(a, b), name
    pgd = {"solver": "pgd", "pgd_starts": 2, "pgd_steps": 10}
    plain, comp = totals(pgd), totals({**pgd, "gram_summation": "compensated"})
    for name in plain:
        np.testing.assert_allclose(comp[name].prediction_regret, plain[name].prediction_regret,
                                   rtol=1e-3)
    assert config_hash(parse_config(base)) == config_hash(parse_config(
        {**base, "agent": {**base["agent"], "gram_summation": "plain"}}))
    joint = {**base, "agent": {"lambda_reg": 0.05, "gram_summation": "compensated"},
             "algorithms": {"j": {"algorithm": "joint_lazy"}}}
    with pytest.raises(ConfigError, match="algorithms.j.gram_summation"):
        experiment.build(parse_config(joint))
    with pytest.raises(ConfigError, match="gram_summation"):
        parse_config({**base, "agent": {"gram_summation": "pairwise"}})
