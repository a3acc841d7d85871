"""Plain float64 NumPy reference of LinUCB / LazyGraphLinUCB / Async-LazyGraphLinUCB.

Written from DESIGN section 2 and the gsjax docstrings only (no jax, no gsjax import), as the
independent side of the step-for-step equivalence tests in ``test_algorithms.py``:

* linear features ``phi_i(s) = s|_{N(i)}`` on DISJOINT blocks;
* ridge statistics per criterion ``V = lambda_i I + sum phi phi^T``, ``b = sum phi y``,
  ``theta_hat = V^{-1} b``, ``log det V`` -- all recomputed from scratch every round with
  ``np.linalg.solve`` / ``np.linalg.inv`` / ``np.linalg.slogdet`` (no Sherman--Morrison);
* the LCB of eq. 7 with constant ``beta_i``, ``||phi||_{V^{-1}} = sqrt(max(q, 1e-12))`` (the
  documented guard), minimised EXACTLY by enumerating the vertices of each free block; vertex
  ``p`` sets the j-th free coordinate of a block to bit j of ``p``, and among values equal up
  to rounding (relative 1e-12) the lowest ``p`` wins (see ``follow_ties`` for the exception);
* the first policy is the LCB minimiser under the prior statistics, from ``s0``;
* the update of round t produces the policy of round t + 1; a criterion triggers when
  ``log det V_i - log det V_i(ref) > log_trigger``:

  - ``linucb``: re-minimise every round over all coordinates, every criterion updated and
    every reference reset;
  - ``lazy``: re-minimise over all coordinates when ANY criterion triggers, every criterion
    counts an update; reference ``"global"`` resets all references, ``"own"`` only the
    triggering criteria's;
  - ``async_lazy``: re-minimise only the blocks of the triggering criteria (others fixed), only
    they count an update and reset their reference.

Regret: ``sum_t L(s_t) - L(s*)`` with ``s*`` found by brute force over all vertices of the box,
and movement ``move_cost * ||s_t - s_{t-1}||_1`` with ``s_0`` the start.
"""

from __future__ import annotations

import itertools

import numpy as np

__all__ = ["run_reference", "brute_force_linear_minimiser", "TINY"]

TINY = 1e-12
_TIE_RTOL = 1e-12


def _vertex_values(verts: np.ndarray, theta_hat: np.ndarray, inv: np.ndarray, beta: float):
    """LCB term of one block at each candidate vertex (rows of ``verts``)."""
    vals = np.empty(len(verts))
    for p, v in enumerate(verts):
        q = float(v @ inv @ v)
        vals[p] = float(v @ theta_hat) - beta * np.sqrt(max(q, TINY))
    return vals


def _minimisers(vals: np.ndarray) -> np.ndarray:
    """Indices of the values equal to the minimum up to rounding (relative 1e-12), ascending."""
    best = vals.min()
    tol = _TIE_RTOL * max(1.0, abs(best))
    return np.flatnonzero(vals <= best + tol)


def _block_vertices(current: np.ndarray) -> np.ndarray:
    """All ``2^m`` vertices of an m-dimensional block; row p has bit j of p in column j."""
    m = len(current)
    return np.array([[(p >> j) & 1 for j in range(m)] for p in range(2**m)], dtype=np.float64)


def brute_force_linear_minimiser(coef: np.ndarray) -> tuple[np.ndarray, float]:
    """Minimiser of ``coef . s`` over ALL vertices of ``[0,1]^n`` (brute force, small n)."""
    n = len(coef)
    best_v, best = None, np.inf
    for bits in itertools.product((0.0, 1.0), repeat=n):
        v = np.array(bits)
        val = float(coef @ v)
        if val < best:
            best_v, best = v, val
    return best_v, best


def run_reference(
    kind: str,
    scopes: np.ndarray,
    theta: np.ndarray,
    s0: np.ndarray,
    lambda_reg: np.ndarray,
    beta: np.ndarray,
    log_trigger: float,
    eta: np.ndarray,
    move_cost: float,
    reference: str = "global",
    follow_ties: np.ndarray | None = None,
) -> dict:
    """Run one algorithm for ``T = len(eta)`` rounds.

    Args:
      kind: "linucb" | "lazy" | "async_lazy".
      scopes: k rows of coordinate indices, disjoint blocks of any sizes (a (k, m) array of
        equal blocks, or a list of rows).
      theta: k rows of true parameters (row i: at least len(scopes[i]) entries; extra
        entries, e.g. padding, are ignored).
      s0: (n,) start.
      lambda_reg, beta: (k,).
      log_trigger: log of the determinant ratio that triggers.
      eta: (T, k) noise of each round.
      move_cost: movement weight.
      reference: lazy only, "global" | "own".
      follow_ties: optional (T, n) actions of another implementation. Where a block's LCB
        has SEVERAL minimising vertices (equal up to a relative 1e-12: ties of exact
        arithmetic that rounding may split either way) and the other implementation's
        next action is one of them, that one is taken instead of the lowest index, so the
        comparison can continue; ``ties_followed`` counts these. Without it, the documented
        rule (lowest vertex index) is applied to every tie.

    Returns:
      dict of ``actions`` (T, n), ``triggered`` (T, k), ``updated`` (T, k),
      ``reoptimised`` (T,), ``regret`` (T,) and ``movement`` (T,) cumulative,
      ``loss_star``, ``s_star``, ``ties_seen``, ``ties_followed`` and ``ties``: a list of
      ``(round index of the action decided, block, tied vertex indices)``.
    """
    # Blocks may have different sizes: row i of scopes (and of theta) is criterion i's.
    scopes = [np.asarray(r, np.int64) for r in scopes]
    theta = [np.asarray(th, np.float64)[: len(r)] for th, r in zip(theta, scopes)]
    k = len(scopes)
    n = int(s0.shape[0])
    flat = np.concatenate(scopes)
    assert len(np.unique(flat)) == flat.size, "reference handles disjoint blocks only"
    T = eta.shape[0]

    coef = np.zeros(n)
    for i in range(k):
        coef[scopes[i]] += theta[i]
    s_star, loss_star = brute_force_linear_minimiser(coef)

    V = [lam * np.eye(len(r)) for lam, r in zip(np.asarray(lambda_reg, np.float64), scopes)]
    b = [np.zeros(len(r)) for r in scopes]

    def logdets():
        return np.array([np.linalg.slogdet(V[i])[1] for i in range(k)])

    ties = {"seen": 0, "followed": 0, "log": []}

    def solve(s_from: np.ndarray, free_blocks: np.ndarray, target, t_next: int) -> np.ndarray:
        s_new = s_from.copy()
        for i in range(k):
            if not free_blocks[i]:
                continue
            inv = np.linalg.inv(V[i])
            th = np.linalg.solve(V[i], b[i])
            verts = _block_vertices(s_from[scopes[i]])
            vals = _vertex_values(verts, th, inv, float(beta[i]))
            cands = _minimisers(vals)
            choice = cands[0]
            if len(cands) > 1:
                ties["seen"] += 1
                ties["log"].append((t_next, i, tuple(int(p) for p in cands)))
                if target is not None:
                    hit = [p for p in cands if np.array_equal(verts[p], target[scopes[i]])]
                    if hit and hit[0] != choice:
                        choice = hit[0]
                        ties["followed"] += 1
            s_new[scopes[i]] = verts[choice]
        return s_new

    def target_of(t):
        if follow_ties is None or t >= T:
            return None
        return np.asarray(follow_ties[t], np.float64)

    ref = logdets()
    s = solve(np.asarray(s0, np.float64), np.ones(k, bool), target_of(0), 0)
    s_prev = np.asarray(s0, np.float64).copy()

    out = {
        "actions": np.zeros((T, n)),
        "triggered": np.zeros((T, k), bool),
        "updated": np.zeros((T, k), bool),
        "reoptimised": np.zeros(T, bool),
        "regret": np.zeros(T),
        "movement": np.zeros(T),
        "loss_star": loss_star,
        "s_star": s_star,
    }
    regret = movement = 0.0
    for t in range(T):
        action = s.copy()
        out["actions"][t] = action
        regret += float(coef @ action) - loss_star
        movement += move_cost * float(np.abs(action - s_prev).sum())
        out["regret"][t] = regret
        out["movement"][t] = movement
        s_prev = action

        for i in range(k):
            phi = action[scopes[i]]
            y = float(theta[i] @ phi) + float(eta[t, i])
            V[i] += np.outer(phi, phi)
            b[i] += phi * y
        ld = logdets()
        trig = (ld - ref) > log_trigger

        if kind == "linucb":
            reopt = True
            free_blocks = np.ones(k, bool)
            updated = np.ones(k, bool)
            reset = np.ones(k, bool)
        elif kind == "lazy":
            reopt = bool(trig.any())
            free_blocks = np.ones(k, bool)
            updated = np.full(k, reopt)
            reset = updated if reference == "global" else trig
        elif kind == "async_lazy":
            reopt = bool(trig.any())
            free_blocks = trig
            updated = trig
            reset = trig
        else:
            raise ValueError(kind)
        ref = np.where(reset, ld, ref)
        if reopt:
            s = solve(action, free_blocks, target_of(t + 1), t + 1)
        out["triggered"][t] = trig
        out["updated"][t] = updated
        out["reoptimised"][t] = reopt
    out["ties_seen"] = ties["seen"]
    out["ties_followed"] = ties["followed"]
    out["ties"] = ties["log"]
    return out
