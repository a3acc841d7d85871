"""Checked inputs below the config layer (issue 15, item 8).

For each low-level constructor: every bad input is a ``ValueError`` naming the argument, and a
good input still gives the values it gave before the checks (compared with values written by
hand or computed independently, not with the function itself).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import graphs
from gsjax import problem as P
from gsjax.algorithms import AgentParams
from gsjax.graphs import Scopes

# The chain 0 - 1 - 2 - 3 by hand: closed neighbourhoods, own coordinate first, padded with 0.
CHAIN4_INDEX = np.array([[0, 1, 0], [1, 0, 2], [2, 1, 3], [3, 2, 0]], np.int32)
CHAIN4_MASK = np.array([[1, 1, 0], [1, 1, 1], [1, 1, 1], [1, 1, 0]], bool)


def chain4() -> Scopes:
    return Scopes(CHAIN4_INDEX.copy(), CHAIN4_MASK.copy(), 4)


def blocks32() -> Scopes:
    """3 blocks of 2 coordinates, by hand."""
    index = np.array([[0, 1], [2, 3], [4, 5]], np.int32)
    return Scopes(index, np.ones((3, 2), bool), 6)


def with_index(scopes: Scopes, i: int, j: int, value: int) -> Scopes:
    index = scopes.index.copy()
    index[i, j] = value
    return scopes._replace(index=index)


# Hand-built scopes, each with one defect, and the entry the error must name.
BAD_SCOPES = {
    "out_of_range": (with_index(blocks32(), 1, 1, 7), r"scopes\.index\[1, 1\].*out of range"),
    "at_n": (with_index(blocks32(), 2, 0, 6), r"scopes\.index\[2, 0\].*got 6"),
    "negative": (with_index(blocks32(), 1, 0, -1), r"scopes\.index\[1, 0\].*negative"),
    "duplicate": (with_index(blocks32(), 1, 1, 2), r"scopes\.index\[1\].*coordinate 2 more than"),
    "empty": (blocks32()._replace(mask=np.array([[1, 1], [0, 0], [1, 1]], bool)),
              r"scopes\.mask\[1\].*empty scope"),
    "mask_shape": (blocks32()._replace(mask=np.ones((3, 1), bool)),
                   r"scopes\.mask.*shape of scopes\.index \(3, 2\), got \(3, 1\)"),
    "mask_dtype": (blocks32()._replace(mask=np.ones((3, 2), np.int32)),
                   r"scopes\.mask.*bool array"),
    "index_dtype": (blocks32()._replace(index=blocks32().index.astype(float)),
                    r"scopes\.index.*integer array"),
    "index_1d": (blocks32()._replace(index=np.arange(6), mask=np.ones(6, bool)),
                 r"scopes\.index.*\(k, m\)"),
    "num_coords": (blocks32()._replace(num_coords=0), r"scopes\.num_coords.*>= 1, got 0"),
}


# ---------------------------------------------------------------------------------------------
# gsjax.graphs: builders and check_scopes
# ---------------------------------------------------------------------------------------------


def test_block_scopes_good_input_unchanged():
    sc = graphs.block_scopes(3, 2)
    want = blocks32()
    np.testing.assert_array_equal(sc.index, want.index)
    np.testing.assert_array_equal(sc.mask, want.mask)
    assert sc.index.dtype == np.int32 and sc.mask.dtype == bool and sc.num_coords == 6
    assert graphs.block_scopes(np.int64(1), 1).num_coords == 1  # NumPy integers are fine


@pytest.mark.parametrize(
    "args,match",
    [
        ((0, 2), r"block_scopes: num_blocks.*>= 1, got 0"),
        ((-1, 2), r"block_scopes: num_blocks.*>= 1, got -1"),
        ((3, 0), r"block_scopes: block_dim.*>= 1, got 0"),
        ((3, 2.5), r"block_scopes: block_dim.*integer, got 2\.5"),
        ((True, 2), r"block_scopes: num_blocks.*integer, got True"),
    ],
    ids=[
        "num_blocks_0", "num_blocks_negative", "block_dim_0", "block_dim_float",
        "num_blocks_bool",
    ],
)
def test_block_scopes_rejects(args, match):
    with pytest.raises(ValueError, match=match):
        graphs.block_scopes(*args)


def test_graph_scopes_good_input_unchanged():
    # duplicate and reversed edges are ignored (documented)
    sc = graphs.graph_scopes(4, [(0, 1), (2, 1), (1, 2), (3, 2)])
    np.testing.assert_array_equal(sc.index, CHAIN4_INDEX)
    np.testing.assert_array_equal(sc.mask, CHAIN4_MASK)
    assert sc.index.dtype == np.int32 and sc.num_coords == 4
    np_edges = graphs.graph_scopes(4, np.array([[0, 1], [1, 2], [2, 3]]))
    np.testing.assert_array_equal(np_edges.index, CHAIN4_INDEX)


@pytest.mark.parametrize(
    "num_nodes,edges,match",
    [
        (5, [(0, 1), (1, 2), (2, 3), (0, 7)],
         r"graph_scopes: edges\[3\] = \(0, 7\) is out of range for num_nodes = 5"),
        (5, [(0, 1), (-1, 2)], r"graph_scopes: edges\[1\] = \(-1, 2\) is out of range"),
        (3, [(0, 3)], r"graph_scopes: edges\[0\] = \(0, 3\) is out of range for num_nodes = 3"),
        (3, [(0, 1), (1, 1)], r"graph_scopes: edges\[1\]: self-loop"),
        (3, [(0, 1, 2)], r"graph_scopes: edges\[0\]: expected a pair"),
        (3, [5], r"graph_scopes: edges\[0\]: expected a pair"),
        (3, [(0, 1.5)], r"graph_scopes: edges\[0\]: expected an integer, got 1\.5"),
        (0, [], r"graph_scopes: num_nodes.*>= 1, got 0"),
        (2.0, [], r"graph_scopes: num_nodes.*integer, got 2\.0"),
    ],
    ids=[
        "edge_out_of_range", "edge_negative", "edge_at_n", "self_loop", "edge_triple",
        "edge_not_a_pair", "edge_float", "num_nodes_0", "num_nodes_float",
    ],
)
def test_graph_scopes_rejects(num_nodes, edges, match):
    with pytest.raises(ValueError, match=match):
        graphs.graph_scopes(num_nodes, edges)


def test_scopes_from_rows_good_input():
    sc = graphs.scopes_from_rows([[0, 1], [1, 0, 2], [2, 1, 3], [3, 2]], 4)
    np.testing.assert_array_equal(sc.index, CHAIN4_INDEX)
    np.testing.assert_array_equal(sc.mask, CHAIN4_MASK)
    assert sc.num_coords == 4


@pytest.mark.parametrize(
    "rows,n,match",
    [
        ([[0, 1], [1, 4]], 4, r"scopes_from_rows: scopes\.index\[1, 1\].*out of range"),
        ([[0, 1], [-1]], 4, r"scopes_from_rows: scopes\.index\[1, 0\].*negative"),
        ([[0, 1], [2, 2]], 4, r"scopes_from_rows: scopes\.index\[1\].*more than once"),
        ([[0, 1], []], 4, r"scopes_from_rows: rows\[1\]: a scope must hold"),
        ([], 4, r"scopes_from_rows: rows: expected at least one"),
        ([[0, 1.5]], 4, r"scopes_from_rows: rows\[0\]: expected an integer"),
        ([[0]], 0, r"scopes_from_rows: num_coords.*>= 1, got 0"),
    ],
    ids=[
        "out_of_range", "negative", "duplicate", "empty_row", "no_rows", "float_entry",
        "num_coords_0",
    ],
)
def test_scopes_from_rows_rejects(rows, n, match):
    with pytest.raises(ValueError, match=match):
        graphs.scopes_from_rows(rows, n)


@pytest.mark.parametrize("name", sorted(BAD_SCOPES))
def test_check_scopes_rejects(name):
    scopes, match = BAD_SCOPES[name]
    with pytest.raises(ValueError, match=r"check_scopes: " + match):
        graphs.check_scopes(scopes)


def test_check_scopes_num_coords_must_match():
    with pytest.raises(ValueError, match=r"scopes\.num_coords: must equal .* = 8, got 6"):
        graphs.check_scopes(blocks32(), num_coords=8)


def test_check_scopes_accepts_good_scopes():
    out = graphs.check_scopes(chain4(), num_coords=4)
    np.testing.assert_array_equal(out.index, CHAIN4_INDEX)
    np.testing.assert_array_equal(out.mask, CHAIN4_MASK)
    assert out.num_coords == 4
    # Padding is not read: any padded value passes (documented), so does a JAX array.
    padded = chain4()._replace(index=np.where(CHAIN4_MASK, CHAIN4_INDEX, -1))
    graphs.check_scopes(padded)
    graphs.check_scopes(chain4()._replace(index=jnp.asarray(CHAIN4_INDEX)))
    # A coordinate read by no criterion is allowed (it just never matters).
    graphs.check_scopes(Scopes(np.array([[0], [2]]), np.ones((2, 1), bool), 3))


# ---------------------------------------------------------------------------------------------
# gsjax.problem.make_structure
# ---------------------------------------------------------------------------------------------


def test_make_structure_good_input_unchanged():
    st = P.make_structure(chain4(), "quadratic", "independent")
    assert st == P.Structure(num_coords=4, num_criteria=4, scope_size=3, feature_dim=7,
                             features="quadratic", noise="independent", disjoint=False,
                             rff_dim=1)
    st = P.make_structure(blocks32(), "rff", "correlated", rff_dim=5)
    assert st == P.Structure(num_coords=6, num_criteria=3, scope_size=2, feature_dim=5,
                             features="rff", noise="correlated", disjoint=True, rff_dim=5,
                             contiguous=True)  # the blocks are arange(6).reshape(3, 2)
    # disjoint blocks in another order are read by a gather, not a reshape
    shuffled = Scopes(np.array([[2, 3], [0, 1], [4, 5]], np.int32), np.ones((3, 2), bool), 6)
    st = P.make_structure(shuffled, "linear", "independent")
    assert st.disjoint and not st.contiguous
    # rff_dim is only read (and checked) for rff features
    assert P.make_structure(blocks32(), "linear", "independent", rff_dim=0).rff_dim == 1


@pytest.mark.parametrize("name", sorted(BAD_SCOPES))
def test_make_structure_rejects_bad_scopes(name):
    scopes, match = BAD_SCOPES[name]
    with pytest.raises(ValueError, match=r"make_structure: " + match):
        P.make_structure(scopes, "linear", "independent")


@pytest.mark.parametrize("rff_dim,match", [(0, r".*>= 1, got 0"), (2.0, r".*integer, got 2\.0")],
                         ids=["zero", "float"])
def test_make_structure_rejects_rff_dim(rff_dim, match):
    with pytest.raises(ValueError, match=r"make_structure: rff_dim: " + match):
        P.make_structure(blocks32(), "rff", "independent", rff_dim=rff_dim)


def test_make_structure_quadratic_needs_own_coordinate_first():
    mask = CHAIN4_MASK.copy()
    mask[1] = [False, True, True]
    scopes = chain4()._replace(mask=mask)
    P.make_structure(scopes, "linear", "independent")  # linear features do not care
    with pytest.raises(ValueError, match=r"make_structure: scopes\.mask\[1, 0\]"):
        P.make_structure(scopes, "quadratic", "independent")


# ---------------------------------------------------------------------------------------------
# gsjax.problem.make_problem
# ---------------------------------------------------------------------------------------------

CHAIN4_THETA = [[1.0, -2.0], [0.5, -0.25, 1.0], [-1.0, 0.5, -0.5], [2.0, -3.0]]


def test_make_problem_explicit_good_input_unchanged():
    """Every array by hand: theta* padded, c = (0.75, -1, -3, 1.5), s* = 1[c < 0]."""
    st = P.make_structure(chain4(), "linear", "independent")
    prob = P.make_problem(jax.random.key(0), st, chain4(), theta_distribution="explicit",
                          theta_values=CHAIN4_THETA, noise_sigma=0.3, s0=0.25)
    f32 = np.float32
    theta = np.array([[1, -2, 0], [0.5, -0.25, 1], [-1, 0.5, -0.5], [2, -3, 0]], f32)
    want = dict(
        scopes=CHAIN4_INDEX, scope_mask=CHAIN4_MASK, feat_mask=CHAIN4_MASK, theta=theta,
        noise_sigma=np.full(4, 0.3, f32), rff_omega=np.zeros((4, 1, 3), f32),
        rff_phase=np.zeros((4, 1), f32), s0=np.full(4, 0.25, f32),
        s_star=np.array([0, 1, 1, 0], f32), loss_star=f32(-4.0), s_star_residual=f32(0.0),
    )
    for field, value in want.items():
        got = np.asarray(getattr(prob, field))
        assert got.dtype == np.asarray(value).dtype, field
        np.testing.assert_array_equal(got, value, err_msg=field)
    assert prob.env_data is None


def test_make_problem_drawn_good_input_unchanged():
    """theta* = scale * N(0, 1) from the first of four split keys, zero on padding."""
    key = jax.random.key(3)
    st = P.make_structure(blocks32(), "linear", "correlated")
    sigma = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]  # correlated: one per coordinate, 0 allowed
    s0 = [0.0, 1.0, 0.5, 0.5, 0.25, 0.75]  # the box's faces are inside it
    prob = P.make_problem(key, st, blocks32(), theta_scale=2.0, noise_sigma=sigma, s0=s0)
    k_theta = jax.random.split(key, 4)[0]
    want = 2.0 * jax.random.normal(k_theta, (3, 2), jnp.float32)
    np.testing.assert_array_equal(np.asarray(prob.theta), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(prob.noise_sigma), np.asarray(sigma, np.float32))
    np.testing.assert_array_equal(np.asarray(prob.s0), np.asarray(s0, np.float32))


def test_make_problem_under_vmap_and_jit():
    """Traced keys and traced values pass; traced values are not checked, shapes are."""
    st = P.make_structure(blocks32(), "linear", "independent")
    keys = jax.random.split(jax.random.key(0), 3)
    per_seed = jax.vmap(lambda k: P.make_problem(k, st, blocks32(), noise_sigma=0.5))(keys)
    one = P.make_problem(keys[1], st, blocks32(), noise_sigma=0.5)
    np.testing.assert_array_equal(np.asarray(per_seed.theta[1]), np.asarray(one.theta))
    jitted = jax.jit(lambda k: P.make_problem(k, st, blocks32(), noise_sigma=[0.1, 0.2, 0.3]))
    np.testing.assert_array_equal(np.asarray(jitted(keys[0]).noise_sigma),
                                  np.asarray([0.1, 0.2, 0.3], np.float32))
    sig = jax.vmap(lambda s: P.make_problem(keys[0], st, blocks32(), noise_sigma=s))(
        jnp.asarray([0.1, 0.2]))
    np.testing.assert_array_equal(np.asarray(sig.noise_sigma[:, 0]),
                                  np.asarray([0.1, 0.2], np.float32))
    with pytest.raises(ValueError, match=r"make_problem: noise_sigma: .*got shape \(2,\)"):
        jax.vmap(lambda s: P.make_problem(keys[0], st, blocks32(), noise_sigma=s))(
            jnp.ones((4, 2)))


def _linear_blocks(**kwargs):
    st = P.make_structure(blocks32(), "linear", "independent")
    return P.make_problem(jax.random.key(0), st, blocks32(), **kwargs)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(noise_sigma=float("nan")), r"make_problem: noise_sigma: must be finite"),
        (dict(noise_sigma=[0.1, -1.0, 0.2]), r"make_problem: noise_sigma\[1\]: .*>= 0.*-1"),
        (dict(noise_sigma=[0.1, 0.2]), r"make_problem: noise_sigma: .*k .* = 3 .*\(2,\)"),
        (dict(noise_sigma="big"), r"make_problem: noise_sigma: expected a number"),
        (dict(s0=2.0), r"make_problem: s0: .*<= 1\.0, got 2\.0"),
        (dict(s0=-0.1), r"make_problem: s0: .*>= 0\.0 and <= 1\.0, got -0\.1"),
        (dict(s0=[0.5, 0.5, 0.5, 1.5, 0.5, 0.5]), r"make_problem: s0\[3\]: .*got 1\.5"),
        (dict(s0=[0.5] * 5), r"make_problem: s0: .*n .* = 6 values, got shape \(5,\)"),
        (dict(s0=float("inf")), r"make_problem: s0: must be finite"),
        (dict(theta_scale=float("nan")), r"make_problem: theta_scale: must be finite"),
        (dict(theta_scale=0.0), r"make_problem: theta_scale: .*> 0\.0, got 0\.0"),
        (dict(theta_distribution="gauss"), r"make_problem: theta_distribution: .*'gauss'"),
        (dict(theta_distribution="explicit"), r"make_problem: theta_values: required"),
        (dict(theta_distribution="explicit", theta_values=[[1, float("nan")], [1, 2], [3, 4]]),
         r"make_problem: theta_values\[0\]\[1\]: must be finite, got nan"),
        (dict(theta_distribution="explicit", theta_values=[[1, 2], [3, 4], [5, float("inf")]]),
         r"make_problem: theta_values\[2\]\[1\]: must be finite, got inf"),
        (dict(theta_distribution="explicit", theta_values=[[1, 2], [3, 4]]),
         r"make_problem: theta_values: expected k = 3 rows.*got 2"),
        (dict(theta_distribution="explicit", theta_values=[[1, 2], [3, 4, 5], [6, 7]]),
         r"make_problem: theta_values\[1\]: theta row 1 has 3 entries; criterion 1 has 2"),
        (dict(dtype=jnp.int32), r"make_problem: dtype: expected a floating dtype"),
    ],
    ids=[
        "noise_nan", "noise_negative", "noise_length", "noise_string", "s0_above", "s0_below",
        "s0_entry_above", "s0_length", "s0_inf", "theta_scale_nan", "theta_scale_0",
        "theta_distribution", "theta_values_missing", "theta_values_nan", "theta_values_inf",
        "theta_values_rows", "theta_values_row_length", "dtype_int",
    ],
)
def test_make_problem_rejects(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _linear_blocks(**kwargs)


def test_make_problem_correlated_noise_needs_n_values():
    st = P.make_structure(blocks32(), "linear", "correlated")
    with pytest.raises(ValueError, match=r"make_problem: noise_sigma: .*n .* = 6 values"):
        P.make_problem(jax.random.key(0), st, blocks32(), noise_sigma=[0.1, 0.2, 0.3])


def test_make_problem_rff_lengthscale():
    st = P.make_structure(blocks32(), "rff", "independent", rff_dim=2)
    with pytest.raises(ValueError, match=r"make_problem: rff_lengthscale: .*> 0\.0, got 0\.0"):
        P.make_problem(jax.random.key(0), st, blocks32(), rff_lengthscale=0.0)


@pytest.mark.parametrize("name", sorted(BAD_SCOPES))
def test_make_problem_rejects_bad_scopes(name):
    """Scopes passed to make_problem are checked too, not only those of make_structure."""
    scopes, match = BAD_SCOPES[name]
    st = P.make_structure(blocks32(), "linear", "independent")
    if name == "num_coords":
        match = r"scopes\.num_coords"
    with pytest.raises(ValueError, match=r"make_problem: " + match):
        P.make_problem(jax.random.key(0), st, scopes)


def test_make_problem_scopes_must_match_structure():
    st = P.make_structure(blocks32(), "linear", "independent")
    with pytest.raises(ValueError, match=r"make_problem: scopes: .*\(3, 2\).*got \(2, 3\)"):
        P.make_problem(jax.random.key(0), st, graphs.block_scopes(2, 3))
    with pytest.raises(ValueError, match=r"make_problem: scopes\.num_coords: .* = 6, got 9"):
        P.make_problem(jax.random.key(0), st, graphs.block_scopes(3, 3))
    mask = CHAIN4_MASK.copy()
    mask[2] = [False, True, True]
    st = P.make_structure(chain4(), "quadratic", "independent")
    with pytest.raises(ValueError, match=r"make_problem: scopes\.mask\[2, 0\]"):
        P.make_problem(jax.random.key(0), st, chain4()._replace(mask=mask))


# ---------------------------------------------------------------------------------------------
# gsjax.algorithms.AgentParams.create
# ---------------------------------------------------------------------------------------------


def test_agent_params_create_defaults_by_hand():
    p = AgentParams.create(3)
    f32 = np.float32
    want = AgentParams(
        lambda_reg=np.ones(3, f32), beta=np.ones(3, f32), pgd_lr=f32(0.05),
        log_trigger=f32(math.log(2.0)), oful_delta=f32(0.1), oful_S=f32(1.0),
        oful_sigma=np.full(3, 0.5, f32), oful_L=None,
    )
    for field, got, value in zip(AgentParams._fields, p, want):
        if value is None:  # oful_L: the feature map's bound, chosen by the estimator
            assert got is None, field
            continue
        assert np.asarray(got).dtype == np.float32, field
        assert np.shape(got) == np.shape(value), field
        np.testing.assert_array_equal(np.asarray(got), value, err_msg=field)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_agent_params_create_equals_the_test_fixture(x64, make_params, dtype):
    """The same bits as tests/conftest.py's hand-written construction."""
    kw = dict(lambda_reg=[0.01, 0.1, 1.0], beta=0.5, pgd_lr=0.1, oful_delta=0.2, oful_S=2.0,
              oful_sigma=[0.3, 0.4, 0.0], oful_L=[1.0, 2.0, 0.5])
    got = AgentParams.create(3, trigger_ratio=3.0, dtype=dtype, **kw)
    want = make_params(3, dtype, log_trigger=math.log(3.0), **kw)
    for field, g, w in zip(AgentParams._fields, got, want):
        if g is None or w is None:  # optional fields (own_reference): absent on both sides
            assert g is None and w is None, field
            continue
        assert g.dtype == w.dtype and g.shape == w.shape, field
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w), err_msg=field)


def test_agent_params_create_under_vmap():
    ratios = jnp.asarray([2.0, 4.0])
    p = jax.vmap(lambda r: AgentParams.create(2, trigger_ratio=r, lambda_reg=r))(ratios)
    np.testing.assert_allclose(np.asarray(p.log_trigger), np.log([2.0, 4.0]), rtol=1e-6)
    assert p.lambda_reg.shape == (2, 2)


@pytest.mark.parametrize(
    "k,kwargs,match",
    [
        (2, dict(lambda_reg=[-1.0, 0.0]), r"lambda_reg\[0\]: must be finite, > 0\.0, got -1\.0"),
        (2, dict(lambda_reg=[1.0, 0.0]), r"lambda_reg\[1\]: .*> 0\.0, got 0\.0"),
        (3, dict(lambda_reg=0.0), r"lambda_reg: .*> 0\.0, got 0\.0"),
        (3, dict(lambda_reg=[1.0, 1.0]), r"lambda_reg: expected a scalar or k = 3 .*\(2,\)"),
        (3, dict(lambda_reg=float("nan")), r"lambda_reg: must be finite"),
        (3, dict(beta=-0.5), r"beta: .*>= 0\.0, got -0\.5"),
        (3, dict(beta=float("inf")), r"beta: must be finite"),
        (3, dict(beta=[1.0, 2.0, 3.0, 4.0]), r"beta: expected a scalar or k = 3"),
        (3, dict(pgd_lr=0.0), r"pgd_lr: .*> 0\.0, got 0\.0"),
        (3, dict(pgd_lr=[0.1, 0.1, 0.1]), r"pgd_lr: expected a scalar, got shape \(3,\)"),
        (3, dict(trigger_ratio=1.0), r"trigger_ratio: .*> 1\.0, got 1\.0"),
        (3, dict(trigger_ratio=0.5), r"trigger_ratio: .*> 1\.0, got 0\.5"),
        (3, dict(trigger_ratio=float("nan")), r"trigger_ratio: must be finite"),
        (3, dict(trigger_ratio=[2.0, 2.0]), r"trigger_ratio: expected a scalar"),
        (3, dict(oful_delta=0.0), r"oful_delta: .*> 0\.0 and < 1\.0, got 0\.0"),
        (3, dict(oful_delta=1.0), r"oful_delta: .*> 0\.0 and < 1\.0, got 1\.0"),
        (3, dict(oful_S=0.0), r"oful_S: .*> 0\.0, got 0\.0"),
        (3, dict(oful_sigma=[0.5, -0.1, 0.5]), r"oful_sigma\[1\]: .*>= 0\.0, got -0\.1"),
        (3, dict(oful_sigma=[0.5]), r"oful_sigma: expected a scalar or k = 3"),
        (3, dict(oful_L=0.0), r"oful_L: .*> 0\.0, got 0\.0"),
        (3, dict(oful_L=[1.0, -2.0, 1.0]), r"oful_L\[1\]: .*> 0\.0, got -2\.0"),
        (3, dict(oful_L=[1.0, 1.0]), r"oful_L: expected a scalar or k = 3"),
        (3, dict(pgd_lr="fast"), r"pgd_lr: expected a number"),
        (0, {}, r"k: must be an integer >= 1 .*got 0"),
        (2.0, {}, r"k: must be an integer >= 1 .*got 2\.0"),
        (3, dict(dtype=jnp.int32), r"dtype: expected a floating dtype"),
    ],
    ids=[
        "lambda_negative", "lambda_zero_entry", "lambda_zero", "lambda_length", "lambda_nan",
        "beta_negative", "beta_inf", "beta_length", "pgd_lr_zero", "pgd_lr_vector",
        "trigger_ratio_1", "trigger_ratio_below_1", "trigger_ratio_nan", "trigger_ratio_vector",
        "oful_delta_0", "oful_delta_1", "oful_S_zero", "oful_sigma_negative", "oful_sigma_length",
        "oful_L_zero", "oful_L_negative", "oful_L_length",
        "pgd_lr_string", "k_0", "k_float", "dtype_int",
    ],
)
def test_agent_params_create_rejects(k, kwargs, match):
    with pytest.raises(ValueError, match=r"AgentParams\.create: " + match):
        AgentParams.create(k, **kwargs)


# --------------------------------------------------------------------------------------------
# The runner: a number of rounds must be an integer >= 1
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("horizon, record_every, name", [
    (0, 1, "horizon"), (-2, 1, "horizon"), (2.0, 1, "horizon"), (True, 1, "horizon"),
    (4, 0, "record_every")])
def test_runner_refuses_a_bad_number_of_rounds(horizon, record_every, name):
    from gsjax import graphs, problem as P, runner
    from gsjax.algorithms import AgentParams, AgentSpec, make

    scopes = graphs.block_scopes(2, 1)
    st = P.make_structure(scopes, "linear", "independent")
    prob = P.make_problem(jax.random.key(0), st, scopes)
    algo = make("lazy", st, AgentSpec())
    params = AgentParams.create(2)
    for where, call in (
        ("run", lambda: runner.run(jax.random.key(1), algo, st, prob, params, 0.1, horizon,
                                   record_every)),
        ("sweep", lambda: runner.sweep(jax.random.key(1), [0, 1], algo, st, prob, params, 0.1,
                                       horizon, record_every)),
    ):
        with pytest.raises(ValueError, match=rf"^{where}: {name}: must be an integer >= 1"):
            call()


def test_runner_accepts_one_round():
    """The smallest valid run: one round, its regret the expected loss of s0's first policy."""
    from gsjax import graphs, problem as P, runner
    from gsjax.algorithms import AgentParams, AgentSpec, make

    scopes = graphs.block_scopes(2, 1)
    st = P.make_structure(scopes, "linear", "independent")
    prob = P.make_problem(jax.random.key(0), st, scopes)
    algo = make("lazy", st, AgentSpec())
    _, totals, rec = jax.jit(lambda key, prob: runner.run(  # one program, not one per operation
        key, algo, st, prob, AgentParams.create(2), 0.1, 1, 1))(jax.random.key(1), prob)
    action = np.asarray(rec.action)[0]
    coef = np.asarray(P.linear_coefficients(st, prob))
    np.testing.assert_allclose(float(totals.prediction_regret),
                               coef @ action - float(prob.loss_star), rtol=1e-5, atol=1e-6)


def test_remember_keeps_the_last_entries_and_makes_each_once():
    from gsjax.checks import remember

    made, store = [], {}
    make = lambda k: lambda: made.append(k) or f"v{k}"  # noqa: E731
    for k in (1, 2, 1, 3, 1, 4):  # limit 2: 3 drops 1 (the oldest made), 4 drops 3
        assert remember(store, 2, k, make(k)) == f"v{k}"
    assert made == [1, 2, 3, 1, 4] and list(store) == [1, 4]
    assert remember(store, 2, [5], make(5)) == "v5" and list(store) == [1, 4]  # unhashable
