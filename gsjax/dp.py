r"""Exact LCB minimisation for linear features by min-sum variable elimination.

With linear features the LCB is concave on the box, so its minimum is at a vertex, where it is
a sum of one term per criterion over the bits of its scope: a min-sum problem on the
*interaction graph* (coordinates joined when they share a scope), exact by variable elimination
in ``O(n 2^{w+1})`` table entries for an order of width ``w`` (the largest separator).

* :func:`make_plan` (host, once per structure): the elimination order, each variable's clique
  ``{v} + sep(v)``, the parent each message goes to, and the static gathers that place every
  criterion's table and message in its bucket; :class:`TooWide` over ``max_table`` entries.
* :func:`minimise` (traced; under ``vmap`` the seeds go on the last axis by a batching rule of
  its own): one ``lax.scan`` of messages over the order, one of back-tracking; non-free
  coordinates stay at ``s_init``. Without exact ties, from :data:`ACTIVE_MIN_COORDS`
  coordinates, a seed with few free coordinates walks only its *active* steps; the choice is
  each seed's own, never its batch's, so a seed's answer is the same in any batch.
* The *level plan* (``exact_ties=False``): the elimination in levels, each an independent set
  of the filled graph (its eliminations commute), unrolled in Python: about ``1.7 log2 n + 3``
  levels for a chain, ring or bounded-degree tree; graphs that need more than
  :func:`max_levels` (a 4 x n/4 grid) keep the sequential scan unless ``levels=True``.

Tie rule: that of :func:`gsjax.lcb.minimise_vertices` (the lowest vertex index among values
within ``64 eps max(1, |min|)`` of the minimum), i.e. greedily 0 from the highest coordinate
down while a completion stays within the tolerance. So the back-tracking assigns coordinates in
decreasing index, and the order is min-fill *restricted to variables with no lower-indexed
neighbour left*: free on naturally numbered chains, rings and narrow grids, ruinous on a tree
numbered from its root. ``exact_ties=False`` (plain min-fill; sequentially the narrower of the
two) keeps the minimum, not the choice among tied minimisers. Levels cannot keep the tie rule
(two eliminations at once spend the tolerance blindly), so ``levels=True`` needs
``exact_ties=False``; each variable takes the lower entry of its bucket (0 on an exact tie).
"""

from __future__ import annotations

import contextlib
import functools
import contextvars
import heapq
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gsjax.checks import remember
from gsjax.graphs import Scopes
from gsjax.lcb import _TINY, Objective, bit_table, first_pick, lcb_terms

__all__ = ["DEFAULT_MAX_TABLE", "Plan", "Limits", "TooWide", "make_plan", "limits", "max_levels",
           "minimise", "shapes_only"]

DEFAULT_MAX_TABLE = 2 ** 16  # entries of one bucket table, 2^(w+1): width w <= 15


def _interaction(scopes: Scopes) -> list[set]:
    """Neighbour sets of the interaction graph (coordinates sharing a scope)."""
    adj = [set() for _ in range(int(scopes.num_coords))]
    for idx, msk in zip(np.asarray(scopes.index), np.asarray(scopes.mask)):
        real = [int(c) for c in idx[msk]]
        for a in real:
            adj[a].update(c for c in real if c != a)
    return adj


def _fill(adj: list[set], v: int) -> int:
    nb = list(adj[v])
    return sum(1 for i, a in enumerate(nb) for b in nb[i + 1:] if b not in adj[a])


class TooWide(ValueError):
    """The DP's tables would exceed ``max_table`` entries: width at least ``width`` (the greedy
    order stops at the first separator over the cap), tables of ``2^(width + 1)`` entries."""

    def __init__(self, width: int, max_table: int):
        self.width, self.table, self.max_table = width, 2 ** (width + 1), max_table
        self.reason = (f"elimination width >= {width} needs tables of >= 2^{width + 1} entries, "
                       f"over max_table = {max_table}")
        super().__init__(f"dp: {self.reason}; use solver 'pgd'")


# ---- the level-parallel plan: many eliminations at once (exact_ties=False) ----

LEVEL_COST = 2 ** 12  # the cost of one level in table entries, for choosing the degree bound
LEVEL_SLACK = 4  # degree bounds tried: the sequential min-fill width .. + LEVEL_SLACK
#: The sequential plan without exact ties solves a seed over its active steps only
#: (:func:`_active_batched`) from this many coordinates, when the seed has at most
#: ``n // ACTIVE_SHARE`` active steps (and ``k // ACTIVE_SHARE`` live criteria).
ACTIVE_MIN_COORDS = 4096
ACTIVE_SHARE = 16


def _level_elimination(adj: list[set], bound: int, max_table: int, max_levels=None,
                       ordered: bool = False):
    """Greedy levels: each takes, in min-fill order (ties: fewer neighbours, lower index), every
    variable of degree <= ``bound`` with no neighbour in the level yet (an independent set), or
    else the min-fill variable alone (``bound = -1``: sequential min-fill). ``ordered``: only a
    variable with no lower-indexed neighbour left may go. Returns ``(levels, separators)``,
    ``None`` past ``max_levels`` levels; :class:`TooWide` at once for a separator over the cap."""
    adj = [set(a) for a in adj]
    n = len(adj)
    max_width = max_table.bit_length() - 2
    gone = [False] * n
    version = [0] * n
    heap = []

    def push(v):
        version[v] += 1
        if ordered and any(u < v for u in adj[v]):
            return
        deg = len(adj[v])
        fill = n * n if deg > max_width else _fill(adj, v)
        heapq.heappush(heap, (deg > bound, fill, deg, v, version[v]))

    for v in range(n):
        push(v)
    levels, seps, left = [], [None] * n, n
    while left:
        picked, blocked, aside = [], set(), []
        while heap:
            entry = heapq.heappop(heap)
            wide, _, deg, v, ver = entry
            if gone[v] or ver != version[v]:
                continue
            if wide and picked:
                aside.append(entry)
                break
            if v in blocked:
                aside.append(entry)
                continue
            if deg > max_width:
                raise TooWide(deg, max_table)
            picked.append(v)
            blocked |= adj[v]
            if wide:
                break
        for entry in aside:
            heapq.heappush(heap, entry)
        touched = set()
        for v in picked:  # independent: no elimination of the level changes another's separator
            nb = sorted(adj[v])
            seps[v], gone[v] = nb, True
            for a in nb:
                adj[a].discard(v)
                adj[a].update(b for b in nb if b != a)
            touched.update(nb)
        for a in list(touched):
            touched |= adj[a]
        for u in touched:
            if not gone[u]:
                push(u)
        assert picked, "no variable may go (an ordered elimination always has one)"
        levels.append(sorted(picked))
        left -= len(picked)
        if max_levels is not None and left and len(levels) >= max_levels:
            return None
    return levels, seps


def _elimination(adj: list[set], ordered: bool, max_table: int):
    """Sequential greedy min-fill: ``(order, separators)``."""
    levels, seps = _level_elimination(adj, -1, max_table, ordered=ordered)
    return [v for (v,) in levels], seps


def max_levels(n: int) -> int:
    """The most levels :func:`make_plan` unrolls by default, ``4 log2(n) + 16``; a graph that
    needs more (a 4 x n/4 grid: about n/2.4) keeps the sequential ``lax.scan``."""
    return int(4 * np.log2(max(n, 2))) + 16


def _levels(adj: list[set], max_table: int, most=None, min_fill=None):
    """The level elimination of the cheapest degree bound (``LEVEL_COST`` a level plus its
    tables' entries) from the sequential min-fill width up by ``LEVEL_SLACK``: ``TooWide`` when
    none fits, ``None`` when all need over ``most`` levels. ``min_fill()``: the plain min-fill
    elimination, if the caller keeps it."""
    plain = min_fill() if min_fill else _elimination(adj, False, max_table)
    w_seq = _limits(plain[1]).width
    max_width = max_table.bit_length() - 2
    found, err = [], None
    for bound in range(w_seq, min(w_seq + LEVEL_SLACK, max_width) + 1):
        try:
            found.append(_level_elimination(adj, bound, max_table, most))
        except TooWide as e:
            err = e
    found = [f for f in found if f is not None]
    if not found:
        if err is not None and most is None:
            raise err
        return None
    cost = lambda f: sum(LEVEL_COST + len(lv) * 2 ** (1 + max(len(f[1][v]) for v in lv))
                         for lv in f[0])
    return min(found, key=cost)  # the first of the cheapest


def _bit_index(bits, slots, width):
    """``sum_s bits[:, slots[..., s]] << s``: per bucket assignment, the entry of a table over
    ``slots`` (the last column of ``bits`` is the zero padding slot)."""
    out = np.zeros(slots.shape[:-1] + (bits.shape[0],), np.int32)
    for s in range(width):
        out += np.moveaxis(bits[:, slots[..., s]], 0, -1) << s
    return out


class _Level(NamedTuple):
    start: int  # first message row (elimination position) of the level
    width: int  # its widest separator: buckets of 2^(width + 1) entries
    size: int  # its number of variables, L
    term: np.ndarray  # (L, Ck, 2^(width+1)) -> entry of the flat criteria tables + a zero row
    msg: tuple  # (level l', (L, C, 2^(width+1)) -> entry of level l''s flat messages + a zero)
    sep: np.ndarray  # (L, width) separator positions (n: a zero bit)


def _level_arrays(levels, seps, index, mask, n, k):
    starts = np.cumsum([0] + [len(lv) for lv in levels])
    position = np.empty(n, np.int32)
    level_of = np.empty(n, np.int32)
    for l, lv in enumerate(levels):
        position[lv] = np.arange(starts[l], starts[l + 1])
        level_of[lv] = l
    parent = {v: min(s, key=level_of.__getitem__) for v, s in enumerate(seps) if s}
    children = [[] for _ in range(n)]
    for c, par in sorted(parent.items(), key=lambda cp: position[cp[0]]):
        children[par].append(c)
    bucket_crits = [[] for _ in range(n)]
    for i in range(k):
        real = [int(c) for c in index[i][mask[i]]]
        bucket_crits[min(real, key=level_of.__getitem__)].append(i)
    widths = [max(len(seps[v]) for v in lv) for lv in levels]
    out = []
    for lv, w, start in zip(levels, widths, starts):
        pad = w + 1  # the padding slot: column w + 1 of the bit table, always 0
        bits = np.concatenate([bit_table(w + 1), np.zeros((2 ** (w + 1), 1), np.int32)], 1)
        L = len(lv)
        slot = [{c: s for s, c in enumerate([v, *seps[v]])} for v in lv]
        ck = max(1, max(len(bucket_crits[v]) for v in lv))
        crit = np.full((L, ck), k, np.int32)
        cslots = np.full((L, ck, index.shape[1]), pad, np.int32)
        sep = np.full((L, w), n, np.int32)
        for r, v in enumerate(lv):
            for j, i in enumerate(bucket_crits[v]):
                crit[r, j] = i
                for t in range(index.shape[1]):
                    if mask[i, t]:
                        cslots[r, j, t] = slot[r][int(index[i, t])]
            sep[r, :len(seps[v])] = position[seps[v]]
        term = crit[..., None] * 2 ** index.shape[1] + _bit_index(bits, cslots, index.shape[1])
        msgs = []
        for src in sorted({int(level_of[c]) for v in lv for c in children[v]}):
            src_size, src_width = len(levels[src]), widths[src]
            kids = [[c for c in children[v] if level_of[c] == src] for v in lv]
            nc = max(len(ks) for ks in kids)
            row = np.full((L, nc), src_size, np.int32)  # src_size: the zero entry
            mslots = np.full((L, nc, w + 1), pad, np.int32)  # a child's separator: <= w + 1
            for r, ks in enumerate(kids):
                for j, c in enumerate(ks):
                    row[r, j] = position[c] - starts[src]
                    for t, u in enumerate(seps[c]):
                        mslots[r, j, t] = slot[r][u]
            idx = row[..., None] * 2 ** src_width + _bit_index(bits, mslots, w + 1)
            msgs.append((src, np.where(row[..., None] == src_size, src_size * 2 ** src_width,
                                       idx).astype(np.int32)))
        out.append(_Level(int(start), w, L, term, tuple(msgs), sep))
    return out, position


class Limits(NamedTuple):
    """Size of the DP of a structure: ``width`` (largest separator of the elimination order),
    ``table`` (entries of one bucket, ``2^(width+1)``), ``total`` (entries of all buckets, one
    per coordinate: the message tables of one solve)."""

    width: int
    table: int
    total: int


def _limits(seps) -> Limits:
    w = max(len(s) for s in seps)
    return Limits(width=w, table=2 ** (w + 1), total=len(seps) * 2 ** (w + 1))


def limits(scopes: Scopes, max_table: int = DEFAULT_MAX_TABLE, exact_ties: bool = True,
           levels: bool | None = None) -> Limits:
    """The :class:`Limits` of :func:`make_plan`'s DP on ``scopes`` (host arrays), without
    building the plan; :class:`TooWide` when the tables would exceed ``max_table``."""
    return _limits(_order(_interaction(scopes), _check_cap(max_table), exact_ties,
                          levels)[2])


def _order(adj, max_table: int, exact_ties: bool, levels):
    """``(levels or None, order, separators)`` of the elimination :func:`make_plan` uses."""
    if levels is not None and not isinstance(levels, (bool, np.bool_)):
        raise ValueError(f"dp: levels: must be true, false or None; got {levels!r}")
    if levels and exact_ties:
        raise ValueError("dp: levels=True needs exact_ties=False: the vertex enumerator's "
                         "tie rule assigns the coordinates one at a time, in decreasing index")
    # the eliminations computed so far, by ``ordered`` (a refusal is not kept)
    elimination = functools.cache(lambda ordered: _elimination(adj, ordered, max_table))
    if levels or (levels is None and not exact_ties):
        # auto: at most max_levels(n) levels within the cap, else the sequential order
        found = _levels(adj, max_table, None if levels else max_levels(len(adj)),
                        lambda: elimination(False))
        if found is not None:
            return found[0], [v for level in found[0] for v in level], found[1]
    if exact_ties:
        return (None, *elimination(True))
    # the narrower of plain min-fill and the index-ordered one (min-fill is greedy: on a
    # 4 x n/4 grid numbered along its short side it finds width 9 where the order gives 8)
    found = []
    for ordered in (False, True):
        try:
            found.append(elimination(ordered))
        except TooWide as err:
            error = err
    if not found:
        raise error
    return (None, *min(found, key=lambda f: _limits(f[1]).width))


def _check_cap(max_table) -> int:
    if isinstance(max_table, bool) or not isinstance(max_table, (int, np.integer)) or (
            max_table < 2):
        raise ValueError(f"dp: max_table: must be an integer >= 2, got {max_table!r}")
    return int(max_table)


class Plan:
    """The static part of the DP for one set of scopes (numpy arrays; see :func:`make_plan`).

    Equal (and hashable) by its scopes and cap, so an :class:`~gsjax.algorithms.AgentSpec`
    holding it stays a usable static value."""

    def __init__(self, scopes: Scopes, max_table: int, exact_ties: bool = True,
                 levels: bool | None = False):
        index = np.asarray(scopes.index, np.int32)
        mask = np.asarray(scopes.mask, bool)
        n, (k, m) = int(scopes.num_coords), index.shape
        lv, order, seps = _order(_interaction(scopes), max_table, exact_ties, levels)
        self.limits = _limits(seps)
        w = self.limits.width
        self.num_coords, self.num_criteria, self.scope_size = n, k, m
        self.width, self.max_table = w, int(max_table)
        self.index, self.mask = index, mask
        self.exact_ties = bool(exact_ties)
        self.order = np.asarray(order, np.int32)
        self.levels = None if lv is None else [np.asarray(level, np.int32) for level in lv]
        self._key = (n, index.tobytes(), mask.tobytes(), index.shape, self.max_table,
                     self.exact_ties, self.levels is not None)
        if self.levels is not None:
            self.level_data, self.position = _level_arrays(lv, seps, index, mask, n, k)
            return
        slots = w + 1
        position = {v: p for p, v in enumerate(order)}
        clique = np.full((n, slots), n, np.int32)  # slot 0: v; then sep(v); padding: n
        parent = np.full(n, n, np.int32)
        for v in range(n):
            clique[v, 1:1 + len(seps[v])] = seps[v]
            clique[v, 0] = v
            if seps[v]:
                parent[v] = min(seps[v], key=position.__getitem__)
        bits = bit_table(slots)  # (2^W, W)
        msg = np.zeros((n, 2 ** slots), np.int32)  # parent-clique assignment -> message entry
        for v in range(n):
            if parent[v] == n:
                continue
            slot_of = {c: s for s, c in enumerate(clique[parent[v]]) if c != n}
            for s, c in enumerate(seps[v]):
                msg[v] += bits[:, slot_of[c]] << s
        bucket = np.empty(k, np.int32)  # the scope's first eliminated variable
        term = np.zeros((k, 2 ** slots), np.int32)  # bucket assignment -> term-table entry
        for i in range(k):
            real = [(j, int(c)) for j, c in enumerate(index[i]) if mask[i, j]]
            bucket[i] = min((c for _, c in real), key=position.__getitem__)
            slot_of = {c: s for s, c in enumerate(clique[bucket[i]]) if c != n}
            for j, c in real:
                term[i] += bits[:, slot_of[c]] << j
        per = [np.flatnonzero(bucket == v) for v in range(n)]
        crit = np.full((n, max(1, max(len(p) for p in per))), k, np.int32)  # k: a zero row
        for v, p in enumerate(per):
            crit[v, :len(p)] = p
        self.clique, self.parent, self.msg, self.term, self.crit = clique, parent, msg, term, crit
        self.v_slot, self.p_slot, self.slots = _pending_slots(self.order, parent[self.order])
        # back-tracking: decreasing index (the tie rule), else the reverse elimination order
        self.backtrack = np.arange(n - 1, -1, -1) if exact_ties else self.order[::-1].copy()

    @property
    def entries_held(self) -> int:
        """Table entries one solve holds at once: every bucket's for the level plan, the
        back-tracking's half rows (``n 2^w``) and the pending buckets for the sequential one."""
        if self.levels is not None:
            return self.limits.total
        return self.num_coords * 2 ** self.width + self.slots * self.limits.table

    def __eq__(self, other):
        return isinstance(other, Plan) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def __repr__(self):
        return (f"Plan(n={self.num_coords}, k={self.num_criteria}, width={self.width}, "
                f"max_table={self.max_table}, exact_ties={self.exact_ties}, levels="
                f"{'none' if self.levels is None else len(self.levels)})")


_PLANS: dict = {}  # make_plan's recent plans by (scopes, options): a run builds twice at most
_PLANS_KEPT = 4


def make_plan(scopes: Scopes, max_table: int = DEFAULT_MAX_TABLE, exact_ties: bool = True,
              levels: bool | None = None) -> Plan:
    """The :class:`Plan` of ``scopes`` (its :class:`Limits` in ``plan.limits``); :class:`TooWide`
    (a ``ValueError`` naming the width) when one bucket table, ``2^(w+1)`` entries, would exceed
    ``max_table`` (an integer >= 2).

    ``exact_ties=False`` drops the order restriction (a smaller width where the numbering is
    bad): the minimum is still exact, but among tied minimisers not necessarily the vertex
    enumerator's. ``levels``: eliminate many variables at once (``plan.levels``, see the module
    docstring); ``None`` (default): exactly when ``exact_ties=False`` and the levels fit
    (:func:`max_levels`, the cap); ``True`` needs ``exact_ties=False``; ``False``: sequential.

    The last few plans are kept (read-only): the same scopes and options return the same
    :class:`Plan` without the elimination again (seconds at ``n = 10^4``)."""
    max_table = _check_cap(max_table)
    index, mask = np.asarray(scopes.index), np.asarray(scopes.mask)
    key = (int(scopes.num_coords), index.shape, str(index.dtype), index.tobytes(),
           mask.tobytes(), max_table, exact_ties, levels)
    # an option of the wrong type (an unhashable key): the Plan names it
    return remember(_PLANS, _PLANS_KEPT, key, lambda: Plan(scopes, max_table, exact_ties, levels))


_SHAPES_ONLY = contextvars.ContextVar("gsjax_dp_shapes_only", default=False)


@contextlib.contextmanager
def shapes_only():
    """Within it, :func:`minimise` returns outputs of the right shapes and dtypes without the
    DP (``s_init``, its LCB value, a zero residual), for ``jax.eval_shape`` of a whole run
    (:func:`gsjax.experiment.memory_needed`). Never for numbers."""
    token = _SHAPES_ONLY.set(True)
    try:
        yield
    finally:
        _SHAPES_ONLY.reset(token)


def minimise(plan: Plan, objective: Objective, s_init, free, pick=first_pick):
    """Exact minimiser of the LCB of per-criterion linear terms (``objective.terms``) over the
    vertices of the ``free`` coordinates; the others stay at ``s_init``. Same answer and tie rule
    as :func:`gsjax.lcb.minimise_vertices`; returns ``(s, value, residual)`` with residual 0."""
    if pick is not first_pick:
        raise ValueError("solver 'dp' makes hard choices only (lcb.first_pick); use 'vertex'")
    terms = objective.terms
    if terms is None:
        raise ValueError("solver 'dp' needs the per-criterion terms of linear features")
    n, k, m = plan.num_coords, plan.num_criteria, plan.scope_size
    if s_init.shape != (n,) or terms.theta_hat.shape[:2] != (k, m):
        raise ValueError(f"solver 'dp': the plan is for n = {n}, k = {k}, m = {m}; got state "
                         f"{s_init.shape} and estimates {terms.theta_hat.shape}")
    dtype = s_init.dtype
    if _SHAPES_ONLY.get():
        return s_init, objective.value(s_init), jnp.zeros((), dtype)
    if plan.levels is None and plan.exact_ties:  # the vertex enumerator's arithmetic
        args = (_criterion_tables(plan, terms, s_init, free),)
    else:  # multiplied out seed-last in the batching rule
        args = (free, s_init, terms.theta_hat, terms.inv, terms.beta)
    # the bits carry no derivative (and the batching rule has no differentiation rule)
    args = jax.lax.stop_gradient(args)
    if plan.levels is not None:
        x = _level_solver(plan)(_level_tables(plan), *args)
    else:
        x = _sequential_solver(plan)(_sequential_tables(plan), *args)
    s = jnp.where(free, x.astype(dtype), s_init)
    return s, objective.value(s), jnp.zeros((), dtype)


def _criterion_tables(plan: Plan, terms, s_init, free):
    """(k, 2^m) each criterion's LCB term on every assignment of its scope's bits (a non-free
    coordinate at its ``s_init``) in the vertex enumerator's arithmetic."""
    bits = jnp.asarray(bit_table(plan.scope_size), s_init.dtype)  # (2^m, m)

    def table(idx, smask, th, iv, bt):
        phi = jnp.where(free[idx], bits, s_init[idx])
        return lcb_terms(jnp.where(smask, phi, 0.0), th, iv, bt)

    return jax.vmap(table)(jnp.asarray(plan.index), jnp.asarray(plan.mask), terms.theta_hat,
                           terms.inv, terms.beta)


def _sequential_solver(plan: Plan):
    """The sequential plan's solver of one objective, ``(plan_tables, tables (k, 2^m)) -> x``
    ((n,) int32 bits), batched seed-last (:func:`_batched_solver`); without exact ties it takes
    ``(plan_tables, free, s_init, theta_hat, inv, beta)`` as the level plan's solver does."""
    return _batched_solver(functools.partial(_sequential_batched, plan),
                           seeds_first=_has_active_path(plan))


def _sequential_tables(plan: Plan) -> dict:
    """The sequential plan's static index tables as arrays (``v_touched``/``p_touched``: the
    step's variable/parent holds a message yet; ``v_slot``/``p_slot``: its pending row)."""
    k, n, entries = plan.num_criteria, plan.num_coords, 2 ** plan.scope_size
    order, down = plan.order, np.asarray(plan.backtrack, np.int32)
    parent = plan.parent[order]
    crit = np.concatenate([plan.crit, np.full((1, plan.crit.shape[1]), k, np.int32)])  # row n
    offset = np.concatenate([plan.term + (np.arange(k) * entries)[:, None],
                             np.full((1, plan.term.shape[1]), k * entries, np.int32)])
    got = np.zeros(n + 1, bool)  # a message has reached the row
    v_touched, p_touched = np.zeros(n, bool), np.zeros(n, bool)
    for t, (v, p) in enumerate(zip(order, parent)):
        v_touched[t], p_touched[t] = got[v], got[p]
        got[p] = True
    step = np.empty(n, np.int32)
    step[order] = np.arange(n, dtype=np.int32)
    statics = {} if plan.exact_ties else _term_tables(plan)
    return {**statics, "crit": jnp.asarray(crit), "offset": jnp.asarray(offset, jnp.int32),
            "order": jnp.asarray(order), "parent": jnp.asarray(parent),
            "msg": jnp.asarray(plan.msg[order]),
            "v_touched": jnp.asarray(v_touched), "p_touched": jnp.asarray(p_touched),
            "v_slot": jnp.asarray(plan.v_slot), "p_slot": jnp.asarray(plan.p_slot),
            "down": jnp.asarray(down), "down_step": jnp.asarray(step[down]),
            "sep": jnp.asarray(plan.clique[down, 1:]),
            **({"clique": jnp.asarray(plan.clique[order]), "term": jnp.asarray(plan.term)}
               if _has_active_path(plan) else {})}


def _pending_slots(order, parent) -> tuple[np.ndarray, np.ndarray, int]:
    """``(v_slot, p_slot, slots)``: a row of the scan's pending buffer for each bucket holding
    messages, from its first message to its elimination, reused once free (lowest first).
    ``v_slot[t]``: the row step ``t``'s variable is read from (0: no message), ``p_slot[t]``:
    its parent's, read and written."""
    n = len(order)
    slot_of, free, used = {}, [], 0
    v_slot, p_slot = np.zeros(n, np.int32), np.zeros(n, np.int32)
    for t, (v, p) in enumerate(zip(order, parent)):
        v, p = int(v), int(p)
        if v in slot_of:  # read at this step, then free (the parent's row may take it)
            v_slot[t] = slot_of.pop(v)
            heapq.heappush(free, int(v_slot[t]))
        if p not in slot_of:
            if free:
                slot_of[p] = heapq.heappop(free)
            else:
                slot_of[p], used = used, used + 1
        p_slot[t] = slot_of[p]
    return v_slot, p_slot, max(used, 1)


def _has_active_path(plan: Plan) -> bool:
    """Whether the sequential plan's solver compiles :func:`_active_batched` in (static)."""
    return (plan.levels is None and not plan.exact_ties
            and plan.num_coords >= ACTIVE_MIN_COORDS)


def _sequential_batched(plan: Plan, pt: dict, *args):
    """:func:`_scan_batched` (batch axis last); with an active path the arguments and bits
    come batch FIRST, and each seed with few active steps and live criteria (its own counts)
    is solved by :func:`_active_batched`, the others by the whole scan, so a seed's answer never
    depends on the seeds beside it (DESIGN section 3; the paths may differ on near ties)."""
    if not _has_active_path(plan):
        return _scan_batched(plan, pt, *args)
    free = args[0]  # (B, n)
    pad = jnp.concatenate([free, jnp.zeros((free.shape[0], 1), bool)], axis=1)  # n: padding
    active = jnp.any(pad[:, pt["clique"]], axis=2)  # (B, n steps)
    live = jnp.any(free[:, pt["index"]] & pt["mask"], axis=2)  # (B, k)
    fits = ((jnp.sum(active, axis=1) <= plan.num_coords // ACTIVE_SHARE)
            & (jnp.sum(live, axis=1) <= plan.num_criteria // ACTIVE_SHARE))  # (B,) its own
    few = lambda: _active_batched(plan, pt, active & fits[:, None], live & fits[:, None], *args)
    scan = lambda: _scan_batched(plan, pt, *(jnp.moveaxis(x, 0, -1) for x in args)).T
    both = lambda: jnp.where(fits[:, None], few(), scan())
    which = jnp.where(jnp.all(fits), 0, jnp.where(jnp.any(fits), 2, 1))
    return jax.lax.switch(which, [few, scan, both])


def _ranked(mask, size: int):
    """``(indices, rank)``: (B, size) the true columns of each row of ``mask``, 0 past their
    number; (B, columns) each true entry's place among them, ``size`` where false."""
    rank = jnp.where(mask, jnp.cumsum(mask, axis=1, dtype=jnp.int32) - 1, size)
    return jnp.zeros((mask.shape[0], size), jnp.int32).at[
        jnp.arange(mask.shape[0])[:, None], rank].set(
        jnp.arange(mask.shape[1], dtype=jnp.int32), mode="drop"), rank


def _active_batched(plan: Plan, pt: dict, active, live, free, s_init, theta_hat, inv, beta):
    """The sequential DP of ``B`` conditioned objectives, batch axis FIRST, over each seed's
    ``active`` (B, n) steps (a clique holding a free coordinate) and ``live`` (B, k) criteria
    (a scope holding one), the rest adding constants only; pending rows are tagged with the
    variable they hold. The tie tolerance is the live part's, so on near ties the bits may
    differ from the whole scan's, each a minimiser. Returns the (B, n) bits."""
    n, k, m, w = plan.num_coords, plan.num_criteria, plan.scope_size, plan.width
    dtype, width = s_init.dtype, free.shape[0]
    count, kcap = jnp.sum(active, axis=1, dtype=jnp.int32), k // ACTIVE_SHARE
    steps = _ranked(active, n // ACTIVE_SHARE)[0].T  # (cap, B)
    crits, rank = _ranked(live, kcap)  # (B, kcap), (B, k)
    pos = jnp.concatenate([rank, jnp.full((width, 1), kcap, jnp.int32)], axis=1)  # (B, k + 1)
    # the live criteria's term tables: (B, kcap + 1, 2^m), the last row zeros
    idx = pt["index"][crits]  # (B, kcap, m)
    at = lambda a: jnp.take_along_axis(a, idx.reshape(width, -1), axis=1).reshape(idx.shape)
    phi = jnp.where(at(free)[:, :, None], pt["bits"].astype(dtype), at(s_init)[:, :, None])
    phi = jnp.where(pt["mask"][crits][:, :, None], phi, 0.0)  # (B, kcap, 2^m, m)
    tables = _lcb_entries(phi, jnp.take_along_axis(theta_hat, crits[..., None], axis=1),
                          jnp.take_along_axis(inv, crits[:, :, None, None], axis=1),
                          jnp.take_along_axis(beta, crits, axis=1), 2)
    tables = jnp.concatenate([tables, jnp.zeros((width, 1, 2 ** m), dtype)], axis=1)

    def bucket(u, tab, where):  # one seed: variable u's live criteria tables, summed
        crit = pt["crit"][u]  # (C,); k pads (row n: the roots' empty bucket)
        rows = tab[where[crit]]  # (C, 2^m); a dead or padding criterion: zeros
        entries = pt["term"][jnp.minimum(crit, k - 1)]  # (C, 2^W)
        return jnp.sum(jnp.take_along_axis(rows, entries, axis=1), axis=0)  # (2^W,)

    # an inactive parent's row is written but never read (the owner tag guards it): cheaper
    # than a branch on the parent
    def forward(t, go, pending, owner, *seed):  # one seed, its step t
        v, p = pt["order"][t], pt["parent"][t]
        vs, ps = pt["v_slot"][t], pt["p_slot"][t]
        pairs = jnp.where(owner[vs] == v, pending[vs], bucket(v, *seed)).reshape(-1, 2)
        into = (jnp.where(owner[ps] == p, pending[ps], bucket(p, *seed))
                + jnp.min(pairs, axis=1)[pt["msg"][t]])
        pending = pending.at[ps].set(jnp.where(go, into, pending[ps]))  # in place
        owner = owner.at[ps].set(jnp.where(go, p, owner[ps]))
        return pending, owner, jnp.maximum(pairs[:, 0] - pairs[:, 1], 0.0)

    per_seed = jax.vmap(forward)
    top = jnp.max(count)

    def step(a, carry):
        pending, owner, gains = carry
        pending, owner, gain = per_seed(steps[a], a < count, pending, owner, tables, pos)
        return pending, owner, jax.lax.dynamic_update_index_in_dim(gains, gain, a, 0)

    pending, owner, gains = jax.lax.fori_loop(0, top, step, (
        jnp.zeros((width, plan.slots, 2 ** (w + 1)), dtype),
        jnp.full((width, plan.slots), -1, jnp.int32),
        jnp.zeros((n // ACTIVE_SHARE, width, 2 ** w), dtype)))
    root = int(plan.p_slot[-1])  # the roots' row: the last step's parent
    best = jnp.where(owner[:, root] == n, pending[:, root, 0], 0.0)  # (B,)
    tol = 64 * jnp.finfo(dtype).eps * jnp.maximum(1.0, jnp.abs(best))
    weights = 1 << jnp.arange(w, dtype=jnp.int32)

    def assign(t, live, gain, x, reached, best, tol):  # one seed; its separator is assigned
        g = gain[jnp.sum(x[pt["clique"][t, 1:]] * weights)]
        zero = reached + g <= best + tol  # x_v = 0 costs ``g``
        v = pt["order"][t]
        x = x.at[v].set(jnp.where(live, jnp.where(zero, 0, 1), x[v]))  # in place
        return x, jnp.where(live & zero, reached + g, reached)

    back = jax.vmap(assign)

    def down(i, carry):
        a = top - 1 - i
        return back(steps[a], a < count, gains[a], *carry, best, tol)

    x, _ = jax.lax.fori_loop(0, top, down, (jnp.zeros((width, n + 1), jnp.int32), best))
    return x[:, :n]


def _scan_batched(plan: Plan, pt: dict, *args):
    """The sequential DP of ``B`` objectives, batch axis LAST (``args``: the criteria tables
    (k, 2^m, B), or :func:`_terms`'s inputs): one scan step a variable (its bucket built when
    first read, its message, the cost of its bit at 0 over 1 per separator assignment), then
    the back-tracking, carrying the best completion. Returns the (n, B) bits."""
    tables = args[0] if plan.exact_ties else _terms(pt, *args)
    n, dtype = plan.num_coords, tables.dtype
    width = tables.shape[-1]
    flat = jnp.concatenate([tables.reshape(-1, width), jnp.zeros((1, width), dtype)])

    def bucket(u):  # (2^W, B): the criteria tables of variable u's bucket, summed
        crit = jax.lax.dynamic_index_in_dim(pt["crit"], u, keepdims=False)  # (C,)
        return jnp.sum(_take(flat, _take(pt["offset"], crit)), axis=0)  # over (C, 2^W, B)

    def row(pending, u, slot, touched):
        return jax.lax.cond(
            touched, lambda: jax.lax.dynamic_index_in_dim(pending, slot, keepdims=False),
            lambda: bucket(u))

    def eliminate(pending, step):
        v, p, gather, v_touched, p_touched, v_slot, p_slot = step
        pairs = row(pending, v, v_slot, v_touched).reshape(-1, 2, width)
        message = jnp.min(pairs, axis=1)  # min over x_v (slot 0)
        into = row(pending, p, p_slot, p_touched) + _take(message, gather)
        gain = jnp.maximum(pairs[:, 0] - pairs[:, 1], 0.0)  # x_v = 0 costs this more
        return jax.lax.dynamic_update_index_in_dim(pending, into, p_slot, 0), gain

    pending = jnp.zeros((plan.slots, pt["offset"].shape[-1], width), dtype)
    pending, gains = jax.lax.scan(eliminate, pending, (
        pt["order"], pt["parent"], pt["msg"], pt["v_touched"], pt["p_touched"], pt["v_slot"],
        pt["p_slot"]))  # gains (n, 2^w, B) by elimination step
    best = pending[int(plan.p_slot[-1]), 0]  # (B,) the roots' row: the last step's parent
    tol = 64 * jnp.finfo(dtype).eps * jnp.maximum(1.0, jnp.abs(best))
    weights = (1 << jnp.arange(plan.width, dtype=jnp.int32))[:, None]  # an iota: no constant

    def assign(carry, step):  # the separator of v is assigned already
        x, reached = carry
        v, at, sep = step
        r = jnp.sum(_take(x, sep) * weights, axis=0)[None]  # (1, B)
        gv = jax.lax.dynamic_index_in_dim(gains, at, keepdims=False)
        gain = jnp.take_along_axis(gv, r, axis=0, mode="promise_in_bounds")[0]
        zero = reached + gain <= best + tol  # x_v = 0 costs ``gain``
        x = jax.lax.dynamic_update_index_in_dim(x, jnp.where(zero, 0, 1).astype(x.dtype), v, 0)
        return (x, jnp.where(zero, reached + gain, reached)), None

    x0 = jnp.zeros((n + 1, width), jnp.int32)  # row n: the padding slots' 0
    (x, _), _ = jax.lax.scan(assign, (x0, best), (pt["down"], pt["down_step"], pt["sep"]))
    return x[:n]


def _min_and_bit(pair):
    """``(min, argmin)`` over axis 2 (the own bit) of ``(L, 2^w, 2, B)``, ties to bit 0: two
    slices and a select (faster than a variadic ``lax.reduce``)."""
    zero, one = pair[:, :, 0], pair[:, :, 1]
    take = one < zero
    return jnp.where(take, one, zero), take.astype(jnp.int32)


def _batched_solver(batched, seeds_first: bool = False):
    """The solver of one objective made of ``batched(plan_tables, *args)`` (``B`` objectives,
    batch axis LAST, or FIRST with ``seeds_first``), whose batching rule puts the seeds on that
    axis. The index tables are an argument, as a batching rule may not see batched constants
    (a ``lax.cond`` under ``vmap``); the rule reads row 0 of batched ones (all rows equal)."""
    axis = 0 if seeds_first else -1

    @jax.custom_batching.custom_vmap
    def solve(plan_tables, *args):
        x = batched(plan_tables, *(jnp.expand_dims(a, axis) for a in args))
        return jnp.squeeze(x, axis)

    @solve.def_vmap
    def _(axis_size, in_batched, plan_tables, *args):
        plan_tables = jax.tree_util.tree_map(lambda t, rows: t[0] if rows else t,
                                             plan_tables, in_batched[0])

        def spread(a):  # an unbatched argument, the same for every seed
            shape = (axis_size, *a.shape) if seeds_first else (*a.shape, axis_size)
            return jnp.broadcast_to(jnp.expand_dims(a, axis), shape)

        args = [jnp.moveaxis(a, 0, axis) if rows else spread(a)
                for a, rows in zip(args, in_batched[1:])]
        return jnp.moveaxis(batched(plan_tables, *args), axis, 0), True

    return solve


def _level_solver(plan: Plan):
    """The level plan's solver of one objective, ``(tables, free, s_init, theta_hat, inv,
    beta) -> x`` ((n,) int32 bits), batched seed-last."""
    return _batched_solver(functools.partial(_levels_batched, plan))


def _level_tables(plan: Plan) -> dict:
    """The level plan's static index tables as arrays."""
    return {**_term_tables(plan), "position": jnp.asarray(plan.position),
            "levels": [{"term": jnp.asarray(lv.term), "sep": jnp.asarray(lv.sep),
                        "msg": [jnp.asarray(idx) for _, idx in lv.msg]}
                       for lv in plan.level_data]}


def _levels_batched(plan: Plan, tables: dict, free, s_init, theta_hat, inv, beta):
    """The level plan's DP of ``B`` objectives, batch axis LAST (``free``, ``s_init`` (n, B),
    ``theta_hat`` (k, m, B), ...): each level's buckets gathered at once, their messages and
    own bits (0 on a tie); then the levels in reverse, each bit read at its separator's bits.
    Returns the (n, B) bits in coordinate order."""
    n = plan.num_coords
    dtype = s_init.dtype
    terms = _terms(tables, free, s_init, theta_hat, inv, beta)
    width = terms.shape[-1]
    flat = jnp.concatenate([terms.reshape(-1, width), jnp.zeros((terms.shape[1], width), dtype)])
    zero = jnp.zeros((1, width), dtype)
    messages, decisions = [], []
    for lv, arrays in zip(plan.level_data, tables["levels"]):
        bucket = jnp.sum(_take(flat, arrays["term"]), axis=1)  # (L, 2^(w+1), B)
        for (src, _), idx in zip(lv.msg, arrays["msg"]):
            bucket = bucket + jnp.sum(_take(messages[src], idx), axis=1)
        message, bit = _min_and_bit(bucket.reshape(lv.size, -1, 2, width))  # (L, 2^w, B)
        messages.append(jnp.concatenate([message.reshape(-1, width), zero]))
        decisions.append(bit)
    x = jnp.zeros((n + 1, width), jnp.int32)  # by elimination position; row n: a padding 0
    for lv, arrays, bit in zip(plan.level_data[::-1], tables["levels"][::-1], decisions[::-1]):
        r = jnp.zeros((lv.size, width), jnp.int32)
        for s in range(lv.width):
            r = r + (_take(x, arrays["sep"][:, s]) << s)
        # the entry at r of each row: a one-hot over the 2^w entries, elementwise over seeds
        entries = jax.lax.broadcasted_iota(jnp.int32, (1, bit.shape[1], 1), 1)
        own = jnp.sum(jnp.where(r[:, None] == entries, bit, 0), axis=1, dtype=jnp.int32)
        x = jax.lax.dynamic_update_slice(x, own, (lv.start, 0))
    return _take(x, tables["position"])


def _term_tables(plan: Plan) -> dict:
    """The static arrays :func:`_terms` reads."""
    return {"index": jnp.asarray(plan.index), "mask": jnp.asarray(plan.mask),
            "bits": jnp.asarray(bit_table(plan.scope_size))}


def _terms(tables: dict, free, s_init, theta_hat, inv, beta):
    """(k, 2^m, B) the criteria's LCB terms on every assignment of their scopes' bits (a
    non-free coordinate at its ``s_init``), multiplied out elementwise (not the vertex
    enumerator's arithmetic: only plans without exact ties use it)."""
    dtype = s_init.dtype
    index = tables["index"]
    bits = tables["bits"].astype(dtype)[None, :, :, None]  # (1, 2^m, m, 1)
    phi = jnp.where(free[index][:, None], bits, s_init[index][:, None])
    phi = jnp.where(tables["mask"][:, None, :, None], phi, 0.0)  # (k, 2^m, m, B)
    return _lcb_entries(phi, theta_hat, inv, beta, 1)


def _lcb_entries(phi, theta_hat, inv, beta, e: int):
    """``(..., E, *tail)`` the LCB terms ``<phi, theta> - beta sqrt(phi' V^-1 phi)`` of rows
    ``phi`` ``(..., E, m, *tail)`` (entries on axis ``e``), ``theta_hat`` ``(..., m, *tail)``,
    ``inv`` ``(..., m, m, *tail)``, ``beta`` ``(..., *tail)``, multiplied out elementwise."""
    quad = jnp.sum(phi * jnp.sum(jnp.expand_dims(inv, e) * jnp.expand_dims(phi, e + 1),
                                 axis=e + 2), axis=e + 1)
    return (jnp.sum(phi * jnp.expand_dims(theta_hat, e), axis=e + 1)
            - jnp.expand_dims(beta, e) * jnp.sqrt(jnp.maximum(quad, _TINY)))


def _take(a, idx):
    """``a[idx]`` at indices known to be in bounds (no index normalisation for XLA to fold)."""
    return a.at[idx].get(mode="promise_in_bounds")
