"""Chunked sweeps: one compiled chunk reused for every chunk, numbers equal to one chunk."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import graphs, runner
from gsjax import problem as P
from gsjax.algorithms import AgentSpec, make

T = 60


def _setup(make_params):
    scopes = graphs.graph_scopes(5, graphs.chain_edges(5))
    structure = P.make_structure(scopes, "linear", "independent")
    prob = P.make_problem(jax.random.key(2), structure, scopes, noise_sigma=0.4)
    params = make_params(5, jnp.float32, lambda_reg=np.linspace(0.05, 1.0, 5), beta=0.8)
    return structure, prob, params


def _equal(a, b):
    for x, y in zip(jax.tree.leaves((a.totals, a.records)), jax.tree.leaves((b.totals, b.records))):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("kind,compact", [("lazy", True), ("async_lazy", False), ("linucb", None)])
def test_chunked_equals_whole(make_params, kind, compact):
    structure, prob, params = _setup(make_params)
    algo = make(kind, structure, AgentSpec(solver="pgd", pgd_steps=8, pgd_starts=2))
    args = (jax.random.key(4), np.arange(6), algo, structure, prob, params, 0.5, T, 5)
    whole = runner.sweep(*args, compact=compact)
    seen = []
    chunked = runner.sweep(*args, compact=compact, chunk_rounds=15,
                           progress=lambda done, total: seen.append((done, total)))
    _equal(whole, chunked)
    assert seen == [(15, T), (30, T), (45, T), (60, T)]
    assert np.asarray(chunked.records.action).shape == (6, T // 5, 5)


def test_chunk_is_traced_once(make_params, monkeypatch):
    """The chunk function is traced (compiled) once and reused for every chunk."""
    structure, prob, params = _setup(make_params)
    algo = make("lazy", structure, AgentSpec())
    traces = []
    real = runner.advance_compact

    def counting(*a, **k):
        traces.append(1)
        return real(*a, **k)

    monkeypatch.setattr(runner, "advance_compact", counting)
    runner.sweep(jax.random.key(0), np.arange(4), algo, structure, prob, params, 0.5, T, 5,
                 compact=True, chunk_rounds=10)
    assert len(traces) == 1  # 6 chunks, one trace


@pytest.mark.parametrize("bad", [7, 0, 12])
def test_bad_chunk_sizes(make_params, bad):
    structure, prob, params = _setup(make_params)
    algo = make("lazy", structure, AgentSpec())
    with pytest.raises(ValueError, match="chunk_rounds"):
        runner.sweep(jax.random.key(0), np.arange(2), algo, structure, prob, params, 0.5, T, 5,
                     chunk_rounds=bad)


def test_auto_chunk():
    assert runner.auto_chunk(10_000, 50) == 500
    assert runner.auto_chunk(300, 1) == 15
    assert runner.auto_chunk(7, 7) == 7
    for h, r in [(10_000, 50), (300, 1), (1000, 10), (97, 1)]:
        c = runner.auto_chunk(h, r)
        assert h % c == 0 and c % r == 0 and h // c <= 20
