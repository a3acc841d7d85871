"""Problems (gsjax.problem) and graphs (gsjax.graphs) against hand computations."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import graphs
from gsjax import problem as P

CHAIN4 = graphs.graph_scopes(4, graphs.chain_edges(4))
# Quadratic theta rows [1, s_i, s_i^2, {s_j}, {s_i s_j}]: only c_i s_i + a_i s_i^2 nonzero, so
# L(s) = sum_i a_i s_i^2 + c_i s_i, separable and strictly convex, s*_i = clip(-c_i / 2 a_i).
QUAD_A = np.array([1.0, 2.0, 0.5, 1.5])
QUAD_TARGET = np.array([0.3, -0.4, 0.65, 1.7])
QUAD_C = -2 * QUAD_A * QUAD_TARGET


def _local(scopes, s, i):
    """The scope's coordinates (own first) and their values."""
    idx = scopes.index[i][scopes.mask[i]]
    return idx, s[idx]


@pytest.fixture(scope="module")
def quadratic_problem():
    structure = P.make_structure(CHAIN4, "quadratic", "independent")
    rows = []
    for i in range(4):
        m_i = int(CHAIN4.mask[i].sum())
        rows.append([0.0, QUAD_C[i], QUAD_A[i]] + [0.0] * (2 * (m_i - 1)))
    prob = P.make_problem(jax.random.key(2), structure, CHAIN4, theta_distribution="explicit",
                          theta_values=rows)
    return structure, prob


@pytest.fixture(scope="module")
def rff_problem():
    structure = P.make_structure(CHAIN4, "rff", "independent", rff_dim=1024)
    prob = P.make_problem(jax.random.key(4), structure, CHAIN4, rff_lengthscale=0.7)
    return structure, prob


def test_feature_dims():
    sc = graphs.block_scopes(3, 4)
    assert P.make_structure(sc, "linear", "independent").feature_dim == 4
    assert P.make_structure(sc, "quadratic", "independent").feature_dim == 9
    assert P.make_structure(sc, "rff", "independent", rff_dim=7).feature_dim == 7
    with pytest.raises(ValueError, match="feature kind"):
        P.make_structure(sc, "cubic", "independent")
    with pytest.raises(ValueError, match="noise"):
        P.make_structure(sc, "linear", "pink")


def test_linear_features_losses_and_coefficients():
    structure = P.make_structure(CHAIN4, "linear", "independent")
    prob = P.make_problem(jax.random.key(1), structure, CHAIN4)
    theta = np.asarray(prob.theta, np.float64)
    s = np.random.default_rng(0).uniform(size=4).astype(np.float32)
    phi = np.asarray(P.all_features(structure, prob, jnp.asarray(s)))
    coef = np.zeros(4)
    for i in range(4):
        idx, vals = _local(CHAIN4, s, i)
        expected = np.zeros(structure.feature_dim)
        expected[: len(idx)] = vals
        np.testing.assert_allclose(phi[i], expected, rtol=1e-7)
        assert np.all(theta[i, len(idx):] == 0)
        coef[idx] += theta[i, : len(idx)]
    mu = np.array([phi[i] @ theta[i] for i in range(4)])
    np.testing.assert_allclose(P.expected_losses(structure, prob, jnp.asarray(s)), mu, rtol=1e-5)
    np.testing.assert_allclose(P.total_loss(structure, prob, jnp.asarray(s)), mu.sum(), rtol=1e-5)
    np.testing.assert_allclose(P.linear_coefficients(structure, prob), coef, rtol=1e-6)
    np.testing.assert_allclose(coef @ s, mu.sum(), rtol=1e-5)


def test_quadratic_features(quadratic_problem):
    structure, prob = quadratic_problem
    s = np.random.default_rng(1).uniform(size=4).astype(np.float32)
    phi = np.asarray(P.all_features(structure, prob, jnp.asarray(s)))
    m = CHAIN4.index.shape[1]
    for i in range(4):
        idx, vals = _local(CHAIN4, s, i)
        own, others = vals[0], vals[1:]
        assert idx[0] == i
        expected = np.zeros(2 * m + 1)
        expected[:3] = [1.0, own, own * own]
        expected[3 : 3 + len(others)] = others
        expected[m + 2 : m + 2 + len(others)] = own * others
        np.testing.assert_allclose(phi[i], expected, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(np.asarray(prob.feat_mask[i]),
                                      np.r_[[True] * 3, CHAIN4.mask[i, 1:], CHAIN4.mask[i, 1:]])


def test_rff_features_and_kernel(rff_problem):
    structure, prob = rff_problem
    ell, D = 0.7, structure.rff_dim
    omega = np.asarray(prob.rff_omega, np.float64)  # (k, D, m) = Omega / ell
    phase = np.asarray(prob.rff_phase, np.float64)
    # Frequencies: zero on padded scope slots; Omega = ell * omega ~ N(0, 1); phases U[0, 2 pi).
    assert np.all(omega[~CHAIN4.mask[:, None, :].repeat(D, 1)] == 0)
    w = (omega * ell)[CHAIN4.mask[:, None, :].repeat(D, 1)]
    assert abs(w.mean()) < 5 / math.sqrt(w.size)
    assert abs(w.var() - 1.0) < 5 * math.sqrt(2 / w.size)
    assert phase.min() >= 0 and phase.max() < 2 * np.pi
    assert abs(phase.mean() - np.pi) < 5 * (2 * np.pi / math.sqrt(12 * phase.size))

    rng = np.random.default_rng(2)
    xs = rng.uniform(size=(6, 4)).astype(np.float32)
    phis = np.asarray(jax.vmap(lambda s: P.all_features(structure, prob, s))(jnp.asarray(xs)),
                      np.float64)
    for a in range(6):
        for i in range(4):
            idx, vals = _local(CHAIN4, xs[a].astype(np.float64), i)
            x = np.zeros(CHAIN4.index.shape[1])
            x[: len(idx)] = vals
            hand = math.sqrt(2.0 / D) * np.cos(omega[i] @ x + phase[i])
            np.testing.assert_allclose(phis[a, i], hand, rtol=1e-4, atol=1e-5)
    # Random Fourier features approximate the RBF kernel exp(-|x - y|^2 / (2 ell^2)) on the
    # scope; each inner product is a mean of D bounded terms, standard error <= 1/sqrt(D).
    for a, b in itertools.combinations(range(6), 2):
        for i in range(4):
            ia, va = _local(CHAIN4, xs[a].astype(np.float64), i)
            _, vb = _local(CHAIN4, xs[b].astype(np.float64), i)
            k_true = math.exp(-np.sum((va - vb) ** 2) / (2 * ell**2))
            assert abs(phis[a, i] @ phis[b, i] - k_true) < 5 / math.sqrt(D)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_true_minimiser_linear_equals_brute_force(seed):
    scopes = graphs.graph_scopes(6, graphs.chain_edges(6) + [(0, 3)])
    structure = P.make_structure(scopes, "linear", "independent")
    prob = P.make_problem(jax.random.key(seed), structure, scopes, dtype=jnp.float32)
    theta = np.asarray(prob.theta, np.float64)

    def loss(s):
        return sum(theta[i, : scopes.mask[i].sum()] @ s[scopes.index[i][scopes.mask[i]]]
                   for i in range(6))

    verts = [np.array(v) for v in itertools.product((0.0, 1.0), repeat=6)]
    vals = np.array([loss(v) for v in verts])
    best = verts[int(np.argmin(vals))]
    np.testing.assert_array_equal(np.asarray(prob.s_star), best)
    np.testing.assert_allclose(float(prob.loss_star), vals.min(), rtol=1e-5, atol=1e-6)
    assert float(prob.s_star_residual) == 0.0


def test_true_minimiser_quadratic_known_separable(quadratic_problem):
    structure, prob = quadratic_problem
    expected = np.clip(QUAD_TARGET, 0.0, 1.0)
    exp_loss = float(np.sum(QUAD_A * expected**2 + QUAD_C * expected))
    np.testing.assert_allclose(np.asarray(prob.s_star), expected, atol=2e-3)
    np.testing.assert_allclose(float(prob.loss_star), exp_loss, atol=1e-5)
    assert float(prob.s_star_residual) < 1e-3
    np.testing.assert_allclose(float(P.total_loss(structure, prob, prob.s_star)),
                               float(prob.loss_star), rtol=1e-6)


def _leaves_equal(a, b):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(la) == len(lb) and all(
        np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb))


def test_make_problem_is_the_configs_program_compiled_once():
    """With a concrete key, ``make_problem`` and ``make_factor_problem`` build in one compiled
    program: the one a config's run compiles (they build inside ``jit``), bit for bit; the same
    arguments again compile nothing; under ``vmap`` (a traced key) they are traced inline."""
    from gsjax import factor, xla

    compiles = []
    listener = lambda event, dur, **kw: compiles.append(event) if event.endswith(  # noqa: E731
        "backend_compile_duration") else None
    quadratic = P.make_structure(CHAIN4, "quadratic", "independent")
    layout = factor.clique_layout(2, 4)
    fstructure, _ = factor.make_factor_structure(layout, "linear", "independent")
    builders = [lambda k: P.make_problem(k, quadratic, CHAIN4, noise_sigma=[0.5, 0.1, 0.2, 0.3]),
                lambda k: factor.make_factor_problem(k, fstructure, layout, mixing_seed=3)]
    key = jax.random.key(7)
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        for build in builders:
            direct = build(key)
            assert _leaves_equal(direct, xla.jit(build)(key))  # the config path's program
            del compiles[:]
            assert _leaves_equal(build(key), direct)
            assert compiles == []  # kept: nothing traced or compiled again
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    keys = jax.random.split(jax.random.key(1), 3)
    batched = jax.vmap(builders[1])(keys).theta
    for i in range(3):
        one = builders[1](keys[i]).theta
        np.testing.assert_array_equal(np.asarray(batched[i]), np.asarray(one))
    # a changed argument is another program, not the kept one: a float's sign is part of it
    linear = P.make_structure(CHAIN4, "linear", "independent")
    a = P.make_problem(key, linear, CHAIN4, s0=0.0)
    b = P.make_problem(key, linear, CHAIN4, s0=-0.0)
    assert np.signbit(np.asarray(b.s0)).all() and not np.signbit(np.asarray(a.s0)).any()
    with pytest.raises(ValueError, match="s0"):  # the checks still see the values
        P.make_problem(key, linear, CHAIN4, s0=1.5)


def _empirical_cov(structure, prob, num, key):
    draws = jax.vmap(lambda t: P.draw_noise(P.round_draws(key, t), structure, prob))(
        jnp.arange(1, num + 1))
    x = np.asarray(draws, np.float64)
    return x, np.cov(x, rowvar=False)


def _assert_cov(x, cov, expected, num):
    np.testing.assert_allclose(x.mean(0), 0.0, atol=5 * np.sqrt(np.diag(expected) / num).max())
    var = np.diag(expected)
    se = np.sqrt((np.outer(var, var) + expected**2) / num)  # Gaussian sample covariance SE
    assert np.all(np.abs(cov - expected) < 5 * se), np.max(np.abs(cov - expected) / se)


def test_correlated_noise_covariance(key):
    n, num = 5, 40_000
    scopes = graphs.graph_scopes(n, graphs.chain_edges(n))
    structure = P.make_structure(scopes, "linear", "correlated")
    sigma = np.array([0.5, 1.0, 0.7, 1.2, 0.3])
    prob = P.make_problem(jax.random.key(1), structure, scopes, noise_sigma=sigma)
    assert prob.noise_sigma.shape == (n,)
    x, cov = _empirical_cov(structure, prob, num, key)
    sets = [set(scopes.index[i][scopes.mask[i]]) for i in range(n)]
    expected = np.array([[sum(sigma[j] ** 2 for j in sets[i] & sets[l]) for l in range(n)]
                         for i in range(n)])
    _assert_cov(x, cov, expected, num)
    assert expected[0, 2] > 0 and expected[0, 3] == 0  # chain: shared neighbour, none


def test_independent_noise_covariance(key):
    k, num = 4, 40_000
    scopes = graphs.block_scopes(k, 2)
    structure = P.make_structure(scopes, "linear", "independent")
    sigma = np.array([0.2, 0.5, 1.0, 2.0])
    prob = P.make_problem(jax.random.key(1), structure, scopes, noise_sigma=sigma)
    x, cov = _empirical_cov(structure, prob, num, key)
    _assert_cov(x, cov, np.diag(sigma**2), num)


# --------------------------------------------------------------------------------------------
# Graphs
# --------------------------------------------------------------------------------------------


def _degrees(num_nodes, edges):
    deg = np.zeros(num_nodes, int)
    for i, j in edges:
        deg[i] += 1
        deg[j] += 1
    return deg


def test_chain_grid_complete_degrees():
    np.testing.assert_array_equal(_degrees(5, graphs.chain_edges(5)), [1, 2, 2, 2, 1])
    rows, cols = 3, 4
    deg = _degrees(rows * cols, graphs.grid_edges(rows, cols)).reshape(rows, cols)
    expected = np.full((rows, cols), 4)
    expected[0, :] -= 1
    expected[-1, :] -= 1
    expected[:, 0] -= 1
    expected[:, -1] -= 1
    np.testing.assert_array_equal(deg, expected)
    assert len(graphs.grid_edges(rows, cols)) == rows * (cols - 1) + cols * (rows - 1)
    np.testing.assert_array_equal(_degrees(6, graphs.complete_edges(6)), [5] * 6)
    assert len(graphs.complete_edges(6)) == 15


def test_graph_scopes_closed_neighbourhoods():
    edges = [(0, 1), (1, 2), (3, 1), (2, 1)]  # duplicate, reversed orientation
    sc = graphs.graph_scopes(4, edges)
    assert sc.num_coords == 4 and sc.index.shape == (4, 4)
    rows = [list(sc.index[i][sc.mask[i]]) for i in range(4)]
    assert rows == [[0, 1], [1, 0, 2, 3], [2, 1], [3, 1]]
    assert np.all(sc.index[~sc.mask] == 0)
    assert not graphs.scopes_are_disjoint(sc)
    with pytest.raises(ValueError):
        graphs.graph_scopes(3, [(0, 3)])
    with pytest.raises(ValueError):
        graphs.graph_scopes(3, [(1, 1)])


def test_block_scopes():
    sc = graphs.block_scopes(3, 2)
    np.testing.assert_array_equal(sc.index, [[0, 1], [2, 3], [4, 5]])
    assert sc.mask.all() and sc.num_coords == 6
    assert graphs.scopes_are_disjoint(sc)


@pytest.mark.parametrize("max_degree", [1, 2, 3])
def test_random_bounded_degree(max_degree):
    n = 12
    graphs_by_seed = []
    for seed in range(5):
        edges = graphs.random_bounded_degree_edges(n, max_degree, 40, seed)
        assert edges == graphs.random_bounded_degree_edges(n, max_degree, 40, seed)
        assert len(set(edges)) == len(edges)
        assert all(0 <= i < j < n for i, j in edges)
        assert _degrees(n, edges).max() <= max_degree
        assert len(edges) <= min(40, n * max_degree // 2)
        graphs_by_seed.append(tuple(edges))
    assert len(set(graphs_by_seed)) > 1  # the seed matters
    few = graphs.random_bounded_degree_edges(n, max_degree, 3, 0)
    assert len(few) == 3
