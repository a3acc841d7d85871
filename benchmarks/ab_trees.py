"""Two revisions of gsjax against each other, in alternating subprocesses (issue 16).

    python benchmarks/ab_trees.py 10649f4 HEAD --kind lazy --rounds 2000 --record-every 2
    python benchmarks/ab_trees.py 10649f4 HEAD --cli    # gsjax run section7_2, 1024 x 2000

A change to the round or the runner cannot be timed against the code before it in one process,
so each side is a subprocess importing its own tree (``git worktree add`` of the revision into
a temporary folder, removed at the end; a folder is used as it is), started in turn A B, B A,
... Sweep mode: :func:`devices.child` (``runner.sweep`` on the section7_2 workload of
``benchmarks/workloads.py``, one device or ``--devices``, compiled once, the median of
``--repeats`` runs), the summed regret and records checked equal. ``--cli``: ``gsjax run
section7_2`` (its ``run_seconds`` per algorithm, cold compile apart, persistent cache off).
Prints the medians over the pairs and A / B (> 1: B faster).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from devices import ROOT, child


@contextlib.contextmanager
def _tree(rev: str):
    """A folder holding revision ``rev`` of this repository (or ``rev`` itself, a folder)."""
    if Path(rev).is_dir():  # absolute: the --cli subprocess runs in another folder
        yield Path(rev).resolve()
        return
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", d, rev],
                       check=True)
        try:
            yield Path(d)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", d],
                           check=False)


def _sweep(tree: Path, args) -> dict:
    cmd = [sys.executable, __file__, "--child", str(tree), args.kind, str(args.seeds),
           str(args.rounds), str(args.repeats), str(args.record_every or args.rounds),
           str(args.devices)]
    env = dict(os.environ, GSJAX_CACHE_DIR="off")
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    return {args.kind: res["run_s"], "check": (res["regret_sum"], res["records_sum"])}


def _cli(tree: Path, args) -> dict:
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, PYTHONPATH=str(tree), GSJAX_CACHE_DIR="off", GSJAX_FIGURES="off")
        subprocess.run([sys.executable, "-m", "gsjax", "run", "section7_2", "--seeds",
                        str(args.seeds), "--horizon", str(args.rounds), "--out", out,
                        "--quiet"], env=env, check=True, cwd=tempfile.gettempdir())
        summary = json.loads((Path(out) / "summary.json").read_text())
    return {a: v["run_seconds"] for a, v in summary["algorithms"].items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", nargs="?", help="revision (or folder) A")
    ap.add_argument("b", nargs="?", help="revision (or folder) B")
    ap.add_argument("--cli", action="store_true", help="time `gsjax run section7_2`")
    ap.add_argument("--kind", default="lazy")
    ap.add_argument("--seeds", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--record-every", type=int, default=0, help="default: one record")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--devices", type=int, default=0,
                    help="sweep mode: CPU devices (default: one; the command uses one a core)")
    ap.add_argument("--child", nargs=7, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        tree, kind, *nums = args.child
        s, t, r, every, devices = map(int, nums)
        print(json.dumps(child(kind, s, t, r, devices=devices or None, record_every=every,
                               tree=tree)))
        return
    if args.b is None:
        ap.error("give two revisions (or folders), A and B")
    run = _cli if args.cli else _sweep
    times = {"A": {}, "B": {}}
    with _tree(args.a) as ta, _tree(args.b) as tb:
        trees, checks = {"A": ta, "B": tb}, {}
        for p in range(args.pairs):
            for side in ("AB" if p % 2 == 0 else "BA"):
                res = run(trees[side], args)
                checks[side] = res.pop("check", None)
                for name, sec in res.items():
                    times[side].setdefault(name, []).append(sec)
            print(f"pair {p}: " + "; ".join(f"{s} " + ", ".join(
                f"{n} {v[-1]:.4f} s" for n, v in times[s].items()) for s in "AB"), flush=True)
    if checks["A"] != checks["B"]:
        raise SystemExit(f"outputs differ: A {checks['A']}, B {checks['B']}")
    what = "gsjax run section7_2" if args.cli else f"runner.sweep {args.kind}"
    print(f"{what}, S = {args.seeds}, T = {args.rounds}, medians of {args.pairs} pairs:")
    for name in times["A"]:
        a, b = statistics.median(times["A"][name]), statistics.median(times["B"][name])
        print(f"  {name}: A ({args.a}) {a:.4f} s, B ({args.b}) {b:.4f} s, A / B {a / b:.2f}x")


if __name__ == "__main__":
    main()
