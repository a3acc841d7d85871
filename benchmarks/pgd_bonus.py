"""PGD on large graphs with the LCB's norm as an ``einsum`` against element-wise sums, A/B.

    python benchmarks/pgd_bonus.py                        # ring, tree, grid at k = 1000
    python benchmarks/pgd_bonus.py --graphs tree --n 10000 --seeds 8

:func:`gsjax.lcb._bonus` (``phi^T V^{-1} phi`` of every criterion) was one ``einsum``; under
``grad`` and ``vmap`` XLA CPU made PGD on scopes of 4 or more ~40x slower than on scopes of 3
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import jax  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.ab_round import _einsum_bonus  # noqa: E402
from dp import _case, pgd_solver  # noqa: E402
from timing import interleave  # noqa: E402
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
        one = pgd_solver(structure, problem, ac)
        fns, outs = {}, {}
        try:
            for name, bonus in (("einsum", _einsum_bonus), ("element-wise", elementwise)):
                lcb._bonus = bonus  # read when the objective is traced, i.e. at lower()
                fns[name] = jax.jit(jax.vmap(one)).lower(*arrays, keys).compile()
                outs[name] = np.asarray(fns[name](*arrays, keys))
        finally:
            lcb._bonus = elementwise
        timed = interleave({name: lambda f=f: jax.block_until_ready(f(*arrays, keys))
                            for name, f in fns.items()}, args.repeats)
        med = {name: 1e3 * statistics.median(t["wall"]) for name, t in timed.items()}
        print(f"| {graph} | {args.n} | {med['einsum']:,.1f} | {med['element-wise']:,.1f} | "
              f"{med['einsum'] / med['element-wise']:.1f}x | "
              f"{bool(np.array_equal(outs['einsum'], outs['element-wise']))} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
