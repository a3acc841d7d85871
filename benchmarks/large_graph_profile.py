"""Where a round of a large-graph DP run goes (issue 17): a profile of the compacted runner.

    python benchmarks/large_graph_profile.py CONFIG [--seeds 100] [--rounds 10] [--skip 10]
        [--algorithms lazy async_lazy] [--top 25] [--no-trace] [--buffer B]

For each algorithm of ``CONFIG`` (e.g. a ring written by ``benchmarks/dp.py --config ring K``
with ``dp_exact_ties = false``): the chunk of :func:`gsjax.runner.make_chunked` (compacted,
the buffer of :func:`gsjax.runner.sweep`) is compiled for ``--rounds`` rounds; ``--skip``
rounds run first (the trigger rate of round 1 is not that of later rounds), then one chunk is
timed and one traced with ``jax.profiler``. The trace's XLA:CPU events are reduced to their
own time (a while or call without its body's events) and summed by HLO instruction, and each
instruction is put in a part of the round by its call chain (the compiled module's stack
frames): the DP (gsjax/dp.py), V^-1 and theta_hat of the seeds that solve (linalg, the
kernel's objective), the runner's compaction, the statistics and trigger of ``prepare``, noise
/ observe / act, bookkeeping. Prints microseconds per round per part, the DP by source line,
the top instructions, and the seeds solved per round. The traced run is slower than the
timed one (the profiler's cost); at n = 10^4 trace 16 seeds, not 100 (the trace's memory).
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from gsjax import runner
from gsjax.config import load_config
from gsjax.experiment import build

PARTS = (  # (part, regex on the instruction's call chain, innermost first), first match wins
    ("solve: DP (dp.py)", r"dp\.py.*_solve_compacted"),
    ("solve: V^-1, theta_hat (linalg, kernel)", r"(linalg\.py|objective).*_solve_compacted"),
    ("solve: compaction (runner)", r"_solve_compacted"),
    ("prepare: statistics (linalg)", r"(linalg\.py|observe).*prepare"),
    ("prepare: trigger/schedule", r"prepare"),
    ("noise/observe/act", r"philox\.py|problem\.py|round_draws|act"),
    ("bookkeeping (totals, records)", r"_accumulate|_record"),
    ("round loop", r"runner\.py"),
)


def _sections(text: str, name: str) -> list[str]:
    part = text.split("\n" + name + "\n")
    return part[1].split("\n\n")[0].splitlines() if len(part) > 1 else []


def _metadata(hlo_text: str) -> dict:
    """HLO instruction name -> its call chain, 'file:function:line' innermost first, from the
    compiled module's stack frames (parent_frame_id is 1-based, 0: none)."""
    files = {int(a): b.strip('"').split("/")[-1] for a, b in
             (ln.split(None, 1) for ln in _sections(hlo_text, "FileNames") if ln.strip())}
    funcs = {int(a): b.strip('"') for a, b in
             (ln.split(None, 1) for ln in _sections(hlo_text, "FunctionNames") if ln.strip())}
    locs, frames = {}, {}
    for ln in _sections(hlo_text, "FileLocations"):
        m = re.match(r"(\d+) \{file_name_id=(\d+) function_name_id=(\d+) line=(\d+)", ln)
        if m:
            locs[int(m[1])] = f"{files[int(m[2])]}:{funcs[int(m[3])]}:{m[4]}"
    for ln in _sections(hlo_text, "StackFrames"):
        m = re.match(r"(\d+) \{file_location_id=(\d+) parent_frame_id=(\d+)", ln)
        if m:
            frames[int(m[1])] = (int(m[2]), int(m[3]) - 1)

    def chain(f):
        out, seen = [], set()
        while f in frames and f not in seen:
            seen.add(f)
            loc, f = frames[f]
            out.append(locs.get(loc, "?"))
        return [c for c in out if "large_graph_profile" not in c]

    out = {}
    for line in hlo_text.splitlines():
        m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = ", line)
        if not m:
            continue
        frame = re.search(r"stack_frame_id=(\d+)", line)
        out[m.group(1)] = " < ".join(chain(int(frame.group(1)))) if frame else ""
    return out


def _part(where: str) -> str:
    if not where:
        return "unattributed (copies, loops)"
    for name, pat in PARTS:
        if re.search(pat, where):
            return name
    return "other"


def _trace_events(fn, *args):
    """(name, duration_ns) of the XLA:CPU events of one call of ``fn``."""
    d = tempfile.mkdtemp(prefix="gsjax_prof_")
    with jax.profiler.trace(d):
        jax.block_until_ready(fn(*args))
    path = glob.glob(os.path.join(d, "**", "*.xplane.pb"), recursive=True)[0]
    data = jax.profiler.ProfileData.from_file(path)
    events = []
    for plane in data.planes:
        for line in plane.lines:
            evs = sorted(((ev.start_ns, ev.end_ns, ev.name) for ev in line.events),
                         key=lambda e: (e[0], -e[1]))
            stack = []  # open events on this thread: [end, name, self_ns]
            for start, end, name in evs:
                while stack and stack[-1][0] <= start:
                    events.append(tuple(stack.pop()[1:]))
                if stack:
                    stack[-1][2] -= end - start  # a nested event: not its parent's own time
                stack.append([end, name, end - start])
            events.extend(tuple(e[1:]) for e in stack)
    return events


def _rss() -> str:
    with open("/proc/self/status") as f:
        rss = next(ln.split()[1] for ln in f if ln.startswith("VmRSS"))
    return f"{int(rss) / 2**20:.1f} GiB"


def _say(*a):
    print(*a, file=sys.stderr, flush=True)


def profile(cfg, name: str, seeds: int, rounds: int, skip: int, top: int, trace: bool = True,
            buffer: int | None = None):
    t = time.perf_counter()
    built = build(cfg)
    _say(f"built {time.perf_counter() - t:.1f}s, rss {_rss()}")
    ba = next(b for b in built.algorithms if b.name == name)
    root = jax.random.key(cfg.root_seed)
    batch = runner.seed_batch(root, np.arange(seeds), built.problem, built.problem_per_seed)
    buffer = max(2, seeds // 16) if buffer is None else buffer
    init_fn, chunk_fn = runner.make_chunked(ba.algo, built.structure, rounds, rounds,
                                            built.problem_per_seed, True, buffer)
    move = jnp.asarray(ba.move_cost, built.dtype)
    keys, prob = batch.keys, batch.problem
    t0 = time.perf_counter()
    carry = jax.block_until_ready(init_fn(keys, prob, ba.params))
    t1 = time.perf_counter()
    _say(f"init {t1 - t0:.1f}s, rss {_rss()}")
    compiled = chunk_fn.lower(carry, jnp.int32(0), keys, prob, ba.params, move).compile(
        runner.compiler_options())
    t2 = time.perf_counter()
    _say(f"chunk compiled {t2 - t1:.1f}s, rss {_rss()}")
    done = 0
    while done < skip:
        carry, _ = compiled(carry, jnp.int32(done), keys, prob, ba.params, move)
        done += rounds
    jax.block_until_ready(carry)
    re0 = np.asarray(carry.totals.reoptimisations).sum()
    t3 = time.perf_counter()
    carry, _ = jax.block_until_ready(compiled(carry, jnp.int32(done), keys, prob, ba.params,
                                              move))
    t4 = time.perf_counter()
    _say(f"chunk timed {t4 - t3:.1f}s, rss {_rss()}")
    done += rounds
    re1 = np.asarray(carry.totals.reoptimisations).sum()
    if not trace:
        print(f"== {name}: n = {built.structure.num_coords}, seeds {seeds}: compile chunk "
              f"{t2 - t1:.1f}s, {1e6 * (t4 - t3) / rounds:,.0f} us/round, seeds solved per "
              f"round {(re1 - re0) / rounds:.1f}")
        return {"us_per_round": 1e6 * (t4 - t3) / rounds, "compile_s": t2 - t1}
    events = _trace_events(compiled, carry, jnp.int32(done), keys, prob, ba.params, move)
    meta = _metadata(compiled.as_text())
    by_instr = collections.Counter()
    count = collections.Counter()
    for ev, ns in events:
        if ev in meta:
            by_instr[ev] += ns
            count[ev] += 1
    parts = collections.Counter()
    for ev, ns in by_instr.items():
        parts[_part(meta[ev])] += ns
    total_ns = sum(parts.values())
    print(f"\n== {name}: n = {built.structure.num_coords}, seeds {seeds}, buffer {buffer}, "
          f"timed rounds {done - rounds + 1}..{done}, traced {done + 1}..{done + rounds}")
    print(f"init+compile-init {t1 - t0:.1f}s, compile chunk {t2 - t1:.1f}s, "
          f"timed chunk {1e6 * (t4 - t3) / rounds:,.0f} us/round, "
          f"seeds solved per round {(re1 - re0) / rounds:.1f} (timed chunk)")
    print(f"traced: {total_ns / 1e3 / rounds:,.0f} us/round, the own time of the HLO-named events"
          " on all threads (a while or call without its body's events)")
    for part, ns in parts.most_common():
        print(f"  {part:18s} {ns / 1e3 / rounds:12,.0f} us/round")
    lines = collections.Counter()
    for ev, ns in by_instr.items():
        m = re.match(r"(dp\.py:[\w.<>]+:\d+)", meta[ev])
        if m:
            lines[m.group(1)] += ns
    print("DP by innermost dp.py line (us/round):")
    for where, ns in lines.most_common(12):
        print(f"  {ns / 1e3 / rounds:10,.0f}  {where}")
    print("top instructions (us/round, calls/round, source):")
    for ev, ns in by_instr.most_common(top):
        print(f"  {ns / 1e3 / rounds:10,.0f} {count[ev] / rounds:8.1f}  {ev:28s} "
              f"{meta[ev][:150]}")
    return {"us_per_round": 1e6 * (t4 - t3) / rounds, "compile_s": t2 - t1}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--skip", type=int, default=10)
    ap.add_argument("--algorithms", nargs="+", default=None)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--no-trace", action="store_true", help="time the chunk only")
    ap.add_argument("--buffer", type=int, help="the solver buffer (default: a 16th of the seeds, "
                    "as gsjax.runner.sweep; dp_scale uses all the seeds from k = 10^3 on)")
    args = ap.parse_args(argv)
    cfg = load_config(args.config, [f"seeds={args.seeds}"])
    names = args.algorithms or [a.name for a in cfg.algorithms]
    for name in names:
        profile(cfg, name, args.seeds, args.rounds, args.skip, args.top, not args.no_trace,
                args.buffer)


if __name__ == "__main__":
    sys.exit(main())
