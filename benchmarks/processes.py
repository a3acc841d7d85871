"""One process with a device per core against one pinned process per core (issue 16).

    python benchmarks/processes.py                     # lazy, section7_2, 1024 seeds x 400
    python benchmarks/processes.py --kind linucb --pairs 3 --repeats 9

A: one process with ``C`` host devices (what ``gsjax run`` sets up on CPU,
``gsjax.distributed.use_host_cores``) runs ``runner.sweep`` over all the seeds. B: ``C``
processes at once, each pinned to its own core (``taskset -c i``) with one device, each running
the sweep over its contiguous share of the seeds (as a multi-process run splits them). Each
process compiles once, then times ``--repeats`` sweeps (``run_seconds``, compile apart) and
prints the median; A and B alternate pair by pair (A B, A B, ...). B's time is the slowest of
its processes. The regrets are summed: a seed's numbers do not depend on the split, so A's
total equals B's (checked). Linux only (``taskset``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from devices import child  # the same timed sweep, in this folder


def _start(cmd: list[str], core: int | None = None) -> subprocess.Popen:
    pin = [] if core is None else ["taskset", "-c", str(core)]
    return subprocess.Popen(pin + [sys.executable, __file__, "--child", *map(str, cmd)],
                            stdout=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"a child failed ({proc.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", default="lazy")
    ap.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--seeds", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, devices, start, seeds, rounds, repeats = args.child
        print(json.dumps(child(kind, int(seeds), int(rounds), int(repeats), start=int(start),
                               devices=int(devices))))
        return
    cores, seeds = args.cores, args.seeds
    if seeds % cores:
        raise SystemExit(f"--seeds {seeds} is not a multiple of --cores {cores}")
    share = seeds // cores
    a_times, b_times = [], []
    for _ in range(args.pairs):
        a = _result(_start([args.kind, cores, 0, seeds, args.rounds, args.repeats]))
        procs = [_start([args.kind, 1, i * share, share, args.rounds, args.repeats], core=i)
                 for i in range(cores)]
        b = [_result(p) for p in procs]
        total = sum(x["regret_sum"] for x in b)
        if abs(total - a["regret_sum"]) > 1e-6 * abs(a["regret_sum"]):
            raise SystemExit(f"regret differs: one process {a['regret_sum']}, pinned {total}")
        a_times.append(a["run_s"])
        b_times.append(max(x["run_s"] for x in b))
        print(f"one process, {cores} devices: {a['run_s']:.4f} s; {cores} pinned processes: "
              f"{b_times[-1]:.4f} s", flush=True)
    a, b = statistics.median(a_times), statistics.median(b_times)
    print(f"{args.kind}, S = {seeds}, T = {args.rounds}, {cores} cores, medians of {args.pairs} "
          f"pairs: one process {a:.4f} s, pinned processes {b:.4f} s: {a / b:.2f}x")


if __name__ == "__main__":
    main()
