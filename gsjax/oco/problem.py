r"""Full-information online convex optimisation on ``[0,1]^n`` (paper Section 6): losses, targets.

Round ``t`` reveals a convex loss ``f_t(s) = \sum_j a_j \ell(s_j - z_{t,j})`` with a target
``z_t`` and per-coordinate weights ``a_j``:

* ``loss = "squared"``: ``\ell(u) = u^2``, gradient ``2 a_j (s_j - z_j)``;
* ``loss = "l1"``: ``\ell(u) = |u|``, subgradient ``a_j \operatorname{sign}(s_j - z_j)``
  (``sign(0) = 0``, a valid subgradient).

The coordinates are grouped into ``k`` components of ``d`` consecutive coordinates, ``n = k d``
(Section 6.4); every total is reported per component.

Target processes (``targets``), all inside ``[low_j, high_j]``:

* ``"iid"``: ``z_t`` uniform on the range every round;
* ``"coin"``: ``z_{t,j} \in \{low_j, high_j\}`` with probability 1/2 each (the classical
  ``\Omega(\sqrt T)`` instance for the L1 loss);
* ``"drift"``: a Gaussian random walk ``z_t = R(z_{t-1} + \sigma_j \xi_t)`` reflected into the
  range (``z_0`` uniform on the range);
* ``"switch"``: piecewise constant, a fresh uniform draw every ``switch_period`` rounds
  (rounds ``1, P+1, 2P+1, ...``);
* ``"random_switch"``: a fresh uniform draw with probability ``1/switch_period`` each round
  (always in round 1);
* ``"adversarial"``: chosen against the learner's past: ``z_{t,j} = low_j`` if the reference
  ``r_{t,j} \ge (low_j + high_j)/2`` else ``high_j``, where the reference is the previous
  deployed state ``s_{t-1}`` (``adversary = "previous"``) or the running mean of
  ``s_0, ..., s_{t-1}`` (``adversary = "mean"``). Ties go to ``low``. An adaptive adversary
  sees the past plays only, never this round's coin.

Round ``t``'s targets use that round's environment key (:mod:`gsjax.oco.runner`): the same for
every algorithm and budget on a seed.

The best fixed point in hindsight is separable and exact:

* squared loss: ``s^*_j = \operatorname{clip}(\bar z_j, 0, 1)``, from the running sums
  ``\sum_t z_{t,j}`` and ``\sum_t z_{t,j}^2``;
* L1 loss: the lower median ``z_{(\lceil T/2 \rceil)}`` clipped to ``[0, 1]``, which lies in the
  projection of the (convex objective's) median interval onto the box; it needs every target
  ``z_1..z_T``, which the runner keeps for the L1 loss only.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "LOSSES", "TARGETS", "ADVERSARIES", "OCOSpec", "OCOProblem", "TargetState", "make_problem",
    "coord_loss", "coord_grad", "per_component", "target_reset", "target_step",
    "best_fixed_squared", "best_fixed_l1", "gradient_bounds", "diameters",
]

LOSSES = ("squared", "l1")
TARGETS = ("iid", "coin", "drift", "switch", "random_switch", "adversarial")
ADVERSARIES = ("previous", "mean")


@dataclasses.dataclass(frozen=True)
class OCOSpec:
    """Static settings: they fix the trace (hashable)."""

    loss: str = "squared"  # "squared" | "l1"
    targets: str = "adversarial"  # one of TARGETS
    adversary: str = "previous"  # "previous" | "mean" (targets = "adversarial" only)
    num_components: int = 2  # k
    block_dim: int = 1  # d: coordinates per component
    switch_period: int = 100  # P for "switch" / "random_switch"

    @property
    def n(self) -> int:
        return self.num_components * self.block_dim


class OCOProblem(NamedTuple):
    """Arrays describing one instance."""

    s0: jax.Array  # (n,) starting state s_0 (the first move from it is charged)
    low: jax.Array  # (n,) lower end of the target range
    high: jax.Array  # (n,) upper end of the target range
    weight: jax.Array  # (n,) loss weight a_j
    drift: jax.Array  # (n,) random-walk standard deviation per round ("drift")


class TargetState(NamedTuple):
    """What the target process carries from round to round."""

    z: jax.Array  # (n,) last target z_{t-1} (initial draw before round 1)
    sum_s: jax.Array  # (n,) s_0 + ... + s_{t-2}: the "mean" adversary's memory


def make_problem(spec: OCOSpec, s0, low, high, weight, drift, dtype=jnp.float32) -> OCOProblem:
    """Broadcast scalars or length-``n`` sequences into an :class:`OCOProblem`."""
    vec = lambda v: jnp.broadcast_to(jnp.asarray(v, dtype), (spec.n,))  # noqa: E731
    return OCOProblem(vec(s0), vec(low), vec(high), vec(weight), vec(drift))


def coord_loss(spec: OCOSpec, s, z, weight):
    """Per-coordinate loss ``a_j l(s_j - z_j)`` (n,)."""
    u = s - z
    return weight * (u * u if spec.loss == "squared" else jnp.abs(u))


def coord_grad(spec: OCOSpec, s, z, weight):
    """Per-coordinate (sub)gradient of :func:`coord_loss` at ``s`` (n,)."""
    u = s - z
    return weight * (2.0 * u if spec.loss == "squared" else jnp.sign(u))


def per_component(spec: OCOSpec, x):
    """Sum an ``(..., n)`` array over each component's coordinates -> ``(..., k)``."""
    return x.reshape(x.shape[:-1] + (spec.num_components, spec.block_dim)).sum(-1)


def _uniform_in(key, problem: OCOProblem):
    u = jax.random.uniform(key, problem.low.shape, problem.low.dtype)
    return problem.low + (problem.high - problem.low) * u


def _reflect(x, low, high):
    """Reflect ``x`` into ``[low, high]`` (period ``2 (high - low)``); a point range stays put."""
    width = high - low
    safe = jnp.where(width > 0, width, 1.0)
    y = jnp.mod(x - low, 2.0 * safe)
    y = jnp.where(y > safe, 2.0 * safe - y, y)
    return jnp.where(width > 0, low + y, low)


def target_reset(key, spec: OCOSpec, problem: OCOProblem) -> TargetState:
    """The target process before round 1 (``key``: the seed's init key)."""
    z0 = _uniform_in(key, problem) if spec.targets == "drift" else 0.5 * (problem.low + problem.high)
    return TargetState(z=z0, sum_s=jnp.zeros_like(problem.s0))


def target_step(key, tstate: TargetState, s_prev, t, spec: OCOSpec, problem: OCOProblem):
    """Round ``t``'s target ``z_t`` from the past (``s_prev = s_{t-1}``): ``(z_t, state)``;
    ``key`` is the round's environment key, ``t`` (int32, from 1) may be traced."""
    sum_s = tstate.sum_s + s_prev  # s_0 + ... + s_{t-1}
    kind = spec.targets
    if kind == "iid":
        z = _uniform_in(key, problem)
    elif kind == "coin":
        heads = jax.random.bernoulli(key, 0.5, problem.low.shape)
        z = jnp.where(heads, problem.high, problem.low)
    elif kind == "drift":
        xi = jax.random.normal(key, problem.low.shape, problem.low.dtype)
        z = _reflect(tstate.z + problem.drift * xi, problem.low, problem.high)
    elif kind == "switch":
        jump = jnp.mod(t - 1, spec.switch_period) == 0
        z = jnp.where(jump, _uniform_in(key, problem), tstate.z)
    elif kind == "random_switch":
        k_jump, k_new = jax.random.split(key)
        jump = (jax.random.uniform(k_jump, (), problem.low.dtype) < 1.0 / spec.switch_period) | (t == 1)
        z = jnp.where(jump, _uniform_in(k_new, problem), tstate.z)
    elif kind == "adversarial":
        ref = s_prev if spec.adversary == "previous" else sum_s / jnp.asarray(t, sum_s.dtype)
        mid = 0.5 * (problem.low + problem.high)
        z = jnp.where(ref >= mid, problem.low, problem.high)
    else:  # pragma: no cover - validated by the config
        raise ValueError(f"unknown targets {kind!r}")
    return z, TargetState(z=z, sum_s=sum_s)


def best_fixed_squared(sum_z, sum_z2, horizon: int, weight):
    """Exact hindsight minimiser of ``sum_t a_j (s_j - z_t,j)^2`` over ``[0,1]`` and its loss,
    ``(s_star (..., n), loss_star (..., n))``, from ``sum_t z_t`` and ``sum_t z_t^2`` (..., n),
    ``T = horizon`` and ``weight`` (n,)."""
    s = jnp.clip(sum_z / horizon, 0.0, 1.0)
    loss = weight * (horizon * s * s - 2.0 * s * sum_z + sum_z2)
    return s, loss


def best_fixed_l1(zs, weight):
    """Exact hindsight minimiser of ``sum_t a_j |s_j - z_t,j|`` over ``[0,1]`` and its loss,
    ``(s_star (..., n), loss_star (..., n))`` (the clipped lower median), from the targets of
    every round ``zs`` (..., T, n) and ``weight`` (n,)."""
    horizon = zs.shape[-2]
    lower_median = jnp.sort(zs, axis=-2)[..., (horizon - 1) // 2, :]
    s = jnp.clip(lower_median, 0.0, 1.0)
    loss = weight * jnp.sum(jnp.abs(s[..., None, :] - zs), axis=-2)
    return s, loss


def gradient_bounds(spec: OCOSpec, low, high, weight) -> tuple[np.ndarray, float]:
    """Euclidean gradient bounds ``(G_i per component (k,), G for the whole state)`` (NumPy):
    a coordinate's derivative is at most ``g_j = 2 a_j max(high_j, 1 - low_j)`` (squared) or
    ``a_j`` (L1); ``G_i = sqrt(sum_{j in i} g_j^2)``, ``G = sqrt(sum_j g_j^2)``."""
    n = spec.n
    low, high, weight = (np.broadcast_to(np.asarray(v, np.float64), (n,)) for v in (low, high, weight))
    if spec.loss == "squared":
        g = 2.0 * np.abs(weight) * np.maximum(np.maximum(high, 1.0 - low), 0.0)
    else:
        g = np.abs(weight)
    g2 = (g * g).reshape(spec.num_components, spec.block_dim).sum(-1)
    return np.sqrt(g2), float(math.sqrt(g2.sum()))


def diameters(spec: OCOSpec) -> tuple[float, float]:
    """Euclidean diameters ``(D_i = sqrt(d) of a component's box, D = sqrt(n) of [0,1]^n)``."""
    return math.sqrt(spec.block_dim), math.sqrt(spec.n)
