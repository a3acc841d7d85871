"""The compacted runner (solver cost follows the triggers) against the simple `where` form."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import graphs, runner
from gsjax import problem as P
from gsjax.algorithms import AgentSpec, make

S, T = 12, 60


def _setup(make_params, dtype, solver, graph):
    if graph:
        scopes = graphs.graph_scopes(6, graphs.chain_edges(6))
    else:
        scopes = graphs.block_scopes(4, 2)
    structure = P.make_structure(scopes, "linear", "independent")
    prob = P.make_problem(jax.random.key(5), structure, scopes, noise_sigma=0.4, dtype=dtype)
    k = structure.num_criteria
    params = make_params(k, dtype, lambda_reg=np.linspace(0.05, 1.5, k), beta=0.7)
    spec = AgentSpec(solver=solver, pgd_steps=15, pgd_starts=3)
    return structure, prob, params, spec


def _both(kind, structure, prob, params, spec, buffer, per_seed=False):
    algo = make(kind, structure, spec)
    root = jax.random.key(9)
    args = (root, np.arange(S), algo, structure, prob, params, 0.3, T, 1, per_seed)
    ref = runner.sweep(*args, compact=False)
    got = runner.sweep(*args, compact=True, buffer=buffer)
    return ref, got


@pytest.mark.parametrize("kind", ["lazy", "async_lazy"])
@pytest.mark.parametrize("buffer", [2, 5, S])
def test_vertex_solver_bit_identical(make_params, kind, buffer):
    structure, prob, params, spec = _setup(make_params, jnp.float32, "vertex", graph=False)
    ref, got = _both(kind, structure, prob, params, spec, buffer)
    assert int(np.sum(ref.totals.reoptimisations)) > S  # several seeds re-optimise, in chunks
    for a, b in zip(jax.tree.leaves((ref.totals, ref.records)), jax.tree.leaves((got.totals, got.records))):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("buffer", [2, 5])
def test_nonzero_path_for_many_seeds_is_the_same(make_params, monkeypatch, buffer):
    """Beyond ``TOP_K_SEEDS`` seeds a device the chunks come from ``jnp.nonzero``: forced here
    (threshold 0), the run is still the ``where`` form's, bit for bit."""
    monkeypatch.setattr(runner, "TOP_K_SEEDS", 0)
    structure, prob, params, spec = _setup(make_params, jnp.float32, "vertex", graph=False)
    ref, got = _both("lazy", structure, prob, params, spec, buffer)
    assert int(np.sum(ref.totals.reoptimisations)) > S
    for a, b in zip(jax.tree.leaves((ref.totals, ref.records)), jax.tree.leaves((got.totals, got.records))):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kind", ["lazy", "async_lazy"])
def test_pgd_solver_same_decisions(make_params, kind):
    """PGD: XLA fuses the solver differently inside the select form, so float results agree to
    rounding (measured: 3e-7 in float32); every count is identical."""
    structure, prob, params, spec = _setup(make_params, jnp.float32, "pgd", graph=True)
    ref, got = _both(kind, structure, prob, params, spec, buffer=4)
    for f in ("updates", "changes", "triggers", "reoptimisations"):
        np.testing.assert_array_equal(getattr(ref.totals, f), getattr(got.totals, f), err_msg=f)
    np.testing.assert_allclose(ref.records.action, got.records.action, rtol=0, atol=1e-5)
    np.testing.assert_allclose(ref.totals.prediction_regret, got.totals.prediction_regret, rtol=1e-5)
    assert np.all(ref.totals.max_lcb_residual > 0)  # PGD's residuals reach the totals
    np.testing.assert_allclose(ref.totals.max_lcb_residual, got.totals.max_lcb_residual,
                               rtol=1e-3, atol=1e-6)


def test_problem_per_seed(make_params):
    structure, prob, params, spec = _setup(make_params, jnp.float32, "vertex", graph=False)
    keys = jax.vmap(jax.random.fold_in, (None, 0))(jax.random.key(1), jnp.arange(S))
    scopes = graphs.block_scopes(4, 2)
    probs = jax.vmap(lambda k: P.make_problem(k, structure, scopes, noise_sigma=0.4))(keys)
    ref, got = _both("async_lazy", structure, probs, params, spec, buffer=3, per_seed=True)
    for a, b in zip(jax.tree.leaves((ref.totals, ref.records)), jax.tree.leaves((got.totals, got.records))):
        np.testing.assert_array_equal(a, b)


def test_linucb_always_solves_and_matches(make_params):
    structure, prob, params, spec = _setup(make_params, jnp.float32, "vertex", graph=True)
    ref, got = _both("linucb", structure, prob, params, spec, buffer=4)
    np.testing.assert_array_equal(ref.records.action, got.records.action)
    assert np.all(got.totals.reoptimisations == T)


def test_problem_per_seed_shared_fields(make_params):
    """A per-seed problem drawn with :data:`gsjax.problem.DRAW_AXES` keeps the structure's
    fields once; its sweeps (compacted and not) equal those of the same problems with every
    field repeated per seed, bit for bit, and its rows are the single-seed draws."""
    structure, _, params, spec = _setup(make_params, jnp.float32, "vertex", graph=False)
    keys = jax.vmap(jax.random.fold_in, (None, 0))(jax.random.key(1), jnp.arange(S))
    scopes = graphs.block_scopes(4, 2)
    draw = lambda k: P.make_problem(k, structure, scopes, noise_sigma=0.4)  # noqa: E731
    full = jax.vmap(draw)(keys)
    split = jax.vmap(draw, out_axes=P.DRAW_AXES)(keys)
    assert split.scopes.shape == (4, 2) and split.theta.shape[0] == S
    axes = P.seed_axes(split)
    assert (axes.scopes, axes.s0, axes.theta, axes.loss_star) == (None, None, 0, 0)
    assert all(a == 0 for a in P.seed_axes(full) if a is not None)
    one = P.seed_rows(split, 3)
    for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(draw(keys[3]))):
        np.testing.assert_array_equal(a, b)
    for compact in (False, True):
        algo = make("async_lazy", structure, spec)
        args = (jax.random.key(9), np.arange(S), algo, structure)
        rest = (params, 0.3, T, 1, True)
        ref = runner.sweep(*args, full, *rest, compact=compact, buffer=3)
        got = runner.sweep(*args, split, *rest, compact=compact, buffer=3)
        for a, b in zip(jax.tree.leaves((ref.totals, ref.records)),
                        jax.tree.leaves((got.totals, got.records))):
            np.testing.assert_array_equal(a, b)


def test_draw_axes_refuse_a_drawn_shared_field():
    """``DRAW_AXES`` keeps ``s0`` shared: a draw whose ``s0`` depends on its key is refused."""
    scopes = graphs.block_scopes(2, 2)
    structure = P.make_structure(scopes, "linear", "independent")

    def draw(k):
        p = P.make_problem(k, structure, scopes)
        return p._replace(s0=jax.random.uniform(k, p.s0.shape))

    keys = jax.vmap(jax.random.fold_in, (None, 0))(jax.random.key(1), jnp.arange(3))
    with pytest.raises(ValueError, match="out_axes"):
        jax.vmap(draw, out_axes=P.DRAW_AXES)(keys)
