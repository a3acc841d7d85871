"""The compacted sweep's solver buffer (``gsjax run --buffer``) where most seeds re-optimise.

    python benchmarks/buffer.py                        # ring of 10^3, lazy_own, 100 x 100
    python benchmarks/buffer.py --k 100 --algorithm async_lazy --buffers 6 25 100
    python benchmarks/buffer.py --resume RUN_FOLDER --horizon 20 --buffers 2 4 25

``runner.sweep`` of one entry of the Section 5.1 DP config (``gsjax.paper.dp_scale``'s
``family_config``: a ring of ``k`` nodes, exact DP solver) over ``--seeds`` seeds and
``--horizon`` rounds, once per buffer size, the sizes alternated repetition by repetition in
one process (``benchmarks/timing.py``). Prints the median ``run_seconds`` (compile apart) of
each, the re-optimisations per seed and whether the totals are equal (they must be: the buffer
changes how many seeds are solved at once, not what is computed).

``--resume RUN_FOLDER``: the same for ``--horizon`` rounds of the run that folder's checkpoint
holds (its config, seeds and algorithm), from its round: how a buffer does where the run
is, not only in the first rounds, when every seed re-optimises (``--fresh``: from round 0).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from timing import interleave, machine  # noqa: E402

from gsjax import checkpoint, experiment, runner  # noqa: E402
from gsjax.config import parse_config  # noqa: E402
from gsjax.paper import dp_scale  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--horizon", type=int, default=100)
    ap.add_argument("--algorithm", default="lazy_own", choices=dp_scale.LAZY)
    ap.add_argument("--buffers", type=int, nargs="+", default=[6, 100],
                    help="6: the default for 100 seeds (a 16th)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--resume", type=Path, metavar="RUN_FOLDER")
    ap.add_argument("--fresh", action="store_true", help="with --resume: from round 0")
    args = ap.parse_args(argv)
    if args.resume is not None:
        return resume(args)
    cfg = parse_config(tomllib.loads(dp_scale.family_config(
        "ring", args.k, seeds=args.seeds, horizon=args.horizon, record_every=args.horizon,
        algorithms=(args.algorithm,))))
    built = experiment.build(cfg)
    ba = built.algorithms[0]
    root, ids = jax.random.key(cfg.root_seed), np.arange(args.seeds)

    def call(b):
        return lambda: runner.sweep(root, ids, ba.algo, built.structure, built.problem,
                                    ba.params, ba.move_cost, cfg.horizon, cfg.record_every,
                                    built.problem_per_seed, buffer=b)

    start = machine()
    out = interleave({b: call(b) for b in args.buffers}, args.repeats, warmup=0)
    first = out[args.buffers[0]]["results"][0].totals
    print(f"ring of {args.k}, {args.algorithm}, {args.seeds} seeds x {args.horizon} rounds, "
          f"{args.repeats} repetitions alternated; load {start['loadavg']} -> "
          f"{machine()['loadavg']}, {start['time']}")
    print("| buffer | run s (median) | re-optimisations / seed | totals equal |")
    print("|---|---|---|---|")
    for b in args.buffers:
        res = out[b]["results"]
        same = all(np.array_equal(x, y) for x, y in zip(first, res[0].totals))
        print(f"| {b} | {statistics.median(r.run_seconds for r in res):.2f} | "
              f"{float(np.mean(res[0].totals.reoptimisations)):.1f} | {same} |")
    return 0


def resume(args) -> int:
    """``--resume``: chunks of ``--horizon`` rounds from the checkpoint's carry, per buffer."""
    folder = args.resume
    cfg = parse_config(json.loads((folder / "config.json").read_text()))
    ck = checkpoint.load(folder)
    if ck is None:
        raise SystemExit(f"{folder}: no checkpoint.npz")
    start, done = ck["seed_start"], 0 if args.fresh else ck["rounds_done"]
    built = experiment.build(cfg, start)
    ba = next(b for b in built.algorithms if b.name == ck["current"])
    batch = runner.seed_batch(jax.random.key(cfg.root_seed), np.arange(start, start + cfg.seeds),
                              built.problem, built.problem_per_seed, shard=False)
    move_cost = jnp.asarray(ba.move_cost, built.dtype)
    chunk_args = (batch.keys, batch.problem, ba.params, move_cost)
    calls = {}
    for b in args.buffers:
        init_fn, chunk_fn = runner.make_chunked(ba.algo, built.structure, args.horizon,
                                                args.horizon, built.problem_per_seed,
                                                compact=True, buffer=b)
        if args.fresh:
            carry = init_fn(batch.keys, batch.problem, ba.params)
        else:
            shapes = jax.eval_shape(init_fn, batch.keys, batch.problem, ba.params)
            carry = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shapes),
                                                 [jnp.asarray(x) for x in ck["carry_leaves"]])
        compiled = chunk_fn.lower(carry, jnp.int32(done), *chunk_args).compile()
        calls[b] = (lambda c=compiled, carry=carry:
                    jax.block_until_ready(c(carry, jnp.int32(done), *chunk_args)))
    start_m = machine()
    out = interleave(calls, args.repeats, warmup=0)
    print(f"{folder.name} ({ck['current']}, {cfg.seeds} seeds), rounds {done + 1}-"
          f"{done + args.horizon}, {args.repeats} repetitions alternated; load "
          f"{start_m['loadavg']} -> {machine()['loadavg']}, {start_m['time']}")
    print("| buffer | run s (median) | ms a round | outputs equal |")
    print("|---|---|---|---|")
    first = jax.tree_util.tree_leaves(out[args.buffers[0]]["results"][0])
    for b in args.buffers:
        w = out[b]["wall_median"]
        same = all(np.array_equal(x, y) for x, y in
                   zip(first, jax.tree_util.tree_leaves(out[b]["results"][0])))
        print(f"| {b} | {w:.2f} | {w / args.horizon * 1e3:.0f} | {same} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
