"""The XLA options of gsjax's top-level programs (sweeps, chunks, problem builds) and
:func:`jit`, ``jax.jit`` with them: a problem built directly or from a config gives the same bits.
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
    """The :data:`COMPILER_OPTIONS` this XLA knows on a CPU backend, else ``{}``.

    Each makes the sweeps faster with the same bits (benchmarks/RESULTS.md): no YNNPACK fusions
    for the LCB's small batched contractions, the older loop emitter instead of the MLIR fusion
    emitters, copy insertion with region analysis (fewer copies of the round's carried state).
    Each is checked once per backend by compiling a trivial program.
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
    takes options only there)."""
    return jax.jit(fn, compiler_options=compiler_options(), **kwargs)
