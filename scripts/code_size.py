"""Lines of Python in ``gsjax/`` outside ``gsjax/paper`` by layer (issue 15's size target).

    python scripts/code_size.py                 # the working tree
    python scripts/code_size.py cbf90fe HEAD    # git revisions side by side

Each layer's ``wc -l`` total, then the whole package's split into code, docstring (the first
string of a module, class or function), comment and blank lines.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {
    "core": "checks linalg graphs lcb dp philox xla __init__",
    "environments": "problem factor fairness adult",
    "algorithms": "algorithms/__init__ algorithms/base algorithms/kernel algorithms/schedules "
                  "algorithms/decisions algorithms/adaptive algorithms/joint_lazy",
    "runner": "runner checkpoint distributed",
    "oco": "oco/__init__ oco/problem oco/algorithms oco/runner oco/config oco/experiment "
           "oco/plotting",
    "experiment and tuning": "config experiment tune tuner plotting results relaxed es",
    "cli": "cli tuner_cli commands __main__",
}
KINDS = ("wc", "code", "docstring", "comment", "blank")


def kinds(source: str) -> dict[str, int]:
    """``source``'s lines by kind (a docstring's lines are docstring whatever they hold)."""
    doc = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            doc.update(range(body[0].lineno, body[0].end_lineno + 1))
    out = dict.fromkeys(KINDS, 0)
    for i, line in enumerate(source.splitlines(), 1):
        text = line.strip()
        kind = ("docstring" if i in doc else "blank" if not text
                else "comment" if text.startswith("#") else "code")
        out[kind] += 1
        out["wc"] += 1
    return out


def _files(rev: str | None) -> list[str]:
    if rev is None:
        return [str(p.relative_to(ROOT)) for p in (ROOT / "gsjax").rglob("*.py")]
    return subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "gsjax"], cwd=ROOT,
                          check=True, capture_output=True, text=True).stdout.split()


def _read(rev: str | None, path: str) -> str:
    if rev is None:
        return (ROOT / path).read_text()
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout


def measure(rev: str | None = None) -> dict[str, dict[str, int]]:
    """``{layer: kinds}`` plus ``"total"``; a module in no layer is an error."""
    paths = {f"gsjax/{m}.py": layer for layer, mods in LAYERS.items() for m in mods.split()}
    found = [p for p in _files(rev) if p.endswith(".py") and not p.startswith("gsjax/paper/")]
    if missing := sorted(set(found) - set(paths)):
        raise SystemExit(f"modules in no layer (add them to LAYERS): {missing}")
    out = {layer: dict.fromkeys(KINDS, 0) for layer in [*LAYERS, "total"]}
    for path in found:
        for kind, n in kinds(_read(rev, path)).items():
            out[paths[path]][kind] += n
            out["total"][kind] += n
    return out


def main(revs: list[str]) -> None:
    revs = revs or [None]
    tables = [measure(r) for r in revs]
    print("| layer | " + " | ".join(r or "working tree" for r in revs) + " |")
    print("|---" * (len(revs) + 1) + "|")
    for layer in tables[0]:
        print(f"| {layer} | " + " | ".join(f"{t[layer]['wc']:,}" for t in tables) + " |")
    for r, t in zip(revs, tables):
        print(f"{r or 'working tree'}: " + ", ".join(f"{k} {t['total'][k]:,}" for k in KINDS))


if __name__ == "__main__":
    main(sys.argv[1:])
