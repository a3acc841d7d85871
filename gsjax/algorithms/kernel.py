r"""One bandit kernel, built from parts: estimator x schedule x solver x logic.

Every algorithm is :func:`make_kernel` of an :class:`Estimator` (what is learnt and how the LCB
reads it: :func:`ridge`, :mod:`~gsjax.algorithms.joint_lazy`, :mod:`~gsjax.algorithms.adaptive`),
a :class:`~gsjax.algorithms.schedules.Schedule` (when to re-minimise, over which coordinates), a
solver (``spec.solver``: vertex enumeration, the DP of :mod:`gsjax.dp`, or PGD) and a
:class:`~gsjax.algorithms.decisions.Logic` (hard decisions, or soft ones: :mod:`gsjax.relaxed`).
A round: ``t <- t + 1``, the estimator adds the observation, criterion ``i`` fires when
``log det V_i - log det V_i(ref) > log c``, the schedule decides, the solver re-minimises the LCB
over the free coordinates. The first policy is ``argmin LCB_0`` from ``s0``, not an update.

``beta_mode = "oful"`` (Lemma 12):
``beta_{t,i} = sigma sqrt(d_i log((1 + t L_i^2 / lambda_i) / delta)) + sqrt(lambda_i) S``, ``d_i``
the criterion's real feature count, ``L_i^2`` ``params.oful_L ** 2`` or the feature map's bound.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from gsjax import dp, lcb, linalg
from gsjax.algorithms import schedules
from gsjax.algorithms.base import (AgentParams, AgentSpec, BanditAlgorithm, BanditInfo,
                                   BanditState, SolveRequest)
from gsjax.algorithms.decisions import HARD, Logic
from gsjax.problem import Feedback, Problem, Structure, all_features

__all__ = ["Estimator", "make_kernel", "ridge", "solve_objective", "exploration_radius",
           "oful_norm_sq", "refresh_now", "ridge_init", "check_solver", "dp_applies",
           "node_recipe", "NODE_KINDS"]

NODE_KINDS = ("linucb", "lazy", "async_lazy")


class Estimator(NamedTuple):
    """What a kernel learns (one seed). ``stats`` carry ``logdet`` ((c,) or ()), which the
    trigger reads; ``graph`` is the estimator's extra state (``()`` when none)."""

    init: Callable  # (params, problem) -> (stats, graph)
    observe: Callable  # (state, action, feedback, t, params, problem) -> (stats, graph)
    radius: Callable  # (params, problem, graph, t) -> beta, the radius after t rounds
    objective: Callable  # (stats, graph, beta, problem) -> lcb.Objective
    union: Callable  # (logic, criteria (c,), graph, problem) -> (n,): OR of their scopes
    to_nodes: Callable  # x (c,) -> (k,): per-criterion values as the k criteria see them


def oful_norm_sq(params: AgentParams, default: jax.Array) -> jax.Array:
    """(k,) ``L_i^2`` of the OFUL radius: ``params.oful_L ** 2`` when set, else ``default``."""
    return default if params.oful_L is None else params.oful_L ** 2


def exploration_radius(spec: AgentSpec, params: AgentParams, feat_mask: jax.Array,
                       norm_sq: jax.Array, t) -> jax.Array:
    """(k,) ``beta_{t,i}`` after ``t`` observations; ``d_i`` counts the True entries of
    ``feat_mask`` (k, d) and ``norm_sq`` (k,) is the feature map's ``L_i^2`` for them."""
    if spec.beta_mode == "constant":
        return params.beta
    d_i = jnp.sum(feat_mask, axis=-1).astype(params.lambda_reg.dtype)
    lam = params.lambda_reg
    log_term = jnp.log((1.0 + t * oful_norm_sq(params, norm_sq) / lam) / params.oful_delta)
    return params.oful_sigma * jnp.sqrt(d_i * log_term) + jnp.sqrt(lam) * params.oful_S


def check_solver(structure: Structure, spec: AgentSpec, per_criterion: bool = False) -> None:
    """``ValueError`` for an unknown solver or reference, or vertices on non-linear features;
    ``"dp"`` also needs :func:`dp_applies` and a ``spec.dp_plan`` of the structure's scopes."""
    if spec.solver not in ("vertex", "pgd", "dp"):
        raise ValueError(f"unknown solver {spec.solver!r}; allowed: ('vertex', 'pgd', 'dp')")
    if spec.reference not in ("global", "own"):
        raise ValueError(f"unknown reference {spec.reference!r}; allowed: ('global', 'own')")
    if spec.solver == "vertex" and structure.features != "linear":
        raise ValueError("vertex enumeration is exact only for linear features; use PGD")
    if spec.pgd_gap and spec.solver != "pgd":
        raise ValueError(f"pgd_gap measures PGD against the DP: only with solver 'pgd', not "
                         f"{spec.solver!r}")
    if spec.solver != "dp" and not spec.pgd_gap:
        return
    what = "solver 'dp'" if spec.solver == "dp" else "pgd_gap (the DP's exact minimum)"
    if not dp_applies(structure, per_criterion):
        raise ValueError(f"{what} needs per-criterion linear features (linucb, lazy, "
                         "async_lazy on the linear model); use 'vertex' or 'pgd'")
    plan = spec.dp_plan
    if plan is None or (plan.num_coords, plan.num_criteria, plan.scope_size) != (
            structure.num_coords, structure.num_criteria, structure.scope_size):
        raise ValueError(f"{what}: spec.dp_plan must be gsjax.dp.make_plan(scopes) of "
                         "this structure's scopes")


def dp_applies(structure: Structure, per_criterion: bool) -> bool:
    """Whether solver ``"dp"`` applies: per-criterion linear terms on the linear model."""
    return per_criterion and structure.features == "linear" and structure.env.coordinate_model


def solve_objective(key, spec: AgentSpec, params: AgentParams, objective: lcb.Objective, s_init,
                    free, pick: lcb.Pick = lcb.first_pick):
    """``(s, value, residual)``: the spec's solver on ``objective`` over the ``free``
    coordinates from ``s_init``, choosing among candidates with ``pick``."""
    if spec.solver == "vertex":
        return lcb.minimise_vertices(objective, s_init, free, pick)
    if spec.solver == "dp":
        return dp.minimise(spec.dp_plan, objective, s_init, free, pick)
    s, value, residual = lcb.minimise_objective_pgd(
        key, objective.value, s_init, free, num_steps=spec.pgd_steps,
        num_starts=spec.pgd_starts, learning_rate=params.pgd_lr, optimizer=spec.pgd_optimizer,
        include_current=spec.pgd_include_current, pick=pick,
    )
    if spec.pgd_gap:  # the diagnostic: how far above the exact minimum PGD lands
        residual = jnp.maximum(value - dp.minimise(spec.dp_plan, objective, s_init, free)[1], 0.0)
    return s, value, residual


def refresh_now(spec: AgentSpec, t):
    """Whether round ``t`` refreshes ``V^{-1}``, ``log det V`` (static True: every round)."""
    return True if spec.refresh_every == 1 else (t % spec.refresh_every) == 0


def _keep(key, state, params, problem):
    return state.s, state


def _always(t):
    return True, False


def make_kernel(name: str, structure: Structure, spec: AgentSpec, estimator: Estimator,
                schedule: schedules.Schedule, logic: Logic = HARD, *, act: Callable = _keep,
                phase: Callable = _always, first_policy: bool = True,
                describe: Callable | None = None) -> BanditAlgorithm:
    """The :class:`BanditAlgorithm` of the parts.

    Args:
      act: ``act(key, state, params, problem) -> (action, state)``; default plays ``state.s``.
      phase: ``phase(t) -> (playing, forced)``: the trigger counts only while ``playing``;
        ``forced`` re-minimises everything (Section 5.2's warm-up and refinement round).
      first_policy: ``init`` computes ``argmin LCB_0`` (else the first policy is ``s0``).
      describe: ``describe(state, problem) -> dict`` of one seed's final state.
    """
    n = structure.num_coords
    L, est = logic, estimator
    direct = schedule.always_solves and not L.soft  # solve every round, no cond and no blend

    def solve(key, state: BanditState, beta, free, params, problem):
        objective = est.objective(state.stats, state.graph, beta, problem)
        return solve_objective(key, spec, params, objective, state.s, L.solve_mask(free), L.pick)

    def init(key, params: AgentParams, problem: Problem) -> BanditState:
        stats, graph = est.init(params, problem)
        t = jnp.zeros((), jnp.int32)
        state = BanditState(stats=stats, logdet_ref=jnp.reshape(stats.logdet, (-1,)),
                            s=problem.s0, t=t, graph=graph)
        if not first_policy:
            return state
        beta = est.radius(params, problem, graph, t.astype(problem.dtype))
        s, _, _ = solve(key, state, beta, L.true((n,)), params, problem)
        return state._replace(s=s)

    def prepare(key, state: BanditState, action, feedback: Feedback, params: AgentParams,
                problem: Problem):
        """Statistics, trigger and references; the policy ``state.s`` is left unchanged."""
        t = state.t + 1
        stats, graph = est.observe(state, action, feedback, t, params, problem)
        beta = est.radius(params, problem, graph, t.astype(problem.dtype))
        logdet = jnp.reshape(stats.logdet, (-1,))
        growth = logdet - state.logdet_ref
        triggered = growth > params.log_trigger
        fired = L.fires(growth, params.log_trigger)
        playing, forced = phase(t)
        if playing is not True:
            triggered, fired = playing & triggered, L.where(playing, fired)
        d = schedule.decide(L, fired, logdet, state.logdet_ref,
                            lambda c: est.union(L, c, graph, problem), n,
                            own=params.own_reference, per=params.per_criterion)
        if forced is not False:
            d = schedules.forced(L, d, forced, logdet)
        new_state = BanditState(stats=stats, logdet_ref=d.logdet_ref, s=state.s, t=t,
                                graph=graph)
        info = BanditInfo(triggered=est.to_nodes(triggered),
                          updated=L.count(est.to_nodes(d.updated)),
                          reoptimised=L.count(d.reoptimise),
                          lcb_residual=jnp.zeros((), problem.dtype))
        return new_state, SolveRequest(reoptimise=d.reoptimise, free=d.free, beta=beta), info

    def solve_request(key, state: BanditState, request: SolveRequest, params: AgentParams,
                      problem: Problem):
        """The re-minimised policy ``(s, residual)`` for a prepared state (ignores the flag)."""
        s, _, res = solve(key, state, request.beta, request.free, params, problem)
        return s, res

    def update(key, state, action, feedback, params, problem):
        state, request, info = prepare(key, state, action, feedback, params, problem)
        solve_ = lambda: solve_request(key, state, request, params, problem)  # noqa: E731
        s, res = solve_() if direct else L.apply(request.reoptimise, request.free, solve_,
                                                 state.s, info.lcb_residual)
        return state._replace(s=s), info._replace(lcb_residual=res)

    return BanditAlgorithm(
        name=name, init=init, act=act, update=update, prepare=prepare, solve=solve_request,
        always_solves=schedule.always_solves or L.soft,
        describe=describe or (lambda state, problem: {}), relaxed=L.soft,
        exact=spec.solver != "pgd",
    )


def ridge_init(params: AgentParams, problem: Problem, d: int, carry_inverse: bool = True,
               compensated: bool = False):
    """``(stats, ())``: a prior ridge estimator of ``d`` features per criterion (linalg.init)."""
    return jax.vmap(lambda lam: linalg.init(lam, d, problem.dtype, carry_inverse, compensated))(
        params.lambda_reg), ()


def ridge(structure: Structure, spec: AgentSpec) -> Estimator:
    """One ridge estimator per criterion on its own scope's features (DESIGN section 2)."""
    n, d = structure.num_coords, structure.feature_dim

    def observe(state, action, feedback, t, params, problem):
        phi = all_features(structure, problem, action)  # (k, d)
        stats = jax.vmap(linalg.update, in_axes=(0, 0, 0, None, None))(
            state.stats, phi, feedback.y, refresh_now(spec, t), spec.refresh_method)
        return stats, state.graph

    def objective(stats, graph, beta, problem):
        inv = jax.vmap(lambda st: linalg.inverse(st, spec.refresh_method))(stats)
        theta_hat = linalg.apply(inv, stats.b)
        return lcb.node_objective(structure, problem, theta_hat, inv, beta)

    # refreshed every round: V^{-1} is recomputed where the solver reads it, not carried
    carry_inverse = spec.refresh_every != 1
    return Estimator(
        init=lambda params, problem: ridge_init(params, problem, d, carry_inverse,
                                                spec.gram_summation == "compensated"),
        observe=observe,
        radius=lambda params, problem, graph, t: exploration_radius(
            spec, params, problem.feat_mask,
            structure.env.feature_norm_sq_bound(structure, problem), t),
        objective=objective,
        union=lambda L, c, graph, problem: L.union(
            c, problem.scopes, problem.scope_mask, n,
            slots=lcb.scope_slots(problem.scopes, problem.scope_mask, n)
            if structure.disjoint and not structure.contiguous else None,
            contiguous=structure.contiguous),
        to_nodes=lambda x: x,
    )


def node_recipe(kind: str):
    """The factory of ``linucb``, ``lazy`` or ``async_lazy``: per-criterion ridge with the
    schedule of ``kind`` (``lazy`` reads ``spec.reference``)."""
    if kind not in NODE_KINDS:
        raise ValueError(f"unknown kind {kind!r}; allowed: {NODE_KINDS}")

    def make(structure: Structure, spec: AgentSpec, logic: Logic = HARD) -> BanditAlgorithm:
        check_solver(structure, spec, per_criterion=True)
        schedule = schedules.BY_KIND[kind](reference=spec.reference)
        return make_kernel(kind, structure, spec, ridge(structure, spec), schedule, logic)

    return make
