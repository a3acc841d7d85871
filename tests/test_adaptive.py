"""Adaptive graph refinement (Section 5.2): float64 references, closed forms, statistics.

Every expected value is computed independently here, in NumPy float64, from the played actions
and the observed feedback: super-graph features written out from Example 1 / the linear map,
ridge regression on the kept features only, the sparsity test, the LCB of the reduced problem,
its minimiser by brute force, and the exact conditional law of the warm-up estimate (the
warm-up design is independent of the noise, so ``theta_hat | X ~ N(V^{-1} X^T X theta,
sigma^2 V^{-1} X^T X V^{-1})``).
"""

from __future__ import annotations

import dataclasses

import itertools
import json
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import cli, graphs, lcb, runner
from gsjax import problem as P
from gsjax.algorithms import AgentParams, AgentSpec
from gsjax.algorithms import adaptive as A
from gsjax.config import ConfigError, parse_config

K = 5
EDGES = [(0, 1), (1, 2), (2, 3), (0, 4)]  # true graph: a path plus a pendant node


def _params(k, dtype, lam=1.0, beta=1.0):
    vec = lambda v: jnp.full((k,), v, dtype)
    sca = lambda v: jnp.asarray(v, dtype)
    return AgentParams(lambda_reg=vec(lam), beta=vec(beta), pgd_lr=sca(0.05),
                       log_trigger=sca(math.log(2.0)), oful_delta=sca(0.05), oful_S=sca(1.0),
                       oful_sigma=vec(0.5))


def _setup(features, dtype, gamma, sigma, num_seeds, seed=0):
    scopes = graphs.graph_scopes(K, EDGES)
    structure = P.make_structure(scopes, features, "independent")
    make = lambda key: P.make_problem(key, structure, scopes, theta_distribution="signal",
                                      theta_scale=gamma, noise_sigma=sigma, dtype=dtype)
    keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(jax.random.key(seed + 100),
                                                            jnp.arange(num_seeds))
    return scopes, structure, jax.jit(jax.vmap(make))(keys)  # as a config builds them


def _run(structure, problems, spec, adaptive, params, horizon, num_seeds, record_every=1):
    algo = A.make(structure, dataclasses.replace(spec, **adaptive))
    keys = runner.seed_keys(jax.random.key(7), jnp.arange(num_seeds, dtype=jnp.uint32))
    f = jax.jit(jax.vmap(lambda key, prob: runner.run(key, algo, structure, prob, params, 1.0,
                                                      horizon, record_every)))
    state, totals, records = f(keys, problems)
    return keys, state, totals, records


def _np_super_features(kind, s, own):
    """Super-graph features of one criterion at the state ``s`` (own coordinate first)."""
    n = len(s)
    others = [j for j in range(n) if j != own]
    if kind == "linear":
        return np.array([s[own]] + [s[j] for j in others]), others
    so = s[own]
    return np.array([1.0, so, so * so] + [s[j] for j in others] + [so * s[j] for j in others]), others


def _np_kept_columns(kind, kept_slots, n):
    """Feature columns of the kept slots (slot 0 = own; others in slot order)."""
    if kind == "linear":
        return [0] + [j for j in range(1, n) if kept_slots[j]]
    return [0, 1, 2] + [2 + j for j in range(1, n) if kept_slots[j]] + \
        [n + 1 + j for j in range(1, n) if kept_slots[j]]


def _np_edge_stat(kind, th, n):
    if kind == "linear":
        return np.abs(th[1:])
    return np.maximum(np.abs(th[3:n + 2]), np.abs(th[n + 2:]))


def _feedback(keys, structure, problems, actions):
    """Observed y (S, T, k): the environment's draws with the runner's keys."""
    horizon = actions.shape[1]

    def one(key, prob, acts):
        def obs(t, a):
            return P.observe(P.round_draws(key, t), structure, prob, a).y
        return jax.vmap(obs)(jnp.arange(1, horizon + 1), acts)

    return np.asarray(jax.jit(jax.vmap(one))(keys, problems, actions), np.float64)


TAU, HORIZON, GAMMA, LAM, BETA = 30, 40, 0.3, 1.0, 0.7
_CACHE = {}


def _batch(features, solver, num_seeds=8):
    """One vmapped float64 batch of seeds (shared by the tests that read it)."""
    if features not in _CACHE:
        with jax.enable_x64(True):
            _, structure, probs = _setup(features, jnp.float64, GAMMA, sigma=0.6,
                                         num_seeds=num_seeds)
            params = _params(K, jnp.float64, lam=LAM, beta=BETA)
            spec = AgentSpec(solver=solver, pgd_steps=5, pgd_starts=2)
            keys, state, _, rec = _run(structure, probs, spec, dict(warmup=TAU, signal_gamma=GAMMA),
                                       params, HORIZON, num_seeds)
            actions = np.asarray(rec.action, np.float64)  # (S, T, n)
            ys = _feedback(keys, structure, probs, jnp.asarray(actions))
        _CACHE[features] = (structure, probs, params, state, actions, ys)
    return _CACHE[features]


@pytest.mark.parametrize("features,solver", [
    ("linear", "vertex"),
    pytest.param("quadratic", "pgd", marks=pytest.mark.slow),  # -m slow: 14 s of PGD compiles
])
def test_restricted_statistics_equal_reduced_ridge(x64, features, solver):
    tau, gamma, lam = TAU, GAMMA, LAM
    structure, probs, params, state, actions, ys = _batch(features, solver)
    num_seeds = actions.shape[0]
    own = np.asarray(probs.scopes)[:, :, 0]
    keep_state = np.asarray(state.graph)
    graphs_found = set()
    for s in range(num_seeds):
        for i in range(K):
            rows = [_np_super_features(features, a, own[s, i]) for a in actions[s]]
            X = np.stack([r[0] for r in rows])
            y = ys[s, :, i]
            d = X.shape[1]
            # The sparsity test on the ridge fit of the first tau rounds, all features.
            Xw, yw = X[:tau], y[:tau]
            th_w = np.linalg.solve(lam * np.eye(d) + Xw.T @ Xw, Xw.T @ yw)
            kept = np.concatenate([[True], _np_edge_stat(features, th_w, K) > gamma / 2])
            np.testing.assert_array_equal(keep_state[s, i], kept)
            # The reduced ridge statistics over all rounds, kept features only.
            cols = _np_kept_columns(features, kept, K)
            XK = X[:, cols]
            V = lam * np.eye(len(cols)) + XK.T @ XK
            inv = np.linalg.inv(V)
            th = inv @ (XK.T @ y)
            st = jax.tree_util.tree_map(lambda a: np.asarray(a[s, i], np.float64), state.stats)
            V_code = st.data_gram[np.ix_(cols, cols)] + st.lam * np.eye(len(cols))
            np.testing.assert_allclose(V_code, V, rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(st.inv[np.ix_(cols, cols)], inv, rtol=1e-8, atol=1e-10)
            np.testing.assert_allclose(st.logdet, np.linalg.slogdet(V)[1], rtol=1e-10)
            fkeep = np.asarray(A.feature_keep(features, jnp.asarray(kept)[None]))[0]
            th_code = np.asarray(A.restricted_theta_hat(
                jax.tree_util.tree_map(lambda a: a[s, i][None], state.stats),
                jnp.asarray(fkeep)[None]))[0]
            np.testing.assert_allclose(th_code[cols], th, rtol=1e-8, atol=1e-10)
            dropped = np.setdiff1d(np.arange(d), cols)
            assert np.all(th_code[dropped] == 0.0)
        graphs_found.add(keep_state[s].tobytes())
    assert len(graphs_found) >= 2, "the seeds should find different graphs in one batch"


def test_masked_lcb_equals_reduced_numpy_lcb(x64):
    lam, beta = LAM, BETA
    structure, probs, params, state, actions, ys = _batch("linear", "vertex")
    num_seeds = actions.shape[0]
    sup = A.super_structure(structure)
    verts = np.array(list(itertools.product((0.0, 1.0), repeat=K)))

    @jax.jit  # one program for every seed (eagerly, each operation compiles on its own)
    def code(prob, st, keep):
        lprob = A.super_problem(structure, prob, keep)
        th_code = A.restricted_theta_hat(st, lprob.feat_mask)
        values = jax.vmap(lambda x: lcb.lcb_value(sup, lprob, x, th_code, st.inv, params.beta))(
            jnp.asarray(verts))
        # the policy after the last update: the reduced problem's exact LCB minimiser
        return values, lcb.minimise_vertex(sup, lprob, th_code, st.inv, params.beta, prob.s0,
                                           jnp.ones((K,), bool))[0]

    for s in range(num_seeds):
        prob = jax.tree_util.tree_map(lambda a: a[s], probs)
        st = jax.tree_util.tree_map(lambda a: a[s], state.stats)
        keep = state.graph[s]
        code_lcb, s_code = code(prob, st, keep)
        # NumPy: the reduced problem, criterion by criterion, features of the kept coordinates.
        own = np.asarray(prob.scopes)[:, 0]
        ref = np.zeros(len(verts))
        for i in range(K):
            others = [j for j in range(K) if j != own[i]]
            coords = [own[i]] + [others[j - 1] for j in range(1, K) if bool(keep[i, j])]
            XK = actions[s][:, coords]
            V = lam * np.eye(len(coords)) + XK.T @ XK
            th = np.linalg.solve(V, XK.T @ ys[s, :, i])
            inv = np.linalg.inv(V)
            phi = verts[:, coords]
            q = np.einsum("pi,ij,pj->p", phi, inv, phi)
            ref += phi @ th - beta * np.sqrt(np.maximum(q, 1e-12))
        np.testing.assert_allclose(np.asarray(code_lcb), ref, rtol=1e-9, atol=1e-9)
        # The policy after the last update is the reduced problem's exact LCB minimiser
        # (vertex solver; the last re-minimisation used the statistics of that round).
        assert np.isclose(ref[np.argmin(ref)], ref[int(np.argmax(
            np.all(verts == np.asarray(s_code), axis=1)))], rtol=1e-12, atol=1e-12)


def test_easy_instance_recovers_the_true_graph(x64):
    num_seeds, tau, gamma = 16, 200, 1.0
    _, structure, probs = _setup("linear", jnp.float64, gamma, sigma=0.1, num_seeds=num_seeds)
    _, state, totals, _ = _run(structure, probs, AgentSpec(), dict(warmup=tau, signal_gamma=gamma),
                               _params(K, jnp.float64), tau, num_seeds, record_every=tau)
    truth = np.asarray(jax.vmap(A.true_slots)(probs))
    np.testing.assert_array_equal(np.asarray(state.graph), truth)
    # The refinement round is the first re-optimisation, an update of every criterion.
    np.testing.assert_array_equal(np.asarray(totals.reoptimisations), 1)
    np.testing.assert_array_equal(np.asarray(totals.updates), 1)


def _cond_keep_probability(actions, probs, tau, gamma, sigma, lam):
    """P(slot kept | warm-up design), exact for linear features: (S, k, n-1)."""
    from math import erf

    ncdf = np.vectorize(lambda z: 0.5 * (1.0 + erf(z / math.sqrt(2.0))))
    theta = np.asarray(probs.theta, np.float64)
    scopes, smask = np.asarray(probs.scopes), np.asarray(probs.scope_mask)
    out = np.zeros((actions.shape[0], K, K - 1))
    for s in range(actions.shape[0]):
        for i in range(K):
            own = scopes[s, i, 0]
            order = [own] + [j for j in range(K) if j != own]
            X = actions[s, :tau][:, order]
            th_true = np.zeros(K)  # coefficients in super-slot order
            for c, m, v in zip(scopes[s, i], smask[s, i], theta[s, i]):
                if m:
                    th_true[order.index(c)] = v
            G = X.T @ X
            inv = np.linalg.inv(lam * np.eye(K) + G)
            mean = inv @ G @ th_true
            sd = sigma * np.sqrt(np.diag(inv @ G @ inv))
            h = gamma / 2
            p = 1.0 - (ncdf((h - mean) / sd) - ncdf((-h - mean) / sd))
            out[s, i] = p[1:]
    return out


def test_recovery_grows_with_warmup_and_matches_the_closed_form(x64):
    num_seeds, gamma, sigma, lam = 200, 0.5, 0.5, 1.0
    _, structure, probs = _setup("linear", jnp.float64, gamma, sigma=sigma,
                                 num_seeds=num_seeds, seed=1)
    truth = np.asarray(jax.vmap(A.true_slots)(probs))
    rates, ses = [], []
    zs = []
    for tau in (40, 320):
        _, state, _, rec = _run(structure, probs, AgentSpec(), dict(warmup=tau, signal_gamma=gamma),
                                _params(K, jnp.float64, lam=lam), tau, num_seeds)
        kept = np.asarray(state.graph)
        ok = np.all(kept == truth, axis=(1, 2))
        rates.append(ok.mean())
        ses.append(math.sqrt(max(ok.mean() * (1 - ok.mean()), 0.25 / num_seeds) / num_seeds))
        # Closed form: the kept indicator of each slot against its conditional probability
        # given the warm-up design; per-seed sums are independent across seeds.
        p = _cond_keep_probability(np.asarray(rec.action, np.float64), probs, tau, gamma,
                                   sigma, lam)
        dev = (kept[:, :, 1:].astype(float) - p).sum(axis=(1, 2))
        zs.append(dev.sum() / math.sqrt(np.sum(dev ** 2)))
    for (r0, s0), (r1, s1) in zip(zip(rates, ses), zip(rates[1:], ses[1:])):
        assert r1 > r0 - 3 * math.hypot(s0, s1), rates  # monotone, statistically
    assert rates[-1] > rates[0] + 3 * math.hypot(ses[0], ses[-1]), rates
    assert all(abs(z) < 4.0 for z in zs), zs


def _raw():
    return {
        "name": "a",
        "problem": {"structure": "graph", "graph": "chain", "num_nodes": 4,
                    "theta": {"distribution": "signal", "scale": 0.5, "per_seed": True}},
        "algorithms": {"lazy": {}, "adaptive": {"algorithm": "adaptive_lazy", "warmup": 20,
                                                "signal_gamma": 0.5}},
    }


def test_adaptive_config_parses_and_round_trips():
    from gsjax.config import config_hash, config_to_dict

    cfg = parse_config(_raw())
    a = cfg.algorithms[1].agent
    assert (a.warmup, a.signal_gamma, a.refined) == (20, 0.5, None)
    assert parse_config(config_to_dict(cfg)) == cfg
    # Configs without the adaptive keys keep their dicts (hence hashes): no None keys leak.
    assert "warmup" not in config_to_dict(cfg)["algorithms"]["lazy"]
    assert config_hash(cfg) == config_hash(parse_config(config_to_dict(cfg)))


@pytest.mark.parametrize("mutate,field", [
    (lambda r: r["algorithms"]["adaptive"].pop("warmup"), "algorithms.adaptive.warmup"),
    (lambda r: r["algorithms"]["adaptive"].update(warmup=-1), "algorithms.adaptive.warmup"),
    (lambda r: r["algorithms"]["adaptive"].update(warmup=2.5), "algorithms.adaptive.warmup"),
    (lambda r: r["algorithms"]["adaptive"].pop("signal_gamma"),
     "algorithms.adaptive.signal_gamma"),
    (lambda r: r["algorithms"]["adaptive"].update(signal_gamma=-0.1),
     "algorithms.adaptive.signal_gamma"),
    (lambda r: r["algorithms"]["adaptive"].update(refined="global"),
     "algorithms.adaptive.refined"),
    (lambda r: r["algorithms"]["lazy"].update(warmup=5), "algorithms.lazy.warmup"),
    (lambda r: r.update(agent={"warmup": 5}), "agent.warmup"),
    (lambda r: r.update(agent={"solver": "pgd"}) or r["problem"].update(features="rff"),
     "algorithms.adaptive.algorithm"),
    (lambda r: r["problem"].update(num_nodes=17), "agent.solver"),
    (lambda r: r["problem"]["theta"].update(distribution="signals"),
     "problem.theta.distribution"),
])
def test_bad_adaptive_config_names_the_field(mutate, field):
    raw = _raw()
    mutate(raw)
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    assert e.value.field == field, e.value


def test_gsjax_run_end_to_end(tmp_path):
    # The shipped config, cut to two entries (compile time) and a tiny run.
    import tomllib

    path = Path(__file__).resolve().parent.parent / "configs" / "adaptive_graph.toml"
    raw = tomllib.loads(path.read_text())
    keep = ("true_graph", "adaptive_async")
    lines = [f"{k} = {json.dumps(v)}" for k, v in raw.items() if not isinstance(v, dict)]
    for table in ("problem", "problem.theta", "problem.noise", "agent"):
        node = raw
        for part in table.split("."):
            node = node[part]
        lines += [f"[{table}]"] + [f"{k} = {json.dumps(v)}" for k, v in node.items()
                                   if not isinstance(v, dict)]
    for name in keep:
        lines += [f"[algorithms.{name}]"] + [f"{k} = {json.dumps(v)}"
                                             for k, v in raw["algorithms"][name].items()]
    cfg = tmp_path / "adaptive_small.toml"
    cfg.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    assert cli.main(["run", str(cfg), "--seeds", "2", "--horizon", "100", "--out", str(out),
                     "--set", "algorithms.adaptive_async.warmup=10", "--quiet"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert set(keep) == set(s["algorithms"])
    for a in s["algorithms"].values():
        assert np.isfinite(a["prediction_regret"]["mean"])
        assert a["prediction_regret"]["mean"] >= -1e-4
    # The refinement at round 10 is an update of every criterion; warm-up has none.
    upd = np.asarray(s["algorithms"]["adaptive_async"]["updates_per_criterion"]["mean"])
    assert np.all(upd >= 1)
    # The learned graph is in summary.json and, per seed, in arrays.npz.
    lg = s["algorithms"]["adaptive_async"]["learned_graph"]
    z = np.load(out / "arrays.npz")
    learned = z["adaptive_async/final/learned_neighbours"]
    truth = z["adaptive_async/final/true_neighbours"]
    assert learned.shape == (2, 8, 8)
    assert lg["exact_recovery"]["mean"] == np.mean(np.all(learned == truth, axis=(1, 2)))
    np.testing.assert_allclose(lg["neighbour_frequency"], learned.mean(0))
    assert "learned_graph" not in s["algorithms"]["true_graph"]


def test_sweep_reports_the_learned_graph_by_coordinate(x64, tmp_path):
    # A warm-up short enough that some seeds keep a wrong graph: the sweep's per-seed learned
    # graph (by coordinate) must be the run's kept super-scope slots mapped through the
    # super-graph's slot order written out here ([own] + the others ascending), and the
    # summary's recovery counts must follow from it; the final diagnostics survive the
    # arrays.npz round trip and a merge of two seed ranges.
    from gsjax import experiment
    from gsjax.runner import SweepResult

    num_seeds, tau, gamma = 12, 200, 0.5
    scopes, structure, probs = _setup("linear", jnp.float64, gamma, sigma=0.5,
                                      num_seeds=num_seeds)
    algo = A.make(structure, AgentSpec(warmup=tau, signal_gamma=gamma))
    params = _params(K, jnp.float64)
    res = runner.sweep(jax.random.key(7), np.arange(num_seeds), algo, structure, probs, params,
                       1.0, tau + 5, problem_per_seed=True)
    _, state, _, _ = _run(structure, probs, AgentSpec(), dict(warmup=tau, signal_gamma=gamma), params,
                          tau + 5, num_seeds)
    kept = np.asarray(state.graph)
    sc, sm = np.asarray(probs.scopes), np.asarray(probs.scope_mask)
    learned = np.zeros((num_seeds, K, K), bool)
    truth = np.zeros((num_seeds, K, K), bool)
    for s in range(num_seeds):
        for i in range(K):
            own = sc[s, i, 0]
            order = [own] + [j for j in range(K) if j != own]
            for slot, coord in enumerate(order):
                learned[s, i, coord] = kept[s, i, slot]
            truth[s, i, sc[s, i][sm[s, i]]] = True
    np.testing.assert_array_equal(res.final["learned_neighbours"], learned)
    np.testing.assert_array_equal(res.final["true_neighbours"], truth)
    exact = np.all(learned == truth, axis=(1, 2))
    assert 0 < exact.sum() < num_seeds, exact  # the case is informative both ways
    summ = experiment.learned_graph_summary(res.final)
    assert summ["exact_recovery"]["mean"] == pytest.approx(exact.mean())
    assert summ["false_neighbours"]["mean"] == pytest.approx((learned & ~truth).sum() / num_seeds)
    assert summ["missed_neighbours"]["mean"] == pytest.approx((~learned & truth).sum() / num_seeds)
    np.testing.assert_allclose(summ["neighbour_frequency"], learned.mean(0))
    np.testing.assert_array_equal(summ["true_neighbours"], truth[0].astype(int))
    # Two halves merged again give the same per-seed diagnostics.
    halves = [SweepResult(None, None, 0.0, 0.0, {k: v[sl] for k, v in res.final.items()})
              for sl in (slice(0, 5), slice(5, None))]
    joined = {k: np.concatenate([h.final[k] for h in halves]) for k in res.final}
    assert experiment.learned_graph_summary(joined) == summ
