r"""Joint-LazyGraphLinUCB (Section 5.3): one ridge estimator over the stacked factor parameters.

On a factor-graph problem (:mod:`gsjax.factor`, ``environment = "factor"``; any other problem
is read as one factor per criterion, :func:`gsjax.factor.joint_features`) the feedback is
:math:`Y_t = \Psi(s_t)\theta_{joint} + \eta_t \in \mathbb{R}^k`. The estimator keeps

.. math::
    V_t = \lambda I + \sum_{\tau \le t} \Psi(s_\tau)^\top \Psi(s_\tau), \qquad
    b_t = \sum_{\tau \le t} \Psi(s_\tau)^\top Y_\tau, \qquad \hat\theta_t = V_t^{-1} b_t,

a rank-``k`` update per round (:func:`gsjax.linalg.update_rank_k`: the data Gram ``S`` is the
source of truth, ``V^{-1}`` and ``log det V`` are refreshed from it every ``refresh_every``
rounds and advanced in between by ``k`` successive Sherman--Morrison steps, which measured as
fast as or faster than one Woodbury step on CPU, ``benchmarks/joint_update.py``: Woodbury / SM
run time 1.9x at ``k = 1..32, p = 4``, 1.0x at ``p = 16``, 7x at ``k = 32, p = 64``).

LCB (the confidence term of the paper's joint regret bound,
:math:`r_t \le 2\beta_t \|\Psi(s_t)^\top \mathbf 1\|_{V_t^{-1}}`): with
:math:`g(s) = \Psi(s)^\top \mathbf 1 = \sum_i \Psi_i(s)`,

.. math::
    \mathrm{LCB}_t(s) = \langle g(s), \hat\theta_t\rangle - \beta_t \|g(s)\|_{V_t^{-1}},

the optimistic value of the TOTAL loss over the joint confidence ellipsoid
:math:`\|\theta - \hat\theta_t\|_{V_t} \le \beta_t`. It is minimised over the box by exact vertex
enumeration (linear base features: ``g`` is linear in ``s``, the LCB concave, the minimum at a
vertex; ``2^n`` vertices, ``n <= 16``) or projected gradient descent, with the tie rule and the
starts of :mod:`gsjax.lcb`.

Kinds:

* ``joint_lazy`` -- re-minimise when the joint determinant grows by the trigger ratio since the
  last update, ``log det V - log det V_ref > log c`` (``c = 2``: it doubles), then reset the
  reference. Every node counts the update ("a joint update counts for every node"); the
  per-node ``triggered`` flag is the joint trigger, broadcast.
* ``joint_linucb`` -- re-minimise every round.

Scalar hyperparameters: the joint estimator has ONE regulariser and ONE radius; it uses the
largest of the per-criterion values of ``params.lambda_reg`` and ``params.beta`` (configs give a
single value, so this is that value). ``beta_mode = "oful"``: the vector-valued self-normalised
bound with ``d_eff`` real parameters,
``beta_t = sigma sqrt(d_eff log((1 + t L_J^2 / lambda) / delta)) + sqrt(lambda) S`` with ``sigma``
the largest node noise scale and ``L_J^2 = sum_i L_i^2`` a bound on one round's
``tr(Psi(s)^T Psi(s)) = ||Psi(s)||_F^2``: row ``i`` of ``Psi(s)`` holds node ``i``'s node-wise
features ``psi_{C,i}`` (in the factors' blocks instead of its own slots), so its squared norm is
at most node ``i``'s ``L_i^2`` (``params.oful_L[i] ** 2`` when set, else
``Environment.feature_norm_sq_bound``: ``sum_{C in i} d_C`` for linear features with orthogonal or
identity mixing). The determinant-trace inequality gives ``log(det V_t / lambda^{d_eff}) <=
d_eff log(1 + t L_J^2 / (lambda d_eff))``, below the ``d_eff log(1 + t L_J^2 / lambda)`` used here
(the node-wise radius of :mod:`gsjax.algorithms.kernel` with ``t L_i^2 -> t L_J^2``,
``d_i -> d_eff``). ``L_J^2 <= k max_i L_i^2``, equal when every node has the same bound (the
clique of Figure 2: ``k D``).

Both are :func:`gsjax.algorithms.kernel.make_kernel` with the joint estimator (:func:`joint`),
one "criterion" for the schedules, so the first policy, the solvers, the tie rule and the
relaxed form are those of the node-wise algorithms.
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
    """() ``beta_t`` of the joint estimator after ``t`` rounds (see the module docstring)."""
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
    n, k = structure.num_coords, structure.num_criteria
    p = factor.joint_dim(structure)

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
