r"""Adaptive graph refinement (Section 5.2; docs/paper/section5_2.md): learn the dependency
graph, then play lazily on it.

The learner sees the complete super-graph: criterion ``i``'s super-scope is every coordinate, its
own ``o_i = N(i)[0]`` first, then the others ascending. Rounds ``1 .. tau`` (``spec.warmup``)
play ``s ~ U([0,1]^n)`` and count nothing; after round ``tau`` the sparsity test keeps slot ``j``
of criterion ``i`` when its coefficient statistic exceeds ``gamma / 2`` (``spec.signal_gamma``;
the own coordinate always kept); then ``spec.refined`` (``lazy`` or ``async_lazy``) plays on the
learned graph, re-minimised and every reference reset right after the test. ``warmup = 0``:
lazy on the complete super-graph from round 1 (Corollary 5).

Restriction by masking (fixed shapes, so seeds with different graphs share one ``vmap``): ``S``
and ``b`` accumulate the FULL features; the inverse and log-det are those of the kept block of
``V_K = lambda I + S \circ (keep keep^T)``, and ``theta_hat = V_K^{-1} (b \circ keep)``.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from gsjax import lcb, linalg
from gsjax.algorithms import schedules
from gsjax.algorithms.base import AgentSpec, BanditAlgorithm
from gsjax.algorithms.decisions import HARD, Logic
from gsjax.algorithms.kernel import (Estimator, check_solver, exploration_radius, make_kernel,
                                     refresh_now, ridge_init)
from gsjax.problem import Problem, Structure, all_features, feature_dim, feature_norm_sq_bound

__all__ = ["REFINED_KINDS", "make", "restricted", "super_structure", "super_index",
           "super_problem", "feature_keep", "sparsity_test", "true_slots",
           "restricted_theta_hat"]

REFINED_KINDS = ("lazy", "async_lazy")


def super_structure(structure: Structure) -> Structure:
    """The learner's static structure: the complete super-graph, scopes of width ``n``."""
    n = structure.num_coords
    return dataclasses.replace(structure, scope_size=n, rff_dim=1, disjoint=False,
                               contiguous=False, feature_dim=feature_dim(structure.features, n))


def super_index(problem: Problem) -> jax.Array:
    """(k, n) int32 super-scopes: own coordinate ``scopes[i, 0]`` first, the others ascending."""
    own = problem.scopes[:, 0]
    j = jnp.arange(problem.s0.shape[-1] - 1, dtype=own.dtype)
    others = j[None, :] + (j[None, :] >= own[:, None]).astype(own.dtype)
    return jnp.concatenate([own[:, None], others], axis=1)


def true_slots(problem: Problem) -> jax.Array:
    """(k, n) bool: super-scope slot ``j`` of criterion ``i`` is in the TRUE scope ``N(i)``."""
    idx, n = super_index(problem), problem.s0.shape[-1]
    true_coords = jax.vmap(lambda sc, sm: jnp.zeros((n,), bool).at[sc].max(sm))(
        problem.scopes, problem.scope_mask)  # (k, n) by coordinate
    return jnp.take_along_axis(true_coords, idx, axis=1)


def feature_keep(kind: str, scope_keep: jax.Array) -> jax.Array:
    """(k, D) bool kept features of the super-graph feature map, from kept slots (k, n)."""
    if kind == "linear":
        return scope_keep
    others = scope_keep[:, 1:]
    return jnp.concatenate([jnp.ones((scope_keep.shape[0], 3), bool), others, others], axis=1)


def super_problem(structure: Structure, problem: Problem, scope_keep: jax.Array) -> Problem:
    """The learner's problem: super-scopes, masks of the kept slots/features, no ``theta*``."""
    k, n = scope_keep.shape
    dtype = problem.dtype
    return problem._replace(
        scopes=super_index(problem), scope_mask=scope_keep,
        feat_mask=feature_keep(structure.features, scope_keep),
        theta=jnp.zeros((k, feature_dim(structure.features, n)), dtype),
        rff_omega=jnp.zeros((k, 1, n), dtype), rff_phase=jnp.zeros((k, 1), dtype),
    )


def sparsity_test(kind: str, theta_hat: jax.Array, gamma) -> jax.Array:
    """(k, n) bool kept slots ``c_{i,j} > gamma / 2`` (own slot always kept).

    ``c_{i,j} = |theta_hat_{i, s_j}|`` for linear features; for quadratic ones (features
    ``[1, s_o, s_o^2, {s_j}, {s_o s_j}]``) ``max(|theta_hat_{i, s_j}|, |theta_hat_{i, s_o s_j}|)``,
    the two coefficients through which ``s_j`` enters ``mu_i`` (Assumption B)."""
    k, d = theta_hat.shape
    a = jnp.abs(theta_hat)
    n = (d - 1) // 2
    stat = a[:, 1:] if kind == "linear" else jnp.maximum(a[:, 3:n + 2], a[:, n + 2:])
    inf = jnp.full((k, 1), jnp.inf, theta_hat.dtype)
    return jnp.concatenate([inf, stat], axis=1) > 0.5 * gamma


def _masked_refresh(data_gram, lam, keep):
    """``(V_K^{-1}, log det of the kept block)`` from the masked data Gram (one criterion)."""
    km = keep[:, None] & keep[None, :]
    inv, logdet = linalg.refresh(jnp.where(km, data_gram, 0.0), lam)
    return inv, logdet - jnp.sum(~keep).astype(logdet.dtype) * jnp.log(lam)


def restricted_theta_hat(stats: linalg.RidgeStats, keep: jax.Array) -> jax.Array:
    """(k, D) reduced ridge estimates ``V_K^{-1} (b * keep)`` (zero on dropped features)."""
    return jnp.einsum("kij,kj->ki", stats.inv, jnp.where(keep, stats.b, 0.0))


def restricted(structure: Structure, spec: AgentSpec) -> Estimator:
    """Ridge on the complete super-graph, restricted after round ``tau`` to the learned graph
    (``graph``: the kept super-scope slots (k, n))."""
    sup = super_structure(structure)
    n, k, d = sup.num_coords, sup.num_criteria, sup.feature_dim
    kind, tau, gamma = structure.features, int(spec.warmup), float(spec.signal_gamma)

    def init(params, problem):
        return ridge_init(params, problem, d)[0], jnp.ones((k, n), bool)

    def observe(state, action, feedback, t, params, problem):
        full = super_problem(structure, problem, jnp.ones((k, n), bool))
        phi = all_features(sup, full, action)  # (k, D) full super-graph features
        st, scope_keep, refine_now = state.stats, state.graph, t == tau
        if tau > 0:
            # The test reads theta_hat of V_tau: one Sherman-Morrison step from V_{tau-1}^{-1}
            # (all features kept during warm-up), so the round needs one factorisation only.
            inv_full = jax.vmap(linalg.sherman_morrison)(st.inv, phi)
            theta_full = jnp.einsum("kij,kj->ki", inv_full, st.b + phi * feedback.y[:, None])
            scope_keep = jnp.where(refine_now, sparsity_test(kind, theta_full, gamma), scope_keep)
        do_refresh = refresh_now(spec, t)
        if do_refresh is not True:  # the test round refreshes: the kept block changes
            do_refresh = do_refresh | refine_now

        def one(st, phi, y, keep):  # one criterion, the kept features' inverse and log-det
            phi_k = jnp.where(keep, phi, 0.0)
            incremental = lambda _: (linalg.sherman_morrison(st.inv, phi_k),  # noqa: E731
                                     st.logdet + linalg.logdet_increment(st.inv, phi_k))
            data_gram, err = linalg.add_gram(st, jnp.outer(phi, phi))
            return linalg.advance(st, data_gram, st.b + phi * y, incremental, do_refresh,
                                  lambda gram, lam: _masked_refresh(gram, lam, keep), err)

        return jax.vmap(one)(st, phi, feedback.y, feature_keep(kind, scope_keep)), scope_keep

    def radius(params, problem, graph, t):
        keep = feature_keep(kind, graph)  # d_i and L_i^2 of criterion i's kept features
        norm_sq = feature_norm_sq_bound(sup, keep, problem.dtype)
        return exploration_radius(spec, params, keep, norm_sq, t)

    def objective(stats, graph, beta, problem):
        prob = super_problem(structure, problem, graph)
        theta_hat = restricted_theta_hat(stats, prob.feat_mask)
        return lcb.node_objective(sup, prob, theta_hat, stats.inv, beta)

    return Estimator(  # union: async on the refined scopes
        init=init, observe=observe, radius=radius, objective=objective,
        union=lambda L, c, graph, problem: L.union(c, super_index(problem), graph, n),
        to_nodes=lambda x: x,
    )


def make(structure: Structure, spec: AgentSpec, logic: Logic = HARD) -> BanditAlgorithm:
    """Build ``adaptive_lazy`` (options ``spec.warmup``, ``spec.signal_gamma``,
    ``spec.refined``)."""
    if not structure.env.coordinate_model:
        raise ValueError(f"adaptive refinement needs a per-criterion coordinate model (the "
                         f"linear environment), not {structure.env.name!r}")
    if structure.features not in ("linear", "quadratic"):
        raise ValueError(f"adaptive refinement needs 'linear' or 'quadratic' features (a "
                         f"coefficient per coordinate); got {structure.features!r}")
    check_solver(structure, spec)
    if spec.refined not in REFINED_KINDS:
        raise ValueError(f"unknown refined schedule {spec.refined!r}; allowed: {REFINED_KINDS}")
    if spec.warmup < 0 or not spec.signal_gamma >= 0:
        raise ValueError("warmup must be >= 0 and signal_gamma >= 0")
    n, tau = structure.num_coords, int(spec.warmup)
    if spec.solver == "vertex" and n > lcb.MAX_VERTEX_COORDS:
        raise ValueError(f"vertex enumeration on the complete super-graph needs n <= "
                         f"{lcb.MAX_VERTEX_COORDS}; got n = {n}: use the PGD solver")

    def act(key, state, params, problem):
        explore = jax.random.uniform(key, (n,), jnp.float32).astype(state.s.dtype)
        return jnp.where(state.t < tau, explore, state.s), state

    # tau = 0 (Corollary 5): lazy on the super-graph from the first round; else the warm-up
    # plays are random, the trigger counts after the test round (forced), the first LCB
    # policy comes after it
    warmup = {} if tau == 0 else dict(act=act, phase=lambda t: (t > tau, t == tau),
                                      first_policy=False)
    return make_kernel("adaptive_lazy", structure, spec, restricted(structure, spec),
                       schedules.BY_KIND[spec.refined](reference="global"), logic,
                       describe=describe, **warmup)


def describe(state, problem: Problem) -> dict:
    """The learned graph of one seed by coordinate: ``learned_neighbours[i, j]`` (k, n) is True
    when coordinate ``j`` is in criterion ``i``'s refined scope ``N̂(i)`` (all True before the
    sparsity test), ``true_neighbours`` the same for the true scope ``N(i)``."""
    idx = super_index(problem)

    def by_coord(slots):
        return jax.vmap(lambda ix, sl: jnp.zeros(sl.shape, bool).at[ix].set(sl))(idx, slots)

    return {"learned_neighbours": by_coord(state.graph),
            "true_neighbours": by_coord(true_slots(problem))}
