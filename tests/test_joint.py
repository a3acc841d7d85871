"""Factor-graph problems and Joint-LazyGraphLinUCB (Section 5.3): float64 references.

Every expected value is computed independently here, in NumPy float64: the factor features
from the layout (coordinates, member nodes, mixing matrices and w* are the instance's data),
ridge regression on the stacked design, determinants by ``numpy.linalg.slogdet``, LCB
minimisers by brute force.
"""

from __future__ import annotations

import itertools
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import cli, factor, lcb, linalg, runner
from gsjax import problem as P
from gsjax.algorithms import REGISTRY, AgentSpec, make
from gsjax.algorithms import joint_lazy as J
from gsjax.config import ConfigError, parse_config

LOG2 = math.log(2.0)

# Three overlapping factors over n = 5 coordinates and k = 4 nodes (node 0 in C0 and C2, ...).
LAYOUT = factor.FactorLayout(
    num_coords=5, num_nodes=4,
    factor_coords=((0, 1, 2), (2, 3), (4,)),
    factor_nodes=((0, 1, 2), (1, 2, 3), (0, 3)),
)


def _factor_problem(dtype, features="linear", mixing="orthogonal", layout=LAYOUT, seed=3,
                    sigma=0.5):
    structure, _ = factor.make_factor_structure(layout, features, "independent", rff_dim=4,
                                                mixing=mixing)
    prob = factor.make_factor_problem(jax.random.key(seed), structure, layout,
                                      noise_sigma=sigma, mixing_seed=seed, dtype=dtype)
    return structure, prob


def _np_phi(kind, x):
    """NumPy feature map of a factor's coordinates ``x`` (linear or pairwise quadratic)."""
    if kind == "linear":
        return x
    own, others = x[0], x[1:]
    return np.concatenate([[1.0, own, own * own], others, own * others])


def _np_blocks(layout, prob, kind, s):
    """{(node, factor): psi_{C,i}(s|_C)} (real entries only) and the real-entry index of C."""
    mix = np.asarray(prob.env_data.mix)
    fmask = np.asarray(prob.env_data.factor_feat_mask)
    out = {}
    for i in range(layout.num_nodes):
        mine = [c for c, nodes in enumerate(layout.factor_nodes) if i in nodes]
        for j, c in enumerate(mine):
            phi = _np_phi(kind, s[list(layout.factor_coords[c])])
            real = np.flatnonzero(fmask[c])
            out[i, c] = mix[i, j][np.ix_(real, real)] @ phi
    return out, fmask


def _np_node_losses(layout, prob, kind, s):
    blocks, fmask = _np_blocks(layout, prob, kind, s)
    w = np.asarray(prob.env_data.w)
    mu = np.zeros(layout.num_nodes)
    for (i, c), psi in blocks.items():
        mu[i] += psi @ w[c][fmask[c]]
    return mu


def _np_psi(layout, prob, kind, s):
    """(k, F d_C) joint features in the padded layout."""
    blocks, fmask = _np_blocks(layout, prob, kind, s)
    F, dc = fmask.shape
    psi = np.zeros((layout.num_nodes, F, dc))
    for (i, c), v in blocks.items():
        psi[i, c, fmask[c]] = v
    return psi.reshape(layout.num_nodes, -1)


def _params(k, dtype, lam=0.37, beta=0.8):
    from conftest import _agent_params

    return _agent_params(k, dtype, lambda_reg=lam, beta=beta)


# --------------------------------------------------------------------------------------------
# The problem: node-wise reading == joint model == NumPy reference
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["linear", "quadratic"])
@pytest.mark.parametrize("mixing", ["orthogonal", "scaled", "identity"])
def test_nodewise_view_matches_joint_model_and_reference(x64, kind, mixing):
    structure, prob = _factor_problem(jnp.float64, kind, mixing)
    rng = np.random.default_rng(0)
    w_joint = np.asarray(factor.joint_theta(prob))
    views = jax.jit(lambda s: (P.expected_losses(structure, prob, s),  # node-wise view
                               factor.joint_features(structure, prob, s)))
    for s in rng.uniform(size=(5, LAYOUT.num_coords)):
        ref = _np_node_losses(LAYOUT, prob, kind, s)
        mu, psi = (np.asarray(x) for x in views(jnp.asarray(s)))
        np.testing.assert_allclose(mu, ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(psi, _np_psi(LAYOUT, prob, kind, s), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(psi @ w_joint, ref, rtol=1e-12, atol=1e-12)
    # Node i's theta*_i is its own copy of its factors' w*: padded slots are zero.
    assert int(np.asarray(factor.joint_mask(prob)).sum()) == (
        sum(len(c) for c in LAYOUT.factor_coords) if kind == "linear"
        else sum(2 * len(c) + 1 for c in LAYOUT.factor_coords))
    if mixing == "orthogonal":  # norm-preserving: orthogonal on each real block, 0 elsewhere
        fmask = np.asarray(prob.env_data.factor_feat_mask)
        mix = np.asarray(prob.env_data.mix)
        for i in range(LAYOUT.num_nodes):
            mine = [c for c, nodes in enumerate(LAYOUT.factor_nodes) if i in nodes]
            for j, c in enumerate(mine):
                real = fmask[c]
                m = mix[i, j][np.ix_(real, real)]
                np.testing.assert_allclose(m.T @ m, np.eye(len(m)), atol=1e-12)
                assert not np.any(mix[i, j][~real]) and not np.any(mix[i, j][:, ~real])


def test_true_minimiser_is_the_best_vertex(x64):
    structure, prob = _factor_problem(jnp.float64)
    verts = np.array(list(itertools.product((0.0, 1.0), repeat=LAYOUT.num_coords)))
    vals = np.array([_np_node_losses(LAYOUT, prob, "linear", v).sum() for v in verts])
    np.testing.assert_allclose(float(prob.loss_star), vals.min(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        _np_node_losses(LAYOUT, prob, "linear", np.asarray(prob.s_star)).sum(), vals.min(),
        rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------------
# Rank-k updates
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k,p", [(1, 3), (4, 6), (9, 4)])
def test_woodbury_equals_sherman_morrison_and_numpy(x64, k, p):
    rng = np.random.default_rng(k + p)
    a = rng.normal(size=(p, p))
    v = a @ a.T + 0.3 * np.eye(p)
    xs = rng.normal(size=(k, p))
    v_new = v + xs.T @ xs
    inc_ref = np.linalg.slogdet(v_new)[1] - np.linalg.slogdet(v)[1]
    inv = jnp.asarray(np.linalg.inv(v))
    for fn in (linalg.woodbury, linalg.sherman_morrison_steps):
        got_inv, inc = fn(inv, jnp.asarray(xs))
        np.testing.assert_allclose(np.asarray(got_inv), np.linalg.inv(v_new), rtol=1e-9,
                                   atol=1e-11)
        np.testing.assert_allclose(float(inc), inc_ref, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------------------------
# Joint statistics after T rounds == ridge regression on the stacked design (float64)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("refresh_every,method", [(1, "sherman_morrison"),
                                                  (7, "sherman_morrison"), (7, "woodbury")])
def test_joint_stats_equal_stacked_ridge(x64, refresh_every, method):
    horizon, lam = 80, 0.37
    structure, prob = _factor_problem(jnp.float64)
    k = structure.num_criteria
    params = _params(k, jnp.float64, lam=lam)
    algo = J.make_joint("joint_lazy", structure, AgentSpec(refresh_every=refresh_every), method)
    seed_key = jax.random.fold_in(jax.random.key(11), 0)
    state, totals, rec = jax.jit(
        lambda: runner.run(seed_key, algo, structure, prob, params, 0.1, horizon, 1)
    )()
    actions = np.asarray(rec.action)  # (T, n)
    eta = np.asarray(jax.jit(jax.vmap(lambda t: P.draw_noise(P.round_draws(seed_key, t),
                                                             structure, prob)))(
        jnp.arange(1, horizon + 1)))
    w = np.asarray(factor.joint_theta(prob))
    psis = np.stack([_np_psi(LAYOUT, prob, "linear", a) for a in actions])  # (T, k, p)
    p = psis.shape[-1]
    ys = psis @ w + eta
    x = psis.reshape(-1, p)
    v = lam * np.eye(p) + x.T @ x
    b = x.T @ ys.reshape(-1)
    st = state.stats
    np.testing.assert_allclose(np.asarray(st.data_gram) + lam * np.eye(p), v, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(st.b), b, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(np.asarray(st.inv), np.linalg.inv(v), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(float(st.logdet), np.linalg.slogdet(v)[1], rtol=1e-11)
    np.testing.assert_allclose(np.asarray(linalg.theta_hat(st)), np.linalg.solve(v, b),
                               rtol=1e-8, atol=1e-10)
    assert int(state.t) == horizon

    # The lazy trigger on the joint determinant, replayed from the played actions.
    ref_ld = p * math.log(lam)
    gram = lam * np.eye(p)
    trig = np.zeros(horizon, bool)
    for t in range(horizon):
        gram = gram + psis[t].T @ psis[t]
        ld = np.linalg.slogdet(gram)[1]
        if ld - ref_ld > LOG2:
            trig[t] = True
            ref_ld = ld
    cum = np.cumsum(trig)
    for i in range(k):  # a joint update counts for every node
        np.testing.assert_array_equal(np.asarray(rec.cum_triggers)[:, i], cum)
        np.testing.assert_array_equal(np.asarray(rec.cum_updates)[:, i], cum)
    assert 3 <= cum[-1] < horizon  # the schedule is lazy but not idle
    # The policy only changes at an update.
    moved = np.any(actions[1:] != actions[:-1], axis=1)
    assert not np.any(moved & ~trig[:-1])


# --------------------------------------------------------------------------------------------
# The joint LCB and its minimiser
# --------------------------------------------------------------------------------------------


def test_joint_lcb_minimiser_against_brute_force(x64):
    layout = factor.FactorLayout(3, 3, ((0, 1), (1, 2)), ((0, 1), (1, 2)))
    structure, prob = _factor_problem(jnp.float64, layout=layout, seed=7)
    p = factor.joint_dim(structure)
    rng = np.random.default_rng(1)
    a = rng.normal(size=(p, p))
    v = a @ a.T + 0.5 * np.eye(p)
    inv = np.linalg.inv(v)
    theta_hat = rng.normal(size=p) * np.asarray(factor.joint_mask(prob))
    beta = 1.3

    def np_lcb(s):
        g = _np_psi(layout, prob, "linear", s).sum(axis=0)
        # sqrt(max(q, 1e-12)): gsjax.lcb's documented floor (finite gradient at g = 0)
        return g @ theta_hat - beta * math.sqrt(max(g @ inv @ g, 1e-12))

    verts = np.array(list(itertools.product((0.0, 1.0), repeat=3)))
    grid = np.array(list(itertools.product(np.linspace(0, 1, 11), repeat=3)))
    vvals = np.array([np_lcb(x) for x in verts])
    gvals = np.array([np_lcb(x) for x in grid])
    assert vvals.min() <= gvals.min() + 1e-12  # concave: the minimum is at a vertex
    value = lambda s: J.joint_lcb_value(structure, prob, s, jnp.asarray(theta_hat),
                                        jnp.asarray(inv), jnp.asarray(beta))
    samples = grid[::37]  # one program for all of them (eagerly, each operation compiles alone)
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(value))(jnp.asarray(samples))),
                               [np_lcb(x) for x in samples], rtol=1e-12, atol=1e-12)
    s0 = jnp.full((3,), 0.5)
    free = jnp.ones((3,), bool)
    s, val, _ = jax.jit(lambda: lcb.minimise_vertices(lcb.Objective(value), s0, free))()
    np.testing.assert_allclose(float(val), vvals.min(), rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(s), verts[np.argmin(vvals)])
    s_pgd, val_pgd, _ = jax.jit(lambda: lcb.minimise_objective_pgd(
        jax.random.key(0), value, s0, free, num_steps=200, num_starts=8, learning_rate=0.05,
        optimizer="adam", include_current=True))()
    assert np.all((np.asarray(s_pgd) >= 0) & (np.asarray(s_pgd) <= 1))
    assert float(val_pgd) >= vvals.min() - 1e-9  # cannot beat the exact minimum
    np.testing.assert_allclose(float(val_pgd), vvals.min(), rtol=1e-3, atol=1e-3)


def test_k1_joint_equals_nodewise(x64):
    """One node, one factor: the joint estimator IS the node's estimator, step for step."""
    layout = factor.clique_layout(1, 3)
    structure, prob = _factor_problem(jnp.float64, layout=layout, seed=2)
    params = _params(1, jnp.float64)
    key = jax.random.key(5)
    out = {}
    for name in ("lazy", "joint_lazy"):
        algo = make(name, structure, AgentSpec())
        out[name] = jax.jit(
            lambda a=algo: runner.run(key, a, structure, prob, params, 1.0, 60, 1)
        )()[1:]
    (t_l, r_l), (t_j, r_j) = out["lazy"], out["joint_lazy"]
    np.testing.assert_array_equal(np.asarray(r_l.action), np.asarray(r_j.action))
    np.testing.assert_array_equal(np.asarray(t_l.updates), np.asarray(t_j.updates))


def test_joint_on_a_nodewise_problem_is_blockdiagonal(x64):
    """A problem that is not a factor graph: one factor per criterion, Psi block-diagonal."""
    from gsjax import graphs

    scopes = graphs.block_scopes(3, 2)
    structure = P.make_structure(scopes, "linear", "independent")
    prob = P.make_problem(jax.random.key(0), structure, scopes, dtype=jnp.float64)
    s = jnp.asarray([0.1, 0.9, 0.3, 0.4, 0.7, 0.2])
    psi = np.asarray(factor.joint_features(structure, prob, s))
    ref = np.zeros((3, 6))
    for i in range(3):
        ref[i, 2 * i: 2 * i + 2] = np.asarray(s)[2 * i: 2 * i + 2]
    np.testing.assert_array_equal(psi, ref)
    assert "joint_lazy" in REGISTRY and "joint_linucb" in REGISTRY


def test_factor_constructors_name_the_bad_argument():
    """Explicit w* rows are checked per FACTOR (LAYOUT's factors have 3, 2, 1 linear features);
    a bad layout names its field."""
    structure, _ = factor.make_factor_structure(LAYOUT, "linear", "independent")
    make = lambda values: factor.make_factor_problem(  # noqa: E731
        jax.random.key(0), structure, LAYOUT, theta_distribution="explicit", theta_values=values)
    w = [[1.0, -2.0, 0.5], [0.25, -1.0], [3.0]]
    prob = make(w)
    np.testing.assert_array_equal(np.asarray(factor.joint_theta(prob)).reshape(3, 3),
                                  [[1.0, -2.0, 0.5], [0.25, -1.0, 0.0], [3.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match=r"make_factor_problem: theta_values: expected F = 3 "
                                         r"rows \(one per factor\), got 2"):
        make(w[:2])
    with pytest.raises(ValueError, match=r"make_factor_problem: theta_values\[1\]: .* factor 1 "
                                         r"has 2 linear features"):
        make([w[0], [1.0], w[2]])
    with pytest.raises(ValueError, match=r"make_factor_problem: theta_values\[2\]\[0\]: must be "
                                         r"finite"):
        make([w[0], w[1], [float("nan")]])
    # make_problem's keyword checks hold here too (they ran silently before)
    fac = lambda **kw: factor.make_factor_problem(jax.random.key(0), structure, LAYOUT, **kw)  # noqa: E731
    for kw, match in ((dict(s0=2.0), r"make_factor_problem: s0: .*<= 1"),
                      (dict(noise_sigma=[0.5] * 3), r"make_factor_problem: noise_sigma: expected "
                                                    r"a scalar or k \(criteria"),
                      (dict(theta_scale=-1.0), r"make_factor_problem: theta_scale: .*> 0"),
                      (dict(theta_distribution="x"), r"make_factor_problem: theta_distribution: "
                                                     r"unknown theta distribution 'x'"),
                      (dict(dtype=jnp.int32), r"make_factor_problem: dtype")):
        with pytest.raises(ValueError, match=match):
            fac(**kw)
    with pytest.raises(TypeError, match="theta_seed"):
        fac(theta_seed=1)
    bad = LAYOUT._replace(factor_coords=((0, 1, 1), (2, 3), (4,)))
    with pytest.raises(ValueError, match=r"layout.factor_coords\[0\]: .*got \(0, 1, 1\)"):
        factor.node_scopes(bad)
    with pytest.raises(ValueError, match=r"make_factor_structure: mixing: unknown mixing 'x'"):
        factor.make_factor_structure(LAYOUT, "linear", "independent", mixing="x")


# --------------------------------------------------------------------------------------------
# Configs and the command line
# --------------------------------------------------------------------------------------------


def _raw():
    return {
        "name": "f",
        "problem": {"environment": "factor", "features": "linear",
                    "factor": {"num_coords": 3, "num_nodes": 4, "layout": "explicit",
                               "factors": [{"coords": [0, 1], "nodes": [0, 1, 2]},
                                           {"coords": [2], "nodes": [2, 3]}]},
                    "theta": {"distribution": "explicit", "values": [[0.1, -0.2], [0.3]]}},
        "algorithms": {"lazy": {}, "joint_lazy": {}},
    }


def test_factor_config_parses_and_round_trips():
    from gsjax.config import config_to_dict, num_coords, num_criteria

    cfg = parse_config(_raw())
    assert cfg.problem.environment == "factor" and cfg.problem.factor.factors[1] == ((2,), (2, 3))
    assert num_criteria(cfg) == 4 and num_coords(cfg) == 3
    assert parse_config(config_to_dict(cfg)) == cfg


@pytest.mark.parametrize("mutate,field", [
    (lambda r: r["problem"]["factor"].update(num_nodes=0), "problem.factor.num_nodes"),
    (lambda r: r["problem"]["factor"].update(mixing="random"), "problem.factor.mixing"),
    (lambda r: r["problem"]["factor"].update(layout="ring"), "problem.factor.layout"),
    (lambda r: r["problem"]["factor"].update(bogus=1), "problem.factor.bogus"),
    (lambda r: r["problem"]["factor"]["factors"][0].update(coords=[0, 3]),
     "problem.factor.factors[0].coords[1]"),
    (lambda r: r["problem"]["factor"]["factors"][1].update(nodes=[2, 2]),
     "problem.factor.factors[1].nodes"),
    (lambda r: r["problem"]["factor"]["factors"][1].update(nodes=[2]), "problem.factor.factors"),
    (lambda r: r["problem"]["factor"].update(layout="clique"), "problem.factor.factors"),
    (lambda r: r["problem"].pop("factor"), "problem.factor"),
    (lambda r: r["problem"].update(structure="blocks"), "problem.structure"),
    (lambda r: r["problem"].update(num_blocks=2), "problem.num_blocks"),
    (lambda r: r["problem"]["theta"].update(values=[[0.1], [0.3]]), "problem.theta.values[0]"),
    (lambda r: r["problem"]["theta"].update(values=[[0.1, 0.2]]), "problem.theta.values"),
    (lambda r: r["problem"].update(s0=[0.5, 0.5]), "problem.s0"),
    (lambda r: r["problem"].update(environment="linear", structure="blocks", num_blocks=1,
                                   block_dim=1), "problem.factor"),
])
def test_bad_factor_config_names_the_field(mutate, field):
    raw = _raw()
    mutate(raw)
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    assert e.value.field == field, e.value


def test_gsjax_run_end_to_end(tmp_path):
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "configs" / "figure2_joint.toml"
    out = tmp_path / "run"
    assert cli.main(["run", str(path), "--seeds", "2", "--horizon", "50", "--out", str(out),
                     "--quiet"]) == 0
    s = json.loads((out / "summary.json").read_text())
    names = set(s["algorithms"])
    assert {"lazy", "joint_lazy"} <= names
    k = s["meta"]["num_criteria"]
    for a in s["algorithms"].values():
        assert np.isfinite(a["prediction_regret"]["mean"]) and a["prediction_regret"]["mean"] >= -1e-4
        assert len(a["updates_per_criterion"]["mean"]) == k
    j = s["algorithms"]["joint_lazy"]["updates_per_criterion"]["mean"]
    assert len(set(j)) == 1  # a joint update counts for every node
    assert s["meta"]["factor"]["d_eff"] * k == s["meta"]["factor"]["nodewise_dims"]
