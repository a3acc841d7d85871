r"""Ridge statistics for one criterion: Gram matrix, inverse and log-determinant.

For a criterion with features :math:`\phi_t \in \mathbb{R}^d` and feedback :math:`y_t`,

.. math::
    V_t = \lambda I + \sum_{\tau \le t} \phi_\tau \phi_\tau^\top, \qquad
    b_t = \sum_{\tau \le t} \phi_\tau y_\tau, \qquad \hat\theta_t = V_t^{-1} b_t .

``V^{-1}`` is advanced by Sherman--Morrison and ``log det V`` by the matrix determinant lemma
(Section 4). In float32 both drift (with ``lambda_reg = 0.01`` the log-det can move by more than
``log 2`` within 10^3 updates, which changes *when the lazy trigger fires*, DESIGN section 2), so
the data Gram matrix ``S = sum phi phi^T`` is the source of truth, WITHOUT ``lambda`` folded in
(for features in {0, 1} its entries are exact integers), and :func:`refresh` recomputes
``V^{-1}`` and ``log det V`` from ``S`` and ``lambda``; :func:`update` refreshes when asked to
(the algorithms: every ``refresh_every`` rounds). Statistics refreshed every round need not carry
``V^{-1}`` (``init(..., carry_inverse=False)``; :func:`inverse` recomputes it where read).

Float32 limit (tests/test_linalg.py): the refreshed log-det is accurate to about
``eps32 * cond(V)``, and ``cond(V) ~ N / lambda`` after ``N`` identical updates; use
``dtype = "float64"`` for float64's trigger counts at tiny ``lambda`` over long horizons.

Every function here handles ONE criterion; callers ``vmap`` over the criterion axis.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["REFRESH_METHODS", "RidgeStats", "init", "add_gram", "gram", "sherman_morrison",
           "logdet_increment", "advance", "symmetrize", "refresh", "update", "theta_hat",
           "inverse", "RANK_K_METHODS", "woodbury", "sherman_morrison_steps", "update_rank_k"]


class RidgeStats(NamedTuple):
    """Ridge-regression statistics of one criterion (padded to ``d``)."""

    data_gram: jax.Array  # (d, d) S = sum phi phi^T (no lambda), the source of truth
    lam: jax.Array  # () lambda_reg: V = lambda I + S
    inv: jax.Array | None  # (d, d) V^{-1} between refreshes; None: not carried (see `inverse`)
    b: jax.Array  # (d,) sum phi y
    logdet: jax.Array  # () log det V, determinant lemma between refreshes
    gram_err: jax.Array | None = None  # (d, d) Kahan compensation of data_gram (`add_gram`)


def init(lambda_reg: jax.Array, d: int, dtype=jnp.float32, carry_inverse: bool = True,
         compensated: bool = False) -> RidgeStats:
    """Prior statistics ``V = lambda I`` (``lambda_reg > 0``), ``b = 0``, of dimension ``d``.

    ``carry_inverse=False``: ``inv`` is ``None`` and every :func:`update` must refresh;
    ``compensated``: sum the data Gram matrix with Kahan compensation (:func:`add_gram`).
    """
    lam = jnp.asarray(lambda_reg, dtype)
    eye = jnp.eye(d, dtype=dtype)
    return RidgeStats(data_gram=jnp.zeros((d, d), dtype), lam=lam,
                      inv=eye / lam if carry_inverse else None, b=jnp.zeros((d,), dtype),
                      logdet=d * jnp.log(lam),
                      gram_err=jnp.zeros((d, d), dtype) if compensated else None)


def add_gram(stats: RidgeStats, outer: jax.Array) -> tuple[jax.Array, jax.Array | None]:
    """``(data_gram + outer, gram_err)``: the plain float sum, or, when the statistics carry
    ``gram_err``, Kahan's compensated sum (error O(eps |S|) instead of O(T eps |S|)).

    With fractional states (PGD) a float32 plain sum over 10^4 rounds can break
    Cauchy--Schwarz by more than a small ``lambda``: ``V`` indefinite, ``log det V`` NaN. At
    vertex states the sums are of small integers and the compensation stays zero."""
    if stats.gram_err is None:
        return stats.data_gram + outer, None
    y = outer - stats.gram_err
    total = stats.data_gram + y
    return total, (total - stats.data_gram) - y


def gram(stats: RidgeStats) -> jax.Array:
    """(d, d) the regularised Gram matrix ``V = lambda I + S``."""
    d = stats.data_gram.shape[-1]
    return stats.data_gram + stats.lam * jnp.eye(d, dtype=stats.data_gram.dtype)


def symmetrize(a: jax.Array) -> jax.Array:
    """``(A + A^T) / 2``: removes the asymmetric rounding of rank-one updates."""
    return 0.5 * (a + a.T)


def apply(inv: jax.Array, x: jax.Array) -> jax.Array:
    """``V^{-1} x`` over any leading axes, as element-wise products and a sum, which XLA CPU
    fuses (a small matrix product is a kernel of its own; ``benchmarks/ab_round.py``)."""
    return jnp.sum(inv * x[..., None, :], axis=-1)


def sherman_morrison(inv: jax.Array, x: jax.Array) -> jax.Array:
    """``(V + x x^T)^{-1}`` from ``V^{-1}`` (d, d), symmetric ``V``, and ``x`` (d,), symmetrised."""
    u = apply(inv, x)
    return symmetrize(inv - jnp.outer(u, u) / (1.0 + jnp.sum(x * u)))


def logdet_increment(inv: jax.Array, x: jax.Array) -> jax.Array:
    """``log det(V + x x^T) - log det V = log1p(x^T V^{-1} x)`` (matrix determinant lemma)."""
    return jnp.log1p(jnp.sum(x * apply(inv, x)))


REFRESH_METHODS = ("cholesky", "unrolled")


def refresh(data_gram: jax.Array, lam, method: str = "cholesky") -> tuple[jax.Array, jax.Array]:
    """Exact ``(V^{-1}, log det V)`` of ``V = lambda I + S`` recomputed from ``S``.

    Closed form for ``d = 1, 2``; for ``d = 2`` the determinant is
    ``(ac - b^2) + lambda (a + c) + lambda^2``, so the data part (exact for integer ``S``) is not
    swamped by rounding ``lambda`` into ``a`` and ``c`` first. For ``d >= 3``, ``method``:
    ``"cholesky"`` (LAPACK's, one call per matrix) or ``"unrolled"``, the same factorisation
    written out element by element, which XLA vectorises (2-4x faster for ``d = 3..5``,
    ``benchmarks/refresh.py``; equal up to rounding).
    """
    d = data_gram.shape[-1]
    if method not in REFRESH_METHODS:
        raise ValueError(f"refresh: method must be one of {REFRESH_METHODS}; got {method!r}")
    if d == 1:
        v = data_gram[0, 0] + lam
        return jnp.reshape(1.0 / v, (1, 1)), jnp.log(v)
    if d == 2:
        a, b, c = data_gram[0, 0], data_gram[0, 1], data_gram[1, 1]
        det = (a * c - b * b) + lam * (a + c) + lam * lam
        return _inverse2(a, b, c, lam, det), jnp.log(det)
    gram_ = data_gram + lam * jnp.eye(d, dtype=data_gram.dtype)
    if method == "unrolled":
        return _unrolled(gram_)
    chol = jnp.linalg.cholesky(gram_)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol)))
    inv = jax.scipy.linalg.cho_solve((chol, True), jnp.eye(d, dtype=data_gram.dtype))
    return symmetrize(inv), logdet


def _inverse2(a, b, c, lam, det):
    """``[[c + lam, -b], [-b, a + lam]] / det`` by selects, which XLA fuses into the readers."""
    i, j = np.indices((2, 2))
    return jnp.where(i != j, -b, jnp.where(i == 0, c + lam, a + lam)) / det


def _unrolled(v: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(V^{-1}, log det V)`` of a small SPD ``V``: ``V = L L^T``, ``M = L^{-1}`` by forward
    substitution, ``V^{-1} = M^T M``, every entry a scalar expression (``d`` up to about 8).
    A non-positive pivot gives NaN, as LAPACK's does."""
    d = v.shape[-1]
    low = [[None] * d for _ in range(d)]
    for j in range(d):
        acc = v[j, j]
        for p in range(j):
            acc = acc - low[j][p] * low[j][p]
        low[j][j] = jnp.sqrt(acc)
        recip = 1.0 / low[j][j]
        for i in range(j + 1, d):
            acc = v[i, j]
            for p in range(j):
                acc = acc - low[i][p] * low[j][p]
            low[i][j] = acc * recip
    m = [[None] * d for _ in range(d)]
    for i in range(d):
        m[i][i] = 1.0 / low[i][i]
        for j in range(i):
            acc = low[i][j] * m[j][j]
            for p in range(j + 1, i):
                acc = acc + low[i][p] * m[p][j]
            m[i][j] = -acc * m[i][i]
    inv = [[None] * d for _ in range(d)]
    for i in range(d):
        for j in range(i + 1):
            acc = m[i][i] * m[i][j]
            for p in range(i + 1, d):
                acc = acc + m[p][i] * m[p][j]
            inv[i][j] = inv[j][i] = acc
    logdet = sum((jnp.log(low[j][j]) for j in range(1, d)), jnp.log(low[0][0]))
    return jnp.stack([jnp.stack(row) for row in inv]), 2.0 * logdet


def update(stats: RidgeStats, x: jax.Array, y: jax.Array, do_refresh,
           method: str = "cholesky") -> RidgeStats:
    """Add one observation: ``x`` (d,) features (zeros on padded entries), ``y`` () feedback.

    ``do_refresh`` (a Python bool or a traced scalar bool): recompute ``V^{-1}`` and
    ``log det V`` from the data Gram matrix (:func:`refresh` by ``method``) instead of
    advancing them incrementally.
    """
    def incremental(_):
        return sherman_morrison(stats.inv, x), stats.logdet + logdet_increment(stats.inv, x)

    (data_gram, err), b = add_gram(stats, jnp.outer(x, x)), stats.b + x * y
    if stats.inv is None:
        if do_refresh is not True:
            raise ValueError("statistics without a carried inverse must refresh every update")
        return stats._replace(data_gram=data_gram, b=b, gram_err=err,
                              logdet=refresh(data_gram, stats.lam, method)[1])
    return advance(stats, data_gram, b, incremental, do_refresh,
                   lambda gram_, lam: refresh(gram_, lam, method), err)


def advance(stats: RidgeStats, data_gram, b, incremental, do_refresh, exact=refresh,
            gram_err=None) -> RidgeStats:
    """New statistics with ``(inv, logdet)`` from ``incremental(None)``, or recomputed by
    ``exact(data_gram, lam)`` when ``do_refresh`` (static bool or traced scalar)."""
    recompute = lambda _: exact(data_gram, stats.lam)  # noqa: E731
    if isinstance(do_refresh, bool):
        inv, logdet = recompute(None) if do_refresh else incremental(None)
    else:
        inv, logdet = jax.lax.cond(do_refresh, recompute, incremental, None)
    return RidgeStats(data_gram=data_gram, lam=stats.lam, inv=inv, b=b, logdet=logdet,
                      gram_err=gram_err)


def inverse(stats: RidgeStats, method: str = "cholesky") -> jax.Array:
    """(d, d) ``V^{-1}``: the carried one, or recomputed from ``S`` (:func:`refresh`)."""
    return refresh(stats.data_gram, stats.lam, method)[0] if stats.inv is None else stats.inv


def theta_hat(stats: RidgeStats) -> jax.Array:
    """Ridge estimate ``V^{-1} b`` of shape (d,)."""
    return apply(inverse(stats), stats.b)


# ---- rank-k updates (vector feedback, Section 5.3: Joint-LazyGraphLinUCB) ----

RANK_K_METHODS = ("woodbury", "sherman_morrison")


def woodbury(inv: jax.Array, xs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``((V + X^T X)^{-1}, log det(V + X^T X) - log det V)`` from ``V^{-1}`` (d, d) and the
    ``k`` rows ``xs`` (k, d) added, in one step: Woodbury's identity, and the log-det of the
    ``k x k`` capacitance matrix ``I_k + X V^{-1} X^T`` from its Cholesky factor."""
    u = xs @ inv  # (k, d) = X V^{-1}
    cap = jnp.eye(xs.shape[0], dtype=inv.dtype) + u @ xs.T  # (k, k)
    chol = jnp.linalg.cholesky(symmetrize(cap))
    w = jax.scipy.linalg.cho_solve((chol, True), u)  # (k, d) = C^{-1} X V^{-1}
    return symmetrize(inv - u.T @ w), 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol)))


def sherman_morrison_steps(inv: jax.Array, xs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """:func:`woodbury` by ``k`` successive rank-one steps (a ``lax.scan``)."""

    def step(carry, x):
        iv, inc = carry
        return (sherman_morrison(iv, x), inc + logdet_increment(iv, x)), None

    (inv, inc), _ = jax.lax.scan(step, (inv, jnp.zeros((), inv.dtype)), xs)
    return inv, inc


def update_rank_k(stats: RidgeStats, xs: jax.Array, ys: jax.Array, do_refresh,
                  method: str = "woodbury") -> RidgeStats:
    """Add ``k`` observations at once (one round of vector feedback): rows ``xs`` (k, d),
    zeros on padded entries, and feedback ``ys`` (k,).

    ``S += X^T X``, ``b += X^T y``; ``V^{-1}`` and ``log det V`` are refreshed when
    ``do_refresh`` (as :func:`update`) or advanced by ``method`` (static, one of
    :data:`RANK_K_METHODS`): ``"woodbury"`` (one ``k x k`` solve) or ``"sherman_morrison"``
    (``k`` rank-one steps).
    """
    if method not in RANK_K_METHODS:
        raise ValueError(f"unknown rank-k method {method!r}; allowed: {RANK_K_METHODS}")
    step = woodbury if method == "woodbury" else sherman_morrison_steps

    def incremental(_):
        inv, inc = step(stats.inv, xs)
        return inv, stats.logdet + inc

    data_gram, err = add_gram(stats, xs.T @ xs)
    return advance(stats, data_gram, stats.b + xs.T @ ys, incremental, do_refresh,
                   gram_err=err)
