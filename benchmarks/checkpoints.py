"""What per-chunk checkpoints cost a ``gsjax run``: compressed against uncompressed ``.npz``.

    python benchmarks/checkpoints.py                      # section7_2, 1024 seeds x 2000 rounds
    python benchmarks/checkpoints.py --seeds 256 --repeats 3

``experiment.run_config`` (what ``gsjax run`` calls: 20 chunks, a checkpoint after each, the
records every 50 rounds) on the built-in ``section7_2`` config, its algorithms ``linucb`` and
``lazy``, alternated in this process between checkpoints written with ``np.savez_compressed``
(gsjax until 2026-12-02) and ``np.savez`` (gsjax now), repetition by repetition (A B B A ...),
figures off, compiled programs from a persistent cache in a temporary folder (so compile is
apart). Prints the medians of each algorithm's ``run_seconds`` (chunks, checkpoints and records
included, compile excluded) and the ratio; the summaries' numbers are checked equal.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from gsjax import checkpoint, experiment, runner  # noqa: E402
from gsjax.config import load_config  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1024)
    ap.add_argument("--horizon", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=4)
    args = ap.parse_args(argv)
    cfg = load_config("section7_2")
    cfg = dataclasses.replace(cfg, seeds=args.seeds, horizon=args.horizon, algorithms=tuple(
        a for a in cfg.algorithms if a.name in ("linucb", "lazy")))
    tmp = Path(tempfile.mkdtemp(prefix="gsjax_ckpt_"))
    runner.use_compilation_cache(tmp / "cache")
    real = checkpoint.write_npz
    variants = {"compressed": lambda p, a, compress=True: real(p, a, compress=True),
                "uncompressed": lambda p, a, compress=False: real(p, a, compress=False)}
    times = {v: {} for v in variants}
    summaries = {}
    order = list(variants)
    for r in range(args.repeats + 1):  # the first round compiles (and fills the cache)
        for v in (order if r % 2 == 0 else order[::-1]):
            checkpoint.write_npz = variants[v]
            try:
                s = experiment.run_config(cfg, tmp / f"{v}{r}", log=lambda *a: None,
                                          figures=False)
            finally:
                checkpoint.write_npz = real
            summaries[v] = {n: a["prediction_regret"] for n, a in s["algorithms"].items()}
            if r:
                for n, a in s["algorithms"].items():
                    times[v].setdefault(n, []).append(a["run_seconds"])
    if summaries["compressed"] != summaries["uncompressed"]:
        print("summaries differ")
        return 1
    print(f"section7_2, {args.seeds} seeds x {args.horizon} rounds, {args.repeats} repetitions "
          "alternated, medians of run_seconds; summaries equal")
    print("| algorithm | compressed s | uncompressed s | speed-up |")
    print("|---|---|---|---|")
    for n in times["compressed"]:
        a, b = (statistics.median(times[v][n]) for v in order)
        print(f"| {n} | {a:.2f} | {b:.2f} | {a / b:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
