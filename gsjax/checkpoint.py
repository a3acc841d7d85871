"""Checkpoints of an experiment in progress: one ``checkpoint.npz`` in the run folder.

After every chunk the runner hands over the carry of every seed (host copies), the rounds
done and the records so far; :func:`save` writes them with the runs already finished (bandit
algorithms, or OCO entries at a horizon), the config's hash and the first seed's global id,
atomically (a temporary file, then a rename: a kill at any moment leaves the previous
checkpoint or the new one, never half of one). :func:`load` reads them back; :func:`resume`
refuses a checkpoint whose config hash or seed range differs from the run's. Keys depend only
on the root seed, the seed ids and the round index, so a resumed run draws exactly what the
uninterrupted run would have.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gsjax.results import read_npz, write_npz
from gsjax.runner import Records, RunTotals, SweepResult

__all__ = ["FILENAME", "save", "load", "remove", "Mismatch", "resume", "sweep_hooks"]

FILENAME = "checkpoint.npz"
TIMINGS = ("compile_seconds", "run_seconds")


def _put(arrays: dict, prefix: str, value) -> None:
    """A NamedTuple's fields or a dict's items as ``prefix/NAME``; None entries are left out."""
    items = value._asdict().items() if hasattr(value, "_asdict") else (value or {}).items()
    for f, v in items:
        if v is not None:
            arrays[f"{prefix}/{f}"] = np.asarray(v)


def _get(z: dict, prefix: str, cls=None):
    """What :func:`_put` stored under ``prefix``: a ``cls`` NamedTuple (a missing field None),
    or without ``cls`` a dict; None when nothing is stored there."""
    if cls is None:
        found = {k[len(prefix) + 1:]: v for k, v in z.items() if k.startswith(prefix + "/")}
        return found or None
    if not any(f"{prefix}/{f}" in z for f in cls._fields):
        return None
    return cls(*[z.get(f"{prefix}/{f}") for f in cls._fields])


def save(folder, config_hash: str, seed_start: int, completed: dict, current: str,
         carry_leaves, rounds_done: int, records) -> Path:
    """Write the checkpoint of an experiment (see the module docstring).

    ``completed`` maps a run's name to its sweep result: a NamedTuple with ``compile_seconds``
    and ``run_seconds`` whose other fields are NamedTuples or dicts of arrays, or None
    (:class:`~gsjax.runner.SweepResult`, or the OCO runner's); ``records`` is a NamedTuple.
    """
    arrays = {}
    meta = {
        "config_hash": config_hash,
        "seed_start": int(seed_start),
        "completed": {},
        "current": {"name": current, "rounds_done": int(rounds_done),
                    "num_leaves": len(carry_leaves)},
    }
    for name, res in completed.items():
        meta["completed"][name] = {t: getattr(res, t) for t in TIMINGS}
        for f in res._fields:
            if f not in TIMINGS:
                _put(arrays, f"completed/{name}/{f}", getattr(res, f))
    for i, leaf in enumerate(carry_leaves):
        arrays[f"current/carry/{i:05d}"] = np.asarray(leaf)
    _put(arrays, "current/records", records)
    arrays["meta"] = np.asarray(json.dumps(meta))
    return write_npz(Path(folder) / FILENAME, arrays)


def load(folder, result=SweepResult, types=None) -> dict | None:
    """The checkpoint in ``folder`` as a dict, or None when there is none.

    Keys: ``config_hash``, ``seed_start``, ``completed`` (name -> ``result``), ``current``
    (name), ``rounds_done``, ``carry_leaves`` (list), ``records``. ``types`` maps fields of
    ``result`` to their NamedTuple class (default: the bandit's ``totals``/``records``; other
    fields are dicts); ``records`` is a ``types["records"]``.
    """
    types = {"totals": RunTotals, "records": Records} if types is None else types
    path = Path(folder) / FILENAME
    if not path.is_file():
        return None
    z = read_npz(path)
    meta = json.loads(str(z["meta"]))
    completed = {}
    for name, t in meta["completed"].items():
        completed[name] = result(**{
            f: t[f] if f in TIMINGS else _get(z, f"completed/{name}/{f}", types.get(f))
            for f in result._fields})
    cur = meta["current"]
    leaves = [z[f"current/carry/{i:05d}"] for i in range(cur["num_leaves"])]
    return {
        "config_hash": meta["config_hash"],
        "seed_start": meta["seed_start"],
        "completed": completed,
        "current": cur["name"],
        "rounds_done": cur["rounds_done"],
        "carry_leaves": leaves,
        "records": _get(z, "current/records", types["records"]),
    }


class Mismatch(ValueError):
    """A checkpoint written by another config or seed range than the run's."""


def resume(folder, config_hash: str, seed_start: int, log=None, result=SweepResult,
           types=None) -> dict | None:
    """:func:`load` for the run of config ``config_hash`` from seed ``seed_start``; raises
    :class:`Mismatch` when another config or seed range wrote the checkpoint, and ``log``s
    one line saying where the run resumes."""
    ck = load(folder, result, types)
    if ck is None:
        return None
    if ck["config_hash"] != config_hash or ck["seed_start"] != seed_start:
        raise Mismatch(
            f"{folder} holds a checkpoint of a different config or seed range (config hash "
            f"{ck['config_hash'][:12]}, seed start {ck['seed_start']}; this run: "
            f"{config_hash[:12]}, {seed_start}); refusing to mix them: use another --out, or "
            "delete its checkpoint.npz to start over")
    if log is not None:
        log(f"resuming from {folder}: {', '.join(ck['completed']) or 'none'} done, "
            f"{ck['current']} at round {ck['rounds_done']}")
    return ck


def sweep_hooks(folder, config_hash: str, seed_start: int, ck: dict | None, name: str,
                finished: dict):
    """``(start, on_chunk)`` for the runner's sweep of run ``name``.

    ``start`` continues the checkpoint ``ck`` when ``name`` is its current run (else None);
    ``on_chunk`` saves a checkpoint in ``folder`` (runs ``finished`` done, ``name`` under way)
    after every chunk, and is None without a folder.
    """
    start = None
    if ck is not None and ck["current"] == name:
        start = (ck["carry_leaves"], ck["rounds_done"], ck["records"])
    if folder is None:
        return start, None

    def on_chunk(leaves, done, records):
        save(folder, config_hash, seed_start, finished, name, leaves, done, records)

    return start, on_chunk


def remove(folder) -> None:
    """Delete the checkpoint once the results it would resume are written."""
    path = Path(folder) / FILENAME
    if path.exists():
        path.unlink()
