"""Counter-based normals: Philox-4x32-10 in ``jax.numpy``, so that XLA fuses it into a round.

A draw is a pure function of ``(root, seed id, round, index)`` (DESIGN section 3): the 64-bit
Philox key is ``(root, seed_id)`` and the 128-bit counter is ``(block, round, stream, 0)``, where
``block`` numbers the 4-word outputs of one (seed, round, stream). No state is carried and no key
is split, so a seed's numbers do not depend on the batch size, chunking, device count or resume
point, and every argument broadcasts: a ``(S,)`` array of seed ids gives ``(..., S)`` draws with
the seed axis last.

Philox-4x32-10 is that of Salmon et al. (SC'11, the Random123 library): ten rounds of two 32x32
-> 64-bit multiplications, the key bumped by the Weyl constants between rounds.

Normals use the inverse-CDF transform ``z = sqrt(2) erfinv(2u - 1)`` (as ``jax.random.normal``)
of one uniform ``u`` in the open interval (0, 1) each: with ``precision="float32"`` a uniform
takes the top 23 bits of one word and a Philox block gives four normals; with ``"float64"``
(needs ``jax_enable_x64``) it takes 52 bits of two words and a block gives two. ``u`` and
``2u - 1`` are exact in either precision, so ``|2u - 1| < 1`` and every normal is finite (one
bit more, ``u = (m + 0.5) 2^-24`` with 24 bits, rounds its largest value to 1.0 in float32,
and ``erfinv(1) = inf``: one draw in 2^24 infinite, hit by Section 7.2's 10^5-round run). (Box--Muller was measured 3x slower on CPU: XLA's float32 sin and
cos cost more than its erfinv.) The precision of the draw is a property of the stream, not of the
consumer: cast the result, so that float32 and float64 runs of a seed see the same noise.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

__all__ = ["MULTIPLIERS", "PRECISIONS", "WEYL", "philox4x32", "uniforms", "normals"]

MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
WEYL = (0x9E3779B9, 0xBB67AE85)
ROUNDS = 10
_U32 = jnp.uint32
PRECISIONS = ("float32", "float64")


def _mulhilo(a: jax.Array, m: int) -> tuple[jax.Array, jax.Array]:
    """``(high, low)`` 32-bit halves of the 64-bit product of uint32 ``a`` and the constant ``m``.

    The product is a ``uint64`` even in a float32 (``jax_enable_x64`` off) trace: one widening
    multiply, 2.6x faster on CPU than assembling the high half from 16-bit pieces (measured).
    """
    with jax.enable_x64(True):
        p = a.astype(jnp.uint64) * jnp.uint64(m)
        return (p >> 32).astype(_U32), p.astype(_U32)


def philox4x32(counter, key, rounds: int = ROUNDS) -> tuple[jax.Array, ...]:
    """Philox-4x32 on ``counter`` (4 uint32 arrays) and ``key`` (2): the 4 output words.

    Arrays broadcast against each other; the words come back in Random123's order.
    """
    c0, c1, c2, c3 = (jnp.asarray(c, _U32) for c in counter)
    k0, k1 = (jnp.asarray(k, _U32) for k in key)
    for r in range(rounds):
        if r:
            k0, k1 = k0 + _U32(WEYL[0]), k1 + _U32(WEYL[1])
        hi0, lo0 = _mulhilo(c0, MULTIPLIERS[0])
        hi1, lo1 = _mulhilo(c2, MULTIPLIERS[1])
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


#: Up to this many Philox blocks a draw is written block by block (one array per word);
#: beyond, the blocks are one array axis, so the program does not grow with ``num``.
UNROLLED_BLOCKS = 4


def _words(root, seed_id, round_, stream, num: int):
    """Words ``0 .. num-1`` of (root, seed id, round, stream): word ``i`` is word ``i % 4`` of
    block ``i // 4``. Up to :data:`UNROLLED_BLOCKS` blocks, one array per word (not a block
    axis): XLA then evaluates each block once inside the fused round, 4x faster on CPU than
    indexing a stacked block axis (measured). Beyond, one ``(num, *batch)`` array with the
    blocks on an axis: written block by block, a draw of 10^3 normals made a 6 MB program that
    took 46 s to compile."""
    root, seed_id, round_, stream = (jnp.asarray(x, _U32) for x in (root, seed_id, round_, stream))
    batch = jnp.broadcast_shapes(root.shape, seed_id.shape, round_.shape, stream.shape)
    blocks = -(-num // 4)
    if blocks > UNROLLED_BLOCKS:
        block = jnp.arange(blocks, dtype=_U32).reshape((blocks,) + (1,) * len(batch))
        words = philox4x32((block, round_, stream, _U32(0)), (root, seed_id))
        words = jnp.stack([jnp.broadcast_to(w, (blocks, *batch)) for w in words], axis=1)
        return words.reshape((4 * blocks, *batch))[:num]
    words = []
    for block in range(blocks):
        words += philox4x32((_U32(block), round_, stream, _U32(0)), (root, seed_id))
    return [jnp.broadcast_to(w, batch) for w in words[:num]]


def _check(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {PRECISIONS}, got {precision!r}")
    if precision == "float64" and not jax.config.jax_enable_x64:
        raise ValueError("precision: 'float64' draws need jax_enable_x64")


def _uniform32(w):
    return ((w >> 9).astype(jnp.float32) + 0.5) * jnp.float32(2.0**-23)


def _uniform64(a, b):
    return ((a >> 6).astype(jnp.float64) * 67108864.0 + (b >> 6).astype(jnp.float64)
            + 0.5) * 2.0**-52


def _word_rows(root, seed_id, round_, stream, num: int, precision: str) -> jax.Array:
    """The ``(words, *batch)`` ``uint32`` words of ``num`` uniforms in ``precision`` (one word
    each in float32, two in float64), as one array."""
    words = _words(root, seed_id, round_, stream, num if precision == "float32" else 2 * num)
    return words if isinstance(words, jax.Array) else jnp.stack(words)


def _uniforms_of(words: jax.Array, precision: str) -> jax.Array:
    """The uniforms of :func:`_word_rows`' words (exact arithmetic: any fusion, same bits)."""
    if precision == "float32":
        return _uniform32(words)
    return _uniform64(words[0::2], words[1::2])


def uniforms(root, seed_id, round_, num: int, stream=0, precision: str = "float32") -> jax.Array:
    """``(num, *batch)`` uniforms in the open interval (0, 1), in ``precision``.

    float32: uniform ``i`` is ``((w_i >> 9) + 0.5) 2^-23`` of word ``i``; float64: it is
    ``((a >> 6) 2^26 + (b >> 6) + 0.5) 2^-52`` of words ``a = w_2i``, ``b = w_2i+1``: the grid
    of a full mantissa shifted by half a step off 0 and 1, every value exact.
    """
    _check(precision)
    return _uniforms_of(_word_rows(root, seed_id, round_, stream, num, precision), precision)


def normals(root, seed_id, round_, num: int, stream=0, precision: str = "float32") -> jax.Array:
    """``(num, *batch)`` standard normals of (root, seed id, round, stream): normal ``i`` is
    ``sqrt(2) erfinv(2 u_i - 1)`` of uniform ``i`` of :func:`uniforms`.

    The transform runs inside a one-trip ``while_loop`` (its trip count hidden from the compiler)
    so that XLA computes it once, in this array's own layout, and keeps the result: otherwise it
    fuses ``erfinv`` into every consumer (in the round, twice per normal, in the seed-first
    layout of the statistics, where the CPU loop does not vectorise). Same numbers bit for bit;
    the Section 7.2 sweeps 1.2-1.9x faster (``python benchmarks/ab_round.py --change noise``).
    ``optimization_barrier`` does not do this on CPU: XLA drops it before fusing.

    The loop reads the Philox words (``uint32``) and turns them into uniforms itself: given the
    uniforms, XLA may write the normals over them in place, and LLVM's vectorised loop then
    falls back to its scalar copy (its runtime overlap check fails when input and output are
    the same buffer), which made ``erfinv`` 7x slower in LinUCB's round
    (``python benchmarks/ab_round.py --change noise_inplace``).
    """
    _check(precision)
    words = _word_rows(root, seed_id, round_, stream, num, precision)

    def transform(c):
        u = _uniforms_of(words, precision)
        return c[0] + 1, math.sqrt(2.0) * jax.lax.erf_inv(2.0 * u - 1.0)

    trips = jnp.max(jnp.asarray(round_, _U32) >> 31) + 1  # 1 (a round is < 2^31)
    return jax.lax.while_loop(lambda c: c[0] < trips, transform,
                              (jnp.zeros((), _U32), jnp.zeros((num, *words.shape[1:]),
                                                              jnp.dtype(precision))))[1]
