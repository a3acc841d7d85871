"""Argument checks shared by the low-level constructors (host side, NumPy only), and
:func:`remember`, their bounded memo. Each raises ``ValueError`` with a message that starts with
the argument's name (callers pass ``"function: argument"``). A traced argument (under
``jit``/``vmap``) has only its static shape checked, never its values.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["integer", "positive_integer", "is_traced", "shape_and_values", "check_bounds",
           "check_float_dtype", "remember"]


def integer(value, name: str) -> int:
    """``value`` as an int; ``ValueError`` unless it is a Python or NumPy integer (not a bool)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    return int(value)


def positive_integer(value, name: str) -> int:
    """``value`` as an int ``>= 1``; ``ValueError`` naming ``name`` otherwise."""
    value = integer(value, name)
    if value < 1:
        raise ValueError(f"{name}: must be an integer >= 1, got {value}")
    return value


def is_traced(value) -> bool:
    """True when any leaf of ``value`` is a JAX tracer (its values are unknown here)."""
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(value))


def shape_and_values(value, name: str) -> tuple[tuple, np.ndarray | None]:
    """``(shape, float64 values)``, values ``None`` when traced; ``ValueError`` if not numeric."""
    if is_traced(value):
        return tuple(jnp.shape(jnp.asarray(value))), None
    try:
        arr = None if value is None else np.asarray(value)
    except (TypeError, ValueError):
        arr = None
    if arr is None or arr.dtype.kind not in "biuf":
        raise ValueError(f"{name}: expected a number or a sequence of numbers, got {value!r}")
    return arr.shape, arr.astype(np.float64)


def check_bounds(values: np.ndarray, name: str, *, gt=None, ge=None, le=None, lt=None) -> None:
    """Every entry of ``values`` finite and within the bounds; names the first bad entry."""
    flat = values.reshape(-1)
    ok, need = np.isfinite(flat), []
    for bound, cmp, text in ((gt, np.greater, ">"), (ge, np.greater_equal, ">="),
                             (lt, np.less, "<"), (le, np.less_equal, "<=")):
        if bound is not None:
            need.append(f"{text} {bound}")
            ok &= cmp(flat, bound)
    if (bad := np.flatnonzero(~ok)).size:
        b = int(bad[0])
        where = f"{name}[{b}]" if values.ndim else name
        need = "finite" + (", " + " and ".join(need) if need else "")
        raise ValueError(f"{where}: must be {need}, got {flat[b]}")


def check_float_dtype(dtype, name: str) -> None:
    """``dtype`` a floating dtype."""
    try:
        ok = jnp.issubdtype(dtype, jnp.floating)
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"{name}: expected a floating dtype, got {dtype!r}")


def remember(store: dict, limit: int, key, make):
    """``store[key]``, made by ``make()`` the first time and kept, the oldest entry dropped once
    ``store`` holds ``limit``; an unhashable ``key``: ``make()``, kept nowhere."""
    try:
        found = key in store
    except TypeError:
        return make()
    if not found:
        value = make()
        if len(store) >= limit:
            del store[next(iter(store))]
        store[key] = value
    return store[key]
