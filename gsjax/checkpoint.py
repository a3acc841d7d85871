"""Checkpoints of an experiment in progress: one ``checkpoint.npz`` in the run folder.

After every chunk the runner hands over the carry of every seed (host copies), the rounds
done and the records so far; :func:`save` writes them with the runs already finished, the
config's hash and the first seed's global id, atomically (a kill at any moment leaves the
previous checkpoint or the new one). Keys depend only on the root seed, the seed ids and the
round index, so a resumed run (:func:`gsjax.experiment.run_sweeps`) draws exactly what the
uninterrupted run would have.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from gsjax.results import flatten, read_npz, write_npz
from gsjax.runner import Records, RunTotals, SweepResult

__all__ = ["FILENAME", "Unreadable", "save", "meta", "load", "remove"]

FILENAME = "checkpoint.npz"
TIMINGS = ("compile_seconds", "run_seconds")


class Unreadable(ValueError):
    """A checkpoint that cannot be read (truncated, damaged, not a checkpoint); the message is
    one line naming the file and what to do."""

    def __init__(self, path: Path, error: Exception) -> None:
        why = " ".join(str(error).split()) or "no detail"
        super().__init__(f"{path} cannot be read ({type(error).__name__}: {why}); delete it to "
                         "start the run over (or run the config again with --force)")


def _get(z: dict, prefix: str, cls=None):
    """What :func:`gsjax.results.flatten` stored under ``prefix``: a ``cls`` NamedTuple (a
    missing field None), or without ``cls`` a dict; None when nothing is stored there."""
    if cls is None:
        found = {k[len(prefix) + 1:]: v for k, v in z.items() if k.startswith(prefix + "/")}
        return found or None
    if not any(f"{prefix}/{f}" in z for f in cls._fields):
        return None
    return cls(*[z.get(f"{prefix}/{f}") for f in cls._fields])


def save(folder, config_hash: str, seed_start: int, completed: dict, current: str,
         carry_leaves, rounds_done: int, records, processes: int = 1) -> Path:
    """Write the checkpoint of an experiment (see the module docstring).

    ``completed`` maps a run's name to its sweep result: a NamedTuple with ``compile_seconds``
    and ``run_seconds`` whose other fields are NamedTuples or dicts of arrays, or None
    (:class:`~gsjax.runner.SweepResult`, or the OCO runner's); ``records`` is a NamedTuple.
    ``processes``: how many processes ran it (recorded; the carry is whole, in global seed
    order, so any process count resumes it).
    """
    arrays = {}
    meta = {
        "config_hash": config_hash,
        "seed_start": int(seed_start),
        "completed": {},
        "current": {"name": current, "rounds_done": int(rounds_done),
                    "num_leaves": len(carry_leaves)},
    }
    if processes > 1:  # a single-process checkpoint is as before
        meta["processes"] = int(processes)
    for name, res in completed.items():
        meta["completed"][name] = {t: getattr(res, t) for t in TIMINGS}
        for f in res._fields:
            if f not in TIMINGS:
                arrays.update(flatten(f"completed/{name}/{f}", getattr(res, f)))
    for i, leaf in enumerate(carry_leaves):
        arrays[f"current/carry/{i:05d}"] = np.asarray(leaf)
    arrays.update(flatten("current/records", records))
    arrays["meta"] = np.asarray(json.dumps(meta))
    # Uncompressed: written after every chunk, where zlib cost more than the chunk's rounds
    # (0.4 s a save against 0.3 s of rounds, section7_2 at 1024 seeds; the floats barely
    # compress). The finished run's arrays.npz stays compressed.
    return write_npz(Path(folder) / FILENAME, arrays, compress=False)


def meta(folder) -> dict | None:
    """The checkpoint's metadata (``config_hash``, ``seed_start``, ``completed`` timings,
    ``current``), without its arrays; None when there is no checkpoint."""
    path = Path(folder) / FILENAME
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            return json.loads(str(z["meta"]))
    except Exception as e:  # a damaged zip raises BadZipFile, zlib.error, EOFError, ...
        raise Unreadable(path, e) from None


def load(folder, result=SweepResult, types=None, data: bytes | None = None) -> dict | None:
    """The checkpoint in ``folder`` as a dict, or None when there is none.

    Keys: ``config_hash``, ``seed_start``, ``processes`` (1 for a checkpoint that does not
    say), ``completed`` (name -> ``result``), ``current``
    (name), ``rounds_done``, ``carry_leaves`` (list), ``records``. ``types`` maps fields of
    ``result`` to their NamedTuple class (default: the bandit's ``totals``/``records``; other
    fields are dicts); ``records`` is a ``types["records"]``. :class:`Unreadable` when the
    file is damaged. ``data``: the file's bytes, read elsewhere (by process 0 of a
    multi-process run), instead of the file.
    """
    types = {"totals": RunTotals, "records": Records} if types is None else types
    path = Path(folder) / FILENAME
    if data is None and not path.is_file():
        return None
    try:
        return _load(read_npz(path if data is None else io.BytesIO(data)), result, types)
    except Exception as e:  # a damaged zip raises BadZipFile, zlib.error, EOFError, ...
        raise Unreadable(path, e) from None


def _load(z: dict, result, types) -> dict:
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
        "processes": meta.get("processes", 1),
        "completed": completed,
        "current": cur["name"],
        "rounds_done": cur["rounds_done"],
        "carry_leaves": leaves,
        "records": _get(z, "current/records", types["records"]),
    }


def remove(folder) -> None:
    """Delete the checkpoint once the results it would resume are written."""
    path = Path(folder) / FILENAME
    if path.exists():
        path.unlink()
