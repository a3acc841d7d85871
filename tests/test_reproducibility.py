"""A seed's run does not depend on the batch it runs in, nor on record_every (DESIGN section 3)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import graphs, runner
from gsjax import problem as P
from gsjax.algorithms import AgentSpec, make

HORIZON = 40
CASES = {
    # vertex solver: the exact path; PGD: random starts drawn from the per-round update key.
    "lazy-vertex": ("lazy", AgentSpec()),
    "async_lazy-pgd": ("async_lazy", AgentSpec(solver="pgd", pgd_steps=10, pgd_starts=3)),
}


def _setup(make_params, name):
    kind, spec = CASES[name]
    scopes = graphs.graph_scopes(5, graphs.chain_edges(5))
    structure = P.make_structure(scopes, "linear", "correlated")
    prob = P.make_problem(jax.random.key(2), structure, scopes, noise_sigma=0.4)
    params = make_params(5, jnp.float32, lambda_reg=0.3, beta=0.8)
    return make(kind, structure, spec), structure, prob, params


def _row(tree, i):
    return jax.tree.map(lambda x: np.asarray(x)[i], tree)


def _assert_trees_equal(a, b):
    for name, x, y in zip(a._fields, a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=name)


def _check_batches(make_params, name, alone_ids, batch_sizes=(1, 4, 8)):
    """Rows of sweeps over seed ids [0..S-1] and single-seed sweeps [i] equal the 8-seed rows."""
    algo, structure, prob, params = _setup(make_params, name)
    root = jax.random.key(17)
    sweeps = {
        size: runner.sweep(root, list(range(size)), algo, structure, prob, params, 0.5, HORIZON)
        for size in batch_sizes
    }
    full = sweeps[8]
    # The seeds do differ from each other (the comparisons below are not vacuous).
    assert not np.array_equal(full.records.action[0], full.records.action[1])
    for size, res in sweeps.items():
        for i in range(size):  # includes seed_ids [0] (batch of 1), [0..3]
            _assert_trees_equal(_row(res.totals, i), _row(full.totals, i))
            _assert_trees_equal(_row(res.records, i), _row(full.records, i))
    # Batch size 1: runner.sweep once, then the same compiled sweep for the other ids.
    one = runner.sweep(root, [alone_ids[0]], algo, structure, prob, params, 0.5, HORIZON)
    results = [(alone_ids[0], one.totals, one.records)]
    fn = runner.make_sweep(algo, structure, HORIZON)
    for i in alone_ids[1:]:
        keys = runner.seed_keys(root, jnp.asarray([i], jnp.uint32))
        tot, rec = jax.device_get(fn(keys, prob, params, jnp.asarray(0.5, jnp.float32)))
        results.append((i, tot, rec))
    for i, tot, rec in results:
        _assert_trees_equal(_row(tot, 0), _row(full.totals, i))
        _assert_trees_equal(_row(rec, 0), _row(full.records, i))


def test_seed_independent_of_batch_vertex(make_params):
    _check_batches(make_params, "lazy-vertex", alone_ids=list(range(8)))


def test_seed_independent_of_batch_size_ge2_pgd(make_params):
    """PGD: batches of 2, 4 and 8 agree bit for bit (ids [5, 2] in a batch of two as well)."""
    algo, structure, prob, params = _setup(make_params, "async_lazy-pgd")
    root = jax.random.key(17)
    full = runner.sweep(root, list(range(8)), algo, structure, prob, params, 0.5, HORIZON)
    four = runner.sweep(root, list(range(4)), algo, structure, prob, params, 0.5, HORIZON)
    two = runner.sweep(root, [5, 2], algo, structure, prob, params, 0.5, HORIZON)
    for i in range(4):
        _assert_trees_equal(_row(four.totals, i), _row(full.totals, i))
        _assert_trees_equal(_row(four.records, i), _row(full.records, i))
    for row, i in enumerate([5, 2]):
        _assert_trees_equal(_row(two.totals, row), _row(full.totals, i))
        _assert_trees_equal(_row(two.records, row), _row(full.records, i))


@pytest.mark.slow  # -m slow; the default run keeps the vertex and batch-size PGD versions
def test_seed_alone_equals_batch_row_pgd(make_params):
    """runner.sweep runs a single seed as a padded batch of two, so with PGD (whose float
    results XLA computes differently in a size-1 vmap) a seed alone still equals its row."""
    algo, structure, prob, params = _setup(make_params, "async_lazy-pgd")
    root = jax.random.key(17)
    full = runner.sweep(root, list(range(8)), algo, structure, prob, params, 0.5, HORIZON)
    for i in range(8):
        one = runner.sweep(root, [i], algo, structure, prob, params, 0.5, HORIZON)
        assert np.asarray(one.records.action).shape[0] == 1
        _assert_trees_equal(_row(one.totals, 0), _row(full.totals, i))
        _assert_trees_equal(_row(one.records, 0), _row(full.records, i))


@pytest.mark.parametrize("name", sorted(CASES))
def test_record_every_does_not_change_the_run(make_params, name):
    algo, structure, prob, params = _setup(make_params, name)
    root = jax.random.key(3)
    every1 = runner.sweep(root, [0, 1], algo, structure, prob, params, 0.5, HORIZON, 1)
    every5 = runner.sweep(root, [0, 1], algo, structure, prob, params, 0.5, HORIZON, 5)
    _assert_trees_equal(every1.totals, every5.totals)
    assert np.asarray(every5.records.action).shape[1] == HORIZON // 5
    common = np.arange(4, HORIZON, 5)  # rounds 5, 10, ..., T
    sub = jax.tree.map(lambda x: np.asarray(x)[:, common], every1.records)
    _assert_trees_equal(sub, every5.records)
    # Cumulative records end at the totals.
    np.testing.assert_array_equal(np.asarray(every5.records.cum_regret)[:, -1],
                                  np.asarray(every5.totals.prediction_regret))
    np.testing.assert_array_equal(np.asarray(every5.records.cum_movement)[:, -1],
                                  np.asarray(every5.totals.movement_cost))
