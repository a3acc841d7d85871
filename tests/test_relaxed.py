"""The relaxed (differentiable) mode and ``gsjax tune``.

Checked against independent computations: central finite differences of the same objective
(float64), the hard runner (``gsjax.runner.run``) on the same keys, the exact vertex solver, and
an ordinary hard ``run_experiment`` on the held-out seed range.
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import cli, experiment, lcb, linalg, relaxed, runner
from gsjax.config import ConfigError, parse_config
from gsjax.problem import seed_axes, seed_rows

TINY = {
    "name": "relaxed_tiny", "seeds": 3, "horizon": 40, "dtype": "float64",
    "problem": {"structure": "blocks", "num_blocks": 2, "block_dim": 2,
                "noise": {"sigma": 0.5},
                "theta": {"distribution": "normal", "seed": 0, "per_seed": True}},
    "agent": {"lambda_reg": [0.3, 1.0], "beta": 0.5},
    "algorithms": {"lazy": {}, "async_lazy": {},
                   "lazy_own": {"algorithm": "lazy", "reference": "own"}},
}

TOML = """
name = "relaxed_cli"
seeds = 2
horizon = 20
[problem]
structure = "blocks"
num_blocks = 2
block_dim = 2
[problem.theta]
distribution = "normal"
per_seed = true
[problem.noise]
sigma = 0.5
[agent]
lambda_reg = [0.3, 1.0]
beta = 0.5
[algorithms.linucb]
[algorithms.lazy]
[relaxed]
temperature = 0.1
solve_temperature = 0.05
"""


@pytest.fixture(scope="module")
def built():
    with jax.enable_x64(True):
        yield experiment.build(parse_config(TINY))


def _entry(b, name):
    return next(a for a in b.algorithms if a.name == name)


@pytest.mark.parametrize("name", ["lazy", "async_lazy"])
def test_gradient_matches_central_finite_differences(built, name):
    with jax.enable_x64(True):
        ba = _entry(built, name)
        keys = runner.seed_keys(jax.random.key(0), jnp.arange(3))
        obj = relaxed.make_objective(ba.kind, built.structure, ba.spec, 40, True)
        rp = relaxed.relax_params(0.1, 0.05, dtype=jnp.float64)

        def f(u):  # log beta, log lambda (2), log log c
            p = ba.params._replace(beta=jnp.exp(u[0]) * jnp.ones(2), lambda_reg=jnp.exp(u[1:3]),
                                   log_trigger=jnp.exp(u[3]))
            return obj(p, rp, keys, built.problem, ba.move_cost)[0]

        u0 = jnp.array([np.log(0.5), np.log(0.3), 0.0, np.log(np.log(2.0))])
        g = np.asarray(jax.jit(jax.grad(f))(u0))
        fj = jax.jit(f)
        h = 1e-6
        fd = np.array([(fj(u0.at[i].add(h)) - fj(u0.at[i].add(-h))) / (2 * h) for i in range(4)])
    assert np.all(np.isfinite(g)) and np.max(np.abs(fd)) > 1.0  # a real, non-trivial gradient
    np.testing.assert_allclose(g, fd, rtol=2e-4, atol=1e-6 * np.max(np.abs(fd)))


# Every registered algorithm, on a problem it runs on: the node-wise ones and adaptive_lazy on a
# graph (overlapping scopes, so async frees part of the box), the joint ones on a factor graph.
GRAPH = {
    "name": "relaxed_graph", "seeds": 3, "horizon": 40, "dtype": "float64",
    "problem": {"structure": "graph", "graph": "chain", "num_nodes": 3,
                "noise": {"sigma": 0.5},
                "theta": {"distribution": "normal", "seed": 1, "per_seed": True}},
    "agent": {"lambda_reg": 0.5, "beta": 0.5},
    "algorithms": {"linucb": {}, "lazy": {}, "async_lazy": {},
                   "adaptive": {"algorithm": "adaptive_lazy", "warmup": 8,
                                "signal_gamma": 0.3},
                   "adaptive_async": {"algorithm": "adaptive_lazy", "warmup": 8,
                                      "signal_gamma": 0.3, "refined": "async_lazy"},
                   "super": {"algorithm": "adaptive_lazy", "warmup": 0}},
}
FACTOR = {
    "name": "relaxed_factor", "seeds": 3, "horizon": 40, "dtype": "float64",
    "problem": {"environment": "factor", "s0": 0.5,
                "factor": {"num_coords": 3, "num_nodes": 3, "layout": "clique",
                           "mixing": "orthogonal", "mixing_seed": 0},
                "noise": {"sigma": 0.5},
                "theta": {"distribution": "normal", "per_seed": True}},
    "agent": {"lambda_reg": 1.0, "beta": 0.5},
    "algorithms": {"joint_lazy": {}, "joint_linucb": {},
                   "joint_pgd": {"algorithm": "joint_lazy", "solver": "pgd"}},
}


# Found when the noise stream changed to Philox (2026-12-02): on the chain, seed 0 of
# adaptive_async (warm-up 8, then async on the refined scopes) has 8 fewer triggers in its relaxed
# form than in the hard run at every tau (1e-7 .. 1e-11), regret 2.03 apart; every other entry
# agrees to 1e-13. Not a near-tie: a gap in the soft adaptive/async logic, open in issue 15's note.
KNOWN_GAPS = {("relaxed_graph", "adaptive_async")}


def _zero_temperature_equals_hard(raw, only=None):
    with jax.enable_x64(True):
        b = experiment.build(parse_config(raw))
        keys = runner.seed_keys(jax.random.key(0), jnp.arange(3))
        for ba in b.algorithms:
            known = (raw["name"], ba.name) in KNOWN_GAPS
            if known if only is None else ba.name != only:
                continue
            # jitted, as the command line runs it: one compile, not one per eager operation
            hard = jax.jit(jax.vmap(lambda k, p: runner.run(k, ba.algo, b.structure, p,
                                                            ba.params, ba.move_cost, 40)[1],
                                    in_axes=(0, seed_axes(b.problem))))(keys, b.problem)
            obj = jax.jit(relaxed.make_objective(ba.kind, b.structure, ba.spec, 40, True))
            gaps = []
            for tau in (0.3, 1e-7):
                _, tot = obj(ba.params, relaxed.relax_params(tau, dtype=jnp.float64), keys,
                             b.problem, ba.move_cost)
                gaps.append(np.max(np.abs(np.asarray(tot.prediction_regret + tot.movement_cost)
                                          - np.asarray(hard.prediction_regret
                                                       + hard.movement_cost))))
            np.testing.assert_allclose(tot.prediction_regret, hard.prediction_regret, rtol=1e-9)
            np.testing.assert_allclose(tot.movement_cost, hard.movement_cost, rtol=1e-9)
            np.testing.assert_array_equal(tot.triggers, hard.triggers)
            # soft update counts: the hard updates (lazy: every criterion; own/async: triggered)
            np.testing.assert_allclose(tot.updates, hard.updates, atol=1e-9)
            np.testing.assert_allclose(tot.reoptimisations, hard.reoptimisations, atol=1e-9)
            if ba.kind not in ("linucb", "joint_linucb"):  # they have no trigger to soften
                assert gaps[0] > 1e-3, (ba.name, gaps)
            assert gaps[1] < 1e-6, (ba.name, gaps)


@pytest.mark.parametrize("raw", [TINY, GRAPH, FACTOR], ids=["blocks", "graph", "factor"])
def test_zero_temperature_is_the_hard_run(raw):
    """Every algorithm's relaxed form, on the same keys: identical totals and trigger counts at
    tau = 1e-7, and the gap to the hard run closes as tau falls (except :data:`KNOWN_GAPS`)."""
    _zero_temperature_equals_hard(raw)


@pytest.mark.xfail(strict=True, reason="KNOWN_GAPS: relaxed adaptive_async on the chain, seed 0")
def test_zero_temperature_known_gap_adaptive_async_on_the_chain():
    _zero_temperature_equals_hard(GRAPH, only="adaptive_async")


def test_soft_vertex_limits(x64):
    """tau -> 0: the exact solver's answer, ties (a symmetric theta_hat) included; large tau:
    the uniform average of the vertices."""
    b = experiment.build(parse_config(TINY))
    prob = seed_rows(b.problem, 0)
    rng = np.random.default_rng(0)
    stats = jax.vmap(lambda lam: linalg.init(lam, 2, jnp.float64))(jnp.array([0.3, 1.0]))
    ones = jnp.ones((2, 2))
    stats = jax.vmap(linalg.update, in_axes=(0, 0, 0, None))(stats, ones, jnp.array([0.7, -0.2]),
                                                             True)  # symmetric: a tie
    beta = jnp.array([0.5, 0.5])
    s0 = jnp.full((4,), 0.5)
    exact_fn = jax.jit(lambda th, iv: lcb.minimise_vertex(b.structure, prob, th, iv, beta, s0,
                                                          jnp.ones(4, bool))[0])
    soft_fn = jax.jit(lambda th, iv, rp: lcb.minimise_vertex(
        b.structure, prob, th, iv, beta, s0, jnp.ones(4, bool),
        lcb.softmin_pick(rp.solve_temperature, rp.tie_break))[0])
    for _ in range(3):
        th = jax.vmap(linalg.theta_hat)(stats)
        exact = exact_fn(th, stats.inv)
        soft = soft_fn(th, stats.inv, relaxed.relax_params(1e-8, dtype=jnp.float64))
        np.testing.assert_allclose(soft, exact, atol=1e-12)
        hot = soft_fn(th, stats.inv, relaxed.relax_params(1e6, tie_break=0.0, dtype=jnp.float64))
        np.testing.assert_allclose(hot, 0.5, atol=1e-5)
        x = jnp.asarray(rng.uniform(size=(2, 2)))
        stats = jax.vmap(linalg.update, in_axes=(0, 0, 0, None))(
            stats, x, jnp.asarray(rng.normal(size=2)), True)


def test_checkpointing_bounds_gradient_memory(built):
    """Compiled temporary memory of the gradient grows like sqrt(T) with checkpointed blocks
    (README: ~T without)."""
    ba = _entry(built, "lazy")
    with jax.enable_x64(True):
        keys = runner.seed_keys(jax.random.key(0), jnp.arange(1))
        prob = seed_rows(built.problem, slice(0, 1))

        def temp(T, ck):
            obj = relaxed.make_objective("lazy", built.structure, ba.spec, T, True, checkpoint=ck)
            rp = relaxed.relax_params(0.1, dtype=jnp.float64)
            g = jax.jit(jax.grad(lambda p: obj(p, rp, keys, prob, ba.move_cost)[0]))
            m = g.lower(ba.params).compile().memory_analysis()
            if m is None:
                pytest.skip("no memory analysis on this backend")
            return m.temp_size_in_bytes

        small, large = temp(256, True), temp(4096, True)
    assert large < 6 * small  # T x16: sqrt(16) = 4 (block boundaries + one block)


def test_tune_cli_writes_the_schema(tmp_path):
    cfg_path = tmp_path / "tiny.toml"
    cfg_path.write_text(TOML)
    out = tmp_path / "out"
    rc = cli.main(["tune", str(cfg_path), "--params", "beta,trigger,lambda_reg", "--steps", "1",
                   "--heldout-seeds", "3", "--out", str(out), "--quiet"])
    assert rc == 0
    res = json.loads((out / "tune.json").read_text())
    assert set(res) == {"params", "objective", "heldout_hard", "gradient_check"}
    assert set(res["params"]) == {"beta", "trigger", "lambda_reg"}
    for name in ("beta", "trigger"):
        assert set(res["params"][name]) == {"initial", "final"}
    assert res["params"]["beta"]["initial"] == pytest.approx(0.5)
    assert res["params"]["trigger"]["initial"] == pytest.approx(2.0)
    assert res["params"]["lambda_reg"]["initial"] == pytest.approx([0.3, 1.0])
    for block in ("objective", "heldout_hard"):
        for when in ("initial", "final"):
            assert set(res[block][when]) == {"mean", "stderr"}
    assert res["objective"]["final"]["mean"] <= res["objective"]["initial"]["mean"]
    assert res["gradient_check"]["max_rel_error"] < 1e-2
    # heldout_hard.initial is the ordinary hard run of seeds 2..4 (global ids) of the entry.
    with jax.enable_x64(True):
        from gsjax.config import load_config

        cfg = load_config(cfg_path, ["dtype=float64", "seeds=3"])
        hard = experiment.run_experiment(cfg, seed_start=2).runs["lazy"].totals
    tot = np.asarray(hard.prediction_regret + hard.movement_cost)
    assert res["heldout_hard"]["initial"]["mean"] == pytest.approx(tot.mean(), rel=1e-9)
    assert res["heldout_hard"]["initial"]["stderr"] == pytest.approx(
        tot.std(ddof=1) / np.sqrt(3), rel=1e-9)
    trace = json.loads((out / "trace.json").read_text())
    assert len(trace["trace"]) == 2 and trace["meta"]["seed_rounds"]["tuning_gradient_steps"] == 80


@pytest.mark.parametrize("argv, field", [
    (["--params", "beta,gamma"], "--params"),
    (["--params", "eta_scale"], "--params"),
    (["--params", "trigger", "--algorithm", "linucb"], "--params"),
    (["--params", "beta", "--algorithm", "nope"], "--algorithm"),
    (["--params", "beta", "--steps", "-1"], "--steps"),
    (["--params", "beta", "--set", "relaxed.temperature=0"], "relaxed.temperature"),
])
def test_tune_bad_inputs_exit_2(tmp_path, capsys, argv, field):
    cfg_path = tmp_path / "tiny.toml"
    cfg_path.write_text(TOML)
    assert cli.main(["tune", str(cfg_path), "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}:"), err
    assert not (tmp_path / "o").exists()


def test_relaxed_table_round_trips():
    from gsjax.config import config_to_dict

    raw = dict(TINY, relaxed={"temperature": 0.2, "block": 8})
    cfg = parse_config(raw)
    assert cfg.relaxed.temperature == 0.2 and cfg.relaxed.block == 8
    assert parse_config(config_to_dict(cfg)) == cfg
    assert "relaxed" not in config_to_dict(parse_config(TINY))  # hashes of old configs unchanged
    with pytest.raises(ConfigError, match="relaxed.block"):
        parse_config(dict(TINY, relaxed={"block": 7}))
    with pytest.raises(ConfigError, match="relaxed"):
        parse_config(dict(TINY, relaxed={"temp": 0.1}))


OCO_TOML = """
kind = "oco"
name = "tiny_oco"
seeds = 4
horizon = [400]
dtype = "float64"
[problem]
loss = "squared"
targets = "adversarial"
num_components = 2
[algorithms.lazy]
algorithm = "lazy_ogd"
budget_exponents = [0.5]
"""


def test_tune_oco_step_scale(tmp_path):
    """The kind = "oco" path: eta_scale tuned through Lazy OGD (differentiable as it is: its coins
    do not depend on eta); the autodiff gradient agrees with central finite differences."""
    cfg_path = tmp_path / "oco.toml"
    cfg_path.write_text(OCO_TOML)
    out = tmp_path / "out"
    rc = cli.main(["tune", str(cfg_path), "--params", "eta_scale", "--steps", "3",
                   "--heldout-seeds", "4", "--out", str(out), "--quiet"])
    assert rc == 0
    res = json.loads((out / "tune.json").read_text())
    assert res["params"]["eta_scale"]["initial"] == pytest.approx(1.0)
    assert res["gradient_check"]["max_rel_error"] < 1e-5
    assert res["objective"]["final"]["mean"] <= res["objective"]["initial"]["mean"]
    for block in ("objective", "heldout_hard"):
        for when in ("initial", "final"):
            assert np.isfinite(res[block][when]["mean"])
