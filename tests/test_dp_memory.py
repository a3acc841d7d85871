"""The memory estimate of a DP run (issue 17): ``experiment.memory_needed`` does not trace the
DP (``dp.shapes_only``), yet its answer is what a run holds, and the DP's numbers after it are
those of vertex enumeration; ``dp.make_plan`` hands back the plan it made already."""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import dp, experiment, graphs, lcb, runner
from gsjax import problem as P
from gsjax.config import parse_config


def _ring(n):
    return [[i, (i + 1) % n] for i in range(n)]


def _config(solver, exact_ties=True, horizon=40):
    return parse_config({
        "name": "dp_memory", "seeds": 3, "horizon": horizon, "record_every": 10,
        "problem": {"structure": "graph", "graph": "edges", "num_nodes": 8, "edges": _ring(8),
                    "features": "linear", "noise": {"sigma": 0.3},
                    "theta": {"distribution": "normal", "scale": 0.5, "seed": 4,
                              "per_seed": True}},
        "agent": {"solver": solver, "beta": 0.6, "dp_exact_ties": exact_ties},
        "algorithms": {"linucb": {}, "lazy": {}, "async_lazy": {}}})


def _nbytes(tree) -> int:
    return sum(np.asarray(x).nbytes for x in jax.tree_util.tree_leaves(tree))


def _runs(cfg):
    """Each algorithm's sweep and what the run held (its largest carry, every record, the
    problem), from its arrays."""
    built = experiment.build(cfg)
    carries, records, out = [], 0, {}
    for ba in built.algorithms:
        seen = []
        res = runner.sweep(jax.random.key(cfg.root_seed), np.arange(cfg.seeds), ba.algo,
                           built.structure, built.problem, ba.params, ba.move_cost, cfg.horizon,
                           cfg.record_every, built.problem_per_seed,
                           chunk_rounds=cfg.horizon // 2,
                           on_chunk=lambda leaves, *_: seen.append(_nbytes(leaves)))
        carries.append(seen[-1])
        records += _nbytes(res.records)
        out[ba.name] = res
    return out, max(carries) + records + _nbytes(built.problem)


@pytest.mark.parametrize("exact_ties", [True, False], ids=["sequential", "levels"])
def test_estimate_without_tracing_the_dp_is_what_a_run_holds(exact_ties, monkeypatch):
    cfg = _config("dp", exact_ties)
    need = experiment.memory_needed(cfg)
    with monkeypatch.context() as m:  # the estimate with the DP traced
        m.setattr(dp, "shapes_only", contextlib.nullcontext)
        assert experiment.memory_needed(cfg) == need
    runs, held = _runs(cfg)
    assert need == held
    if exact_ties:  # the DP's numbers after the estimate: vertex enumeration's, every count
        vertex, _ = _runs(_config("vertex"))
        for name, res in runs.items():
            assert int(np.sum(res.totals.updates)) > 0
            for field in res.totals._fields:
                np.testing.assert_array_equal(getattr(vertex[name].totals, field),
                                              getattr(res.totals, field),
                                              err_msg=f"{name} totals.{field}")


def test_shapes_only_answers_with_the_shapes_of_the_dp():
    scopes = graphs.graph_scopes(8, _ring(8))
    structure = P.make_structure(scopes, "linear", "independent")
    problem = P.make_problem(jax.random.key(0), structure, scopes)
    plan = dp.make_plan(scopes, exact_ties=False)
    rng = np.random.default_rng(0)
    k, m = scopes.index.shape
    theta = np.where(scopes.mask, rng.normal(size=(k, m)), 0.0).astype(np.float32)
    inv = np.broadcast_to(np.eye(m, dtype=np.float32), (k, m, m))
    beta = np.full((k,), 0.5, np.float32)
    s0 = np.full(8, 0.5, np.float32)

    def solve(s):
        objective = lcb.node_objective(structure, problem, theta, inv, beta)
        return dp.minimise(plan, objective, s, jnp.ones(8, bool))

    real = jax.eval_shape(solve, s0)
    with dp.shapes_only():
        stub = jax.eval_shape(solve, s0)
        kept = solve(s0)[0]
    shapes = lambda tree: [(a.shape, a.dtype) for a in tree]  # noqa: E731
    assert shapes(stub) == shapes(real)
    np.testing.assert_array_equal(kept, s0)  # the stub's answer is its start: never for numbers
    # outside it, a vertex (jitted: eagerly, each of the DP's operations compiles on its own)
    assert set(np.asarray(jax.jit(solve)(s0)[0]).tolist()) <= {0.0, 1.0}


def test_make_plan_hands_back_the_plan_it_made():
    scopes = graphs.graph_scopes(8, _ring(8))
    a = dp.make_plan(scopes, exact_ties=False)
    assert dp.make_plan(scopes, exact_ties=False) is a
    assert dp.make_plan(scopes) is not a and dp.make_plan(scopes) == dp.Plan(scopes, 2 ** 16)
    other = graphs.graph_scopes(9, _ring(9))
    assert dp.make_plan(other, exact_ties=False).num_coords == 9
    with pytest.raises(ValueError, match="levels: must be true, false or None"):
        dp.make_plan(scopes, exact_ties=False, levels=[1])
