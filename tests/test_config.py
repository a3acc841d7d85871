"""Tests for gsjax.config."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import pickle
import tomllib
import typing

import jax
import numpy as np
import pytest

from gsjax import config as C
from gsjax.config import (
    AgentConfig,
    AlgorithmEntry,
    ConfigError,
    ExperimentConfig,
    NoiseConfig,
    ProblemConfig,
    ThetaConfig,
    apply_overrides,
    config_hash,
    config_to_dict,
    load_config,
    num_coords,
    num_criteria,
    parse_config,
)

BLOCKS_TOML = """
name = "blocks-demo"
horizon = 50

[paper]
regret_at_T = 12.5
notes = { table = 2, cols = ["a", "b"] }

[problem]
structure = "blocks"
num_blocks = 3
block_dim = 2

[problem.noise]
sigma = [0.1, 0.2, 0.3]

[agent]
beta = 2.0
lambda_reg = [1, 2, 3]

[algorithms.linucb]

[algorithms.lazy_own]
algorithm = "lazy"
reference = "own"
beta = 0.5
"""

GRAPH_TOML = """
name = "graph-demo"
dtype = "float64"

[problem]
structure = "graph"
graph = "edges"
num_nodes = 4
edges = [[0, 1], [1, 2], [2, 3]]
features = "quadratic"
s0 = [0.0, 0.25, 0.5, 1]

[problem.theta]
distribution = "explicit"
values = [[1.0, 2.0], [3.0], [4, 5], [6.0]]

[problem.noise]
kind = "correlated"
sigma = 0.2

[agent]
solver = "pgd"

[algorithms.async_lazy]
"""


def blocks_raw() -> dict:
    return tomllib.loads(BLOCKS_TOML)


def graph_raw() -> dict:
    return tomllib.loads(GRAPH_TOML)


def minimal_raw(**problem) -> dict:
    prob = {"structure": "blocks", "num_blocks": 2, "block_dim": 3}
    prob.update(problem)
    return {"name": "m", "problem": prob, "algorithms": {"linucb": {}}}


# ---------------------------------------------------------------------------
# Valid configs
# ---------------------------------------------------------------------------


def test_blocks_config_defaults_filled():
    cfg = parse_config(blocks_raw())
    assert cfg.name == "blocks-demo"
    assert cfg.description == ""
    assert (cfg.seeds, cfg.horizon, cfg.root_seed) == (10, 50, 0)
    assert cfg.dtype == "float32"
    assert cfg.record_every == 1
    p = cfg.problem
    assert p == ProblemConfig(
        structure="blocks", num_blocks=3, block_dim=2, features="linear",
        rff_dim=16, rff_lengthscale=0.5, s0=0.5,
        theta=ThetaConfig("normal", None, 1.0, 0, False),
        noise=NoiseConfig("independent", (0.1, 0.2, 0.3)),
    )
    assert p.graph is None and p.graph_seed is None and p.edges is None
    assert num_criteria(cfg) == 3 and num_coords(cfg) == 6
    assert num_criteria(p) == 3 and num_coords(p) == 6

    assert cfg.agent.beta == 2.0
    assert cfg.agent.lambda_reg == (1.0, 2.0, 3.0)
    assert all(isinstance(x, float) for x in cfg.agent.lambda_reg)

    assert cfg.algorithm_names == ("linucb", "lazy_own")
    lin, lazy = cfg.algorithms
    assert lin == AlgorithmEntry("linucb", "linucb", cfg.agent)
    assert lazy.algorithm == "lazy"
    assert lazy.agent == AgentConfig(
        lambda_reg=(1.0, 2.0, 3.0), beta=0.5, reference="own"
    )
    assert lazy.agent.solver == "vertex" and lazy.agent.oful_sigma is None

    assert cfg.paper == {"regret_at_T": 12.5, "notes": {"table": 2, "cols": ["a", "b"]}}
    # paper returns a fresh dict: mutating it does not change the config
    cfg.paper["regret_at_T"] = 0
    assert cfg.paper["regret_at_T"] == 12.5
    hash(cfg)  # fully hashable


def test_graph_config_parses():
    cfg = parse_config(graph_raw())
    p = cfg.problem
    assert p.structure == "graph" and p.graph == "edges"
    assert p.num_nodes == 4
    assert p.edges == ((0, 1), (1, 2), (2, 3))
    assert p.graph_seed == 0
    assert p.num_blocks is None and p.block_dim is None
    assert p.s0 == (0.0, 0.25, 0.5, 1.0)
    assert p.theta.values == ((1.0, 2.0), (3.0,), (4.0, 5.0), (6.0,))
    assert p.noise == NoiseConfig("correlated", 0.2)
    assert num_criteria(cfg) == num_coords(cfg) == 4
    assert cfg.dtype == "float64"
    assert cfg.algorithms == (AlgorithmEntry("async_lazy", "async_lazy",
                                             AgentConfig(solver="pgd")),)
    assert cfg.paper == {}
    hash(cfg)


@pytest.mark.parametrize(
    "problem, k",
    [
        ({"graph": "chain", "num_nodes": 5}, 5),
        ({"graph": "complete", "num_nodes": 3}, 3),
        ({"graph": "grid", "grid_shape": [2, 3]}, 6),
        ({"graph": "grid", "grid_shape": [2, 3], "num_nodes": 6}, 6),
        ({"graph": "random", "num_nodes": 10, "max_degree": 3, "num_edges": 15}, 10),
    ],
)
def test_graph_kinds(problem, k):
    raw = {"name": "g", "problem": {"structure": "graph", **problem},
           "algorithms": {"lazy": {}}}
    cfg = parse_config(raw)
    assert num_criteria(cfg) == num_coords(cfg) == k
    assert cfg.problem.num_nodes == k
    if problem["graph"] == "grid":
        assert cfg.problem.grid_shape == (2, 3)
    assert parse_config(config_to_dict(cfg)) == cfg


def test_parse_does_not_mutate_input():
    raw = blocks_raw()
    before = copy.deepcopy(raw)
    parse_config(raw, ["agent.beta=3"])
    assert raw == before


def test_rff_features_with_pgd():
    raw = minimal_raw(features="rff", rff_dim=8, rff_lengthscale=2)
    raw["agent"] = {"solver": "pgd"}
    cfg = parse_config(raw)
    assert cfg.problem.rff_dim == 8 and cfg.problem.rff_lengthscale == 2.0


def test_vertex_override_on_entry_is_rejected_with_entry_path():
    raw = minimal_raw(features="quadratic")
    raw["agent"] = {"solver": "pgd"}
    raw["algorithms"] = {"linucb": {}, "lazy": {"solver": "vertex"}}
    with pytest.raises(ConfigError) as ei:
        parse_config(raw)
    assert ei.value.field == "algorithms.lazy.solver"


def test_pgd_override_on_entry_rescues_quadratic():
    raw = minimal_raw(features="quadratic")
    raw["algorithms"] = {"lazy": {"solver": "pgd"}}
    cfg = parse_config(raw)
    assert cfg.algorithms[0].agent.solver == "pgd"


# ---------------------------------------------------------------------------
# Round trip and hashing
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("make", [blocks_raw, graph_raw])
def test_round_trip(make):
    cfg = parse_config(make())
    d = config_to_dict(cfg)
    text = json.dumps(d)  # JSON-serialisable
    assert parse_config(json.loads(text)) == cfg
    assert parse_config(d) == cfg
    # fully resolved: defaults are present
    assert d["seeds"] == 10
    assert d["agent"]["pgd_steps"] == 50
    assert d["problem"]["theta"]["scale"] == 1.0
    for entry in d["algorithms"].values():
        assert set(entry) >= {"algorithm", "beta", "solver", "trigger_ratio"}


def test_round_trip_preserves_algorithm_order_and_paper_types():
    raw = blocks_raw()
    raw["paper"]["when"] = tomllib.loads("d = 2024-01-02")["d"]
    cfg = parse_config(raw)
    assert cfg.paper["when"] == "2024-01-02"
    d = config_to_dict(cfg)
    assert list(d["algorithms"]) == ["linucb", "lazy_own"]
    assert parse_config(d) == cfg


def test_config_hash():
    a = parse_config(blocks_raw())
    b = parse_config(blocks_raw())
    h = config_hash(a)
    assert h == config_hash(b)
    assert len(h) == 64 and int(h, 16) >= 0
    assert config_hash(parse_config(blocks_raw(), ["seeds=11"])) != h
    # explicit default == omitted default
    assert config_hash(parse_config(blocks_raw(), ["root_seed=0"])) == h
    # paper content is part of the hash
    assert config_hash(parse_config(blocks_raw(), ["paper.x=1"])) != h
    # algorithm order matters, as for ==
    raw = blocks_raw()
    raw["algorithms"] = dict(reversed(list(raw["algorithms"].items())))
    swapped = parse_config(raw)
    assert swapped != a
    assert config_hash(swapped) != h


def test_paper_key_order_irrelevant():
    r1 = minimal_raw()
    r1["paper"] = {"a": 1, "b": 2}
    r2 = minimal_raw()
    r2["paper"] = {"b": 2, "a": 1}
    assert parse_config(r1) == parse_config(r2)


def test_paper_not_validated_beyond_table():
    raw = minimal_raw()
    raw["paper"] = {"anything": {"deep": [1, "x", True, None, 2.5]}, "nan": math.nan}
    cfg = parse_config(raw)
    assert cfg.paper["anything"] == {"deep": [1, "x", True, None, 2.5]}
    assert math.isnan(cfg.paper["nan"])


# ---------------------------------------------------------------------------
# Overrides
# ---------------------------------------------------------------------------


def test_override_scalar():
    cfg = parse_config(blocks_raw(), ["agent.beta=3", "horizon=7"])
    assert cfg.agent.beta == 3.0 and cfg.horizon == 7
    # entry-level beta override still wins
    assert cfg.algorithms[1].agent.beta == 0.5
    assert cfg.algorithms[0].agent.beta == 3.0


def test_override_list():
    cfg = parse_config(blocks_raw(), ["agent.lambda_reg=[0.1,0.2, 0.3]"])
    assert cfg.agent.lambda_reg == (0.1, 0.2, 0.3)


def test_override_list_wrong_length_is_validated():
    with pytest.raises(ConfigError) as ei:
        parse_config(blocks_raw(), ["agent.lambda_reg=[0.1,0.2]"])
    assert ei.value.field == "agent.lambda_reg"


def test_override_unquoted_string():
    cfg = parse_config(blocks_raw(), ["agent.solver=pgd", 'description="hi there"'])
    assert cfg.agent.solver == "pgd"
    assert cfg.description == "hi there"


def test_override_creates_new_algorithm_entry():
    cfg = parse_config(
        blocks_raw(),
        ["algorithms.lazy_glob.reference=global", "algorithms.lazy_glob.algorithm=lazy"],
    )
    assert cfg.algorithm_names == ("linucb", "lazy_own", "lazy_glob")
    new = cfg.algorithms[-1]
    assert new.algorithm == "lazy" and new.agent.reference == "global"


def test_apply_overrides_returns_new_dict():
    raw = {"a": {"b": 1}}
    out = apply_overrides(raw, ["a.b=2", "x.y.z=true", "s=some text", "e="])
    assert raw == {"a": {"b": 1}}
    assert out == {"a": {"b": 2}, "x": {"y": {"z": True}}, "s": "some text", "e": ""}


def test_override_unknown_key():
    with pytest.raises(ConfigError) as ei:
        parse_config(blocks_raw(), ["agent.bta=1"])
    assert ei.value.field == "agent.bta"
    assert "allowed keys" in ei.value.message and "beta" in ei.value.message


@pytest.mark.parametrize("where, key, value, field", [
    ((), "\n", 1, "'\\n'"),
    (("agent",), "a\tb", 1, "agent.'a\\tb'"),
    (("problem",), "", 1, "problem.''"),
    (("algorithms", "linucb"), "\n", 1, "algorithms.linucb.'\\n'"),
    (("algorithms",), "\n", {}, "algorithms.'\\n'"),
])
def test_unknown_unprintable_key_is_one_line_and_quoted(where, key, value, field):
    """An unknown key (or an algorithm entry's name) that is empty or holds a newline or a
    tab is named quoted, as repr writes it (the fuzz test's long profile found a root key
    '\\n' and an entry name '\\n' breaking the one-line error)."""
    raw = blocks_raw()
    table = raw
    for name in where:
        table = table[name]
    table[key] = value
    with pytest.raises(ConfigError) as ei:
        parse_config(raw)
    assert ei.value.field == field and "\n" not in str(ei.value), str(ei.value)
    assert ei.value.message.startswith(("unknown key", "entry name"))


@pytest.mark.parametrize("bad", ["agent.beta", "=3", "agent..beta=1"])
def test_override_malformed(bad):
    with pytest.raises(ConfigError) as ei:
        apply_overrides({}, [bad])
    assert ei.value.field == "--set"


def test_override_through_non_table():
    with pytest.raises(ConfigError) as ei:
        apply_overrides({"horizon": 3}, ["horizon.x=1"])
    assert ei.value.field == "--set"
    assert "not a table" in ei.value.message


# ---------------------------------------------------------------------------
# load_config
# ---------------------------------------------------------------------------


def test_load_config(tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text(BLOCKS_TOML)
    cfg = load_config(path)
    assert cfg == parse_config(blocks_raw())
    assert load_config(str(path), ["seeds=3"]).seeds == 3


def test_load_config_missing_file(tmp_path):
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as ei:
        load_config(path)
    assert ei.value.field == "<file>"
    assert "nope.toml" in ei.value.message


def test_load_config_broken_toml(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text('name = "x"\n[problem\n')
    with pytest.raises(ConfigError) as ei:
        load_config(path)
    assert ei.value.field == "<file>"
    assert "broken.toml" in ei.value.message
    assert "line 2" in ei.value.message  # tomllib's own message is included


def test_config_error_format_and_pickle():
    e = ConfigError("agent.beta", "must be >= 0")
    assert isinstance(e, ValueError)
    assert str(e) == "agent.beta: must be >= 0"
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.field, e2.message) == ("agent.beta", "must be >= 0")


def test_register_algorithm_name():
    raw = minimal_raw()
    raw["algorithms"] = {"my_algo": {}}
    with pytest.raises(ConfigError):
        parse_config(raw)
    try:
        C.register_algorithm_name("my_algo")
        assert parse_config(raw).algorithms[0].algorithm == "my_algo"
    finally:
        C.ALGORITHM_NAMES.discard("my_algo")
    with pytest.raises(ValueError):
        C.register_algorithm_name("Bad-Name")


def test_module_is_stdlib_only():
    import subprocess
    import sys

    # Load the file on its own (bypassing gsjax/__init__.py, which may import jax).
    code = (
        "import importlib.util, sys; "
        f"spec = importlib.util.spec_from_file_location('cfg', {C.__file__!r}); "
        "mod = importlib.util.module_from_spec(spec); sys.modules['cfg'] = mod; "
        "spec.loader.exec_module(mod); "
        "bad = [m for m in ('jax', 'numpy') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert set(C.__all__) <= set(dir(C))


# ---------------------------------------------------------------------------
# Table of invalid configs
# ---------------------------------------------------------------------------


def _set(path: str, value):
    """Return a mutator setting dotted ``path`` to ``value`` in a raw dict."""

    def mutate(raw):
        node = raw
        parts = path.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value

    return mutate


def _del(path: str):
    def mutate(raw):
        node = raw
        parts = path.split(".")
        for p in parts[:-1]:
            node = node[p]
        del node[parts[-1]]

    return mutate


def _graph(**problem):
    def mutate(raw):
        raw["problem"] = {"structure": "graph", **problem}

    return mutate


BAD = [
    # (id, base, mutators, field, message substring)
    ("unknown-algorithm", "blocks", [_set("algorithms.lazy_own.algorithm", "ucb")],
     "algorithms.lazy_own.algorithm", "unknown algorithm 'ucb'"),
    ("entry-name-not-algorithm", "blocks", [_set("algorithms.foo", {})],
     "algorithms.foo.algorithm", "not a known algorithm"),
    ("negative-lambda", "blocks", [_set("agent.lambda_reg", -1.0)],
     "agent.lambda_reg", "must be > 0.0"),
    ("lambda-list-length", "blocks", [_set("agent.lambda_reg", [1.0, 2.0])],
     "agent.lambda_reg", "k (criteria) = 3 entries, got 2"),
    ("lambda-list-element", "blocks", [_set("agent.lambda_reg", [1.0, 0.0, 2.0])],
     "agent.lambda_reg[1]", "must be > 0.0"),
    ("entry-bad-beta", "blocks", [_set("algorithms.lazy_own.beta", -2)],
     "algorithms.lazy_own.beta", "must be >= 0.0"),
    ("shared-bad-beta", "blocks", [_set("agent.beta", -2)],
     "agent.beta", "must be >= 0.0"),
    ("nan-beta", "blocks", [_set("agent.beta", math.nan)],
     "agent.beta", "finite"),
    ("inf-move-cost", "blocks", [_set("agent.move_cost", math.inf)],
     "agent.move_cost", "finite"),
    ("bool-beta", "blocks", [_set("agent.beta", True)],
     "agent.beta", "expected a number"),
    ("sigma-correlated-length", "graph", [_set("problem.noise.sigma", [0.1, 0.2, 0.3])],
     "problem.noise.sigma", "n (coordinates)"),
    ("sigma-independent-length", "blocks", [_set("problem.noise.sigma", [0.1] * 6)],
     "problem.noise.sigma", "k (criteria)"),
    ("sigma-negative", "blocks", [_set("problem.noise.sigma", -0.1)],
     "problem.noise.sigma", ">= 0.0"),
    ("edge-out-of-range", "graph", [_set("problem.edges", [[0, 1], [1, 2], [2, 3], [3, 4]])],
     "problem.edges[3]", "out of range [0, 4)"),
    ("edge-negative", "graph", [_set("problem.edges", [[-1, 1]])],
     "problem.edges[0]", "out of range"),
    ("self-loop", "graph", [_set("problem.edges", [[0, 1], [2, 2]])],
     "problem.edges[1]", "self-loop"),
    ("duplicate-edge", "graph", [_set("problem.edges", [[0, 1], [1, 0]])],
     "problem.edges[1]", "duplicate"),
    ("edge-not-pair", "graph", [_set("problem.edges", [[0, 1, 2]])],
     "problem.edges[0]", "pair"),
    ("edges-with-chain", "graph", [_set("problem.graph", "chain")],
     "problem.edges", "only allowed when problem.graph = 'edges'"),
    ("edges-missing", "graph", [_del("problem.edges")],
     "problem.edges", "required"),
    ("graph-key-on-blocks", "blocks", [_set("problem.num_nodes", 4)],
     "problem.num_nodes", "only allowed when problem.structure = 'graph'"),
    ("block-key-on-graph", "graph", [_set("problem.block_dim", 2)],
     "problem.block_dim", "only allowed when problem.structure = 'blocks'"),
    ("blocks-missing-block-dim", "blocks", [_del("problem.block_dim")],
     "problem.block_dim", "required"),
    ("bad-structure", "blocks", [_set("problem.structure", "tree")],
     "problem.structure", "'blocks', 'graph'"),
    ("s0-above-one", "blocks", [_set("problem.s0", 1.5)],
     "problem.s0", "<= 1.0"),
    ("s0-list-element", "blocks", [_set("problem.s0", [0.1, 0.2, 0.3, 0.4, -0.5, 0.6])],
     "problem.s0[4]", ">= 0.0"),
    ("s0-list-length", "blocks", [_set("problem.s0", [0.5, 0.5])],
     "problem.s0", "n (number of coordinates) = 6 entries, got 2"),
    ("seeds-zero", "blocks", [_set("seeds", 0)], "seeds", ">= 1"),
    ("seeds-bool", "blocks", [_set("seeds", True)], "seeds", "expected an integer"),
    ("horizon-float", "blocks", [_set("horizon", 100.0)], "horizon", "expected an integer"),
    ("root-seed-negative", "blocks", [_set("root_seed", -1)], "root_seed", ">= 0"),
    ("record-every-zero", "blocks", [_set("record_every", 0)], "record_every", ">= 1"),
    ("dtype-float16", "blocks", [_set("dtype", "float16")],
     "dtype", "'float32', 'float64'"),
    ("unknown-top-level", "blocks", [_set("horizn", 5)],
     "horizn", "allowed keys"),
    ("unknown-agent-key", "blocks", [_set("agent.gamma", 5)],
     "agent.gamma", "allowed keys: lambda_reg"),
    ("unknown-entry-key", "blocks", [_set("algorithms.linucb.gamma", 5)],
     "algorithms.linucb.gamma", "algorithm"),
    ("unknown-problem-key", "blocks", [_set("problem.stiffness", 1.0)],
     "problem.stiffness", "allowed keys"),
    ("unknown-theta-key", "blocks", [_set("problem.theta.mean", 1.0)],
     "problem.theta.mean", "allowed keys"),
    ("vertex-with-quadratic", "blocks", [_set("problem.features", "quadratic")],
     "agent.solver", "linear features"),
    ("trigger-ratio-one", "blocks", [_set("agent.trigger_ratio", 1)],
     "agent.trigger_ratio", "> 1.0"),
    ("oful-delta-too-big", "blocks", [_set("agent.oful_delta", 1.5)],
     "agent.oful_delta", "< 1.0"),
    ("oful-sigma-negative", "blocks", [_set("agent.oful_sigma", -1.0)],
     "agent.oful_sigma", ">= 0.0"),
    ("oful-L-zero", "blocks", [_set("agent.oful_L", 0.0)], "agent.oful_L", "> 0.0"),
    ("oful-L-nan", "blocks", [_set("agent.oful_L", math.nan)], "agent.oful_L", "finite"),
    ("oful-L-string", "blocks", [_set("agent.oful_L", "big")], "agent.oful_L", "number"),
    ("entry-oful-L-negative", "blocks", [_set("algorithms.lazy_own.oful_L", -1.0)],
     "algorithms.lazy_own.oful_L", "> 0.0"),
    ("pgd-steps-float", "blocks", [_set("agent.pgd_steps", 2.5)],
     "agent.pgd_steps", "expected an integer"),
    ("bad-optimizer", "blocks", [_set("agent.pgd_optimizer", "rmsprop")],
     "agent.pgd_optimizer", "'sgd', 'adam'"),
    ("missing-problem", "blocks", [_del("problem")], "problem", "required"),
    ("missing-name", "blocks", [_del("name")], "name", "required"),
    ("empty-name", "blocks", [_set("name", "  ")], "name", "non-empty"),
    ("no-algorithms-key", "blocks", [_del("algorithms")],
     "algorithms", "at least one"),
    ("empty-algorithms", "blocks", [_set("algorithms", {})],
     "algorithms", "at least one"),
    ("bad-entry-name", "blocks", [_set("algorithms.Lazy-1", {"algorithm": "lazy"})],
     "algorithms.Lazy-1", "[a-z][a-z0-9_]*"),
    ("entry-not-table", "blocks", [_set("algorithms.lazy", 3)],
     "algorithms.lazy", "expected a table"),
    ("agent-not-table", "blocks", [_set("agent", [1])], "agent", "expected a table"),
    ("paper-not-table", "blocks", [_set("paper", "x")], "paper", "expected a table"),
    ("theta-explicit-no-values", "blocks", [_set("problem.theta.distribution", "explicit")],
     "problem.theta.values", "required"),
    ("theta-values-row-count", "graph", [_set("problem.theta.values", [[1.0], [2.0]])],
     "problem.theta.values", "k = 4 rows"),
    ("theta-values-not-explicit", "blocks", [_set("problem.theta.values", [[1.0]] * 3)],
     "problem.theta.values", "only allowed when problem.theta.distribution = 'explicit'"),
    ("theta-values-element", "graph", [_set("problem.theta.values", [[1.0], [2.0], ["x"], [3.0]])],
     "problem.theta.values[2][0]", "expected a number"),
    ("theta-scale-zero", "blocks", [_set("problem.theta.scale", 0)],
     "problem.theta.scale", "> 0.0"),
    ("theta-per-seed-int", "blocks", [_set("problem.theta.per_seed", 1)],
     "problem.theta.per_seed", "boolean"),
    ("grid-without-shape", "graph", [_graph(graph="grid", num_nodes=4)],
     "problem.grid_shape", "required for problem.graph = 'grid'"),
    ("grid-num-nodes-mismatch", "graph", [_graph(graph="grid", grid_shape=[2, 2], num_nodes=5)],
     "problem.num_nodes", "rows*cols = 4"),
    ("grid-shape-length", "graph", [_graph(graph="grid", grid_shape=[2, 2, 2])],
     "problem.grid_shape", "[rows, cols]"),
    ("grid-shape-zero", "graph", [_graph(graph="grid", grid_shape=[2, 0])],
     "problem.grid_shape[1]", ">= 1"),
    ("random-without-max-degree", "graph", [_graph(graph="random", num_nodes=5, num_edges=2)],
     "problem.max_degree", "required for problem.graph = 'random'"),
    ("random-too-many-edges", "graph",
     [_graph(graph="random", num_nodes=5, max_degree=2, num_edges=6)],
     "problem.num_edges", "<= min("),
    ("max-degree-with-chain", "graph", [_graph(graph="chain", num_nodes=5, max_degree=2)],
     "problem.max_degree", "only allowed when problem.graph = 'random'"),
    ("chain-without-num-nodes", "graph", [_graph(graph="chain")],
     "problem.num_nodes", "required"),
    ("unknown-graph-kind", "graph", [_graph(graph="star", num_nodes=3)],
     "problem.graph", "'edges', 'chain', 'grid', 'random', 'complete'"),
    ("graph-seed-negative", "graph", [_graph(graph="chain", num_nodes=3, graph_seed=-1)],
     "problem.graph_seed", ">= 0"),
    ("bad-features", "blocks", [_set("problem.features", "poly")],
     "problem.features", "'linear', 'quadratic', 'rff'"),
    ("rff-lengthscale-zero", "blocks", [_set("problem.rff_lengthscale", 0.0)],
     "problem.rff_lengthscale", "> 0.0"),
    ("bad-noise-kind", "blocks", [_set("problem.noise.kind", "gaussian")],
     "problem.noise.kind", "'independent', 'correlated'"),
    ("bad-reference", "blocks", [_set("algorithms.lazy_own.reference", "local")],
     "algorithms.lazy_own.reference", "'global', 'own'"),
    ("description-not-str", "blocks", [_set("description", 3)],
     "description", "expected a string"),
]


@pytest.mark.parametrize(
    "base, mutators, field, substring",
    [case[1:] for case in BAD],
    ids=[case[0] for case in BAD],
)
def test_bad_configs(base, mutators, field, substring):
    raw = blocks_raw() if base == "blocks" else graph_raw()
    # the base config must be valid on its own
    parse_config(copy.deepcopy(raw))
    for mutate in mutators:
        mutate(raw)
    with pytest.raises(ConfigError) as ei:
        parse_config(raw)
    err = ei.value
    assert err.field == field, str(err)
    assert substring in err.message, str(err)
    assert str(err) == f"{err.field}: {err.message}"


def test_bad_table_ids_unique_and_large_enough():
    ids = [case[0] for case in BAD]
    assert len(ids) == len(set(ids)) >= 25


def test_root_not_a_table():
    with pytest.raises(ConfigError) as ei:
        parse_config([1, 2])  # type: ignore[arg-type]
    assert ei.value.field == "<root>"


# --------------------------------------------------------------------------------------------
# [grid]
# --------------------------------------------------------------------------------------------

_GRID_BASE = {
    "name": "g",
    "problem": {"structure": "blocks", "num_blocks": 2, "block_dim": 2},
    "algorithms": {"lazy": {}},
}


def test_grid_parses_in_order_and_round_trips():
    raw = dict(_GRID_BASE, grid={"beta": [0.25, 0.5, 1], "lambda_reg": [0.1, 1.0]})
    cfg = parse_config(raw)
    assert cfg.grid == (("beta", (0.25, 0.5, 1.0)), ("lambda_reg", (0.1, 1.0)))
    assert parse_config(config_to_dict(cfg)) == cfg
    over = parse_config(_GRID_BASE, ["grid.move_cost=[0.0, 2.0]"])
    assert over.grid == (("move_cost", (0.0, 2.0)),)


@pytest.mark.parametrize(
    "grid, field, needle",
    [
        ({"solver": ["pgd"]}, "grid.solver", "allowed"),
        ({"beta": []}, "grid.beta", "at least one"),
        ({"beta": [0.5, -1.0]}, "grid.beta[1]", ">= 0.0"),
        ({"lambda_reg": [0.0]}, "grid.lambda_reg[0]", "> 0.0"),
        ({"trigger_ratio": [1.0]}, "grid.trigger_ratio[0]", "> 1.0"),
        ({"beta": [0.5, 0.5]}, "grid.beta", "distinct"),
        ({"beta": 0.5}, "grid.beta", "list"),
        ({"beta": list(range(100)), "pgd_lr": [0.01 * (i + 1) for i in range(100)]}, "grid", "at most"),
    ],
)
def test_bad_grid(grid, field, needle):
    with pytest.raises(ConfigError) as e:
        parse_config(dict(_GRID_BASE, grid=grid))
    assert e.value.field == field
    assert needle in e.value.message


@pytest.mark.parametrize("horizon, expected", [(300, 1), (1000, 1), (1001, 7), (10_000, 10), (99_991, 99_991), (100_000, 100)])
def test_default_record_every_bounds_the_records(horizon, expected):
    from gsjax.config import MAX_RECORDS, default_record_every

    r = default_record_every(horizon)
    assert r == expected
    assert horizon % r == 0 and horizon // r <= MAX_RECORDS
    # No smaller divisor would do.
    assert all(horizon % q or horizon // q > MAX_RECORDS for q in range(1, r))
    cfg = parse_config(dict(_GRID_BASE, horizon=horizon))
    assert cfg.record_every == r
    assert parse_config(dict(_GRID_BASE, horizon=horizon, record_every=1)).record_every == 1


def test_the_schema_knows_every_registered_algorithm():
    """The schema's names are stated in config.py (no JAX needed to validate a file), not
    written back by the algorithms package: the two lists must agree."""
    from gsjax.algorithms import REGISTRY

    assert set(REGISTRY) <= C.ALGORITHM_NAMES


# --------------------------------------------------------------------------------------------
# The declarative schema: tagged variants, one-line errors for any input
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("problem, variant", [
    ({"structure": "blocks", "num_blocks": 2, "block_dim": 3}, C.BlocksProblem),
    ({"structure": "blocks", "block_dims": [2, 1]}, C.UnequalBlocksProblem),
    ({"structure": "scopes", "scopes": [[0, 1], [1]]}, C.ScopesProblem),
    ({"structure": "graph", "graph": "chain", "num_nodes": 3}, C.GraphProblem),
    ({"structure": "graph", "graph": "edges", "num_nodes": 3, "edges": [[0, 1]]}, C.EdgesGraph),
    ({"structure": "graph", "graph": "grid", "grid_shape": [2, 2]}, C.GridGraph),
    ({"structure": "graph", "graph": "random", "num_nodes": 4, "max_degree": 2, "num_edges": 3},
     C.RandomGraph),
])
def test_each_problem_variant_is_its_own_record(problem, variant):
    cfg = parse_config({"name": "v", "problem": problem, "agent": {"solver": "pgd"},
                        "algorithms": {"lazy": {}}})
    assert type(cfg.problem) is variant
    assert isinstance(cfg.problem, ProblemConfig)
    # Only the variant's own fields are stored; the others read None.
    fields = {f.name for f in dataclasses.fields(cfg.problem)}
    assert fields < C._PROBLEM_FIELDS
    assert all(getattr(cfg.problem, name) is None for name in C._PROBLEM_FIELDS - fields)
    assert C.ProblemConfig(**config_to_dict(cfg)["problem"]) == cfg.problem
    assert pickle.loads(pickle.dumps(cfg)) == cfg and hash(cfg) == hash(parse_config(
        config_to_dict(cfg)))


def test_adaptive_entries_get_their_own_agent_record():
    raw = minimal_raw()
    raw["algorithms"] = {"lazy": {}, "adaptive_lazy": {"warmup": 0}}
    lazy, adaptive = parse_config(raw).algorithms
    assert type(lazy.agent) is AgentConfig
    assert type(adaptive.agent) is C.AdaptiveAgentConfig and adaptive.agent.warmup == 0
    assert not hasattr(lazy.agent, "warmup")


@pytest.mark.parametrize("where", [
    "problem", "problem.structure", "problem.graph", "problem.environment", "problem.theta",
    "problem.theta.values", "problem.noise.sigma", "problem.s0", "agent", "agent.lambda_reg",
    "agent.solver", "algorithms.lazy", "grid", "grid.beta", "relaxed", "relaxed.block", "seeds",
])
@pytest.mark.parametrize("value", [None, [1], [[1]], {"x": 1}, "x", 1.5, -1, True, [],
                                   float("nan")])
def test_any_bad_value_is_one_line_config_error(where, value):
    """Whatever a user writes, the answer is a one-line ConfigError naming a field at or
    below the place written (never a TypeError, a pydantic error or a multi-line message)."""
    raw = {"name": "x", "problem": {"structure": "graph", "graph": "chain", "num_nodes": 3},
           "algorithms": {"lazy": {}}}
    node, parts = raw, where.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    if value is None:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value
    try:
        parse_config(raw)
    except ConfigError as e:
        assert "\n" not in str(e) and str(e) == f"{e.field}: {e.message}"
        assert e.field.split("[")[0].split(".")[0] in (parts[0], "agent", "algorithms"), e


GRAPH_KIND_KEYS = {"chain": {}, "complete": {}, "edges": {"edges": [[0, 1]]},
                   "grid": {"grid_shape": [2, 2]}, "random": {"max_degree": 2, "num_edges": 1}}


@pytest.mark.parametrize("kind", list(GRAPH_KIND_KEYS))
def test_graph_kinds_share_one_record_but_own_their_keys(kind):
    """Every graph kind is a GraphProblem (EdgesGraph etc. are its other names); a kind sets
    only its own keys, the other kinds' keys read None and stay out of the resolved dict."""
    assert C.EdgesGraph is C.GridGraph is C.RandomGraph is C.GraphProblem
    problem = {"structure": "graph", "graph": kind, "num_nodes": 4, **GRAPH_KIND_KEYS[kind]}
    cfg = parse_config({"name": "g", "problem": problem, "algorithms": {"lazy": {}}})
    assert type(cfg.problem) is C.GraphProblem and cfg.problem.sizes == (4, 4)
    for other, keys in GRAPH_KIND_KEYS.items():
        for key, value in keys.items():
            if other == kind:
                continue
            assert getattr(cfg.problem, key) is None and key not in config_to_dict(cfg)["problem"]
            raw = {"name": "g", "problem": {**problem, key: value}, "algorithms": {"lazy": {}}}
            with pytest.raises(ConfigError) as e:
                parse_config(raw)
            assert (e.value.field, e.value.message) == (
                f"problem.{key}", f"only allowed when problem.graph = {other!r}")
        if other == kind and keys:
            key = next(iter(keys))
            raw = {"name": "g", "problem": {k: v for k, v in problem.items() if k != key},
                   "algorithms": {"lazy": {}}}
            with pytest.raises(ConfigError) as e:
                parse_config(raw)
            assert (e.value.field, e.value.message) == (
                f"problem.{key}", f"required for problem.graph = {kind!r} but missing")


def test_blocks_of_unequal_sizes_share_the_blocks_record():
    assert C.UnequalBlocksProblem is C.BlocksProblem
    raw = minimal_raw(block_dims=[2, 3])
    del raw["problem"]["num_blocks"], raw["problem"]["block_dim"]
    cfg = parse_config(raw)
    assert cfg.problem.sizes == (2, 5) and cfg.problem.num_blocks is None
    assert "num_blocks" not in config_to_dict(cfg)["problem"]
    with pytest.raises(ConfigError, match=r"^problem\.num_blocks: not allowed with problem\."
                                          r"block_dims"):
        parse_config(minimal_raw(block_dims=[2, 3]))


def test_a_graph_kind_named_like_a_structure_is_not_a_graph_kind():
    with pytest.raises(ConfigError) as e:
        parse_config(minimal_raw(structure="graph", graph="blocks", num_nodes=3))
    assert e.value.field == "problem.graph"
    assert e.value.message.startswith("must be one of 'edges', 'chain'")


@pytest.mark.parametrize("kwargs", [dict(graph="random", num_nodes=4, max_degree=2),
                                    dict(graph="edges", num_nodes=3), dict(graph="chain"),
                                    dict(graph="grid", num_nodes=4), dict(block_dim=2)])
def test_records_built_in_python_still_need_their_kinds_keys(kwargs):
    cls = C.BlocksProblem if "block_dim" in kwargs else C.GraphProblem
    with pytest.raises(ValueError, match="required for problem"):
        cls(**kwargs)


# ---------------------------------------------------------------------------
# Range checks: int fields fit the run's int32, seeds a JAX key's uint32
# ---------------------------------------------------------------------------

I32, U32 = int(np.iinfo(np.int32).max), int(np.iinfo(np.uint32).max)


def test_bounds_are_the_machine_types():
    assert (C.INT32_MAX, C.SEED_MAX) == (I32, U32)
    # why seeds stop at 2^32 - 1: a larger seed wraps silently onto another key
    with jax.enable_x64(False):
        data = [np.asarray(jax.random.key_data(jax.random.key(s))) for s in (0, U32 + 1)]
    np.testing.assert_array_equal(*data)


def _adaptive(raw):
    raw["algorithms"]["adaptive"] = {"algorithm": "adaptive_lazy", "warmup": I32 + 1,
                                     "signal_gamma": 0.1}


def _relaxed(raw):
    raw["relaxed"] = {"block": I32 + 1}


OUT_OF_RANGE = [
    ("root_seed", [_set("root_seed", 2 ** 70)], U32),
    ("root_seed", [_set("root_seed", U32 + 1)], U32),
    ("horizon", [_set("horizon", 10 ** 12)], I32),
    ("horizon", [_set("horizon", I32 + 1), _set("record_every", 1)], I32),
    ("seeds", [_set("seeds", I32 + 1)], I32),
    ("record_every", [_set("record_every", I32 + 1)], I32),
    ("agent.pgd_steps", [_set("agent.pgd_steps", I32 + 1)], I32),
    ("agent.pgd_starts", [_set("agent.pgd_starts", I32 + 1)], I32),
    ("agent.refresh_every", [_set("agent.refresh_every", I32 + 1)], I32),
    ("algorithms.linucb.refresh_every", [_set("algorithms.linucb.refresh_every", I32 + 1)], I32),
    ("agent.dp_max_table", [_set("agent.dp_max_table", I32 + 1)], I32),
    ("algorithms.adaptive.warmup", [_adaptive], I32),
    ("relaxed.block", [_relaxed], I32),
    ("problem.theta.seed", [_set("problem.theta.seed", U32 + 1)], U32),
    ("problem.num_blocks", [_set("problem.num_blocks", I32 + 1)], I32),
    ("problem.rff_dim", [_set("problem.rff_dim", I32 + 1)], I32),
]


@pytest.mark.parametrize("field, mutators, bound", OUT_OF_RANGE,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(OUT_OF_RANGE)])
def test_ints_beyond_their_machine_type_are_refused(field, mutators, bound):
    raw = blocks_raw()
    for mutate in mutators:
        mutate(raw)
    with pytest.raises(ConfigError) as ei:
        parse_config(raw)
    assert str(ei.value).startswith(f"{field}: must be an integer <= {bound}, got ")
    assert "\n" not in str(ei.value)


def test_largest_values_are_accepted():
    raw = blocks_raw()
    for key, value in (("root_seed", U32), ("horizon", I32), ("record_every", I32),
                       ("seeds", I32), ("problem.theta.seed", U32),
                       ("agent.refresh_every", I32), ("agent.dp_max_table", I32)):
        _set(key, value)(raw)
    cfg = parse_config(raw)
    assert (cfg.root_seed, cfg.horizon, cfg.problem.theta.seed) == (U32, I32, U32)


def _int_bounds(tp):
    """The ``le`` of every strict int inside the annotation ``tp``."""
    if typing.get_origin(tp) is typing.Annotated:
        base, *meta = typing.get_args(tp)
        if base is int:
            les = [x.le for m in meta for x in (getattr(m, "metadata", None) or [m])
                   if hasattr(x, "le")]
            return [les[0] if les else None]
        return _int_bounds(base)
    return [b for arg in typing.get_args(tp) for b in _int_bounds(arg)]


NUMPY_SEEDS = {"graph_seed", "mixing_seed"}  # np.random.default_rng takes any size


def test_every_int_field_of_every_schema_is_bounded():
    from gsjax.oco import config as O

    records = [obj for mod in (C, O) for obj in vars(mod).values()
               if isinstance(obj, type) and issubclass(obj, C._Record)]
    seen = set()
    for cls in records:
        for name, info in cls.__pydantic_fields__.items():
            tp = info.annotation
            for le in _int_bounds(typing.Annotated[int, *info.metadata] if tp is int else tp):
                seen.add(name)
                want = (None if name in NUMPY_SEEDS else U32 if name.endswith("seed")
                        else I32)
                assert le == want, f"{cls.__name__}.{name}: le = {le}"
    assert {"horizon", "horizons", "seeds", "root_seed", "warmup", "pgd_steps",
            "switch_period", "record_seeds", "dp_max_table", "seed", "classifier_seed"} <= seen


OCO_BASE = 'kind = "oco"\nname = "x"\n'


@pytest.mark.parametrize("text, field, bound", [
    ("horizon = 1000000000000\n", "horizon[0]", I32),  # a scalar is a list of one
    ("horizon = [100, 4294967296]\n", "horizon[1]", I32),
    ("seeds = 2147483648\n", "seeds", I32),
    ("root_seed = 1180591620717411303424\n", "root_seed", U32),
    ("record_every = 2147483648\n", "record_every", I32),
    ("record_seeds = 2147483648\n", "record_seeds", I32),
    ("[problem]\nswitch_period = 2147483648\n", "problem.switch_period", I32),
    ("[problem]\nnum_components = 2147483648\n", "problem.num_components", I32),
])
def test_oco_ints_beyond_int32_are_refused(text, field, bound):
    from gsjax.oco.config import parse_oco_config

    raw = tomllib.loads(OCO_BASE + text + "[algorithms.ogd]\n")
    with pytest.raises(ConfigError) as ei:
        parse_oco_config(raw)
    assert str(ei.value).startswith(f"{field}: must be an integer <= {bound}, got ")


def test_seed_range_fits_the_uint32_seed_ids():
    C.check_seed_range(10, 0)
    C.check_seed_range(10, U32 + 1 - 10)  # ids up to 2^32 - 1
    C.check_seed_range(1, U32)
    with pytest.raises(ConfigError, match=r"^--seed-start: must be >= 0, got -1$"):
        C.check_seed_range(10, -1)
    with pytest.raises(ConfigError) as ei:
        C.check_seed_range(10, U32 + 2 - 10)
    assert str(ei.value) == (f"--seed-start: seed ids {U32 - 8}..{U32 + 1} exceed {U32} (uint32); "
                             f"need --seed-start <= {U32 - 9}")


#: config_hash of the built-in bandit configs as gsjax 391d257 (2026-12-03) computed them: a
#: field added later with a default that keeps the old behaviour must not change them (its
#: checkpoints would no longer resume, and finished folders would read as another config's).
HASHES_391D257 = {
    'adaptive_graph': '3198c5727bdc163f',
    'dp_chain': '658ddd4613f2185c',
    'dp_grid': '287e36393df752d8',
    'dp_ring': 'ee51847b13feb868',
    'dp_scale': '37b8ef687d7a6864',
    'dp_tree': '408516d335c82c02',
    'example_graph': '10d7907af6a0932a',
    'figure2_joint': '37e9bba768f5a35e',
    'large_graphs': '5c2358ccf1894129',
    'section7_1': '82c5be5045cd7426',
    'section7_2': '6892e773d4301032',
    'section7_3': 'b633601eccd8e3f8',
}


def test_hashes_of_the_built_in_configs_are_those_of_earlier_versions():
    got = {name: config_hash(load_config(name))[:16] for name in HASHES_391D257}
    assert got == HASHES_391D257
    # a field written only when set (AgentConfig._when_set) is in the dict, and hashed, then
    set_ = load_config("section7_2", ["agent.solver=pgd", "agent.pgd_gap=true"])
    assert config_to_dict(set_)["agent"]["pgd_gap"] is True
    assert "pgd_gap" not in config_to_dict(load_config("section7_2"))["agent"]
