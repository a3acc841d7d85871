"""Scopes and dependency graphs as index arrays plus masks (DESIGN section 1).

Criterion ``i`` of ``k`` reads the coordinates (of ``n``) in its *scope* ``N(i)``, stored as a
``(k, m)`` int32 index array padded with 0 and a ``(k, m)`` bool mask, ``m`` the largest scope:

* blocks (Sections 7.1, 7.2): criterion ``i`` owns the disjoint block ``[i d, ..., i d + d - 1]``;
* dependency graphs (Section 3): ``n = k`` and ``N(i)`` is the closed neighbourhood of node
  ``i``, ``i`` itself FIRST (the quadratic features of Example 1 need the node's own
  coordinate), then its neighbours in increasing order.

Everything runs on the host (NumPy), once per problem. The builders and :func:`check_scopes`
(for scopes built by hand) raise ``ValueError`` naming the argument.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gsjax.checks import integer as _integer
from gsjax.checks import positive_integer as _positive_integer

__all__ = ["Scopes", "block_scopes", "graph_scopes", "scopes_from_rows", "padded", "check_scopes",
           "chain_edges", "grid_edges", "complete_edges", "random_bounded_degree_edges",
           "scopes_are_disjoint", "scopes_are_blocks"]


class Scopes(NamedTuple):
    """Scopes of ``k`` criteria over ``n`` coordinates (host arrays)."""

    index: np.ndarray  # (k, m) int32, padded with 0
    mask: np.ndarray  # (k, m) bool
    num_coords: int  # n


def block_scopes(num_blocks: int, block_dim: int) -> Scopes:
    """Disjoint blocks: criterion ``i`` owns coordinates ``i*d .. i*d + d - 1``; ``ValueError``
    unless both arguments are integers ``>= 1``."""
    num_blocks = _positive_integer(num_blocks, "block_scopes: num_blocks")
    block_dim = _positive_integer(block_dim, "block_scopes: block_dim")
    index = np.arange(num_blocks * block_dim, dtype=np.int32).reshape(num_blocks, block_dim)
    return Scopes(index, np.ones_like(index, dtype=bool), num_blocks * block_dim)


def _normalise_edges(num_nodes: int, edges) -> list[tuple[int, int]]:
    """Sorted distinct ``(min, max)`` pairs, each checked (``ValueError`` naming ``edges[e]``)."""
    out = set()
    for e, edge in enumerate(edges):
        name = f"graph_scopes: edges[{e}]"
        pair = tuple(edge) if np.iterable(edge) else ()
        if len(pair) != 2:
            raise ValueError(f"{name}: expected a pair (i, j) of node indices, got {edge!r}")
        i, j = (_integer(v, name) for v in pair)
        if not (0 <= i < num_nodes and 0 <= j < num_nodes):
            raise ValueError(f"{name} = {(i, j)} is out of range for num_nodes = {num_nodes} "
                             f"(node indices lie in [0, {num_nodes}))")
        if i == j:
            raise ValueError(f"{name}: self-loop not allowed (scopes are closed neighbourhoods "
                             f"already), got {(i, j)}")
        out.add((min(i, j), max(i, j)))
    return sorted(out)


def graph_scopes(num_nodes: int, edges) -> Scopes:
    """Closed neighbourhoods of an undirected graph: ``N(i) = {i} + neighbours(i)``.

    ``num_nodes`` (``n = k``): an integer ``>= 1``; ``edges``: ``(i, j)`` pairs of integers in
    ``[0, num_nodes)``, ``i != j`` (duplicates and orientation ignored). ``ValueError`` naming
    ``num_nodes`` or the offending ``edges[e]``.
    """
    num_nodes = _positive_integer(num_nodes, "graph_scopes: num_nodes")
    nbrs = [set() for _ in range(num_nodes)]
    for i, j in _normalise_edges(num_nodes, edges):
        nbrs[i].add(j)
        nbrs[j].add(i)
    return padded([[i] + sorted(nbrs[i]) for i in range(num_nodes)], num_nodes)


def padded(rows, num_coords: int) -> Scopes:
    """Rows of indices as :class:`Scopes`, padded with 0 to the longest row (no checks)."""
    m = max(len(r) for r in rows)
    index = np.zeros((len(rows), m), np.int32)
    mask = np.zeros((len(rows), m), bool)
    for i, r in enumerate(rows):
        index[i, : len(r)] = r
        mask[i, : len(r)] = True
    return Scopes(index, mask, num_coords)


def scopes_from_rows(rows, num_coords: int) -> Scopes:
    """Scopes from one sequence of coordinate indices per criterion, in scope order.

    ``rows[i]`` lists the coordinates criterion ``i`` reads (the first: its own for the
    quadratic features): at least one row, each non-empty, of distinct integers in
    ``[0, num_coords)``; the result passes :func:`check_scopes`.
    """
    num_coords = _positive_integer(num_coords, "scopes_from_rows: num_coords")
    rows = list(rows)
    if not rows:
        raise ValueError("scopes_from_rows: rows: expected at least one criterion, got []")
    out = []
    for i, row in enumerate(rows):
        name = f"scopes_from_rows: rows[{i}]"
        if not np.iterable(row):
            raise ValueError(f"{name}: expected a sequence of coordinate indices, got {row!r}")
        entries = list(row)
        if not entries:
            raise ValueError(f"{name}: a scope must hold at least one coordinate, got []")
        out.append([_integer(v, name) for v in entries])
    return check_scopes(padded(out, num_coords), where="scopes_from_rows")


def check_scopes(scopes: Scopes, num_coords: int | None = None, *,
                 where: str = "check_scopes") -> Scopes:
    """Check a :class:`Scopes` and return it with NumPy ``index`` and ``mask``.

    ``ValueError`` prefixed ``where`` and naming the entry unless: ``scopes.num_coords`` is an
    integer ``>= 1`` (equal to ``num_coords`` when given); ``index`` a ``(k, m)`` integer array,
    ``k, m >= 1``; ``mask`` a bool array of its shape; every scope non-empty, its unmasked
    indices distinct and in ``[0, num_coords)`` (JAX gathers would wrap or clamp a negative
    one silently). Masked (padding) entries are not checked: every reader masks them.
    """
    n = _positive_integer(scopes.num_coords, f"{where}: scopes.num_coords")
    if num_coords is not None and n != num_coords:
        raise ValueError(
            f"{where}: scopes.num_coords: must equal the structure's num_coords = {num_coords}, "
            f"got {n}"
        )
    index, mask = np.asarray(scopes.index), np.asarray(scopes.mask)
    if index.ndim != 2 or 0 in index.shape:
        raise ValueError(f"{where}: scopes.index: expected a (k, m) array with k, m >= 1, "
                         f"got shape {index.shape}")
    if not np.issubdtype(index.dtype, np.integer):
        raise ValueError(f"{where}: scopes.index: expected an integer array, "
                         f"got dtype {index.dtype}")
    if mask.shape != index.shape:
        raise ValueError(f"{where}: scopes.mask: must have the shape of scopes.index "
                         f"{index.shape}, got {mask.shape}")
    if mask.dtype != np.bool_:
        raise ValueError(f"{where}: scopes.mask: expected a bool array, got dtype {mask.dtype}")
    empty = np.flatnonzero(~mask.any(axis=1))
    if empty.size:
        i = int(empty[0])
        raise ValueError(f"{where}: scopes.mask[{i}]: criterion {i} has an empty scope "
                         f"(no unmasked entry), got {mask[i].tolist()}")
    bad = np.argwhere(mask & ((index < 0) | (index >= n)))
    if bad.size:
        i, j = (int(v) for v in bad[0])
        v = int(index[i, j])
        why = "negative indices are not allowed" if v < 0 else f"num_coords = {n}"
        raise ValueError(f"{where}: scopes.index[{i}, {j}]: coordinate index out of range "
                         f"[0, {n}) ({why}), got {v}")
    # padding becomes distinct negative sentinels, so only real entries (>= 0) can collide
    m = index.shape[1]
    keyed = np.where(mask, index.astype(np.int64), -1 - np.arange(m, dtype=np.int64)[None, :])
    srt = np.sort(keyed, axis=1)
    rows = np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1))
    if rows.size:
        i = int(rows[0])
        dup = srt[i, 1:][srt[i, 1:] == srt[i, :-1]][0]
        at = np.flatnonzero(mask[i] & (index[i] == dup)).tolist()
        raise ValueError(f"{where}: scopes.index[{i}]: criterion {i} lists coordinate {int(dup)} "
                         f"more than once (entries {at}), got {index[i][mask[i]].tolist()}")
    return Scopes(index, mask, n)


def chain_edges(num_nodes: int) -> list[tuple[int, int]]:
    """Path graph ``0 - 1 - ... - (n-1)``."""
    return [(i, i + 1) for i in range(num_nodes - 1)]


def grid_edges(rows: int, cols: int) -> list[tuple[int, int]]:
    """4-neighbour grid; node ``r * cols + c``."""
    cells = [(r, c, r * cols + c) for r in range(rows) for c in range(cols)]
    return [e for r, c, v in cells
            for e in ((v, v + 1),) * (c + 1 < cols) + ((v, v + cols),) * (r + 1 < rows)]


def complete_edges(num_nodes: int) -> list[tuple[int, int]]:
    """Every pair of nodes."""
    return [(i, j) for i in range(num_nodes) for j in range(i + 1, num_nodes)]


def random_bounded_degree_edges(num_nodes: int, max_degree: int, num_edges: int,
                                seed: int) -> list[tuple[int, int]]:
    """A random simple graph with every degree ``<= max_degree``: pairs in a random order
    (NumPy ``default_rng(seed)``), each kept while both ends have spare degree, until
    ``num_edges`` are kept (fewer when the pairs run out)."""
    if num_nodes < 2 or num_edges == 0:
        return []
    deg, kept = np.zeros(num_nodes, int), []
    iu, ju = np.triu_indices(num_nodes, k=1)
    for p in np.random.default_rng(seed).permutation(len(iu)):
        i, j = int(iu[p]), int(ju[p])
        if deg[i] < max_degree and deg[j] < max_degree:
            kept.append((i, j))
            deg[i] += 1
            deg[j] += 1
            if len(kept) == num_edges:
                break
    return sorted(kept)


def scopes_are_blocks(scopes: Scopes) -> bool:
    """True when the scopes are ``arange(n).reshape(k, m)``, all real: reading them is a reshape."""
    k, m = scopes.index.shape
    return (k * m == scopes.num_coords and bool(np.all(scopes.mask))
            and np.array_equal(scopes.index, np.arange(k * m).reshape(k, m)))


def scopes_are_disjoint(scopes: Scopes) -> bool:
    """True when no coordinate is read by two criteria (the block view)."""
    used = scopes.index[scopes.mask]
    return len(np.unique(used)) == len(used)
