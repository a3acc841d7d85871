"""Kernels per round of gsjax's compiled sweep, counted from the optimised HLO.

    python benchmarks/kernels.py                       # section7_2, S = 1024, lazy linucb async
    python benchmarks/kernels.py --seeds 1024 --algorithms lazy

The number that matters is the one a run executes (``executed``): a ``jax.profiler`` trace of
one call, its kernel events counted per round. The static count below is that of the worst
round (every loop at its static trip count, the compacted solver's at one trip).

On CPU (and GPU) each top-level instruction of a computation the runtime executes is one kernel
launch (a thunk): a fusion, a copy, a custom call, a sort, a dynamic-update-slice... --
everything but ``parameter``, ``constant``, ``tuple``, ``get-tuple-element`` and ``bitcast``.
The round is the body (plus condition) of the ``while`` loop whose known trip count is the
horizon (the sweep's ``lax.scan`` over rounds). A nested ``while`` counts its trip count times
its body and condition (a rolled threefry hash is such a loop); a ``conditional`` counts its
most expensive branch, plus one for the branch choice; a ``call`` counts its callee.

The sweep is ``runner.make_sweep`` as ``runner.sweep`` configures it (compacted solver for lazy
algorithms, buffer ``max(2, S // 16)``, totals only), for the Section 7.2 workload of
``benchmarks/workloads.py``, in float32. Writes ``benchmarks/results/kernels.json`` and prints a
table.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import jax  # noqa: E402

jax.config.update("jax_enable_x64", False)

import jax.numpy as jnp  # noqa: E402

from benchmarks.workloads import params, section7_2  # noqa: E402
from gsjax import runner  # noqa: E402
from gsjax.algorithms import AgentSpec, make  # noqa: E402
from gsjax.results import write_json  # noqa: E402

FREE = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all",
        "partition-id", "replica-id", "opt-barrier"}
_HEAD = re.compile(r"^(?:ENTRY )?%([\w.\-]+) \(")
_OP = re.compile(r"= .*?\s([a-z][\w\-]*)\(")
_CALLS = re.compile(r"(condition|body|calls|to_apply|branch_computations)=(\{[^}]*\}|%[\w.\-]+)")
_TRIP = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')


def parse(hlo: str) -> tuple[dict, str]:
    """``({computation: [(opcode, {attr: [callees]}, trip)]}, entry name)`` of HLO text."""
    comps, entry, cur = {}, None, None
    for line in hlo.splitlines():
        head = _HEAD.match(line)
        if head:
            cur = comps.setdefault(head.group(1), [])
            if line.startswith("ENTRY"):
                entry = head.group(1)
            continue
        if cur is None or line.startswith("}"):
            cur = None if line.startswith("}") else cur
            continue
        op = _OP.search(line)
        if not op:
            continue
        calls = {k: re.findall(r"%([\w.\-]+)", v) for k, v in _CALLS.findall(line)}
        trip = _TRIP.search(line)
        cur.append((op.group(1), calls, int(trip.group(1)) if trip else None))
    return comps, entry


def count(comps: dict, name: str, hist=None, scale: int = 1) -> int:
    """Kernels one execution of computation ``name`` launches (``hist``: by opcode, scaled)."""
    total = 0
    for op, calls, trip in comps[name]:
        if op in FREE:
            continue
        if op == "while":
            n = trip if trip is not None else 1
            total += n * sum(count(comps, c, hist, scale * n)
                             for c in calls.get("body", []) + calls.get("condition", []))
        elif op == "conditional":
            branches = calls.get("branch_computations", []) + calls.get("calls", [])
            costs = {b: count(comps, b) for b in branches}
            worst = max(costs, key=costs.get) if costs else None
            total += 1 + (count(comps, worst, hist, scale) if worst else 0)
            if hist is not None:
                hist["conditional"] += scale
        elif op == "call":
            total += sum(count(comps, c, hist, scale) for c in calls.get("to_apply", []))
        else:
            total += 1
            if hist is not None:
                hist[op] += scale
    return total


def round_kernels(hlo: str, horizon: int) -> dict:
    """Kernels per round: the ``while`` with trip count ``horizon`` (its body and condition)."""
    comps, entry = parse(hlo)
    for comp in comps.values():
        for op, calls, trip in comp:
            if op == "while" and trip == horizon:
                hist = collections.Counter()
                names = calls.get("body", []) + calls.get("condition", [])
                total = sum(count(comps, c, hist) for c in names)
                nested = sum((n or 1) * sum(count(comps, c) for c in cl.get("body", []) +
                                            cl.get("condition", []))
                             for b in names for o, cl, n in comps[b] if o == "while")
                return dict(kernels=total, in_nested_loops=nested, by_op=dict(hist.most_common()),
                            static_fusions=sum(o == "fusion" for c in comps.values()
                                               for o, _, _ in c),
                            whole_program=count(comps, entry))
    raise ValueError(f"horizon: no while loop with trip count {horizon} in the program")


def executed(compiled, args, horizon: int) -> float:
    """Kernels a call of ``compiled(*args)`` actually launches per round: the trace events of a
    ``jax.profiler`` run whose names are instructions of its optimised HLO, over ``horizon``
    (the few kernels outside the round loop included). Unlike :func:`round_kernels`, a loop
    counts the trips it makes: the compacted solver's only when seeds re-solve."""
    names = set(re.findall(r"^\s*(?:ROOT )?%([\w.\-]+) = ", compiled.as_text(), re.M))
    jax.block_until_ready(compiled(*args))
    with tempfile.TemporaryDirectory() as d:
        jax.profiler.start_trace(d)
        try:
            jax.block_until_ready(compiled(*args))
        finally:
            jax.profiler.stop_trace()
        events = []
        for f in Path(d).rglob("*.trace.json.gz"):
            events += json.load(gzip.open(f)).get("traceEvents", [])
    return sum(e.get("ph") == "X" and e.get("name") in names for e in events) / horizon


def measure(workload: dict, kind: str, seeds: int, horizon: int) -> dict:
    """Compile the sweep of ``kind`` and count its kernels per round."""
    algo = make(kind, workload["structure"], AgentSpec(**workload["spec"]))
    compact = not algo.always_solves
    fn = runner.make_sweep(algo, workload["structure"], horizon, record_every=horizon,
                           compact=compact, buffer=max(2, seeds // 16))
    keys = runner.seed_keys(jax.random.key(0), jnp.arange(seeds, dtype=jnp.uint32))
    t0 = time.perf_counter()
    args = (keys, workload["problem"], params(workload), jnp.float32(workload["move_cost"]))
    compiled = fn.lower(*args).compile()
    out = round_kernels(compiled.as_text(), horizon)
    out.update(algorithm=kind, seeds=seeds, compile_seconds=time.perf_counter() - t0,
               executed=executed(compiled, args, horizon))
    return out


def markdown(res: dict) -> str:
    m = res["meta"]
    lines = [f"Command: `{m['command']}`{m.get('note', '')} ({m['workload']}, S = {m['seeds']}, "
             f"float32, {m['time']}).", "",
             "| algorithm | **executed per round** | static per round | of which in nested "
             "loops | fusions | copies | most frequent ops | kernels, whole program |",
             "|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        top = ", ".join(f"{op} {n}" for op, n in list(r["by_op"].items())[:4])
        ran = f"{r['executed']:.0f}" if r.get("executed") is not None else "–"
        lines.append(f"| {r['algorithm']} | **{ran}** | {r['kernels']} | {r['in_nested_loops']} | "
                     f"{r['by_op'].get('fusion', 0)} | {r['by_op'].get('copy', 0)} | {top} | "
                     f"{r['whole_program']:,} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1024)
    ap.add_argument("--horizon", type=int, default=997, help="a trip count to find the round by")
    ap.add_argument("--algorithms", default="lazy,linucb,async_lazy")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "kernels.json"))
    args = ap.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    w = section7_2()
    rows = [measure(w, kind, args.seeds, args.horizon) for kind in args.algorithms.split(",")]
    res = {"meta": dict(command=" ".join(["python benchmarks/kernels.py", *argv]),
                        workload=w["name"], seeds=args.seeds,
                        time=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())),
           "rows": rows}
    write_json(Path(args.out), res)
    print(markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
