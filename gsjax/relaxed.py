r"""The relaxed (differentiable) mode of every bandit algorithm.

A hard algorithm takes two decisions that have no useful gradient: the trigger
``log det V_i - log det V_i(ref) > log c`` and the argmin of the LCB. Its relaxed form is the
SAME kernel (:mod:`gsjax.algorithms.kernel`) built with the soft
:class:`~gsjax.algorithms.decisions.Logic` instead of the hard one, so that the regret of a
whole run is a differentiable function of the float hyperparameters
(:class:`~gsjax.algorithms.AgentParams`: ``beta``, ``lambda_reg``, ``log_trigger = log c``, ...):

* **Soft trigger.** Criterion ``i``'s gate is
  :math:`g_i = \sigma\big((\log\det V_i - \log\det V_i^{\rm ref} - \log c) / \tau\big)`; the
  schedules combine gates with the soft OR ``1 - \prod_i (1 - g_i)`` (``lazy``: over every
  criterion; ``async_lazy``: per coordinate, over the criteria whose scope holds it; ``linucb``:
  gate 1). The policy is blended per coordinate, ``s_new = G s_solved + (1 - G) s_old``, and so
  are the references, ``ref_new = r log det V + (1 - r) ref_old``.
* **Soft solve.** The solver (vertex enumeration, block by block for disjoint scopes, or PGD
  from the same starts on the same key) runs every round over every coordinate and averages its
  candidates with ``softmax(-(LCB_p + kappa sqrt(tau_s) p) / tau_s)``
  (:func:`gsjax.lcb.softmin_pick`: exact ties go to the lowest index as in the hard rule).
* **Noise** is reparameterised already: ``y = <phi(s), theta*> + eta`` with ``eta`` drawn from
  the round key, independent of the played state and of the hyperparameters.

For disjoint scopes the LCB separates over blocks, so the all-coordinate soft solve equals the
hard asynchronous solve (which frees only the triggering blocks) on every block whose gate is 1;
for overlapping scopes ``async_lazy``'s relaxation is an approximation. The warm-up and the
refinement round of ``adaptive_lazy`` stay hard (they depend on the round, not on a parameter).

As ``tau, tau_s -> 0`` every gate and soft-min weight tends to 0 or 1 and the relaxed run is the
hard run, on the same keys, for every registered algorithm (``tests/test_relaxed.py``).

The run is :func:`gsjax.runner.advance` (the runner's keys and totals; the update counts are
then probabilities). Memory: the round loop is a scan over blocks of ``B`` rounds, each block
``jax.checkpoint``-ed, so reverse mode keeps the carries at block boundaries (``T/B`` of them)
plus one block's residuals; ``B ~ sqrt(T)`` by default (:func:`default_block`).

The objective is the run's prediction regret plus movement cost,
``sum_t (L(s_t) - L(s*)) + lambda sum_t ||s_t - s_{t-1}||_1``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from gsjax import algorithms, runner
from gsjax.algorithms.base import AgentSpec
from gsjax.algorithms.decisions import RelaxParams, relax_params, soft
from gsjax.problem import Structure, seed_axes

__all__ = ["RelaxParams", "relax_params", "default_block", "make_objective"]


def default_block(horizon: int) -> int:
    """The divisor of ``horizon`` closest to ``sqrt(horizon)``: rounds per checkpointed block."""
    target = math.sqrt(horizon)
    divs = [b for b in range(1, horizon + 1) if horizon % b == 0]
    return min(divs, key=lambda b: (abs(b - target), b))


def make_objective(name: str, structure: Structure, spec: AgentSpec, horizon: int,
                   problem_per_seed: bool, block: int | None = None, checkpoint: bool = True,
                   window: int | None = None):
    """``objective(params, relax, seed_keys, problem, move_cost) -> (mean, per_seed_totals)``:
    the mean over seeds of prediction regret + movement cost of the relaxed algorithm ``name``
    run for ``horizon`` rounds, differentiable in ``params``, ``relax`` and ``move_cost``
    (un-jitted; wrap in ``jax.jit`` / ``jax.value_and_grad(..., has_aux=True)``). The per-seed
    :class:`~gsjax.runner.RunTotals` have soft update counts.

    Args:
      block: rounds per checkpointed block (must divide ``horizon``; default
        :func:`default_block`).
      checkpoint: wrap each block in ``jax.checkpoint`` (set False to measure what it saves).
      window: truncated unrolls: the run is cut into windows of ``window`` rounds (must divide
        ``horizon``; ``block`` then divides ``window``, default :func:`default_block` of it) and
        no gradient flows through the agent's state or the last played point across a window
        boundary (``jax.lax.stop_gradient``; not at round 0); the value is unchanged, the
        gradient is the sum over windows of each window's regret differentiated with its
        starting state held fixed.
    """
    horizon = runner.check_rounds(horizon, "horizon", "make_objective")
    if window is not None:
        window = runner.check_rounds(window, "window", "make_objective")
        if horizon % window:
            raise ValueError(f"window {window} does not divide horizon {horizon}")
    span = horizon if window is None else window
    block = default_block(span) if block is None else block
    if span % block:
        raise ValueError(f"block {block} does not divide {span}")

    def one(seed_key, problem, params, relax, move_cost):
        algo = algorithms.make(name, structure, spec, soft(relax))
        carry = runner.init_carry(seed_key, algo, structure, problem, params)
        if window is None:
            carry, _ = runner.advance(carry, 0, seed_key, algo, structure, problem, params,
                                      move_cost, horizon, block, checkpoint)
            return carry.totals

        def win(c, t0):
            # Cut at the window's start, except at round 0 (the initial state is the
            # parameters' own: init_carry uses lambda_reg and beta).
            cut = (jax.lax.stop_gradient(c.state), jax.lax.stop_gradient(c.s_prev))
            keep = jax.tree_util.tree_map(lambda a, b: jnp.where(t0 > 0, a, b), cut,
                                          (c.state, c.s_prev))
            c = c._replace(state=keep[0], s_prev=keep[1])
            c, _ = runner.advance(c, t0, seed_key, algo, structure, problem, params,
                                  move_cost, window, block, checkpoint)
            return c, None

        carry, _ = jax.lax.scan(win, carry, jnp.arange(0, horizon, window))
        return carry.totals

    def objective(params, relax, seed_keys, problem, move_cost):
        pax = seed_axes(problem, problem_per_seed)
        tot = jax.vmap(one, in_axes=(0, pax, None, None, None))(
            seed_keys, problem, params, relax, move_cost)
        return jnp.mean(tot.prediction_regret + tot.movement_cost), tot

    return objective
