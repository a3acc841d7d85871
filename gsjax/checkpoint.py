"""Checkpoints of an experiment in progress: ``checkpoint.npz`` in the run folder and the parts
it names in ``checkpoint.parts/``.

After every chunk, what is new is written once, each piece its own part: the chunk's records,
and a finished run's result. Then ``checkpoint.npz`` replaces the previous one: the config's
hash, the first seed's global id, the carry of every seed, the rounds done, the current run's
compile and run seconds so far and the names of its parts. Every file is written atomically,
each part before the checkpoint that names it, so a kill leaves one whole checkpoint. A resumed
run (:func:`gsjax.experiment.run_sweeps`) draws exactly what the uninterrupted run would have.
A checkpoint of one file (no parts: gsjax up to commit 391d257) still loads and resumes.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np

from gsjax.results import flatten, read_npz, write_npz
from gsjax.runner import Records, RunTotals, SweepResult

__all__ = ["FILENAME", "PARTS", "Unreadable", "Parts", "save", "meta", "load", "pack",
           "remove"]

FILENAME = "checkpoint.npz"
PARTS = "checkpoint.parts"  # the folder of the parts, beside FILENAME
TIMINGS = ("compile_seconds", "run_seconds")


class Unreadable(ValueError):
    """A checkpoint that cannot be read (truncated, damaged, not a checkpoint, a part missing);
    the message is one line naming the file and what to do."""

    def __init__(self, path: Path, error: Exception) -> None:
        why = " ".join(str(error).split()) or "no detail"
        super().__init__(f"{path} cannot be read ({type(error).__name__}: {why}); delete it to "
                         "start the run over (or run the config again with --force)")


def _get(z: dict, prefix: str, cls=None):
    """What :func:`gsjax.results.flatten` stored under ``prefix``: a ``cls`` NamedTuple (a
    missing field None) or a dict; None when nothing is stored there."""
    if cls is None:
        found = {k[len(prefix) + 1:]: v for k, v in z.items() if k.startswith(prefix + "/")}
        return found or None
    if not any(f"{prefix}/{f}" in z for f in cls._fields):
        return None
    return cls(*[z.get(f"{prefix}/{f}") for f in cls._fields])


def _write_part(folder, stem: str, arrays: dict) -> str:
    name = f"{stem}.npz"
    write_npz(Path(folder) / PARTS / name, arrays, compress=False)  # floats barely compress
    return name


class Parts:
    """The parts the checkpoints of one experiment stand on (kept by the thread that writes
    them): each finished run's result file by name, and the current run's records, one file
    per chunk or ``(rounds, records)`` still to write."""

    def __init__(self, completed=None, current=None, records=()):
        self.completed, self.current, self.records = dict(completed or {}), current, list(records)
        self.stale = []  # parts no checkpoint will name: deleted after the next one is written

    @classmethod
    def of(cls, ck: dict | None) -> Parts:
        """The parts of a loaded checkpoint (:func:`load`), or none."""
        if ck is None:
            return cls()
        if ck["parts"] is None:  # one file: its records are written as a part at the next save
            return cls({}, ck["current"], [(ck["rounds_done"], r) for r in ck["records"]])
        return cls(ck["parts"]["completed"], ck["current"], ck["parts"]["records"])

    def save(self, folder, config_hash: str, seed_start: int, completed: dict, current: str,
             carry_leaves, rounds_done: int, records, processes: int = 1,
             seconds=(0.0, 0.0)) -> Path:
        """Write what is new (results of ``completed``, name -> sweep result; ``records``, the
        chunk's) as parts, then the checkpoint (:func:`save`)."""
        for name, res in completed.items():
            if name not in self.completed:
                arrays = {k: v for f in res._fields if f not in TIMINGS
                          for k, v in flatten(f, getattr(res, f)).items()}
                self.completed[name] = _write_part(folder, f"done-{len(self.completed)}", arrays)
        self.hold(current, rounds_done, records)
        run = len(self.completed)
        self.records = [r if isinstance(r, str) else
                        _write_part(folder, f"records-{run}-{r[0]:010d}", flatten("records", r[1]))
                        for r in self.records]
        timings = {name: {t: getattr(res, t) for t in TIMINGS} for name, res in completed.items()}
        path = save(folder, config_hash, seed_start, timings, current, carry_leaves, rounds_done,
                    {"completed": self.completed, "records": self.records}, processes, seconds)
        stale, self.stale = self.stale, []
        for name in stale:
            (Path(folder) / PARTS / name).unlink(missing_ok=True)
        return path

    def hold(self, current: str, rounds_done: int, records) -> None:
        """Keep the records of run ``current``'s chunk ending at ``rounds_done`` for the next
        :meth:`save`. A new run drops the previous one's chunks (its result holds them)."""
        if current != self.current:
            self.stale += [r for r in self.records if isinstance(r, str)]
            self.current, self.records = current, []
        self.records.append((rounds_done, records))


def save(folder, config_hash: str, seed_start: int, completed: dict, current: str,
         carry_leaves, rounds_done: int, parts: dict, processes: int = 1,
         seconds=(0.0, 0.0)) -> Path:
    """Write ``checkpoint.npz`` (:meth:`Parts.save` writes the parts first). ``completed`` maps
    a finished run's name to its timings; ``parts``: ``{"completed": {name: part}, "records":
    [part, ...]}`` (round order). ``processes``: how many processes ran it (recorded only).
    ``seconds``: the current run's ``(compile, run)`` seconds so far."""
    meta = {"config_hash": config_hash, "seed_start": int(seed_start), "completed": completed,
            "current": {"name": current, "rounds_done": int(rounds_done),
                        "num_leaves": len(carry_leaves),
                        **{t: float(x) for t, x in zip(TIMINGS, seconds)}},
            "parts": parts}
    if processes > 1:  # a single-process checkpoint is as before
        meta["processes"] = int(processes)
    arrays = {f"current/carry/{i:05d}": np.asarray(leaf) for i, leaf in enumerate(carry_leaves)}
    arrays["meta"] = np.asarray(json.dumps(meta))
    return write_npz(Path(folder) / FILENAME, arrays, compress=False)


def meta(folder) -> dict | None:
    """The checkpoint's metadata (``config_hash``, ``seed_start``, ``completed`` timings,
    ``current``, ``parts``), without its arrays; None when there is no checkpoint."""
    path = Path(folder) / FILENAME
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            return json.loads(str(z["meta"]))
    except Exception as e:  # a damaged zip raises BadZipFile, zlib.error, EOFError, ...
        raise Unreadable(path, e) from None


def _read(folder, data: bytes | None):
    """The checkpoint's arrays and a reader of its parts, from the files or :func:`pack`'s."""
    if data is None:
        return read_npz(Path(folder) / FILENAME), lambda name: _part(folder, name)
    z = read_npz(io.BytesIO(data))
    return z, lambda name: _get(z, f"parts/{name}") or {}


def _part(folder, name: str) -> dict:
    try:
        return read_npz(Path(folder) / PARTS / name)
    except Exception as e:  # named: the checkpoint's error says which part
        raise ValueError(f"its part {PARTS}/{name}: {type(e).__name__}: {e}") from None


def load(folder, result=SweepResult, types=None, data: bytes | None = None) -> dict | None:
    """The checkpoint in ``folder`` as a dict, or None when there is none.

    Keys: ``config_hash``, ``seed_start``, ``processes``, ``completed`` (name -> ``result``),
    ``current`` (name), ``rounds_done``, ``seconds`` (``(compile, run)`` so far),
    ``carry_leaves`` (list), ``records`` (``types["records"]`` in round order, to join on the
    round axis), ``parts`` (None for a one-file checkpoint). ``types`` maps fields of ``result``
    to their NamedTuple class (default: the bandit's; other fields are dicts). ``data``:
    :func:`pack`'s bytes instead of the files. :class:`Unreadable` when a file is damaged.
    """
    types = {"totals": RunTotals, "records": Records} if types is None else types
    path = Path(folder) / FILENAME
    if data is None and not path.is_file():
        return None
    try:
        z, part = _read(folder, data)
        m = json.loads(str(z["meta"]))
        parts = m.get("parts")
        if parts is None:  # one file: the results and the records in it
            stored = {name: (z, f"completed/{name}/") for name in m["completed"]}
            records = [_get(z, "current/records", types["records"])]
        else:
            stored = {name: (part(p), "") for name, p in parts["completed"].items()}
            records = [_get(part(p), "records", types["records"]) for p in parts["records"]]
        completed = {name: result(**{
            f: m["completed"][name][f] if f in TIMINGS else _get(a, prefix + f, types.get(f))
            for f in result._fields}) for name, (a, prefix) in stored.items()}
        cur = m["current"]
        return {
            "config_hash": m["config_hash"], "seed_start": m["seed_start"],
            "processes": m.get("processes", 1), "completed": completed, "current": cur["name"],
            "rounds_done": cur["rounds_done"],
            "seconds": tuple(cur.get(t, 0.0) for t in TIMINGS),  # 0 in an older checkpoint
            "carry_leaves": [z[f"current/carry/{i:05d}"] for i in range(cur["num_leaves"])],
            "records": [r for r in records if r is not None], "parts": parts,
        }
    except Exception as e:  # a damaged zip raises BadZipFile, zlib.error, EOFError, ...
        raise Unreadable(path, e) from None


def pack(folder) -> bytes | None:
    """The checkpoint and its parts as one ``.npz`` in memory (:func:`load`'s ``data``), or None
    when there is none; :class:`Unreadable` as :func:`load`."""
    path = Path(folder) / FILENAME
    if not path.is_file():
        return None
    try:
        z, part = _read(folder, None)
        parts = json.loads(str(z["meta"])).get("parts") or {"completed": {}, "records": []}
        for p in [*parts["completed"].values(), *parts["records"]]:
            z.update({f"parts/{p}/{k}": v for k, v in part(p).items()})
    except Exception as e:
        raise Unreadable(path, e) from None
    buf = io.BytesIO()
    np.savez(buf, **z)
    return buf.getvalue()


def remove(folder) -> None:
    """Delete the checkpoint (then its parts) once the results it would resume are written."""
    (Path(folder) / FILENAME).unlink(missing_ok=True)
    shutil.rmtree(Path(folder) / PARTS, ignore_errors=True)
