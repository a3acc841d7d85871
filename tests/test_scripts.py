"""The scripts whose output the docs quote, on inputs whose answers are known by hand."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from gsjax.results import write_npz

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_adaptive_long_numbers(tmp_path):
    """scripts/adaptive_long.py on made-up curves (4 seeds, records at 10^4 .. 10^6): gaps of
    the mean curves, the crossing round, the paired difference with and without the
    super-graph's fastest-growing seed, the decade rule and the growth over the second half."""
    rounds = np.array([10**4, 10**5, 5 * 10**5, 10**6])
    flat = np.tile([10.0, 10.0, 10.0, 10.0], (4, 1))
    sup = np.array([[1.0, 5.0, 8.0, 9.0]] * 3 + [[1.0, 5.0, 8.0, 49.0]])  # seed 3 jumps late
    ada = np.full((4, 4), 9.0)
    arrays = {"rounds": rounds}
    for name, total in (("true_graph", flat * 0.1), ("true_graph_async", flat * 0.0),
                        ("supergraph", sup), ("adaptive", ada)):
        arrays[f"{name}/cum_regret"] = total / 2
        arrays[f"{name}/cum_movement"] = total / 2
    folder = tmp_path / "gamma1.0"
    folder.mkdir()
    write_npz(folder / "arrays.npz", arrays)
    r = _script("adaptive_long").gamma_numbers(folder)
    # mean supergraph: 1, 5, 8, 19; adaptive 9 throughout
    assert r["gap"] == {10**4: 8.0, 10**5: 4.0, 10**6: -10.0}
    assert r["crossover"] == 10**6  # adaptive below from the last record only (9 > 8 at 5e5)
    assert r["shrink_per_decade"] == 4.0 and r["zero_at"] == pytest.approx(10**6)
    diff = np.array([0.0, 0.0, 0.0, -40.0])
    assert r["paired"] == pytest.approx((-10.0, diff.std(ddof=1) / 2, 0.0, 1))
    assert r["paired_without"][:2] == pytest.approx((0.0, 0.0)) and r["paired_without"][3] == 0
    assert r["growth"]["supergraph"] == pytest.approx((3, 41.0 / 5e5, 1.0 / 5e5))
    assert r["excess"]["adaptive"] == {10**4: 9.0, 10**6: 9.0}


def test_code_size_kinds_and_layers():
    """scripts/code_size.py on a source whose line kinds are counted by hand, and on the tree:
    every module of gsjax/ outside gsjax/paper is in one layer, and the layers add up."""
    code_size = _script("code_size")
    source = ('"""Module\n\ndocstring."""\n\n# a comment\nx = 1  # code\n\n\n'
              'class A:\n    """One line."""\n\n    def f(self):\n        """Two\n        lines."""\n'
              '        s = """not a docstring"""\n        return s\n')
    assert code_size.kinds(source) == {"wc": 16, "code": 5, "docstring": 6, "comment": 1,
                                       "blank": 4}
    sizes = code_size.measure()
    modules = [p for p in (ROOT / "gsjax").rglob("*.py") if "paper" not in p.parts]
    assert sizes["total"]["wc"] == sum(len(p.read_text().splitlines()) for p in modules)
    assert sum(s["wc"] for layer, s in sizes.items() if layer != "total") == sizes["total"]["wc"]
