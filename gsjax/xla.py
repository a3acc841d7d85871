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
COMPILER_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": "",
                    "xla_cpu_use_fusion_emitters": False,
                    "xla_cpu_copy_insertion_use_region_analysis": True}
_accepted: dict = {}


def compiler_options() -> dict:
    """:data:`COMPILER_OPTIONS` on a CPU backend whose XLA knows them, else ``{}``.

    On CPU, XLA hands fusions holding small batched contractions (the LCB's quadratic forms
    over ``(seeds, k, vertices, d)``) to YNNPACK, which runs them slower than its own loops:
    turning that off made the Section 7.2 LinUCB sweep 1.8x faster (``benchmarks/run.py``).
    XLA's newer (MLIR) fusion emitters are off too: its older loop emitter ran the Section 7.2
    sweeps 1.1-1.4x faster with outputs equal bit for bit (``benchmarks/compiler_flags.py``),
    and compiles faster (a problem build of ``configs/section7_2.toml``: 0.61 s against 0.85 s,
    the same bits). Copy insertion with region analysis drops some of the copies of the
    round's loop-carried state (LinUCB 8 -> 5 a round, lazy 11 -> 8): the sweeps on one device
    run 1.17-1.24x faster, the same bits (on two host devices 0.98-1.01x; RESULTS.md,
    2026-12-06). Each option is checked once per backend by compiling a trivial program; an
    XLA without it runs with its default instead of failing.
    """
    backend = jax.default_backend()
    if backend not in _accepted:
        opts = COMPILER_OPTIONS if backend == "cpu" else {}
        if not _accepts(opts):  # some option unknown to this XLA: keep those it knows
            opts = {k: v for k, v in opts.items() if _accepts({k: v})}
        _accepted[backend] = opts
    return _accepted[backend]


def _accepts(options: dict) -> bool:
    """Whether this XLA compiles a trivial program with ``options``."""
    try:
        jax.jit(lambda x: x + 1, compiler_options=options).lower(1.0).compile()
    except Exception:  # noqa: BLE001 -- an XLA without the option: run with its default
        return False
    return True


def jit(fn, **kwargs):
    """``jax.jit(fn, **kwargs)`` with :func:`compiler_options`, for a top-level program (XLA
    takes options only there: jitted parts are plain ``jax.jit``, and
    :func:`gsjax.runner.drive` passes the options when it compiles them)."""
    return jax.jit(fn, compiler_options=compiler_options(), **kwargs)
