r"""Factor-graph problems (Section 5.3): factors with shared parameters, node-specific features.

``n`` coordinates, ``k`` nodes (the criteria), factors ``C``: each a set of coordinates and of
member nodes, with its own parameter :math:`w^*_C \in \mathbb{R}^{d_C}`. Node ``i``'s loss is

.. math::
    \mu_i(s) = \sum_{C \ni i} \langle \psi_{C,i}(s|_C), w^*_C \rangle, \qquad
    \psi_{C,i}(x) = M_{C,i}\, \phi_C(x),

where :math:`\phi_C` is a feature map of :mod:`gsjax.problem` on the factor's scope (random
Fourier frequencies drawn once per FACTOR) and :math:`M_{C,i}` a fixed node-specific *mixing*
matrix (config ``mixing``, drawn once from ``mixing_seed``):

* ``"orthogonal"`` (default): Haar-random per (node, factor): norms kept, but nodes read
  different directions of :math:`w^*_C`, where a joint estimator gains.
* ``"scaled"``: diagonal, entries ``U[0.5, 1.5]``: node-specific sensitivities.
* ``"identity"``: every member node has the same features (pure replication).

The joint model stacks :math:`\theta_{joint} = (w_C)_C \in \mathbb{R}^{d_{eff}}` and observes
:math:`Y_t = \Psi(s_t)\theta_{joint} + \eta_t`, row ``i`` of :math:`\Psi(s)` holding
:math:`\psi_{C,i}(s|_C)` in the block of each factor ``C \ni i`` (:func:`joint_features`).
The SAME problem is a :class:`gsjax.problem.Problem` of the node-wise model: node ``i``'s scope
is the union of its factors' coordinates, its features the concatenated :math:`\psi_{C,i}`
(``max_degree`` slots of ``d_C``), its ``theta*_i`` its own copy of :math:`(w^*_C)_{C \ni i}`.

Shapes are padded to the largest factor (``m_C`` coordinates, ``d_C`` features) with masks;
the joint vector has ``F d_C`` entries, ``d_eff`` real (:func:`joint_mask`).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gsjax.graphs import Scopes, padded
from gsjax.problem import (Environment, Problem, Structure, _check_choice, _feature_mask,
                           assemble_problem, compiled_build, draw_arrays, feature_dim,
                           feature_norm_sq_bound, make_structure, problem_keywords,
                           scoped_features, seed_rows, total_loss, with_minimiser)

__all__ = [
    "MIXINGS", "FactorEnv", "FactorLayout", "FactorSpec", "FactorData", "clique_layout",
    "node_scopes", "make_factor_structure", "mixing_matrices", "joint_dim", "joint_features",
    "joint_theta", "joint_mask", "make_factor_problem",
]

MIXINGS = ("orthogonal", "scaled", "identity")


class FactorLayout(NamedTuple):
    """Host description of a factor graph: which coordinates and nodes each factor has."""

    num_coords: int  # n
    num_nodes: int  # k
    factor_coords: tuple  # F tuples of coordinate indices
    factor_nodes: tuple  # F tuples of member node indices


@dataclasses.dataclass(frozen=True)
class FactorSpec:
    """Static (hashable) sizes of a factor-graph problem; held by :class:`FactorEnv`."""

    num_factors: int  # F
    factor_scope_size: int  # m_C, padded factor scope width
    factor_feature_dim: int  # d_C, padded factor feature width
    max_degree: int  # largest number of factors containing one node
    mixing: str  # "orthogonal" | "scaled" | "identity"

    @property
    def joint_dim(self) -> int:
        """Padded length ``F d_C`` of the joint parameter vector."""
        return self.num_factors * self.factor_feature_dim


class FactorData(NamedTuple):
    """Arrays of a factor-graph problem; ``Problem.env_data``."""

    factor_scopes: jax.Array  # (F, m_C) int32 coordinates, padded with 0
    factor_scope_mask: jax.Array  # (F, m_C) bool
    factor_feat_mask: jax.Array  # (F, d_C) bool, real feature entries of each factor
    rff_omega: jax.Array  # (F, D, m_C) per-factor frequencies / lengthscale (zeros unless rff)
    rff_phase: jax.Array  # (F, D) per-factor phases (zeros unless rff)
    node_factors: jax.Array  # (k, max_degree) int32 factor ids of each node, padded with 0
    node_factor_mask: jax.Array  # (k, max_degree) bool
    mix: jax.Array  # (k, max_degree, d_C, d_C) node-specific mixing matrices M_{C,i}
    w: jax.Array  # (F, d_C) w*_C, zero on padded entries


def clique_layout(num_nodes: int, num_coords: int) -> FactorLayout:
    """One factor over every coordinate, shared by every node (the dense case of Section 5.3)."""
    return FactorLayout(int(num_coords), int(num_nodes), (tuple(range(num_coords)),),
                        (tuple(range(num_nodes)),))


def _node_factor_lists(layout: FactorLayout) -> list[list[int]]:
    lists = [[] for _ in range(layout.num_nodes)]
    for c, nodes in enumerate(layout.factor_nodes):
        for i in nodes:
            lists[int(i)].append(c)
    return lists


def _check_layout(layout: FactorLayout) -> None:
    """At least one factor; each lists distinct coordinates and member nodes, in range; every
    node belongs to a factor (``ValueError`` naming the layout's field)."""
    if len(layout.factor_coords) != len(layout.factor_nodes) or not layout.factor_coords:
        raise ValueError("layout.factor_coords: a factor graph needs at least one factor, each "
                         "with coords (factor_coords) and nodes (factor_nodes)")
    for field, size in (("factor_coords", layout.num_coords), ("factor_nodes", layout.num_nodes)):
        for c, row in enumerate(getattr(layout, field)):
            if not row or len(set(row)) != len(row) or not all(0 <= j < size for j in row):
                raise ValueError(f"layout.{field}[{c}]: factor {c} needs distinct indices in "
                                 f"[0, {size}), at least one, got {row!r}")
    for i, fl in enumerate(_node_factor_lists(layout)):
        if not fl:
            raise ValueError(f"layout.factor_nodes: node {i} belongs to no factor")


def node_scopes(layout: FactorLayout) -> Scopes:
    """Node ``i``'s scope: the union of its factors' coordinates, in increasing order."""
    _check_layout(layout)
    rows = [sorted({int(j) for c in fl for j in layout.factor_coords[c]})
            for fl in _node_factor_lists(layout)]
    return padded(rows, layout.num_coords)


def make_factor_structure(layout: FactorLayout, features_kind: str, noise: str, rff_dim: int = 16,
                          mixing: str = "orthogonal") -> tuple[Structure, Scopes]:
    """Static structure (``environment = "factor"``) and the node scopes of a layout.

    ``disjoint`` is always False: node features mix their scope's coordinates, so the block-wise
    vertex enumeration of :func:`gsjax.lcb.minimise_vertex` does not apply.
    """
    _check_choice(mixing, MIXINGS, "make_factor_structure: mixing", "mixing")
    scopes = node_scopes(layout)
    nodewise = make_structure(scopes, features_kind, noise, rff_dim)
    m_c = max(len(c) for c in layout.factor_coords)
    d_c = feature_dim(features_kind, m_c, nodewise.rff_dim)
    degree = max(len(fl) for fl in _node_factor_lists(layout))
    spec = FactorSpec(num_factors=len(layout.factor_coords), factor_scope_size=m_c,
                      factor_feature_dim=d_c, max_degree=degree, mixing=mixing)
    return dataclasses.replace(nodewise, feature_dim=degree * d_c, disjoint=False,
                               contiguous=False, env=FactorEnv(spec)), scopes


def _haar_orthogonal(rng: np.random.Generator, d: int) -> np.ndarray:
    """A Haar-distributed orthogonal ``d x d`` matrix (QR of a Gaussian, signs fixed)."""
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))[None, :]


def mixing_matrices(layout: FactorLayout, structure: Structure, seed: int) -> np.ndarray:
    """(k, max_degree, d_C, d_C) host mixing matrices on each factor's real block (zero
    elsewhere), drawn by ``numpy.random.default_rng(seed)`` node by node, factors by id."""
    spec: FactorSpec = structure.env.spec
    fmask = _feature_mask(structure, padded(layout.factor_coords, layout.num_coords).mask)
    d_c = spec.factor_feature_dim
    rng = np.random.default_rng(seed)
    draw = {"identity": np.eye, "scaled": lambda d: np.diag(rng.uniform(0.5, 1.5, d)),
            "orthogonal": lambda d: _haar_orthogonal(rng, d)}[spec.mixing]
    out = np.zeros((layout.num_nodes, spec.max_degree, d_c, d_c))
    for i, fl in enumerate(_node_factor_lists(layout)):
        for j, c in enumerate(fl):
            real = np.flatnonzero(fmask[c])
            out[i, j][np.ix_(real, real)] = draw(len(real))
    return out


def _node_blocks(structure: Structure, data: FactorData, s: jax.Array) -> jax.Array:
    """(k, max_degree, d_C) ``psi_{C,i}(s|_C) = M_{C,i} phi_C`` for each node's factor slots."""
    phi = scoped_features(structure, s, data.factor_scopes, data.factor_scope_mask,
                          data.factor_feat_mask, data.rff_omega, data.rff_phase)  # (F, d_C)
    psi = jnp.einsum("kjab,kjb->kja", data.mix, phi[data.node_factors])
    return jnp.where(data.node_factor_mask[..., None], psi, 0.0)


def joint_dim(structure: Structure) -> int:
    """Padded length of the joint parameter vector: ``F d_C`` (``k d`` node-wise)."""
    return structure.env.joint_dim(structure)


def joint_features(structure: Structure, problem: Problem, s: jax.Array) -> jax.Array:
    """(k, F d_C) the joint feature matrix ``Psi(s)``: row ``i`` holds ``psi_{C,i}`` in C's block
    (other problems: ``(k, k d)`` block-diagonal, every criterion its own factor)."""
    return structure.env.joint_features(structure, problem, s)


@dataclasses.dataclass(frozen=True)
class FactorEnv(Environment):
    """Section 5.3: shared factor parameters ``w*_C`` read through node-specific features
    ``psi_{C,i} = M_{C,i} phi_C``; the arrays are a :class:`FactorData` in ``Problem.env_data``."""

    spec: FactorSpec
    name: ClassVar[str] = "factor"
    coordinate_model: ClassVar[bool] = False

    def features(self, structure, problem, s):
        # node i's features: its psi_{C,i} over its factor slots, concatenated
        return _node_blocks(structure, problem.env_data, s).reshape(structure.num_criteria, -1)

    def linear_coefficients(self, structure, problem):
        # mixed features: L is still linear in s, read off its gradient
        zeros = jnp.zeros((structure.num_coords,), problem.dtype)
        return jax.grad(lambda s: total_loss(structure, problem, s))(zeros)

    def feature_norm_sq_bound(self, structure, problem):
        """(k,) ``L_i^2 >= ||psi_i(s)||^2 = sum_{C in i} ||M_{C,i} phi_C(s)||^2`` (also row
        ``i`` of :func:`joint_features`'s). Orthogonal or identity ``M`` keeps the norm: the
        node-wise bound; ``"scaled"``, ``M = diag(m)``: ``e^2 sum_j m_j^2`` with ``e^2`` the
        entry bound of :func:`gsjax.problem.feature_norm_sq_bound`."""
        if self.spec.mixing != "scaled":
            return super().feature_norm_sq_bound(structure, problem)
        m2 = jnp.diagonal(problem.env_data.mix, axis1=-2, axis2=-1) ** 2  # (k, degree, d_C)
        e2 = feature_norm_sq_bound(structure, jnp.ones((1,), bool), m2.dtype)  # one entry's
        return e2 * jnp.sum(m2, axis=(-2, -1))

    def joint_dim(self, structure) -> int:
        return self.spec.joint_dim

    def joint_features(self, structure, problem, s):
        data: FactorData = problem.env_data
        psi = _node_blocks(structure, data, s)  # (k, D, d_C)
        onehot = jax.nn.one_hot(data.node_factors, self.spec.num_factors, dtype=psi.dtype)
        onehot = jnp.where(data.node_factor_mask[..., None], onehot, 0.0)  # (k, D, F)
        return jnp.einsum("kjf,kja->kfa", onehot, psi).reshape(structure.num_criteria, -1)

    def describe(self, problem) -> dict:
        one = seed_rows(problem, 0, bool(np.ndim(problem.loss_star)))  # seed 0's, when per seed
        return {"factor": {**dataclasses.asdict(self.spec),
                           "d_eff": int(np.sum(one.env_data.factor_feat_mask)),
                           "nodewise_dims": int(np.sum(one.feat_mask))}}


def joint_theta(problem: Problem) -> jax.Array:
    """(F d_C,) the stacked true parameters ``theta_joint`` (``(k d,)`` node-wise)."""
    data = problem.env_data
    return (data.w if isinstance(data, FactorData) else problem.theta).reshape(-1)


def joint_mask(problem: Problem) -> jax.Array:
    """(F d_C,) bool, the ``d_eff`` real entries of the joint parameter vector."""
    data = problem.env_data
    mask = data.factor_feat_mask if isinstance(data, FactorData) else problem.feat_mask
    return mask.reshape(-1)


def make_factor_problem(key: jax.Array, structure: Structure, layout: FactorLayout, *,
                        mixing_seed: int = 0, **options) -> Problem:
    """A factor-graph problem instance; jittable in ``key`` (the layout and mixing are host),
    built in one compiled program when ``key`` is concrete (:func:`gsjax.problem.compiled_build`).

    ``options``: the keywords of :func:`gsjax.problem.make_problem`, with its defaults, checks
    and draws (``w*`` in place of ``theta*``, per-factor Fourier features), except that
    "explicit" ``theta_values`` have one row of ``d_C`` entries per FACTOR.
    """
    return compiled_build(_make_factor_problem, key, structure=structure, layout=layout,
                          mixing_seed=mixing_seed, options=options)


def _make_factor_problem(key, *, structure, layout, mixing_seed, options) -> Problem:
    o = problem_keywords(options)
    spec: FactorSpec = structure.env.spec
    k, F = structure.num_criteria, spec.num_factors
    factor_scopes = padded(layout.factor_coords, layout.num_coords)
    ffmask = _feature_mask(structure, factor_scopes.mask)  # (F, d_C)
    w, omega, phase, k_star = draw_arrays(key, structure, factor_scopes.mask, ffmask,
                                          "make_factor_problem", ("F", "factor"), **o)
    node_factors = padded(_node_factor_lists(layout), F)  # (k, max_degree)
    nf, nfm = node_factors.index, node_factors.mask
    data = FactorData(
        factor_scopes=jnp.asarray(factor_scopes.index),
        factor_scope_mask=jnp.asarray(factor_scopes.mask), factor_feat_mask=jnp.asarray(ffmask),
        rff_omega=omega, rff_phase=phase, node_factors=jnp.asarray(nf),
        node_factor_mask=jnp.asarray(nfm),
        mix=jnp.asarray(mixing_matrices(layout, structure, mixing_seed), o["dtype"]), w=w)
    # Node-wise view: node i's theta*_i is its stacked copy of (w*_C)_{C in i}.
    theta = jnp.where(jnp.asarray(nfm)[..., None], w[jnp.asarray(nf)], 0.0).reshape(k, -1)
    feat_mask = (nfm[..., None] & ffmask[nf]).reshape(k, -1)
    problem = assemble_problem(structure, node_scopes(layout), feat_mask, theta, o["s0"],
                               o["dtype"], noise_sigma=o["noise_sigma"], env_data=data)
    return with_minimiser(k_star, structure, problem)
