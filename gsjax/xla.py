"""How gsjax compiles its top-level programs: the XLA options of every sweep, chunk and problem
build, and :func:`jit`, ``jax.jit`` with them.

A problem is built (:func:`gsjax.problem.compiled_build`, :mod:`gsjax.experiment`) and run
(:mod:`gsjax.runner`) by programs compiled with the same options, so that building a problem
directly and from a config give the same bits.
"""

from __future__ import annotations

import jax

__all__ = ["COMPILER_OPTIONS", "compiler_options", "jit"]

#: XLA options of gsjax's compiled programs where the compiler accepts them
#: (:func:`compiler_options`).
COMPILER_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": "", "xla_cpu_use_fusion_emitters": False}
_accepted: dict = {}


def compiler_options() -> dict:
    """:data:`COMPILER_OPTIONS` on a CPU backend whose XLA knows them, else ``{}``.

    On CPU, XLA hands fusions holding small batched contractions (the LCB's quadratic forms
    over ``(seeds, k, vertices, d)``) to YNNPACK, which runs them slower than its own loops:
    turning that off made the Section 7.2 LinUCB sweep 1.8x faster (``benchmarks/run.py``).
    XLA's newer (MLIR) fusion emitters are off too: its older loop emitter ran the Section 7.2
    sweeps 1.1-1.4x faster with outputs equal bit for bit (``benchmarks/compiler_flags.py``),
    and compiles faster (a problem build of ``configs/section7_2.toml``: 0.61 s against 0.85 s,
    the same bits). Checked once per backend by compiling a trivial program; a JAX whose XLA
    dropped the option runs with the defaults instead of failing.
    """
    backend = jax.default_backend()
    if backend not in _accepted:
        opts = COMPILER_OPTIONS if backend == "cpu" else {}
        try:
            jax.jit(lambda x: x + 1, compiler_options=opts).lower(1.0).compile()
        except Exception:  # noqa: BLE001 -- an XLA without the option: run with its defaults
            opts = {}
        _accepted[backend] = opts
    return _accepted[backend]


def jit(fn, **kwargs):
    """``jax.jit(fn, **kwargs)`` with :func:`compiler_options`, for a top-level program (XLA
    takes options only there: jitted parts are plain ``jax.jit``, and
    :func:`gsjax.runner.drive` passes the options when it compiles them)."""
    return jax.jit(fn, compiler_options=compiler_options(), **kwargs)
