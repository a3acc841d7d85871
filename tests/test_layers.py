"""The package's import graph: layers, cycles and function-level imports (issue 15, item 6).

Each module of ``gsjax/`` is given a layer; a module imports only from lower layers, or from
its own layer without a cycle. ``gsjax/__init__.py`` (the public re-exports) may import any
layer below the paper drivers, and nothing imports it for a name of its own. A ``gsjax`` import
inside a function (the way a cycle is usually dodged) is counted too.

On the main of 2026-11 there were 16 such edges and 140 function-level imports; there are none
now, and a new upward edge, cycle or function-level import fails this test.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "gsjax"

# Lower number = lower layer (see docs/concepts/layout.md).
LAYERS = {
    0: ["checks", "linalg", "graphs", "results", "adult", "philox", "commands", "distributed", "es",
        "xla"],
    1: ["problem", "factor", "fairness", "lcb", "dp", "oco.problem"],
    2: ["algorithms", "algorithms.*", "oco.algorithms", "oco"],
    3: ["runner", "relaxed", "checkpoint", "oco.runner", "plotting", "oco.plotting"],
    4: ["config", "oco.config", "experiment", "oco.experiment", "tune", "tuner"],
    5: ["cli", "tuner_cli"],
    6: ["paper", "paper.*"],  # the paper's drivers: nothing below imports them
    7: ["__main__"],  # the gsjax command: the library's commands plus the paper's reproduce
}
PUBLIC = "gsjax"  # the package's __init__

def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py")}


def _layer(mod: str) -> int:
    short = mod.removeprefix("gsjax.")
    for layer, names in LAYERS.items():
        for name in names:
            if short == name or (name.endswith(".*") and short.startswith(name[:-1])):
                return layer
    raise AssertionError(f"{mod} has no layer in tests/test_layers.py: give it one")


def _imports(mod: str, path: Path, mods) -> list[tuple[str, bool]]:
    """``(imported module, at function level)`` for each ``gsjax`` import of ``mod``."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    # Imports guarded at module level (if TYPE_CHECKING / try) count as module level.
    for node in tree.body:
        if isinstance(node, (ast.If, ast.Try)):
            top |= {id(n) for n in ast.walk(node)}
    package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                targets.append(sub if sub in mods else base)
        for t in targets:
            while t not in mods and "." in t:
                t = t.rsplit(".", 1)[0]
            if t.startswith("gsjax") and t in mods and t != mod:
                out.append((t, id(node) not in top))
    return out


def _graph():
    mods = _modules()
    edges, function_level = set(), []
    for mod, path in mods.items():
        for target, lazy in _imports(mod, path, mods):
            if lazy:
                function_level.append((mod, target))
            else:
                edges.add((mod, target))
    return mods, edges, function_level


def _cycles(edges) -> set[tuple[str, str]]:
    """Edges that lie on a cycle of module-level imports."""
    succ: dict[str, set[str]] = {}
    for a, b in edges:
        succ.setdefault(a, set()).add(b)

    def reaches(a, b):
        seen, todo = set(), [a]
        while todo:
            x = todo.pop()
            if x == b:
                return True
            if x not in seen:
                seen.add(x)
                todo.extend(succ.get(x, ()))
        return False

    return {(a, b) for a, b in edges if reaches(b, a)}


def _violations(edges) -> set[tuple[str, str]]:
    bad = set(_cycles(edges))
    for a, b in edges:
        if a == PUBLIC:
            if _layer(b) >= 6:  # the public surface holds no paper driver
                bad.add((a, b))
        elif b == PUBLIC or _layer(b) > _layer(a):
            bad.add((a, b))
    return bad


def test_no_upward_edge_or_cycle():
    mods, edges, lazy = _graph()
    # Function-level imports count as edges for the layer rules too.
    bad = sorted(_violations(edges | set(lazy)))
    assert not bad, f"imports that break the layers (or close a cycle): {bad}"


def test_no_function_level_imports():
    _, _, lazy = _graph()
    assert not lazy, (f"function-level gsjax imports {lazy}: import at module level from a "
                      f"lower layer instead")


def test_the_checker_sees_a_cycle_and_an_upward_edge():
    """The rules themselves, on a made-up graph."""
    edges = {("gsjax.linalg", "gsjax.runner"), ("gsjax.problem", "gsjax.lcb"),
             ("gsjax.lcb", "gsjax.problem"), ("gsjax.runner", "gsjax.linalg")}
    bad = _violations(edges)
    assert ("gsjax.linalg", "gsjax.runner") in bad  # upward
    assert {("gsjax.problem", "gsjax.lcb"), ("gsjax.lcb", "gsjax.problem")} <= bad  # cycle
