"""gsjax's XLA options (`gsjax.xla`): kept one by one where this XLA knows them, and the
speed-only ones leave every output bit unchanged."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import graphs, runner, xla
from gsjax import problem as P
from gsjax.algorithms import AgentSpec, make


@pytest.fixture
def fresh_options(monkeypatch):
    """`compiler_options()` recomputed from a patched `COMPILER_OPTIONS`, then restored."""
    monkeypatch.setattr(xla, "_accepted", {})
    return monkeypatch


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the options are CPU ones")
def test_an_option_this_xla_lacks_is_dropped_alone(fresh_options):
    fresh_options.setattr(xla, "COMPILER_OPTIONS",
                          {**xla.COMPILER_OPTIONS, "xla_no_such_option_in_any_xla": 1})
    got = xla.compiler_options()
    assert "xla_no_such_option_in_any_xla" not in got
    # the ones XLA knows survive (YNNPACK fusions off is a correctness fix, not a speed-up)
    assert got.get("xla_cpu_experimental_ynn_fusion_type") == ""


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the options are CPU ones")
@pytest.mark.parametrize("kind", ["linucb", "lazy", "async_lazy"])
def test_copy_insertion_option_leaves_the_bits(fresh_options, make_params, kind):
    """Region analysis only removes copies: a sweep compiled with and without it agrees bit for
    bit (totals and records)."""
    name = "xla_cpu_copy_insertion_use_region_analysis"
    if name not in xla.compiler_options():
        pytest.skip(f"this XLA has no {name}")
    scopes = graphs.block_scopes(4, 2)
    structure = P.make_structure(scopes, "linear", "independent")
    prob = P.make_problem(jax.random.key(3), structure, scopes, noise_sigma=0.5,
                          dtype=jnp.float32)
    params = make_params(structure.num_criteria, jnp.float32, lambda_reg=0.05, beta=0.5)
    algo = make(kind, structure, AgentSpec())
    keys = runner.seed_keys(jax.random.key(1), jnp.arange(16, dtype=jnp.uint32))
    outs = []
    for with_it in (False, True):
        opts = {k: v for k, v in xla.COMPILER_OPTIONS.items() if with_it or k != name}
        fresh_options.setattr(xla, "_accepted", {"cpu": opts})
        fn = runner.make_sweep(algo, structure, 60, record_every=20,
                               compact=not algo.always_solves, buffer=4)
        outs.append(jax.device_get(fn(keys, prob, params, jnp.float32(0.3))))
    assert np.sum(outs[0][0].reoptimisations) > 16  # (totals, records): seeds re-optimise
    for a, b in zip(jax.tree.leaves(outs[0]), jax.tree.leaves(outs[1])):
        np.testing.assert_array_equal(a, b)
