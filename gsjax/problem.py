r"""The graph-structured linear model: feature maps, feedback, true minimiser (Section 3).

Criterion ``i`` has expected loss :math:`\mu_i(s) = \langle \phi_i(s|_{N(i)}), \theta^*_i\rangle`
and the total loss is :math:`L(s) = \sum_i \mu_i(s)` on the box :math:`[0,1]^n`. Each round the
learner plays :math:`s_t` and observes :math:`y_{t,i} = \mu_i(s_t) + \eta_{t,i}` for every
criterion.

Three objects, never mixed (STYLE section 2.2):

* :class:`Structure` -- static, hashable: sizes and the kinds of features and noise. Changing
  it recompiles.
* :class:`Problem` -- arrays describing one instance (scopes, masks, ``theta*``, noise scales,
  random Fourier frequencies, ``s0``, ``s*``). ``vmap``-able when ``theta*`` is drawn per seed.
* :class:`Feedback` -- what the environment returns each round.

Feature maps (Section 3.4), padded to ``d`` entries with ``feat_mask``:

* ``linear``: :math:`\phi_i(s) = s|_{N(i)}`, ``d = m``;
* ``quadratic`` (Example 1): :math:`[1, s_i, s_i^2, \{s_j\}, \{s_i s_j\}]` with ``i`` the
  first coordinate of the scope, ``d = 2 m + 1``; slots ``3 .. m+1`` hold ``s_j`` and
  ``m+2 .. 2m`` hold ``s_i s_j`` for the scope's other members in scope order;
* ``rff`` (Example 2): :math:`\sqrt{2/D}\cos(\Omega s|_{N(i)} / \ell + b)`, ``Omega ~ N(0, 1)``
  and ``b ~ U[0, 2 pi)`` drawn once per problem (an RBF kernel of lengthscale ``ell``).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gsjax.graphs import Scopes, scopes_are_disjoint

__all__ = [
    "FEATURE_KINDS",
    "NOISE_KINDS",
    "THETA_DISTRIBUTIONS",
    "Structure",
    "Problem",
    "Feedback",
    "feature_dim",
    "make_structure",
    "features",
    "all_features",
    "expected_losses",
    "total_loss",
    "draw_noise",
    "observe",
    "linear_coefficients",
    "true_minimiser",
    "make_problem",
]

FEATURE_KINDS = ("linear", "quadratic", "rff")
NOISE_KINDS = ("independent", "correlated")
THETA_DISTRIBUTIONS = ("explicit", "normal", "uniform", "signal")


@dataclasses.dataclass(frozen=True)
class Structure:
    """Static description of a problem: everything that fixes shapes or trace structure."""

    num_coords: int  # n
    num_criteria: int  # k
    scope_size: int  # m, the padded scope width
    feature_dim: int  # d, the padded feature width
    features: str  # "linear" | "quadratic" | "rff"
    noise: str  # "independent" | "correlated"
    disjoint: bool  # no coordinate shared between scopes (block view)
    rff_dim: int = 1  # D for "rff" (1 otherwise, keeps array shapes non-empty)
    # "linear": y = <phi, theta*> + noise (this module). "adult": the loss comes from data
    # (gsjax.fairness, Section 7.3), with its static options in env_spec.
    # "factor": shared factor parameters read through node-specific features (gsjax.factor,
    # Section 5.3); env_spec is a gsjax.factor.FactorSpec, env_data a FactorData.
    environment: str = "linear"
    env_spec: object = None  # hashable static options of a data environment


class Problem(NamedTuple):
    """Arrays of one problem instance."""

    scopes: jax.Array  # (k, m) int32 coordinate indices, padded with 0
    scope_mask: jax.Array  # (k, m) bool
    feat_mask: jax.Array  # (k, d) bool, real feature entries
    theta: jax.Array  # (k, d) theta*, zero on padded entries
    noise_sigma: jax.Array  # (k,) independent, or (n,) per-coordinate for correlated
    rff_omega: jax.Array  # (k, D, m) random frequencies / lengthscale (zeros unless rff)
    rff_phase: jax.Array  # (k, D) random phases (zeros unless rff)
    s0: jax.Array  # (n,) starting state
    s_star: jax.Array  # (n,) minimiser of L over the box
    loss_star: jax.Array  # () L(s*)
    s_star_residual: jax.Array  # () projected-gradient norm at s* (0 when exact)
    env_data: object = None  # pytree of a data environment's arrays (None for "linear")


class Feedback(NamedTuple):
    """What the environment returns for one played state."""

    y: jax.Array  # (k,) observed losses
    expected_loss: jax.Array  # () L(s_t)


def feature_dim(kind: str, scope_size: int, rff_dim: int = 1) -> int:
    """Feature width for a scope of ``scope_size`` coordinates."""
    if kind == "linear":
        return scope_size
    if kind == "quadratic":
        return 2 * scope_size + 1
    if kind == "rff":
        return rff_dim
    raise ValueError(f"unknown feature kind {kind!r}; allowed: {FEATURE_KINDS}")


def make_structure(scopes: Scopes, features_kind: str, noise: str, rff_dim: int = 16) -> Structure:
    """Static structure from host-side scopes."""
    if features_kind not in FEATURE_KINDS:
        raise ValueError(f"unknown feature kind {features_kind!r}; allowed: {FEATURE_KINDS}")
    if noise not in NOISE_KINDS:
        raise ValueError(f"unknown noise kind {noise!r}; allowed: {NOISE_KINDS}")
    k, m = scopes.index.shape
    dd = rff_dim if features_kind == "rff" else 1
    return Structure(
        num_coords=int(scopes.num_coords),
        num_criteria=int(k),
        scope_size=int(m),
        feature_dim=feature_dim(features_kind, m, dd),
        features=features_kind,
        noise=noise,
        disjoint=scopes_are_disjoint(scopes),
        rff_dim=dd,
    )


def _feature_mask(structure: Structure, scope_mask: np.ndarray) -> np.ndarray:
    k, m = scope_mask.shape
    if structure.features == "linear":
        return scope_mask.copy()
    if structure.features == "quadratic":
        others = scope_mask[:, 1:]
        return np.concatenate([np.ones((k, 3), bool), others, others], axis=1)
    return np.ones((k, structure.rff_dim), bool)


def features(
    structure: Structure,
    s_local: jax.Array,
    scope_mask: jax.Array,
    rff_omega: jax.Array,
    rff_phase: jax.Array,
) -> jax.Array:
    """Feature vector of ONE criterion.

    Args:
      structure: static structure.
      s_local: (m,) the state restricted to the scope (padded entries arbitrary).
      scope_mask: (m,) bool.
      rff_omega: (D, m) frequencies; rff_phase: (D,) phases (used by "rff" only).

    Returns:
      (d,) features, zero on padded entries.
    """
    x = jnp.where(scope_mask, s_local, 0.0)
    if structure.features == "linear":
        return x
    if structure.features == "quadratic":
        own = x[0]
        others = x[1:]
        one = jnp.ones((1,), x.dtype)
        return jnp.concatenate([one, own[None], (own * own)[None], others, own * others])
    d = structure.rff_dim
    return jnp.sqrt(2.0 / d) * jnp.cos(rff_omega @ x + rff_phase)


def all_features(structure: Structure, problem: Problem, s: jax.Array) -> jax.Array:
    """(k, d) features of every criterion at the state ``s`` (n,)."""
    if structure.environment == "factor":  # Section 5.3: node-specific factor features
        from gsjax import factor

        return factor.node_features(structure, problem, s)
    s_local = s[problem.scopes]  # (k, m)
    phi = jax.vmap(lambda sl, sm, om, ph: features(structure, sl, sm, om, ph))(
        s_local, problem.scope_mask, problem.rff_omega, problem.rff_phase
    )
    return jnp.where(problem.feat_mask, phi, 0.0)


def expected_losses(structure: Structure, problem: Problem, s: jax.Array) -> jax.Array:
    """(k,) expected losses ``mu_i(s)``."""
    return jnp.sum(all_features(structure, problem, s) * problem.theta, axis=-1)


def total_loss(structure: Structure, problem: Problem, s: jax.Array) -> jax.Array:
    """() expected total loss ``L(s)``."""
    return jnp.sum(expected_losses(structure, problem, s))


def draw_noise(key: jax.Array, structure: Structure, problem: Problem) -> jax.Array:
    """(k,) noise ``eta_t`` for one round; independent of the played state.

    ``independent``: ``eta_i = sigma_i xi_i``. ``correlated`` (Section 3.1): one latent
    ``xi_j ~ N(0, sigma_j^2)`` per coordinate and ``eta_i = sum_{j in N(i)} xi_j``.
    """
    dtype = problem.theta.dtype
    if structure.noise == "independent":
        xi = jax.random.normal(key, (structure.num_criteria,), dtype)
        return problem.noise_sigma * xi
    xi = problem.noise_sigma * jax.random.normal(key, (structure.num_coords,), dtype)
    return jnp.sum(jnp.where(problem.scope_mask, xi[problem.scopes], 0.0), axis=-1)


def observe(key: jax.Array, structure: Structure, problem: Problem, s: jax.Array) -> Feedback:
    """Feedback at the played state ``s`` (n,)."""
    if structure.environment == "adult":
        from gsjax import fairness

        return fairness.observe(key, structure.env_spec, problem.env_data, s)
    mu = expected_losses(structure, problem, s)
    return Feedback(y=mu + draw_noise(key, structure, problem), expected_loss=jnp.sum(mu))


def linear_coefficients(structure: Structure, problem: Problem) -> jax.Array:
    """(n,) coefficients ``c`` with ``L(s) = c . s`` for linear features."""
    if structure.features != "linear":
        raise ValueError("linear_coefficients needs linear features")
    if structure.environment == "factor":  # mixed features: L is linear, read off its gradient
        zeros = jnp.zeros((structure.num_coords,), problem.theta.dtype)
        return jax.grad(lambda s: total_loss(structure, problem, s))(zeros)
    w = jnp.where(problem.scope_mask, problem.theta, 0.0)
    return jnp.zeros((structure.num_coords,), w.dtype).at[problem.scopes.reshape(-1)].add(
        w.reshape(-1)
    )


def true_minimiser(
    key: jax.Array,
    structure: Structure,
    problem: Problem,
    num_samples: int = 4096,
    num_refine: int = 32,
    num_steps: int = 300,
    lr: float = 0.02,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(s*, L(s*), residual)`` over the box.

    Linear features: ``L`` is linear in ``s``, so ``s*_j = 1`` where the coefficient is
    negative and 0 otherwise -- exact, residual 0. Other features: a dense multi-start search
    (``num_samples`` uniform points and the box's centre; the best ``num_refine`` refined by
    ``num_steps`` of projected Adam on ``L``); the residual is the norm of the projected
    gradient step ``||s - P(s - grad L(s))||`` at the returned point.
    """
    n = structure.num_coords
    dtype = problem.theta.dtype
    if structure.features == "linear":
        c = linear_coefficients(structure, problem)
        s = (c < 0).astype(dtype)
        return s, jnp.sum(c * s), jnp.zeros((), dtype)

    loss = lambda s: total_loss(structure, problem, s)
    pts = jax.random.uniform(key, (num_samples, n), dtype)
    pts = jnp.concatenate([jnp.full((1, n), 0.5, dtype), pts])
    vals = jax.vmap(loss)(pts)
    starts = pts[jnp.argsort(vals)[:num_refine]]
    opt = optax.adam(lr)

    def refine(s):
        def body(carry, _):
            s, st = carry
            g = jax.grad(loss)(s)
            u, st = opt.update(g, st, s)
            s = optax.projections.projection_box(optax.apply_updates(s, u), 0.0, 1.0)
            return (s, st), None

        (s, _), _ = jax.lax.scan(body, (s, opt.init(s)), None, length=num_steps)
        return s

    refined = jax.vmap(refine)(starts)
    rvals = jax.vmap(loss)(refined)
    best = refined[jnp.argmin(rvals)]
    g = jax.grad(loss)(best)
    residual = jnp.linalg.norm(best - jnp.clip(best - g, 0.0, 1.0))
    return best, loss(best), residual


def make_problem(
    key: jax.Array,
    structure: Structure,
    scopes: Scopes,
    *,
    theta_distribution: str = "normal",
    theta_values=None,
    theta_scale: float = 1.0,
    noise_sigma=0.5,
    s0=0.5,
    rff_lengthscale: float = 0.5,
    dtype=jnp.float32,
) -> Problem:
    """Build a problem instance; jittable in ``key`` for drawn ``theta*``.

    Args:
      key: draws ``theta*`` (distributions "normal": ``scale * N(0,1)``, "uniform":
        ``scale * U(-1, 1)``, "signal": ``+-scale * (1 + U(0, 1))`` with a random sign, so
        every real coefficient has magnitude in ``[scale, 2 scale]``: Assumption B of Section
        5.2 with ``gamma = scale``), the random Fourier features, and the ``s*`` search.
      structure: from :func:`make_structure`.
      scopes: host scopes.
      theta_distribution: "explicit" | "normal" | "uniform".
      theta_values: for "explicit", a ragged list of ``k`` rows, row ``i`` holding the
        ``d_i`` real feature entries of criterion ``i`` in feature order.
      noise_sigma: scalar or sequence ((k,) independent, (n,) correlated).
      s0: scalar or (n,) starting state.
    """
    k, n = structure.num_criteria, structure.num_coords
    fmask = _feature_mask(structure, scopes.mask)
    k_theta, k_omega, k_phase, k_star = jax.random.split(key, 4)
    if theta_distribution == "explicit":
        theta_np = np.zeros(fmask.shape)
        for i, row in enumerate(theta_values):
            if len(row) != int(fmask[i].sum()):
                raise ValueError(
                    f"theta row {i} has {len(row)} entries; criterion {i} has "
                    f"{int(fmask[i].sum())} features"
                )
            theta_np[i, fmask[i]] = row
        theta = jnp.asarray(theta_np, dtype)
    elif theta_distribution == "normal":
        theta = theta_scale * jax.random.normal(k_theta, fmask.shape, dtype)
    elif theta_distribution == "uniform":
        theta = theta_scale * jax.random.uniform(k_theta, fmask.shape, dtype, -1.0, 1.0)
    elif theta_distribution == "signal":  # Assumption B (Section 5.2): |theta*| >= scale
        k_sign, k_mag = jax.random.split(k_theta)
        sign = jnp.where(jax.random.bernoulli(k_sign, 0.5, fmask.shape), 1.0, -1.0)
        theta = theta_scale * sign * (1.0 + jax.random.uniform(k_mag, fmask.shape, dtype))
    else:
        raise ValueError(
            f"unknown theta distribution {theta_distribution!r}; allowed: {THETA_DISTRIBUTIONS}"
        )
    theta = jnp.where(jnp.asarray(fmask), theta, 0.0)

    dd = structure.rff_dim
    m = structure.scope_size
    if structure.features == "rff":
        omega = jax.random.normal(k_omega, (k, dd, m), dtype) / rff_lengthscale
        omega = jnp.where(jnp.asarray(scopes.mask)[:, None, :], omega, 0.0)
        phase = jax.random.uniform(k_phase, (k, dd), dtype, 0.0, 2 * jnp.pi)
    else:
        omega = jnp.zeros((k, dd, m), dtype)
        phase = jnp.zeros((k, dd), dtype)

    sig_len = k if structure.noise == "independent" else n
    sigma = jnp.broadcast_to(jnp.asarray(noise_sigma, dtype), (sig_len,))
    s0_arr = jnp.broadcast_to(jnp.asarray(s0, dtype), (n,))
    zero = jnp.zeros((), dtype)
    problem = Problem(
        scopes=jnp.asarray(scopes.index, jnp.int32),
        scope_mask=jnp.asarray(scopes.mask),
        feat_mask=jnp.asarray(fmask),
        theta=theta,
        noise_sigma=sigma,
        rff_omega=omega,
        rff_phase=phase,
        s0=s0_arr,
        s_star=jnp.zeros((n,), dtype),
        loss_star=zero,
        s_star_residual=zero,
    )
    s_star, loss_star, residual = true_minimiser(k_star, structure, problem)
    return problem._replace(s_star=s_star, loss_star=loss_star, s_star_residual=residual)
