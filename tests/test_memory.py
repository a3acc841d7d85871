"""The memory estimate made before a run compiles (issue 18, item 5): it adds up what a run
holds (the largest carry, the per-seed problem and every algorithm's records, for every seed),
and ``gsjax run`` refuses, in one line and before compiling, a run that cannot fit."""

from __future__ import annotations

import time

import jax
import numpy as np
import pytest

from gsjax import experiment, runner
from gsjax.__main__ import main as gsjax_main
from gsjax.config import ConfigError, parse_config
from gsjax.oco import algorithms as oco_algs
from gsjax.oco import experiment as oco_experiment
from gsjax.oco import runner as oco_runner
from gsjax.oco.config import load_oco_config
from gsjax.oco.problem import make_problem as make_oco_problem

BASE = {
    "name": "memory",
    "seeds": 3,
    "horizon": 40,
    "record_every": 10,
    "problem": {"structure": "blocks", "num_blocks": 3, "block_dim": 2,
                "theta": {"per_seed": True}},
    "agent": {"lambda_reg": 0.5, "beta": 0.7, "move_cost": 1.0},
    "algorithms": {"lazy": {}, "async_lazy": {"solver": "pgd"}},
}


def _nbytes(tree) -> int:
    return sum(np.asarray(x).nbytes for x in jax.tree_util.tree_leaves(tree))


def _held_by_a_run(cfg) -> int:
    """What a finished run of ``cfg`` held, from its arrays: each algorithm's carry (taken
    after its last chunk), records and the problem; the algorithms run one after another,
    so the largest carry counts, every record."""
    built = experiment.build(cfg)
    carries, records = [], 0
    for ba in built.algorithms:
        seen = []
        res = runner.sweep(jax.random.key(cfg.root_seed), np.arange(cfg.seeds), ba.algo,
                           built.structure, built.problem, ba.params, ba.move_cost, cfg.horizon,
                           cfg.record_every, built.problem_per_seed, grid=bool(cfg.grid),
                           chunk_rounds=cfg.horizon // 2,
                           on_chunk=lambda leaves, *_: seen.append(_nbytes(leaves)))
        carries.append(seen[-1])
        records += _nbytes(res.records)
        assert np.asarray(res.records.cum_regret).shape[-1] == cfg.horizon // cfg.record_every
    return max(carries) + records + _nbytes(built.problem)


@pytest.mark.parametrize("extra", [
    {},
    {"problem": dict(BASE["problem"], theta={"per_seed": False})},
    {"grid": {"beta": [0.25, 1.5], "move_cost": [0.0, 2.0, 3.0]}},
], ids=["per_seed", "shared_problem", "grid"])
def test_the_estimate_is_what_a_run_holds(extra):
    cfg = parse_config({**BASE, **extra})
    assert experiment.memory_needed(cfg) == _held_by_a_run(cfg)


def test_the_estimate_scales_with_seeds_and_records():
    small = experiment.memory_needed(parse_config(BASE))
    more = experiment.memory_needed(parse_config({**BASE, "seeds": 30}))
    six = experiment.memory_needed(parse_config({**BASE, "seeds": 6}))
    per_seed = (six - small) / 3
    assert more - small == 27 * per_seed  # affine in the seed count
    assert small - 3 * per_seed > 0  # the problem's scopes and masks: once, shared by the seeds
    sparse = experiment.memory_needed(parse_config({**BASE, "record_every": 20}))
    assert sparse < small


OCO = """
kind = "oco"
name = "memory_oco"
seeds = 3
dtype = "float64"
horizon = [24, 48]
record_every = 4
record_seeds = 2
budget_exponents = [0.5, 0.75, 1.0]
[problem]
loss = "l1"
targets = "drift"
num_components = 2
[algorithms.lazy_ogd]
[algorithms.ogd]
"""


def test_the_oco_estimate_is_what_a_run_holds(tmp_path):
    """The largest carry (the L1 loss keeps every target in it), and every run's results and
    records, from the arrays of the sweeps themselves."""
    path = tmp_path / "oco.toml"
    path.write_text(OCO)
    cfg = load_oco_config(path)
    spec = oco_experiment.spec_of(cfg)
    pc = cfg.problem
    carries, kept = [], 0
    with jax.enable_x64(True):  # the config's default dtype, float64
        problem = make_oco_problem(spec, pc.s0, pc.target_low, pc.target_high, pc.weights,
                                   pc.drift, np.float64)
        for T in cfg.horizons:
            for e in cfg.algorithms:
                seen = []
                out = oco_runner.sweep(jax.random.key(cfg.root_seed), np.arange(cfg.seeds),
                                       oco_algs.make(e.algorithm, spec), spec, problem,
                                       oco_experiment.entry_params(cfg, e, T, np.float64)[0], T,
                                       cfg.record_every, cfg.record_seeds, T // 2,
                                       on_chunk=lambda leaves, *_: seen.append(_nbytes(leaves)))
                carries.append(seen[-1])
                kept += _nbytes(out.result) + _nbytes(out.records)
                shape = out.records.s.shape  # (record seeds, points, records, n)
                assert (shape[0], shape[2]) == (cfg.record_seeds, T // cfg.record_every)
    assert oco_experiment.memory_needed(cfg) == max(carries) + kept


def test_memory_estimate_arithmetic():
    f32, i32 = jax.ShapeDtypeStruct((4, 5), np.float32), jax.ShapeDtypeStruct((3,), np.int32)
    shared = np.zeros((7,), np.float64)
    got = experiment.memory_estimate({"a": f32, "b": i32}, (i32,), records=11, seeds=6,
                                     shared=shared)
    assert got == 6 * ((20 * 4 + 3 * 4) + 11 * 12) + 56


def test_check_memory_refuses_what_does_not_fit():
    experiment.check_memory(100, 4, available=(100, "test"))
    with pytest.raises(ConfigError) as err:
        experiment.check_memory(101, 4, available=(100, "free in the test"))
    assert err.value.field == "seeds" and "free in the test" in str(err.value)


def test_available_memory_is_reported():
    got = experiment.available_memory()
    assert got is None or (got[0] > 0 and isinstance(got[1], str))


@pytest.mark.parametrize("config", ["section7_2", "section6_rates"])
def test_cli_refuses_fifty_million_seeds_in_one_line_before_compiling(tmp_path, capsys,
                                                                      monkeypatch, config):
    def no_compile(*args, **kwargs):
        raise AssertionError("the run was started")

    monkeypatch.setattr(runner, "drive", no_compile)
    out = tmp_path / "big"
    t0 = time.perf_counter()
    rc = gsjax_main(["run", config, "--seeds", "50000000", "--out", str(out)])
    took = time.perf_counter() - t0
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("error: seeds: 50000000 seeds would hold at least")
    for needle in ("GiB", "record_every", "--seed-start"):
        assert needle in err
    assert not out.exists()
    assert took < 60
