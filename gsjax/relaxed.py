r"""A relaxed (differentiable) mode of LinUCB, LazyGraphLinUCB and Async-LazyGraphLinUCB.

The hard algorithms (:mod:`gsjax.algorithms._ucb`) take two decisions that have no useful
gradient: the trigger ``log det V_i - log det V_i(ref) > log c`` and the argmin of the LCB. The
relaxed mode replaces both by smooth surrogates, so that the regret of a WHOLE run is a
differentiable function of the float hyperparameters (:class:`~gsjax.algorithms.AgentParams`:
``beta``, ``lambda_reg``, ``log_trigger = log c``, ...):

* **Soft trigger.** Criterion ``i``'s gate is

  .. math:: g_i = \sigma\big((\log\det V_i - \log\det V_i^{\rm ref} - \log c) / \tau\big).

  ``lazy`` (global) re-optimises with the soft OR ``G = 1 - \prod_i (1 - g_i)`` (computed as
  ``-expm1(sum_i log sigma(-x_i/tau))``); ``async_lazy`` gates coordinate ``j`` by the soft OR of
  the criteria whose scope holds ``j``; ``linucb`` always re-optimises (gate 1). The policy is
  blended, ``s_new = G s_solved + (1 - G) s_old``, and so are the references:
  ``ref_new = r log det V + (1 - r) ref_old`` with ``r = G`` (global reference) or ``r = g_i``
  (``reference = "own"`` and ``async_lazy``).
* **Soft solve.** ``solver = "vertex"``: a soft-min over the vertices (block by block for
  disjoint scopes, the whole box otherwise), weights
  ``softmax(-(LCB_p + kappa sqrt(tau_s) p) / tau_s)``. The penalty ``kappa sqrt(tau_s) p`` on the
  vertex index ``p`` vanishes as ``tau_s -> 0`` but dominates ``tau_s``, so exact ties go to the
  lowest index as in the hard rule (:func:`gsjax.lcb.first_min`); a penalty proportional to
  ``tau_s`` would leave a tie split ``1 : e^{-kappa}`` at every temperature. Ties matter: after
  a block's first all-ones round ``theta_hat`` is symmetric in its coordinates, and the two
  one-hot vertices tie exactly. ``solver = "pgd"``: the same fixed-step projected PGD as the hard
  solver (:func:`gsjax.lcb.minimise_pgd`, same starts from the same key, unrolled through
  ``lax.scan``), then the same soft-min over the final points of the starts.
* **Noise** is reparameterised already: ``y = <phi(s), theta*> + eta`` with ``eta`` drawn from
  the round key, independent of the played state and of the hyperparameters.

The soft solve runs every round (the blend needs it), over ALL coordinates: for disjoint scopes
the LCB separates over blocks, so this equals the hard asynchronous solve (which frees only the
triggering blocks) on every block whose gate is 1; for overlapping scopes ``async_lazy``'s
relaxation is an approximation (it frees every coordinate, then gates per coordinate).

As ``tau, tau_s -> 0`` every gate and soft-min weight tends to 0 or 1 and the relaxed run is the
hard run, on the same keys (``tests/test_relaxed.py``; the table in the README).

Memory: the round loop is a scan over blocks of ``B`` rounds, each block ``jax.checkpoint``-ed,
so reverse mode keeps the carries at block boundaries (``T/B`` of them) plus one block's
residuals; ``B ~ sqrt(T)`` by default (:func:`default_block`).

The objective is the run's prediction regret plus movement cost,
``sum_t (L(s_t) - L(s*)) + lambda sum_t ||s_t - s_{t-1}||_1``, with the keys of the runner
(:mod:`gsjax.runner`): seed key ``fold_in(root, i)``, round key ``fold_in(seed_key, t)``, its
sub-keys 0 (noise) and 2 (solver), ``init`` with ``fold_in(seed_key, 0)``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from gsjax import lcb, linalg
from gsjax.algorithms._ucb import KINDS, exploration_radius
from gsjax.algorithms.base import AgentParams, AgentSpec, BanditState
from gsjax.problem import Problem, Structure, all_features, observe

__all__ = [
    "RelaxParams",
    "RelaxedTotals",
    "relax_params",
    "soft_vertex",
    "soft_pgd",
    "make_relaxed",
    "default_block",
    "run_relaxed",
    "make_objective",
]


class RelaxParams(NamedTuple):
    """Relaxation settings (traced: a temperature sweep reuses one compiled program)."""

    temperature: jax.Array  # () tau: trigger gates, in log-det units
    solve_temperature: jax.Array  # () tau_s: soft-min over candidates, in LCB units
    tie_break: jax.Array  # () kappa: candidate p is penalised by kappa sqrt(tau_s) p


def relax_params(temperature: float = 0.1, solve_temperature: float | None = None,
                 tie_break: float = 0.01, dtype=jnp.float32) -> RelaxParams:
    """:class:`RelaxParams` from floats (``solve_temperature`` defaults to ``temperature``)."""
    ts = temperature if solve_temperature is None else solve_temperature
    return RelaxParams(jnp.asarray(temperature, dtype), jnp.asarray(ts, dtype),
                       jnp.asarray(tie_break, dtype))


class RelaxedTotals(NamedTuple):
    """Sums over the rounds of one relaxed run."""

    prediction_regret: jax.Array  # () sum_t L(s_t) - L(s*)
    movement_cost: jax.Array  # () sum_t move_cost ||s_t - s_{t-1}||_1
    soft_updates: jax.Array  # (k,) soft count of rounds criterion i was re-optimised
    triggers: jax.Array  # (k,) int32 rounds in which the hard trigger condition held


def _softmin_weights(values: jax.Array, tau, kappa) -> jax.Array:
    """(P,) softmax of ``-(values + kappa sqrt(tau) p) / tau``: the first-min one-hot as
    tau -> 0 (ties included, see the module docstring)."""
    idx = jnp.arange(values.shape[-1], dtype=values.dtype)
    return jax.nn.softmax(-(values + kappa * jnp.sqrt(tau) * idx) / tau, axis=-1)


def soft_vertex(structure: Structure, problem: Problem, theta_hat, inv, beta, s_init,
                relax: RelaxParams) -> jax.Array:
    """(n,) soft-min over the vertices of the box of the LCB (linear features), all coords free.

    Vertex order and values are those of :func:`gsjax.lcb.minimise_vertex`, so the limit
    ``tau_s -> 0`` is its answer (tie rule included).
    """
    if structure.features != "linear":
        raise ValueError("vertex enumeration is exact only for linear features; use PGD")
    dtype = s_init.dtype
    tau, kappa = relax.solve_temperature, relax.tie_break
    if structure.disjoint:
        bits = lcb._bit_table(structure.scope_size, dtype)  # (P, m)

        def per_block(idx, smask, th, iv, bt):
            verts = lcb._vertices_from_free(bits, s_init[idx], smask)  # (P, m)
            vals = lcb.lcb_terms(jnp.where(smask, verts, 0.0), th, iv, bt)  # (P,)
            return _softmin_weights(vals, tau, kappa) @ verts

        best = jax.vmap(per_block)(problem.scopes, problem.scope_mask, theta_hat, inv, beta)
        write = problem.scope_mask.reshape(-1)
        tgt = jnp.where(write, problem.scopes.reshape(-1), structure.num_coords)
        s = jnp.concatenate([s_init, jnp.zeros((1,), dtype)]).at[tgt].set(best.reshape(-1))
        return s[:-1]
    n = structure.num_coords
    if n > lcb.MAX_VERTEX_COORDS:
        raise ValueError(f"vertex enumeration over overlapping scopes needs n <= "
                         f"{lcb.MAX_VERTEX_COORDS}; got n = {n}: use the PGD solver")
    verts = lcb._bit_table(n, dtype)  # (2^n, n), every coordinate free
    vals = jax.vmap(lambda v: lcb.lcb_value(structure, problem, v, theta_hat, inv, beta))(verts)
    return _softmin_weights(vals, tau, kappa) @ verts


def soft_pgd(key, structure: Structure, problem: Problem, theta_hat, inv, beta, s_init,
             spec: AgentSpec, params: AgentParams, relax: RelaxParams) -> jax.Array:
    """(n,) :func:`gsjax.lcb.minimise_pgd` (all coordinates free) with the best-start argmin
    replaced by a soft-min over the starts' final points; same starts, same steps."""
    value = lambda s: lcb.lcb_value(structure, problem, s, theta_hat, inv, beta)
    grad = jax.grad(value)
    n = structure.num_coords
    if spec.pgd_include_current:
        rand = jax.random.uniform(key, (spec.pgd_starts - 1, n), s_init.dtype)
        starts = jnp.concatenate([s_init[None], rand], axis=0)
    else:
        starts = jax.random.uniform(key, (spec.pgd_starts, n), s_init.dtype)
    opt = (optax.adam if spec.pgd_optimizer == "adam" else optax.sgd)(params.pgd_lr)

    def descend(s0):
        def body(carry, _):
            s, st = carry
            u, st = opt.update(grad(s), st, s)
            return (optax.projections.projection_box(optax.apply_updates(s, u), 0.0, 1.0), st), None

        (s, _), _ = jax.lax.scan(body, (s0, opt.init(s0)), None, length=spec.pgd_steps)
        return s

    finals = jax.vmap(descend)(starts)
    values = jax.vmap(value)(finals)
    return _softmin_weights(values, relax.solve_temperature, relax.tie_break) @ finals


def make_relaxed(kind: str, structure: Structure, spec: AgentSpec):
    """``(init, step)`` of the relaxed ``kind`` (one of ``linucb``, ``lazy``, ``async_lazy``).

    ``init(key, params, relax, problem) -> BanditState`` and
    ``step(key_upd, state, action, feedback, params, relax, problem) -> (state, u, triggered)``
    with ``u`` (k,) the soft update counts (the hard ``updated`` in the limit) and
    ``triggered`` (k,) the hard trigger condition (diagnostic only).
    """
    if kind not in KINDS:
        raise ValueError(f"relaxed mode supports {KINDS}; got {kind!r}")
    n, d, k = structure.num_coords, structure.feature_dim, structure.num_criteria

    def solve(key, stats, beta, s_init, params, relax, problem):
        theta_hat = jax.vmap(linalg.theta_hat)(stats)
        if spec.solver == "vertex":
            return soft_vertex(structure, problem, theta_hat, stats.inv, beta, s_init, relax)
        return soft_pgd(key, structure, problem, theta_hat, stats.inv, beta, s_init, spec,
                        params, relax)

    def init(key, params: AgentParams, relax: RelaxParams, problem: Problem) -> BanditState:
        dtype = problem.theta.dtype
        stats = jax.vmap(lambda lam: linalg.init(lam, d, dtype))(params.lambda_reg)
        t = jnp.zeros((), jnp.int32)
        beta = exploration_radius(spec, params, problem, t.astype(dtype))
        s = solve(key, stats, beta, problem.s0, params, relax, problem)
        return BanditState(stats=stats, logdet_ref=stats.logdet, s=s, t=t)

    def step(key, state: BanditState, action, feedback, params: AgentParams,
             relax: RelaxParams, problem: Problem):
        dtype = problem.theta.dtype
        phi = all_features(structure, problem, action)
        t = state.t + 1
        do_refresh = True if spec.refresh_every == 1 else (t % spec.refresh_every) == 0
        stats = jax.vmap(linalg.update, in_axes=(0, 0, 0, None))(
            state.stats, phi, feedback.y, do_refresh)
        beta = exploration_radius(spec, params, problem, t.astype(dtype))
        excess = stats.logdet - state.logdet_ref - params.log_trigger  # (k,)
        triggered = excess > 0
        log_not = jax.nn.log_sigmoid(-excess / relax.temperature)  # log(1 - g_i)
        g = -jnp.expm1(log_not)
        if kind == "linucb":
            gate = jnp.ones((n,), dtype)
            reset = updated = jnp.ones((k,), dtype)
        elif kind == "lazy":
            big = -jnp.expm1(jnp.sum(log_not))  # soft OR over criteria
            gate = jnp.broadcast_to(big, (n,))
            updated = jnp.broadcast_to(big, (k,))
            reset = updated if spec.reference == "global" else g
        else:  # async_lazy: coordinate j is gated by the soft OR of the scopes holding it
            contrib = jnp.where(problem.scope_mask, log_not[:, None], 0.0).reshape(-1)
            per_coord = jnp.zeros((n,), dtype).at[problem.scopes.reshape(-1)].add(contrib)
            gate = -jnp.expm1(per_coord)
            reset = updated = g
        s_solved = solve(key, stats, beta, state.s, params, relax, problem)
        s = gate * s_solved + (1.0 - gate) * state.s
        logdet_ref = reset * stats.logdet + (1.0 - reset) * state.logdet_ref
        return BanditState(stats=stats, logdet_ref=logdet_ref, s=s, t=t), updated, triggered

    return init, step


def default_block(horizon: int) -> int:
    """The divisor of ``horizon`` closest to ``sqrt(horizon)``: rounds per checkpointed block."""
    target = math.sqrt(horizon)
    divs = [b for b in range(1, horizon + 1) if horizon % b == 0]
    return min(divs, key=lambda b: (abs(b - target), b))


def run_relaxed(seed_key, kind: str, structure: Structure, spec: AgentSpec, problem: Problem,
                params: AgentParams, relax: RelaxParams, move_cost, horizon: int,
                block: int | None = None, checkpoint: bool = True) -> RelaxedTotals:
    """One seed of the relaxed algorithm for ``horizon`` rounds; differentiable in
    ``params``, ``relax`` and ``move_cost``.

    Args:
      block: rounds per checkpointed block (must divide ``horizon``; default
        :func:`default_block`).
      checkpoint: wrap each block in ``jax.checkpoint`` (set False to measure what it saves).
    """
    init, step = make_relaxed(kind, structure, spec)
    if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
        raise ValueError(f"run_relaxed: horizon: must be an integer >= 1 (a number of rounds), "
                         f"got {horizon!r}")
    block = default_block(horizon) if block is None else block
    if horizon % block:
        raise ValueError(f"block {block} does not divide horizon {horizon}")
    dtype = problem.theta.dtype
    state = init(jax.random.fold_in(seed_key, 0), params, relax, problem)
    k = structure.num_criteria
    tot = RelaxedTotals(jnp.zeros((), dtype), jnp.zeros((), dtype), jnp.zeros((k,), dtype),
                        jnp.zeros((k,), jnp.int32))

    def round_(carry, t):
        st, s_prev, tot = carry
        key_t = jax.random.fold_in(seed_key, t)
        action = st.s
        fb = observe(jax.random.fold_in(key_t, 0), structure, problem, action)
        st, reset, trig = step(jax.random.fold_in(key_t, 2), st, action, fb, params, relax,
                               problem)
        tot = RelaxedTotals(
            prediction_regret=tot.prediction_regret + (fb.expected_loss - problem.loss_star),
            movement_cost=tot.movement_cost + move_cost * jnp.sum(jnp.abs(action - s_prev)),
            soft_updates=tot.soft_updates + reset,
            triggers=tot.triggers + trig.astype(jnp.int32),
        )
        return (st, action, tot), None

    def run_block(carry, t0):
        carry, _ = jax.lax.scan(round_, carry, t0 + jnp.arange(1, block + 1))
        return carry, None

    if checkpoint:
        run_block = jax.checkpoint(run_block)
    carry = (state, problem.s0, tot)
    (_, _, tot), _ = jax.lax.scan(run_block, carry, jnp.arange(0, horizon, block))
    return tot


def make_objective(kind: str, structure: Structure, spec: AgentSpec, horizon: int,
                   problem_per_seed: bool, block: int | None = None, checkpoint: bool = True):
    """``objective(params, relax, seed_keys, problem, move_cost) -> (mean, per_seed_totals)``:
    the mean over seeds of prediction regret + movement cost of the relaxed run (un-jitted;
    wrap in ``jax.jit`` / ``jax.value_and_grad(..., has_aux=True)``)."""
    pax = 0 if problem_per_seed else None

    def one(seed_key, problem, params, relax, move_cost):
        return run_relaxed(seed_key, kind, structure, spec, problem, params, relax, move_cost,
                           horizon, block, checkpoint)

    def objective(params, relax, seed_keys, problem, move_cost):
        tot = jax.vmap(one, in_axes=(0, pax, None, None, None))(
            seed_keys, problem, params, relax, move_cost)
        return jnp.mean(tot.prediction_regret + tot.movement_cost), tot

    return objective
