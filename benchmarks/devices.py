"""A sweep on one device against the same sweep on several host devices (issue 16).

    python benchmarks/devices.py                       # lazy and linucb, 1 vs 2 devices
    python benchmarks/devices.py --algorithms lazy --devices 1 2 --pairs 3

The host platform's device count is fixed when JAX starts, so each measurement is its own
process: for every pair, one process per device count, in alternating order (A B, B A, ...).
Each process runs ``runner.sweep`` on ``benchmarks/workloads.py``'s section7_2 workload
(1024 seeds x 400 rounds by default) once to compile, then ``--repeats`` times, and prints the
median ``run_seconds`` (compile apart) and the mean regret (the same on every device count:
keys and per-seed arithmetic do not depend on the split). Prints a markdown table of medians
over the pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(kind: str, seeds: int, rounds: int, repeats: int, start: int = 0,
          devices: int | None = None, record_every: int | None = None, tree=ROOT) -> dict:
    """Time ``runner.sweep`` over the seeds ``start .. start + seeds - 1`` in this process
    (``devices``: set JAX's CPU device count first; else the XLA flags decide; a record every
    ``record_every`` rounds, default one at the end): compile once, then the median of
    ``repeats`` runs. ``tree``: the gsjax source folder imported (this checkout by default).
    Also used by ``benchmarks/processes.py`` and ``benchmarks/ab_trees.py``."""
    sys.path[:0] = [str(tree), str(ROOT / "benchmarks")]
    import jax

    if devices is not None:
        jax.config.update("jax_num_cpu_devices", devices)
    import numpy as np
    import workloads as W

    from gsjax import runner
    from gsjax.algorithms import AgentSpec, make

    w = W.section7_2()
    algo = make(kind, w["structure"], AgentSpec(**w["spec"]))

    def once():
        return runner.sweep(jax.random.key(0), np.arange(start, start + seeds), algo,
                            w["structure"], w["problem"], W.params(w), w["move_cost"], rounds,
                            record_every=record_every or rounds)

    r = once()
    times = []
    for _ in range(repeats):
        r = once()
        times.append(r.run_seconds)
    regret = np.asarray(r.totals.prediction_regret, np.float64)
    return {"devices": jax.device_count(), "run_s": statistics.median(times),
            "compile_s": r.compile_seconds, "regret": float(np.mean(regret)),
            "regret_sum": float(np.sum(regret)),
            "records_sum": float(np.sum(np.asarray(r.records.cum_regret, np.float64)))}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algorithms", nargs="+", default=["lazy", "linucb"])
    ap.add_argument("--devices", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--seeds", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--child", nargs=4, metavar=("KIND", "S", "T", "R"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, s, t, r = args.child
        print(json.dumps(child(kind, int(s), int(t), int(r))))
        return
    print(f"section7_2, {args.seeds} seeds x {args.rounds} rounds, medians of {args.repeats} "
          f"per process, {args.pairs} alternations, load average {os.getloadavg()}")
    print("| algorithm | devices | seed-rounds/s (median over processes) | each process | "
          "regret |")
    print("|---|---|---|---|---|")
    for kind in args.algorithms:
        rates = {d: [] for d in args.devices}
        regret = {}
        for p in range(args.pairs):
            for d in (args.devices if p % 2 == 0 else args.devices[::-1]):
                flags = os.environ.get("XLA_FLAGS", "")
                env = dict(os.environ, XLA_FLAGS=f"{flags} "
                           f"--xla_force_host_platform_device_count={d}", GSJAX_CACHE_DIR="off")
                out = subprocess.run([sys.executable, __file__, "--child", kind, str(args.seeds),
                                      str(args.rounds), str(args.repeats)], env=env, check=True,
                                     capture_output=True, text=True).stdout
                res = json.loads(out.strip().splitlines()[-1])
                rates[d].append(args.seeds * args.rounds / res["run_s"])
                regret[d] = res["regret"]
        for d in args.devices:
            each = ", ".join(f"{x / 1e6:.2f} M" for x in rates[d])
            print(f"| {kind} | {d} | {statistics.median(rates[d]):,.0f} | {each} | "
                  f"{regret[d]:.6f} |")


if __name__ == "__main__":
    main()
