"""gsjax.philox: Philox bits against NumPy and Random123, normals against the normal law.

NumPy's ``numpy.random.Philox`` is Philox-4x64-10; gsjax's is Philox-4x32-10 (no 64-bit
integers in a float32 run). Both are one algorithm at two word widths, so a plain-Python
reference of that algorithm, generic in the width, is checked bit for bit against NumPy's
generator at width 64 (several keys and counters, NumPy's layout: key words = the two uint64 of
``key``, a block is computed at ``counter + 1``) and against Random123's published known answers
at width 32; gsjax's words are then checked against the reference at width 32.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsjax import philox

_CONST = {
    32: ((0xD2511F53, 0xCD9E8D57), (0x9E3779B9, 0xBB67AE85)),
    64: ((0xD2E7470EE14C6C93, 0xCA5A826395121157), (0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B)),
}

# Random123 kat_vectors, "philox4x32 10": counter (4 words), key (2), expected (4).
KAT_4X32 = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def reference(counter, key, width, rounds=10):
    """Philox-4xW-R on Python integers (Salmon et al. 2011)."""
    (m0, m1), (w0, w1) = _CONST[width]
    mask = (1 << width) - 1
    c, k = list(counter), list(key)
    for r in range(rounds):
        if r:
            k = [(k[0] + w0) & mask, (k[1] + w1) & mask]
        p0, p1 = m0 * c[0], m1 * c[2]
        c = [(p1 >> width) ^ c[1] ^ k[0], p1 & mask, (p0 >> width) ^ c[3] ^ k[1], p0 & mask]
    return tuple(c)


def _cases(width, n, seed):
    rng = np.random.default_rng(seed)
    top = 1 << width
    edge = [0, 1, top - 1, top - 2, 1 << (width - 1)]
    out = []
    for i in range(n):
        pick = lambda: int(edge[rng.integers(len(edge))]) if i % 3 == 0 else int(  # noqa: E731
            rng.integers(0, top, dtype=np.uint64 if width == 64 else np.int64))
        out.append((tuple(pick() for _ in range(4)), (pick(), pick())))
    return out


def test_reference_is_numpy_philox_at_width_64():
    for counter, key in _cases(64, 40, 0):
        bg = np.random.Philox(key=np.array(key, np.uint64), counter=np.array(counter, np.uint64))
        # NumPy increments the counter before each block: its first block is at counter + 1.
        nxt = (sum(c << (64 * j) for j, c in enumerate(counter)) + 1) % (1 << 256)
        nxt = tuple((nxt >> (64 * j)) & ((1 << 64) - 1) for j in range(4))
        got = tuple(int(x) for x in bg.random_raw(4))
        assert got == reference(nxt, key, 64), (counter, key)


def test_reference_known_answers_at_width_32():
    for counter, key, want in KAT_4X32:
        assert reference(counter, key, 32) == want


def _gsjax_words(cases):
    ctr = [np.array([c[j] for c, _ in cases], np.uint32) for j in range(4)]
    key = [np.array([k[j] for _, k in cases], np.uint32) for j in range(2)]
    words = jax.jit(philox.philox4x32)(ctr, key)
    return [tuple(int(w[i]) for w in words) for i in range(len(cases))]


@pytest.mark.parametrize("wide", [False, True], ids=["x32", "x64"])
def test_words_match_reference(wide):
    cases = _cases(32, 300, 1) + [(c, k) for c, k, _ in KAT_4X32]
    with jax.enable_x64(wide):
        got = _gsjax_words(cases)
    for (counter, key), words in zip(cases, got):
        assert words == reference(counter, key, 32), (counter, key)


def test_counter_layout_and_batch_independence():
    """Draw ``i`` of (root, seed, round, stream) is word ``i % 4`` of block ``i // 4`` at counter
    ``(i // 4, round, stream, 0)`` and key ``(root, seed)``, whatever the batch around it."""
    root, seeds, rnd, stream, num = 0xDEADBEEF, np.array([0, 5, 2**32 - 1], np.uint32), 77, 1, 10
    u = np.asarray(philox.uniforms(root, seeds, rnd, num, stream))  # (num, 3)
    draw = jax.jit(lambda s: philox.normals(root, s, rnd, num, stream))
    assert u.shape == (num, 3) and u.dtype == np.float32
    for s_i, seed in enumerate(seeds):
        for i in range(num):
            word = reference((i // 4, rnd, stream, 0), (root, int(seed)), 32)[i % 4]
            assert u[i, s_i] == ((word >> 9) + 0.5) * 2.0**-23  # exact in float32
        # Compiled, a seed's normals are the same alone or in a batch (eager op-by-op
        # evaluation, unfused, may differ in the last bit of the cos / sin).
        np.testing.assert_array_equal(np.asarray(draw(seed)), np.asarray(draw(seeds))[:, s_i])
    # Rounds and seed ids broadcast: a (T, 1) round grid against (S,) seeds gives (num, T, S).
    grid = jax.jit(lambda t: philox.normals(root, seeds, t[:, None], 3))(jnp.arange(3))
    one = jax.jit(lambda t: philox.normals(root, seeds, t, 3))(1)
    np.testing.assert_array_equal(np.asarray(grid)[:, 1], np.asarray(one))


def test_float64_uniforms_use_two_words(x64):
    u = np.asarray(philox.uniforms(7, 3, 9, 5, precision="float64"))
    assert u.dtype == np.float64 and u.shape == (5,)
    for i in range(5):
        a, b = reference((i // 2, 9, 0, 0), (7, 3), 32)[2 * (i % 2): 2 * (i % 2) + 2]
        assert u[i] == ((a >> 6) * 67108864.0 + (b >> 6) + 0.5) * 2.0**-52


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_extreme_words_give_finite_normals(precision, monkeypatch):
    """All-zero and all-one words (the ends of the uniform grid) stay inside (0, 1), so their
    normals are finite: with 24 bits in float32 the top word rounded u to 1.0 and erfinv to inf
    (seed 40, round 14232 of section7_2 hit it)."""
    words = [jnp.uint32(0), jnp.uint32(0xFFFFFFFF)]
    for w in words:
        monkeypatch.setattr(philox, "_words",
                            lambda *a, w=w: [jnp.asarray(w, jnp.uint32)] * a[-1])
        with jax.enable_x64(precision == "float64"):
            u = np.asarray(philox.uniforms(0, 0, 0, 2, precision=precision))
            z = np.asarray(philox.normals(0, 0, 0, 2, precision=precision))
        assert np.all((u > 0) & (u < 1)) and np.all(np.isfinite(z)), (w, u, z)
        assert np.all(np.abs(z) > 5.0)  # the grid's ends are the tails: |z| > 5 sigma


def test_bad_precision():
    with pytest.raises(ValueError, match="precision"):
        philox.normals(0, 0, 0, 2, precision="float16")


def _ks_normal(z):
    """Kolmogorov--Smirnov statistic of ``z`` against the standard normal CDF."""
    z = np.sort(np.asarray(z, np.float64))
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))
    n = z.size
    return max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n))


def _check_normal(z):
    z = np.asarray(z, np.float64).ravel()
    n = z.size
    # Moments: standard errors of the sample mean, variance, skewness and excess kurtosis of a
    # normal sample are 1, sqrt(2), sqrt(6), sqrt(24) over sqrt(n); 5 standard errors.
    se = 5.0 / math.sqrt(n)
    c = z - z.mean()
    var = np.mean(c**2)
    assert abs(z.mean()) < se
    assert abs(var - 1.0) < math.sqrt(2) * se
    assert abs(np.mean(c**3) / var**1.5) < math.sqrt(6) * se
    assert abs(np.mean(c**4) / var**2 - 3.0) < math.sqrt(24) * se
    # KS at level 1e-4: sqrt(-log(1e-4 / 2) / 2) / sqrt(n) ~ 2.30 / sqrt(n).
    assert _ks_normal(z) < 2.30 / math.sqrt(n)
    # The tails: P(|Z| > 3) = 0.0027, within 5 binomial standard errors.
    p = math.erfc(3.0 / math.sqrt(2.0))
    assert abs(np.mean(np.abs(z) > 3.0) - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_normals_float32_law():
    seeds = jnp.arange(2000, dtype=jnp.uint32)
    z = jax.jit(lambda t: philox.normals(12345, seeds, t[:, None], 10))(jnp.arange(1, 21))
    assert z.shape == (10, 20, 2000) and z.dtype == jnp.float32
    _check_normal(z)
    # Neighbouring draws, rounds and seeds are uncorrelated (|r| < 5 / sqrt(n) each).
    z = np.asarray(z, np.float64)
    for a, b in [(z[0], z[1]), (z[1], z[2]), (z[:, :-1], z[:, 1:]), (z[..., :-1], z[..., 1:])]:
        r = np.corrcoef(a.ravel(), b.ravel())[0, 1]
        assert abs(r) < 5 / math.sqrt(a.size)


def test_normals_float64_law(x64):
    z = jax.jit(lambda s: philox.normals(99, s, 3, 7, precision="float64"))(
        jnp.arange(40000, dtype=jnp.uint32))
    assert z.dtype == jnp.float64
    _check_normal(z)


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_many_blocks_on_an_axis_equal_block_by_block(x64, precision, monkeypatch):
    """Past ``UNROLLED_BLOCKS`` the blocks are one array axis: the same numbers, bit for bit, as
    written block by block, for a batch of seeds and a scalar round."""
    seeds = jnp.arange(5, dtype=jnp.uint32)
    args = (jnp.uint32(3), seeds, jnp.uint32(17), 41)
    axis = philox.normals(*args, precision=precision)
    monkeypatch.setattr(philox, "UNROLLED_BLOCKS", 10**6)
    unrolled = philox.normals(*args, precision=precision)
    assert axis.shape == (41, 5)
    np.testing.assert_array_equal(np.asarray(axis), np.asarray(unrolled))


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_many_blocks_match_the_reference(x64, precision):
    """A draw of many blocks (41 uniforms: 11 blocks in float32, 21 in float64: the block-axis
    path), compiled, for a batch of seeds and a column of rounds: every uniform is the
    reference's word(s) at its counter, bit for bit."""
    root, seeds, rounds, num = 3, np.array([0, 9, 2**32 - 1], np.uint32), np.array([17, 2**20]), 41
    u = np.asarray(jax.jit(lambda t: philox.uniforms(root, seeds, t[:, None], num,
                                                     precision=precision))(rounds))
    assert u.shape == (num, 2, 3)
    for t_i, rnd in enumerate(rounds):
        for s_i, seed in enumerate(seeds):
            for i in range(num):
                if precision == "float32":
                    word = reference((i // 4, int(rnd), 0, 0), (root, int(seed)), 32)[i % 4]
                    want = ((word >> 9) + 0.5) * 2.0**-23
                else:
                    a, b = reference((i // 2, int(rnd), 0, 0), (root, int(seed)), 32)[
                        2 * (i % 2): 2 * (i % 2) + 2]
                    want = ((a >> 6) * 67108864.0 + (b >> 6) + 0.5) * 2.0**-52
                assert u[i, t_i, s_i] == want, (i, rnd, seed)
