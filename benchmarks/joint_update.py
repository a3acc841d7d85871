"""Rank-k update of the joint estimator (Section 5.3): Woodbury vs k Sherman-Morrison steps.

    python benchmarks/joint_update.py              # about two minutes on 2 CPU cores
    python benchmarks/joint_update.py --seeds 256 --rounds 200 --repeats 7

Each row runs ``rounds`` incremental updates (:func:`gsjax.linalg.update_rank_k` with
``do_refresh=False``, so the timed work is the inverse/log-det update and the Gram sums) of ``k``
random rows of dimension ``p`` for ``seeds`` seeds, inside ONE jitted ``vmap``-ed ``lax.scan``.
Compile time is measured apart (first call minus the median); the run time is the median of
``repeats`` calls. The ratio is Sherman-Morrison time / Woodbury time (> 1: Woodbury faster).
Both methods also agree numerically (printed: the largest relative difference of ``V^{-1}``).

Writes ``benchmarks/results/joint_update.json`` and prints a markdown table.
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

from gsjax import linalg

CASES = [(1, 4), (2, 4), (8, 4), (32, 4), (8, 16), (32, 16), (32, 64)]  # (k, p)


def _runner(method: str, k: int, p: int, rounds: int):
    def one_seed(key):
        stats = linalg.init(0.1, p, jnp.float32)

        def body(stats, t):
            xs = jax.random.uniform(jax.random.fold_in(key, t), (k, p), jnp.float32) / jnp.sqrt(p)
            return linalg.update_rank_k(stats, xs, jnp.zeros((k,)), False, method), None

        stats, _ = jax.lax.scan(body, stats, jnp.arange(rounds))
        return stats.inv, stats.logdet

    return jax.jit(jax.vmap(one_seed))


def _time(fn, keys, repeats: int) -> tuple[float, float, object]:
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(keys))
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(keys))
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    return max(first - med, 0.0), med, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "joint_update.json"))
    args = ap.parse_args(argv)
    keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(jax.random.key(0),
                                                           jnp.arange(args.seeds))
    rows = []
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; {args.seeds} seeds x "
          f"{args.rounds} rounds, median of {args.repeats}")
    print("| k | p | Woodbury run (ms) | k x Sherman-Morrison run (ms) | SM / Woodbury | "
          "compile W / SM (s) | max rel. diff of V^-1 |")
    print("|---|---|---|---|---|---|---|")
    for k, p in CASES:
        cw, rw, ow = _time(_runner("woodbury", k, p, args.rounds), keys, args.repeats)
        cs, rs, os_ = _time(_runner("sherman_morrison", k, p, args.rounds), keys, args.repeats)
        diff = float(np.max(np.abs(np.asarray(ow[0]) - np.asarray(os_[0])))
                     / np.max(np.abs(np.asarray(os_[0]))))
        row = dict(k=k, p=p, woodbury_ms=1e3 * rw, sherman_morrison_ms=1e3 * rs,
                   ratio_sm_over_woodbury=rs / rw, compile_woodbury_s=cw,
                   compile_sherman_morrison_s=cs, max_rel_diff_inv=diff)
        rows.append(row)
        print(f"| {k} | {p} | {row['woodbury_ms']:.2f} | {row['sherman_morrison_ms']:.2f} | "
              f"{row['ratio_sm_over_woodbury']:.2f} | {cw:.2f} / {cs:.2f} | {diff:.1e} |")
    meta = dict(jax=jax.__version__, device=jax.devices()[0].device_kind, seeds=args.seeds,
                rounds=args.rounds, repeats=args.repeats, dtype="float32")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
