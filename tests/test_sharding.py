"""Seed-axis sharding over 4 fake CPU devices gives the unsharded numbers (subprocess: the
device count must be set before JAX starts)."""

import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import json
    import chex, jax, jax.numpy as jnp, numpy as np
    from gsjax import graphs, problem as P, runner
    from gsjax.algorithms import AgentParams, AgentSpec, make

    assert jax.device_count() == 4, jax.devices()
    scopes = graphs.block_scopes(3, 2)
    st = P.make_structure(scopes, "linear", "independent")
    keys = jax.vmap(jax.random.fold_in, (None, 0))(jax.random.key(0), jnp.arange(10))
    per_seed = jax.vmap(lambda k: P.make_problem(k, st, scopes, noise_sigma=0.5))(keys)
    shared = P.make_problem(jax.random.key(0), st, scopes, noise_sigma=0.5)
    k = 3
    params = AgentParams(
        lambda_reg=jnp.array([0.05, 0.5, 1.5]), beta=jnp.full((k,), 0.6),
        pgd_lr=jnp.asarray(0.05), log_trigger=jnp.log(2.0), oful_delta=jnp.asarray(0.05),
        oful_S=jnp.asarray(1.0), oful_sigma=jnp.full((k,), 0.5))
    out = {}
    for kind in ("lazy", "linucb"):  # the compacted chunk and the plain one (async: lazy's)
        algo = make(kind, st, AgentSpec())
        for name, prob, ps in (("shared", shared, False), ("per_seed", per_seed, True)):
            # 10 seeds: not a multiple of 4, so padding is exercised.
            args = (jax.random.key(3), np.arange(10), algo, st, prob, params, 0.5, 50, 5, ps)
            a = runner.sweep(*args, shard=False)
            b = runner.sweep(*args, shard=True)
            try:  # chex names the first differing leaf by its path in the tree
                chex.assert_trees_all_equal((a.totals, a.records), (b.totals, b.records))
                same = True
            except AssertionError as e:
                same = str(e)[:500]
            out[f"{kind}/{name}"] = [same, int(np.asarray(a.totals.reoptimisations).sum())]
    print(json.dumps(out))
    """
)


def test_sharded_sweep_equals_unsharded(tmp_path):
    env = dict(os.environ)
    env["XLA_FLAGS"] = env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out) == 4
    for name, (same, reopt) in out.items():
        assert same is True, (name, same)
        assert reopt > 0, name
