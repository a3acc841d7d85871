"""Scopes and dependency graphs as index arrays plus masks (DESIGN section 1).

A problem has ``k`` criteria over ``n`` coordinates. Criterion ``i`` reads the coordinates in
its *scope* ``N(i)``; scopes are stored as a ``(k, m)`` int32 index array padded with 0 and a
``(k, m)`` bool mask, ``m`` the largest scope. Two views share this structure:

* blocks (Sections 7.1, 7.2): criterion ``i`` owns the disjoint block
  ``[i d, ..., i d + d - 1]``;
* dependency graphs (Section 3): ``n = k`` and ``N(i)`` is the closed neighbourhood of node
  ``i``, with ``i`` itself FIRST (the pairwise-quadratic features of Example 1 need to know
  which coordinate is the node's own), then its neighbours in increasing order.

Graph generators run on the host (NumPy) once per problem: they fix shapes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "Scopes",
    "block_scopes",
    "graph_scopes",
    "chain_edges",
    "grid_edges",
    "complete_edges",
    "random_bounded_degree_edges",
    "scopes_are_disjoint",
]


class Scopes(NamedTuple):
    """Scopes of ``k`` criteria over ``n`` coordinates (host arrays)."""

    index: np.ndarray  # (k, m) int32, padded with 0
    mask: np.ndarray  # (k, m) bool
    num_coords: int  # n


def block_scopes(num_blocks: int, block_dim: int) -> Scopes:
    """Disjoint blocks: criterion ``i`` owns coordinates ``i*d .. i*d + d - 1``."""
    if num_blocks < 1 or block_dim < 1:
        raise ValueError("num_blocks and block_dim must be >= 1")
    index = np.arange(num_blocks * block_dim, dtype=np.int32).reshape(num_blocks, block_dim)
    return Scopes(index, np.ones_like(index, dtype=bool), num_blocks * block_dim)


def _normalise_edges(num_nodes: int, edges) -> list[tuple[int, int]]:
    out = set()
    for e in edges:
        i, j = int(e[0]), int(e[1])
        if not (0 <= i < num_nodes and 0 <= j < num_nodes):
            raise ValueError(f"edge {(i, j)} out of range for {num_nodes} nodes")
        if i == j:
            raise ValueError(f"self-loop {(i, j)}: scopes are closed neighbourhoods already")
        out.add((min(i, j), max(i, j)))
    return sorted(out)


def graph_scopes(num_nodes: int, edges) -> Scopes:
    """Closed neighbourhoods of an undirected graph: ``N(i) = {i} + neighbours(i)``.

    Args:
      num_nodes: ``n = k``.
      edges: iterable of ``(i, j)`` pairs; duplicates and orientation are ignored.
    """
    if num_nodes < 1:
        raise ValueError("num_nodes must be >= 1")
    nbrs = [set() for _ in range(num_nodes)]
    for i, j in _normalise_edges(num_nodes, edges):
        nbrs[i].add(j)
        nbrs[j].add(i)
    rows = [[i] + sorted(nbrs[i]) for i in range(num_nodes)]
    m = max(len(r) for r in rows)
    index = np.zeros((num_nodes, m), np.int32)
    mask = np.zeros((num_nodes, m), bool)
    for i, r in enumerate(rows):
        index[i, : len(r)] = r
        mask[i, : len(r)] = True
    return Scopes(index, mask, num_nodes)


def chain_edges(num_nodes: int) -> list[tuple[int, int]]:
    """Path graph ``0 - 1 - ... - (n-1)``."""
    return [(i, i + 1) for i in range(num_nodes - 1)]


def grid_edges(rows: int, cols: int) -> list[tuple[int, int]]:
    """4-neighbour grid; node ``r * cols + c``."""
    edges = []
    for r in range(rows):
        for c in range(cols):
            v = r * cols + c
            if c + 1 < cols:
                edges.append((v, v + 1))
            if r + 1 < rows:
                edges.append((v, v + cols))
    return edges


def complete_edges(num_nodes: int) -> list[tuple[int, int]]:
    """Every pair of nodes."""
    return [(i, j) for i in range(num_nodes) for j in range(i + 1, num_nodes)]


def random_bounded_degree_edges(
    num_nodes: int, max_degree: int, num_edges: int, seed: int
) -> list[tuple[int, int]]:
    """A random simple graph with every degree ``<= max_degree``.

    Candidate pairs are visited in a random order (NumPy ``default_rng(seed)``) and kept while
    both endpoints have spare degree, until ``num_edges`` are kept or the pairs run out. The
    result is a deterministic function of the arguments; it may hold fewer than ``num_edges``
    edges when the degree bound makes more impossible to reach greedily.
    """
    rng = np.random.default_rng(seed)
    deg = np.zeros(num_nodes, int)
    kept: list[tuple[int, int]] = []
    if num_nodes < 2 or num_edges == 0:
        return kept
    iu, ju = np.triu_indices(num_nodes, k=1)
    for p in rng.permutation(len(iu)):
        i, j = int(iu[p]), int(ju[p])
        if deg[i] < max_degree and deg[j] < max_degree:
            kept.append((i, j))
            deg[i] += 1
            deg[j] += 1
            if len(kept) == num_edges:
                break
    return sorted(kept)


def scopes_are_disjoint(scopes: Scopes) -> bool:
    """True when no coordinate is read by two criteria (the block view)."""
    used = scopes.index[scopes.mask]
    return len(np.unique(used)) == len(used)
