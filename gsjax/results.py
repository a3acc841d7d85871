"""Result files, written atomically (a temporary file in the destination folder, ``fsync``ed,
then ``os.replace``d onto the name: a reader never sees half a file), and :func:`mean_stderr`.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["atomic_write_bytes", "remove_orphan_tmps", "remove_orphan_tmps_in", "write_json",
           "write_text", "write_npz", "read_json", "read_npz", "mean_stderr", "flatten"]


def mean_stderr(x) -> dict:
    """``{"mean", "stderr"}`` over the leading (seed) axis, as floats or lists (float64; the
    standard error is 0 for one seed)."""
    x = np.asarray(x, np.float64)
    n, mean = x.shape[0], x.mean(axis=0)
    stderr = x.std(axis=0, ddof=1) / math.sqrt(n) if n > 1 else np.zeros_like(mean)
    if np.ndim(mean) == 0:
        return {"mean": float(mean), "stderr": float(stderr)}
    return {"mean": mean.tolist(), "stderr": stderr.tolist()}


def flatten(prefix: str, value) -> dict[str, np.ndarray]:
    """A NamedTuple's fields or a dict's items as ``{"PREFIX/NAME": array}``; None left out."""
    items = value._asdict().items() if hasattr(value, "_asdict") else (value or {}).items()
    return {f"{prefix}/{k}": np.asarray(v) for k, v in items if v is not None}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would make results private
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


_TMP_RANDOM = "[a-z0-9_]{8}"  # tempfile.mkstemp's random part


def remove_orphan_tmps(path, tags: tuple[str, ...] = ()) -> None:
    """Remove the temporary files a killed :func:`atomic_write_bytes` of ``path`` left beside it
    (``.NAME.[TAG.]XXXXXXXX.tmp``, TAG one of ``tags``), holding the lock on writes to ``path``."""
    path = Path(path)
    tag = f"(?:(?:{'|'.join(map(re.escape, tags))})\\.)?" if tags else ""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.{tag}{_TMP_RANDOM}\.tmp")
    if not path.parent.is_dir():
        return
    for entry in path.parent.iterdir():
        if pattern.fullmatch(entry.name):
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()


def remove_orphan_tmps_in(folder, suffixes: tuple[str, ...]) -> None:
    """:func:`remove_orphan_tmps` for every name ending with one of ``suffixes`` that a killed
    write left a temporary file of in ``folder`` (same locking rule)."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    orphan = re.compile(rf"\.(.+)\.{_TMP_RANDOM}\.tmp")
    names = {m[1] for m in map(orphan.fullmatch, (p.name for p in folder.iterdir()))
             if m and m[1].endswith(suffixes)}
    for name in names:
        remove_orphan_tmps(folder / name)


def write_text(path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path, obj) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def write_npz(path, arrays: dict, compress: bool = True) -> Path:
    """``np.savez_compressed`` (``compress=False``: ``np.savez``) through a temporary file."""
    buf = io.BytesIO()
    (np.savez_compressed if compress else np.savez)(
        buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return atomic_write_bytes(path, buf.getvalue())


def read_json(path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_npz(path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}
