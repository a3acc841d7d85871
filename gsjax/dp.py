r"""Exact LCB minimisation for linear features by min-sum variable elimination (issue 17).

With linear features the LCB is concave on the box, so its minimum is at a vertex, and on the
vertices it is a sum of one term per criterion, each a function of the bits of its scope
``N(i)``. Minimising it is a min-sum problem on the *interaction graph* (coordinates joined
when they share a scope): exact by variable elimination in ``O(n 2^{w+1})`` table entries for
an elimination order of width ``w`` (the largest separator), instead of ``2^n``.

* :func:`make_plan` (host, once per structure): the elimination order, each variable's clique
  ``{v} + sep(v)`` padded to ``w + 1`` slots, the parent each message goes to, and the static
  gathers that place every criterion's table and every message in its bucket. Tables wider
  than ``max_table`` entries are refused (:class:`TooWide`, a ``ValueError`` naming the
  width); :func:`limits` (and ``plan.limits``) give the width and the table sizes.
* :func:`minimise` (traced, vmappable): one ``lax.scan`` of messages over the order, one
  ``lax.scan`` of back-tracking; non-free coordinates stay at ``s_init`` (their term tables
  are constant along their bit, which is the DP of the conditioned problem). A bucket is
  summed from the criteria tables when the scan first reads it, and under ``vmap`` the seeds
  go on the last axis (its own batching rule, as the levels' below): each step moves rows of
  contiguous seeds (a 4 x n/4 grid at ``n = 10^3``, 100 seeds: 1.6x;
  ``benchmarks/dp_batching.py --plan sequential``).
* Async re-minimises a few free coordinates with the others fixed. Without exact ties, a
  sequential plan of at least :data:`ACTIVE_MIN_COORDS` coordinates then walks only each
  seed's *active* steps (a step whose clique holds a free coordinate) with the tables of its
  *live* criteria (a scope holding one): the rest adds constants only
  (:func:`_active_batched`). At ``n = 10^4`` on the 4 x n/4 grid, 25 seeds with the scopes of
  16 (5) criteria free each, 5.7x (7.4x) faster than the whole scan
  (``benchmarks/dp_batching.py --plan min_fill --triggers 16``); a seed with more active
  steps or live criteria than ``1 / ACTIVE_SHARE`` of them (every coordinate free: lazy,
  LinUCB; async's first rounds) takes the whole scan, bit for bit as before. The choice is
  each seed's own, never its batch's: a seed's answer is the same in any batch.
* The *level plan* (``make_plan(..., exact_ties=False)``, the default there): the elimination
  grouped into levels, each an independent set of the filled interaction graph (so its
  eliminations commute), taken greedily in min-fill order among the variables of degree at
  most a bound; the bound is chosen from the sequential min-fill width up to 4 more by the
  cost ``2^12`` entries a level plus the entries of its tables. The levels are unrolled in
  Python, each with its own static shapes: one gather of the criteria tables and one of the
  children's messages (per source level) into the level's buckets, the min over the own bit;
  back-tracking by levels in reverse, each variable from its separator's bits. Its solver has
  its own ``vmap`` rule: the seeds go on the last axis, so a gather copies rows of contiguous
  seeds (1.5-1.9x the default batching at ``n = 10^4``: ``benchmarks/dp_batching.py``). A
  chain, ring or bounded-degree tree of n nodes takes about ``1.7 log2 n + 3`` levels (25 to 28
  at ``n = 10^4``, against 10^4 scan steps) at a width of at most 5 (chain 2, ring 4
  sequentially); graphs that do not shrink geometrically (a 4 x n/4 grid: about n/2.4 levels)
  need more than :func:`max_levels` and keep the sequential scan unless ``levels=True``.

Tie rule: that of :func:`gsjax.lcb.minimise_vertices`, the lowest vertex index ``p`` among the
values within ``64 eps max(1, |min|)`` of the minimum, where vertex ``p`` puts bit ``j`` on the
``j``-th free coordinate. The lowest ``p`` is the greedy choice "0 whenever a completion stays
within the tolerance" from the highest coordinate down, so the back-tracking must assign
coordinates in decreasing index, each after its separator. Hence the order is min-fill
*restricted to variables with no lower-indexed neighbour left* (the separator of ``v`` then
holds only higher coordinates); the back-tracking carries the value of the best completion and
spends the tolerance exactly as the enumerator's comparison does. On naturally numbered chains,
rings and narrow grids (numbered along the short side) the restriction costs nothing; on a
tree numbered from its root it is ruinous, and ``make_plan(..., exact_ties=False)`` (plain
min-fill, another choice among tied minimisers; sequentially, the narrower of plain and
restricted min-fill) is the way there. :func:`limits` reports the width of either. Without the
tie rule the criteria's tables need not be the enumerator's arithmetic either: they are
multiplied out seed-last inside the solver's batching rule (:func:`_terms`).

Levels keep only the minimum, not that tie rule: the lowest index ``p`` is fixed by deciding the
coordinates one at a time from the highest down, each decision spending part of one shared
tolerance and conditioning the next, and it needs every eliminated subtree to hold only
coordinates below its variable; a level eliminating two variables of a naturally numbered
chain at once breaks both (one of them has a higher-numbered descendant, and the two spend the
tolerance without seeing each other). Carrying the lexicographic key through the messages
would cost a bit string per table entry. So ``levels=True`` needs ``exact_ties=False``; there
each variable takes the lower entry of its bucket (0 on an exact tie), which is a minimiser in
the DP's own arithmetic (no tolerance is spent: in float32 at ``n = 10^4`` the sequential
tie-rule path's answers lie up to ``64 eps |min|`` above the minimum, the level path's at it).
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
    """The DP's tables would exceed ``max_table`` entries: an elimination of width at least
    ``width`` needs tables of at least ``2^(width + 1)`` entries (the greedy order stops at the
    first separator over the cap, so the true width may be larger)."""

    def __init__(self, width: int, max_table: int):
        self.width, self.table, self.max_table = width, 2 ** (width + 1), max_table
        self.reason = (f"elimination width >= {width} needs tables of >= 2^{width + 1} entries, "
                       f"over max_table = {max_table}")
        super().__init__(f"dp: {self.reason}; use solver 'pgd'")


# ---- the level-parallel plan: many eliminations at once (exact_ties=False) ----

LEVEL_COST = 2 ** 12  # the cost of one level in table entries, for choosing the degree bound
LEVEL_SLACK = 4  # degree bounds tried: the sequential min-fill width .. + LEVEL_SLACK
#: The sequential plan without exact ties re-solves a conditioned problem (async's few free
#: coordinates) over its active steps only (:func:`_active_batched`) when it has at least this
#: many coordinates and each seed has at most ``n // ACTIVE_SHARE`` active steps; otherwise (and
#: always below this size, where the whole scan costs little) the whole scan runs.
ACTIVE_MIN_COORDS = 4096
ACTIVE_SHARE = 16


def _level_elimination(adj: list[set], bound: int, max_table: int, max_levels=None,
                       ordered: bool = False):
    """Greedy levels: each level takes, in min-fill order (ties: fewer neighbours, then the
    lower index), every variable of current degree <= ``bound`` none of whose neighbours the
    level holds already (an independent set of the filled graph, so its eliminations commute);
    a level with no such variable takes the min-fill variable alone (so ``bound = -1`` is the
    sequential greedy min-fill, one variable a level). ``ordered``: only a variable with no
    lower-indexed neighbour left may go. Returns the levels and the separators (``None`` past
    ``max_levels`` levels); a separator over ``max_table`` raises :class:`TooWide` at once
    (before any wide fill count)."""
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
    """Sequential greedy min-fill (:func:`_level_elimination` one variable a level): the
    order and the separators."""
    levels, seps = _level_elimination(adj, -1, max_table, ordered=ordered)
    return [v for (v,) in levels], seps


def max_levels(n: int) -> int:
    """The most levels :func:`make_plan` unrolls by default, ``4 log2(n) + 16``: a graph
    that does not shrink geometrically (a 4 x n/4 grid: about n/2.4 levels of two variables)
    keeps the sequential ``lax.scan``."""
    return int(4 * np.log2(max(n, 2))) + 16


def _levels(adj: list[set], max_table: int, most=None, min_fill=None):
    """The level elimination of the cheapest degree bound: ``LEVEL_COST`` per level plus the
    entries of its bucket tables (each level padded to its widest), over the bounds from the
    sequential min-fill width up by ``LEVEL_SLACK`` (within the cap); ``TooWide`` when none
    fits; ``None`` when every bound needs more than ``most`` levels. ``min_fill()``: the plain
    min-fill elimination, if the caller keeps it."""
    plain = min_fill() if min_fill else _elimination(adj, False, max_table)
    w_seq = _limits(plain[1]).width
    max_width = max_table.bit_length() - 2
    best, err = None, None
    for bound in range(w_seq, min(w_seq + LEVEL_SLACK, max_width) + 1):
        try:
            found = _level_elimination(adj, bound, max_table, most)
        except TooWide as e:
            err = e
            continue
        if found is None:
            continue
        levels, seps = found
        cost = sum(LEVEL_COST + len(lv) * 2 ** (1 + max(len(seps[v]) for v in lv))
                   for lv in levels)
        if best is None or cost < best[0]:
            best = (cost, levels, seps)
    if best is None:
        if err is not None and most is None:
            raise err
        return None
    return best[1], best[2]


def _bit_index(bits, slots, width):
    """``sum_s bits[:, slots[..., s]] << s``: for each bucket assignment (rows of ``bits``,
    whose last column is the zero padding slot), the entry of a table over ``slots``."""
    out = np.zeros(slots.shape[:-1] + (bits.shape[0],), np.int32)
    for s in range(width):
        out += np.moveaxis(bits[:, slots[..., s]], 0, -1) << s
    return out


class _Level(NamedTuple):
    start: int  # first message row (elimination position) of the level
    width: int  # its widest separator: buckets of 2^(width + 1) entries
    size: int  # its number of variables, L
    term: np.ndarray  # (L, Ck, 2^(width+1)) bucket assignment -> entry of the flat criteria
    #                   tables (k, 2^m) + a zero row, for each criterion of the bucket
    msg: tuple  # (level l', (L, C, 2^(width+1)) bucket assignment -> entry of level l''s
    #             flat messages, for each child of the bucket in level l'; L' 2^w': a zero)
    sep: np.ndarray  # (L, width) separator positions (n: a zero bit)


def _level_arrays(levels, seps, index, mask, n, k, width):
    position = np.empty(n, np.int32)
    level_of = np.empty(n, np.int32)
    p = 0
    for l, lv in enumerate(levels):
        position[lv] = np.arange(p, p + len(lv))
        level_of[lv] = l
        p += len(lv)
    parent = {v: min(s, key=level_of.__getitem__) for v, s in enumerate(seps) if s}
    children = [[] for _ in range(n)]
    for c, par in sorted(parent.items(), key=lambda cp: position[cp[0]]):
        children[par].append(c)
    bucket_crits = [[] for _ in range(n)]
    for i in range(k):
        real = [int(c) for c in index[i][mask[i]]]
        bucket_crits[min(real, key=level_of.__getitem__)].append(i)
    widths = [max(len(seps[v]) for v in lv) for lv in levels]
    starts = np.cumsum([0] + [len(lv) for lv in levels])
    out, start = [], 0
    for lv, w in zip(levels, widths):
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
        out.append(_Level(start, w, L, term, tuple(msgs), sep))
        start += L
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
    building the plan (the width of the order :func:`make_plan` would use, levels or not);
    :class:`TooWide` when the tables would exceed ``max_table``."""
    return _limits(_order(_interaction(scopes), _check_cap(max_table), exact_ties,
                          levels)[2])


def _order(adj, max_table: int, exact_ties: bool, levels):
    """``(levels or None, order, separators)`` of the elimination :func:`make_plan` uses."""
    if levels is not None and not isinstance(levels, (bool, np.bool_)):
        raise ValueError(f"dp: levels: must be true, false or None; got {levels!r}")
    if levels and exact_ties:
        raise ValueError("dp: levels=True needs exact_ties=False: the vertex enumerator's "
                         "tie rule assigns the coordinates one at a time, in decreasing index")
    kept = {}  # the eliminations computed so far, by ``ordered`` (a refusal is not kept)

    def elimination(ordered: bool):
        if ordered not in kept:
            kept[ordered] = _elimination(adj, ordered, max_table)
        return kept[ordered]

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
            self.level_data, self.position = _level_arrays(lv, seps, index, mask, n, k, w)
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
        """Table entries one solve holds at once: every bucket's for the level plan (each level's
        messages and bits are kept for the back-tracking), the back-tracking's half rows
        (``n 2^w``) and the pending buckets (:func:`_pending_slots`) for the sequential one."""
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

    ``exact_ties=False`` drops the order restriction (the narrower of plain and restricted
    min-fill: a smaller width where the numbering is bad, e.g. a tree numbered from its root):
    the minimum is still exact, but among several minimisers the one kept is not necessarily
    the vertex enumerator's.

    ``levels``: eliminate many variables at once (see the module docstring), ``plan.levels``
    the variables of each level. ``None`` (default): levels exactly when ``exact_ties=False``
    (falling back to the sequential min-fill order when the levels' tables would exceed the
    cap); ``True`` needs ``exact_ties=False``; ``False``: the sequential order.

    The last few plans are kept (a plan is read-only): the same scopes and options return the
    same :class:`Plan` without the elimination again (seconds at ``n = 10^4``; a run builds its
    config twice, for :func:`gsjax.experiment.memory_needed` and to run)."""
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
    DP (``s_init``, its LCB value, a zero residual): for ``jax.eval_shape`` of a whole run
    (:func:`gsjax.experiment.memory_needed`), whose tracing the levels' unrolled gathers
    would otherwise dominate. Never for numbers."""
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
    if plan.levels is not None:
        # the bits are piecewise constant in the inputs: no derivative flows through them (and
        # the batching rule has no differentiation rule)
        args = jax.lax.stop_gradient((free, s_init, terms.theta_hat, terms.inv, terms.beta))
        x = _level_solver(plan)(_level_tables(plan), *args)
        s = jnp.where(free, x.astype(dtype), s_init)
        return s, objective.value(s), jnp.zeros((), dtype)
    # as for the levels: the bits carry no derivative, and the batching rule has no JVP
    if plan.exact_ties:  # the criteria tables in the vertex enumerator's arithmetic
        args = (_criterion_tables(plan, terms, s_init, free),)
    else:  # multiplied out seed-last in the batching rule, as the levels do (a grid's whole
        # solve 1.65-1.85x faster, benchmarks/RESULTS.md)
        args = (free, s_init, terms.theta_hat, terms.inv, terms.beta)
    x = _sequential_solver(plan)(_sequential_tables(plan), *jax.lax.stop_gradient(args))
    s = jnp.where(free, x.astype(dtype), s_init)
    return s, objective.value(s), jnp.zeros((), dtype)


def _criterion_tables(plan: Plan, terms, s_init, free):
    """(k, 2^m) each criterion's LCB term on every assignment of its scope's bits (the entries
    of a non-free coordinate all at its ``s_init``): :func:`gsjax.lcb.lcb_terms`, the vertex
    enumerator's arithmetic."""
    bits = jnp.asarray(bit_table(plan.scope_size), s_init.dtype)  # (2^m, m)

    def table(idx, smask, th, iv, bt):
        phi = jnp.where(free[idx], bits, s_init[idx])
        return lcb_terms(jnp.where(smask, phi, 0.0), th, iv, bt)

    return jax.vmap(table)(jnp.asarray(plan.index), jnp.asarray(plan.mask), terms.theta_hat,
                           terms.inv, terms.beta)


def _sequential_solver(plan: Plan):
    """The sequential plan's solver of one objective, ``(plan_tables, tables (k, 2^m)) -> x``
    ((n,) int32 bits; ``plan_tables``: :func:`_sequential_tables`), batched with the seed axis
    last (:func:`_batched_solver`, :func:`_sequential_batched`): each scan step moves rows of
    contiguous seeds where JAX's default batching makes per-entry loops of its gathers. Without
    exact ties it takes ``(plan_tables, free, s_init, theta_hat, inv, beta)`` as the level
    plan's solver does, and multiplies the criteria tables out seed-last (:func:`_terms`)."""
    return _batched_solver(functools.partial(_sequential_batched, plan),
                           seeds_first=_has_active_path(plan))


def _sequential_tables(plan: Plan) -> dict:
    """The sequential plan's static index tables as arrays (see :func:`_batched_solver` on why
    they are an argument): the scan's steps, each bucket's criteria (``crit``; ``k`` pads),
    each criterion's flat table entries in a bucket (``offset``: ``i 2^m + entry``; row ``k``
    reads a zero row), and the back-tracking's steps. ``v_touched``, ``p_touched``: whether a
    step's variable, and its parent, already hold a message (else their buckets are built from
    the criteria tables at that step); ``v_slot``, ``p_slot``: the rows of the scan's pending
    buffer that hold them (:func:`_pending_slots`); ``down_step``: the scan step that
    eliminated each back-tracked variable."""
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
            "order": jnp.asarray(order),
            "parent": jnp.asarray(parent), "msg": jnp.asarray(plan.msg[order]),
            "v_touched": jnp.asarray(v_touched), "p_touched": jnp.asarray(p_touched),
            "v_slot": jnp.asarray(plan.v_slot), "p_slot": jnp.asarray(plan.p_slot),
            "down": jnp.asarray(down),
            "down_step": jnp.asarray(step[down]),
            "sep": jnp.asarray(plan.clique[down, 1:]),
            **({"clique": jnp.asarray(plan.clique[order]), "term": jnp.asarray(plan.term)}
               if _has_active_path(plan) else {})}


def _pending_slots(order, parent) -> tuple[np.ndarray, np.ndarray, int]:
    """``(v_slot, p_slot, slots)``: a row of the scan's pending buffer for every bucket that
    holds messages, from its first message to its own elimination (the roots' row ``n`` to the
    end), rows reused once free (the lowest free first). ``v_slot[t]``: the row step ``t``'s
    variable is read from (0 when it has no message), ``p_slot[t]``: its parent's, read and
    written. A 4 x n/4 grid numbered along its short side has about its width's rows live at
    once, where a row per variable was ``n + 1``."""
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
    """Whether the sequential plan's solver compiles :func:`_active_batched` in (a static
    choice: no exact ties, at least :data:`ACTIVE_MIN_COORDS` coordinates)."""
    return (plan.levels is None and not plan.exact_ties
            and plan.num_coords >= ACTIVE_MIN_COORDS)


def _sequential_batched(plan: Plan, pt: dict, *args):
    """:func:`_scan_batched` (batch axis last); for a plan with an active path
    (:func:`_has_active_path`) the arguments come batch FIRST, and each seed with few active
    steps and live criteria (its own counts, at most ``1 / ACTIVE_SHARE`` of each) is solved by
    :func:`_active_batched`, every other seed by the whole scan: a batch of both kinds runs
    both and takes each seed's from its own path, so that a seed's answer never depends on the
    seeds solved beside it (DESIGN section 3: the same in any batch, buffer or device count;
    the two paths may differ on near ties). Only the whole scan moves the seeds last (the move
    of ``inv`` alone, ``k m^2`` entries a seed, was a fifth of an active solve at ``n = 10^4``).
    Returns the bits (n, B), or (B, n) batch first."""
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
    """``(indices, rank)``: (B, size) the indices where each row of ``mask`` (B, columns) is
    true, in order, 0 past their number (at most ``size``); (B, columns) each true entry's
    place among them, ``size`` where false."""
    rank = jnp.where(mask, jnp.cumsum(mask, axis=1, dtype=jnp.int32) - 1, size)
    return jnp.zeros((mask.shape[0], size), jnp.int32).at[
        jnp.arange(mask.shape[0])[:, None], rank].set(
        jnp.arange(mask.shape[1], dtype=jnp.int32), mode="drop"), rank


def _active_batched(plan: Plan, pt: dict, active, live, free, s_init, theta_hat, inv, beta):
    """The sequential plan's DP of ``B`` conditioned objectives (batch axis FIRST: ``free``,
    ``s_init`` (B, n), ``theta_hat`` (B, k, m), ``inv`` (B, k, m, m), ``beta`` (B, k)) over
    each seed's active steps only: ``active`` (B, n steps), a step whose clique holds a free
    coordinate, ``live`` (B, k), a criterion whose scope does (at most ``n // ACTIVE_SHARE``
    and ``k // ACTIVE_SHARE`` per seed; a seed with neither walks no step: its bits are 0).
    Tables are constant along fixed bits, so a criterion that is not live and a step that is
    not active only add constants to the total, and dropping them changes no minimiser. The
    live criteria's LCB terms are multiplied out once (as :func:`_terms`, for those criteria
    only); then each seed walks its own active steps in elimination order, a bucket summed from
    its live criteria's tables when first read, its pending rows tagged with the variable they
    hold (a row left by a skipped step is never taken for another's). The loop runs the batch's
    largest count; a seed past its own count changes nothing. Back-tracking as the whole
    scan's, over the same steps in reverse. The minimum is that of the live part, so the tie
    tolerance ``64 eps max(1, |min|)`` is that of a smaller total: on near ties the bits may
    differ from the whole scan's, each a minimiser (tests/test_dp.py). Returns the (B, n) bits."""
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

    # A step's parent may be inactive (its clique without a free coordinate): the message is
    # then constant, and the row written for it is never read (its step is not walked; the
    # owner tag keeps the row from being taken for another's). Writing it anyway costs one
    # bucket a step and keeps the per-seed step free of a branch on the parent.
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
    """The sequential plan's DP of ``B`` objectives, the batch axis LAST: ``args`` the
    criteria's terms on every assignment of their scopes, ``(k, 2^m, B)``, or (without exact
    ties) what :func:`_terms` makes them of; returns the (n, B) bits.

    One ``lax.scan`` step a variable: its bucket (the criteria tables placed and summed in a
    fixed order, plus the messages it holds), the min over its own bit (slot 0), the message
    added to its parent's bucket (row ``n`` for the roots). A bucket is built from the
    criteria tables when first read, not for every variable up front (at ``n = 10^3`` on a
    4 x n/4 grid that table of ``n 2^9`` entries a seed was most of the solve); the sums are
    those of the whole table, in the same order. The buckets that hold messages live in a
    small buffer of rows reused once read (:func:`_pending_slots`), and what the
    back-tracking needs of each variable's bucket, the cost of its bit at 0 over 1 for every
    separator assignment, ``max(t[2r] - t[2r + 1], 0)``, is the scan's output: a table of
    ``(n + 1) 2^(w+1)`` entries a seed zero-filled for every solve was 32 of 70 ms of a
    4-objective solve at ``n = 10^4`` (``benchmarks/dp_batching.py --plan sequential``).
    Then the back-tracking in decreasing index (exact ties: the vertex enumerator's tie rule,
    see the module docstring), each variable after its separator, carrying the value of the
    best completion."""
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
    """``(min, argmin)`` over axis 2 (the own bit, size 2) of ``(L, 2^w, 2, B)``, elementwise:
    bit 1 where its entry is strictly lower (ties go to bit 0). Two slices and a select, which
    XLA splits over threads; a variadic ``lax.reduce`` of the pair (the same answer on finite
    tables) ran the level DP 1.15x (n = 10^3) to 1.4x (n = 10^4, 6 seeds) slower."""
    zero, one = pair[:, :, 0], pair[:, :, 1]
    take = one < zero
    return jnp.where(take, one, zero), take.astype(jnp.int32)


def _batched_solver(batched, seeds_first: bool = False):
    """The solver of one objective made of ``batched(plan_tables, *args)``, which solves ``B``
    objectives with the batch axis LAST of every argument and of its result, with its own
    batching rule: under ``vmap`` the seeds go on that last axis, so the plan's static gathers
    copy rows of contiguous seeds instead of looping over single entries. Each seed's
    arithmetic is the same either way (unbatched, ``B = 1``).

    The plan's index tables are an argument, not constants of the function: a ``lax.cond``
    under ``vmap`` (the per-seed form of the runner) batches whatever its branches read, and a
    batching rule may not see batched constants; batched tables are the same in every row, so
    the rule reads row 0.

    ``seeds_first``: ``batched`` takes and returns the batch axis FIRST instead (and moves
    what it needs itself)."""
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
            a = jnp.expand_dims(a, axis)
            shape = list(a.shape)
            shape[axis] = axis_size
            return jnp.broadcast_to(a, shape)

        args = [jnp.moveaxis(a, 0, axis) if rows else spread(a)
                for a, rows in zip(args, in_batched[1:])]
        return jnp.moveaxis(batched(plan_tables, *args), axis, 0), True

    return solve


def _level_solver(plan: Plan):
    """The level plan's solver of one objective, ``(tables, free, s_init, theta_hat, inv,
    beta) -> x`` ((n,) int32 bits; ``tables``: :func:`_level_tables`), batched with the seed
    axis last (:func:`_batched_solver`, :func:`_levels_batched`)."""
    return _batched_solver(functools.partial(_levels_batched, plan))


def _level_tables(plan: Plan) -> dict:
    """The level plan's static index tables as arrays (see :func:`_batched_solver`)."""
    return {**_term_tables(plan), "position": jnp.asarray(plan.position),
            "levels": [{"term": jnp.asarray(lv.term), "sep": jnp.asarray(lv.sep),
                        "msg": [jnp.asarray(idx) for _, idx in lv.msg]}
                       for lv in plan.level_data]}


def _levels_batched(plan: Plan, tables: dict, free, s_init, theta_hat, inv, beta):
    """The level plan's DP of ``B`` objectives, the batch axis LAST: ``free``, ``s_init``
    (n, B), ``theta_hat`` (k, m, B), ``inv`` (k, m, m, B), ``beta`` (k, B); ``tables``: the
    plan's index tables (:func:`_level_tables`). Returns the (n, B) bits in coordinate order.

    The criteria's term tables on every assignment of their scopes (the LCB terms multiplied
    out elementwise); then the buckets of a level gathered at once (criteria tables and the
    messages of its children, static row indices, fixed summation order), their messages (min
    over the own bit) kept per level with the own bit that attains it (0 on a tie); then the
    levels in reverse, each variable's bit read at its separator's bits."""
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
    non-free coordinate at its ``s_init``), ``B`` objectives on the last axis: multiplied out
    elementwise, the seeds contiguous (not the vertex enumerator's arithmetic: the last bits
    may differ, so only plans without exact ties use it)."""
    dtype = s_init.dtype
    index = tables["index"]
    bits = tables["bits"].astype(dtype)[None, :, :, None]  # (1, 2^m, m, 1)
    phi = jnp.where(free[index][:, None], bits, s_init[index][:, None])
    phi = jnp.where(tables["mask"][:, None, :, None], phi, 0.0)  # (k, 2^m, m, B)
    return _lcb_entries(phi, theta_hat, inv, beta, 1)


def _lcb_entries(phi, theta_hat, inv, beta, e: int):
    """The LCB terms ``<phi, theta> - beta sqrt(phi' V^-1 phi)`` of feature rows ``phi``
    ``(..., E, m, *tail)`` (the entries on axis ``e``, the scope's coordinates next), with
    ``theta_hat`` ``(..., m, *tail)``, ``inv`` ``(..., m, m, *tail)``, ``beta`` ``(...,
    *tail)``: ``(..., E, *tail)``, multiplied out elementwise (``tail``: the seed axis of
    :func:`_terms`, none in :func:`_active_batched`)."""
    quad = jnp.sum(phi * jnp.sum(jnp.expand_dims(inv, e) * jnp.expand_dims(phi, e + 1),
                                 axis=e + 2), axis=e + 1)
    return (jnp.sum(phi * jnp.expand_dims(theta_hat, e), axis=e + 1)
            - jnp.expand_dims(beta, e) * jnp.sqrt(jnp.maximum(quad, _TINY)))


def _take(a, idx):
    """``a[idx]`` (rows of ``a``) at indices known to be in bounds (no index normalisation:
    XLA would fold it over the static index arrays, slowly)."""
    return a.at[idx].get(mode="promise_in_bounds")
