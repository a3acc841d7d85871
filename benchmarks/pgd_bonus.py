"""PGD on large graphs with the LCB's norm as an ``einsum`` against element-wise sums, A/B.

    python benchmarks/pgd_bonus.py                        # ring, tree, grid at k = 1000
    python benchmarks/pgd_bonus.py --graphs tree --n 10000 --seeds 8

:func:`gsjax.lcb._bonus` (``phi^T V^{-1} phi`` of every criterion) was one ``einsum``; under
``grad`` and ``vmap`` XLA CPU made PGD on scopes of 4 or more 30x slower than on scopes of 3
(``benchmarks/RESULTS.md``, "DP against PGD"). It is now two element-wise products and sums in
the order of the dot (bit-identical answers). Each contender minimises ``--seeds`` random
objectives (``benchmarks/dp.py``'s ``_case``) with the PGD settings of
``configs/large_graphs.toml`` in one jitted ``vmap``; compiled apart, alternated repetition by
repetition in one process, medians; the answers are checked identical.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.ab_round import _einsum_bonus  # noqa: E402
from dp import _case  # noqa: E402
from gsjax import lcb  # noqa: E402
from gsjax.config import find_config, load_config  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", nargs="+", default=["ring", "tree", "grid"])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    ac = load_config(find_config("large_graphs")).agent
    elementwise = lcb._bonus
    print("| graph | n | einsum ms | element-wise ms | ratio | identical |\n|---|---|---|---|---|---|")
    for graph in args.graphs:
        _, structure, problem, arrays = _case(args.n, args.seeds, graph=graph)
        keys = jax.random.split(jax.random.key(1), args.seeds)

        def one(theta, inv, beta, s0, key):
            objective = lcb.node_objective(structure, problem, theta, inv, beta)
            return lcb.minimise_objective_pgd(
                key, objective.value, s0, jnp.ones(s0.shape, bool), num_steps=ac.pgd_steps,
                num_starts=ac.pgd_starts, learning_rate=ac.pgd_lr, optimizer=ac.pgd_optimizer,
                include_current=ac.pgd_include_current)[0]

        fns, outs = {}, {}
        try:
            for name, bonus in (("einsum", _einsum_bonus), ("element-wise", elementwise)):
                lcb._bonus = bonus  # read when the objective is traced, i.e. at lower()
                fns[name] = jax.jit(jax.vmap(one)).lower(*arrays, keys).compile()
                outs[name] = np.asarray(fns[name](*arrays, keys))
        finally:
            lcb._bonus = elementwise
        times = {name: [] for name in fns}
        for r in range(args.repeats):
            for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
                t0 = time.perf_counter()
                jax.block_until_ready(fns[name](*arrays, keys))
                times[name].append(time.perf_counter() - t0)
        med = {name: 1e3 * statistics.median(t) for name, t in times.items()}
        print(f"| {graph} | {args.n} | {med['einsum']:,.1f} | {med['element-wise']:,.1f} | "
              f"{med['einsum'] / med['element-wise']:.1f}x | "
              f"{bool(np.array_equal(outs['einsum'], outs['element-wise']))} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
