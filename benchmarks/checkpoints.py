"""What per-chunk checkpoints cost a ``gsjax run``: one file rewritten whole against parts.

    python benchmarks/checkpoints.py                      # section7_2, 1024 seeds x 2000 rounds
    python benchmarks/checkpoints.py --seeds 256 --repeats 3

``experiment.run_config`` (what ``gsjax run`` calls: 20 chunks, a checkpoint after each, the
records every 50 rounds) on the built-in ``section7_2`` config (its four algorithms), alternated
in this process, repetition by repetition (A B B A ...), between two checkpoint layouts:

* ``one file``: gsjax until 2026-12-03: ``checkpoint.npz`` holding the carry, the records so far
  and every finished run's result, rewritten whole after every chunk (it grows with the run);
* ``parts``: gsjax now (:mod:`gsjax.checkpoint`): each chunk's records and each finished run's
  result written once as a part, then a ``checkpoint.npz`` of the carry that names them.

Figures off, compiled programs from a persistent cache in a temporary folder (compile apart).
Prints the medians of each algorithm's ``run_seconds`` (chunks, checkpoints and records
included, compile excluded: the writes run on a background thread while the next chunk
computes, so they cost the run only what they take from its cores and its disk) and of the
seconds spent writing checkpoint files over the whole run (the writer thread's wall time) and
the megabytes written; the summaries' numbers are checked equal.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from gsjax import checkpoint, experiment, runner  # noqa: E402
from gsjax.config import load_config  # noqa: E402
from gsjax.results import flatten  # noqa: E402


def one_file(self, folder, config_hash, seed_start, completed, current, carry_leaves,
             rounds_done, records, processes=1):
    """The layout before the parts (a stand-in for :meth:`checkpoint.Parts.save`): everything
    in ``checkpoint.npz``, rewritten after every chunk. ``self.records`` keeps the current run's
    chunks in memory."""
    if current != self.current:
        self.current, self.records = current, []
    self.records.append(records)
    arrays = {f"current/carry/{i:05d}": np.asarray(x) for i, x in enumerate(carry_leaves)}
    joined = [None if v[0] is None else np.concatenate(v, axis=1) for v in zip(*self.records)]
    arrays.update(flatten("current/records", type(records)(*joined)))
    for name, res in completed.items():
        for f in res._fields:
            if f not in checkpoint.TIMINGS:
                arrays.update(flatten(f"completed/{name}/{f}", getattr(res, f)))
    arrays["meta"] = np.asarray(json.dumps({"config_hash": config_hash}))
    return checkpoint.write_npz(Path(folder) / checkpoint.FILENAME, arrays, compress=False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1024)
    ap.add_argument("--horizon", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=4)
    args = ap.parse_args(argv)
    cfg = dataclasses.replace(load_config("section7_2"), seeds=args.seeds, horizon=args.horizon)
    tmp = Path(tempfile.mkdtemp(prefix="gsjax_ckpt_"))
    runner.use_compilation_cache(tmp / "cache")
    real_save, real_write = checkpoint.Parts.save, checkpoint.write_npz
    written = {"s": 0.0, "bytes": 0}

    def timed_write(path, arrays, compress=True):
        t = time.perf_counter()
        out = real_write(path, arrays, compress=compress)
        written["s"] += time.perf_counter() - t
        written["bytes"] += Path(path).stat().st_size
        return out

    variants = {"one file": one_file, "parts": real_save}
    times = {v: {} for v in variants}
    writes = {v: ([], []) for v in variants}
    summaries = {}
    order = list(variants)
    for r in range(args.repeats + 1):  # the first round compiles (and fills the cache)
        for v in (order if r % 2 == 0 else order[::-1]):
            checkpoint.Parts.save, checkpoint.write_npz = variants[v], timed_write
            written.update(s=0.0, bytes=0)
            try:
                s = experiment.run_config(cfg, tmp / f"{v}{r}".replace(" ", "_"),
                                          log=lambda *a: None, figures=False)
            finally:
                checkpoint.Parts.save, checkpoint.write_npz = real_save, real_write
            summaries[v] = {n: a["prediction_regret"] for n, a in s["algorithms"].items()}
            if r:
                for n, a in s["algorithms"].items():
                    times[v].setdefault(n, []).append(a["run_seconds"])
                writes[v][0].append(written["s"])
                writes[v][1].append(written["bytes"] / 1e6)
    if summaries["one file"] != summaries["parts"]:
        print("summaries differ")
        return 1
    print(f"section7_2, {args.seeds} seeds x {args.horizon} rounds, {args.repeats} repetitions "
          "alternated, medians; summaries equal")
    print("| algorithm | one file: run s | parts: run s | ratio |")
    print("|---|---|---|---|")
    for n in times["parts"]:
        a, b = (statistics.median(times[v][n]) for v in order)
        print(f"| {n} | {a:.2f} | {b:.2f} | {a / b:.2f}x |")
    (wa, ma), (wb, mb) = ([statistics.median(x) for x in writes[v]] for v in order)
    print(f"| checkpoint writes, whole run | {wa:.2f} s, {ma:.0f} MB | {wb:.2f} s, {mb:.0f} MB "
          f"| {wa / wb:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
