"""Ridge statistics with and without a carried ``V^{-1}``: the same gsjax sweep, A/B.

    python benchmarks/carry_inverse.py --kind lazy          # section7_2, S = 1024, T = 400
    python benchmarks/carry_inverse.py --kind linucb --repeats 9

Since 2026-12-02 the node kinds' ridge statistics refreshed every round (``refresh_every = 1``,
the default) keep no ``V^{-1}`` in the round-to-round state: :func:`gsjax.linalg.inverse`
recomputes it from the Gram sums where the solver reads it (the seeds that re-minimise).
Variant A rebuilds the old program (the inverse carried, refreshed every round) by patching
:func:`gsjax.algorithms.kernel.ridge_init`; B is gsjax's. Outputs are checked equal bit for
bit, then the calls are alternated repetition by repetition in this process (A B B A ...),
compile apart; medians of wall and process CPU time.
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

jax.config.update("jax_enable_x64", False)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import workloads as W  # noqa: E402
from gsjax import runner  # noqa: E402
from gsjax.algorithms import AgentSpec, kernel, make  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", default="lazy")
    ap.add_argument("--seeds", type=int, default=1024)
    ap.add_argument("--horizon", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args(argv)
    w = W.section7_2()
    S, T = args.seeds, args.horizon
    keys = runner.seed_keys(jax.random.key(0), jnp.arange(S, dtype=jnp.uint32))
    p, mc = W.params(w), jnp.float32(w["move_cost"])
    real = kernel.ridge_init

    def build(carried: bool):
        if carried:
            kernel.ridge_init = lambda params, problem, d, carry_inverse=True: real(
                params, problem, d, True)
        try:
            algo = make(args.kind, w["structure"], AgentSpec(**w["spec"]))
            fn = runner.make_sweep(algo, w["structure"], T, record_every=T,
                                   compact=not algo.always_solves, buffer=max(2, S // 16))
            return fn.lower(keys, w["problem"], p, mc).compile(runner.compiler_options())
        finally:
            kernel.ridge_init = real

    comp = {"inverse carried (before)": build(True), "not carried (gsjax)": build(False)}
    outs = [jax.tree.leaves(jax.block_until_ready(c(keys, w["problem"], p, mc)))
            for c in comp.values()]
    if not all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(*outs)):
        print("outputs differ")
        return 1
    wall = {n: [] for n in comp}
    cpu = {n: [] for n in comp}
    order = list(comp)
    for r in range(args.repeats):
        for n in (order if r % 2 == 0 else order[::-1]):
            t0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(comp[n](keys, w["problem"], p, mc))
            wall[n].append(time.perf_counter() - t0)
            cpu[n].append(time.process_time() - c0)
    a, b = order
    med = statistics.median
    print(f"section7_2 {args.kind}, S = {S}, T = {T}, {args.repeats} repetitions alternated, "
          "medians; outputs equal bit for bit")
    print("| variant | wall s | CPU s |")
    print("|---|---|---|")
    for n in order:
        print(f"| {n} | {med(wall[n]):.4f} | {med(cpu[n]):.4f} |")
    print(f"speed-up: {med(wall[a]) / med(wall[b]):.2f}x wall, "
          f"{med(cpu[a]) / med(cpu[b]):.2f}x CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
