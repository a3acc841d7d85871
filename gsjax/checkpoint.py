"""Checkpoints of an experiment in progress: one ``checkpoint.npz`` in the run folder.

After every chunk the runner hands over the carry of every seed (host copies), the rounds
done and the records so far; :func:`save` writes them with the algorithms already finished,
the config's hash and the first seed's global id, atomically (a temporary file, then a
rename: a kill at any moment leaves the previous checkpoint or the new one, never half of
one). :func:`load` reads them back; the experiment refuses a checkpoint whose config hash
differs from the run's. Keys depend only on the root seed, the seed ids and the round index, so
a resumed run draws exactly what the uninterrupted run would have.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gsjax.results import read_npz, write_npz
from gsjax.runner import Records, RunTotals, SweepResult

__all__ = ["FILENAME", "save", "load", "remove"]

FILENAME = "checkpoint.npz"


def save(folder, config_hash: str, seed_start: int, completed: dict, current: str,
         carry_leaves, rounds_done: int, records: Records) -> Path:
    """Write the checkpoint of an experiment (see the module docstring)."""
    arrays = {}
    meta = {
        "config_hash": config_hash,
        "seed_start": int(seed_start),
        "completed": {},
        "current": {"name": current, "rounds_done": int(rounds_done),
                    "num_leaves": len(carry_leaves)},
    }
    for name, res in completed.items():
        meta["completed"][name] = {"compile_seconds": res.compile_seconds,
                                   "run_seconds": res.run_seconds}
        for f, v in res.totals._asdict().items():
            arrays[f"completed/{name}/totals/{f}"] = np.asarray(v)
        for f, v in res.records._asdict().items():
            arrays[f"completed/{name}/records/{f}"] = np.asarray(v)
        for f, v in (res.final or {}).items():
            arrays[f"completed/{name}/final/{f}"] = np.asarray(v)
    for i, leaf in enumerate(carry_leaves):
        arrays[f"current/carry/{i:05d}"] = np.asarray(leaf)
    for f, v in records._asdict().items():
        arrays[f"current/records/{f}"] = np.asarray(v)
    arrays["meta"] = np.asarray(json.dumps(meta))
    return write_npz(Path(folder) / FILENAME, arrays)


def load(folder) -> dict | None:
    """The checkpoint in ``folder`` as a dict, or None when there is none.

    Keys: ``config_hash``, ``seed_start``, ``completed`` (name -> SweepResult), ``current``
    (name), ``rounds_done``, ``carry_leaves`` (list), ``records`` (Records).
    """
    path = Path(folder) / FILENAME
    if not path.is_file():
        return None
    z = read_npz(path)
    meta = json.loads(str(z["meta"]))
    completed = {}
    for name, t in meta["completed"].items():
        totals = RunTotals(*[z[f"completed/{name}/totals/{f}"] for f in RunTotals._fields])
        records = Records(*[z[f"completed/{name}/records/{f}"] for f in Records._fields])
        prefix = f"completed/{name}/final/"
        final = {key[len(prefix):]: z[key] for key in z if key.startswith(prefix)}
        completed[name] = SweepResult(totals, records, t["compile_seconds"], t["run_seconds"],
                                      final or None)
    cur = meta["current"]
    leaves = [z[f"current/carry/{i:05d}"] for i in range(cur["num_leaves"])]
    records = Records(*[z[f"current/records/{f}"] for f in Records._fields])
    return {
        "config_hash": meta["config_hash"],
        "seed_start": meta["seed_start"],
        "completed": completed,
        "current": cur["name"],
        "rounds_done": cur["rounds_done"],
        "carry_leaves": leaves,
        "records": records,
    }


def remove(folder) -> None:
    """Delete the checkpoint once the results it would resume are written."""
    path = Path(folder) / FILENAME
    if path.exists():
        path.unlink()
