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
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "GAP_ESTIMATORS",
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
]

GAP_ESTIMATORS = ("plain", "signed", "split")


@dataclasses.dataclass(frozen=True)
class FairnessSpec:
    """Static options of the environment (part of the hashable :class:`~gsjax.problem.Structure`)."""

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


def loss_terms(scores, labels, male, tau) -> tuple[float, float, float]:
    """``(error rate, TPR_m, TPR_f)`` at ``tau`` by direct counting (NumPy float64)."""
    scores, labels, male = np.asarray(scores), np.asarray(labels, bool), np.asarray(male, bool)
    pred = scores >= np.asarray(tau, scores.dtype)
    err = np.mean(pred != labels)
    tpr = lambda g: np.sum(pred & labels & g) / max(np.sum(labels & g), 1)  # noqa: E731
    return float(err), float(tpr(male)), float(tpr(~male))


def loss_table(scores, labels, male) -> tuple[np.ndarray, np.ndarray]:
    """``(u, table)``: the distinct scores ascending (M,) and ``L`` on each piece (M + 1,) float64.

    ``table[j]`` is ``L`` when the rows with score ``>= u[j]`` are predicted positive
    (``j = M``: none), i.e. for every ``tau`` in ``(u[j-1], u[j]]``.
    """
    scores = np.asarray(scores)
    labels, male = np.asarray(labels, bool), np.asarray(male, bool)
    u = np.unique(scores)
    n = scores.shape[0]

    def at_least(x):  # number of x >= u[j] for each j, and 0 for j = M
        c = x.shape[0] - np.searchsorted(np.sort(x), u, side="left")
        return np.append(c, 0).astype(np.float64)

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
    b = spec.batch_size
    idx = jax.random.randint(key, (b,), 0, data.scores.shape[0])
    pred = data.scores[idx] >= tau.astype(data.scores.dtype)
    y, m = data.labels[idx], data.male[idx]
    dtype = data.table.dtype
    err = jnp.mean((pred != y).astype(dtype))
    if spec.gap_estimator == "plain":
        def tpr(g):
            pos = jnp.sum((y & g).astype(dtype))
            return jnp.sum((pred & y & g).astype(dtype)) / jnp.maximum(pos, 1.0)

        gap = jnp.abs(tpr(m) - tpr(~m))
    elif spec.gap_estimator in ("signed", "split"):
        w = jnp.where(m, data.inv_pos_share[0], -data.inv_pos_share[1])
        z = jnp.where(pred & y, w, 0.0).astype(dtype)  # mean(z) is unbiased for TPR_m - TPR_f
        if spec.gap_estimator == "signed":
            gap = jnp.mean(z)
        else:
            h = b // 2
            za, zb = jnp.mean(z[:h]), jnp.mean(z[h:])
            gap = 0.5 * (jnp.sign(za) * zb + jnp.sign(zb) * za)
    else:
        raise ValueError(f"unknown gap estimator {spec.gap_estimator!r}; allowed: {GAP_ESTIMATORS}")
    return err + gap


def observe(key: jax.Array, spec: FairnessSpec, data: FairnessData, s: jax.Array):
    """:class:`~gsjax.problem.Feedback` at the played state ``s`` (1,): the batch loss and ``L``."""
    from gsjax.problem import Feedback

    tau = s[0]
    y = batch_loss(key, spec, data, tau)
    return Feedback(y=y[None].astype(s.dtype), expected_loss=exact_loss(data, tau).astype(s.dtype))


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
    from gsjax import adult
    from gsjax.problem import Problem, _feature_mask

    if structure.num_coords != 1 or structure.num_criteria != 1:
        raise ValueError("the Adult threshold environment has one coordinate and one criterion")
    if gap_estimator not in GAP_ESTIMATORS:
        raise ValueError(f"unknown gap estimator {gap_estimator!r}; allowed: {GAP_ESTIMATORS}")
    structure = dataclasses.replace(
        structure, environment="adult",
        env_spec=FairnessSpec(batch_size=int(batch_size), gap_estimator=gap_estimator),
    )
    table = adult.load(raw_data)
    clf = adult.train_logistic_regression(classifier_seed, classifier_steps, classifier_l2,
                                          raw_data)
    scores, labels, male = adult.held_out_scores(clf, table)
    data = make_data(scores, labels, male, dtype)
    tau, loss_star, _ = exact_minimiser(np.asarray(data.thresholds), np.asarray(data.table))
    fmask = _feature_mask(structure, scopes.mask)
    k, d, m, dd = 1, structure.feature_dim, structure.scope_size, structure.rff_dim
    problem = Problem(
        scopes=jnp.asarray(scopes.index, jnp.int32),
        scope_mask=jnp.asarray(scopes.mask),
        feat_mask=jnp.asarray(fmask),
        theta=jnp.zeros((k, d), dtype),  # unused: the loss comes from the data
        noise_sigma=jnp.zeros((k,), dtype),
        rff_omega=jnp.zeros((k, dd, m), dtype),
        rff_phase=jnp.zeros((k, dd), dtype),
        s0=jnp.broadcast_to(jnp.asarray(s0, dtype), (1,)),
        s_star=jnp.asarray([tau], dtype),
        loss_star=jnp.asarray(loss_star, dtype),
        s_star_residual=jnp.zeros((), dtype),
        env_data=data,
    )
    return structure, problem


def describe(problem) -> dict:
    """Summary numbers of an Adult problem: held-out size, ``tau*`` and its interval, accuracy."""
    d = problem.env_data
    u, table = np.asarray(d.thresholds), np.asarray(d.table)
    tau, loss_star, (lo, hi) = exact_minimiser(u, table)
    err, tpr_m, tpr_f = loss_terms(np.asarray(d.scores), np.asarray(d.labels),
                                   np.asarray(d.male), 0.5)
    e_star, m_star, f_star = loss_terms(np.asarray(d.scores), np.asarray(d.labels),
                                        np.asarray(d.male), tau)
    # Where TPR_f > TPR_m (the "signed" estimator's mean is then below L by 2|D|).
    scores, labels, male = np.asarray(d.scores), np.asarray(d.labels), np.asarray(d.male)
    rate = lambda x: (x.shape[0] - np.searchsorted(np.sort(x), u, side="left")) / max(x.shape[0], 1)  # noqa: E731
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
