r"""The graph-structured linear model: feature maps, feedback, true minimiser (Section 3).

Criterion ``i`` has expected loss :math:`\mu_i(s) = \langle \phi_i(s|_{N(i)}), \theta^*_i\rangle`
and the total loss is :math:`L(s) = \sum_i \mu_i(s)` on the box :math:`[0,1]^n`; playing
:math:`s_t` the learner observes :math:`y_{t,i} = \mu_i(s_t) + \eta_{t,i}` for every criterion.
:class:`Structure` is static and hashable (changing it recompiles), :class:`Problem` holds one
instance's arrays (``vmap``-able when ``theta*`` is drawn per seed), :class:`Feedback` is what
the environment returns each round.

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
import inspect
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gsjax.checks import (check_bounds, check_float_dtype, is_traced, positive_integer, remember,
                          shape_and_values)
from gsjax import philox, xla
from gsjax.graphs import Scopes, check_scopes, scopes_are_blocks, scopes_are_disjoint

__all__ = [
    "FEATURE_KINDS", "NOISE_KINDS", "THETA_DISTRIBUTIONS", "Structure", "Problem", "DRAW_AXES",
    "seed_axes", "seed_rows", "Feedback", "Environment", "LinearModel", "LINEAR",
    "scoped_features", "feature_dim", "feature_norm_sq_bound", "make_structure", "features",
    "all_features", "expected_losses", "total_loss", "Draws", "round_draws", "draw_noise",
    "observe", "linear_coefficients", "true_minimiser", "make_problem", "compiled_build",
]

FEATURE_KINDS = ("linear", "quadratic", "rff")
#: The precision of every random draw of a problem or a round, whatever the run's dtype (drawn,
#: then cast): float32 and float64 runs of a seed see the same theta*, frequencies and noise.
_DRAW = jnp.float32
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
    contiguous: bool = False  # scopes are the blocks arange(n).reshape(k, m): see at_scopes
    # How the world answers a played state (its arrays are Problem.env_data): the linear model,
    # gsjax.factor.FactorEnv (Section 5.3) or gsjax.fairness.AdultEnv (Section 7.3).
    env: "Environment" = dataclasses.field(default_factory=lambda: LINEAR)


class Problem(NamedTuple):
    """Arrays of one problem instance."""

    scopes: jax.Array  # (k, m) int32 coordinate indices, padded with 0
    scope_mask: jax.Array  # (k, m) bool
    feat_mask: jax.Array  # (k, d) bool, real feature entries
    theta: jax.Array  # (k, d) theta*, zero on padded entries
    s0: jax.Array  # (n,) starting state
    s_star: jax.Array  # (n,) minimiser of L over the box
    loss_star: jax.Array  # () L(s*)
    s_star_residual: jax.Array  # () projected-gradient norm at s* (0 when exact)
    # Read by the linear model's noise and features only (None where the environment has its own).
    noise_sigma: jax.Array | None = None  # (k,) independent, or (n,) per-coordinate, correlated
    rff_omega: jax.Array | None = None  # (k, D, m) random frequencies / lengthscale (0 unless rff)
    rff_phase: jax.Array | None = None  # (k, D) random phases (zeros unless rff)
    env_data: object = None  # pytree of the environment's own arrays (None for the linear model)

    @property
    def dtype(self):
        """The problem's float dtype (that of ``s0``), which every algorithm state uses."""
        return self.s0.dtype


#: Dimensions of each array field of ONE seed's :class:`Problem` (:func:`seed_axes`); ``env_data``
#: is seed-first whenever the problem is per seed.
_SEED_NDIM = {"scopes": 2, "scope_mask": 2, "feat_mask": 2, "theta": 2, "s0": 1, "s_star": 1,
              "loss_star": 0, "s_star_residual": 0, "noise_sigma": 1, "rff_omega": 3,
              "rff_phase": 2}

#: ``out_axes`` of a ``vmap`` that draws one problem per seed: the draws get a leading seed axis;
#: scopes, masks, ``s0`` and ``sigma`` are kept once (a vmapped draw making one depend on its
#: key raises), which keeps the round's gathers static (``benchmarks/ab_round.py``).
DRAW_AXES = Problem(scopes=None, scope_mask=None, feat_mask=None, theta=0, s0=None, s_star=0,
                    loss_star=0, s_star_residual=0, noise_sigma=None, rff_omega=0, rff_phase=0,
                    env_data=0)


def seed_axes(problem: Problem, per_seed: bool = True):
    """``vmap`` axes of ``problem`` over seeds: ``None`` when not ``per_seed``, else a
    :class:`Problem` of ``0`` on the fields with a leading seed axis, ``None`` on the others."""
    if not per_seed:
        return None
    return Problem(*(
        None if v is None else 0 if f == "env_data" or len(v.shape) > _SEED_NDIM[f] else None
        for f, v in zip(Problem._fields, problem)))


def seed_rows(problem: Problem, index, per_seed: bool = True) -> Problem:
    """The problem of the seeds ``index`` (an integer or an index array) of a ``per_seed``
    problem: its per-seed fields indexed, the shared ones as they are."""
    if not per_seed:
        return problem
    return Problem(*(v if ax is None else jax.tree_util.tree_map(lambda a: a[index], v)
                     for v, ax in zip(problem, seed_axes(problem))))


class Feedback(NamedTuple):
    """What the environment returns for one played state."""

    y: jax.Array  # (k,) observed losses
    expected_loss: jax.Array  # () L(s_t)


def feature_dim(kind: str, scope_size: int, rff_dim: int = 1) -> int:
    """Feature width for a scope of ``scope_size`` coordinates."""
    dims = {"linear": scope_size, "quadratic": 2 * scope_size + 1, "rff": rff_dim}
    if kind in dims:
        return dims[kind]
    raise ValueError(f"unknown feature kind {kind!r}; allowed: {FEATURE_KINDS}")


def feature_norm_sq_bound(structure: Structure, feat_mask: jax.Array, dtype) -> jax.Array:
    r"""(rows,) ``L_i^2`` with :math:`\|\phi_i(s)\|_2^2 \le L_i^2` on the box, for feature rows
    whose real entries ``feat_mask`` (rows, d) marks: the default ``L`` of the OFUL radius.

    Every entry obeys :math:`\phi_j(s)^2 \le e^2`, so a row of ``d_i`` real entries (or any
    subset of them) has :math:`L_i^2 = d_i e^2`: ``e^2 = 1`` for ``linear`` and ``quadratic``
    (every entry in ``[0, 1]``, attained at ``s = 1``), ``e^2 = 2 / D`` for ``rff``.
    """
    e2 = 2.0 / structure.rff_dim if structure.features == "rff" else 1.0
    return e2 * jnp.sum(feat_mask, axis=-1).astype(dtype)


def make_structure(scopes: Scopes, features_kind: str, noise: str, rff_dim: int = 16) -> Structure:
    """Static structure from host-side scopes; a ``ValueError`` naming the argument unless
    ``scopes`` passes :func:`gsjax.graphs.check_scopes`, ``features_kind`` and ``noise`` are known
    kinds, ``rff_dim`` ("rff") is an integer ``>= 1`` and ("quadratic") every scope's first
    entry, the criterion's own coordinate, is unmasked."""
    _check_choice(features_kind, FEATURE_KINDS, "make_structure: features_kind", "feature kind")
    _check_choice(noise, NOISE_KINDS, "make_structure: noise", "noise kind")
    scopes = check_scopes(scopes, where="make_structure")
    if features_kind == "rff":
        positive_integer(rff_dim, "make_structure: rff_dim")
    if features_kind == "quadratic":
        _check_own_first(scopes.mask, "make_structure")
    k, m = scopes.index.shape
    dd = rff_dim if features_kind == "rff" else 1
    return Structure(
        num_coords=int(scopes.num_coords), num_criteria=int(k), scope_size=int(m),
        feature_dim=feature_dim(features_kind, m, dd), features=features_kind, noise=noise,
        disjoint=scopes_are_disjoint(scopes), rff_dim=dd, contiguous=scopes_are_blocks(scopes))


def at_scopes(structure: Structure, x: jax.Array, scopes: jax.Array) -> jax.Array:
    """``x[scopes]``: the (n,) values ``x`` at the (k, m) scopes of ``structure``; a reshape
    where they are contiguous blocks (no gather kernel)."""
    if structure.contiguous and scopes.shape == (structure.num_criteria, structure.scope_size):
        return x.reshape(scopes.shape)
    return x[scopes]


# Argument checks (host side): values only when concrete, the (static) shapes always.


def _check_choice(value, allowed: tuple, name: str, what: str) -> None:
    if value not in allowed:
        raise ValueError(f"{name}: unknown {what} {value!r}; allowed: {allowed}")


def _check_own_first(mask: np.ndarray, where: str) -> None:
    bad = np.flatnonzero(~mask[:, 0])
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{where}: scopes.mask[{i}, 0]: quadratic features read the first scope "
                         f"entry as criterion {i}'s own coordinate, so it must be unmasked, "
                         f"got False")


def _check_array(value, name: str, length: int | None = None, desc: str = "", **bounds) -> None:
    """A scalar, or with ``length`` a scalar or ``(length,)``; finite values within bounds."""
    shape, values = shape_and_values(value, name)
    if length is None and shape != ():
        raise ValueError(f"{name}: expected a scalar, got shape {shape}")
    if length is not None and shape not in ((), (1,), (length,)):
        raise ValueError(f"{name}: expected a scalar or {desc} = {length} values, "
                         f"got shape {shape}")
    if values is not None:
        check_bounds(values, name, **bounds)


def check_theta_values(theta_values, fmask: np.ndarray, features_kind: str,
                       where: str = "make_problem", rows_of: tuple = ("k", "criterion")) -> None:
    """An explicit ``theta*``: one finite row of row ``i``'s feature count per row of the host
    mask ``fmask`` (``rows_of``: the rows' symbol and name)."""
    name = f"{where}: theta_values"
    symbol, unit = rows_of
    if theta_values is None:
        raise ValueError(f"{name}: required for theta_distribution = 'explicit', got None")
    if is_traced(theta_values):
        return
    rows = list(theta_values)
    k = fmask.shape[0]
    if len(rows) != k:
        raise ValueError(f"{name}: expected {symbol} = {k} rows (one per {unit}), got {len(rows)}")
    for i, row in enumerate(rows):
        shape, values = shape_and_values(row, f"{name}[{i}]")
        d_i = int(fmask[i].sum())
        if len(shape) != 1 or shape[0] != d_i:
            raise ValueError(f"{name}[{i}]: theta row {i} has "
                             f"{shape[0] if len(shape) == 1 else shape} entries; "
                             f"{unit} {i} has {d_i} {features_kind} features")
        check_bounds(values, f"{name}[{i}]")


def _feature_mask(structure: Structure, scope_mask: np.ndarray) -> np.ndarray:
    k, m = scope_mask.shape
    if structure.features == "linear":
        return scope_mask.copy()
    if structure.features == "quadratic":
        others = scope_mask[:, 1:]
        return np.concatenate([np.ones((k, 3), bool), others, others], axis=1)
    return np.ones((k, structure.rff_dim), bool)


def features(structure: Structure, s_local: jax.Array, scope_mask: jax.Array,
             rff_omega: jax.Array, rff_phase: jax.Array) -> jax.Array:
    """(d,) features of ONE criterion, zero on padded entries, from ``s_local`` (m,) (the state
    at the scope, padded entries arbitrary), ``scope_mask`` (m,) and, for "rff" only, the
    frequencies ``rff_omega`` (D, m) and phases ``rff_phase`` (D,)."""
    x = jnp.where(scope_mask, s_local, 0.0)
    if structure.features == "linear":
        return x
    if structure.features == "quadratic":
        own, others = x[0], x[1:]
        one = jnp.ones((1,), x.dtype)
        return jnp.concatenate([one, own[None], (own * own)[None], others, own * others])
    return jnp.sqrt(2.0 / structure.rff_dim) * jnp.cos(rff_omega @ x + rff_phase)


def scoped_features(structure: Structure, s: jax.Array, scopes, scope_mask, feat_mask,
                    rff_omega=None, rff_phase=None) -> jax.Array:
    """(rows, d) :func:`features` of every row of ``scopes`` (rows, m) at the state ``s`` (n,),
    zero where ``feat_mask`` is False: the criteria of the linear model, or the factors of
    :mod:`gsjax.factor`."""
    phi = jax.vmap(lambda sl, sm, om, ph: features(structure, sl, sm, om, ph))(
        at_scopes(structure, s, scopes), scope_mask, rff_omega, rff_phase)
    return jnp.where(feat_mask, phi, 0.0)


def all_features(structure: Structure, problem: Problem, s: jax.Array) -> jax.Array:
    """(k, d) features of every criterion at the state ``s`` (n,), as the environment reads them."""
    return structure.env.features(structure, problem, s)


def expected_losses(structure: Structure, problem: Problem, s: jax.Array) -> jax.Array:
    """(k,) expected losses ``mu_i(s)``."""
    return jnp.sum(all_features(structure, problem, s) * problem.theta, axis=-1)


def total_loss(structure: Structure, problem: Problem, s: jax.Array) -> jax.Array:
    """() expected total loss ``L(s)``."""
    return jnp.sum(expected_losses(structure, problem, s))


class Draws(NamedTuple):
    """The randomness of one seed's round ``t`` (DESIGN section 3), for the environment.

    ``normals``: Philox-4x32-10 (:mod:`gsjax.philox`) keyed by the seed key's two words, counter
    ``(block, t, stream, 0)``: a pure function of (root, global seed id, round), whatever the
    batching, chunking, devices or resume point; float32 draws cast to the consumer's dtype.
    ``key``: the threefry key ``fold_in(fold_in(seed_key, t), 0)`` for environments sampling
    with ``jax.random`` (UCI Adult's batches).
    """

    words: jax.Array  # (2,) uint32: the seed key's data, Philox's key
    round: jax.Array  # () uint32: the round t
    key: jax.Array  # threefry key of the round's environment draws

    def normals(self, num: int, dtype, stream: int = 0) -> jax.Array:
        """(num,) standard normals of stream ``stream`` of this round, in ``dtype``."""
        return philox.normals(self.words[0], self.words[1], self.round, num, stream).astype(dtype)


def round_draws(seed_key: jax.Array, t) -> Draws:
    """:class:`Draws` of round ``t`` of the seed with key ``seed_key`` (``fold_in(root, id)``)."""
    return Draws(words=jax.random.key_data(seed_key), round=jnp.asarray(t, jnp.uint32),
                 key=jax.random.fold_in(jax.random.fold_in(seed_key, t), 0))


def draw_noise(draws: Draws, structure: Structure, problem: Problem) -> jax.Array:
    """(k,) noise ``eta_t`` for one round: ``independent``, ``eta_i = sigma_i xi_i``;
    ``correlated`` (Section 3.1), ``eta_i = sum_{j in N(i)} xi_j`` with one latent
    ``xi_j ~ N(0, sigma_j^2)`` per coordinate (``xi``: ``draws.normals``, stream 0)."""
    dtype = problem.dtype
    if structure.noise == "independent":
        return problem.noise_sigma * draws.normals(structure.num_criteria, dtype)
    xi = at_scopes(structure, problem.noise_sigma * draws.normals(structure.num_coords, dtype),
                   problem.scopes)
    return jnp.sum(jnp.where(problem.scope_mask, xi, 0.0), axis=-1)


def observe(draws: Draws, structure: Structure, problem: Problem, s: jax.Array) -> Feedback:
    """Feedback at the played state ``s`` (n,), from the structure's environment; ``draws``:
    the round's :class:`Draws` (:func:`round_draws`)."""
    return structure.env.observe(draws, structure, problem, s)


def linear_coefficients(structure: Structure, problem: Problem) -> jax.Array:
    """(n,) coefficients ``c`` with ``L(s) = c . s`` for linear features."""
    if structure.features != "linear":
        raise ValueError("linear_coefficients needs linear features")
    return structure.env.linear_coefficients(structure, problem)


class Environment:
    """How the world answers a played state: the linear model of this module, or a subclass.

    As in gymnax, static options live on the (hashable, frozen-dataclass) environment, part of
    the :class:`Structure`; an instance's arrays in the :class:`Problem` (its own ones in
    ``Problem.env_data``; other environments may leave ``noise_sigma`` and ``rff_*`` None). A
    subclass overrides what differs:

    * ``features(structure, problem, s)`` -- (k, d) the learner's features of every criterion;
    * ``observe(draws, structure, problem, s)`` -- the round's :class:`Feedback`;
    * ``linear_coefficients(structure, problem)`` -- ``c`` with ``L(s) = c . s`` (linear
      features only);
    * ``feature_norm_sq_bound(structure, problem)`` -- (k,) ``L_i^2`` bounding
      ``||features_i(s)||^2`` on the box (the OFUL radius's default ``L``);
    * ``joint_features`` / ``joint_dim`` -- the joint estimator's ``(k, D)`` feature matrix
      (Section 5.3); by default block-diagonal, every criterion its own factor;
    * ``describe(problem)`` -- extra entries of a summary's ``meta``;
    * ``relaxed(problem, relaxed_config)`` -- what ``gsjax tune``'s relaxed runs play.

    ``name`` is for reports; ``coordinate_model``: criterion ``i``'s parameters are coefficients
    of its own features over its scope (what graph refinement, Section 5.2, reads).
    """

    name: ClassVar[str] = "linear"
    coordinate_model: ClassVar[bool] = True

    def features(self, structure: Structure, problem: Problem, s: jax.Array) -> jax.Array:
        return scoped_features(structure, s, problem.scopes, problem.scope_mask,
                               problem.feat_mask, problem.rff_omega, problem.rff_phase)

    def observe(self, draws: Draws, structure: Structure, problem: Problem, s: jax.Array
                ) -> Feedback:
        mu = expected_losses(structure, problem, s)
        return Feedback(y=mu + draw_noise(draws, structure, problem), expected_loss=jnp.sum(mu))

    def linear_coefficients(self, structure: Structure, problem: Problem) -> jax.Array:
        w = jnp.where(problem.scope_mask, problem.theta, 0.0)
        zeros = jnp.zeros((structure.num_coords,), w.dtype)
        return zeros.at[problem.scopes.reshape(-1)].add(w.reshape(-1))

    def feature_norm_sq_bound(self, structure: Structure, problem: Problem) -> jax.Array:
        return feature_norm_sq_bound(structure, problem.feat_mask, problem.dtype)

    def joint_dim(self, structure: Structure) -> int:
        return structure.num_criteria * structure.feature_dim

    def joint_features(self, structure: Structure, problem: Problem, s: jax.Array) -> jax.Array:
        phi = all_features(structure, problem, s)  # (k, d)
        eye = jnp.eye(structure.num_criteria, dtype=phi.dtype)
        return (eye[:, :, None] * phi[:, None, :]).reshape(structure.num_criteria, -1)

    def describe(self, problem: Problem) -> dict:
        return {}

    def relaxed(self, problem: Problem, relaxed_config) -> Problem:
        """The problem a relaxed (differentiable) run plays: this one, unless the loss is a
        step function of the state (Adult: smoothed, ``relaxed_config.loss_bandwidth``)."""
        return problem


@dataclasses.dataclass(frozen=True)
class LinearModel(Environment):
    """The graph-structured linear model: ``y_i = <phi_i(s|N(i)), theta*_i> + eta_i``."""


#: The default environment of a :class:`Structure`.
LINEAR = LinearModel()


def true_minimiser(key: jax.Array, structure: Structure, problem: Problem,
                   num_samples: int = 4096, num_refine: int = 32, num_steps: int = 300,
                   lr: float = 0.02) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(s*, L(s*), residual)`` over the box.

    Linear features: ``L`` is linear in ``s``, so ``s*_j = 1`` where the coefficient is
    negative and 0 otherwise -- exact, residual 0. Other features: a dense multi-start search
    (``num_samples`` uniform points and the box's centre; the best ``num_refine`` refined by
    ``num_steps`` of projected Adam on ``L``); the residual is the norm of the projected
    gradient step ``||s - P(s - grad L(s))||`` at the returned point.
    """
    n = structure.num_coords
    dtype = problem.dtype
    if structure.features == "linear":
        c = linear_coefficients(structure, problem)
        s = (c < 0).astype(dtype)
        return s, jnp.sum(c * s), jnp.zeros((), dtype)

    loss = lambda s: total_loss(structure, problem, s)
    pts = jax.random.uniform(key, (num_samples, n), dtype)
    pts = jnp.concatenate([jnp.full((1, n), 0.5, dtype), pts])
    starts = pts[jnp.argsort(jax.vmap(loss)(pts))[:num_refine]]
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
    best = refined[jnp.argmin(jax.vmap(loss)(refined))]
    residual = jnp.linalg.norm(best - jnp.clip(best - jax.grad(loss)(best), 0.0, 1.0))
    return best, loss(best), residual


def _noise_len(structure: Structure) -> int:
    """Length of ``noise_sigma``: ``k`` (independent noise) or ``n`` (correlated)."""
    return structure.num_criteria if structure.noise == "independent" else structure.num_coords


def assemble_problem(structure: Structure, scopes: Scopes, feat_mask: np.ndarray, theta, s0,
                     dtype, *, noise_sigma=None, **arrays) -> Problem:
    """A :class:`Problem` from host ``scopes`` and ``feat_mask``: ``s0`` and ``noise_sigma``
    (when given) broadcast, ``s*``, ``L(s*)`` and the residual zero; ``arrays``: other fields."""
    if noise_sigma is not None:
        arrays["noise_sigma"] = jnp.broadcast_to(jnp.asarray(noise_sigma, dtype),
                                                 (_noise_len(structure),))
    n = structure.num_coords
    zero = jnp.zeros((), dtype)
    return Problem(
        scopes=jnp.asarray(scopes.index, jnp.int32), scope_mask=jnp.asarray(scopes.mask),
        feat_mask=jnp.asarray(feat_mask), theta=theta,
        s0=jnp.broadcast_to(jnp.asarray(s0, dtype), (n,)), s_star=jnp.zeros((n,), dtype),
        loss_star=zero, s_star_residual=zero, **arrays)


def with_minimiser(key, structure: Structure, problem: Problem) -> Problem:
    """``problem`` with ``s*``, ``L(s*)`` and the search's residual (:func:`true_minimiser`)."""
    s_star, loss_star, residual = true_minimiser(key, structure, problem)
    return problem._replace(s_star=s_star, loss_star=loss_star, s_star_residual=residual)


def make_problem(key: jax.Array, structure: Structure, scopes: Scopes, *,
                 theta_distribution: str = "normal", theta_values=None, theta_scale: float = 1.0,
                 noise_sigma=0.5, s0=0.5, rff_lengthscale: float = 0.5, dtype=jnp.float32
                 ) -> Problem:
    """Build a problem instance; jittable in ``key`` for drawn ``theta*``, and with a concrete
    ``key`` built in one compiled program, kept for the same arguments (:func:`compiled_build`).

    Args:
      key: draws ``theta*``, the random Fourier features and the ``s*`` search.
      structure: from :func:`make_structure`.
      scopes: host scopes.
      theta_distribution: "explicit", "normal" (``scale * N(0,1)``), "uniform"
        (``scale * U(-1, 1)``) or "signal" (``+-scale * (1 + U(0, 1))``, random sign: every
        magnitude in ``[scale, 2 scale]``, Assumption B of Section 5.2 with ``gamma = scale``).
      theta_values: for "explicit", a ragged list of ``k`` rows, row ``i`` holding the
        ``d_i`` real feature entries of criterion ``i`` in feature order.
      noise_sigma: scalar or sequence ((k,) independent, (n,) correlated).
      s0: scalar or (n,) starting state.

    Raises:
      ValueError: naming the argument, when ``scopes`` fails
        :func:`gsjax.graphs.check_scopes` or does not match ``structure`` (shape ``(k, m)``,
        ``num_coords``; quadratic features: first entry unmasked); ``theta_distribution`` is
        unknown; an explicit ``theta_values`` has not ``k`` rows of the criteria's feature
        counts or holds a non-finite value; ``theta_scale`` (drawn) is not finite and ``> 0``;
        ``noise_sigma`` is not a scalar or ``(k,)`` / ``(n,)`` of finite values ``>= 0``;
        ``s0`` is not a scalar or ``(n,)`` in ``[0, 1]``; ``rff_lengthscale`` ("rff") is not
        finite and ``> 0``; ``dtype`` is not floating. Traced arguments: shapes checked only.
    """
    return compiled_build(_make_problem, key, structure=structure, scopes=scopes,
                          theta_distribution=theta_distribution, theta_values=theta_values,
                          theta_scale=theta_scale, noise_sigma=noise_sigma, s0=s0,
                          rff_lengthscale=rff_lengthscale, dtype=dtype)


def _make_problem(key, *, structure, scopes, **o) -> Problem:
    scopes = check_scopes(scopes, structure.num_coords, where="make_problem")
    want = (structure.num_criteria, structure.scope_size)
    if scopes.index.shape != want:
        raise ValueError(f"make_problem: scopes: shape (k, m) must match the structure's "
                         f"(num_criteria, scope_size) = {want} (build the structure from these "
                         f"scopes with make_structure), got {scopes.index.shape}")
    if structure.features == "quadratic":
        _check_own_first(scopes.mask, "make_problem")
    fmask = _feature_mask(structure, scopes.mask)
    theta, omega, phase, k_star = draw_arrays(key, structure, scopes.mask, fmask, "make_problem",
                                              ("k", "criterion"), **o)
    problem = assemble_problem(structure, scopes, fmask, theta, o["s0"], o["dtype"],
                               noise_sigma=o["noise_sigma"], rff_omega=omega, rff_phase=phase)
    return with_minimiser(k_star, structure, problem)


_BUILDS: dict = {}  # compiled_build's recent programs, by their frozen arguments
_BUILDS_KEPT = 16


def _frozen(x):
    """A hashable stand-in for a builder's argument (floats by their bits); else ``TypeError``."""
    if isinstance(x, (np.ndarray, np.generic, jax.Array)):
        a = np.asarray(x)
        return ("array", a.dtype.str, a.shape, a.tobytes())
    if isinstance(x, float):
        return ("float", x.hex())
    if isinstance(x, (list, tuple)):
        return (type(x), tuple(_frozen(v) for v in x))
    if isinstance(x, dict):
        return ("dict", tuple((k, _frozen(v)) for k, v in sorted(x.items())))
    hash(x)
    return (type(x), x)


def compiled_build(build, key, **kwargs):
    """``build(key, **kwargs)``, a problem builder, as one compiled program when ``key`` is
    concrete (run eagerly, each operation would compile on its own: seconds for a quadratic
    ``s*`` search), kept for the same arguments (the last few) so a rebuild compiles nothing.
    The keywords stay Python values in the trace, so the builder's checks see them. A traced
    ``key``, or a traced or unhashable keyword: ``build`` is called directly."""
    if is_traced((key, kwargs)):
        return build(key, **kwargs)
    try:
        token = (build, _frozen(kwargs))
    except TypeError:
        return build(key, **kwargs)
    fn = remember(_BUILDS, _BUILDS_KEPT, token, lambda: xla.jit(lambda k: build(k, **kwargs)))
    return fn(key)


def problem_keywords(options: dict) -> dict:
    """:func:`make_problem`'s keywords from ``options``, defaults filled (unknown: TypeError)."""
    bound = inspect.signature(make_problem).bind(None, None, None, **options)
    bound.apply_defaults()
    return {k: v for k, v in bound.arguments.items() if k not in ("key", "structure", "scopes")}


def draw_arrays(key, structure: Structure, scope_mask: np.ndarray, fmask: np.ndarray,
                where: str, rows_of: tuple, theta_distribution: str, theta_values, theta_scale,
                noise_sigma, s0, rff_lengthscale, dtype):
    """``(theta*, rff_omega, rff_phase, k_star)`` of rows (criteria, or :mod:`gsjax.factor`'s
    factors; ``rows_of``: their symbol and name) with the host ``scope_mask`` and ``fmask``,
    drawn as :func:`make_problem` draws them after its checks (errors start with ``where``);
    ``k_star`` keys the ``s*`` search."""
    _check_choice(theta_distribution, THETA_DISTRIBUTIONS, f"{where}: theta_distribution",
                  "theta distribution")
    if theta_distribution == "explicit":
        check_theta_values(theta_values, fmask, structure.features, where, rows_of)
    else:
        _check_array(theta_scale, f"{where}: theta_scale", gt=0.0)
    desc = ("k (criteria, noise 'independent')" if structure.noise == "independent"
            else "n (coordinates, noise 'correlated')")
    _check_array(noise_sigma, f"{where}: noise_sigma", _noise_len(structure), desc, ge=0.0)
    _check_array(s0, f"{where}: s0", structure.num_coords, "n (coordinates)", ge=0.0, le=1.0)
    if structure.features == "rff":
        _check_array(rff_lengthscale, f"{where}: rff_lengthscale", gt=0.0)
    check_float_dtype(dtype, f"{where}: dtype")
    k_theta, k_omega, k_phase, k_star = jax.random.split(key, 4)
    shape = fmask.shape
    if theta_distribution == "explicit":
        theta = np.zeros(shape)
        for i, row in enumerate(theta_values):
            theta[i, fmask[i]] = row
        theta = jnp.asarray(theta, dtype)
    elif theta_distribution == "normal":
        theta = theta_scale * jax.random.normal(k_theta, shape, _DRAW).astype(dtype)
    elif theta_distribution == "uniform":
        theta = theta_scale * jax.random.uniform(k_theta, shape, _DRAW, -1.0, 1.0).astype(dtype)
    else:  # "signal"
        k_sign, k_mag = jax.random.split(k_theta)
        sign = jnp.where(jax.random.bernoulli(k_sign, 0.5, shape), 1.0, -1.0)
        theta = theta_scale * sign * (1.0 + jax.random.uniform(k_mag, shape, _DRAW).astype(dtype))
    theta = jnp.where(jnp.asarray(fmask), theta, 0.0)
    (rows, m), dd = scope_mask.shape, structure.rff_dim
    if structure.features != "rff":
        return theta, jnp.zeros((rows, dd, m), dtype), jnp.zeros((rows, dd), dtype), k_star
    omega = jax.random.normal(k_omega, (rows, dd, m), _DRAW).astype(dtype) / rff_lengthscale
    omega = jnp.where(jnp.asarray(scope_mask)[:, None, :], omega, 0.0)
    phase = jax.random.uniform(k_phase, (rows, dd), _DRAW, 0.0, 2 * jnp.pi).astype(dtype)
    return theta, omega, phase, k_star
