"""Interleaved timing: the contenders of a benchmark run in ONE process, alternated repetition by
repetition (A B C, C B A, A B C, ...), so that a shared machine's load falls on all of them alike.

Each call is timed in wall-clock seconds (``time.perf_counter``) and in CPU seconds of the whole
process (``time.process_time``: every thread, XLA's included); the summary is the median of each.
"""

from __future__ import annotations

import os
import statistics
import time


def interleave(calls: dict, repeats: int, warmup: int = 1) -> dict:
    """Time each ``calls[name]()`` ``repeats`` times, alternating forwards and backwards.

    ``warmup`` untimed rounds of every call come first (caches, page faults). Returns
    ``{name: {"wall": [...], "cpu": [...], "results": [...], "wall_median": s,
    "cpu_median": s}}`` (``results``: what each timed call returned).
    """
    names = list(calls)
    out = {n: {"wall": [], "cpu": [], "results": []} for n in names}
    for _ in range(warmup):
        for n in names:
            calls[n]()
    for rep in range(repeats):
        for n in names if rep % 2 == 0 else names[::-1]:
            w0, c0 = time.perf_counter(), time.process_time()
            result = calls[n]()
            out[n]["wall"].append(time.perf_counter() - w0)
            out[n]["cpu"].append(time.process_time() - c0)
            out[n]["results"].append(result)
    for n in names:
        out[n]["wall_median"] = statistics.median(out[n]["wall"])
        out[n]["cpu_median"] = statistics.median(out[n]["cpu"])
    return out


def machine() -> dict:
    """Load average and core count, for the record of a shared machine."""
    return {
        "cpu_count": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
