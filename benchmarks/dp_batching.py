"""The level-plan DP under ``vmap``: its own batching rule (seed axis last) against JAX's default.

    python benchmarks/dp_batching.py                   # about 2 minutes on 2 CPU cores
    python benchmarks/dp_batching.py --n 10000 --graphs ring chain tree --seeds 100 --repeats 5

:func:`gsjax.dp.minimise` on a level plan calls one solver with a batching rule
(``jax.custom_batching.custom_vmap``): under ``vmap`` the seed axis goes last, so the levels'
static gathers copy rows of contiguous seeds. The contender is the same function batched by
JAX's default rules (``solver.fun``: the seed axis leading, every gather a per-entry loop), which
is what gsjax ran before. ``--seeds`` random objectives (``benchmarks/dp.py``'s ``_case``) per
jitted ``vmap``, all coordinates free; compiled apart (first call), alternated repetition by
repetition in one process (``benchmarks/timing.py``), medians; the answers checked identical.
Run with ``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=`` (see ``benchmarks/dp.py``).
Writes ``benchmarks/results/dp_batching.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from dp import _case
from gsjax import dp
from timing import interleave, machine


def bench(n: int, graph: str, seeds: int, repeats: int) -> dict:
    scopes, _, _, (theta, inv, beta, s0) = _case(n, seeds, graph=graph)
    plan = dp.make_plan(scopes, exact_ties=False, levels=True)
    solver = dp._level_solver(plan)
    free = jnp.ones(s0.shape, bool)
    args = (dp._level_tables(plan), free, s0, theta, inv, beta)
    axes = (None, 0, 0, 0, 0, 0)
    fns = {"seed axis last (gsjax)": jax.jit(jax.vmap(solver, in_axes=axes)),
           "default vmap": jax.jit(jax.vmap(solver.fun, in_axes=axes))}
    first, outs = {}, {}
    for name, fn in fns.items():
        t0 = time.perf_counter()
        outs[name] = np.asarray(jax.block_until_ready(fn(*args)))
        first[name] = time.perf_counter() - t0
    a, b = outs.values()
    np.testing.assert_array_equal(a, b)
    t = interleave({name: (lambda fn=fn: jax.block_until_ready(fn(*args)))
                    for name, fn in fns.items()}, repeats)
    row = {"graph": graph, "n": n, "seeds": seeds, "levels": len(plan.levels),
           "width": plan.width,
           **{name: {"ms": 1e3 * t[name]["wall_median"],
                     "compile_s": max(first[name] - t[name]["wall_median"], 0.0)}
              for name in fns}}
    row["ratio"] = row["default vmap"]["ms"] / row["seed axis last (gsjax)"]["ms"]
    return row


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[10000])
    ap.add_argument("--graphs", nargs="+", default=["ring", "chain", "tree"])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    rows = []
    print("| graph | n | levels | width | seed axis last ms | default vmap ms | ratio |")
    print("|---|---|---|---|---|---|---|")
    for n in args.n:
        for graph in args.graphs:
            r = bench(n, graph, args.seeds, args.repeats)
            rows.append(r)
            print(f"| {graph} | {n} | {r['levels']} | {r['width']} | "
                  f"{r['seed axis last (gsjax)']['ms']:.1f} | {r['default vmap']['ms']:.1f} | "
                  f"{r['ratio']:.2f}× |", flush=True)
    os.makedirs("benchmarks/results", exist_ok=True)
    with open("benchmarks/results/dp_batching.json", "w") as f:
        json.dump({"machine": machine(), "seeds": args.seeds, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
