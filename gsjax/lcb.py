r"""The lower confidence bound and its minimisation over the box (eq. 7).

.. math::
    \mathrm{LCB}_t(s) = \sum_i \langle \phi_i(s), \hat\theta_{t,i}\rangle
        - \beta_{t,i} \|\phi_i(s)\|_{V_{t,i}^{-1}}

Two solvers over a mask of *free* coordinates (the others stay at the starting state):

* :func:`minimise_pgd` -- projected gradient descent (an optax optimiser,
  ``optax.projections.projection_box``), a fixed number of steps (a ``lax.scan``), several
  starts: start 0 the current state, the others uniform on the box; the best is kept.
* :func:`minimise_vertex` -- exact for linear features, where the LCB is concave in ``s`` and
  its minimum is at a vertex: block by block for disjoint scopes (``2^m`` vertices each), else
  the ``2^n`` vertices of the box (small ``n`` only).

Tie rule (exact ties happen while ``theta_hat = 0`` and in symmetric states): among values
within ``64 eps max(1, |min|)`` of the minimum (ties that rounding splits by an ulp), the
lowest index wins (:func:`first_min`): for PGD start 0, the current state; for vertices the
lowest ``p``, vertex ``p`` setting the ``j``-th free coordinate (in scope order) to bit ``j`` of
``p``, so ties prefer 0 on the earlier coordinates.

The norm uses ``sqrt(max(q, 1e-12))`` so that its gradient stays finite where ``phi = 0``.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gsjax.problem import Problem, Structure, all_features

__all__ = ["lcb_terms", "lcb_value", "minimise_pgd", "minimise_objective_pgd", "minimise_vertex",
           "minimise_vertices", "scope_slots", "by_slot", "Objective", "Blocks", "node_objective",
           "Pick", "first_pick", "softmin_pick", "MAX_VERTEX_COORDS", "first_min", "bit_table"]

MAX_VERTEX_COORDS = 16  # whole-box enumeration limit for overlapping scopes
_TINY = 1e-12


def first_min(values: jax.Array, axis: int = 0) -> jax.Array:
    """Index of the first entry within ``64 eps max(1, |min|)`` of the minimum of the values
    along ``axis`` (of (P,) values by default)."""
    m = jnp.min(values, axis=axis)
    tol = 64 * jnp.finfo(values.dtype).eps * jnp.maximum(1.0, jnp.abs(m))
    # the least index that passes: a plain min, faster on XLA CPU than argmax's two-output
    # reduce (benchmarks/ab_round.py); none passes only for NaN values, where argmax gives 0.
    # The index by iota, not an array constant (a batching rule may not see those)
    p = values.shape[axis]
    index = jax.lax.broadcasted_iota(jnp.int32, values.shape, axis % values.ndim)
    first = jnp.min(jnp.where(values <= jnp.expand_dims(m + tol, axis), index, p), axis=axis)
    return jnp.where(first == p, 0, first)


Pick = Callable[[jax.Array, jax.Array], tuple]  # (values (P,), candidates (P, w)) -> (w,), ()


_SELECT_MAX = 16  # at most this many candidates: chosen by selects, not a gather
_SELECT_COLS = 4  # at most this many vertex columns: filled by selects, not a gather


def first_pick(values: jax.Array, candidates: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The hard choice: the :func:`first_min` candidate and its value."""
    p = first_min(values)
    return _row(candidates, p), _row(values, p)


def _row(x: jax.Array, p) -> jax.Array:
    """``x[p]``; among few rows by selects, which fuse (a gather is a CPU kernel of its own)."""
    return x[p] if x.shape[0] > _SELECT_MAX else jax.lax.select_n(p, *x)


def softmin_pick(temperature, tie_break) -> Pick:
    """The soft choice: candidates averaged with weights ``softmax(-(v_p + kappa sqrt(tau) p)
    / tau)``. As ``tau -> 0`` it is :func:`first_pick`, ties included: the index penalty
    vanishes but dominates ``tau`` (one proportional to ``tau`` would split a tie
    ``1 : e^{-kappa}`` at every temperature)."""

    def pick(values, candidates):
        idx = jnp.arange(values.shape[-1], dtype=values.dtype)
        w = jax.nn.softmax(-(values + tie_break * jnp.sqrt(temperature) * idx) / temperature)
        return w @ candidates, w @ values

    return pick


def _bonus(phi: jax.Array, inv: jax.Array) -> jax.Array:
    # phi^T V^-1 phi element-wise, bit for bit the einsum's on CPU, which under grad and vmap
    # became batched dots ~40x slower for scopes of 4 or more (benchmarks/pgd_bonus.py)
    q = jnp.sum(jnp.sum(phi[..., :, None] * inv, axis=-2) * phi, axis=-1)
    return jnp.sqrt(jnp.maximum(q, _TINY))


def lcb_terms(phi: jax.Array, theta_hat: jax.Array, inv: jax.Array, beta: jax.Array) -> jax.Array:
    """Per-criterion LCB ``<phi, theta_hat> - beta ||phi||_{V^{-1}}``; leading axes broadcast."""
    return jnp.sum(phi * theta_hat, axis=-1) - beta * _bonus(phi, inv)


def lcb_value(structure: Structure, problem: Problem, s: jax.Array, theta_hat: jax.Array,
              inv: jax.Array, beta: jax.Array) -> jax.Array:
    """() ``LCB(s)`` for the state ``s`` (n,), estimates (k, d), inverses (k, d, d), beta (k,)."""
    phi = all_features(structure, problem, s)
    return jnp.sum(lcb_terms(phi, theta_hat, inv, beta))


def minimise_pgd(key: jax.Array, structure: Structure, problem: Problem, theta_hat: jax.Array,
                 inv: jax.Array, beta: jax.Array, s_init: jax.Array, free: jax.Array, *,
                 num_steps: int, num_starts: int, learning_rate, optimizer: str = "adam",
                 include_current: bool = True) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Projected gradient descent on the LCB over the ``free`` (n,) coordinates.

    ``key`` draws the random starts; ``s_init`` (n,) is start 0 (unless ``include_current`` is
    False: then every start is uniform on the box) and the value of every non-free coordinate;
    ``num_steps`` and ``num_starts`` are static; ``learning_rate`` may be traced; ``optimizer``:
    "adam" or "sgd". Returns ``(s, value, residual)``: the best final point (n,), its LCB, and
    the norm of its projected gradient step on the free coordinates (0 at a stationary point).
    """
    value = lambda s: lcb_value(structure, problem, s, theta_hat, inv, beta)
    return minimise_objective_pgd(key, value, s_init, free, num_steps=num_steps,
                                  num_starts=num_starts, learning_rate=learning_rate,
                                  optimizer=optimizer, include_current=include_current)


def minimise_objective_pgd(key, value, s_init, free, *, num_steps: int, num_starts: int,
                           learning_rate, optimizer: str = "adam", include_current: bool = True,
                           pick: Pick = first_pick):
    """:func:`minimise_pgd` for any differentiable objective ``value(s) -> ()`` on ``[0,1]^n``.
    Same starts, steps and ``(s, value, residual)``; ``pick`` chooses among the starts' final
    points (default: the lowest value, ties to the lowest start)."""
    grad = jax.grad(value)
    n = s_init.shape[-1]
    count = num_starts - 1 if include_current else num_starts
    starts = jax.random.uniform(key, (count, n), jnp.float32).astype(s_init.dtype)
    if include_current:
        starts = jnp.concatenate([s_init[None], starts], axis=0)
    starts = jnp.where(free, starts, s_init)
    if optimizer not in ("adam", "sgd"):
        raise ValueError(f"unknown optimizer {optimizer!r}; allowed: ('adam', 'sgd')")
    opt = getattr(optax, optimizer)(learning_rate)

    def descend(s0):
        def body(carry, _):
            s, st = carry
            g = jnp.where(free, grad(s), 0.0)
            u, st = opt.update(g, st, s)
            s_new = optax.projections.projection_box(optax.apply_updates(s, u), 0.0, 1.0)
            return (jnp.where(free, s_new, s_init), st), None

        (s, _), _ = jax.lax.scan(body, (s0, opt.init(s0)), None, length=num_steps)
        return s

    finals = jax.vmap(descend)(starts)
    s, best_value = pick(jax.vmap(value)(finals), finals)
    g = jnp.where(free, grad(s), 0.0)
    residual = jnp.linalg.norm(s - jnp.clip(s - g, 0.0, 1.0))
    return s, best_value, residual


def bit_table(width: int) -> np.ndarray:
    """(2^width, width) int table; row p holds the bits of p, bit j in column j."""
    return (np.arange(2 ** width)[:, None] >> np.arange(width)[None, :]) & 1


def _rank(free: jax.Array, width: int) -> jax.Array:
    """The rank of each free entry among the free (clipped to ``width``); few entries: sums under
    a static triangle, which fuse (a ``cumsum`` is a CPU kernel of its own)."""
    f = free.astype(jnp.int32)
    w = f.shape[-1]
    if w <= _SELECT_COLS:
        count = jnp.sum(jnp.where(np.tri(w, dtype=bool), f[..., None, :], 0), axis=-1)
    else:
        count = jnp.cumsum(f, axis=-1)
    return jnp.clip(count - 1, 0, width - 1)


def _vertices_from_free(bits: jax.Array, base: jax.Array, free: jax.Array) -> jax.Array:
    """Fill the free entries of ``base`` (w,) with bits (P, w) in order of their rank."""
    rank = _rank(free, bits.shape[1])
    if bits.shape[1] > _SELECT_COLS:
        return jnp.where(free, bits[:, rank], base)
    # a block's few columns: selects (exact, fused) instead of a gather
    cols = [jnp.broadcast_to(bits[:, c:c + 1], bits.shape) for c in range(bits.shape[1])]
    return jnp.where(free, jax.lax.select_n(jnp.broadcast_to(rank, bits.shape), *cols), base)


def _choose(pick: Pick, values: jax.Array, verts: jax.Array, base: jax.Array, free: jax.Array):
    """``pick(values, verts)`` for the vertices of ``(base, free)``; the hard pick builds
    ``verts[p]`` from the bits of ``p`` element-wise, not by a select among the rows (faster)."""
    if pick is not first_pick:
        return pick(values, verts)
    p = first_min(values)
    bit = (p >> _rank(free, verts.shape[-1])) & 1
    return jnp.where(free, bit.astype(base.dtype), base), _row(values, p)


class Blocks(NamedTuple):
    """An LCB that separates over disjoint scopes: the per-block terms (linear features)."""

    scopes: jax.Array  # (k, m) int coordinates of each block
    scope_mask: jax.Array  # (k, m) bool real entries
    theta_hat: jax.Array  # (k, m)
    inv: jax.Array  # (k, m, m)
    beta: jax.Array  # (k,)


class Objective(NamedTuple):
    """What a solver minimises over the box: ``value(s) -> ()``; ``blocks``, when the LCB
    separates over disjoint blocks of linear features (enumerated block by block); ``terms``,
    the per-criterion linear terms on any scopes, for the DP solver (:mod:`gsjax.dp`)."""

    value: Callable
    blocks: Blocks | None = None
    terms: Blocks | None = None
    contiguous: bool = False  # the blocks are arange(n).reshape(k, m) (Structure.contiguous)


def node_objective(structure: Structure, problem: Problem, theta_hat, inv, beta) -> Objective:
    """The per-criterion LCB (eq. 7) of estimates (k, d), inverses (k, d, d) and beta (k,)."""
    value = lambda s: lcb_value(structure, problem, s, theta_hat, inv, beta)
    if structure.features != "linear":
        return Objective(value)
    terms = Blocks(problem.scopes, problem.scope_mask, theta_hat, inv, beta)
    return Objective(value, terms if structure.disjoint else None,
                     terms if structure.env.coordinate_model else None, structure.contiguous)


def scope_slots(scopes: jax.Array, scope_mask: jax.Array, n: int) -> jax.Array:
    """(n,) int32: for DISJOINT scopes (k, m), the flat index ``i * m + p`` of the real scope
    entry holding coordinate ``j``, or ``k * m`` for a coordinate in no scope (:func:`by_slot`)."""
    km = scopes.size
    tgt = jnp.where(scope_mask.reshape(-1), scopes.reshape(-1), n)  # padding -> dummy slot n
    return jnp.full((n + 1,), km, jnp.int32).at[tgt].set(jnp.arange(km, dtype=jnp.int32))[:n]


def by_slot(flat: jax.Array, slots: jax.Array) -> jax.Array:
    """(n,) per-coordinate values of ``flat`` (k m,), one per scope entry, read at
    :func:`scope_slots`; a coordinate in no scope reads zero (False)."""
    return jnp.concatenate([flat, jnp.zeros((1,), flat.dtype)])[slots]


#: Seeds a seed-last solve handles at once (:func:`_seeds_last`); more go in blocks of this many
#: (at 16384 seeds in one block, reads of the seed-first state left the cache: LinUCB 0.66x).
SEED_BLOCK = 1024


def _seeds_last(batched):
    """A function of one seed's arrays computed by ``batched``, which takes them with a batch
    axis LAST: called alone, with a batch of one; under ``vmap``, with the seeds moved to that
    axis (unbatched arguments broadcast) and back to the front of the outputs. Element-wise work
    over the seeds, the minor axis, vectorises where a block's few entries do not. Derivatives
    are those of the plain function (a batching rule alone has none)."""

    def plain(*args):
        out = batched(*(a[..., None] for a in args))
        return jax.tree_util.tree_map(lambda x: x[..., 0], out)

    fn = jax.custom_batching.custom_vmap(plain)

    @fn.def_vmap
    def _(size, in_batched, *args):
        args = [jnp.moveaxis(a, 0, -1) if b else jnp.broadcast_to(a[..., None], (*a.shape, size))
                for a, b in zip(args, in_batched)]
        if size <= SEED_BLOCK:
            out = batched(*args)
        else:  # blocks of seeds, so that what a block reads stays in cache
            num = -(-size // SEED_BLOCK)

            def split(a):  # (..., S) -> (num, ..., SEED_BLOCK), the last block padded
                a = jnp.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, num * SEED_BLOCK - size)])
                return jnp.moveaxis(a.reshape(*a.shape[:-1], num, SEED_BLOCK), -2, 0)

            def join(x):  # (num, ..., SEED_BLOCK) -> (..., S)
                return jnp.moveaxis(x, 0, -2).reshape(*x.shape[1:-1], -1)[..., :size]

            out = jax.tree_util.tree_map(join, jax.vmap(batched)(*map(split, args)))
        return jax.tree_util.tree_map(lambda x: jnp.moveaxis(x, -1, 0), out), \
            jax.tree_util.tree_map(lambda _: True, out)

    differentiable = jax.custom_jvp(fn)
    differentiable.defjvp(lambda primals, tangents: jax.jvp(plain, primals, tangents))
    return differentiable


def _first_vertices(s, free, smask, theta_hat, inv, beta):
    """The block vertex solver with :func:`first_pick` for ``B`` seeds, seed axis LAST: ``s``,
    ``free``, ``smask``, ``theta_hat`` (k, m, B), ``inv`` (k, m, m, B), ``beta`` (k, B).
    Returns the chosen ``(k, m, B)`` and their values (k, B): the operations of the one-seed
    path (:func:`_vertices_from_free`, :func:`lcb_terms`, :func:`_choose`) in the same order,
    so the same bits, and :func:`first_min` itself. Index tables from ``iota`` (a batching rule
    may not see array constants: under ``vmap`` of a ``cond`` they arrive batched)."""
    f = free & smask
    k, m, n_b = f.shape
    p_all = 2 ** m
    iota = lambda shape, dim: jax.lax.broadcasted_iota(jnp.int32, shape, dim)  # noqa: E731
    tri = iota((1, m, m, 1), 2) <= iota((1, m, m, 1), 1)  # np.tri: row j holds i <= j
    count = jnp.sum(jnp.where(tri, f.astype(jnp.int32)[:, None], 0), axis=2)
    rank = jnp.clip(count - 1, 0, m - 1)  # of each free entry among the free (:func:`_rank`)
    shape = (k, p_all, m, n_b)
    vertex = iota(shape, 1)  # column c of vertex p: bit c of p (:func:`bit_table`)
    cols = [((vertex >> c) & 1).astype(s.dtype) for c in range(m)]
    verts = jnp.where(f[:, None], jax.lax.select_n(jnp.broadcast_to(rank[:, None], shape), *cols),
                      s[:, None])
    phi = jnp.where(smask[:, None], verts, 0.0)
    q = jnp.sum(jnp.sum(phi[:, :, :, None] * inv[:, None], axis=2) * phi, axis=2)
    values = jnp.sum(phi * theta_hat[:, None], axis=2) - beta[:, None] * jnp.sqrt(
        jnp.maximum(q, _TINY))  # (k, P, B)
    p = first_min(values, axis=1)  # (k, B)
    bit = (p[:, None] >> rank) & 1
    value = jax.lax.select_n(p, *(values[:, i] for i in range(p_all)))
    return jnp.where(f, bit.astype(s.dtype), s), value


_FIRST_VERTICES = _seeds_last(_first_vertices)


def minimise_vertices(objective: Objective, s_init, free, pick: Pick = first_pick):
    """Exact minimiser of a concave objective over the vertices of the free coordinates
    (block by block when it separates; else the ``2^n`` vertices of the box, ``n <= 16``).
    Vertex ``p`` sets free coordinate ``j`` (in scope order) to bit ``j`` of ``p``; ``pick``
    chooses (default: the lowest value, ties to the lowest ``p``). Returns
    ``(s, value, residual)`` with residual 0."""
    dtype = s_init.dtype
    zero = jnp.zeros((), dtype)
    bl = objective.blocks
    if bl is not None:
        bits = jnp.asarray(bit_table(bl.scopes.shape[1]), dtype)  # (P, m)

        def per_block(sl, fl, smask, th, iv, bt):
            verts = _vertices_from_free(bits, sl, fl & smask)  # (P, m)
            values = lcb_terms(jnp.where(smask, verts, 0.0), th, iv, bt)
            return _choose(pick, values, verts, sl, fl & smask)

        # contiguous blocks arange(n).reshape(k, m): reshapes, no gather
        at = ((lambda x: x.reshape(bl.scopes.shape)) if objective.contiguous
              else (lambda x: x[bl.scopes]))
        hard = pick is first_pick and bl.scopes.shape[1] <= _SELECT_COLS  # seeds last
        best, vals = (_FIRST_VERTICES if hard else jax.vmap(per_block))(
            at(s_init), at(free), bl.scope_mask, bl.theta_hat, bl.inv, bl.beta)
        if objective.contiguous:
            s = jnp.where(free, best.reshape(-1), s_init)
        else:
            # each coordinate reads its block's choice: a gather, not a scatter (slow on CPU)
            slot = scope_slots(bl.scopes, bl.scope_mask, s_init.shape[-1])
            s = jnp.where((slot < bl.scopes.size) & free, by_slot(best.reshape(-1), slot),
                          s_init)
        return s, jnp.sum(vals), zero
    n = s_init.shape[-1]
    if n > MAX_VERTEX_COORDS:
        raise ValueError(f"vertex enumeration over overlapping scopes needs n <= "
                         f"{MAX_VERTEX_COORDS}; got n = {n}: use the PGD solver")
    verts = _vertices_from_free(jnp.asarray(bit_table(n), dtype), s_init, free)  # (2^n, n)
    s, value = _choose(pick, jax.vmap(objective.value)(verts), verts, s_init, free)
    return s, value, zero


def minimise_vertex(structure: Structure, problem: Problem, theta_hat: jax.Array, inv: jax.Array,
                    beta: jax.Array, s_init: jax.Array, free: jax.Array,
                    pick: Pick = first_pick) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Exact minimiser of the LCB for linear features (:func:`minimise_vertices`)."""
    if structure.features != "linear":
        raise ValueError("vertex enumeration is exact only for linear features; use PGD")
    return minimise_vertices(node_objective(structure, problem, theta_hat, inv, beta), s_init,
                             free, pick)
