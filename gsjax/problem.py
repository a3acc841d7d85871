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
import inspect
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gsjax.checks import (
    check_bounds,
    check_float_dtype,
    is_traced,
    positive_integer,
    remember,
    shape_and_values,
)
from gsjax import philox, xla
from gsjax.graphs import Scopes, check_scopes, scopes_are_blocks, scopes_are_disjoint

__all__ = [
    "FEATURE_KINDS",
    "NOISE_KINDS",
    "THETA_DISTRIBUTIONS",
    "Structure",
    "Problem",
    "DRAW_AXES",
    "seed_axes",
    "seed_rows",
    "Feedback",
    "Environment",
    "LinearModel",
    "LINEAR",
    "scoped_features",
    "feature_dim",
    "feature_norm_sq_bound",
    "make_structure",
    "features",
    "all_features",
    "expected_losses",
    "total_loss",
    "Draws",
    "round_draws",
    "draw_noise",
    "observe",
    "linear_coefficients",
    "true_minimiser",
    "make_problem",
    "compiled_build",
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
    # The scopes are the blocks arange(n).reshape(k, m), all real (implies disjoint): values at
    # the scopes are a reshape, not a gather (:func:`at_scopes`).
    contiguous: bool = False
    # How the world answers a played state (static, hashable; its arrays are Problem.env_data):
    # the linear model of this module by default, gsjax.factor.FactorEnv (Section 5.3) or
    # gsjax.fairness.AdultEnv (Section 7.3).
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


#: Dimensions of each array field of ONE seed's :class:`Problem`. A problem drawn per seed has a
#: leading seed axis on some fields (:func:`seed_axes` reads which from the shapes); an
#: environment's own ``env_data`` is seed-first whenever the problem is per seed.
_SEED_NDIM = {"scopes": 2, "scope_mask": 2, "feat_mask": 2, "theta": 2, "s0": 1, "s_star": 1,
              "loss_star": 0, "s_star_residual": 0, "noise_sigma": 1, "rff_omega": 3,
              "rff_phase": 2}

#: ``out_axes`` of a ``vmap`` that draws one problem per seed: the structure's and the config's
#: fields (scopes, masks, ``s0``, ``sigma``) are kept once, shared by every seed (a vmapped draw
#: that made one of them depend on its key raises); the draws get a leading seed axis. Shared
#: fields keep the round's gathers static (every field per seed made the chunked Section 7.2
#: sweep at 1024 seeds x 2000 rounds 1.07x slower; ``benchmarks/ab_round.py --change problem``).
DRAW_AXES = Problem(scopes=None, scope_mask=None, feat_mask=None, theta=0, s0=None, s_star=0,
                    loss_star=0, s_star_residual=0, noise_sigma=None, rff_omega=0, rff_phase=0,
                    env_data=0)


def seed_axes(problem: Problem, per_seed: bool = True):
    """``vmap`` axes of ``problem`` over seeds: ``None`` when not ``per_seed`` (one problem
    shared), else a :class:`Problem` of ``0`` on the fields with a leading seed axis and
    ``None`` on those kept once (shapes or arrays)."""
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
    if kind == "linear":
        return scope_size
    if kind == "quadratic":
        return 2 * scope_size + 1
    if kind == "rff":
        return rff_dim
    raise ValueError(f"unknown feature kind {kind!r}; allowed: {FEATURE_KINDS}")


def feature_norm_sq_bound(structure: Structure, feat_mask: jax.Array, dtype) -> jax.Array:
    r"""(rows,) ``L_i^2`` with :math:`\|\phi_i(s)\|_2^2 \le L_i^2` on the box, for feature rows
    whose real entries ``feat_mask`` (rows, d) marks: the default ``L`` of the OFUL radius.

    Every entry obeys :math:`\phi_j(s)^2 \le e^2`, so a row of ``d_i`` real entries has
    :math:`L_i^2 = d_i e^2`:

    * ``linear``: entries ``s_j`` in ``[0, 1]``, ``e^2 = 1``: ``L_i^2 = d_i`` (attained at
      ``s = 1``);
    * ``quadratic`` (Example 1): ``1, s_i, s_i^2, s_j, s_i s_j`` all in ``[0, 1]``, ``e^2 = 1``:
      ``L_i^2 = d_i = 2 m_i + 1`` (attained at ``s = 1``);
    * ``rff``: ``sqrt(2/D) cos(.)``, ``e^2 = 2 / D``: ``L_i^2 = 2`` for the ``D`` entries.

    A subset of a row's entries (a learned graph's kept features) has the bound of its count.
    """
    e2 = 2.0 / structure.rff_dim if structure.features == "rff" else 1.0
    return e2 * jnp.sum(feat_mask, axis=-1).astype(dtype)


def make_structure(scopes: Scopes, features_kind: str, noise: str, rff_dim: int = 16) -> Structure:
    """Static structure from host-side scopes.

    Checks (``ValueError`` naming the argument): ``scopes`` passes
    :func:`gsjax.graphs.check_scopes`; ``features_kind`` and ``noise`` are known kinds;
    ``rff_dim`` is an integer ``>= 1`` for "rff" features; for "quadratic" features every
    scope's first entry (the criterion's own coordinate) is unmasked.
    """
    if features_kind not in FEATURE_KINDS:
        raise ValueError(f"make_structure: features_kind: unknown feature kind "
                         f"{features_kind!r}; allowed: {FEATURE_KINDS}")
    if noise not in NOISE_KINDS:
        raise ValueError(f"make_structure: noise: unknown noise kind {noise!r}; "
                         f"allowed: {NOISE_KINDS}")
    scopes = check_scopes(scopes, where="make_structure")
    if features_kind == "rff":
        positive_integer(rff_dim, "make_structure: rff_dim")
    if features_kind == "quadratic":
        _check_own_first(scopes.mask, "make_structure")
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
        contiguous=scopes_are_blocks(scopes),
    )


def at_scopes(structure: Structure, x: jax.Array, scopes: jax.Array) -> jax.Array:
    """``x[scopes]``: the (n,) values ``x`` at the (k, m) scopes of ``structure``; a reshape
    where they are contiguous blocks (no gather kernel)."""
    if structure.contiguous and scopes.shape == (structure.num_criteria, structure.scope_size):
        return x.reshape(scopes.shape)
    return x[scopes]


# ---------------------------------------------------------------------------------------------
# Argument checks (host side). Values are checked only when concrete: under jit/vmap a traced
# argument is never converted to a Python value; its shape (static) is still checked.
# ---------------------------------------------------------------------------------------------


def _check_own_first(mask: np.ndarray, where: str) -> None:
    """Quadratic features read scope entry 0 as the criterion's own coordinate."""
    bad = np.flatnonzero(~mask[:, 0])
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{where}: scopes.mask[{i}, 0]: quadratic features read the first scope entry as "
            f"criterion {i}'s own coordinate, so it must be unmasked, got False"
        )


def _check_array(value, name: str, length: int | None = None, desc: str = "", **bounds) -> None:
    """A scalar, or with ``length`` a scalar or a ``(length,)`` sequence (what
    ``broadcast_to(., (length,))`` takes); finite values within the bounds."""
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
    """An explicit ``theta*``: one row per row of the host mask ``fmask`` (``rows_of``: its
    symbol and what a row is), row ``i`` of row ``i``'s feature count, finite."""
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
            raise ValueError(
                f"{name}[{i}]: theta row {i} has {shape[0] if len(shape) == 1 else shape} "
                f"entries; {unit} {i} has {d_i} {features_kind} features"
            )
        check_bounds(values, f"{name}[{i}]")


def _check_scopes_arg(structure: Structure, scopes: Scopes) -> Scopes:
    """:func:`make_problem`'s checks of ``scopes`` (see its docstring); the checked scopes."""
    scopes = check_scopes(scopes, structure.num_coords, where="make_problem")
    want = (structure.num_criteria, structure.scope_size)
    if scopes.index.shape != want:
        raise ValueError(
            f"make_problem: scopes: shape (k, m) must match the structure's "
            f"(num_criteria, scope_size) = {want} (build the structure from these scopes with "
            f"make_structure), got {scopes.index.shape}"
        )
    if structure.features == "quadratic":
        _check_own_first(scopes.mask, "make_problem")
    return scopes


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


def scoped_features(structure: Structure, s: jax.Array, scopes, scope_mask, feat_mask,
                    rff_omega=None, rff_phase=None) -> jax.Array:
    """(rows, d) :func:`features` of every row of ``scopes`` (rows, m) at the state ``s`` (n,),
    zero where ``feat_mask`` is False: the criteria of the linear model, or the factors of
    :mod:`gsjax.factor`."""
    phi = jax.vmap(lambda sl, sm, om, ph: features(structure, sl, sm, om, ph))(
        at_scopes(structure, s, scopes), scope_mask, rff_omega, rff_phase
    )
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

    ``normals`` come from Philox-4x32-10 (:mod:`gsjax.philox`) keyed by ``words``, the two
    uint32 words of the seed's key ``fold_in(root, seed id)``, with the counter
    ``(block, t, stream, 0)``: a pure function of (root, global seed id, round), so a seed's
    draws do not depend on batch size, chunking, devices or resume point, and XLA fuses them
    into the round. They are float32-precision draws cast to the consumer's dtype, so float32
    and float64 runs of a seed see the same noise. ``key`` is the threefry key
    ``fold_in(fold_in(seed_key, t), 0)`` for environments that sample with ``jax.random`` (UCI
    Adult's batches); XLA drops it from programs that do not read it.
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
    """(k,) noise ``eta_t`` for one round; independent of the played state.

    ``independent``: ``eta_i = sigma_i xi_i``. ``correlated`` (Section 3.1): one latent
    ``xi_j ~ N(0, sigma_j^2)`` per coordinate and ``eta_i = sum_{j in N(i)} xi_j``. The
    ``xi`` are ``draws.normals`` (Philox, stream 0).
    """
    dtype = problem.dtype
    if structure.noise == "independent":
        return problem.noise_sigma * draws.normals(structure.num_criteria, dtype)
    xi = problem.noise_sigma * draws.normals(structure.num_coords, dtype)
    return jnp.sum(jnp.where(problem.scope_mask, at_scopes(structure, xi, problem.scopes), 0.0), axis=-1)


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

    The model of gymnax: static options live on the (hashable, frozen-dataclass) environment,
    which is part of the :class:`Structure`; an instance's arrays live in the :class:`Problem`
    (its own ones in ``Problem.env_data``; the linear model's ``noise_sigma`` and ``rff_*`` are
    optional fields that other environments leave None). A subclass overrides what differs:

    * ``features(structure, problem, s)`` -- (k, d) the learner's features of every criterion;
    * ``observe(draws, structure, problem, s)`` -- the round's :class:`Feedback` (``draws``:
      the round's :class:`Draws`);
    * ``linear_coefficients(structure, problem)`` -- ``c`` with ``L(s) = c . s`` (linear
      features only);
    * ``feature_norm_sq_bound(structure, problem)`` -- (k,) ``L_i^2`` bounding
      ``||features_i(s)||^2`` on the box (the OFUL radius's default ``L``; by default
      :func:`feature_norm_sq_bound` of ``problem.feat_mask``);
    * ``joint_features`` / ``joint_dim`` -- the joint estimator's ``(k, D)`` feature matrix
      (Section 5.3); by default every criterion is its own factor (block-diagonal);
    * ``describe(problem)`` -- extra entries of a summary's ``meta`` (default none);
    * ``relaxed(problem, relaxed_config)`` -- what ``gsjax tune``'s relaxed runs play.

    ``name`` is for reports; ``coordinate_model`` says that criterion ``i``'s parameters are
    coefficients of its own features over its scope (what graph refinement, Section 5.2, reads).
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
        return jnp.zeros((structure.num_coords,), w.dtype).at[problem.scopes.reshape(-1)].add(
            w.reshape(-1)
        )

    def feature_norm_sq_bound(self, structure: Structure, problem: Problem) -> jax.Array:
        return feature_norm_sq_bound(structure, problem.feat_mask, problem.dtype)

    def joint_dim(self, structure: Structure) -> int:
        return structure.num_criteria * structure.feature_dim

    def joint_features(self, structure: Structure, problem: Problem, s: jax.Array) -> jax.Array:
        phi = all_features(structure, problem, s)  # (k, d)
        k = structure.num_criteria
        eye = jnp.eye(k, dtype=phi.dtype)
        return (eye[:, :, None] * phi[:, None, :]).reshape(k, -1)

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
    dtype = problem.dtype
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


def draw_theta(key, fmask: np.ndarray, distribution: str, values, scale, dtype) -> jax.Array:
    """(rows, d) coefficients on the real features of the host mask ``fmask``, zero elsewhere:
    "explicit" (``values``: one row of real entries per row of ``fmask``, lengths checked by the
    caller), "normal" ``scale N(0,1)``, "uniform" ``scale U(-1,1)``, "signal"
    ``+-scale (1 + U(0,1))`` with a random sign (Assumption B of Section 5.2, ``gamma = scale``).
    """
    if distribution == "explicit":
        theta_np = np.zeros(fmask.shape)
        for i, row in enumerate(values):
            theta_np[i, fmask[i]] = row
        theta = jnp.asarray(theta_np, dtype)
    elif distribution == "normal":
        theta = scale * jax.random.normal(key, fmask.shape, _DRAW).astype(dtype)
    elif distribution == "uniform":
        theta = scale * jax.random.uniform(key, fmask.shape, _DRAW, -1.0, 1.0).astype(dtype)
    elif distribution == "signal":  # Assumption B (Section 5.2): |theta*| >= scale
        k_sign, k_mag = jax.random.split(key)
        sign = jnp.where(jax.random.bernoulli(k_sign, 0.5, fmask.shape), 1.0, -1.0)
        theta = scale * sign * (1.0 + jax.random.uniform(k_mag, fmask.shape, _DRAW).astype(dtype))
    else:
        raise ValueError(
            f"unknown theta distribution {distribution!r}; allowed: {THETA_DISTRIBUTIONS}")
    return jnp.where(jnp.asarray(fmask), theta, 0.0)


def draw_rff(k_omega, k_phase, structure: Structure, scope_mask: np.ndarray, lengthscale, dtype
             ) -> tuple[jax.Array, jax.Array]:
    """Random Fourier frequencies (rows, D, m) and phases (rows, D) for scopes of the host mask
    (rows, m); zeros unless ``structure.features == "rff"``."""
    rows, m = scope_mask.shape
    dd = structure.rff_dim
    if structure.features != "rff":
        return jnp.zeros((rows, dd, m), dtype), jnp.zeros((rows, dd), dtype)
    omega = jax.random.normal(k_omega, (rows, dd, m), _DRAW).astype(dtype) / lengthscale
    omega = jnp.where(jnp.asarray(scope_mask)[:, None, :], omega, 0.0)
    return omega, jax.random.uniform(k_phase, (rows, dd), _DRAW, 0.0, 2 * jnp.pi).astype(dtype)


def _noise_len(structure: Structure) -> int:
    """Length of ``noise_sigma``: ``k`` for independent noise, ``n`` for correlated."""
    return structure.num_criteria if structure.noise == "independent" else structure.num_coords


def assemble_problem(structure: Structure, scopes: Scopes, feat_mask: np.ndarray, theta, s0,
                     dtype, *, noise_sigma=None, **arrays) -> Problem:
    """A :class:`Problem` from host ``scopes`` and ``feat_mask``: ``s0`` and ``noise_sigma``
    (when given) broadcast to their lengths, ``s*``, ``L(s*)`` and the residual zero (see
    :func:`with_minimiser`); ``arrays``: the other fields."""
    if noise_sigma is not None:
        arrays["noise_sigma"] = jnp.broadcast_to(jnp.asarray(noise_sigma, dtype),
                                                 (_noise_len(structure),))
    n = structure.num_coords
    zero = jnp.zeros((), dtype)
    return Problem(
        scopes=jnp.asarray(scopes.index, jnp.int32),
        scope_mask=jnp.asarray(scopes.mask),
        feat_mask=jnp.asarray(feat_mask),
        theta=theta,
        s0=jnp.broadcast_to(jnp.asarray(s0, dtype), (n,)),
        s_star=jnp.zeros((n,), dtype),
        loss_star=zero,
        s_star_residual=zero,
        **arrays,
    )


def with_minimiser(key, structure: Structure, problem: Problem) -> Problem:
    """``problem`` with ``s*``, ``L(s*)`` and the search's residual (:func:`true_minimiser`)."""
    s_star, loss_star, residual = true_minimiser(key, structure, problem)
    return problem._replace(s_star=s_star, loss_star=loss_star, s_star_residual=residual)


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
    """Build a problem instance; jittable in ``key`` for drawn ``theta*``. With a concrete
    ``key`` it is built in one compiled program, kept for the same arguments
    (:func:`compiled_build`).

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

    Raises:
      ValueError: naming the argument, when ``scopes`` fails
        :func:`gsjax.graphs.check_scopes` or does not match ``structure`` (shape ``(k, m)``,
        ``num_coords``; quadratic features: first entry unmasked); ``theta_distribution`` is
        unknown; an explicit ``theta_values`` has not ``k`` rows of the criteria's feature
        counts or holds a non-finite value;
        ``theta_scale`` (drawn ``theta*``) is not finite and ``> 0``; ``noise_sigma`` is not
        a scalar or ``(k,)`` / ``(n,)`` of finite values ``>= 0``; ``s0`` is not a scalar or
        ``(n,)`` inside the box ``[0, 1]``; ``rff_lengthscale`` ("rff") is not finite and
        ``> 0``; ``dtype`` is not a floating dtype. Only concrete values are checked: under
        ``jit``/``vmap`` a traced argument's shape is checked, never its values.
    """
    return compiled_build(_make_problem, key, structure=structure, scopes=scopes,
                          theta_distribution=theta_distribution, theta_values=theta_values,
                          theta_scale=theta_scale, noise_sigma=noise_sigma, s0=s0,
                          rff_lengthscale=rff_lengthscale, dtype=dtype)


def _make_problem(key, *, structure, scopes, theta_distribution, theta_values, theta_scale,
                  noise_sigma, s0, rff_lengthscale, dtype) -> Problem:
    scopes = _check_scopes_arg(structure, scopes)
    fmask = _feature_mask(structure, scopes.mask)
    theta, omega, phase, k_star = draw_arrays(
        key, structure, scopes.mask, fmask, "make_problem", ("k", "criterion"),
        theta_distribution, theta_values, theta_scale, noise_sigma, s0, rff_lengthscale, dtype)
    problem = assemble_problem(structure, scopes, fmask, theta, s0, dtype,
                               noise_sigma=noise_sigma, rff_omega=omega, rff_phase=phase)
    return with_minimiser(k_star, structure, problem)


_BUILDS: dict = {}  # compiled_build's recent programs, by their frozen arguments
_BUILDS_KEPT = 16


def _frozen(x):
    """A hashable stand-in for a builder's argument: arrays by dtype, shape and bytes, floats by
    their bits (``0.0`` and ``-0.0`` differ), sequences and mappings entry by entry; a
    ``TypeError`` for what has none."""
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
    concrete: run eagerly, each of its operations would compile on its own (a quadratic problem's
    ``s*`` search: ~110 programs, seconds). The program is that of a config's run, which builds
    inside :func:`gsjax.xla.jit` too (:mod:`gsjax.experiment`), and is kept for the same
    arguments (the last few, :func:`gsjax.checks.remember`), so building a problem again
    compiles nothing. The keywords stay Python values in the trace, so the builder's argument
    checks see them. Traced ``key`` (under the caller's ``jit`` or ``vmap``), a traced or
    unhashable keyword: ``build`` is called directly."""
    if is_traced((key, kwargs)):
        return build(key, **kwargs)
    try:
        token = (build, _frozen(kwargs))
    except TypeError:
        return build(key, **kwargs)
    fn = remember(_BUILDS, _BUILDS_KEPT, token, lambda: xla.jit(lambda k: build(k, **kwargs)))
    return fn(key)


def problem_keywords(options: dict) -> dict:
    """:func:`make_problem`'s keywords from ``options``, the missing ones at its defaults (an
    unknown one a ``TypeError``)."""
    bound = inspect.signature(make_problem).bind(None, None, None, **options)
    bound.apply_defaults()
    return {k: v for k, v in bound.arguments.items() if k not in ("key", "structure", "scopes")}


def draw_arrays(key, structure: Structure, scope_mask: np.ndarray, fmask: np.ndarray,
                where: str, rows_of: tuple, theta_distribution: str, theta_values, theta_scale,
                noise_sigma, s0, rff_lengthscale, dtype):
    """``(theta*, rff_omega, rff_phase, k_star)`` of rows with the host ``scope_mask`` and
    feature mask ``fmask`` (the criteria, or :mod:`gsjax.factor`'s factors; ``rows_of``: their
    symbol and name), drawn from ``key`` as :func:`make_problem` draws them, its keywords
    checked first (errors start with ``where``); ``k_star`` keys the ``s*`` search."""
    if theta_distribution not in THETA_DISTRIBUTIONS:
        raise ValueError(f"{where}: theta_distribution: unknown theta distribution "
                         f"{theta_distribution!r}; allowed: {THETA_DISTRIBUTIONS}")
    if theta_distribution == "explicit":
        check_theta_values(theta_values, fmask, structure.features, where, rows_of)
    else:
        _check_array(theta_scale, f"{where}: theta_scale", gt=0.0)
    if structure.noise == "independent":
        desc = "k (criteria, noise 'independent')"
    else:
        desc = "n (coordinates, noise 'correlated')"
    _check_array(noise_sigma, f"{where}: noise_sigma", _noise_len(structure), desc, ge=0.0)
    _check_array(s0, f"{where}: s0", structure.num_coords, "n (coordinates)", ge=0.0, le=1.0)
    if structure.features == "rff":
        _check_array(rff_lengthscale, f"{where}: rff_lengthscale", gt=0.0)
    check_float_dtype(dtype, f"{where}: dtype")
    k_theta, k_omega, k_phase, k_star = jax.random.split(key, 4)
    theta = draw_theta(k_theta, fmask, theta_distribution, theta_values, theta_scale, dtype)
    return (theta, *draw_rff(k_omega, k_phase, structure, scope_mask, rff_lengthscale, dtype),
            k_star)
