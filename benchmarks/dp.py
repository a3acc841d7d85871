"""Exact LCB minimisation: the DP of gsjax/dp.py against whole-box vertex enumeration.

    python benchmarks/dp.py                      # about a minute on 2 CPU cores
    python benchmarks/dp.py --seeds 64 --repeats 9 --sizes 8 12 16 --dp-only 100 1000
    python benchmarks/dp.py --vs-pgd 1000 --graphs ring tree grid --seeds 64 --repeats 5
    python benchmarks/dp.py --config ring 100 > configs/dp_ring.toml   # writes a config
    python benchmarks/dp.py --levels 1000 10000 --graphs chain ring tree grid --seeds 64

Each row minimises the LCB of ``seeds`` random objectives (linear features, closed
neighbourhoods of a ring of ``n`` nodes: ``k = n`` criteria, scopes of 3, DP width 4) with ONE
jitted ``vmap`` per solver: :func:`gsjax.lcb.minimise_vertices` (``2^n`` vertices) and
:func:`gsjax.dp.minimise`. Compile time is measured apart (first call minus the median); the
two solvers are timed alternately, repetition by repetition, in one process, and the medians
reported. Both answers are checked identical. ``--dp-only`` adds DP rows at sizes where
enumeration is impossible. Prints a markdown table and writes
``benchmarks/results/dp.json``.

``--vs-pgd K``: the DP against projected gradient descent with the PGD settings of
``configs/large_graphs.toml`` (2 starts x 20 Adam steps, the current point kept; read from the
config) on ``K``-node graphs (``--graphs``: ring; tree, a random tree of degree <= 3 numbered
so that every parent comes after its children; grid, 4 x K/4 numbered along the short side;
random, the large_graphs graph, which the DP refuses: width >= 16 at K = 40 already), the same
timing protocol, and the LCB gap of PGD's answer to the exact minimum,
``(LCB(s_pgd) - LCB(s_dp)) / |LCB(s_dp)|``, evaluated in float64 NumPy, mean and max over the
objectives. Writes ``benchmarks/results/dp_vs_pgd.json``.

``--levels N ...``: the DP's three plans (:func:`bench_levels`: the configs' sequential plan
with exact ties, the sequential ``min_fill`` plan without, the ``levels`` plan of many
eliminations at once) on ``N``-node graphs (``--graphs``; chain added), each plan's solver a
jitted ``vmap`` over ``seeds`` objectives, compiled apart (first call minus the median), timed
alternately (``benchmarks/timing.py``); the plans' widths, and the float64 LCB of each answer
above the sequential plan's. A plan of more than 600 levels (the 4 x N/4 grid at N = 10^4:
4171) is not unrolled. Writes ``benchmarks/results/dp_levels_sS.json``.
Run with ``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=`` on CPU: XLA's YNN fusions
miscompute the float32 LCB tables past criterion 4096 (``tests/test_dp.py``).

``--config FAMILY K``: prints the Section 5.1 config ``configs/dp_FAMILY.toml`` at ``K`` nodes
(the built-in ones are ``K = 100``): chain, ring, tree or grid, the edges written out where the
config has no graph kind for them (:func:`gsjax.paper.dp_scale.family_config`; its options as
flags: ``--name``, ``--seeds``, ``--horizon``, ``--record-every``, ``--algorithms``,
``--no-exact-ties`` for the level plan). The runs at scale: ``python -m gsjax.paper.dp_scale``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from gsjax import dp, graphs, lcb
from gsjax import problem as P
from gsjax.config import find_config, load_config
from gsjax.paper.dp_scale import GRAPHS, family_config


def _case(n: int, seeds: int, seed: int = 0, graph: str = "ring"):
    """Scopes, structure, problem and a batch of random objectives' arrays for a graph of n."""
    scopes = graphs.graph_scopes(n, GRAPHS[graph](n))
    structure = P.make_structure(scopes, "linear", "independent")
    problem = P.make_problem(jax.random.key(seed), structure, scopes)
    rng = np.random.default_rng(seed)
    k, m = scopes.index.shape
    theta = np.where(scopes.mask, rng.normal(size=(seeds, k, m)), 0.0)
    a = rng.normal(size=(seeds, k, m, m))
    inv = a @ np.swapaxes(a, -1, -2) / m + 0.1 * np.eye(m)
    beta = rng.uniform(0.0, 2.0, (seeds, k))
    s0 = rng.uniform(size=(seeds, n))
    arrays = tuple(jnp.asarray(x, jnp.float32) for x in (theta, inv, beta, s0))
    return scopes, structure, problem, arrays


def _solver(name, structure, problem, plan):
    def one(theta, inv, beta, s0):
        objective = lcb.node_objective(structure, problem, theta, inv, beta)
        free = jnp.ones(s0.shape, bool)
        if name == "dp":
            return dp.minimise(plan, objective, s0, free)[0]
        return lcb.minimise_vertices(objective, s0, free)[0]

    return jax.jit(jax.vmap(one))


def _timed(fn, arrays):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*arrays))
    return time.perf_counter() - t0, out


def bench(n: int, seeds: int, repeats: int, names) -> dict:
    scopes, structure, problem, arrays = _case(n, seeds)
    plan = dp.make_plan(scopes)
    fns = {name: _solver(name, structure, problem, plan) for name in names}
    first, times, outs = {}, {name: [] for name in names}, {}
    for name in names:
        first[name], outs[name] = _timed(fns[name], arrays)
    for _ in range(repeats):  # alternate: the machine's load hits both alike
        for name in names:
            times[name].append(_timed(fns[name], arrays)[0])
    if len(names) == 2:
        np.testing.assert_array_equal(outs["vertex"], outs["dp"])
    row = {"n": n, "seeds": seeds, "width": plan.width, "repeats": repeats}
    for name in names:
        med = statistics.median(times[name])
        row[name] = {"median_s": med, "compile_s": max(first[name] - med, 0.0),
                     "per_solve_us": 1e6 * med / seeds}
    return row


PLANS = {"sequential": {}, "min_fill": {"exact_ties": False, "levels": False},
         "levels": {"exact_ties": False, "levels": True}}


def bench_levels(n: int, graph: str, seeds: int, repeats: int) -> dict:
    """The three plans of ``dp.make_plan`` on ``seeds`` random objectives of a graph, timed
    alternately (timing.py): ``sequential`` (the configs' default, ``exact_ties=True``: one
    ``lax.scan`` step per coordinate, the criteria tables in the vertex enumerator's
    arithmetic), ``min_fill`` (``exact_ties=False, levels=False``: the same scan in the
    narrower of the two orders, the tables multiplied out seed-last) and ``levels``
    (``exact_ties=False, levels=True``: many eliminations at once; not unrolled past 600)."""
    from timing import interleave

    scopes, structure, problem, arrays = _case(n, seeds, graph=graph)
    row = {"n": n, "graph": graph, "seeds": seeds, "repeats": repeats}
    plans = {}
    for name, kw in PLANS.items():
        t0 = time.perf_counter()
        try:
            plans[name] = dp.make_plan(scopes, **kw)
        except dp.TooWide as err:
            row[name] = {"refused": str(err)}
            continue
        row[name] = {"plan_s": time.perf_counter() - t0, "width": plans[name].width}
    if "levels" in plans:
        row["levels"]["num_levels"] = len(plans["levels"].levels)
        row["levels"]["auto"] = dp.make_plan(scopes, exact_ties=False).levels is not None
        if len(plans["levels"].levels) > 600:
            row["levels"]["skipped"] = f"{len(plans.pop('levels').levels)} levels: not unrolled"

    def solver(plan):
        def one(theta, inv, beta, s0):
            objective = lcb.node_objective(structure, problem, theta, inv, beta)
            return dp.minimise(plan, objective, s0, jnp.ones(s0.shape, bool))[0]
        return jax.jit(jax.vmap(one))

    fns, outs = {}, {}
    for name, plan in plans.items():
        fns[name] = solver(plan)
        row[name]["first_s"], outs[name] = _timed(fns[name], arrays)
    timed = interleave({name: lambda f=fn: jax.block_until_ready(f(*arrays))
                        for name, fn in fns.items()}, repeats)
    for name in fns:
        med = timed[name]["wall_median"]
        row[name].update(median_s=med, cpu_median_s=timed[name]["cpu_median"],
                         compile_s=max(row[name]["first_s"] - med, 0.0),
                         per_solve_us=1e6 * med / seeds)
    # (LCB(plan) - LCB(sequential)) / |LCB(sequential)| in float64: every plan reaches the
    # minimum, up to the tie rule's tolerance (a vertex up to 64 eps |min| above it)
    exact = {name: _lcb64(scopes, *arrays[:3], out) for name, out in outs.items()}
    for name in set(outs) - {"sequential"}:
        gap = (exact[name] - exact["sequential"]) / np.abs(exact["sequential"])
        row[name]["lcb_gap"] = {"min": float(gap.min()), "max": float(gap.max())}
        row[name]["same_answer"] = float(np.mean(np.all(outs[name] == outs["sequential"], -1)))
    return row


def _report_levels(args) -> None:
    load = os.getloadavg()
    rows = [bench_levels(n, g, args.seeds, args.repeats) for n in args.levels for g in args.graphs]
    print(f"The DP's plans: {args.seeds} random objectives per call, float32, {jax.devices()}, "
          f"load average {load} -> {os.getloadavg()}; ms (compile s), width; the float64 LCB "
          "of each answer above the sequential plan's, / abs, min..max")
    print("| graph | n | sequential | min_fill | levels | sequential / min_fill | "
          "sequential / levels | gap min_fill | gap levels |")
    print("|---|---|---|---|---|---|---|---|---|")

    def cell(c):
        if "median_s" in c:
            return f"{1e3 * c['median_s']:.1f} ({c['compile_s']:.1f}), w {c['width']}"
        return c.get("refused") or f"{c['skipped']}, w {c['width']}"

    def ratio(r, name):
        return f"{r['sequential']['median_s'] / r[name]['median_s']:.2f}" if (
            "median_s" in r[name] and "median_s" in r["sequential"]) else "–"

    def gap(c):
        return f"{c['lcb_gap']['min']:.0e}..{c['lcb_gap']['max']:.0e}" if "lcb_gap" in c else "–"

    for r in rows:
        print(f"| {r['graph']} | {r['n']} | {cell(r['sequential'])} | {cell(r['min_fill'])} | "
              f"{cell(r['levels'])} | {ratio(r, 'min_fill')} | {ratio(r, 'levels')} | "
              f"{gap(r['min_fill'])} | {gap(r['levels'])} |")
    _write(f"dp_levels_s{args.seeds}.json", {"args": vars(args), "load_average": load,
                                           "xla_flags": os.environ.get("XLA_FLAGS", ""),
                                           "rows": rows})


def _lcb64(scopes, theta, inv, beta, s):
    """(S,) LCB of the states ``s`` (S, n) in float64 NumPy (the solvers' eq. 7, written out)."""
    theta, inv, beta, s = (np.asarray(x, np.float64) for x in (theta, inv, beta, s))
    phi = np.where(scopes.mask, s[:, scopes.index], 0.0)  # (S, k, m)
    q = np.einsum("ski,skij,skj->sk", phi, inv, phi)
    return (np.sum(phi * theta, -1) - beta * np.sqrt(np.maximum(q, 0.0))).sum(-1)


def pgd_solver(structure, problem, ac):
    """``(theta, inv, beta, s0, key) -> s``: PGD with the settings of the agent config ``ac``
    on the LCB of one objective, every coordinate free."""
    def solve(theta, inv, beta, s0, key):
        objective = lcb.node_objective(structure, problem, theta, inv, beta)
        return lcb.minimise_objective_pgd(
            key, objective.value, s0, jnp.ones(s0.shape, bool), num_steps=ac.pgd_steps,
            num_starts=ac.pgd_starts, learning_rate=ac.pgd_lr, optimizer=ac.pgd_optimizer,
            include_current=ac.pgd_include_current)[0]

    return solve


def bench_vs_pgd(n: int, graph: str, seeds: int, repeats: int) -> dict:
    """DP against the large_graphs config's PGD on ``seeds`` random objectives of a graph."""
    ac = load_config(find_config("large_graphs")).agent
    scopes, structure, problem, arrays = _case(n, seeds, graph=graph)
    row = {"n": n, "graph": graph, "seeds": seeds, "repeats": repeats,
           "pgd_settings": {"starts": ac.pgd_starts, "steps": ac.pgd_steps, "lr": ac.pgd_lr,
                            "optimizer": ac.pgd_optimizer,
                            "include_current": ac.pgd_include_current}}
    t0 = time.perf_counter()
    try:
        plan = dp.make_plan(scopes)
    except dp.TooWide as err:
        return {**row, "refused": str(err)}
    row["plan_s"], row["width"] = time.perf_counter() - t0, plan.width
    keys = jax.random.split(jax.random.key(1), seeds)

    def exact(theta, inv, beta, s0, key):
        objective = lcb.node_objective(structure, problem, theta, inv, beta)
        return dp.minimise(plan, objective, s0, jnp.ones(s0.shape, bool))[0]

    fns = {"dp": jax.jit(jax.vmap(exact)),
           "pgd": jax.jit(jax.vmap(pgd_solver(structure, problem, ac)))}
    args = (*arrays, keys)
    first, times, outs = {}, {"dp": [], "pgd": []}, {}
    for name in fns:
        first[name], outs[name] = _timed(fns[name], args)
    for _ in range(repeats):  # alternate: the machine's load hits both alike
        for name in fns:
            times[name].append(_timed(fns[name], args)[0])
    exact, approx = (_lcb64(scopes, *arrays[:3], outs[name]) for name in ("dp", "pgd"))
    gap = (approx - exact) / np.abs(exact)
    row["gap"] = {"mean": float(gap.mean()), "max": float(gap.max()), "min": float(gap.min()),
                  "pgd_at_exact_vertex": float(np.mean(np.all(outs["pgd"] == outs["dp"], -1)))}
    for name in fns:
        med = statistics.median(times[name])
        row[name] = {"median_s": med, "compile_s": max(first[name] - med, 0.0),
                     "per_solve_us": 1e6 * med / seeds}
    return row


def _report_vs_pgd(args) -> None:
    load = os.getloadavg()
    rows = [bench_vs_pgd(n, g, args.seeds, args.repeats) for n in args.vs_pgd for g in args.graphs]
    print(f"DP against PGD: {args.seeds} random objectives per call, float32, {jax.devices()}, "
          f"load average {load} -> {os.getloadavg()}")
    print("| graph | k | width | pgd ms | dp ms | dp / pgd | LCB gap of PGD, mean | max | "
          "pgd compile s | dp compile s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "refused" in r:
            print(f"| {r['graph']} | {r['n']} | refused: {r['refused']} |")
            continue
        d, p, g = r["dp"], r["pgd"], r["gap"]
        print(f"| {r['graph']} | {r['n']} | {r['width']} | {1e3 * p['median_s']:.2f} | "
              f"{1e3 * d['median_s']:.2f} | {d['median_s'] / p['median_s']:.2f} | "
              f"{g['mean']:.2e} | {g['max']:.2e} | {p['compile_s']:.2f} | {d['compile_s']:.2f} |")
    _write("dp_vs_pgd.json", {"args": vars(args), "load_average": load, "rows": rows})


def _write(name: str, doc: dict) -> None:
    out = os.path.join(os.path.dirname(__file__), "results", name)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, help="objectives per call (default 64); with "
                    "--config, the config's seeds (default 20)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 12, 16])
    ap.add_argument("--dp-only", type=int, nargs="*", default=[100, 1000])
    ap.add_argument("--vs-pgd", type=int, nargs="+", metavar="K",
                    help="time the DP against large_graphs' PGD at these sizes instead")
    ap.add_argument("--levels", type=int, nargs="+", metavar="N",
                    help="time the three DP plans (sequential, min_fill, levels) at these sizes")
    ap.add_argument("--graphs", nargs="+", choices=sorted(GRAPHS), default=["ring"])
    ap.add_argument("--config", nargs=2, metavar=("FAMILY", "K"),
                    help="print the config dp_FAMILY.toml (chain, ring, tree, grid) at K nodes")
    ap.add_argument("--name", help="with --config: the config's name (default dp_FAMILY)")
    ap.add_argument("--horizon", type=int, default=1000, help="with --config: T")
    ap.add_argument("--record-every", type=int, help="with --config (default horizon // 20)")
    ap.add_argument("--algorithms", nargs="+", default=["linucb", "lazy", "lazy_own", "async_lazy"],
                    help="with --config: the entries, of linucb lazy lazy_own async_lazy")
    ap.add_argument("--exact-ties", action=argparse.BooleanOptionalAction, default=True,
                    help="with --config: --no-exact-ties writes the DP's level plan")
    args = ap.parse_args(argv)
    if args.config:
        print(family_config(args.config[0], int(args.config[1]), name=args.name,
                            seeds=20 if args.seeds is None else args.seeds,
                            horizon=args.horizon, record_every=args.record_every,
                            algorithms=tuple(args.algorithms), exact_ties=args.exact_ties),
              end="")
        return
    args.seeds = 64 if args.seeds is None else args.seeds
    if args.vs_pgd:
        _report_vs_pgd(args)
        return
    if args.levels:
        _report_levels(args)
        return
    rows = [bench(n, args.seeds, args.repeats, ("vertex", "dp")) for n in args.sizes]
    rows += [bench(n, args.seeds, args.repeats, ("dp",)) for n in args.dp_only]
    print(f"{args.seeds} objectives per call, float32, {jax.devices()}, "
          f"load average {os.getloadavg()}")
    print("| n | width | vertex ms | dp ms | vertex/dp | vertex compile s | dp compile s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        v = r.get("vertex")
        d = r["dp"]
        print(f"| {r['n']} | {r['width']} | "
              f"{'–' if v is None else format(1e3 * v['median_s'], '.2f')} | "
              f"{1e3 * d['median_s']:.2f} | "
              f"{'–' if v is None else format(v['median_s'] / d['median_s'], '.2f')} | "
              f"{'–' if v is None else format(v['compile_s'], '.2f')} | {d['compile_s']:.2f} |")
    _write("dp.json", {"args": vars(args), "rows": rows})


if __name__ == "__main__":
    main()
