"""Record the golden cases: ``python tests/golden/record.py [CASE ...]`` (default: all).

Writes ``tests/golden/data/CASE.json`` (the case's document and the JAX version it was
recorded with) and ``CASE.npz`` (its arrays). Re-record only for a change that is meant to
move numbers, and say why in the commit.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import CASES  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"


def main(names) -> None:
    DATA.mkdir(exist_ok=True)
    for name in names or CASES:
        fn, arg = CASES[name]
        with tempfile.TemporaryDirectory() as tmp:
            doc, arrays = fn(arg, Path(tmp))
        (DATA / f"{name}.json").write_text(json.dumps(
            {"jax_version": jax.__version__, "doc": doc}, indent=1, sort_keys=True) + "\n")
        np.savez_compressed(DATA / f"{name}.npz", **arrays)
        print(f"recorded {name}")


if __name__ == "__main__":
    main(sys.argv[1:])
