r"""The relaxed (differentiable) mode of every bandit algorithm.

The trigger ``log det V_i - log det V_i(ref) > log c`` and the argmin of the LCB have no useful
gradient. The relaxed form is the SAME kernel built with the soft
:class:`~gsjax.algorithms.decisions.Logic`, so the regret of a run is differentiable in the float
hyperparameters (:class:`~gsjax.algorithms.AgentParams`):

* **Soft trigger.** Gates
  :math:`g_i = \sigma\big((\log\det V_i - \log\det V_i^{\rm ref} - \log c) / \tau\big)` combine by
  the soft OR ``1 - \prod_i (1 - g_i)`` (``async_lazy``: per coordinate, over the criteria whose
  scope holds it); the policy and references are blended, ``s = G s_solved + (1 - G) s_old``.
* **Soft solve.** The solver runs every round over every coordinate and averages its candidates
  with ``softmax(-(LCB_p + kappa sqrt(tau_s) p) / tau_s)`` (:func:`gsjax.lcb.softmin_pick`).

``async_lazy``'s relaxation is exact on disjoint scopes only; ``adaptive_lazy``'s warm-up and
refinement round stay hard. As ``tau, tau_s -> 0`` the relaxed run is the hard run on the same
keys. The objective, ``sum_t (L(s_t) - L(s*)) + lambda sum_t ||s_t - s_{t-1}||_1``, runs in
``jax.checkpoint``-ed blocks of ``B ~ sqrt(T)`` rounds (:func:`default_block`).
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
    over ``horizon`` rounds, differentiable in ``params``, ``relax`` and ``move_cost``
    (un-jitted). The per-seed :class:`~gsjax.runner.RunTotals` have soft update counts.

    Args:
      block: rounds per checkpointed block (divides ``horizon``; default :func:`default_block`).
      checkpoint: wrap each block in ``jax.checkpoint``.
      window: truncated unrolls: windows of ``window`` rounds (divides ``horizon``; ``block``
        then divides ``window``), no gradient through the agent's state or the last played
        point across a window boundary (not at round 0); the value is unchanged.
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

        def win(c, t0):  # cut at the window's start except at round 0 (init reads params)
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
