"""The OFUL radius of Lemma 12 with the feature map's norm bound ``L`` (issue 15, item 7).

``beta_{t,i} = sigma_i sqrt(d_i log((1 + t L_i^2 / lambda_i) / delta)) + sqrt(lambda_i) S``
against a float64 closed form, with ``L_i^2`` derived by hand per feature kind (linear and
quadratic: ``d_i``, entries in ``[0, 1]``; random Fourier: 2) and checked against the feature map
itself: the largest ``||phi_i(s)||^2`` over the box's vertices and random points (for linear
features the squared norm is convex in ``s``, so the vertex maximum is the supremum).
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import experiment, factor, graphs
from gsjax import problem as P
from gsjax.algorithms import AgentParams, AgentSpec
from gsjax.algorithms import adaptive as A
from gsjax.algorithms import joint_lazy, kernel
from gsjax.config import parse_config

SPEC = AgentSpec(beta_mode="oful")
T = 37
DELTA, S_NORM = 0.07, 1.3
LAMBDAS = np.array([0.3, 1.7, 0.9, 2.2])
SIGMAS = np.array([0.3, 0.5, 0.7, 0.2])
EDGES = [(0, 1), (1, 2), (2, 3)]  # a chain: scopes of 2, 3, 3, 2 coordinates (padded to 3)
SCOPE_SIZES = np.array([2, 3, 3, 2])
RFF_DIM = 8


def _closed_form(sigma, d, norm_sq, lam, t=T):
    """float64 Lemma 12."""
    sigma, d, norm_sq, lam = (np.asarray(a, np.float64) for a in (sigma, d, norm_sq, lam))
    return sigma * np.sqrt(d * np.log((1.0 + t * norm_sq / lam) / DELTA)) + np.sqrt(lam) * S_NORM


def _params(k, oful_L=None, lam=LAMBDAS, sigma=SIGMAS):
    return AgentParams.create(k, lambda_reg=lam, oful_sigma=sigma, oful_delta=DELTA,
                              oful_S=S_NORM, oful_L=oful_L, dtype=jnp.float64)


@functools.cache  # float64 (every caller holds x64): the s* search of a problem is slow
def _chain(features):
    scopes = graphs.graph_scopes(4, EDGES)
    structure = P.make_structure(scopes, features, "independent", rff_dim=RFF_DIM)
    prob = P.make_problem(jax.random.key(3), structure, scopes, dtype=jnp.float64)
    return structure, prob


def _probe_points(n, num_random=2000):
    """Every vertex of [0, 1]^n and uniform points."""
    vertices = np.array(list(itertools.product((0.0, 1.0), repeat=n)))
    rand = np.random.default_rng(0).uniform(size=(num_random, n))
    return jnp.asarray(np.concatenate([vertices, rand]))


# By hand: d_i and L_i^2 of each feature kind on the chain's scopes of m_i coordinates.
BY_HAND = {
    "linear": (SCOPE_SIZES, SCOPE_SIZES),  # s|N(i): m_i entries in [0, 1]
    "quadratic": (2 * SCOPE_SIZES + 1, 2 * SCOPE_SIZES + 1),  # Example 1: entries in [0, 1]
    "rff": (np.full(4, RFF_DIM), np.full(4, 2.0)),  # sqrt(2/D) cos: (2/D) D
}


@pytest.mark.parametrize("features", sorted(BY_HAND))
def test_node_radius_closed_form(x64, features):
    structure, prob = _chain(features)
    d, norm_sq = BY_HAND[features]
    got = kernel.ridge(structure, SPEC).radius(_params(4), prob, (), T)
    np.testing.assert_allclose(np.asarray(got), _closed_form(SIGMAS, d, norm_sq, LAMBDAS),
                               rtol=1e-13)
    # an explicit oful_L replaces the feature map's bound, per criterion
    L = np.array([1.0, 0.5, 2.0, 3.0])
    got = kernel.ridge(structure, SPEC).radius(_params(4, oful_L=L), prob, (), T)
    np.testing.assert_allclose(np.asarray(got), _closed_form(SIGMAS, d, L ** 2, LAMBDAS),
                               rtol=1e-13)


@pytest.mark.parametrize("features", sorted(BY_HAND))
def test_feature_bound_holds_for_the_feature_map(x64, features):
    structure, prob = _chain(features)
    phi = jax.vmap(lambda s: P.all_features(structure, prob, s))(_probe_points(4))
    largest = np.max(np.sum(np.asarray(phi) ** 2, axis=-1), axis=0)  # (k,)
    bound = np.asarray(structure.env.feature_norm_sq_bound(structure, prob))
    np.testing.assert_array_equal(bound, BY_HAND[features][1])
    assert np.all(largest <= bound * (1 + 1e-12))
    if features != "rff":  # attained at s = 1: the bound is the supremum
        np.testing.assert_allclose(largest, bound, rtol=1e-12)


# Two factors of unequal size: node 0 reads factor 0 (3 coordinates), node 1 both (3 + 2),
# node 2 factor 1 (2); d_eff = 5 joint parameters.
LAYOUT = factor.FactorLayout(4, 3, ((0, 1, 2), (2, 3)), ((0, 1), (1, 2)))


def _factor(mixing, features="linear"):
    structure, _ = factor.make_factor_structure(LAYOUT, features, "independent",
                                                rff_dim=RFF_DIM, mixing=mixing)
    prob = factor.make_factor_problem(jax.random.key(1), structure, LAYOUT, mixing_seed=2,
                                      dtype=jnp.float64)
    return structure, prob


@pytest.mark.parametrize("mixing", factor.MIXINGS)
def test_joint_radius_against_brute_force_feature_norm(x64, mixing):
    """Linear features: ``||Psi(s)||_F^2`` and ``||psi_i(s)||^2`` are convex in ``s``, so their
    maxima over the vertices are the suprema the radii must use."""
    structure, prob = _factor(mixing)
    verts = _probe_points(4, num_random=0)
    psi = np.asarray(jax.vmap(lambda s: factor.joint_features(structure, prob, s))(verts))
    joint_sq = np.max(np.sum(psi ** 2, axis=(1, 2)))  # sup_s ||Psi(s)||_F^2
    node_sq = np.max(np.sum(psi ** 2, axis=2), axis=0)  # (k,) sup_s ||row_i||^2
    lam, sig = LAMBDAS[:3], SIGMAS[:3]
    got = joint_lazy.joint(structure, SPEC).radius(_params(3, lam=lam, sigma=sig), prob, (), T)
    np.testing.assert_allclose(float(got), _closed_form(sig.max(), 5, joint_sq, lam.max()),
                               rtol=1e-12)
    # node-wise on the same problem: node i's features are row i of Psi
    node_d = np.array([3, 5, 2])
    got = kernel.ridge(structure, SPEC).radius(_params(3, lam=lam, sigma=sig), prob, (), T)
    np.testing.assert_allclose(np.asarray(got), _closed_form(sig, node_d, node_sq, lam),
                               rtol=1e-12)
    if mixing != "scaled":  # norm-preserving mixing: the plain features' bound, d_i
        np.testing.assert_allclose(node_sq, node_d, rtol=1e-12)


def test_joint_radius_rff_factors_and_explicit_L(x64):
    structure, prob = _factor("orthogonal", "rff")
    lam, sig = LAMBDAS[:3], SIGMAS[:3]
    radius = joint_lazy.joint(structure, SPEC).radius
    # 2 per factor of the node (||sqrt(2/D) cos||^2 <= 2): 2 + 4 + 2; d_eff = 2 D
    got = radius(_params(3, lam=lam, sigma=sig), prob, (), T)
    np.testing.assert_allclose(float(got), _closed_form(sig.max(), 2 * RFF_DIM, 8.0, lam.max()),
                               rtol=1e-13)
    L = np.array([0.5, 1.0, 2.0])
    got = radius(_params(3, oful_L=L, lam=lam, sigma=sig), prob, (), T)
    np.testing.assert_allclose(
        float(got), _closed_form(sig.max(), 2 * RFF_DIM, np.sum(L ** 2), lam.max()), rtol=1e-13)


def test_joint_radius_on_a_nodewise_problem(x64):
    """A problem that is not a factor graph: one block per criterion, ``L_J^2 = sum_i m_i``."""
    structure, prob = _chain("linear")
    got = joint_lazy.joint(structure, SPEC).radius(_params(4), prob, (), T)
    want = _closed_form(SIGMAS.max(), SCOPE_SIZES.sum(), SCOPE_SIZES.sum(), LAMBDAS.max())
    np.testing.assert_allclose(float(got), want, rtol=1e-13)


@pytest.mark.parametrize("features", ["linear", "quadratic"])
def test_adaptive_radius_reads_the_kept_features(x64, features):
    structure, prob = _chain(features)
    spec = AgentSpec(beta_mode="oful", warmup=4, signal_gamma=0.5)
    kept = np.array([[1, 1, 0, 0], [1, 0, 1, 1], [1, 1, 1, 1], [1, 0, 0, 0]], bool)  # (k, n)
    d = kept.sum(1) if features == "linear" else 2 * kept.sum(1) + 1
    got = A.restricted(structure, spec).radius(_params(4), prob, jnp.asarray(kept), T)
    np.testing.assert_allclose(np.asarray(got), _closed_form(SIGMAS, d, d, LAMBDAS), rtol=1e-13)


def test_config_oful_L_reaches_the_params():
    raw = {"name": "m", "horizon": 5, "seeds": 1,
           "problem": {"structure": "blocks", "num_blocks": 2, "block_dim": 3},
           "agent": {"beta_mode": "oful"},
           "algorithms": {"lazy": {}, "linucb": {"oful_L": 2.5}}}
    built = experiment.build(parse_config(raw))
    by_name = {ba.name: ba.params.oful_L for ba in built.algorithms}
    assert by_name["lazy"] is None
    np.testing.assert_array_equal(np.asarray(by_name["linucb"]), [2.5, 2.5])
