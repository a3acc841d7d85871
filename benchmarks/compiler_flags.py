"""XLA CPU compiler options A/B: the same gsjax sweep compiled with and without an option.

    python benchmarks/compiler_flags.py --kind lazy            # section7_2, S = 1024, T = 400
    python benchmarks/compiler_flags.py --kind linucb --repeats 10
    python benchmarks/compiler_flags.py --workload sparse_graph --seeds 256 --horizon 100

Variants: XLA's newer fusion emitters on (its default, off in gsjax), LLVM's expensive passes
off (a shorter compile; 2026-12-05: lazy 1.17x slower, tried and dropped), XLA's backend
optimisation level 1 instead of 2 (a shorter compile; RESULTS.md, 2026-12-05 session 25).

Each variant is ``runner.make_sweep``'s program (as ``benchmarks/run.py``'s ``gsjax`` row)
compiled with gsjax's options (:data:`gsjax.runner.COMPILER_OPTIONS`) with one option changed.
The variants' outputs are checked equal bit for bit, then the calls are alternated repetition
by repetition in this process (A B ..., ... B A), compile apart; the table gives medians and
the ratio to the first variant (gsjax's options as they are).
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
from gsjax.algorithms import AgentSpec, make  # noqa: E402

#: The options compared: name -> the change to gsjax's options.
VARIANTS = {
    "gsjax": {},
    "fusion emitters on (XLA's default)": {"xla_cpu_use_fusion_emitters": True},
    "LLVM's expensive passes off": {"xla_llvm_disable_expensive_passes": True},
    "backend optimisation level 1": {"xla_backend_optimization_level": 1},
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="section7_2", choices=W.BUILDERS)
    ap.add_argument("--kind", default="lazy")
    ap.add_argument("--seeds", type=int, default=1024)
    ap.add_argument("--horizon", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=8)
    args = ap.parse_args(argv)
    w = getattr(W, args.workload)()
    S, T = args.seeds, args.horizon
    keys = runner.seed_keys(jax.random.key(0), jnp.arange(S, dtype=jnp.uint32))
    p, mc = W.params(w), jnp.float32(w["move_cost"])
    algo = make(args.kind, w["structure"], AgentSpec(**w["spec"]))
    fn = runner.make_sweep(algo, w["structure"], T, record_every=T,
                           compact=not algo.always_solves, buffer=max(2, S // 16))
    base = runner.compiler_options()
    comp, compile_s = {}, {}
    for name, change in VARIANTS.items():
        t0 = time.perf_counter()
        comp[name] = fn.lower(keys, w["problem"], p, mc).compile(
            compiler_options={**base, **change})
        compile_s[name] = time.perf_counter() - t0
    outs = {n: jax.tree.leaves(jax.block_until_ready(c(keys, w["problem"], p, mc)))
            for n, c in comp.items()}
    first = next(iter(outs.values()))
    for n, leaves in outs.items():
        if not all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(first, leaves)):
            print(f"{n}: outputs differ from the first variant's")
            return 1
    times = {n: [] for n in comp}
    order = list(comp)
    for r in range(args.repeats):
        for n in (order if r % 2 == 0 else order[::-1]):
            t0 = time.perf_counter()
            jax.block_until_ready(comp[n](keys, w["problem"], p, mc))
            times[n].append(time.perf_counter() - t0)
    ref = statistics.median(times[order[0]])
    print(f"{args.workload} {args.kind}, S = {S}, T = {T}, {args.repeats} repetitions "
          f"alternated, medians; outputs equal bit for bit")
    print("| variant | run s | ns / seed-round | gsjax speed-up over it | compile s |")
    print("|---|---|---|---|---|")
    for n in order:
        m = statistics.median(times[n])
        print(f"| {n} | {m:.4f} | {m / S / T * 1e9:.0f} | {m / ref:.2f}x | {compile_s[n]:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
