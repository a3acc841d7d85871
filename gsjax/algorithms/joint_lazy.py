r"""Joint-LazyGraphLinUCB (Section 5.3; docs/paper/section5_3.md): one ridge estimator over
the stacked factor parameters.

The feedback is :math:`Y_t = \Psi(s_t)\theta_{joint} + \eta_t \in \mathbb{R}^k`
(:mod:`gsjax.factor`); ``V`` gains a rank-``k`` update a round
(:func:`gsjax.linalg.update_rank_k`) and the LCB, with :math:`g(s) = \Psi(s)^\top \mathbf 1`, is
:math:`\langle g(s), \hat\theta_t\rangle - \beta_t \|g(s)\|_{V_t^{-1}}`. ``joint_lazy``
re-minimises when ``log det V - log det V_ref > log c`` (an update of every node),
``joint_linucb`` every round. ONE regulariser and ONE radius, the largest of
``params.lambda_reg`` and ``params.beta``; ``beta_mode = "oful"``:
``beta_t = sigma sqrt(d_eff log((1 + t L_J^2 / lambda) / delta)) + sqrt(lambda) S``, ``d_eff``
real parameters, ``sigma`` the largest noise scale, ``L_J^2 = sum_i L_i^2``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gsjax import factor, lcb, linalg
from gsjax.algorithms import schedules
from gsjax.algorithms.base import AgentParams, AgentSpec, BanditAlgorithm
from gsjax.algorithms.decisions import HARD, Logic
from gsjax.algorithms.kernel import (Estimator, check_solver, make_kernel, oful_norm_sq,
                                     refresh_now)
from gsjax.problem import Problem, Structure

__all__ = ["KINDS", "UPDATE_METHOD", "joint", "make_joint", "make_lazy", "make_linucb",
           "joint_lcb_value", "exploration_radius"]

KINDS = ("joint_lazy", "joint_linucb")
# One joint determinant: the global doubling (the only reference reading), or every round.
_SCHEDULES = {"joint_lazy": schedules.doubling, "joint_linucb": schedules.every_round}
UPDATE_METHOD = "sherman_morrison"  # measured faster than Woodbury on CPU (benchmarks/)


def exploration_radius(spec: AgentSpec, params: AgentParams, structure: Structure,
                       problem: Problem, t) -> jax.Array:
    """() ``beta_t`` of the joint estimator after ``t`` rounds (see the module docstring).

    Why ``L_J^2 = sum_i L_i^2``: it bounds one round's ``||Psi(s)||_F^2``, row ``i`` of
    ``Psi(s)`` holding node ``i``'s features (squared norm at most its ``L_i^2``:
    ``params.oful_L[i] ** 2``, else the feature map's bound). The determinant-trace inequality
    gives ``log(det V_t / lambda^d_eff) <= d_eff log(1 + t L_J^2 / (lambda d_eff))``, below the
    ``d_eff log(1 + t L_J^2 / lambda)`` used: the node-wise radius with ``L_i -> L_J``,
    ``d_i -> d_eff``."""
    if spec.beta_mode == "constant":
        return jnp.max(params.beta)
    lam = jnp.max(params.lambda_reg)
    d_eff = jnp.sum(factor.joint_mask(problem)).astype(lam.dtype)
    norm_sq = jnp.sum(oful_norm_sq(params, structure.env.feature_norm_sq_bound(structure, problem)))
    log_term = jnp.log((1.0 + t * norm_sq / lam) / params.oful_delta)
    return jnp.max(params.oful_sigma) * jnp.sqrt(d_eff * log_term) + jnp.sqrt(lam) * params.oful_S


def joint_lcb_value(structure: Structure, problem: Problem, s, theta_hat, inv, beta):
    """() ``<g(s), theta_hat> - beta ||g(s)||_{V^{-1}}`` with ``g(s) = Psi(s)^T 1``."""
    g = jnp.sum(factor.joint_features(structure, problem, s), axis=0)
    return lcb.lcb_terms(g, theta_hat, inv, beta)


def joint(structure: Structure, spec: AgentSpec, method: str = UPDATE_METHOD) -> Estimator:
    """The joint ridge estimator over the stacked factor parameters (one determinant)."""
    n, k, p = structure.num_coords, structure.num_criteria, factor.joint_dim(structure)

    def init(params, problem):
        return linalg.init(jnp.max(params.lambda_reg), p, problem.dtype), ()

    def observe(state, action, feedback, t, params, problem):
        psi = factor.joint_features(structure, problem, action)  # (k, p)
        stats = linalg.update_rank_k(state.stats, psi, feedback.y, refresh_now(spec, t), method)
        return stats, state.graph

    def objective(stats, graph, beta, problem):
        theta_hat = linalg.theta_hat(stats)
        return lcb.Objective(
            lambda s: joint_lcb_value(structure, problem, s, theta_hat, stats.inv, beta))

    return Estimator(
        init=init, observe=observe,
        radius=lambda params, problem, graph, t: exploration_radius(spec, params, structure,
                                                                    problem, t),
        objective=objective,
        union=lambda L, c, graph, problem: L.true((n,)),  # one criterion: every coordinate
        to_nodes=lambda x: jnp.broadcast_to(x, (k,)),  # a joint update counts for every node
    )


def make_joint(kind: str, structure: Structure, spec: AgentSpec, method: str = UPDATE_METHOD,
               logic: Logic = HARD) -> BanditAlgorithm:
    """Build ``joint_lazy`` or ``joint_linucb`` for a factor-graph structure."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; allowed: {KINDS}")
    check_solver(structure, spec)
    return make_kernel(kind, structure, spec, joint(structure, spec, method),
                       _SCHEDULES[kind](), logic)


def make_lazy(structure: Structure, spec: AgentSpec, logic: Logic = HARD) -> BanditAlgorithm:
    """``joint_lazy``: the joint determinant trigger (Section 5.3)."""
    return make_joint("joint_lazy", structure, spec, logic=logic)


def make_linucb(structure: Structure, spec: AgentSpec, logic: Logic = HARD) -> BanditAlgorithm:
    """``joint_linucb``: the joint estimator, re-minimised every round."""
    return make_joint("joint_linucb", structure, spec, logic=logic)
