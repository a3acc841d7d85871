"""Exact LCB minimisation: the DP of gsjax/dp.py against whole-box vertex enumeration.

    python benchmarks/dp.py                      # about a minute on 2 CPU cores
    python benchmarks/dp.py --seeds 64 --repeats 9 --sizes 8 12 16 --dp-only 100 1000

Each row minimises the LCB of ``seeds`` random objectives (linear features, closed
neighbourhoods of a ring of ``n`` nodes: ``k = n`` criteria, scopes of 3, DP width 4) with ONE
jitted ``vmap`` per solver: :func:`gsjax.lcb.minimise_vertices` (``2^n`` vertices) and
:func:`gsjax.dp.minimise`. Compile time is measured apart (first call minus the median); the
two solvers are timed alternately, repetition by repetition, in one process, and the medians
reported. Both answers are checked identical. ``--dp-only`` adds DP rows at sizes where
enumeration is impossible. Prints a markdown table and writes
``benchmarks/results/dp.json``.
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


def _case(n: int, seeds: int, seed: int = 0):
    """Scopes, structure, problem and a batch of random objectives' arrays for a ring of n."""
    scopes = graphs.graph_scopes(n, graphs.chain_edges(n) + [(n - 1, 0)])
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 12, 16])
    ap.add_argument("--dp-only", type=int, nargs="*", default=[100, 1000])
    args = ap.parse_args(argv)
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
    out = os.path.join(os.path.dirname(__file__), "results", "dp.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
