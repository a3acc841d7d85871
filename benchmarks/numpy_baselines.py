r"""NumPy baselines of gsjax's LinUCB / LazyGraphLinUCB / Async-LazyGraphLinUCB, for timing.

The SAME algorithms and maths as ``gsjax.algorithms.kernel`` (DESIGN section 2), written three
times:

* :func:`run_loop` -- a typical research script: a Python loop over seeds, then over rounds, and
  NumPy per criterion (``np.linalg`` where natural). The LCB and its gradient are Python sums over
  the criteria; PGD loops over starts and steps.
* :func:`run_vectorised` -- vectorised over seeds: every array has a leading seed axis
  (``(S, k, d, d)`` Gram matrices, ``(S', P, n)`` PGD iterates), a Python loop over rounds only;
  broadcasting / ``matmul`` / ``einsum``, no per-seed Python loop. The lazy re-minimisation runs
  only on the seeds that triggered (boolean indexing), as a good NumPy programmer would.
* :func:`run_strong` -- the STRONG baseline, for the Section 7.2 workload only (linear features
  on disjoint blocks of two coordinates, the vertex solver, constant beta, a refresh every
  round): every quantity a ``(k, S)`` array with the seed axis LAST, the 2x2 algebra in closed
  form from the Gram sums (``a, b, c`` and ``b_0, b_1``), the four vertices of a block compared
  element-wise; no matrices, no gathers, no per-seed indexing.

What is reproduced exactly (see the gsjax modules named):

* ridge statistics per criterion (``gsjax.linalg``): the data Gram ``S = sum phi phi^T`` (no
  lambda) is the source of truth; every ``refresh_every`` rounds (default 1: every round)
  ``V^{-1}`` and ``log det V`` are recomputed from ``S`` and ``lambda`` (closed form for
  ``d <= 2`` with ``det = (ac - b^2) + lambda (a + c) + lambda^2``, Cholesky log-det otherwise),
  between refreshes Sherman--Morrison (symmetrised) and the determinant lemma ``log1p(x^T V^-1 x)``;
* trigger ``log det V_i - log det V_i(ref) > log_trigger``; the reference rules of ``linucb``,
  ``lazy`` (``reference = "global" | "own"``) and ``async_lazy``; the first policy is
  ``argmin LCB_0`` from ``s0`` (not counted); the update of round t makes the policy of t + 1;
* the LCB ``sum_i <phi_i, theta_hat_i> - beta_i sqrt(max(phi^T V^-1 phi, 1e-12))``, constant
  ``beta`` or the OFUL radius of Lemma 12 (``t`` = observations so far);
* features (``gsjax.problem``): ``linear`` ``phi = s|_N(i)`` and pairwise ``quadratic``
  ``[1, s_i, s_i^2, {s_j}, {s_i s_j}]`` with the own coordinate first in the scope; scopes are a
  ``(k, m)`` index array plus a mask (padded entries read nothing);
* solvers (``gsjax.lcb``): exact vertex enumeration per disjoint block (vertex ``p`` puts bit ``j``
  of ``p`` on the ``j``-th free coordinate) and PGD with Adam (optax defaults ``b1 = 0.9``,
  ``b2 = 0.999``, ``eps = 1e-8``, bias-corrected), a fixed number of steps, starts = the current
  state then uniform random points, projection onto ``[0, 1]``, a mask of free coordinates; the
  best start / vertex by gsjax's tie rule :func:`first_min` (the first index within
  ``64 eps max(1, |min|)`` of the minimum);
* totals (``gsjax.runner``): prediction regret ``sum_t L(s_t) - L(s*)``, movement
  ``move_cost * ||s_t - s_{t-1}||_1`` from ``s0``, updates / changes / triggers per criterion,
  re-optimisations.

Randomness: either inject ``eta`` (S, T, k) -- gsjax's own noise, so that runs agree step for step
-- or pass a NumPy ``Generator`` (noise ``sigma_i N(0, 1)`` and the PGD random starts). Only
independent noise is implemented. With ``pgd_starts = 1`` the only start is the current state and
PGD is deterministic. Float ops run in ``dtype`` (float32 or float64) throughout.
"""

from __future__ import annotations

import itertools
import math
import time
from types import SimpleNamespace

import numpy as np

__all__ = ["KINDS", "LOG2", "first_min", "features", "run_loop", "run_vectorised",
           "run_strong"]

KINDS = ("linucb", "lazy", "async_lazy")
LOG2 = math.log(2.0)
TINY = 1e-12
ADAM_B1, ADAM_B2, ADAM_EPS = 0.9, 0.999, 1e-8


# ------------------------------------------------------------------------------------------
# Shared helpers (pure NumPy, any leading axes)
# ------------------------------------------------------------------------------------------


def first_min(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """gsjax's tie rule: index of the first entry within ``64 eps max(1, |min|)`` of the min."""
    values = np.asarray(values)
    m = values.min(axis=axis, keepdims=True)
    tol = 64 * np.finfo(values.dtype).eps * np.maximum(1.0, np.abs(m))
    return np.argmax(values <= m + tol, axis=axis)


def features(kind: str, x: np.ndarray) -> np.ndarray:
    """Features of local states ``x`` (..., m) (zero on padded entries) -> (..., d)."""
    if kind == "linear":
        return x
    if kind == "quadratic":
        own = x[..., :1]
        others = x[..., 1:]
        one = np.ones_like(own)
        return np.concatenate([one, own, own * own, others, own * others], axis=-1)
    raise ValueError(f"unknown feature kind {kind!r}; allowed: ('linear', 'quadratic')")


def _features_vjp(kind: str, x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``g^T d phi / d x`` for features of ``x`` (..., m) and cotangents ``g`` (..., d)."""
    if kind == "linear":
        return g
    m = x.shape[-1]
    own = x[..., :1]
    others = x[..., 1:]
    g_others = g[..., 3 : m + 2]
    g_cross = g[..., m + 2 :]
    g_own = g[..., 1:2] + 2.0 * own * g[..., 2:3] + np.sum(g_cross * others, -1, keepdims=True)
    return np.concatenate([g_own, g_others + own * g_cross], axis=-1)


def _bit_table(width: int, dtype) -> np.ndarray:
    """(2^width, width): row p holds the bits of p, bit j in column j (as gsjax.lcb)."""
    rows = list(itertools.product((0, 1), repeat=width))
    return np.array([r[::-1] for r in rows], dtype=dtype)


def _setup(kind, scopes, scope_mask, feature_kind, theta, s0, lambda_reg, beta, *, log_trigger,
           horizon, seeds, rng, eta, noise_sigma, move_cost, solver, pgd_steps, pgd_starts,
           pgd_lr, reference, beta_mode, oful_sigma, oful_delta, oful_S, refresh_every,
           loss_star, num_coords, dtype):
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; allowed: {KINDS}")
    if solver not in ("vertex", "pgd"):
        raise ValueError(f"unknown solver {solver!r}; allowed: ('vertex', 'pgd')")
    if reference not in ("global", "own"):
        raise ValueError(f"unknown reference {reference!r}; allowed: ('global', 'own')")
    if beta_mode not in ("constant", "oful"):
        raise ValueError(f"unknown beta_mode {beta_mode!r}; allowed: ('constant', 'oful')")
    dt = np.dtype(dtype)
    scopes = np.asarray(scopes, np.int64)
    mask = np.ones(scopes.shape, bool) if scope_mask is None else np.asarray(scope_mask, bool)
    k, m = scopes.shape
    n = int(num_coords) if num_coords is not None else int(np.asarray(s0).shape[0])
    d = m if feature_kind == "linear" else 2 * m + 1
    theta = np.asarray(theta, dt)
    if theta.shape != (k, d):
        raise ValueError(f"theta has shape {theta.shape}; expected {(k, d)}")
    if feature_kind == "linear":
        fmask = mask.copy()
    else:
        fmask = np.concatenate([np.ones((k, 3), bool), mask[:, 1:], mask[:, 1:]], axis=1)
    theta = np.where(fmask, theta, 0).astype(dt)
    used = scopes[mask]
    disjoint = len(np.unique(used)) == len(used)
    if solver == "vertex" and (feature_kind != "linear" or not disjoint):
        raise ValueError("the vertex solver needs linear features on disjoint scopes; use 'pgd'")
    if solver == "vertex" and m > 12:
        raise ValueError("vertex enumeration per block needs blocks of at most 12 coordinates")
    lam = np.broadcast_to(np.asarray(lambda_reg, dt), (k,)).copy()
    beta = np.broadcast_to(np.asarray(beta, dt), (k,)).copy()
    sigma = np.broadcast_to(np.asarray(noise_sigma, dt), (k,)).copy()
    s0 = np.broadcast_to(np.asarray(s0, dt), (n,)).copy()
    if loss_star is None:
        if feature_kind != "linear":
            raise ValueError("pass loss_star (L(s*)) for non-linear features")
        coef = np.zeros(n, dt)
        np.add.at(coef, scopes[mask], theta[mask])
        loss_star = float(np.sum(np.where(coef < 0, coef, 0)))
    if eta is not None:
        eta = np.asarray(eta, dt)
        if eta.shape != (seeds, horizon, k):
            raise ValueError(f"eta has shape {eta.shape}; expected {(seeds, horizon, k)}")
    if rng is None:
        rng = np.random.default_rng(0)
    if pgd_starts < 1 or pgd_steps < 1:
        raise ValueError("pgd_starts and pgd_steps must be >= 1")
    # Gather table: for each coordinate, the flat (k*m) scope slots that read it, padded with
    # the dummy slot k*m (a zero appended to the flat array); scatter-adds become gather-sums.
    slots = [[] for _ in range(n)]
    for i in range(k):
        for j in range(m):
            if mask[i, j]:
                slots[scopes[i, j]].append(i * m + j)
    occ = max(1, max(len(s) for s in slots))
    gather = np.full((n, occ), k * m, np.int64)
    for c, sl in enumerate(slots):
        gather[c, : len(sl)] = sl
    d_real = fmask.sum(1).astype(dt)
    oful_sigma = sigma if oful_sigma is None else np.broadcast_to(np.asarray(oful_sigma, dt), (k,))

    def radius(t: int) -> np.ndarray:
        if beta_mode == "constant":
            return beta
        log_term = np.log((1.0 + dt.type(t) / lam) / dt.type(oful_delta))
        return (oful_sigma * np.sqrt(d_real * log_term) + np.sqrt(lam) * dt.type(oful_S)).astype(dt)

    return SimpleNamespace(
        kind=kind, feat=feature_kind, dt=dt, scopes=scopes, mask=mask, k=k, m=m, n=n, d=d,
        theta=theta, lam=lam, sigma=sigma, s0=s0, loss_star=dt.type(loss_star),
        log_trigger=dt.type(log_trigger), horizon=int(horizon), seeds=int(seeds), rng=rng, eta=eta,
        move_cost=dt.type(move_cost), solver=solver, steps=int(pgd_steps), starts=int(pgd_starts),
        lr=dt.type(pgd_lr), reference=reference, refresh_every=int(refresh_every),
        gather=gather, radius=radius, bits=_bit_table(m, dt) if solver == "vertex" else None,
        eps=np.finfo(dt).eps,
    )


def _empty_totals(c, record_actions):
    out = {
        "prediction_regret": np.zeros(c.seeds, c.dt),
        "movement_cost": np.zeros(c.seeds, c.dt),
        "updates": np.zeros((c.seeds, c.k), np.int64),
        "changes": np.zeros((c.seeds, c.k), np.int64),
        "triggers": np.zeros((c.seeds, c.k), np.int64),
        "reoptimisations": np.zeros(c.seeds, np.int64),
    }
    if record_actions:
        out["actions"] = np.zeros((c.seeds, c.horizon, c.n), c.dt)
    return out


def _decide(c, triggered):
    """(reopt, updated, reset) per gsjax.algorithms.kernel; arrays (..., k) bool."""
    if c.kind == "linucb":
        ones = np.ones_like(triggered)
        return np.ones(triggered.shape[:-1], bool), ones, ones
    reopt = triggered.any(-1)
    if c.kind == "lazy":
        updated = np.broadcast_to(reopt[..., None], triggered.shape)
        return reopt, updated, (updated if c.reference == "global" else triggered)
    return reopt, triggered, triggered


# ------------------------------------------------------------------------------------------
# The research-script baseline: loops over seeds, rounds and criteria
# ------------------------------------------------------------------------------------------


def _refresh_one(gram_data, lam, dt):
    """Exact (V^{-1}, log det V) of one criterion from its data Gram (gsjax.linalg.refresh)."""
    d = gram_data.shape[0]
    if d == 1:
        v = gram_data[0, 0] + lam
        return np.array([[1.0 / v]], dt), np.log(v)
    if d == 2:
        a, b, cc = gram_data[0, 0], gram_data[0, 1], gram_data[1, 1]
        det = (a * cc - b * b) + lam * (a + cc) + lam * lam
        inv = np.array([[cc + lam, -b], [-b, a + lam]], dt) / det
        return inv, np.log(det)
    v = gram_data + lam * np.eye(d, dtype=dt)
    chol = np.linalg.cholesky(v)
    logdet = 2.0 * np.sum(np.log(np.diagonal(chol)))
    inv = np.linalg.inv(v)
    return 0.5 * (inv + inv.T), logdet


def _loop_local(c, i, s):
    return np.where(c.mask[i], s[c.scopes[i]], 0).astype(c.dt)


def _loop_lcb(c, s, th, inv, beta):
    total = c.dt.type(0)
    for i in range(c.k):
        phi = features(c.feat, _loop_local(c, i, s))
        q = phi @ inv[i] @ phi
        total += phi @ th[i] - beta[i] * np.sqrt(max(q, TINY))
    return total


def _loop_grad(c, s, th, inv, beta):
    g = np.zeros(c.n, c.dt)
    for i in range(c.k):
        x = _loop_local(c, i, s)
        phi = features(c.feat, x)
        w = inv[i] @ phi
        q = phi @ w
        gphi = th[i] - beta[i] * w / np.sqrt(q) if q > TINY else th[i]
        gx = _features_vjp(c.feat, x, gphi)
        for j in range(c.m):
            if c.mask[i, j]:
                g[c.scopes[i, j]] += gx[j]
    return g


def _loop_solve(c, s_init, free, th, inv, beta):
    """Minimise the LCB over the free coordinates (n,) bool, one seed."""
    if c.solver == "vertex":
        s = s_init.copy()
        for i in range(c.k):
            idx, smask = c.scopes[i], c.mask[i]
            fr = free[idx] & smask
            if not fr.any():
                continue
            rank = np.clip(np.cumsum(fr) - 1, 0, c.m - 1)
            verts = np.where(fr, c.bits[:, rank], s_init[idx])  # (P, m)
            phi = np.where(smask, verts, 0)
            q = np.einsum("pi,ij,pj->p", phi, inv[i], phi)
            vals = phi @ th[i] - beta[i] * np.sqrt(np.maximum(q, TINY))
            best = verts[first_min(vals)]
            s[idx[fr]] = best[fr]
        return s
    starts = [s_init]
    if c.starts > 1:
        starts += list(c.rng.uniform(size=(c.starts - 1, c.n)).astype(c.dt))
    finals, values = [], []
    for start in starts:
        s = np.where(free, start, s_init).astype(c.dt)
        mu = np.zeros(c.n, c.dt)
        nu = np.zeros(c.n, c.dt)
        for step in range(1, c.steps + 1):
            g = np.where(free, _loop_grad(c, s, th, inv, beta), 0).astype(c.dt)
            mu = (1 - ADAM_B1) * g + ADAM_B1 * mu
            nu = (1 - ADAM_B2) * (g * g) + ADAM_B2 * nu
            mu_hat = mu / c.dt.type(1 - ADAM_B1**step)
            nu_hat = nu / c.dt.type(1 - ADAM_B2**step)
            u = -c.lr * (mu_hat / (np.sqrt(nu_hat) + c.dt.type(ADAM_EPS)))
            s = np.where(free, np.clip(s + u, 0, 1), s_init).astype(c.dt)
        finals.append(s)
        values.append(_loop_lcb(c, s, th, inv, beta))
    return finals[int(first_min(np.array(values, c.dt)))]


def run_loop(
    kind: str,
    scopes,
    scope_mask,
    feature_kind: str,
    theta,
    s0,
    lambda_reg,
    beta,
    *,
    horizon: int,
    seeds: int,
    log_trigger: float = LOG2,
    rng: np.random.Generator | None = None,
    eta=None,
    noise_sigma=0.5,
    move_cost: float = 1.0,
    solver: str = "vertex",
    pgd_steps: int = 50,
    pgd_starts: int = 4,
    pgd_lr: float = 0.05,
    reference: str = "global",
    beta_mode: str = "constant",
    oful_sigma=None,
    oful_delta: float = 0.05,
    oful_S: float = 1.0,
    refresh_every: int = 1,
    loss_star=None,
    num_coords: int | None = None,
    dtype=np.float64,
    record_actions: bool = False,
    max_seconds: float | None = None,
    min_rounds: int = 1,
) -> dict:
    """Run ``kind`` as a per-seed, per-round, per-criterion Python loop.

    Args:
      kind: "linucb" | "lazy" | "async_lazy".
      scopes, scope_mask: (k, m) int coordinate indices and bool mask (None: all real).
      feature_kind: "linear" | "quadratic".
      theta: (k, d) true parameters (zero on padded feature entries).
      s0: (n,) start (or a scalar with ``num_coords``).
      lambda_reg, beta: (k,) or scalars.
      horizon, seeds: rounds T and number of seeds S.
      log_trigger: ``log c`` of the trigger.
      rng: NumPy Generator for the noise and the PGD random starts (default ``default_rng(0)``).
      eta: optional (S, T, k) injected noise (then ``rng`` only draws PGD starts).
      noise_sigma: (k,) or scalar, independent noise when ``eta`` is None.
      move_cost: weight of the L1 movement.
      solver, pgd_steps, pgd_starts, pgd_lr: as ``gsjax.algorithms.AgentSpec`` / ``AgentParams``.
      reference: lazy only, "global" | "own".
      beta_mode, oful_sigma, oful_delta, oful_S: the exploration radius (OFUL sigma defaults
        to ``noise_sigma``).
      refresh_every: recompute ``V^{-1}`` and ``log det V`` from the Gram every this many rounds.
      loss_star: ``L(s*)``; computed exactly for linear features when None.
      dtype: float dtype of every float array.
      record_actions: also return ``actions`` (S, T, n).
      max_seconds: time budget: no new seed starts once it is spent, and the FIRST seed stops
        after the first round (at least ``min_rounds``) that ends past it; later seeds always
        run to ``horizon``. ``seed_rounds`` says what ran.

    Returns:
      dict of totals per seed: ``prediction_regret`` (S,), ``movement_cost`` (S,),
      ``updates`` / ``changes`` / ``triggers`` (S, k), ``reoptimisations`` (S,), optional
      ``actions``; ``seed_rounds`` (rounds actually run, summed over seeds), ``seconds`` (wall
      time), ``init_seconds`` (the first policies, before round 1), ``solve_seconds`` (LCB
      re-minimisations after round updates) and ``seed_solves`` (how many seed re-minimisations).
    """
    c = _setup(kind, scopes, scope_mask, feature_kind, theta, s0, lambda_reg, beta,
               log_trigger=log_trigger, horizon=horizon, seeds=seeds, rng=rng, eta=eta,
               noise_sigma=noise_sigma, move_cost=move_cost, solver=solver, pgd_steps=pgd_steps,
               pgd_starts=pgd_starts, pgd_lr=pgd_lr, reference=reference, beta_mode=beta_mode,
               oful_sigma=oful_sigma, oful_delta=oful_delta, oful_S=oful_S,
               refresh_every=refresh_every, loss_star=loss_star, num_coords=num_coords,
               dtype=dtype)
    out = _empty_totals(c, record_actions)
    k, d, dt = c.k, c.d, c.dt
    t_begin = time.perf_counter()
    seed_rounds = 0
    init_seconds = solve_seconds = 0.0
    seed_solves = 0
    stop = False
    for seed in range(c.seeds):
        if seed and max_seconds is not None and time.perf_counter() - t_begin > max_seconds:
            break
        t_init = time.perf_counter()
        data_gram = np.zeros((k, d, d), dt)
        inv = np.stack([np.eye(d, dtype=dt) / c.lam[i] for i in range(k)])
        b = np.zeros((k, d), dt)
        logdet = np.array([d * np.log(c.lam[i]) for i in range(k)], dt)
        ref = logdet.copy()
        th = np.zeros((k, d), dt)
        s = _loop_solve(c, c.s0, np.ones(c.n, bool), th, inv, c.radius(0))
        s_prev = c.s0.copy()
        init_seconds += time.perf_counter() - t_init
        for t in range(1, c.horizon + 1):
            action = s
            do_refresh = c.refresh_every == 1 or t % c.refresh_every == 0
            expected = dt.type(0)
            changed = action != s_prev
            for i in range(k):
                phi = features(c.feat, _loop_local(c, i, action))
                mu_i = phi @ c.theta[i]
                expected += mu_i
                if c.eta is not None:
                    noise = c.eta[seed, t - 1, i]
                else:
                    noise = c.sigma[i] * dt.type(c.rng.standard_normal())
                y = mu_i + noise
                data_gram[i] += np.outer(phi, phi)
                b[i] += phi * y
                if do_refresh:
                    inv[i], logdet[i] = _refresh_one(data_gram[i], c.lam[i], dt)
                else:
                    u = inv[i] @ phi
                    logdet[i] += np.log1p(phi @ u)
                    new = inv[i] - np.outer(u, u) / (1 + phi @ u)
                    inv[i] = 0.5 * (new + new.T)
                th[i] = inv[i] @ b[i]
                if np.any(changed[c.scopes[i]] & c.mask[i]):
                    out["changes"][seed, i] += 1
            out["prediction_regret"][seed] += expected - c.loss_star
            out["movement_cost"][seed] += c.move_cost * np.sum(np.abs(action - s_prev))
            if record_actions:
                out["actions"][seed, t - 1] = action
            s_prev = action
            triggered = (logdet - ref) > c.log_trigger
            reopt, updated, reset = _decide(c, triggered)
            ref = np.where(reset, logdet, ref)
            out["triggers"][seed] += triggered
            out["updates"][seed] += updated
            if reopt:
                out["reoptimisations"][seed] += 1
                if c.kind == "async_lazy":
                    free = np.zeros(c.n, bool)
                    for i in np.flatnonzero(triggered):
                        free[c.scopes[i][c.mask[i]]] = True
                else:
                    free = np.ones(c.n, bool)
                t_solve = time.perf_counter()
                s = _loop_solve(c, action, free, th, inv, c.radius(t))
                solve_seconds += time.perf_counter() - t_solve
                seed_solves += 1
            seed_rounds += 1
            if max_seconds is not None and seed == 0 and t >= min_rounds and (
                time.perf_counter() - t_begin > max_seconds
            ):
                stop = True
                break
        if stop:
            break
    out["seed_rounds"] = seed_rounds
    out["seconds"] = time.perf_counter() - t_begin
    out.update(init_seconds=init_seconds, solve_seconds=solve_seconds, seed_solves=seed_solves)
    return out


# ------------------------------------------------------------------------------------------
# The vectorised baseline: arrays with a leading seed axis, a Python loop over rounds only
# ------------------------------------------------------------------------------------------


def _vec_refresh(c, gram):
    """Exact ``(V^{-1}, log det V)`` from batch-last data Grams ``gram`` (d, d, S, k).

    ``d <= 2``: gsjax's closed form. Otherwise a Cholesky factorisation, the inverse of the
    triangular factor and ``V^{-1} = L^{-T} L^{-1}``, all unrolled over the tiny ``d x d``
    entries with every NumPy operation running over the wide (S, k) batch -- 3-5x faster than
    ``np.linalg.cholesky`` + ``np.linalg.inv`` on stacks of 11 x 11 matrices (measured, 2 cores).
    """
    lam, d = c.lam, c.d
    if d == 1:
        v = gram[0, 0] + lam
        return (1.0 / v)[None, None], np.log(v)
    if d == 2:
        a, b, cc = gram[0, 0], gram[0, 1], gram[1, 1]
        det = (a * cc - b * b) + lam * (a + cc) + lam * lam
        off = -b / det
        inv = np.stack([np.stack([(cc + lam) / det, off]), np.stack([off, (a + lam) / det])])
        return inv, np.log(det)
    L = np.zeros_like(gram)
    rdiag = np.empty((d,) + gram.shape[2:], gram.dtype)
    for j in range(d):
        acc = gram[j, j] + lam
        for q in range(j):
            acc = acc - L[j, q] * L[j, q]
        L[j, j] = np.sqrt(acc)
        rdiag[j] = 1.0 / L[j, j]
        for i in range(j + 1, d):
            acc = gram[i, j].copy()
            for q in range(j):
                acc -= L[i, q] * L[j, q]
            L[i, j] = acc * rdiag[j]
    logdet = 2.0 * np.sum(np.log(L[np.arange(d), np.arange(d)]), axis=0)
    M = np.zeros_like(gram)  # L^{-1}, lower triangular
    for i in range(d):
        M[i, i] = rdiag[i]
        for j in range(i):
            acc = L[i, j] * M[j, j]
            for q in range(j + 1, i):
                acc += L[i, q] * M[q, j]
            M[i, j] = -acc * rdiag[i]
    inv = np.empty_like(gram)
    for a in range(d):
        for b in range(a, d):
            lo = max(a, b)
            acc = M[lo, a] * M[lo, b]
            for i in range(lo + 1, d):
                acc += M[i, a] * M[i, b]
            inv[a, b] = acc
            inv[b, a] = acc
    return inv, logdet


def _batch_first(x, idx):
    """Batch-last stats (d, [d,] S, k) -> contiguous (S', k, d[, d]) for the seeds ``idx``."""
    if idx is not None:
        x = x[..., idx, :]
    lead = x.ndim - 2
    return np.ascontiguousarray(np.moveaxis(x, tuple(range(lead)), tuple(range(2, x.ndim))))


def _vec_local(c, s):
    """(..., n) states -> (..., k, m) local states, zero on padded entries."""
    return np.where(c.mask, s[..., c.scopes], 0).astype(c.dt)


def _vec_scatter(c, g_local):
    """(..., k, m) per-slot values -> (..., n) per-coordinate sums (gather over the slot table)."""
    lead = g_local.shape[:-2]
    flat = g_local.reshape(lead + (c.k * c.m,))
    flat = np.concatenate([flat, np.zeros(lead + (1,), flat.dtype)], axis=-1)
    return flat[..., c.gather].sum(-1)


def _vec_lcb_parts(c, s, th, inv, beta):
    """LCB pieces at PGD iterates ``s`` (S', P, n) for stats (S', k, ...).

    Layout (S', k, P, ...): the criterion axis before the start axis lets ``phi @ V^{-1}`` be
    one batched ``matmul`` over (S', k) with the P starts as rows (8x faster than ``einsum``
    here). Returns ``(value (S', P), x, w = V^{-1} phi, q, sqrt(max(q, tiny)))``.
    """
    x = np.ascontiguousarray(np.moveaxis(_vec_local(c, s), 1, 2))  # (S', k, P, m)
    phi = features(c.feat, x)  # (S', k, P, d)
    w = phi @ inv  # (S', k, P, d); V^{-1} is symmetric
    q = np.einsum("...i,...i->...", w, phi)  # (S', k, P)
    rs = np.sqrt(np.maximum(q, TINY))
    lin = (phi @ th[..., None])[..., 0]  # (S', k, P)
    val = np.sum(lin - beta[:, None] * rs, axis=1)  # (S', P)
    return val, x, w, q, rs


def _vec_grad(c, s, th, inv, beta):
    """Gradient of the LCB at iterates ``s`` (S', P, n)."""
    _, x, w, q, rs = _vec_lcb_parts(c, s, th, inv, beta)
    scale = beta[:, None] * np.where(q > TINY, 1.0 / rs, 0).astype(c.dt)  # (S', k, P)
    gphi = th[:, :, None, :] - scale[..., None] * w
    gx = np.where(c.mask[:, None, :], _features_vjp(c.feat, x, gphi), 0)  # (S', k, P, m)
    return _vec_scatter(c, np.moveaxis(gx, 2, 1))


def _vec_solve(c, s_init, free, th, inv, beta):
    """Minimise the LCB for S' seeds at once: s_init (S', n), free (S', n), stats (S', k, ...)."""
    sn = s_init.shape[0]
    if c.solver == "vertex":
        base = s_init[:, c.scopes]  # (S', k, m)
        fr = free[:, c.scopes] & c.mask
        rank = np.clip(np.cumsum(fr, -1) - 1, 0, c.m - 1)
        bits = np.moveaxis(c.bits[:, rank], 0, 2)  # (S', k, P, m)
        verts = np.where(fr[:, :, None, :], bits, base[:, :, None, :])
        phi = np.where(c.mask[:, None, :], verts, 0)
        w = phi @ inv  # (S', k, P, m): inv symmetric
        q = np.sum(w * phi, -1)
        vals = np.einsum("skpm,skm->skp", phi, th) - beta[:, None] * np.sqrt(np.maximum(q, TINY))
        p = first_min(vals, axis=-1)  # (S', k)
        best = np.take_along_axis(verts, p[:, :, None, None], axis=2)[:, :, 0, :]
        s = s_init.copy()
        s[:, c.scopes[c.mask]] = np.where(fr, best, base)[:, c.mask]
        return s
    if c.starts > 1:
        rand = c.rng.uniform(size=(sn, c.starts - 1, c.n)).astype(c.dt)
        starts = np.concatenate([s_init[:, None], rand], axis=1)
    else:
        starts = s_init[:, None].copy()
    fr = free[:, None, :]
    init = s_init[:, None, :]
    s = np.where(fr, starts, init)
    mu = np.zeros_like(s)
    nu = np.zeros_like(s)
    for step in range(1, c.steps + 1):
        g = np.where(fr, _vec_grad(c, s, th, inv, beta), 0)
        mu = (1 - ADAM_B1) * g + ADAM_B1 * mu
        nu = (1 - ADAM_B2) * (g * g) + ADAM_B2 * nu
        mu_hat = mu / c.dt.type(1 - ADAM_B1**step)
        nu_hat = nu / c.dt.type(1 - ADAM_B2**step)
        u = -c.lr * (mu_hat / (np.sqrt(nu_hat) + c.dt.type(ADAM_EPS)))
        s = np.where(fr, np.clip(s + u, 0, 1), init)
    vals = _vec_lcb_parts(c, s, th, inv, beta)[0]  # (S', P)
    best = first_min(vals, axis=-1)
    return s[np.arange(sn), best]


def run_vectorised(
    kind: str,
    scopes,
    scope_mask,
    feature_kind: str,
    theta,
    s0,
    lambda_reg,
    beta,
    *,
    horizon: int,
    seeds: int,
    log_trigger: float = LOG2,
    rng: np.random.Generator | None = None,
    eta=None,
    noise_sigma=0.5,
    move_cost: float = 1.0,
    solver: str = "vertex",
    pgd_steps: int = 50,
    pgd_starts: int = 4,
    pgd_lr: float = 0.05,
    reference: str = "global",
    beta_mode: str = "constant",
    oful_sigma=None,
    oful_delta: float = 0.05,
    oful_S: float = 1.0,
    refresh_every: int = 1,
    loss_star=None,
    num_coords: int | None = None,
    dtype=np.float64,
    record_actions: bool = False,
    max_seconds: float | None = None,
    min_rounds: int = 1,
) -> dict:
    """Run ``kind`` for all seeds at once (seed axis first), a Python loop over rounds only.

    Same arguments and return value as :func:`run_loop`; ``max_seconds`` stops after the first
    round (at least ``min_rounds``) that ends past the budget, for all seeds together
    (``rounds_run`` says how many rounds ran; totals cover those rounds).
    """
    c = _setup(kind, scopes, scope_mask, feature_kind, theta, s0, lambda_reg, beta,
               log_trigger=log_trigger, horizon=horizon, seeds=seeds, rng=rng, eta=eta,
               noise_sigma=noise_sigma, move_cost=move_cost, solver=solver, pgd_steps=pgd_steps,
               pgd_starts=pgd_starts, pgd_lr=pgd_lr, reference=reference, beta_mode=beta_mode,
               oful_sigma=oful_sigma, oful_delta=oful_delta, oful_S=oful_S,
               refresh_every=refresh_every, loss_star=loss_star, num_coords=num_coords,
               dtype=dtype)
    out = _empty_totals(c, record_actions)
    S, k, d, dt = c.seeds, c.k, c.d, c.dt
    t_begin = time.perf_counter()
    # Ridge statistics batch-last, (d, d, S, k) and (d, S, k): the per-round refresh is then
    # element-wise over a wide contiguous batch. The solver takes batch-first copies (S', k, ...)
    # of the seeds it re-optimises.
    gram = np.zeros((d, d, S, k), dt)
    inv = np.broadcast_to((np.eye(d, dtype=dt)[:, :, None] / c.lam)[:, :, None, :],
                          (d, d, S, k)).copy()
    b = np.zeros((d, S, k), dt)
    logdet = np.broadcast_to((d * np.log(c.lam)).astype(dt), (S, k)).copy()
    ref = logdet.copy()
    th = np.zeros((d, S, k), dt)
    s_prev = np.broadcast_to(c.s0, (S, c.n)).copy()
    s = _vec_solve(c, s_prev, np.ones((S, c.n), bool), _batch_first(th, None),
                   _batch_first(inv, None), c.radius(0))
    all_free = np.ones((S, c.n), bool)
    init_seconds = time.perf_counter() - t_begin
    solve_seconds = 0.0
    seed_solves = 0
    rounds_run = 0
    for t in range(1, c.horizon + 1):
        action = s
        phi = features(c.feat, _vec_local(c, action))  # (S, k, d)
        mu = np.sum(phi * c.theta, -1)  # (S, k)
        if c.eta is not None:
            noise = c.eta[:, t - 1]
        else:
            noise = c.sigma * c.rng.standard_normal((S, k)).astype(dt)
        y = mu + noise
        pt = np.moveaxis(phi, -1, 0)  # (d, S, k)
        gram += pt[:, None] * pt[None, :]
        b += pt * y
        if c.refresh_every == 1 or t % c.refresh_every == 0:
            inv, logdet = _vec_refresh(c, gram)
        else:
            u = np.sum(inv * pt[None, :], axis=1)  # (d, S, k)
            q = np.sum(pt * u, axis=0)
            logdet = logdet + np.log1p(q)
            new = inv - u[:, None] * u[None, :] / (1 + q)
            inv = 0.5 * (new + np.swapaxes(new, 0, 1))
        th = np.sum(inv * b[None, :], axis=1)  # (d, S, k)
        changed = action != s_prev
        out["changes"] += np.any(changed[:, c.scopes] & c.mask, -1)
        out["prediction_regret"] += mu.sum(-1) - c.loss_star
        out["movement_cost"] += c.move_cost * np.sum(np.abs(action - s_prev), -1)
        if record_actions:
            out["actions"][:, t - 1] = action
        s_prev = action
        triggered = (logdet - ref) > c.log_trigger
        reopt, updated, reset = _decide(c, triggered)
        ref = np.where(reset, logdet, ref)
        out["triggers"] += triggered
        out["updates"] += updated
        out["reoptimisations"] += reopt
        beta_t = c.radius(t)
        t_solve = time.perf_counter()
        if c.kind == "linucb":
            seed_solves += S
            s = _vec_solve(c, action, all_free, _batch_first(th, None), _batch_first(inv, None),
                           beta_t)
        else:
            idx = np.flatnonzero(reopt)
            seed_solves += idx.size
            if idx.size:
                if c.kind == "async_lazy":
                    hit = triggered[idx][:, :, None] & c.mask  # (S', k, m)
                    free = _vec_scatter(c, hit.astype(np.int8)) > 0
                else:
                    free = all_free[idx]
                s = action.copy()
                s[idx] = _vec_solve(c, action[idx], free, _batch_first(th, idx),
                                    _batch_first(inv, idx), beta_t)
        solve_seconds += time.perf_counter() - t_solve
        rounds_run = t
        if max_seconds is not None and t >= min_rounds and (
            time.perf_counter() - t_begin > max_seconds
        ):
            break
    out["rounds_run"] = rounds_run
    out["seed_rounds"] = rounds_run * S
    out["seconds"] = time.perf_counter() - t_begin
    out.update(init_seconds=init_seconds, solve_seconds=solve_seconds, seed_solves=seed_solves)
    return out


# ------------------------------------------------------------------------------------------
# The strong baseline: Section 7.2 only, seed axis last, closed-form 2x2 algebra
# ------------------------------------------------------------------------------------------


def _strong_vertex(h0, h1, i00, i01, i11, beta):
    """Best vertex ``(x0, x1)`` of each block, (k, S) bool each, by gsjax's tie rule.

    Vertex ``p`` sets coordinate ``j`` to bit ``j`` of ``p``; its LCB is
    ``<phi, theta_hat> - beta sqrt(max(phi^T V^-1 phi, tiny))``.
    """
    v0 = -beta * math.sqrt(TINY)
    v1 = h0 - beta * np.sqrt(np.maximum(i00, TINY))
    v2 = h1 - beta * np.sqrt(np.maximum(i11, TINY))
    v3 = (h0 + h1) - beta * np.sqrt(np.maximum((i00 + i01) + (i01 + i11), TINY))
    m = np.minimum(np.minimum(v0, v1), np.minimum(v2, v3))
    thr = m + 64 * np.finfo(np.float64).eps * np.maximum(1.0, np.abs(m))
    not0 = v0 > thr
    not01 = not0 & (v1 > thr)
    return (not0 & ~not01) | (not01 & (v2 > thr)), not01


def run_strong(
    kind: str,
    scopes,
    theta,
    s0,
    lambda_reg,
    beta,
    *,
    horizon: int,
    seeds: int,
    log_trigger: float = LOG2,
    rng: np.random.Generator | None = None,
    eta=None,
    noise_sigma=0.5,
    move_cost: float = 1.0,
    reference: str = "global",
    loss_star=None,
    record_actions: bool = False,
    max_seconds: float | None = None,
    min_rounds: int = 1,
) -> dict:
    """Run ``kind`` on the Section 7.2 problem class, all seeds at once, seed axis last, float64.

    ``scopes`` (k, 2): disjoint blocks of two coordinates (linear features, no padding);
    ``theta`` (k, 2); ``eta`` (S, T, k) injects noise, else ``rng`` draws ``sigma N(0, 1)``
    as ``(k, S)`` per round. Other arguments and the result as :func:`run_vectorised`.
    """
    if kind not in KINDS:
        raise ValueError(f"kind: unknown {kind!r}; allowed: {KINDS}")
    if reference not in ("global", "own"):
        raise ValueError(f"reference: unknown {reference!r}; allowed: ('global', 'own')")
    idx = np.asarray(scopes, np.int64)
    k = idx.shape[0]
    if idx.ndim != 2 or idx.shape[1] != 2 or len(np.unique(idx)) != idx.size:
        raise ValueError(f"scopes: expected disjoint (k, 2) blocks, got shape {idx.shape}")
    dt = np.float64
    S, T = int(seeds), int(horizon)
    theta = np.asarray(theta, dt)
    if theta.shape != (k, 2):
        raise ValueError(f"theta: shape {theta.shape}; expected {(k, 2)}")
    s0 = np.asarray(s0, dt)
    n = s0.shape[0]
    col = lambda v: np.broadcast_to(np.asarray(v, dt), (k,)).reshape(k, 1).copy()  # noqa: E731
    lam, beta, sigma = col(lambda_reg), col(beta), col(noise_sigma)
    t0, t1 = theta[:, :1], theta[:, 1:]
    if loss_star is None:
        loss_star = float(np.sum(np.minimum(theta, 0)))
    if eta is not None:
        eta = np.asarray(eta, dt)
        if eta.shape != (S, T, k):
            raise ValueError(f"eta: shape {eta.shape}; expected {(S, T, k)}")
        eta = np.ascontiguousarray(np.moveaxis(eta, 0, -1))  # (T, k, S)
    if rng is None:
        rng = np.random.default_rng(0)
    totals = {
        "prediction_regret": np.zeros(S, dt),
        "movement_cost": np.zeros(S, dt),
        "updates": np.zeros((k, S), np.int64),
        "changes": np.zeros((k, S), np.int64),
        "triggers": np.zeros((k, S), np.int64),
        "reoptimisations": np.zeros(S, np.int64),
    }
    actions = np.zeros((T, n, S), dt) if record_actions else None
    t_begin = time.perf_counter()
    zeros = np.zeros((k, S), dt)
    g00, g01, g11, b0, b1 = (zeros.copy() for _ in range(5))
    logdet = np.broadcast_to(2.0 * np.log(lam), (k, S)).copy()
    ref = logdet.copy()
    # The first policy: theta_hat = 0, V^-1 = I / lambda, from s0 (not counted).
    p0 = np.broadcast_to(s0[idx[:, :1]], (k, S)).copy()
    p1 = np.broadcast_to(s0[idx[:, 1:]], (k, S)).copy()
    x0, x1 = (v.astype(dt) for v in _strong_vertex(zeros, zeros, 1.0 / lam + zeros, zeros,
                                                   1.0 / lam + zeros, beta))
    init_seconds = time.perf_counter() - t_begin
    solve_seconds, seed_solves, rounds_run = 0.0, 0, 0
    for t in range(1, T + 1):
        mu = t0 * x0 + t1 * x1
        y = mu + (eta[t - 1] if eta is not None else sigma * rng.standard_normal((k, S)))
        g00 += x0 * x0
        g01 += x0 * x1
        g11 += x1 * x1
        b0 += x0 * y
        b1 += x1 * y
        det = (g00 * g11 - g01 * g01) + lam * (g00 + g11) + lam * lam
        i00, i01, i11 = (g11 + lam) / det, -g01 / det, (g00 + lam) / det
        logdet = np.log(det)
        h0, h1 = i00 * b0 + i01 * b1, i01 * b0 + i11 * b1
        d0, d1 = x0 - p0, x1 - p1
        totals["changes"] += (d0 != 0) | (d1 != 0)
        totals["prediction_regret"] += mu.sum(0) - loss_star
        totals["movement_cost"] += move_cost * (np.abs(d0) + np.abs(d1)).sum(0)
        if actions is not None:
            actions[t - 1, idx[:, 0]] = x0
            actions[t - 1, idx[:, 1]] = x1
        p0, p1 = x0, x1
        triggered = (logdet - ref) > log_trigger
        totals["triggers"] += triggered
        t_solve = time.perf_counter()
        if kind == "linucb":
            ref = logdet
            totals["updates"] += 1
            totals["reoptimisations"] += 1
            seed_solves += S
            x0, x1 = (v.astype(dt) for v in _strong_vertex(h0, h1, i00, i01, i11, beta))
        else:
            reopt = triggered.any(0)
            fires = int(np.count_nonzero(reopt))
            totals["reoptimisations"] += reopt
            if fires:  # batch-level skip: no seed fires, nothing to solve
                free = triggered if kind == "async_lazy" else np.broadcast_to(reopt, (k, S))
                totals["updates"] += free
                ref = np.where(triggered if kind == "async_lazy" or reference == "own" else free,
                               logdet, ref)
                n0, n1 = _strong_vertex(h0, h1, i00, i01, i11, beta)
                x0, x1 = np.where(free, n0, x0), np.where(free, n1, x1)
                seed_solves += fires
        solve_seconds += time.perf_counter() - t_solve
        rounds_run = t
        if max_seconds is not None and t >= min_rounds and (
            time.perf_counter() - t_begin > max_seconds
        ):
            break
    out = {name: (v.T if v.ndim == 2 else v) for name, v in totals.items()}  # seed axis first
    if actions is not None:
        out["actions"] = np.moveaxis(actions, -1, 0)
    out.update(rounds_run=rounds_run, seed_rounds=rounds_run * S,
               seconds=time.perf_counter() - t_begin, init_seconds=init_seconds,
               solve_seconds=solve_seconds, seed_solves=seed_solves)
    return out
