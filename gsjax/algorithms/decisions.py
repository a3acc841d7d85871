r"""The two decisions of a bandit kernel, hard or soft: the trigger gate and the argmin.

The schedules and the kernel decide through a :class:`Logic`, so every algorithm has a hard and a
relaxed form. :data:`HARD`: booleans, the policy re-minimised in a ``lax.cond`` over the free
coordinates. :func:`soft`: a truth value is stored as ``log P(false)`` (an OR is a sum, exact in
the tails, finite gradients); criterion ``i`` fires with probability
``sigmoid((log det V_i - log det V_i(ref) - log c) / tau)``, decisions blend ``p a + (1 - p) b``,
and the solver runs every round, averaging its candidates with soft-min weights.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from gsjax import lcb

__all__ = ["Logic", "HARD", "RelaxParams", "relax_params", "soft"]


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


class Logic(NamedTuple):
    """Truth values and decisions (see the module docstring). ``T`` is the truth type."""

    soft: bool
    fires: Callable  # (growth (k,), log_trigger) -> T (k,)
    true: Callable  # shape -> T of that shape
    any: Callable  # T (k,) -> T ()
    union: Callable  # (T (k,), scopes (k, m), mask (k, m), n, slots=None, contiguous=False)
    # -> T (n,): OR over scopes (``slots``: lcb.scope_slots of disjoint scopes, read by a
    # gather; ``contiguous``: the scopes are arange(n).reshape(k, m), a reshape)
    force: Callable  # (T, flag: bool) -> T, true where the flag holds
    where: Callable  # (on: bool, T) -> T, false where ``on`` does not hold
    select: Callable  # (T, a, b) -> a where true, else b (blended when soft)
    count: Callable  # T -> what a count adds (bool when hard, a probability when soft)
    solve_mask: Callable  # free T (n,) -> the bool mask the solver frees
    apply: Callable  # (reoptimise T (), free T (n,), solve () -> (s, res), s_old, residual)
    pick: lcb.Pick  # the solver's choice among candidates


def _hard_union(truth, scopes, mask, n: int, slots=None, contiguous=False):
    if contiguous:  # scopes arange(n).reshape(k, m), every entry real
        return (truth[:, None] & mask).reshape(-1)
    if slots is not None:  # disjoint scopes: a gather (lcb.scope_slots), not a scatter loop
        return lcb.by_slot((truth[:, None] & mask).reshape(-1), slots)
    hit = (truth[:, None] & mask).astype(jnp.int32).reshape(-1)
    return jnp.zeros((n,), jnp.int32).at[scopes.reshape(-1)].max(hit) > 0


HARD = Logic(
    soft=False,
    fires=lambda growth, log_trigger: growth > log_trigger,
    true=lambda shape: jnp.ones(shape, bool),
    any=jnp.any,
    union=_hard_union,
    force=lambda x, flag: x | flag,
    where=lambda on, x: on & x,
    select=jnp.where,
    count=lambda x: x,
    solve_mask=lambda free: free,
    apply=lambda reoptimise, free, solve, s_old, residual: jax.lax.cond(
        reoptimise, lambda _: solve(), lambda _: (s_old, residual), None),
    pick=lcb.first_pick,
)


def soft(relax: RelaxParams) -> Logic:
    """The relaxed :class:`Logic` at the temperatures of ``relax`` (traced values allowed)."""
    prob = lambda log_not: -jnp.expm1(log_not)  # noqa: E731

    def union(log_not, scopes, mask, n: int, slots=None, contiguous=False):
        # the relaxed form ignores slots/contiguous: its scatter-add is not a hot path
        contrib = jnp.where(mask, log_not[:, None], 0.0).reshape(-1)
        return jnp.zeros((n,), log_not.dtype).at[scopes.reshape(-1)].add(contrib)

    def select(log_not, a, b):
        p = prob(log_not)
        return p * a + (1.0 - p) * b

    def apply(reoptimise, free, solve, s_old, residual):
        s_new, res = solve()
        return select(free, s_new, s_old), res  # the policy blended per coordinate

    return Logic(
        soft=True,
        fires=lambda growth, log_trigger: jax.nn.log_sigmoid(
            -(growth - log_trigger) / relax.temperature),
        true=lambda shape: jnp.full(shape, -jnp.inf, relax.temperature.dtype),
        any=jnp.sum,
        union=union,
        force=lambda x, flag: jnp.where(flag, -jnp.inf, x),
        where=lambda on, x: jnp.where(on, x, 0.0),
        select=select,
        count=prob,
        solve_mask=lambda free: jnp.ones(free.shape, bool),
        apply=apply,
        pick=lcb.softmin_pick(relax.solve_temperature, relax.tie_break),
    )
