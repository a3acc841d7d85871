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
bound with ``d_eff`` real parameters and ``k`` rows of norm at most ``L = 1`` per round,
``beta_t = sigma sqrt(d_eff log((1 + t k / lambda) / delta)) + sqrt(lambda) S`` with ``sigma`` the
largest node noise scale (the node-wise radius of :mod:`gsjax.algorithms._ucb` with
``t -> t k``, ``d_i -> d_eff``).

The first policy is ``argmin LCB_0`` computed in ``init`` from ``s0`` (not counted), as for the
node-wise algorithms.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gsjax import factor, lcb, linalg
from gsjax.algorithms import schedules
from gsjax.algorithms.base import (
    AgentParams,
    AgentSpec,
    BanditAlgorithm,
    BanditInfo,
    SolveRequest,
    split_update,
)
from gsjax.problem import Feedback, Problem, Structure

__all__ = ["KINDS", "UPDATE_METHOD", "JointState", "make_joint", "make_lazy", "make_linucb",
           "joint_lcb_value", "exploration_radius"]

KINDS = ("joint_lazy", "joint_linucb")
# One joint determinant: the global doubling (the only reference reading), or every round.
_SCHEDULES = {"joint_lazy": schedules.doubling, "joint_linucb": schedules.every_round}
UPDATE_METHOD = "sherman_morrison"  # measured faster than Woodbury on CPU (benchmarks/)


class JointState(NamedTuple):
    """What the next round needs (one seed)."""

    stats: linalg.RidgeStats  # joint: data_gram (p,p), lam (), inv (p,p), b (p,), logdet ()
    logdet_ref: jax.Array  # () log det V at the last update
    s: jax.Array  # (n,) active policy, the state played next round
    t: jax.Array  # () int32, rounds observed so far


def exploration_radius(spec: AgentSpec, params: AgentParams, problem: Problem, t) -> jax.Array:
    """() ``beta_t`` of the joint estimator after ``t`` rounds (see the module docstring)."""
    if spec.beta_mode == "constant":
        return jnp.max(params.beta)
    lam = jnp.max(params.lambda_reg)
    d_eff = jnp.sum(factor.joint_mask(problem)).astype(lam.dtype)
    k = problem.theta.shape[0]
    log_term = jnp.log((1.0 + t * k / lam) / params.oful_delta)
    return jnp.max(params.oful_sigma) * jnp.sqrt(d_eff * log_term) + jnp.sqrt(lam) * params.oful_S


def joint_lcb_value(structure: Structure, problem: Problem, s, theta_hat, inv, beta):
    """() ``<g(s), theta_hat> - beta ||g(s)||_{V^{-1}}`` with ``g(s) = Psi(s)^T 1``."""
    g = jnp.sum(factor.joint_features(structure, problem, s), axis=0)
    return lcb.lcb_terms(g, theta_hat, inv, beta)


def _minimise_vertex(value, n: int, s_init, free):
    """Exact minimiser of a concave objective over the free coordinates' vertices.

    Vertex ``p`` sets free coordinate ``j`` to bit ``j`` of ``p``; the lowest ``p`` among
    values within the tolerance of :func:`gsjax.lcb.first_min` wins (the rule of gsjax.lcb).
    """
    if n > lcb.MAX_VERTEX_COORDS:
        raise ValueError(
            f"vertex enumeration needs n <= {lcb.MAX_VERTEX_COORDS}; got n = {n}: use the PGD solver"
        )
    bits = lcb._bit_table(n, s_init.dtype)
    verts = lcb._vertices_from_free(bits, s_init, free)
    vals = jax.vmap(value)(verts)
    p = lcb.first_min(vals)
    return verts[p], vals[p], jnp.zeros((), s_init.dtype)


def make_joint(kind: str, structure: Structure, spec: AgentSpec,
               method: str = UPDATE_METHOD) -> BanditAlgorithm:
    """Build ``joint_lazy`` or ``joint_linucb`` for a factor-graph structure."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; allowed: {KINDS}")
    if spec.solver not in ("vertex", "pgd"):
        raise ValueError(f"unknown solver {spec.solver!r}; allowed: ('vertex', 'pgd')")
    if spec.solver == "vertex" and structure.features != "linear":
        raise ValueError("vertex enumeration is exact only for linear features; use PGD")
    n, k = structure.num_coords, structure.num_criteria
    p = factor.joint_dim(structure)
    schedule = _SCHEDULES[kind]()

    def solve(key, stats, beta, s_init, free, params, problem):
        theta_hat = linalg.theta_hat(stats)
        value = lambda s: joint_lcb_value(structure, problem, s, theta_hat, stats.inv, beta)
        if spec.solver == "vertex":
            return _minimise_vertex(value, n, s_init, free)
        return lcb.minimise_objective_pgd(
            key, value, n, s_init, free, num_steps=spec.pgd_steps, num_starts=spec.pgd_starts,
            learning_rate=params.pgd_lr, optimizer=spec.pgd_optimizer,
            include_current=spec.pgd_include_current,
        )

    def init(key, params: AgentParams, problem: Problem) -> JointState:
        dtype = problem.theta.dtype
        stats = linalg.init(jnp.max(params.lambda_reg), p, dtype)
        t = jnp.zeros((), jnp.int32)
        beta = exploration_radius(spec, params, problem, t.astype(dtype))
        s, _, _ = solve(key, stats, beta, problem.s0, jnp.ones((n,), bool), params, problem)
        return JointState(stats=stats, logdet_ref=stats.logdet, s=s, t=t)

    def act(key, state: JointState, params: AgentParams, problem: Problem):
        del key, params, problem
        return state.s, state

    def prepare(key, state: JointState, action, feedback: Feedback, params: AgentParams,
                problem: Problem):
        """Joint statistics, trigger and reference; the policy ``state.s`` is left unchanged."""
        del key
        dtype = problem.theta.dtype
        psi = factor.joint_features(structure, problem, action)  # (k, p)
        t = state.t + 1
        do_refresh = True if spec.refresh_every == 1 else (t % spec.refresh_every) == 0
        stats = linalg.update_rank_k(state.stats, psi, feedback.y, do_refresh, method)
        beta = exploration_radius(spec, params, problem, t.astype(dtype))
        triggered = (stats.logdet - state.logdet_ref) > params.log_trigger
        # one joint determinant: the schedule over a single "criterion", every coordinate free
        d = schedule.decide(triggered[None], stats.logdet[None], state.logdet_ref[None],
                            None, n)
        reopt, logdet_ref = d.reoptimise, d.logdet_ref[0]
        new_state = JointState(stats=stats, logdet_ref=logdet_ref, s=state.s, t=t)
        request = SolveRequest(
            reoptimise=reopt, free=jnp.ones((n,), bool), beta=jnp.broadcast_to(beta, (k,))
        )
        info = BanditInfo(
            triggered=jnp.broadcast_to(triggered, (k,)),
            updated=jnp.broadcast_to(reopt, (k,)),
            reoptimised=reopt,
            lcb_residual=jnp.zeros((), dtype),
        )
        return new_state, request, info

    def solve_request(key, state: JointState, request: SolveRequest, params: AgentParams,
                      problem: Problem):
        """The re-minimised policy ``(s, residual)`` for a prepared state (ignores the flag)."""
        s, _, res = solve(key, state.stats, request.beta[0], state.s, request.free, params,
                          problem)
        return s, res

    return BanditAlgorithm(
        name=kind, init=init, act=act,
        update=split_update(prepare, solve_request, schedule.always_solves),
        prepare=prepare, solve=solve_request, always_solves=schedule.always_solves,
    )


def make_lazy(structure: Structure, spec: AgentSpec) -> BanditAlgorithm:
    """``joint_lazy``: the joint determinant trigger (Section 5.3)."""
    return make_joint("joint_lazy", structure, spec)


def make_linucb(structure: Structure, spec: AgentSpec) -> BanditAlgorithm:
    """``joint_linucb``: the joint estimator, re-minimised every round."""
    return make_joint("joint_linucb", structure, spec)
