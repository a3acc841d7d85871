"""The DP solver (gsjax/dp.py) against brute-force enumeration, and whole runs against 'vertex'.

The reference enumerates every vertex of the free coordinates in float64 NumPy, with the tie
rule of gsjax/lcb.py written out: vertex ``p`` puts bit ``j`` of ``p`` on the ``j``-th free
coordinate, and the lowest ``p`` among the values within ``64 eps max(1, |min|)`` wins.
"""

from __future__ import annotations

import functools
import json
import os
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import cli, dp, experiment, graphs, lcb
from gsjax import problem as P
from gsjax.algorithms import AgentSpec, make
from gsjax.config import ConfigError, parse_config


def _ring(n):
    return graphs.chain_edges(n) + [(n - 1, 0)]


def _tree(n, seed):
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(0, v)), v) for v in range(1, n)]


FAMILIES = {
    "chain9": (9, graphs.chain_edges(9)),
    "ring12": (12, _ring(12)),
    "tree14": (14, _tree(14, 3)),
    "grid3x4": (12, graphs.grid_edges(3, 4)),
    "grid4x4": (16, graphs.grid_edges(4, 4)),
    "random13": (13, graphs.random_bounded_degree_edges(13, 3, 16, 2)),
}


def _setup(name):
    n, edges = FAMILIES[name]
    scopes = graphs.graph_scopes(n, edges)
    structure = P.make_structure(scopes, "linear", "independent")
    return scopes, structure


def _terms(rng, scopes, kind):
    """Per-criterion estimates, inverses and radii: random, or built to tie."""
    k, m = scopes.index.shape
    if kind == "random":
        theta = rng.normal(size=(k, m))
        a = rng.normal(size=(k, m, m))
        inv = a @ a.transpose(0, 2, 1) / m + 0.1 * np.eye(m)
        beta = rng.uniform(0.0, 2.0, k)
    elif kind == "ties":  # a linear LCB with small-integer coefficients: exact ties abound
        theta = rng.integers(-1, 2, size=(k, m)) * 0.5
        inv, beta = np.broadcast_to(np.eye(m), (k, m, m)).copy(), np.zeros(k)
    else:  # "rounding": coefficients 0.1 + 0.2 - 0.3 tie in exact arithmetic only
        theta = rng.choice([0.1, 0.2, -0.3, 0.0], size=(k, m))
        inv, beta = np.broadcast_to(np.eye(m), (k, m, m)).copy(), np.zeros(k)
    return np.where(scopes.mask, theta, 0.0), inv, beta


def _brute_force(scopes, theta, inv, beta, s_init, free, eps):
    """(s, value) of the lowest-index vertex within the tolerance, all in float64 NumPy."""
    n = scopes.num_coords
    where = np.flatnonzero(free)
    p = np.arange(2 ** len(where))
    verts = np.broadcast_to(s_init, (len(p), n)).copy()
    verts[:, where] = (p[:, None] >> np.arange(len(where))[None, :]) & 1
    phi = np.where(scopes.mask, verts[:, scopes.index], 0.0)  # (P, k, m)
    q = np.einsum("pki,kij,pkj->pk", phi, inv, phi)
    values = (np.sum(phi * theta, -1) - beta * np.sqrt(np.maximum(q, 1e-12))).sum(-1)
    low = values.min()
    best = int(np.argmax(values <= low + 64 * eps * max(1.0, abs(low))))
    return verts[best], values[best], low


@functools.cache
def _compiled(solver, structure, plan):
    """One jitted solve per (solver, structure, plan), its data as arguments: the trials and
    the kinds of a family share its compiled program (jit caches by shapes and dtypes)."""

    def solve(problem, theta, inv, beta, s_init, free):
        objective = lcb.node_objective(structure, problem, theta, inv, beta)
        if solver == "dp":
            return dp.minimise(plan, objective, s_init, free)
        return lcb.minimise_vertices(objective, s_init, free)

    return jax.jit(solve)


def _solve(solver, structure, problem, plan, theta, inv, beta, s_init, free, dtype):
    arrays = [jnp.asarray(x, dtype) for x in (theta, inv, beta, s_init)]
    out = _compiled(solver, structure, plan)(problem, *arrays, jnp.asarray(free))
    return np.asarray(out[0], np.float64), float(out[1])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["random", "ties", "rounding"])
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_matches_brute_force(name, kind, dtype):
    scopes, structure = _setup(name)
    plan = dp.make_plan(scopes)
    rng = np.random.default_rng(zlib.crc32(f"{name}-{kind}".encode()))
    n = scopes.num_coords
    with jax.enable_x64(dtype == "float64"):
        problem = P.make_problem(jax.random.key(0), structure, scopes, dtype=getattr(jnp, dtype))
        eps = float(jnp.finfo(dtype).eps)
        for trial in range(3):
            theta, inv, beta = _terms(rng, scopes, kind)
            s_init = rng.uniform(size=n)
            free = np.ones(n, bool) if trial == 0 else rng.uniform(size=n) < 0.6
            if dtype == "float32":  # the reference sees what the solver sees
                theta, inv, beta, s_init = (np.float32(x).astype(np.float64)
                                            for x in (theta, inv, beta, s_init))
            args = (structure, problem, plan, theta, inv, beta, s_init, free, dtype)
            s, value = _solve("dp", *args)
            ref_s, _, low = _brute_force(scopes, theta, inv, beta, s_init, free, eps)
            np.testing.assert_array_equal(s[~free], s_init[~free])
            _, got, _ = _brute_force(scopes, theta, inv, beta, s, np.zeros(n, bool), eps)
            assert got <= low + 1e-5 * max(1.0, abs(low))  # a minimiser
            assert abs(value - got) <= 1e-5 * max(1.0, abs(got))  # its value is reported
            if dtype == "float64" or kind == "ties":  # float32 rounding may split near-ties
                np.testing.assert_array_equal(s, ref_s)
            # the vertex enumerator, in the same dtype: identical answers
            np.testing.assert_array_equal(s, _solve("vertex", *args)[0])


@pytest.mark.parametrize("graph, exact_ties", [("grid3x4", True), ("ring12", False)])
def test_vmaps_over_seeds(graph, exact_ties):
    """A vmapped solve equals the single solves, bit for bit: the sequential plan (exact
    ties) and the level plan (``exact_ties=False`` picks it on a ring)."""
    scopes, structure = _setup(graph)
    plan, rng = dp.make_plan(scopes, exact_ties=exact_ties), np.random.default_rng(7)
    assert (plan.levels is not None) == (not exact_ties)
    problem = P.make_problem(jax.random.key(0), structure, scopes)
    batch = [_terms(rng, scopes, "random") for _ in range(5)]
    theta, inv, beta = (jnp.asarray(np.stack(x), jnp.float32) for x in zip(*batch))
    s_init = jnp.asarray(rng.uniform(size=(5, 12)), jnp.float32)
    free = jnp.asarray(rng.uniform(size=(5, 12)) < 0.7)

    def one(th, iv, bt, s0, fr):
        objective = lcb.node_objective(structure, problem, th, iv, bt)
        return dp.minimise(plan, objective, s0, fr)[0]

    batched = jax.jit(jax.vmap(one))(theta, inv, beta, s_init, free)
    for i in range(5):
        single = jax.jit(one)(theta[i], inv[i], beta[i], s_init[i], free[i])
        np.testing.assert_array_equal(batched[i], single)


def test_limits_and_cap():
    # the square of a path has treewidth 2, that of a cycle 4 (closed neighbourhoods)
    chain = graphs.graph_scopes(30, graphs.chain_edges(30))
    ring = graphs.graph_scopes(30, _ring(30))
    assert dp.limits(chain) == (2, 8, 30 * 8)
    assert dp.limits(ring) == (4, 32, 30 * 32)
    assert dp.make_plan(ring).width == 4
    assert dp.make_plan(ring).limits == (4, 32, 30 * 32)
    with pytest.raises(dp.TooWide, match=r"^dp: elimination width >= 4 needs tables of >= 2\^5"
                       ) as err:
        dp.make_plan(ring, max_table=16)
    assert (err.value.width, err.value.table, err.value.max_table) == (4, 32, 16)
    with pytest.raises(ValueError, match="elimination width >= 4"):
        dp.limits(ring, max_table=31)
    with pytest.raises(ValueError, match="max_table: must be an integer >= 2"):
        dp.make_plan(ring, max_table=1.5)
    assert dp.make_plan(ring, max_table=32).width == 4
    assert dp.make_plan(ring) == dp.make_plan(ring) and hash(dp.make_plan(ring)) == hash(
        dp.make_plan(ring))
    assert dp.make_plan(ring) != dp.make_plan(chain)
    # a star of pairwise scopes numbered from its centre: the tie-rule order must eliminate
    # the centre first (width 19), plain min-fill the leaves (width 1)
    star = graphs.scopes_from_rows([[0, v] for v in range(1, 20)], 20)
    assert dp.limits(star, exact_ties=False).width == 1
    assert dp.limits(star, max_table=2 ** 20).width == 19


@pytest.mark.parametrize("levels", [None, False])
@pytest.mark.parametrize("name", sorted(FAMILIES) + ["edge_tree14"])
def test_min_fill_plan_finds_the_minimum(x64, name, levels):
    """``exact_ties=False``: the minimum of the brute force (the minimiser may differ), by
    the level plan (taken by default at these sizes) and by the sequential one (``levels=False``:
    the criteria tables multiplied out seed-last, not in the vertex enumerator's arithmetic)."""
    if name == "edge_tree14":
        scopes = graphs.scopes_from_rows([list(e) for e in _tree(14, 5)], 14)
        structure = P.make_structure(scopes, "linear", "independent")
    else:
        scopes, structure = _setup(name)
    plan = dp.make_plan(scopes, exact_ties=False, levels=levels)
    assert (plan.levels is None) == (levels is False)
    rng, n = np.random.default_rng(zlib.crc32(name.encode())), scopes.num_coords
    problem = P.make_problem(jax.random.key(0), structure, scopes, dtype=jnp.float64)
    for kind in ("random", "ties"):
        theta, inv, beta = _terms(rng, scopes, kind)
        s_init, free = rng.uniform(size=n), rng.uniform(size=n) < 0.7
        s, value = _solve("dp", structure, problem, plan, theta, inv, beta, s_init, free,
                          "float64")
        _, _, low = _brute_force(scopes, theta, inv, beta, s_init, free, 2.0 ** -52)
        _, got, _ = _brute_force(scopes, theta, inv, beta, s, np.zeros(n, bool), 2.0 ** -52)
        assert got <= low + 1e-12 * max(1.0, abs(low))
        assert abs(value - got) <= 1e-12 * max(1.0, abs(got))
        np.testing.assert_array_equal(s[~free], s_init[~free])


@pytest.mark.parametrize("exact_ties", [True, False])
@pytest.mark.parametrize("name", sorted(FAMILIES) + ["grid4x10"])
def test_pending_slots_never_overlap_and_are_as_few_as_possible(name, exact_ties):
    """The sequential scan's pending rows: a bucket holds messages from the step of its first
    one to its own elimination step (the roots' row to the end); two buckets share a row only
    if those spans do not overlap (a row read at a step may take its parent's message at that
    step), and the rows are as many as the most buckets pending after any step."""
    n, edges = (40, graphs.grid_edges(10, 4)) if name == "grid4x10" else FAMILIES[name]
    plan = dp.make_plan(graphs.graph_scopes(n, edges), exact_ties=exact_ties, levels=False)
    order, parent = plan.order, plan.parent[plan.order]
    first = {}
    for t, p in enumerate(parent):
        first.setdefault(int(p), t)
    end = {int(v): t for t, v in enumerate(order)} | {n: n}  # the roots' row: never freed
    span = {u: (first[u], end[u]) for u in first}
    slot = {}
    for t, (v, p) in enumerate(zip(order, parent)):
        assert slot.setdefault(int(p), int(plan.p_slot[t])) == plan.p_slot[t]
        if int(v) in first:
            assert plan.v_slot[t] == slot[int(v)]
    assert set(slot) == set(span)
    for a in span:
        for b in span:
            if a < b and slot[a] == slot[b]:
                (s0, e0), (s1, e1) = span[a], span[b]
                assert e0 <= s1 or e1 <= s0, (a, b)
    most = max(sum(s <= t < e for s, e in span.values()) for t in range(n))
    assert plan.slots == max(most, 1) and set(slot.values()) == set(range(plan.slots))


def test_refuses_what_it_cannot_solve():
    scopes, structure = _setup("ring12")
    with pytest.raises(ValueError, match="spec.dp_plan"):
        make("lazy", structure, AgentSpec(solver="dp"))
    with pytest.raises(ValueError, match="per-criterion linear features"):
        make("lazy", P.make_structure(scopes, "quadratic", "independent"),
             AgentSpec(solver="dp", dp_plan=dp.make_plan(scopes)))
    with pytest.raises(ValueError, match="per-criterion linear features"):
        make("adaptive_lazy", structure, AgentSpec(solver="dp", dp_plan=dp.make_plan(scopes)))


def _config(graph, solver, dtype="float32", horizon=150, **agent):
    problem = {"structure": "graph", "features": "linear", "theta": {"distribution": "normal",
               "scale": 0.5, "seed": 4, "per_seed": True}, "noise": {"sigma": 0.3}}
    problem.update(graph)
    raw = {"name": "dp_vs_vertex", "seeds": 4, "horizon": horizon, "record_every": horizon // 3,
           "dtype": dtype, "problem": problem, "agent": {"solver": solver, "beta": 0.6, **agent},
           "algorithms": {"linucb": {}, "lazy": {}, "async_lazy": {}}}
    return parse_config(raw)


GRAPHS = {"ring8": {"graph": "edges", "num_nodes": 8, "edges": _ring(8)},
          "grid3x4": {"graph": "grid", "grid_shape": [3, 4]}}


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_whole_runs_equal_vertex(graph):
    runs = {s: experiment.run_experiment(_config(GRAPHS[graph], s, horizon=60))
            for s in ("vertex", "dp")}
    for name in ("linucb", "lazy", "async_lazy"):
        a, b = runs["vertex"].runs[name], runs["dp"].runs[name]
        for field in a.totals._fields:
            np.testing.assert_array_equal(getattr(a.totals, field), getattr(b.totals, field),
                                          err_msg=f"{graph} {name} totals.{field}")
        for field in a.records._fields:
            np.testing.assert_array_equal(getattr(a.records, field), getattr(b.records, field),
                                          err_msg=f"{graph} {name} records.{field}")
        assert int(np.sum(a.totals.updates)) > 0


def test_config_refuses_wide_tables():
    raw = _config({"graph": "grid", "grid_shape": [3, 4]}, "dp")
    built = experiment.build(raw)
    assert all(ba.spec.dp_plan is not None for ba in built.algorithms)
    wide = _config({"graph": "complete", "num_nodes": 17}, "dp")
    with pytest.raises(ConfigError, match="algorithms.linucb.solver.*elimination width >= 16"):
        experiment.build(wide)


def test_config_cap_and_tie_rule_reach_the_plan():
    """``agent.dp_max_table`` and ``agent.dp_exact_ties`` are the plan's ``max_table`` and
    ``exact_ties``; the default cap is the solver's."""
    wide = {"graph": "complete", "num_nodes": 17}  # one clique: width 16, tables of 2^17
    assert _config(wide, "dp").agent.dp_max_table == dp.DEFAULT_MAX_TABLE
    assert _config(wide, "dp").agent.dp_exact_ties is True
    built = experiment.build(_config(wide, "dp", dp_max_table=2 ** 17))
    assert {ba.spec.dp_plan.width for ba in built.algorithms} == {16}
    ring = GRAPHS["ring8"]  # width 4 (test_limits_and_cap): tables of 2^5
    experiment.build(_config(ring, "dp", dp_max_table=32))
    with pytest.raises(ConfigError, match=r"^algorithms\.linucb\.solver: dp: elimination "
                                          r"width >= 4 .*max_table = 31;"):
        experiment.build(_config(ring, "dp", dp_max_table=31))
    with pytest.raises(ConfigError, match=r"^agent\.dp_max_table: must be an integer >= 2"):
        _config(ring, "dp", dp_max_table=1)


# a random tree numbered from its root (n = 14): width 11 under the tie-rule order, 4 under
# plain min-fill (dp.limits, checked below)
TREE14 = {"graph": "edges", "num_nodes": 14, "edges": [list(e) for e in _tree(14, 2)]}


def test_min_fill_tree_config_runs_like_vertex():
    """``dp_exact_ties = false`` admits a tree the tie-rule order cannot fit in 64 entries, and
    its run's regret equals vertex enumeration's (the minimisers are unique on these runs)."""
    scopes = graphs.graph_scopes(14, _tree(14, 2))
    assert dp.limits(scopes, max_table=2 ** 20).width > 5 >= dp.limits(scopes,
                                                                        exact_ties=False).width
    with pytest.raises(ConfigError, match=r"^algorithms\.linucb\.solver: .*elimination width"):
        experiment.build(_config(TREE14, "dp", dp_max_table=64))
    # 45 rounds: the 2^14-vertex enumeration of the reference is the cost of every round
    cfg = _config(TREE14, "dp", horizon=45, dp_max_table=64, dp_exact_ties=False)
    runs = {"dp": experiment.run_experiment(cfg),
            "vertex": experiment.run_experiment(_config(TREE14, "vertex", horizon=45))}
    for name in ("linucb", "lazy", "async_lazy"):
        a, b = runs["vertex"].runs[name], runs["dp"].runs[name]
        assert int(np.sum(a.totals.updates)) > 0
        for field in a.totals._fields:
            np.testing.assert_array_equal(getattr(a.totals, field), getattr(b.totals, field),
                                          err_msg=f"{name} totals.{field}")


RING8_TOML = """
name = "ring8_dp"
seeds = 2
horizon = 24
record_every = 6
[problem]
structure = "graph"
graph = "edges"
num_nodes = 8
edges = [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 0]]
[problem.theta]
distribution = "normal"
scale = 0.5
seed = 4
per_seed = true
[problem.noise]
sigma = 0.3
[agent]
solver = "dp"
beta = 0.6
pgd_steps = 5
pgd_starts = 2
[algorithms.linucb]
[algorithms.lazy]
[algorithms.async_pgd]
algorithm = "async_lazy"
solver = "pgd"
"""


MACHINE = {"compile_seconds", "run_seconds", "wall_seconds", "config_hash", "git_commit"}


def _results(doc):
    """A summary without the facts about the machine and the config's hash."""
    if isinstance(doc, dict):
        return {k: _results(v) for k, v in doc.items() if k not in MACHINE}
    return doc


def _gsjax(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err.strip().splitlines()


def test_check_reports_width_and_tables(tmp_path, capsys):
    """``gsjax check``: one line per dp entry with its width and table sizes, none for the
    PGD entry. The closed neighbourhoods of a ring share scopes at distance <= 2: the square
    of the cycle, of treewidth 4, so one bucket holds 2^5 entries, the 8 buckets 256; a
    sequential solve holds the back-tracking's 8 half rows of 2^4 and one pending bucket (each
    variable's parent is the next one eliminated): 160 entries, 640 bytes in float32."""
    cfg = tmp_path / "ring8.toml"
    cfg.write_text(RING8_TOML)
    rc, out, err = _gsjax(capsys, "check", str(cfg))
    assert (rc, err) == (0, [])
    assert out[0] == f"{cfg}: ok (ring8_dp, 3 algorithms)" and len(out) == 3
    for line, name in zip(out[1:], ("linucb", "lazy")):
        assert line == (f"  algorithms.{name}: solver 'dp', elimination width 4, largest table "
                        "32 entries, all tables 256 entries, 160 held at once (640 B a solve in "
                        "float32, up to 1.25 KiB for 2 seeds)")
    rc, out, _ = _gsjax(capsys, "check", str(cfg), "--set", "dtype=float64", "--set",
                        "seeds=1024")
    assert out[1].endswith("(1.25 KiB a solve in float64, up to 1.25 MiB for 1024 seeds)")


def test_too_wide_is_refused_in_one_line_or_falls_back(tmp_path, capsys, compile_cache):
    """Tables over ``agent.dp_max_table`` (16 < 2^5): ``check`` and ``run`` refuse with one
    line naming the entry, the width and the table size, exit 2, before anything is built on
    disk; with ``agent.dp_fallback = 'pgd'`` check names the fallback, and the run equals a
    direct PGD run of the same config except for summary.json's ``solver_used`` and reason."""
    cfg = tmp_path / "ring8.toml"
    cfg.write_text(RING8_TOML)
    cap = ["--set", "agent.dp_max_table=16"]
    want = ("error: algorithms.linucb.solver: dp: elimination width >= 4 needs tables of "
            ">= 2^5 entries, over max_table = 16; use solver 'pgd' (or set agent.dp_fallback "
            "= 'pgd' to fall back)")
    assert _gsjax(capsys, "check", str(cfg), *cap) == (2, [], [want])
    out_dir = tmp_path / "refused"
    assert _gsjax(capsys, "run", str(cfg), "--quiet", "--out", str(out_dir), *cap) == (
        2, [], [want])
    assert not out_dir.exists()
    assert _gsjax(capsys, "check", str(cfg), *cap, "--set", "agent.dp_fallback=dp")[2] == [
        "error: agent.dp_fallback: must be one of 'none', 'pgd'; got 'dp'"]

    fallback = [*cap, "--set", "agent.dp_fallback=pgd"]
    rc, out, err = _gsjax(capsys, "check", str(cfg), *fallback)
    reason = "elimination width >= 4 needs tables of >= 2^5 entries, over max_table = 16"
    assert (rc, err, out[1:]) == (0, [], [
        f"  algorithms.{name}: solver 'dp' falls back to 'pgd' (agent.dp_fallback): {reason}"
        for name in ("linucb", "lazy")])
    runs = {"fallback": fallback, "pgd": ["--set", "agent.solver=pgd"]}
    for tag, sets in runs.items():
        assert _gsjax(capsys, "run", str(cfg), "--quiet", "--out", str(tmp_path / tag),
                      *sets)[0] == 0
    summaries = {tag: json.loads((tmp_path / tag / "summary.json").read_text()) for tag in runs}
    for name in ("linucb", "lazy"):
        used = summaries["fallback"]["algorithms"][name]
        assert (used.pop("solver_used"), used.pop("solver_fallback")) == ("pgd", reason)
    assert _results(summaries["fallback"]) == _results(summaries["pgd"])
    arrays = {tag: np.load(tmp_path / tag / "arrays.npz") for tag in runs}
    assert sorted(arrays["fallback"].files) == sorted(arrays["pgd"].files)
    for key in arrays["pgd"].files:
        np.testing.assert_array_equal(arrays["fallback"][key], arrays["pgd"][key], err_msg=key)
    assert np.sum(arrays["pgd"]["lazy/totals/updates"]) > 0


def test_summary_names_the_dp_solver(tmp_path, capsys):
    """A dp entry's summary says ``solver_used = 'dp'`` and the width; other entries say
    nothing new."""
    cfg = tmp_path / "ring8.toml"
    cfg.write_text(RING8_TOML)
    assert _gsjax(capsys, "run", str(cfg), "--quiet", "--out", str(tmp_path / "r"),
                  "--set", "horizon=6")[0] == 0
    algos = json.loads((tmp_path / "r" / "summary.json").read_text())["algorithms"]
    for name in ("linucb", "lazy"):
        assert (algos[name]["solver_used"], algos[name]["dp_width"]) == ("dp", 4)
    assert not {"solver_used", "dp_width", "solver_fallback"} & set(algos["async_pgd"])


def test_fallback_does_not_cover_an_entry_the_dp_cannot_take(tmp_path, capsys):
    """``agent.dp_fallback`` replaces a too-wide DP by PGD only where the DP applies: quadratic
    features (or a joint / adaptive entry) with ``solver = 'dp'`` are refused, fallback or not
    (the fallback used to run them with PGD silently when the tables were also too wide)."""
    cfg = tmp_path / "ring8.toml"
    cfg.write_text(RING8_TOML)
    args = ["check", str(cfg), "--set", "problem.features=quadratic", "--set",
            "agent.dp_max_table=16"]
    for extra in ([], ["--set", "agent.dp_fallback=pgd"]):
        rc, out, err = _gsjax(capsys, *args, *extra)
        assert rc == 2 and out == [] and len(err) == 1, (extra, err)
        assert err[0].startswith("error: algorithms.linucb.solver: solver 'dp' needs "
                                 "per-criterion linear features"), err


# ---- the level-parallel plan (``exact_ties=False``): many eliminations at once ----

def _relabel(n, edges, seed):
    perm = np.random.default_rng(seed).permutation(n)
    return [(int(perm[a]), int(perm[b])) for a, b in edges]


LEVEL_FAMILIES = {
    **FAMILIES,
    "chain16_shuffled": (16, _relabel(16, graphs.chain_edges(16), 1)),
    "ring15_shuffled": (15, _relabel(15, _ring(15), 2)),
    "tree16_shuffled": (16, _relabel(16, _tree(16, 4), 3)),
    "random16": (16, graphs.random_bounded_degree_edges(16, 3, 18, 5)),
}


def _vertex_values(scopes, theta, inv, beta, s_init, free):
    """Every vertex of the free coordinates and its LCB, float64 NumPy."""
    n = scopes.num_coords
    where = np.flatnonzero(free)
    p = np.arange(2 ** len(where))
    verts = np.broadcast_to(s_init, (len(p), n)).copy()
    verts[:, where] = (p[:, None] >> np.arange(len(where))[None, :]) & 1
    phi = np.where(scopes.mask, verts[:, scopes.index], 0.0)
    q = np.einsum("pki,kij,pkj->pk", phi, inv, phi)
    return verts, (np.sum(phi * theta, -1) - beta * np.sqrt(np.maximum(q, 1e-12))).sum(-1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(LEVEL_FAMILIES))
def test_level_plan_matches_brute_force(name, dtype):
    """The level plan's answer is a minimiser of the brute-force enumeration, its value the
    minimum; where the minimiser is unique (with a margin) it is the enumerator's."""
    n, edges = LEVEL_FAMILIES[name]
    scopes = graphs.graph_scopes(n, edges)
    structure = P.make_structure(scopes, "linear", "independent")
    plan = dp.make_plan(scopes, exact_ties=False, levels=True)
    assert plan.levels is not None
    rng = np.random.default_rng(zlib.crc32(f"levels-{name}".encode()))
    rel = 1e-5 if dtype == "float32" else 1e-12
    with jax.enable_x64(dtype == "float64"):
        problem = P.make_problem(jax.random.key(0), structure, scopes, dtype=getattr(jnp, dtype))
        for trial, kind in enumerate(["random", "random", "ties", "rounding"]):
            theta, inv, beta = _terms(rng, scopes, kind)
            s_init = rng.uniform(size=n)
            free = np.ones(n, bool) if trial == 0 else rng.uniform(size=n) < 0.7
            if dtype == "float32":
                theta, inv, beta, s_init = (np.float32(x).astype(np.float64)
                                            for x in (theta, inv, beta, s_init))
            s, value = _solve("dp", structure, problem, plan, theta, inv, beta, s_init, free,
                              dtype)
            np.testing.assert_array_equal(s[~free], s_init[~free])
            assert set(np.unique(s[free])) <= {0.0, 1.0}
            verts, values = _vertex_values(scopes, theta, inv, beta, s_init, free)
            low = values.min()
            _, got = _vertex_values(scopes, theta, inv, beta, s, np.zeros(n, bool))
            assert got[0] <= low + rel * max(1.0, abs(low)), (name, kind, got[0], low)
            assert abs(value - got[0]) <= rel * max(1.0, abs(got[0]))
            near = np.flatnonzero(values <= low + 1e3 * rel * max(1.0, abs(low)))
            if len(near) == 1:  # a unique minimiser: the same answer
                np.testing.assert_array_equal(s, verts[near[0]], err_msg=f"{name} {kind}")


def _simulate_levels(n, scopes, levels):
    """Independent check of a level plan: every level an independent set of the filled
    interaction graph (built here from the scopes pair by pair), all coordinates eliminated
    once; returns the largest separator met."""
    adj = {v: set() for v in range(n)}
    for idx, msk in zip(scopes.index, scopes.mask):
        real = [int(c) for c, m in zip(idx, msk) if m]
        for a in real:
            for b in real:
                if a != b:
                    adj[a].add(b)
    width, seen = 0, []
    for level in levels:
        level = [int(v) for v in level]
        assert len(set(level)) == len(level) and not set(level) & set(seen)
        for v in level:
            assert not adj[v] & set(level), f"level {level} is not independent at {v}"
        for v in level:
            nb = adj.pop(v)
            width = max(width, len(nb))
            for a in nb:
                adj[a] |= nb - {a}
                adj[a].discard(v)
        seen += level
    assert sorted(seen) == list(range(n))
    return width


@pytest.mark.parametrize("family", ["chain", "ring", "tree"])
def test_level_plan_is_shallow_on_long_graphs(family):
    """1024 nodes: a valid elimination (each level independent in the filled graph, the width
    reported is that of the levels) in at most 2 log2(n) levels."""
    n = 1024
    edges = {"chain": graphs.chain_edges(n), "ring": _ring(n),
             "tree": _relabel(n, _tree_bounded(n, 3, 0), 0)}[family]
    scopes = graphs.graph_scopes(n, edges)
    plan = dp.make_plan(scopes, exact_ties=False, levels=True)
    assert len(plan.levels) <= 2 * np.log2(n) + 2, len(plan.levels)
    width = _simulate_levels(n, scopes, plan.levels)
    assert plan.limits == (width, 2 ** (width + 1), n * 2 ** (width + 1))
    assert dp.limits(scopes, exact_ties=False) == plan.limits
    assert width <= 6


def _tree_bounded(n, max_degree, seed):
    rng = np.random.default_rng(seed)
    deg, edges = np.zeros(n, int), []
    for v in range(1, n):
        u = int(rng.choice(np.flatnonzero(deg[:v] < max_degree)))
        deg[[u, v]] += 1
        edges.append((u, v))
    return edges


def test_level_plan_selection():
    """``levels=None`` (default): levels exactly when ``exact_ties=False``; the tie rule of the
    vertex enumerator refuses levels in one line naming the argument; a cap the levels cannot
    meet, or a graph that needs more than ``dp.max_levels(n)`` levels (a 4 x 64 grid: about
    n / 2.4), keeps the sequential min-fill order (auto); ``levels=True`` refuses the cap."""
    ring = graphs.graph_scopes(40, _ring(40))
    assert dp.make_plan(ring).levels is None
    assert dp.make_plan(ring) == dp.make_plan(ring, levels=False)
    assert dp.make_plan(ring, exact_ties=False).levels is not None
    assert dp.make_plan(ring, exact_ties=False, levels=False).levels is None
    assert dp.make_plan(ring, exact_ties=False) != dp.make_plan(ring, exact_ties=False,
                                                                levels=False)
    with pytest.raises(ValueError, match=r"^dp: levels=True needs exact_ties=False"):
        dp.make_plan(ring, levels=True)
    assert dp.make_plan(ring, exact_ties=False).width == 5  # levels: wider than sequential
    seq = dp.make_plan(ring, exact_ties=False, max_table=32)  # width 4 fits 2^5 sequentially
    assert (seq.width, seq.levels) == (4, None)
    assert dp.limits(ring, exact_ties=False, max_table=32).width == 4
    with pytest.raises(dp.TooWide):
        dp.make_plan(ring, exact_ties=False, max_table=32, levels=True)
    with pytest.raises(dp.TooWide):
        dp.make_plan(ring, exact_ties=False, max_table=16)
    grid = graphs.graph_scopes(256, graphs.grid_edges(64, 4))
    assert dp.make_plan(grid, exact_ties=False).levels is None
    forced = dp.make_plan(grid, exact_ties=False, levels=True)
    assert len(forced.levels) > dp.max_levels(256)
    assert _simulate_levels(256, grid, forced.levels) == forced.width



def test_more_than_4096_criteria_in_float32(x64):
    """A ring of 4200 nodes (k = 4200 criteria): the float32 level DP's answer has the LCB
    (float64 NumPy) of the float64 level DP's, the exact minimum, to float32 accuracy. Fails
    where the XLA:CPU YNN fusion bug makes the float32 tables wrong past row 4096 (jax 0.10.2),
    i.e. if importing gsjax stopped turning those fusions off (gsjax/__init__.py)."""
    assert "--xla_cpu_experimental_ynn_fusion_type=" in os.environ["XLA_FLAGS"]
    n = 4200
    scopes = graphs.graph_scopes(n, _ring(n))
    structure = P.make_structure(scopes, "linear", "independent")
    plan = dp.make_plan(scopes, exact_ties=False)
    rng = np.random.default_rng(11)
    theta, inv, beta = _terms(rng, scopes, "random")
    theta, inv, beta, s_init = (np.float32(x).astype(np.float64)
                                for x in (theta, inv, beta, rng.uniform(size=n)))
    lcb64 = {}
    for dtype in ("float32", "float64"):
        problem = P.make_problem(jax.random.key(0), structure, scopes,
                                 dtype=getattr(jnp, dtype))

        def solve(th, iv, bt, s0):  # every coordinate free, as in LinUCB's solve
            objective = lcb.node_objective(structure, problem, th, iv, bt)
            return dp.minimise(plan, objective, s0, jnp.ones(n, bool))[0]

        s = np.asarray(jax.jit(solve)(*(jnp.asarray(x, dtype) for x in (theta, inv, beta,
                                                                          s_init))), np.float64)
        phi = np.where(scopes.mask, s[scopes.index], 0.0)
        q = np.einsum("ki,kij,kj->k", phi, inv, phi)
        lcb64[dtype] = float(np.sum(np.sum(phi * theta, -1) - beta * np.sqrt(
            np.maximum(q, 1e-12))))
    assert lcb64["float32"] <= lcb64["float64"] + 1e-5 * abs(lcb64["float64"]), lcb64


def test_pgd_gap_is_pgds_lcb_above_the_brute_force_minimum(x64):
    """``pgd_gap``: PGD's residual is its LCB above the exact minimum, against float64 NumPy
    enumeration of every vertex (free coordinates, the others at ``s_init``); a config asks
    for it on PGD entries only, on graphs the DP takes."""
    from gsjax.algorithms.kernel import solve_objective

    scopes, structure = _setup("ring12")
    plan = dp.make_plan(scopes)
    rng = np.random.default_rng(5)
    n = scopes.num_coords
    problem = P.make_problem(jax.random.key(0), structure, scopes, dtype=jnp.float64)
    gaps = []
    for trial, steps in enumerate((1, 3, 30)):
        theta, inv, beta = _terms(rng, scopes, "random")
        s_init = rng.uniform(size=n)
        free = np.ones(n, bool) if trial == 0 else rng.uniform(size=n) < 0.7
        spec = AgentSpec(solver="pgd", pgd_steps=steps, pgd_starts=2, pgd_gap=True, dp_plan=plan)
        params = type("P", (), {"pgd_lr": jnp.asarray(0.05)})()
        solve = jax.jit(lambda key, th, iv, bt, s, f, spec=spec, params=params: solve_objective(
            key, spec, params, lcb.node_objective(structure, problem, th, iv, bt), s, f))
        s, value, gap = solve(jax.random.key(trial), *(jnp.asarray(x) for x in
                                                       (theta, inv, beta, s_init, free)))
        _, _, low = _brute_force(scopes, theta, inv, beta, s_init, free, 2.0 ** -52)
        _, at_s, _ = _brute_force(scopes, theta, inv, beta, np.asarray(s), np.zeros(n, bool),
                                  2.0 ** -52)
        assert float(value) == pytest.approx(at_s, rel=1e-9, abs=1e-9)
        assert float(gap) == pytest.approx(at_s - low, rel=1e-9, abs=1e-9)
        gaps.append(float(gap))
    assert gaps[0] > 0  # one step lands off the minimum

    base = {"name": "g", "seeds": 2, "horizon": 20, "record_every": 10,
            "problem": {"structure": "graph", "graph": "chain", "num_nodes": 8},
            "agent": {"solver": "pgd", "pgd_steps": 2, "pgd_starts": 1, "pgd_gap": True},
            "algorithms": {"lazy": {}}}
    built = experiment.build(parse_config(base))
    assert built.algorithms[0].spec.dp_plan is not None
    summary = experiment.summarise(experiment.run_experiment(parse_config(base), built,
                                                             log=None))
    assert summary["algorithms"]["lazy"]["max_lcb_residual"] > 0
    for agent, field in (({"solver": "vertex", "pgd_gap": True}, "algorithms.lazy.pgd_gap"),
                         ({"pgd_gap": True, "dp_max_table": 2}, "algorithms.lazy.pgd_gap")):
        cfg = parse_config({**base, "agent": {**base["agent"], **agent}})
        with pytest.raises(ConfigError, match=field):
            experiment.build(cfg)


def test_refresh_method_unrolled_run_equals_cholesky_in_float64(x64):
    """A ring of 8 (scopes of 3) in float64, LinUCB, lazy and async with the DP: the unrolled
    refresh gives the same run as LAPACK's (every count equal, regret to 1e-9); it is refused
    for an estimator other than the per-criterion ridge."""
    base = {"name": "r", "seeds": 3, "horizon": 60, "record_every": 30, "dtype": "float64",
            "problem": {"structure": "graph", "graph": "edges", "num_nodes": 8,
                        "edges": [[i, (i + 1) % 8] for i in range(8)]},
            "agent": {"solver": "dp", "lambda_reg": 0.05},
            "algorithms": {"linucb": {}, "lazy": {}, "async_lazy": {}}}
    out = {}
    for method in ("cholesky", "unrolled"):
        cfg = parse_config({**base, "agent": {**base["agent"], "refresh_method": method}})
        out[method] = experiment.summarise(experiment.run_experiment(
            cfg, experiment.build(cfg), log=None))["algorithms"]
    for name, a in out["cholesky"].items():
        b = out["unrolled"][name]
        for key in ("total_updates", "total_changes", "reoptimisations"):
            assert a[key] == b[key], (name, key)
        assert b["prediction_regret"]["mean"] == pytest.approx(
            a["prediction_regret"]["mean"], rel=1e-9)
    joint = {**base, "agent": {"lambda_reg": 0.05, "refresh_method": "unrolled"},
             "algorithms": {"j": {"algorithm": "joint_lazy"}}}
    with pytest.raises(ConfigError, match="algorithms.j.refresh_method"):
        experiment.build(parse_config(joint))
    with pytest.raises(ConfigError, match="refresh_method"):
        parse_config({**base, "agent": {"refresh_method": "qr"}})


@pytest.mark.parametrize("plan_kind", ["levels", "sequential", "sequential_min_fill",
                                       "sequential_active"])
def test_solver_batching_rule_is_the_per_seed_solver(plan_kind, monkeypatch):
    """Both plans' solvers batch with the seed axis last (their own vmap rules; the level plan
    on a ring, the sequential one on a 4 x 10 grid, with exact ties and without: the latter
    multiplies the criteria tables out in the rule; and without, forced onto its active path,
    whose rule keeps the seeds first): under one vmap, two nested vmaps, vmap
    inside a lax.cond with a batched predicate (the runner's per-seed form), and JAX's default
    batching of the same function, every seed's bits equal those of its unbatched solve; and
    gradients of the LCB value pass (the bits carry none)."""
    n, seeds = (20 if plan_kind == "levels" else 40), 6  # the ring: 9 levels of width 5
    edges = _ring(n) if plan_kind == "levels" else graphs.grid_edges(n // 4, 4)
    scopes = graphs.graph_scopes(n, edges)
    structure = P.make_structure(scopes, "linear", "independent")
    problem = P.make_problem(jax.random.key(0), structure, scopes)
    if plan_kind == "levels":
        plan = dp.make_plan(scopes, exact_ties=False, levels=True)
    elif plan_kind in ("sequential_min_fill", "sequential_active"):
        if plan_kind == "sequential_active":  # the active path at any size and share
            monkeypatch.setattr(dp, "ACTIVE_MIN_COORDS", 0)
            monkeypatch.setattr(dp, "ACTIVE_SHARE", 1)
        # the narrower of plain min-fill (width 9 here) and the index order (8)
        plan = dp.make_plan(scopes, exact_ties=False, levels=False)
        assert plan.levels is None and plan.width == 8
        assert dp._limits(dp._elimination(dp._interaction(scopes), False, 2 ** 20)[1]).width == 9
    else:
        plan = dp.make_plan(scopes)
        assert plan.levels is None and plan.width == 8
    rng = np.random.default_rng(5)
    k, m = scopes.index.shape
    theta = jnp.asarray(np.where(scopes.mask, rng.normal(size=(seeds, k, m)), 0.0), jnp.float32)
    a = rng.normal(size=(seeds, k, m, m))
    inv = jnp.asarray(a @ np.swapaxes(a, -1, -2) / m + 0.1 * np.eye(m), jnp.float32)
    beta = jnp.asarray(rng.uniform(0.0, 2.0, (seeds, k)), jnp.float32)
    s0 = jnp.asarray(rng.uniform(size=(seeds, n)), jnp.float32)
    free = jnp.asarray(rng.uniform(size=(seeds, n)) < 0.7)

    def one(th, iv, bt, s, fr):
        objective = lcb.node_objective(structure, problem, th, iv, bt)
        return dp.minimise(plan, objective, s, fr)

    args = (theta, inv, beta, s0, free)
    single = np.stack([np.asarray(jax.jit(one)(*(x[i] for x in args))[0]) for i in range(seeds)])
    batched = np.asarray(jax.jit(jax.vmap(one))(*args)[0])
    nested = jax.jit(jax.vmap(jax.vmap(one)))(*(x.reshape(2, 3, *x.shape[1:]) for x in args))[0]
    in_cond = jax.jit(jax.vmap(lambda go, *a: jax.lax.cond(go, lambda: one(*a)[0],
                                                            lambda: a[3])))(
        jnp.arange(seeds) % 2 == 0, *args)
    if plan_kind != "sequential":
        solver, tables = ((dp._level_solver(plan), dp._level_tables(plan)) if plan.levels else
                          (dp._sequential_solver(plan), dp._sequential_tables(plan)))
        default = jax.jit(jax.vmap(solver.fun, in_axes=(None, 0, 0, 0, 0, 0)))(
            tables, free, s0, theta, inv, beta)
    else:
        solver, tables = dp._sequential_solver(plan), dp._sequential_tables(plan)
        criteria = jax.vmap(lambda th, iv, bt, s, fr: dp._criterion_tables(
            plan, lcb.node_objective(structure, problem, th, iv, bt).terms, s, fr))(*args)
        default = jax.jit(jax.vmap(solver.fun, in_axes=(None, 0)))(tables, criteria)
    np.testing.assert_array_equal(batched, single)
    np.testing.assert_array_equal(np.asarray(nested).reshape(seeds, n), single)
    np.testing.assert_array_equal(np.asarray(in_cond)[::2], single[::2])
    np.testing.assert_array_equal(np.asarray(in_cond)[1::2], np.asarray(s0)[1::2])
    np.testing.assert_array_equal(np.where(np.asarray(free), np.asarray(default), np.asarray(s0)),
                                  single)
    grad = jax.jit(jax.grad(lambda th: jnp.sum(jax.vmap(one)(th, *args[1:])[1])))(theta)
    assert np.all(np.isfinite(np.asarray(grad))) and np.any(np.asarray(grad) != 0)


def _random_estimates(rng, scopes, seeds):
    k, m = scopes.index.shape
    theta = np.where(scopes.mask, rng.normal(size=(seeds, k, m)), 0.0)
    a = rng.normal(size=(seeds, k, m, m))
    inv = a @ np.swapaxes(a, -1, -2) / m + 0.1 * np.eye(m)
    return theta, inv, rng.uniform(0.0, 2.0, (seeds, k))


def _lcb64(scopes, theta, inv, beta, s):
    """The LCB of state(s) ``s`` (..., n) in float64 NumPy."""
    phi = np.where(scopes.mask, np.asarray(s, np.float64)[..., scopes.index], 0.0)
    q = np.einsum("...ki,...kij,...kj->...k", phi, inv, phi)
    return (np.sum(phi * theta, -1) - beta * np.sqrt(np.maximum(q, 1e-12))).sum(-1)


def _stub_scan(monkeypatch):
    """The sequential plan's whole scan stubbed out (every bit 0): what a test then gets from
    the solver where the active path did not run."""
    monkeypatch.setattr(dp, "_scan_batched", lambda plan, pt, *a: jnp.zeros(a[1].shape, jnp.int32))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rows, cols", [(4, 4), (4, 10)])
def test_active_path_matches_brute_force(monkeypatch, rows, cols, dtype):
    """The sequential plan's active path (each seed's steps whose clique holds a free
    coordinate, its live criteria only), forced on small grids (any size, any share of active
    steps) with the whole scan stubbed out, so every answer is the active path's: a minimiser
    of the brute-force enumeration over the free coordinates (every mask density, none and all
    free included), the others at their start; and one seed's answer in a batch of seeds with
    other masks is its answer alone."""
    monkeypatch.setattr(dp, "ACTIVE_MIN_COORDS", 0)
    monkeypatch.setattr(dp, "ACTIVE_SHARE", 1)
    _stub_scan(monkeypatch)
    n = rows * cols
    scopes = graphs.graph_scopes(n, graphs.grid_edges(cols, rows))
    structure = P.make_structure(scopes, "linear", "independent")
    plan = dp.make_plan(scopes, exact_ties=False, levels=False)
    assert plan.levels is None and dp._has_active_path(plan)
    rng = np.random.default_rng(zlib.crc32(f"active-{rows}x{cols}-{dtype}".encode()))
    rel = 1e-5 if dtype == "float32" else 1e-12
    densities = [1.0, 0.5, 0.2, 0.05, 0.0, 0.3, 0.1]
    seeds = len(densities)
    theta, inv, beta = _random_estimates(rng, scopes, seeds)
    theta[0] = np.where(scopes.mask, rng.integers(-1, 2, theta[0].shape) * 0.5, 0.0)  # ties
    inv[0], beta[0] = np.eye(scopes.index.shape[1]), 0.0
    s0 = rng.uniform(size=(seeds, n))
    free = rng.uniform(size=(seeds, n)) < np.asarray(densities)[:, None]
    free[:, 16:] &= np.cumsum(free, axis=1)[:, 16:] <= 16  # brute force: 2^16 vertices at most
    with jax.enable_x64(dtype == "float64"):
        problem = P.make_problem(jax.random.key(0), structure, scopes, dtype=getattr(jnp, dtype))
        args = [jnp.asarray(x, dtype) for x in (theta, inv, beta, s0)] + [jnp.asarray(free)]
        if dtype == "float32":  # the reference sees what the solver sees
            theta, inv, beta, s0 = (np.asarray(a, np.float64) for a in args[:4])

        def one(th, iv, bt, s, fr):
            return dp.minimise(plan, lcb.node_objective(structure, problem, th, iv, bt), s, fr)

        batched = jax.jit(jax.vmap(one))(*args)
        for i in range(seeds):
            s, value, _ = jax.jit(one)(*(a[i] for a in args))
            s = np.asarray(s, np.float64)
            np.testing.assert_array_equal(s, np.asarray(batched[0][i], np.float64))
            np.testing.assert_array_equal(s[~free[i]], s0[i][~free[i]])
            assert set(np.unique(s[free[i]])) <= {0.0, 1.0}
            _, values = _vertex_values(scopes, theta[i], inv[i], beta[i], s0[i], free[i])
            got = _lcb64(scopes, theta[i], inv[i], beta[i], s)
            low = values.min()
            assert got <= low + rel * max(1.0, abs(low)), (i, got, low)
            assert abs(float(value) - got) <= rel * max(1.0, abs(got))


def test_active_path_is_each_seeds_own_choice(monkeypatch):
    """In a batch where some seeds have few active steps and live criteria and others many,
    each seed takes its own path (the active path, or the whole scan) and its answer is its
    answer alone, bit for bit: a seed's bits never depend on the seeds solved beside it (a
    batch-wide choice gave a seed the whole scan when another seed had many free coordinates,
    and the two paths may differ on near ties). Each answer is a minimiser (brute force)."""
    monkeypatch.setattr(dp, "ACTIVE_MIN_COORDS", 0)
    monkeypatch.setattr(dp, "ACTIVE_SHARE", 4)
    rows, cols = 4, 10
    n = rows * cols
    scopes = graphs.graph_scopes(n, graphs.grid_edges(cols, rows))
    structure = P.make_structure(scopes, "linear", "independent")
    plan = dp.make_plan(scopes, exact_ties=False, levels=False)
    assert plan.levels is None and dp._has_active_path(plan)
    rng = np.random.default_rng(zlib.crc32(b"own-choice"))
    densities = [0.05, 0.6, 0.0, 0.3, 0.05, 1.0, 0.1]
    seeds = len(densities)
    theta, inv, beta = _random_estimates(rng, scopes, seeds)
    s0 = rng.uniform(size=(seeds, n))
    free = rng.uniform(size=(seeds, n)) < np.asarray(densities)[:, None]
    free[:, 16:] &= np.cumsum(free, axis=1)[:, 16:] <= 16  # brute force: 2^16 vertices at most
    clique = plan.clique[plan.order]
    pad = np.concatenate([free, np.zeros((seeds, 1), bool)], axis=1)
    active = pad[:, clique].any(axis=2).sum(axis=1)
    live = (free[:, scopes.index] & scopes.mask).any(axis=2).sum(axis=1)
    fits = (active <= n // 4) & (live <= n // 4)
    assert fits.any() and not fits.all(), (active, live)  # a batch of both kinds
    problem = P.make_problem(jax.random.key(0), structure, scopes)
    args = [jnp.asarray(x, jnp.float32) for x in (theta, inv, beta, s0)] + [jnp.asarray(free)]
    theta, inv, beta, s0 = (np.asarray(a, np.float64) for a in args[:4])

    def one(th, iv, bt, s, fr):
        return dp.minimise(plan, lcb.node_objective(structure, problem, th, iv, bt), s, fr)[0]

    def check(batched, alone, which):
        for i in np.flatnonzero(which):
            np.testing.assert_array_equal(batched[i], np.asarray(alone(*(a[i] for a in args))))
            _, values = _vertex_values(scopes, theta[i], inv[i], beta[i], s0[i], free[i])
            got = _lcb64(scopes, theta[i], inv[i], beta[i], np.asarray(batched[i], np.float64))
            assert got <= values.min() + 1e-5 * max(1.0, abs(values.min())), (i, got)

    check(np.asarray(jax.jit(jax.vmap(one))(*args)), jax.jit(one), np.ones(seeds, bool))
    # the whole scan stubbed out (all bits 0): a seed with few free coordinates still gets the
    # active path's minimiser in the mixed batch (a batch-wide choice gave it the stub's 0s)
    _stub_scan(monkeypatch)
    check(np.asarray(jax.jit(jax.vmap(one))(*args)), jax.jit(one), fits)


def test_active_path_at_its_size_takes_few_free_and_leaves_the_rest_to_the_scan(monkeypatch):
    """At ACTIVE_MIN_COORDS coordinates (a 4 x 1024 grid) with the shipped share: every
    coordinate free (lazy's and LinUCB's solves) runs the whole scan, bit for bit its answer
    without the active path; a few free coordinates per seed (async's) run the active path
    (the scan stubbed out there, answers unchanged), each answer's LCB (float64) no higher than
    the whole scan's up to float32 rounding, and the non-free coordinates at their start."""
    n, seeds = dp.ACTIVE_MIN_COORDS, 3
    scopes = graphs.graph_scopes(n, graphs.grid_edges(n // 4, 4))
    structure = P.make_structure(scopes, "linear", "independent")
    problem = P.make_problem(jax.random.key(0), structure, scopes)
    plan = dp.make_plan(scopes, exact_ties=False)
    assert plan.levels is None and dp._has_active_path(plan)
    rng = np.random.default_rng(11)
    theta, inv, beta = _random_estimates(rng, scopes, seeds)
    s0 = rng.integers(0, 2, (seeds, n)).astype(np.float64)
    few = np.zeros((seeds, n), bool)
    for i, trig in enumerate([1, 4, 8]):  # the scopes of a few triggered criteria
        crit = rng.choice(n, trig, replace=False)
        few[i, scopes.index[crit][scopes.mask[crit]]] = True
    args = [jnp.asarray(x, jnp.float32) for x in (theta, inv, beta, s0)]

    def solve():
        def one(th, iv, bt, s, fr):
            return dp.minimise(plan, lcb.node_objective(structure, problem, th, iv, bt), s, fr)
        return jax.jit(jax.vmap(one))

    with_active = solve()
    every = jnp.ones((seeds, n), bool)
    all_free, some_free = (np.asarray(with_active(*args, f)[0]) for f in (every, jnp.asarray(few)))
    monkeypatch.setattr(dp, "ACTIVE_MIN_COORDS", n + 1)  # no active path: the whole scan
    np.testing.assert_array_equal(all_free, np.asarray(solve()(*args, every)[0]))
    scan = np.asarray(solve()(*args, jnp.asarray(few))[0])
    monkeypatch.setattr(dp, "ACTIVE_MIN_COORDS", n)
    _stub_scan(monkeypatch)
    np.testing.assert_array_equal(np.asarray(solve()(*args, jnp.asarray(few))[0]), some_free)
    th, iv, bt = (np.asarray(a, np.float64) for a in args[:3])
    np.testing.assert_array_equal(some_free[~few], s0[~few])
    ours, theirs = _lcb64(scopes, th, iv, bt, some_free), _lcb64(scopes, th, iv, bt, scan)
    assert np.all(ours <= theirs + 1e-5 * np.maximum(1.0, np.abs(theirs))), (ours, theirs)
