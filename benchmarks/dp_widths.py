"""The DP's whole-scan solve against the number of seeds solved at once (the solver buffer).

    python benchmarks/dp_widths.py --n 10000 --widths 4 8 16 25 --repeats 7

Every coordinate free (a global lazy re-solve), the 4 x n/4 grid's sequential plan without
exact ties (what ``gsjax.paper.dp_scale`` runs at k = 10^4), ``benchmarks/dp.py``'s random
objectives; one jitted ``vmap`` of :func:`gsjax.dp.minimise` per width, compiled apart, the
widths alternated repetition by repetition in one process (``benchmarks/timing.py``),
medians. Prints ms a solve and ms a seed: how many seeds a pass should hold when most seeds
re-optimise (``gsjax.paper.dp_scale._buffer``). Run with
``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=`` (see ``benchmarks/dp.py``).
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp

from dp import _case
from gsjax import dp, lcb
from timing import interleave


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--widths", type=int, nargs="+", default=[4, 8, 16, 25])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    calls = {}
    for b in args.widths:
        scopes, structure, problem, (theta, inv, beta, s0) = _case(args.n, b, graph="grid")
        plan = dp.make_plan(scopes, exact_ties=False)

        def one(th, iv, bt, s, fr, plan=plan, structure=structure, problem=problem):
            objective = lcb.node_objective(structure, problem, th, iv, bt)
            return dp.minimise(plan, objective, s, fr)[0]

        fn, inputs = jax.jit(jax.vmap(one)), (theta, inv, beta, s0, jnp.ones(s0.shape, bool))
        jax.block_until_ready(fn(*inputs))  # compiled apart
        calls[b] = lambda fn=fn, inputs=inputs: jax.block_until_ready(fn(*inputs))
    t = interleave(calls, args.repeats)
    print("| seeds at once | ms a solve | ms a seed |\n|---|---|---|")
    for b in args.widths:
        ms = 1e3 * t[b]["wall_median"]
        print(f"| {b} | {ms:.1f} | {ms / b:.1f} |")


if __name__ == "__main__":
    main()
