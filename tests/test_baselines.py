"""The NumPy baselines of benchmarks/ run the same algorithms as gsjax, step for step (float64).

gsjax's own noise is injected into the baselines (the runner draws round t's noise from
``fold_in(fold_in(seed_key, t), 0)``), so actions, counts and totals must agree.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import graphs, runner
from gsjax import problem as P
from gsjax.algorithms import AgentSpec, make

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.numpy_baselines import run_loop, run_strong, run_vectorised  # noqa: E402

LOG2 = math.log(2.0)
VARIANTS = [("linucb", "global"), ("lazy", "global"), ("lazy", "own"), ("async_lazy", "global")]
IDS = [f"{k}-{r}" for k, r in VARIANTS]
BASELINES = {"loop": run_loop, "vectorised": run_vectorised}


def _gsjax_runs(kind, reference, spec_kw, structure, prob, params, move_cost, horizon, seeds):
    algo = make(kind, structure, AgentSpec(reference=reference, **spec_kw))
    root = jax.random.key(17)
    res = runner.sweep(root, np.arange(seeds), algo, structure, prob, params, move_cost, horizon, 1)

    def noise(seed_key):
        draw = lambda t: P.draw_noise(P.round_draws(seed_key, t), structure, prob)
        return jax.vmap(draw)(jnp.arange(1, horizon + 1))

    keys = runner.seed_keys(root, jnp.arange(seeds, dtype=jnp.uint32))
    eta = np.asarray(jax.jit(jax.vmap(noise))(keys))  # (S, T, k)
    return res, eta


def _check(res, out, act_atol):
    t = res.totals
    np.testing.assert_allclose(out["actions"], np.asarray(res.records.action), rtol=0, atol=act_atol)
    if act_atol == 0:
        np.testing.assert_array_equal(out["actions"], np.asarray(res.records.action))
    for field in ("updates", "changes", "triggers", "reoptimisations"):
        np.testing.assert_array_equal(out[field], np.asarray(getattr(t, field)), err_msg=field)
    np.testing.assert_allclose(out["prediction_regret"], t.prediction_regret, rtol=0, atol=1e-9)
    np.testing.assert_allclose(out["movement_cost"], t.movement_cost, rtol=0, atol=1e-9)


@pytest.mark.parametrize("kind,reference", VARIANTS, ids=IDS)
def test_blocks_vertex_match_gsjax(x64, make_params, kind, reference):
    seeds, horizon, move_cost = 3, 150, 0.7
    lambdas, betas = np.array([0.3183, 1.2718, 0.0577]), np.array([0.8, 1.3, 0.5])
    scopes = graphs.block_scopes(3, 2)
    structure = P.make_structure(scopes, "linear", "independent")
    prob = P.make_problem(jax.random.key(5), structure, scopes, noise_sigma=0.5,
                          dtype=jnp.float64)
    params = make_params(3, jnp.float64, lambda_reg=lambdas, beta=betas)
    res, eta = _gsjax_runs(kind, reference, {}, structure, prob, params, move_cost, horizon, seeds)
    if kind != "linucb":
        assert 0 < res.totals.reoptimisations.min() and res.totals.reoptimisations.max() < 50
    for name, fn in BASELINES.items():
        out = fn(kind, scopes.index, scopes.mask, "linear", np.asarray(prob.theta),
                 np.asarray(prob.s0), lambdas, betas, log_trigger=LOG2, horizon=horizon,
                 seeds=seeds, eta=eta, move_cost=move_cost, reference=reference,
                 dtype=np.float64, record_actions=True)
        _check(res, out, act_atol=0)
    # The strong baseline (seed axis last, closed-form 2x2 algebra): the same steps.
    out = run_strong(kind, scopes.index, np.asarray(prob.theta), np.asarray(prob.s0), lambdas,
                     betas, log_trigger=LOG2, horizon=horizon, seeds=seeds, eta=eta,
                     move_cost=move_cost, reference=reference, record_actions=True)
    _check(res, out, act_atol=0)


# lazy with the "own" reference is covered by the vertex test above; its PGD twin is -m slow.
_PGD_VARIANTS = [pytest.param(k, r, id=i, marks=[pytest.mark.slow] if (k, r) == ("lazy", "own") else [])
                 for (k, r), i in zip(VARIANTS, IDS)]


@pytest.mark.parametrize("kind,reference", _PGD_VARIANTS)
def test_chain_quadratic_pgd_match_gsjax(x64, make_params, kind, reference):
    """Chain of 5 nodes (padded scopes), quadratic features, PGD from the current state only
    (deterministic), 10 Adam steps, OFUL radius. Measured: actions agree to ~1e-15."""
    seeds, horizon, move_cost, lr = 2, 40, 1.0, 0.01
    scopes = graphs.graph_scopes(5, graphs.chain_edges(5))
    structure = P.make_structure(scopes, "quadratic", "independent")
    prob = P.make_problem(jax.random.key(2), structure, scopes, noise_sigma=0.3,
                          theta_scale=0.5, dtype=jnp.float64)
    lambdas = np.array([0.7, 0.31, 1.3, 0.45, 0.9])
    params = make_params(5, jnp.float64, lambda_reg=lambdas, pgd_lr=lr, oful_delta=0.1,
                         oful_S=1.0, oful_sigma=0.3)
    spec_kw = dict(solver="pgd", pgd_steps=10, pgd_starts=1, beta_mode="oful")
    res, eta = _gsjax_runs(kind, reference, spec_kw, structure, prob, params, move_cost,
                           horizon, seeds)
    if kind != "linucb":
        assert res.totals.reoptimisations.min() > 0
    actions = np.asarray(res.records.action)
    # lr 0.01 x 10 steps: PGD stops inside the box often, so its path is compared, not a corner.
    assert np.mean((actions > 1e-6) & (actions < 1 - 1e-6)) > 0.1
    for name, fn in BASELINES.items():
        out = fn(kind, scopes.index, scopes.mask, "quadratic", np.asarray(prob.theta),
                 np.asarray(prob.s0), lambdas, 0.0, log_trigger=LOG2, horizon=horizon,
                 seeds=seeds, eta=eta, move_cost=move_cost, reference=reference,
                 solver="pgd", pgd_steps=10, pgd_starts=1, pgd_lr=lr, beta_mode="oful",
                 oful_sigma=0.3, oful_delta=0.1, oful_S=1.0, loss_star=float(prob.loss_star),
                 dtype=np.float64, record_actions=True)
        _check(res, out, act_atol=1e-9)


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_generator_float32_smoke(name):
    """The benchmark's path: a NumPy Generator for noise and PGD starts, float32, 4 starts."""
    fn = BASELINES[name]
    scopes = graphs.graph_scopes(6, graphs.random_bounded_degree_edges(6, 3, 8, seed=0))
    k, m = scopes.index.shape
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(k, 2 * m + 1)).astype(np.float32)
    for kind in ("linucb", "lazy", "async_lazy"):
        out = fn(kind, scopes.index, scopes.mask, "quadratic", theta, np.full(6, 0.5), 0.5, 0.5,
                 horizon=12, seeds=3, rng=np.random.default_rng(1), solver="pgd", pgd_steps=5,
                 pgd_starts=4, loss_star=-1.0, dtype=np.float32, record_actions=True)
        assert out["actions"].dtype == np.float32 and out["actions"].shape == (3, 12, 6)
        assert np.all((out["actions"] >= 0) & (out["actions"] <= 1))
        assert out["prediction_regret"].dtype == np.float32
        assert np.all(np.isfinite(out["prediction_regret"]))
        assert out["seed_rounds"] == 36
        if kind == "linucb":
            np.testing.assert_array_equal(out["updates"], np.full((3, k), 12))


@pytest.mark.parametrize("kind,reference", VARIANTS, ids=IDS)
def test_strong_matches_vectorised_at_section7_2_size(kind, reference):
    """10 blocks of 2 (Section 7.2's shape), 32 seeds, 300 rounds, the same injected noise: the
    strong baseline takes the generic vectorised one's steps (float64, independent code)."""
    seeds, horizon = 32, 300
    scopes = graphs.block_scopes(10, 2)
    rng = np.random.default_rng(3)
    theta = rng.normal(size=(10, 2))
    lambdas = rng.uniform(0.01, 1.0, size=10)
    eta = 0.5 * rng.normal(size=(seeds, horizon, 10))
    kw = dict(log_trigger=LOG2, horizon=horizon, seeds=seeds, eta=eta, move_cost=1.0,
              reference=reference, record_actions=True)
    ref = run_vectorised(kind, scopes.index, None, "linear", theta, np.full(20, 0.5), lambdas,
                         0.5, dtype=np.float64, **kw)
    out = run_strong(kind, scopes.index, theta, np.full(20, 0.5), lambdas, 0.5, **kw)
    np.testing.assert_array_equal(out["actions"], ref["actions"])
    for field in ("updates", "changes", "triggers", "reoptimisations"):
        np.testing.assert_array_equal(out[field], ref[field], err_msg=field)
    for field in ("prediction_regret", "movement_cost"):
        np.testing.assert_allclose(out[field], ref[field], rtol=1e-12, atol=1e-9)
    if kind != "linucb":
        assert 0 < ref["reoptimisations"].min() and ref["reoptimisations"].max() < horizon
    # Drawing its own noise, it runs and counts as documented.
    own = run_strong(kind, scopes.index, theta, np.full(20, 0.5), lambdas, 0.5, horizon=20,
                     seeds=5, rng=np.random.default_rng(0))
    assert own["seed_rounds"] == 100 and own["updates"].shape == (5, 10)
