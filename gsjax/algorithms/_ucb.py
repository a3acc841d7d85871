r"""Shared machinery of LinUCB, LazyGraphLinUCB and Async-LazyGraphLinUCB (DESIGN section 2).

All three keep one ridge estimator per criterion and differ only in *when* and *over which
coordinates* the LCB is re-minimised after each round's update:

* ``linucb`` -- every round, all coordinates. Every criterion counts an update every round.
* ``lazy`` (Section 4, global trigger) -- when ``log det V_i - log det V_i(ref) > log c`` for ANY
  criterion (``c = 2``: "the determinant doubles"), all coordinates; every criterion counts an
  update (the paper's "moves"). Reference reading ``"global"`` (default): every reference resets
  at each update. ``"own"``: only the triggering criteria reset (Lemma 2 counts doublings so).
* ``async_lazy`` (Section 5.1) -- the triggering set ``A_t`` re-minimises the coordinates in
  ``union_{i in A_t} N(i)`` jointly, the others fixed; only ``A_t`` reset and count updates.

The first policy is ``argmin LCB_0`` (prior statistics) computed in ``init`` from ``s0``; it is
not counted as an update. The update of round ``t`` produces the policy of round ``t + 1``.

Exploration radius: ``beta_mode = "constant"`` uses ``params.beta``; ``"oful"`` uses Lemma 12,
``beta_{t,i} = sigma sqrt(d_i log((1 + t L^2 / lambda_i) / delta)) + sqrt(lambda_i) S`` with
``L = 1`` and ``d_i`` the criterion's real feature count.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gsjax import lcb, linalg
from gsjax.algorithms import schedules
from gsjax.algorithms.base import (
    AgentParams,
    AgentSpec,
    BanditAlgorithm,
    BanditInfo,
    BanditState,
    SolveRequest,
    split_update,
)
from gsjax.problem import Feedback, Problem, Structure, all_features

__all__ = ["KINDS", "make_ucb", "exploration_radius", "coords_of"]

KINDS = ("linucb", "lazy", "async_lazy")


def exploration_radius(spec: AgentSpec, params: AgentParams, problem: Problem, t,
                       feat_mask: jax.Array | None = None) -> jax.Array:
    """(k,) ``beta_{t,i}`` after ``t`` observations; ``d_i`` counts the features of
    ``feat_mask`` (default ``problem.feat_mask``; ``adaptive_lazy`` passes its kept ones)."""
    if spec.beta_mode == "constant":
        return params.beta
    mask = problem.feat_mask if feat_mask is None else feat_mask
    d_i = jnp.sum(mask, axis=-1).astype(params.lambda_reg.dtype)
    lam = params.lambda_reg
    log_term = jnp.log((1.0 + t / lam) / params.oful_delta)
    return params.oful_sigma * jnp.sqrt(d_i * log_term) + jnp.sqrt(lam) * params.oful_S


def coords_of(problem: Problem, criteria: jax.Array, num_coords: int) -> jax.Array:
    """(n,) bool: coordinates in the union of the scopes of the criteria marked in (k,) bool."""
    hit = (criteria[:, None] & problem.scope_mask).astype(jnp.int32).reshape(-1)
    counts = jnp.zeros((num_coords,), jnp.int32).at[problem.scopes.reshape(-1)].max(hit)
    return counts > 0


def solve_lcb(key, structure: Structure, spec: AgentSpec, problem: Problem, theta_hat, inv,
              beta, s_init, free, params: AgentParams):
    """``(s, lcb_value, residual)``: the spec's solver (vertex enumeration or PGD) on the LCB
    of ``theta_hat`` / ``inv`` over the ``free`` coordinates, from ``s_init``."""
    if spec.solver == "vertex":
        return lcb.minimise_vertex(structure, problem, theta_hat, inv, beta, s_init, free)
    return lcb.minimise_pgd(
        key, structure, problem, theta_hat, inv, beta, s_init, free,
        num_steps=spec.pgd_steps, num_starts=spec.pgd_starts,
        learning_rate=params.pgd_lr, optimizer=spec.pgd_optimizer,
        include_current=spec.pgd_include_current,
    )


def make_ucb(kind: str, structure: Structure, spec: AgentSpec) -> BanditAlgorithm:
    """Build one of ``KINDS`` for a problem structure and static spec."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; allowed: {KINDS}")
    if spec.solver not in ("vertex", "pgd"):
        raise ValueError(f"unknown solver {spec.solver!r}; allowed: ('vertex', 'pgd')")
    if spec.reference not in ("global", "own"):
        raise ValueError(f"unknown reference {spec.reference!r}; allowed: ('global', 'own')")
    schedule = schedules.BY_KIND[kind](reference=spec.reference)
    n, d = structure.num_coords, structure.feature_dim

    def solve(key, stats, beta, s_init, free, params, problem):
        theta_hat = jax.vmap(linalg.theta_hat)(stats)
        return solve_lcb(key, structure, spec, problem, theta_hat, stats.inv, beta, s_init, free,
                         params)

    def init(key, params: AgentParams, problem: Problem) -> BanditState:
        dtype = problem.theta.dtype
        stats = jax.vmap(lambda lam: linalg.init(lam, d, dtype))(params.lambda_reg)
        t = jnp.zeros((), jnp.int32)
        beta = exploration_radius(spec, params, problem, t.astype(dtype))
        free = jnp.ones((n,), bool)
        s, _, _ = solve(key, stats, beta, problem.s0, free, params, problem)
        return BanditState(stats=stats, logdet_ref=stats.logdet, s=s, t=t)

    def act(key, state: BanditState, params: AgentParams, problem: Problem):
        del key, params, problem
        return state.s, state

    def prepare(key, state: BanditState, action, feedback: Feedback, params: AgentParams,
                problem: Problem):
        """Statistics, trigger and references; the policy ``state.s`` is left unchanged."""
        del key
        dtype = problem.theta.dtype
        phi = all_features(structure, problem, action)  # (k, d)
        t = state.t + 1
        if spec.refresh_every == 1:
            do_refresh = True
        else:
            do_refresh = (t % spec.refresh_every) == 0
        stats = jax.vmap(linalg.update, in_axes=(0, 0, 0, None))(
            state.stats, phi, feedback.y, do_refresh
        )
        beta = exploration_radius(spec, params, problem, t.astype(dtype))
        triggered = (stats.logdet - state.logdet_ref) > params.log_trigger
        d = schedule.decide(triggered, stats.logdet, state.logdet_ref,
                            lambda c: coords_of(problem, c, n), n)
        reopt, free, updated, logdet_ref = d
        new_state = BanditState(stats=stats, logdet_ref=logdet_ref, s=state.s, t=t)
        request = SolveRequest(reoptimise=reopt, free=free, beta=beta)
        info = BanditInfo(
            triggered=triggered,
            updated=updated,
            reoptimised=reopt,
            lcb_residual=jnp.zeros((), dtype),
        )
        return new_state, request, info

    def solve_request(key, state: BanditState, request: SolveRequest, params: AgentParams,
                      problem: Problem):
        """The re-minimised policy ``(s, residual)`` for a prepared state (ignores the flag)."""
        s, _, res = solve(key, state.stats, request.beta, state.s, request.free, params, problem)
        return s, res

    return BanditAlgorithm(
        name=kind, init=init, act=act,
        update=split_update(prepare, solve_request, schedule.always_solves),
        prepare=prepare, solve=solve_request, always_solves=schedule.always_solves,
    )
