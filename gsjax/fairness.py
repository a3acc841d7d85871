r"""Fairness-threshold tuning (Section 7.3): the decision threshold of a classifier as the state.

The state is the threshold :math:`\tau \in [0, 1]` (``n = k = 1``); a held-out row is predicted
positive when its score is :math:`\ge \tau`. The loss of the paper, on ALL held-out rows, is

.. math:: L(\tau) = (1 - \mathrm{Acc}(\tau)) + |\mathrm{TPR}_{m}(\tau) - \mathrm{TPR}_{f}(\tau)|

(``m``: male, ``f``: female; TPR within the group's positives), a step function over the ``M``
distinct sorted scores :math:`u_0 < \dots < u_{M-1}`: for :math:`\tau \in (u_{j-1}, u_j]` the
rows with score :math:`\ge u_j` are predicted positive. :func:`loss_table` evaluates the
``M + 1`` pieces exactly (integer counts, float64), :func:`exact_loss` looks one up and
:func:`exact_minimiser` returns the midpoint of the best piece within ``[0, 1]`` (ties: the
lowest threshold).

Feedback (:func:`observe`): each round ``B`` held-out rows are drawn uniformly WITH replacement
from the round's key, and the learner observes the batch's loss at :math:`\tau`: its error rate
(unbiased for :math:`1 - \mathrm{Acc}`) plus a gap estimate (``gap_estimator``):

* ``"plain"``: the batch's own ``|TPR_m - TPR_f|`` (a group without positives in the batch has
  TPR 0). Biased upwards, :math:`E|X| \ge |EX|`, by up to :math:`\sigma\sqrt{2/\pi}` for batch
  noise :math:`\sigma`, which depends on :math:`\tau`, so the bias moves the minimiser. No
  one-batch estimate is unbiased for :math:`|D|`, :math:`D = \mathrm{TPR}_m - \mathrm{TPR}_f`
  (its mean is a polynomial in the cell probabilities; :math:`|D|` is not smooth at 0).
* ``"signed"``: :math:`\bar z`, with :math:`z_i = \hat y_i y_i (m_i / \pi_m - f_i / \pi_f)` and
  :math:`\pi_g` the held-out share of positives of group ``g`` (a population constant):
  unbiased for :math:`D`, so for :math:`L` wherever :math:`\mathrm{TPR}_m \ge \mathrm{TPR}_f`
  (:func:`describe` reports the share of ``[0, 1]`` where it flips: 0.8 % on Adult).
* ``"split"``: halves ``a`` and ``b``, gap :math:`\tfrac12(\mathrm{sign}(\bar z_a)\bar z_b +
  \mathrm{sign}(\bar z_b)\bar z_a)`, mean :math:`D\,E[\mathrm{sign}\,\bar z_a] \in [0, |D|]`:
  no upward bias, but it fades towards 0 where the noise dominates.

``scripts/adult_bias.py`` measures every estimator against :math:`L(\tau)`.

**The smoothed environment** (:func:`smooth`; ``gsjax tune``'s relaxed mode only): :math:`L`
and every batch loss are step functions of :math:`\tau`, with derivative 0. With a bandwidth
:math:`h` (``[relaxed] loss_bandwidth``) each indicator :math:`1[u_i \ge \tau]` becomes
:math:`p_i = \sigma((u_i - \tau)/h)`; the regret uses :math:`L_h`, interpolated in a table built
once, and the observation is :func:`smoothed_batch_loss` (the same batch rows, soft counts, the
same gap estimator), so gradients also flow through the data. :math:`|L_h - L| \le \sum_i e_i /
N + \sum_{i: y_i = 1} e_i / n_{g(i)}` with :math:`e_i = \sigma(-|u_i - \tau|/h)`, vanishing with
``h`` wherever :math:`\tau` is not a score.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gsjax import adult
from gsjax.problem import Environment, Feedback, _check_choice, _feature_mask, assemble_problem

__all__ = [
    "GAP_ESTIMATORS", "AdultEnv", "FairnessSpec", "FairnessData", "loss_terms", "loss_table",
    "exact_minimiser", "make_data", "exact_loss", "batch_loss", "observe", "make_adult_problem",
    "describe", "smoothed_loss_terms", "smooth", "smoothed_loss", "smoothed_batch_loss",
]

GAP_ESTIMATORS = ("plain", "signed", "split")


@dataclasses.dataclass(frozen=True)
class FairnessSpec:
    """Static options of the environment (held by :class:`AdultEnv`, part of the Structure)."""

    batch_size: int = 100  # B, held-out rows per round
    gap_estimator: str = "plain"  # "plain" | "signed" | "split"


class FairnessData(NamedTuple):
    """Held-out arrays (device side; shared by every seed)."""

    scores: jax.Array  # (N,) classifier scores P(y = 1)
    labels: jax.Array  # (N,) bool, y = 1
    male: jax.Array  # (N,) bool, group m (else f)
    thresholds: jax.Array  # (M,) distinct scores, ascending
    table: jax.Array  # (M + 1,) L on each piece (see module docstring)
    inv_pos_share: jax.Array  # (2,) 1 / pi_m, 1 / pi_f (shares of positives of each group)
    # The smoothed environment (:func:`smooth`); None in the hard one, which never reads them.
    bandwidth: jax.Array | None = None  # () h
    smooth_table: jax.Array | None = None  # (G,) L_h at the grid i / (G - 1), i = 0..G-1


def loss_terms(scores, labels, male, tau) -> tuple[float, float, float]:
    """``(error rate, TPR_m, TPR_f)`` at ``tau`` by direct counting (NumPy float64)."""
    scores, labels, male = np.asarray(scores), np.asarray(labels, bool), np.asarray(male, bool)
    pred = scores >= np.asarray(tau, scores.dtype)
    err = np.mean(pred != labels)
    tpr = lambda g: np.sum(pred & labels & g) / max(np.sum(labels & g), 1)  # noqa: E731
    return float(err), float(tpr(male)), float(tpr(~male))


def _count_at_least(x: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(M,) the number of entries of ``x`` that are ``>= u[j]``, for each ``j``."""
    return x.shape[0] - np.searchsorted(np.sort(x), u, side="left")


def loss_table(scores, labels, male) -> tuple[np.ndarray, np.ndarray]:
    """``(u, table)``: the distinct scores ascending (M,) and ``L`` on each piece (M + 1,) float64:
    ``table[j]`` for every ``tau`` in ``(u[j-1], u[j]]`` (scores ``>= u[j]`` positive)."""
    scores = np.asarray(scores)
    labels, male = np.asarray(labels, bool), np.asarray(male, bool)
    u = np.unique(scores)
    at_least = lambda x: np.append(_count_at_least(x, u), 0).astype(np.float64)  # noqa: E731
    tp_m, tp_f = at_least(scores[labels & male]), at_least(scores[labels & ~male])
    fp = at_least(scores[~labels])
    pos_m, pos_f = np.sum(labels & male), np.sum(labels & ~male)
    fn = (pos_m + pos_f) - (tp_m + tp_f)
    err = (fp + fn) / scores.shape[0]
    gap = np.abs(tp_m / max(pos_m, 1) - tp_f / max(pos_f, 1))
    return u, err + gap


def exact_minimiser(u: np.ndarray, table: np.ndarray) -> tuple[float, float, tuple[float, float]]:
    """``(tau*, L(tau*), (lo, hi))``: the best piece ``j`` meeting ``[0, 1]`` (ties: the lowest)
    and its midpoint, chosen so that ``searchsorted(u, tau*) == j`` in ``u``'s dtype."""
    m = u.shape[0]
    lo = np.concatenate([[-np.inf], u.astype(np.float64)])
    hi = np.concatenate([u.astype(np.float64), [np.inf]])
    reachable = (hi >= 0.0) & (lo < 1.0)
    if m and u[-1] >= 1.0:  # no threshold in [0, 1] predicts nobody positive
        reachable[m] = False
    j = int(np.argmin(np.where(reachable, table, np.inf)))
    a, b = max(lo[j], 0.0), min(hi[j], 1.0)
    tau = np.asarray(0.5 * (a + b), u.dtype)
    if j > 0 and tau <= u[j - 1]:  # an interval one float wide: its upper end is inside
        tau = np.asarray(b, u.dtype)
    assert int(np.searchsorted(u, tau, side="left")) == j
    return float(tau), float(table[j]), (float(a), float(b))


def make_data(scores, labels, male, dtype=jnp.float32) -> FairnessData:
    """Device arrays of a held-out set, with its exact loss table."""
    scores = np.asarray(scores, dtype)
    labels, male = np.asarray(labels, bool), np.asarray(male, bool)
    u, table = loss_table(scores, labels, male)
    n = scores.shape[0]
    share = np.array([np.sum(labels & male), np.sum(labels & ~male)], np.float64) / n
    return FairnessData(
        scores=jnp.asarray(scores), labels=jnp.asarray(labels), male=jnp.asarray(male),
        thresholds=jnp.asarray(u), table=jnp.asarray(table, dtype),
        inv_pos_share=jnp.asarray(1.0 / np.maximum(share, 1.0 / n), dtype))


def exact_loss(data: FairnessData, tau: jax.Array) -> jax.Array:
    """() exact ``L(tau)`` on all held-out rows (a table look-up)."""
    j = jnp.searchsorted(data.thresholds, tau.astype(data.thresholds.dtype), side="left")
    return data.table[j]


def batch_loss(key: jax.Array, spec: FairnessSpec, data: FairnessData, tau: jax.Array
               ) -> jax.Array:
    """() the observed loss of one batch of ``spec.batch_size`` rows drawn with replacement."""
    idx = _batch_rows(key, spec, data)
    pred = (data.scores[idx] >= tau.astype(data.scores.dtype)).astype(data.table.dtype)
    return _batch_value(spec, data, idx, pred)


def _batch_rows(key: jax.Array, spec: FairnessSpec, data: FairnessData) -> jax.Array:
    """(B,) held-out rows of one round's batch, drawn with replacement from ``key``."""
    return jax.random.randint(key, (spec.batch_size,), 0, data.scores.shape[0])


def _batch_value(spec: FairnessSpec, data: FairnessData, idx: jax.Array, pred: jax.Array
                 ) -> jax.Array:
    """() error rate + the spec's gap estimate on the rows ``idx`` from predictions ``pred`` (B,)
    in ``[0, 1]`` (0/1, so every sum an exact count, in the hard environment)."""
    dtype = data.table.dtype
    y, m = data.labels[idx].astype(dtype), data.male[idx]
    err = jnp.mean(pred * (1.0 - y) + (1.0 - pred) * y)
    if spec.gap_estimator == "plain":
        tpr = lambda g: jnp.sum(pred * y * g) / jnp.maximum(jnp.sum(y * g), 1.0)  # noqa: E731
        gap = jnp.abs(tpr(m.astype(dtype)) - tpr((~m).astype(dtype)))
    elif spec.gap_estimator in ("signed", "split"):
        w = jnp.where(m, data.inv_pos_share[0], -data.inv_pos_share[1]).astype(dtype)
        z = pred * y * w  # mean(z) is unbiased for TPR_m - TPR_f
        if spec.gap_estimator == "signed":
            gap = jnp.mean(z)
        else:
            h = spec.batch_size // 2
            za, zb = jnp.mean(z[:h]), jnp.mean(z[h:])
            gap = 0.5 * (jnp.sign(za) * zb + jnp.sign(zb) * za)
    else:
        raise ValueError(f"unknown gap estimator {spec.gap_estimator!r}; "
                         f"allowed: {GAP_ESTIMATORS}")
    return err + gap


def observe(key: jax.Array, spec: FairnessSpec, data: FairnessData, s: jax.Array):
    """:class:`~gsjax.problem.Feedback` at the played state ``s`` (1,): the batch loss and ``L``
    (in the smoothed environment, :func:`smooth`: the smoothed batch loss and ``L_h``)."""
    tau = s[0]
    if data.bandwidth is None:  # static: the pytree's structure, not a traced value
        y, mean = batch_loss(key, spec, data, tau), exact_loss(data, tau)
    else:
        y, mean = smoothed_batch_loss(key, spec, data, tau), smoothed_loss(data, tau)
    return Feedback(y=y[None].astype(s.dtype), expected_loss=mean.astype(s.dtype))


@dataclasses.dataclass(frozen=True)
class AdultEnv(Environment):
    """Section 7.3: the loss of a threshold ``tau = s[0]`` on held-out UCI Adult rows (a
    :class:`FairnessData` in ``Problem.env_data``); the learner's features are the structure's."""

    spec: FairnessSpec
    name: ClassVar[str] = "adult"
    coordinate_model: ClassVar[bool] = False

    def observe(self, draws, structure, problem, s):
        return observe(draws.key, self.spec, problem.env_data, s)

    def describe(self, problem) -> dict:
        return {"adult": {**describe(problem), **dataclasses.asdict(self.spec)}}

    def relaxed(self, problem, relaxed_config):
        # the loss is piecewise constant in tau: relaxed runs play the smoothed environment
        return smooth(problem, relaxed_config.loss_bandwidth)


def make_adult_problem(structure, scopes, *, batch_size: int, gap_estimator: str,
                       classifier_seed: int = 0, classifier_steps: int = 200,
                       classifier_l2: float = 1e-4, raw_data=None, s0=0.5, dtype=jnp.float32):
    """``(structure, problem)`` of the UCI Adult threshold-tuning task (Section 7.3).

    ``structure``: :func:`gsjax.problem.make_structure`'s, one scope of one coordinate (any
    feature kind); returned with an :class:`AdultEnv`. The classifier is trained here
    (:mod:`gsjax.adult`, cached in memory) and scores the held-out (test) rows.
    """
    if structure.num_coords != 1 or structure.num_criteria != 1:
        raise ValueError("make_adult_problem: structure: the Adult threshold environment has one "
                         "coordinate and one criterion")
    _check_choice(gap_estimator, GAP_ESTIMATORS, "make_adult_problem: gap_estimator",
                  "gap estimator")
    structure = dataclasses.replace(structure, env=AdultEnv(
        FairnessSpec(batch_size=int(batch_size), gap_estimator=gap_estimator)))
    table = adult.load(raw_data)
    clf = adult.train_logistic_regression(classifier_seed, classifier_steps, classifier_l2,
                                          raw_data)
    scores, labels, male = adult.held_out_scores(clf, table)
    data = make_data(scores, labels, male, dtype)
    tau, loss_star, _ = exact_minimiser(np.asarray(data.thresholds), np.asarray(data.table))
    theta = jnp.zeros((1, structure.feature_dim), dtype)  # never read (reports write it)
    rff = {}
    if structure.features == "rff":  # the learner's features read frequencies: zero
        dd, m = structure.rff_dim, structure.scope_size
        rff = dict(rff_omega=jnp.zeros((1, dd, m), dtype), rff_phase=jnp.zeros((1, dd), dtype))
    problem = assemble_problem(structure, scopes, _feature_mask(structure, scopes.mask), theta,
                               s0, dtype, env_data=data, **rff)
    return structure, problem._replace(s_star=jnp.asarray([tau], dtype),
                                       loss_star=jnp.asarray(loss_star, dtype))


def describe(problem) -> dict:
    """Summary numbers of an Adult problem: held-out size, ``tau*`` and its interval, accuracy."""
    d = problem.env_data
    u, table = np.asarray(d.thresholds), np.asarray(d.table)
    tau, loss_star, (lo, hi) = exact_minimiser(u, table)
    scores, labels, male = np.asarray(d.scores), np.asarray(d.labels), np.asarray(d.male)
    err, tpr_m, tpr_f = loss_terms(scores, labels, male, 0.5)
    e_star, m_star, f_star = loss_terms(scores, labels, male, tau)
    # Where TPR_f > TPR_m (the "signed" estimator's mean is then below L by 2|D|).
    rate = lambda x: _count_at_least(x, u) / max(x.shape[0], 1)  # noqa: E731
    signed = rate(scores[labels & male]) - rate(scores[labels & ~male])  # D on pieces 0..M-1
    width = np.diff(np.concatenate([[0.0], np.clip(u.astype(np.float64), 0.0, 1.0)]))
    return {
        "held_out_rows": int(d.scores.shape[0]),
        "classifier_test_accuracy": 1.0 - err,
        "loss_at_0.5": err + abs(tpr_m - tpr_f),
        "tau_star": tau,
        "tau_star_interval": [lo, hi],
        "loss_star": loss_star,
        "accuracy_at_tau_star": 1.0 - e_star,
        "tpr_gap_at_tau_star": abs(m_star - f_star),
        "share_of_thresholds_with_tpr_f_above_tpr_m": float(np.sum(width[signed < 0])),
        "largest_tpr_f_minus_tpr_m": float(max(0.0, -signed.min(initial=0.0))),
    }


# The smoothed environment (gsjax tune's relaxed mode; see the module docstring)

DEFAULT_GRID = 4097  # points of the L_h table on [0, 1] (spacing 2.4e-4; see smooth())


def smoothed_loss_terms(scores, labels, male, tau, bandwidth: float, chunk: int = 256
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(error rate, TPR_m, TPR_f)`` of the soft predictions ``sigma((score - tau) / h)`` on all
    rows at every ``tau`` (any shape): float64 direct sums, ``chunk`` thresholds at a time."""
    scores = np.asarray(scores, np.float64)
    labels, male = np.asarray(labels, bool), np.asarray(male, bool)
    tau = np.asarray(tau, np.float64)
    flat = tau.reshape(-1)
    yf = labels.astype(np.float64)
    pos_m, pos_f = labels & male, labels & ~male
    n_m, n_f = max(int(pos_m.sum()), 1), max(int(pos_f.sum()), 1)
    out = np.empty((3, flat.shape[0]))  # error rate, TPR_m, TPR_f
    for a in range(0, flat.shape[0], chunk):
        x = (scores[None, :] - flat[a:a + chunk, None]) / bandwidth
        p = 0.5 * (1.0 + np.tanh(0.5 * x))  # sigma(x), without overflow
        out[:, a:a + chunk] = (np.mean(p * (1.0 - yf) + (1.0 - p) * yf, axis=1),
                               p[:, pos_m].sum(axis=1) / n_m, p[:, pos_f].sum(axis=1) / n_f)
    return tuple(out.reshape((3, *tau.shape)))


def smooth(problem, bandwidth: float, grid_size: int = DEFAULT_GRID):
    """The smoothed Adult environment of bandwidth ``h``: a new ``problem`` whose data carry
    ``h`` and the table of ``L_h`` on ``grid_size`` evenly spaced thresholds of ``[0, 1]``, so
    that :func:`observe` returns :func:`smoothed_batch_loss` and :func:`smoothed_loss`.
    ``loss_star`` stays the exact ``L(tau*)`` (it shifts the regret, not its gradient). The
    table (float64 direct sums, once) interpolates within 1.3e-6 of the sum at ``h = 0.01``;
    summing every round would make a relaxed run ~4x slower.
    """
    h = float(bandwidth)
    if not (h > 0 and math.isfinite(h)):
        raise ValueError(f"bandwidth must be a finite number > 0, got {bandwidth}")
    if grid_size < 2:
        raise ValueError(f"grid_size must be >= 2, got {grid_size}")
    d = problem.env_data
    grid = np.linspace(0.0, 1.0, int(grid_size))
    err, tm, tf = smoothed_loss_terms(d.scores, d.labels, d.male, grid, h)
    dtype = d.table.dtype
    data = d._replace(bandwidth=jnp.asarray(h, dtype),
                      smooth_table=jnp.asarray(err + np.abs(tm - tf), dtype))
    return problem._replace(env_data=data)


def smoothed_loss(data: FairnessData, tau: jax.Array) -> jax.Array:
    """() ``L_h(tau)``: linear interpolation in the table of :func:`smooth` (``tau`` in [0, 1])."""
    table = data.smooth_table
    g = table.shape[0] - 1
    x = tau.astype(table.dtype) * g
    i = jnp.clip(jnp.floor(x), 0, g - 1)  # the index only: no clip on tau, whose gradient stays
    w = x - i
    i = i.astype(jnp.int32)
    return (1.0 - w) * table[i] + w * table[i + 1]


def smoothed_batch_loss(key: jax.Array, spec: FairnessSpec, data: FairnessData, tau: jax.Array
                        ) -> jax.Array:
    """() :func:`batch_loss` with soft predictions: the same rows (same key, same draw), each
    ``1[score >= tau]`` replaced by ``sigma((score - tau) / h)``, the same gap estimator."""
    idx = _batch_rows(key, spec, data)
    dtype = data.table.dtype
    p = jax.nn.sigmoid((data.scores[idx].astype(dtype) - tau.astype(dtype)) / data.bandwidth)
    return _batch_value(spec, data, idx, p)
