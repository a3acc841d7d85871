"""The global lazy's reference reading as a traced value (``AgentParams.own_reference``).

Checked against the static reading (``AgentSpec.reference``), which the NumPy reference tests
pin: the same totals and records bit for bit, for both readings; and the two readings lower to
one program, so a run of both compiles once (the second is a persistent-cache hit).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import graphs, runner
from gsjax import problem as P
from gsjax.algorithms import AgentParams, AgentSpec, make
from gsjax.algorithms.base import with_reference

HORIZON = 60


def _setup():
    scopes = graphs.block_scopes(3, 2)
    structure = P.make_structure(scopes, "linear", "independent")
    problem = P.make_problem(jax.random.key(1), structure, scopes, theta_scale=1.0,
                             noise_sigma=0.5, s0=0.5, dtype=jnp.float32)
    # a small lambda and ratio so that triggers are frequent and the readings differ
    params = AgentParams.create(3, lambda_reg=0.05, beta=0.5, trigger_ratio=1.3)
    keys = runner.seed_keys(jax.random.key(0), jnp.arange(6, dtype=jnp.uint32))
    return structure, problem, params, keys


def _sweep(structure, spec, problem, params, keys, compact):
    algo = make("lazy", structure, spec)
    fn = runner.make_sweep(algo, structure, HORIZON, record_every=10, compact=compact,
                           buffer=2)
    return fn, jax.tree_util.tree_leaves(fn(keys, problem, params, jnp.float32(0.1)))


@pytest.mark.parametrize("compact", [False, True])
def test_traced_reading_equals_the_static_one(compact):
    structure, problem, params, keys = _setup()
    results = {}
    for reference in ("global", "own"):
        spec = AgentSpec(reference=reference)
        _, static = _sweep(structure, spec, problem, params, keys, compact)
        # the traced run is built from the OTHER static reading: only the value decides
        other = dataclasses.replace(spec, reference="own" if reference == "global" else "global")
        _, traced = _sweep(structure, other, problem, with_reference(params, spec), keys,
                           compact)
        for a, b in zip(static, traced):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        results[reference] = static
    # the readings differ on this problem, so the comparison above could fail
    assert any(not np.array_equal(np.asarray(a), np.asarray(b))
               for a, b in zip(results["global"], results["own"]))


def test_both_readings_lower_to_one_program():
    structure, problem, params, keys = _setup()
    texts = []
    for reference in ("global", "own"):
        spec = AgentSpec(reference=reference)
        algo = make("lazy", structure, spec)
        fn = runner.make_sweep(algo, structure, HORIZON, record_every=10, compact=True,
                               buffer=2)
        texts.append(fn.lower(keys, problem, with_reference(params, spec),
                              jnp.float32(0.1)).as_text())
    assert texts[0] == texts[1]
