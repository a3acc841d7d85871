"""Fusions that write over an operand's buffer behind LLVM's runtime overlap check.

    python benchmarks/inplace.py                     # section7_2, S = 1024: lazy linucb async
    python benchmarks/inplace.py --algorithms linucb --seeds 256

XLA may give an element-wise fusion's output the buffer of one of its operands. LLVM vectorises
the fusion's loop behind a runtime check that the two do not overlap and, when they are the same
buffer, runs its scalar copy instead: gsjax's noise transform ran 7x slower that way in LinUCB's
round (RESULTS.md, 2026-12-04 evening). This compiles each sweep of ``benchmarks/kernels.py``
with XLA's dump on (a temporary folder) and lists every fusion whose output shares an operand's
allocation and offset, and whether its optimised LLVM code carries such a check.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def shared_fusions(folder: str) -> list[tuple[str, str, list[str], bool]]:
    """``(fusion, shape, operands sharing its buffer, runtime check)`` of the dumped sweep."""
    text = open(glob.glob(f"{folder}/*jit_whole.cpu_after_optimizations-buffer-assignment.txt")[0]
                ).read()
    where, alloc = {}, None
    for line in text.splitlines():
        if m := re.match(r"allocation (\d+):", line):
            alloc = int(m.group(1))
        elif m := re.match(r"\s*value: <\d+ ([\w.\-]+) @[\d{}, ]*> \(size=\d+,offset=(\d+)\)", line):
            where.setdefault(m.group(1), (alloc, int(m.group(2))))
    hlo = open(glob.glob(f"{folder}/*jit_whole.cpu_after_optimizations.txt")[0]).read()
    llvm = "".join(open(f).read() for f in glob.glob(f"{folder}/*jit_whole*ir-with-opt.ll"))
    out = []
    for m in re.finditer(r"^\s*(?:ROOT )?%([\w.\-]+) = (\S+) fusion\(([^)]*)\)", hlo, re.M):
        name, shape = m.group(1), m.group(2)
        shared = [o for o in re.findall(r"%([\w.\-]+)", m.group(3)) if name in where
                  and where.get(o) == where[name]]
        if shared:
            fn = re.search(r"define[^@]*@" + re.escape(name) + r"\(.*?^}", llvm, re.M | re.S)
            out.append((name, shape, shared, bool(fn and "diff.check" in fn.group(0))))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1024)
    ap.add_argument("--algorithms", nargs="+", default=["lazy", "linucb", "async_lazy"])
    args = ap.parse_args(argv)
    worst = 0
    for kind in args.algorithms:
        with tempfile.TemporaryDirectory() as d:
            # one process per program: XLA reads its flags once
            env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={d} --xla_dump_hlo_module_re=.*whole.*")
            code = ("import sys; sys.path.insert(0, %r); from benchmarks import kernels, workloads;"
                    "kernels.measure(workloads.section7_2(), %r, %d, 400)" % (str(ROOT), kind,
                                                                              args.seeds))
            if os.spawnve(os.P_WAIT, sys.executable, [sys.executable, "-c", code], env):
                print(f"{kind}: compile failed")
                return 1
            rows = shared_fusions(d)
        print(f"{kind}: {len(rows)} fusion(s) writing over an operand")
        for name, shape, ops, check in rows:
            print(f"  {name} {shape} over {', '.join(ops)}"
                  + ("  <- behind a runtime overlap check: scalar loop" if check else ""))
            worst |= check
    return int(worst)


if __name__ == "__main__":
    sys.exit(main())
