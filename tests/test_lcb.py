"""LCB minimisers (gsjax.lcb): vertex enumeration vs brute force, PGD vs vertex, PGD on a convex
LCB with a known minimiser, masks and box."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import graphs, lcb
from gsjax import problem as P

SCOPE_CASES = {
    "blocks3x2": lambda: graphs.block_scopes(3, 2),
    "chain4": lambda: graphs.graph_scopes(4, graphs.chain_edges(4)),
}


def _setup(scopes, features="linear", dtype=jnp.float64):
    structure = P.make_structure(scopes, features, "independent")
    prob = P.make_problem(jax.random.key(0), structure, scopes, dtype=dtype)
    return structure, prob


def _bare_quadratic_problem(scopes, dtype=jnp.float64):
    """A quadratic-feature Problem built by hand (make_problem would also run the dense s*
    search, irrelevant here). Feature mask per the gsjax.problem docstring:
    [1, s_i, s_i^2] always real, then {s_j} and {s_i s_j} for the scope's other members."""
    structure = P.make_structure(scopes, "quadratic", "independent")
    k, m = scopes.index.shape
    others = scopes.mask[:, 1:]
    fmask = np.concatenate([np.ones((k, 3), bool), others, others], axis=1)
    assert fmask.shape == (k, structure.feature_dim)
    n = structure.num_coords
    prob = P.Problem(
        scopes=jnp.asarray(scopes.index), scope_mask=jnp.asarray(scopes.mask),
        feat_mask=jnp.asarray(fmask), theta=jnp.zeros(fmask.shape, dtype),
        noise_sigma=jnp.ones((k,), dtype), rff_omega=jnp.zeros((k, 1, m), dtype),
        rff_phase=jnp.zeros((k, 1), dtype), s0=jnp.full((n,), 0.5, dtype),
        s_star=jnp.zeros((n,), dtype), loss_star=jnp.zeros((), dtype),
        s_star_residual=jnp.zeros((), dtype),
    )
    return structure, prob


def _random_instances(rng, num, structure, prob):
    """theta_hat (N,k,d) zero on padding, SPD inverses (N,k,d,d), beta (N,k), s_init (N,n)."""
    k, d, n = structure.num_criteria, structure.feature_dim, structure.num_coords
    fmask = np.asarray(prob.feat_mask)
    th = rng.normal(size=(num, k, d)) * fmask
    a = rng.normal(size=(num, k, d, d))
    inv = a @ np.swapaxes(a, -1, -2) / d + 0.1 * np.eye(d)
    beta = rng.uniform(0.2, 1.5, size=(num, k))
    s_init = rng.uniform(size=(num, n))
    return th, inv, beta, s_init


def _np_lcb(scopes, th, inv, beta, s):
    """Float64 NumPy LCB for LINEAR features (phi_i = s restricted to the scope, padded 0)."""
    total = 0.0
    for i in range(scopes.index.shape[0]):
        phi = np.where(scopes.mask[i], s[scopes.index[i]], 0.0)
        q = phi @ inv[i] @ phi
        total += phi @ th[i] - beta[i] * np.sqrt(max(q, 1e-12))
    return total


def _np_brute_force(scopes, th, inv, beta, s_init, free):
    """Minimum over the vertices of the free coordinates (others at s_init), lowest-first."""
    free_idx = np.flatnonzero(free)
    best_s, best = None, np.inf
    for bits in itertools.product((0.0, 1.0), repeat=len(free_idx)):
        s = s_init.copy()
        s[free_idx] = bits
        val = _np_lcb(scopes, th, inv, beta, s)
        if val < best - 1e-12:
            best_s, best = s, val
    return best_s, best


@pytest.mark.parametrize("case", sorted(SCOPE_CASES))
def test_vertex_equals_numpy_brute_force(x64, case):
    scopes = SCOPE_CASES[case]()
    structure, prob = _setup(scopes)
    n = structure.num_coords
    rng = np.random.default_rng(1)
    num = 12
    th, inv, beta, s_init = _random_instances(rng, num, structure, prob)
    free = rng.uniform(size=(num, n)) < 0.7
    free[: num // 2] = True  # half the instances with every coordinate free

    fn = jax.jit(jax.vmap(lambda t, i, b, s, f: lcb.minimise_vertex(structure, prob, t, i, b, s, f)))
    s_out, v_out, res = (np.asarray(x) for x in fn(th, inv, beta, s_init, free))
    np.testing.assert_array_equal(res, 0.0)
    for j in range(num):
        s_ref, v_ref = _np_brute_force(scopes, th[j], inv[j], beta[j], s_init[j], free[j])
        np.testing.assert_array_equal(s_out[j], s_ref)
        np.testing.assert_allclose(v_out[j], v_ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(s_out[j][~free[j]], s_init[j][~free[j]])


@pytest.mark.parametrize("case", sorted(SCOPE_CASES))
def test_pgd_reaches_vertex_minimum(x64, case):
    """Linear features: the LCB is concave, its minimum is a vertex. PGD from 32 starts x 200
    Adam steps (measured: all 50 instances reach the vertex value to 1e-14) must come within
    1e-6 of the exact minimum, and can never beat it."""
    scopes = SCOPE_CASES[case]()
    structure, prob = _setup(scopes)
    n = structure.num_coords
    rng = np.random.default_rng(2)
    num = 30
    th, inv, beta, s_init = _random_instances(rng, num, structure, prob)
    free = jnp.ones((n,), bool)

    def one(key, t, i, b, s):
        sv, vv, _ = lcb.minimise_vertex(structure, prob, t, i, b, s, free)
        sp, vp, rp = lcb.minimise_pgd(key, structure, prob, t, i, b, s, free, num_steps=200,
                                      num_starts=32, learning_rate=0.05)
        return vv, vp, sp

    keys = jax.random.split(jax.random.key(5), num)
    vv, vp, sp = (np.asarray(x) for x in jax.jit(jax.vmap(one))(keys, th, inv, beta, s_init))
    assert np.all(vp >= vv - 1e-9)
    assert np.all(vp <= vv + 1e-6), np.max(vp - vv)
    assert np.all((sp >= 0) & (sp <= 1))
    # The returned value is the LCB at the returned point (NumPy recomputation).
    for j in range(num):
        np.testing.assert_allclose(vp[j], _np_lcb(scopes, th[j], inv[j], beta[j], sp[j]),
                                   rtol=1e-10, atol=1e-10)


def test_pgd_respects_free_mask_and_box(key):
    scopes = graphs.graph_scopes(5, graphs.chain_edges(5))
    structure, prob = _setup(scopes, dtype=jnp.float32)
    rng = np.random.default_rng(3)
    num = 16
    th, inv, beta, s_init = _random_instances(rng, num, structure, prob)
    free = rng.uniform(size=(num, 5)) < 0.5
    free[:, 2] = True
    # Large steps push hard against the box.
    fn = jax.jit(jax.vmap(lambda k, t, i, b, s, f: lcb.minimise_pgd(
        k, structure, prob, t, i, b, s, f, num_steps=40, num_starts=4, learning_rate=0.5)))
    args = [jnp.asarray(x, jnp.float32) for x in (th, inv, beta, s_init)]
    s_out, _, res = fn(jax.random.split(key, num), *args, jnp.asarray(free))
    s_out = np.asarray(s_out)
    s32 = np.asarray(args[3])
    np.testing.assert_array_equal(s_out[~free], s32[~free])  # exactly unchanged
    assert np.all((s_out >= 0.0) & (s_out <= 1.0))
    assert np.all(np.isfinite(np.asarray(res)))
    assert np.any(s_out[free] != s32[free])  # the free coordinates did move


def test_pgd_finds_known_minimiser_of_convex_quadratic_lcb(x64, key):
    """Quadratic features [1, s_i, s_i^2, {s_j}, {s_i s_j}] on a chain, beta = 0 and theta_hat
    nonzero only on s_i (c_i) and s_i^2 (a_i > 0): LCB = sum_i a_i s_i^2 + c_i s_i + const,
    strictly convex and separable, minimiser clip(-c / (2 a), 0, 1) -- interior for some
    coordinates, on either face for others."""
    n = 5
    scopes = graphs.graph_scopes(n, graphs.chain_edges(n))
    structure, prob = _bare_quadratic_problem(scopes)
    k, d = structure.num_criteria, structure.feature_dim
    a = np.array([1.0, 2.0, 0.5, 1.5, 3.0])
    target = np.array([0.3, -0.4, 0.55, 1.7, 0.8])  # unclipped minimisers
    c = -2 * a * target
    th = np.zeros((k, d))
    th[:, 0] = 0.25  # the constant feature: shifts the value, not the minimiser
    th[:, 1] = c
    th[:, 2] = a
    inv = np.broadcast_to(np.eye(d), (k, d, d))
    beta = np.zeros(k)
    s_init = np.full(n, 0.5)
    s, val, res = jax.jit(lambda kk: lcb.minimise_pgd(
        kk, structure, prob, jnp.asarray(th), jnp.asarray(inv), jnp.asarray(beta),
        jnp.asarray(s_init), jnp.ones((n,), bool), num_steps=400, num_starts=4,
        learning_rate=0.02))(key)
    expected = np.clip(target, 0.0, 1.0)
    np.testing.assert_allclose(np.asarray(s), expected, atol=1e-4)
    exp_val = np.sum(a * expected**2 + c * expected) + 0.25 * k
    np.testing.assert_allclose(float(val), exp_val, atol=1e-7)
    assert float(res) < 1e-3


def test_vertex_rejects_nonlinear_features():
    scopes = graphs.block_scopes(2, 1)
    structure, prob = _bare_quadratic_problem(scopes, jnp.float32)
    k, d = structure.num_criteria, structure.feature_dim
    with pytest.raises(ValueError, match="linear"):
        lcb.minimise_vertex(structure, prob, jnp.zeros((k, d)), jnp.ones((k, d, d)),
                            jnp.ones(k), jnp.zeros(2), jnp.ones(2, bool))


def test_contiguous_blocks_read_by_reshape_equal_the_gather():
    """Structure.contiguous holds exactly for the blocks arange(n).reshape(k, m), and there
    at_scopes (a reshape) equals the gather x[scopes]; other scopes keep the gather."""
    blocks = graphs.block_scopes(5, 3)
    assert graphs.scopes_are_blocks(blocks)
    assert not graphs.scopes_are_blocks(graphs.graph_scopes(6, graphs.chain_edges(6)))
    permuted = blocks._replace(index=blocks.index[::-1].copy())  # disjoint, not in order
    assert graphs.scopes_are_disjoint(permuted) and not graphs.scopes_are_blocks(permuted)
    st = P.make_structure(blocks, "linear", "independent")
    assert st.contiguous and st.disjoint
    assert not P.make_structure(permuted, "linear", "independent").contiguous
    x = jnp.asarray(np.random.default_rng(0).normal(size=15), jnp.float32)
    idx = jnp.asarray(blocks.index)
    np.testing.assert_array_equal(np.asarray(P.at_scopes(st, x, idx)), np.asarray(x)[blocks.index])


@pytest.mark.parametrize("width", [1, 2, 3, 5])
def test_hard_pick_builds_the_chosen_row_from_its_bits(width):
    # the solver's hard pick makes vertex p from p's bits; the reference takes row p of the
    # vertex table (first_pick), with ties (integer values) and free masks of every kind
    rng = np.random.default_rng(width)
    num, p = 64, 2 ** width
    bits = jnp.asarray(lcb.bit_table(width), jnp.float32)
    base = jnp.asarray(rng.uniform(size=(num, width)), jnp.float32)
    free = jnp.asarray(rng.uniform(size=(num, width)) < 0.6)
    values = jnp.asarray(rng.integers(0, 3, size=(num, p)), jnp.float32)  # many exact ties

    def both(b, f, v):
        verts = lcb._vertices_from_free(bits, b, f)
        return lcb._choose(lcb.first_pick, v, verts, b, f), lcb.first_pick(v, verts)

    (s, val), (s_ref, val_ref) = jax.vmap(both)(base, free, values)
    np.testing.assert_array_equal(np.asarray(s), np.asarray(s_ref))
    np.testing.assert_array_equal(np.asarray(val), np.asarray(val_ref))
    np.testing.assert_array_equal(np.asarray(s)[~np.asarray(free)],
                                  np.asarray(base)[~np.asarray(free)])


@pytest.mark.parametrize("rows", [[[0], [1], [2]], [[0, 1], [2, 3], [4, 5]],
                                  [[0, 1, 2], [3, 4, 5]], [[0, 1, 2, 3], [4, 5, 6, 7]],
                                  [[3, 4], [0], [1, 2, 5]]])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("block", [None, 16])
def test_block_vertices_seed_last_equal_the_one_seed_path(rows, ties, block, monkeypatch):
    """Under ``vmap`` the hard block solver runs seed-last (``lcb._first_vertices``); the
    one-seed path (any other pick, here ``first_pick`` wrapped) chooses the same vertices bit
    for bit, with padded and permuted scopes, free masks of every kind and exact ties, alone
    (no vmap) too; the minimum's value (the blocks' values summed, unused by the runs) agrees
    to float32 rounding. ``block``: the seeds solved in blocks of 16 (the last one padded),
    as past ``lcb.SEED_BLOCK`` seeds."""
    if block is not None:
        monkeypatch.setattr(lcb, "SEED_BLOCK", block)
    n = 1 + max(max(r) for r in rows)
    scopes = graphs.scopes_from_rows(rows, num_coords=n)
    structure, prob = _setup(scopes, dtype=jnp.float32)
    rng = np.random.default_rng(len(rows) + 10 * ties)
    th, inv, beta, s_init = _random_instances(rng, 60, structure, prob)
    if ties:  # integer estimates, no bonus: many vertices share the minimum exactly
        th, beta = np.round(th), np.zeros_like(beta)
    free = rng.uniform(size=s_init.shape) < 0.7
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731

    def solve(pick, t, i, b, s, f):
        obj = lcb.node_objective(structure, prob, t, i, b)
        return lcb.minimise_vertices(obj, s, f, pick)[:2]

    wrapped = lambda v, c: lcb.first_pick(v, c)  # noqa: E731  (not first_pick: one-seed path)
    args = (f32(th), f32(inv), f32(beta), f32(s_init), jnp.asarray(free))
    fast = jax.jit(jax.vmap(lambda *a: solve(lcb.first_pick, *a)))(*args)
    ref = jax.jit(jax.vmap(lambda *a: solve(wrapped, *a)))(*args)
    alone = jax.jit(lambda *a: solve(lcb.first_pick, *a))(*(a[5] for a in args))
    np.testing.assert_array_equal(np.asarray(fast[0]), np.asarray(ref[0]))
    np.testing.assert_array_equal(np.asarray(alone[0]), np.asarray(ref[0])[5])
    np.testing.assert_allclose(np.asarray(fast[1]), np.asarray(ref[1]), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(alone[1]), np.asarray(ref[1])[5], rtol=1e-6,
                               atol=1e-6)
    s = np.asarray(fast[0])
    np.testing.assert_array_equal(s[~free], np.asarray(s_init, np.float32)[~free])
    assert np.all(np.isin(s[free], (0.0, 1.0)))
    # differentiable as before: d min / d theta_hat (the chosen vertices), under vmap
    grad = lambda pick: jax.jit(jax.grad(lambda t: jnp.sum(jax.vmap(  # noqa: E731
        lambda t1, *a: solve(pick, t1, *a)[1])(t, *args[1:]))))(args[0])
    np.testing.assert_allclose(np.asarray(grad(lcb.first_pick)), np.asarray(grad(wrapped)),
                               rtol=1e-6, atol=1e-6)
