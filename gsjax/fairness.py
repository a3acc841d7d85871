r"""Fairness-threshold tuning (Section 7.3): the decision threshold of a classifier as the state.

The state is the threshold :math:`\tau \in [0, 1]` (``n = k = 1``); a held-out row is predicted
positive when its score is :math:`\ge \tau`. The loss of the paper is

.. math:: L(\tau) = (1 - \mathrm{Acc}(\tau)) + |\mathrm{TPR}_{m}(\tau) - \mathrm{TPR}_{f}(\tau)|

on ALL held-out rows (``m``: male, ``f``: female; TPR = true-positive rate within the group's
positives). It changes only where :math:`\tau` crosses a score, so it is a step function over
the ``M`` distinct sorted scores :math:`u_0 < \dots < u_{M-1}`: for
:math:`\tau \in (u_{j-1}, u_j]` the rows predicted positive are those with score
:math:`\ge u_j` (all rows for :math:`j = 0`, none for :math:`j = M`). :func:`loss_table`
evaluates the ``M + 1`` pieces exactly (integer counts, float64), :func:`exact_loss` looks one
up (``searchsorted``) and :func:`exact_minimiser` returns the best piece: :math:`\tau^*` is the
midpoint of its interval within ``[0, 1]`` (ties: the lowest threshold), with no grid.

Feedback (:func:`observe`): each round ``B`` held-out rows are drawn uniformly WITH
replacement from the round's key (i.i.d. draws from the held-out population; a fresh batch of
users), and the learner observes one number, the batch's loss at the played :math:`\tau`.

* The batch error rate is an unbiased estimate of :math:`1 - \mathrm{Acc}(\tau)`.
* ``gap_estimator = "plain"``: the batch's own ``|TPR_m - TPR_f|``, a group's TPR taken as 0
  when the batch holds none of its positives (``recall_score(..., zero_division=0)``). It is
  biased upwards, :math:`E|X| \ge |EX|`, by about :math:`\sigma\sqrt{2/\pi}` where the gap is
  small against its batch noise :math:`\sigma`, and :math:`\sigma` depends on :math:`\tau`
  (it vanishes where both TPRs approach 0 or 1), so the bias moves the minimiser.
* No estimate from one batch can be unbiased for :math:`|D|`, :math:`D = \mathrm{TPR}_m -
  \mathrm{TPR}_f`, whatever the batch size: its mean is a polynomial in the population's cell
  probabilities (batch rows are i.i.d.), and :math:`|D|` is not smooth at :math:`D = 0`. A remedy needs
  information beyond the batch. Both below start from the per-row contributions
  :math:`z_i = \hat y_i y_i (m_i / \pi_m - f_i / \pi_f)`, with :math:`\pi_g` the held-out share
  of rows that are positives of group ``g`` (a population constant, independent of
  :math:`\tau`, that a monitoring system knows from its history): :math:`\bar z` is an
  unbiased estimate of :math:`D`, defined for every batch (no empty-group convention needed).
* ``gap_estimator = "signed"`` (the remedy): report :math:`\bar z`, the signed gap with the
  privileged group (``male``) as the reference, as fairness toolkits report the equal-opportunity
  difference. The observation is then unbiased for :math:`L(\tau)` wherever
  :math:`\mathrm{TPR}_m(\tau) \ge \mathrm{TPR}_f(\tau)` (and below it by :math:`2|D|`
  elsewhere); :func:`describe` reports, from the exact tables, the share of ``[0, 1]`` where
  the order flips (0.8 % on Adult, where :math:`|D| \le 0.005`).
* ``gap_estimator = "split"``: no orientation assumed. The batch is split in halves ``a`` and
  ``b`` and the gap is :math:`\tfrac12(\mathrm{sign}(\bar z_a)\bar z_b + \mathrm{sign}(\bar
  z_b)\bar z_a)`: each half's sign applied to the other, independent half, so its mean is
  :math:`D\,E[\mathrm{sign}\,\bar z_a] \in [0, |D|]`: no upward bias, exact at
  :math:`D = 0` and when :math:`|D|` is large against the noise, but it shrinks towards 0 where
  the noise dominates, so with small batches the gap term fades out of the objective.

``scripts/adult_bias.py`` measures every estimator against :math:`L(\tau)`.

**The smoothed environment** (:func:`smooth`; used by ``gsjax tune``'s relaxed mode only,
``gsjax run`` never builds it). :math:`L` and every batch loss are step functions of
:math:`\tau`: their derivative is 0, so no gradient reaches the hyperparameters. With a
bandwidth :math:`h` each indicator :math:`1[u_i \ge \tau]` becomes
:math:`p_i = \sigma((u_i - \tau)/h)`, a soft prediction (the probability that row ``i`` is
predicted positive when its score carries logistic noise of scale ``h``):

.. math:: L_h(\tau) = \tfrac1N \textstyle\sum_i \big(p_i (1 - y_i) + (1 - p_i) y_i\big)
          + |\mathrm{TPR}_{m,h} - \mathrm{TPR}_{f,h}|, \qquad
          \mathrm{TPR}_{g,h} = \sum_{i \in g, y_i = 1} p_i / |\{i \in g : y_i = 1\}|.

The regret term uses :math:`L_h` on all held-out rows, interpolated in a table built once
(:func:`smooth`). The observation is :func:`smoothed_batch_loss`: the SAME batch rows as
:func:`batch_loss` (same key, same draw), every indicator replaced by :math:`p_i`, with the
spec's gap estimator (``plain``: the batch's ``|TPR_m - TPR_f|`` from soft counts; ``signed``
and ``split``: :math:`z_i = p_i y_i (m_i/\pi_m - f_i/\pi_f)`), so gradients flow through the
data path as well. :math:`L_h \to L` as :math:`h \to 0` wherever :math:`\tau` is not a
score: with :math:`e_i = |p_i - 1[u_i \ge \tau]| = \sigma(-|u_i - \tau|/h)`,
:math:`|L_h - L| \le \sum_i e_i / N + \sum_{i: y_i = 1} e_i / n_{g(i)}` (``n_g``: positives
of group ``g``), which vanishes with ``h``; only rows within a few ``h`` of :math:`\tau` count.

The bandwidth (``[relaxed] loss_bandwidth``, default 0.01: the smallest that gave usable
gradients) and the table's grid were chosen by measurements on Adult (README, "Section 7.3" of
the tuning results).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gsjax import adult
from gsjax.problem import Environment, Feedback, _feature_mask, assemble_problem

__all__ = [
    "GAP_ESTIMATORS",
    "AdultEnv",
    "FairnessSpec",
    "FairnessData",
    "loss_terms",
    "loss_table",
    "exact_minimiser",
    "make_data",
    "exact_loss",
    "batch_loss",
    "observe",
    "make_adult_problem",
    "describe",
    "smoothed_loss_terms",
    "smooth",
    "smoothed_loss",
    "smoothed_batch_loss",
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
    # The smoothed environment of gsjax tune (:func:`smooth`); None in the hard environment,
    # whose code path never reads them.
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
    """``(u, table)``: the distinct scores ascending (M,) and ``L`` on each piece (M + 1,) float64.

    ``table[j]`` is ``L`` when the rows with score ``>= u[j]`` are predicted positive
    (``j = M``: none), i.e. for every ``tau`` in ``(u[j-1], u[j]]``.
    """
    scores = np.asarray(scores)
    labels, male = np.asarray(labels, bool), np.asarray(male, bool)
    u = np.unique(scores)
    n = scores.shape[0]
    at_least = lambda x: np.append(_count_at_least(x, u), 0).astype(np.float64)  # noqa: E731
    tp_m, tp_f = at_least(scores[labels & male]), at_least(scores[labels & ~male])
    fp = at_least(scores[~labels])
    pos_m, pos_f = np.sum(labels & male), np.sum(labels & ~male)
    fn = (pos_m + pos_f) - (tp_m + tp_f)
    err = (fp + fn) / n
    gap = np.abs(tp_m / max(pos_m, 1) - tp_f / max(pos_f, 1))
    return u, err + gap


def exact_minimiser(u: np.ndarray, table: np.ndarray) -> tuple[float, float, tuple[float, float]]:
    """``(tau*, L(tau*), (lo, hi))``: the best piece within ``[0, 1]`` and its midpoint.

    Piece ``j`` holds the thresholds ``(u[j-1], u[j]]`` (``[0, u[0]]`` for ``j = 0``,
    ``(u[M-1], 1]`` for ``j = M``). Pieces that do not meet ``[0, 1]`` are skipped; among equal
    losses the lowest threshold wins. ``tau*`` is chosen inside the interval so that
    ``searchsorted(u, tau*) == j`` holds in ``u``'s dtype.
    """
    m = u.shape[0]
    lo = np.concatenate([[-np.inf], u.astype(np.float64)])
    hi = np.concatenate([u.astype(np.float64), [np.inf]])
    reachable = (hi >= 0.0) & (lo < 1.0)
    if m and u[-1] >= 1.0:  # no threshold in [0, 1] predicts nobody positive
        reachable[m] = False
    vals = np.where(reachable, table, np.inf)
    j = int(np.argmin(vals))
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
        scores=jnp.asarray(scores),
        labels=jnp.asarray(labels),
        male=jnp.asarray(male),
        thresholds=jnp.asarray(u),
        table=jnp.asarray(table, dtype),
        inv_pos_share=jnp.asarray(1.0 / np.maximum(share, 1.0 / n), dtype),
    )


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
    """() error rate + the spec's gap estimate on the rows ``idx``, from predictions ``pred``
    (B,) in ``[0, 1]``: 0/1 in the hard environment (every sum below is then an exact count),
    soft in the smoothed one."""
    dtype = data.table.dtype
    y, m = data.labels[idx].astype(dtype), data.male[idx]
    err = jnp.mean(pred * (1.0 - y) + (1.0 - pred) * y)
    if spec.gap_estimator == "plain":
        def tpr(g):
            g = g.astype(dtype)
            return jnp.sum(pred * y * g) / jnp.maximum(jnp.sum(y * g), 1.0)

        gap = jnp.abs(tpr(m) - tpr(~m))
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
        raise ValueError(f"unknown gap estimator {spec.gap_estimator!r}; allowed: {GAP_ESTIMATORS}")
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
    """Section 7.3: the loss of a decision threshold ``tau = s[0]`` measured on held-out UCI
    Adult rows (a :class:`FairnessData` in ``Problem.env_data``), not a linear model; the
    learner's features are the structure's own (``[1, tau, tau^2]`` by default)."""

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
                       classifier_l2: float = 1e-4, raw_data=None, s0=0.5,
                       dtype=jnp.float32):
    """``(structure, problem)`` of the UCI Adult threshold-tuning task (Section 7.3).

    ``structure`` comes from :func:`gsjax.problem.make_structure` on one scope of one
    coordinate (any feature kind); it is returned with ``environment = "adult"`` and the
    static :class:`FairnessSpec`. The classifier is trained here (:mod:`gsjax.adult`; cached in
    memory) and scores the held-out (test) rows.
    """
    if structure.num_coords != 1 or structure.num_criteria != 1:
        raise ValueError("make_adult_problem: structure: the Adult threshold environment has one "
                         "coordinate and one criterion")
    if gap_estimator not in GAP_ESTIMATORS:
        raise ValueError(f"make_adult_problem: gap_estimator: unknown gap estimator "
                         f"{gap_estimator!r}; allowed: {GAP_ESTIMATORS}")
    structure = dataclasses.replace(structure, env=AdultEnv(
        FairnessSpec(batch_size=int(batch_size), gap_estimator=gap_estimator)))
    table = adult.load(raw_data)
    clf = adult.train_logistic_regression(classifier_seed, classifier_steps, classifier_l2,
                                          raw_data)
    scores, labels, male = adult.held_out_scores(clf, table)
    data = make_data(scores, labels, male, dtype)
    tau, loss_star, _ = exact_minimiser(np.asarray(data.thresholds), np.asarray(data.table))
    # theta* is never read here (the loss comes from the data); zero, as reports write it
    theta = jnp.zeros((1, structure.feature_dim), dtype)
    rff = {}
    if structure.features == "rff":  # the learner's features read frequencies: zero, as before
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
    flipped = signed < 0
    return {
        "held_out_rows": int(d.scores.shape[0]),
        "classifier_test_accuracy": 1.0 - err,
        "loss_at_0.5": err + abs(tpr_m - tpr_f),
        "tau_star": tau,
        "tau_star_interval": [lo, hi],
        "loss_star": loss_star,
        "accuracy_at_tau_star": 1.0 - e_star,
        "tpr_gap_at_tau_star": abs(m_star - f_star),
        "share_of_thresholds_with_tpr_f_above_tpr_m": float(np.sum(width[flipped])),
        "largest_tpr_f_minus_tpr_m": float(max(0.0, -signed.min(initial=0.0))),
    }


# ---------------------------------------------------------------------------------------------
# The smoothed environment (gsjax tune's relaxed mode; see the module docstring)
# ---------------------------------------------------------------------------------------------

DEFAULT_GRID = 4097  # points of the L_h table on [0, 1] (spacing 2.4e-4; see smooth())


def smoothed_loss_terms(scores, labels, male, tau, bandwidth: float, chunk: int = 256
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(error rate, TPR_m, TPR_f)`` of the soft predictions ``sigma((score - tau) / h)`` on all
    rows, at every ``tau`` (any shape; NumPy float64 direct sums, ``chunk`` thresholds at a
    time)."""
    scores = np.asarray(scores, np.float64)
    labels, male = np.asarray(labels, bool), np.asarray(male, bool)
    tau = np.asarray(tau, np.float64)
    flat = tau.reshape(-1)
    yf = labels.astype(np.float64)
    pos_m, pos_f = labels & male, labels & ~male
    n_m, n_f = max(int(pos_m.sum()), 1), max(int(pos_f.sum()), 1)
    err, tm, tf = (np.empty(flat.shape[0]) for _ in range(3))
    for a in range(0, flat.shape[0], chunk):
        x = (scores[None, :] - flat[a:a + chunk, None]) / bandwidth
        p = 0.5 * (1.0 + np.tanh(0.5 * x))  # sigma(x), without overflow
        err[a:a + chunk] = np.mean(p * (1.0 - yf) + (1.0 - p) * yf, axis=1)
        tm[a:a + chunk] = p[:, pos_m].sum(axis=1) / n_m
        tf[a:a + chunk] = p[:, pos_f].sum(axis=1) / n_f
    return err.reshape(tau.shape), tm.reshape(tau.shape), tf.reshape(tau.shape)


def smooth(problem, bandwidth: float, grid_size: int = DEFAULT_GRID):
    """The smoothed Adult environment of bandwidth ``h``: ``problem`` with its data carrying
    ``h`` and the table of ``L_h`` on ``grid_size`` evenly spaced thresholds of ``[0, 1]``.

    :func:`observe` then returns :func:`smoothed_batch_loss` and :func:`smoothed_loss`;
    ``loss_star`` stays the exact ``L(tau*)`` (a constant: it shifts the regret, not its
    gradient). The hard environment is untouched (a new ``Problem``; the data arrays are shared).

    The table is computed once (float64 direct sums; about a second): on 4097 points, linear
    interpolation is within 1.3e-6 of the direct sum at ``h = 0.01``, far below the smoothing
    error, and a direct sum in every round would make a relaxed run ~4x slower (README).
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
