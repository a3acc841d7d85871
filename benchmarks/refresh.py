"""The ridge refresh for blocks of d >= 3 features: LAPACK's Cholesky against the unrolled one.

    python benchmarks/refresh.py                       # a few minutes on 2 CPU cores
    python benchmarks/refresh.py --blocks 1000000 --dims 3 4 5 --ring 10000 --seeds 100

Part 1: ``gsjax.linalg.refresh`` (``V^{-1}`` and ``log det V`` of ``V = lambda I + S``) over
``--blocks`` Gram matrices of {0, 1} features per ``d`` (``--dims``), one jitted ``vmap`` per
method, float32, with the largest difference between the methods' log dets.

Part 2: rounds of ``lazy`` with reference "own" (every seed re-solves in the first rounds) on a
ring of ``--ring`` nodes (scopes of 3, the DP's level plan, ``configs/dp_ring.toml``'s settings
through :func:`gsjax.paper.dp_scale.family_config`), ``--seeds`` seeds, ``--rounds`` rounds of
:func:`gsjax.runner.advance_compact` (all seeds solved at once), once per method; the totals
are printed for both.

Both parts compile apart (first call) and time the methods alternately in one process
(``benchmarks/timing.py``), medians of ``--repeats``. Run with
``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=`` (see ``benchmarks/dp.py``). Writes
``benchmarks/results/refresh.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import tomllib

import jax
import jax.numpy as jnp
import numpy as np

from gsjax import experiment, linalg, runner
from gsjax.config import parse_config
from gsjax.paper.dp_scale import family_config
from gsjax.problem import seed_axes
from timing import interleave, machine

METHODS = linalg.REFRESH_METHODS


def blocks(n: int, dims, repeats: int) -> list[dict]:
    rows = []
    rng = np.random.default_rng(0)
    for d in dims:
        x = rng.integers(0, 2, size=(n, 20, d)).astype(np.float32)
        gram = jnp.asarray(np.einsum("nti,ntj->nij", x, x))
        lam = jnp.asarray(rng.uniform(0.01, 2.0, n), jnp.float32)
        fns = {m: jax.jit(jax.vmap(lambda s, l, m=m: linalg.refresh(s, l, m))) for m in METHODS}
        out = {m: jax.block_until_ready(f(gram, lam)) for m, f in fns.items()}
        t = interleave({m: (lambda f=f: jax.block_until_ready(f(gram, lam))) for m, f in
                        fns.items()}, repeats)
        rows.append({"d": d, "blocks": n,
                     **{f"{m}_ms": 1e3 * t[m]["wall_median"] for m in METHODS},
                     "speedup": t["cholesky"]["wall_median"] / t["unrolled"]["wall_median"],
                     "max_logdet_diff": float(jnp.max(jnp.abs(out["cholesky"][1]
                                                              - out["unrolled"][1])))})
        print(f"d = {d}: {n} blocks, cholesky {rows[-1]['cholesky_ms']:.1f} ms, unrolled "
              f"{rows[-1]['unrolled_ms']:.1f} ms ({rows[-1]['speedup']:.2f}x), largest log det "
              f"difference {rows[-1]['max_logdet_diff']:.2g}", flush=True)
    return rows


def ring_rounds(n: int, seeds: int, rounds: int, repeats: int) -> dict:
    calls, totals = {}, {}
    for method in METHODS:
        text = family_config("ring", n, seeds=seeds, horizon=rounds, record_every=rounds,
                             algorithms=("lazy_own",), exact_ties=False)
        data = tomllib.loads(text)
        data["agent"]["refresh_method"] = method
        cfg = parse_config(data)
        b = experiment.build(cfg)
        ba = b.algorithms[0]
        pax = seed_axes(b.problem, b.problem_per_seed)
        keys = runner.seed_keys(jax.random.key(cfg.root_seed),
                                jnp.arange(seeds, dtype=jnp.uint32))
        init = jax.jit(jax.vmap(lambda k, p, ba=ba, b=b: runner.init_carry(
            k, ba.algo, b.structure, p, ba.params), in_axes=(0, pax)))
        carry = jax.block_until_ready(init(keys, b.problem))
        step = jax.jit(lambda c, ba=ba, b=b, keys=keys: runner.advance_compact(
            c, 0, keys, ba.algo, b.structure, b.problem, ba.params, ba.move_cost, rounds,
            rounds, buffer=seeds, problem_per_seed=b.problem_per_seed)[0])
        out = jax.block_until_ready(step(carry))
        totals[method] = {"reoptimisations": int(jnp.sum(out.totals.reoptimisations)),
                          "prediction_regret": float(jnp.mean(out.totals.prediction_regret))}
        calls[method] = lambda step=step, carry=carry: jax.block_until_ready(step(carry))
    t = interleave(calls, repeats)
    row = {"ring": n, "seeds": seeds, "rounds": rounds, "totals": totals,
           **{f"{m}_ms_per_round": 1e3 * t[m]["wall_median"] / rounds for m in METHODS},
           "speedup": t["cholesky"]["wall_median"] / t["unrolled"]["wall_median"]}
    print(f"ring of {n}, lazy_own, {seeds} seeds x {rounds} rounds: cholesky "
          f"{row['cholesky_ms_per_round']:.0f} ms a round, unrolled "
          f"{row['unrolled_ms_per_round']:.0f} ms ({row['speedup']:.2f}x); totals {totals}",
          flush=True)
    return row


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=10 ** 6)
    ap.add_argument("--dims", type=int, nargs="+", default=[3, 4, 5])
    ap.add_argument("--ring", type=int, default=10000)
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    result = {"machine": machine(), "blocks": blocks(args.blocks, args.dims, args.repeats),
              "ring": ring_rounds(args.ring, args.seeds, args.rounds, args.repeats)}
    os.makedirs("benchmarks/results", exist_ok=True)
    with open("benchmarks/results/refresh.json", "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
