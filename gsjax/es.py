r"""The smoothed estimator of a hard (non-differentiable) objective's gradient.

For an objective ``f`` of ``d`` knobs (for ``gsjax tune --estimator es``: the HARD algorithm's
mean regret over fixed tuning seeds, piecewise constant in the knobs), the Gaussian smoothing
:math:`F_\sigma(x) = \mathbb{E}_{\varepsilon \sim N(0, I_d)} f(x + \sigma\varepsilon)` is
differentiable. The estimate (OpenES / PGPE's, as in evosax) uses ``P`` antithetic pairs
:math:`\pm\varepsilon_p` on common random numbers (the same seeds for every point):

.. math:: \hat g = \frac{1}{2\sigma P}\sum_{p=1}^P \big(f(x+\sigma\varepsilon_p) - f(x-\sigma\varepsilon_p)\big)\,\varepsilon_p .

It is unbiased for :math:`\nabla F_\sigma(x)`, and the pairs remove the even part of ``f``
around ``x``. No fitness shaping (centred ranks) is applied: it biases the estimate.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

__all__ = ["ESEstimate", "perturbations", "antithetic_gradient"]


class ESEstimate(NamedTuple):
    grad: np.ndarray  # (d,) the estimate of grad F_sigma(x)
    smoothed: float  # mean of the 2P perturbed values: an unbiased estimate of F_sigma(x)
    values: np.ndarray  # (2P,) f at x + sigma eps_1..P, then at x - sigma eps_1..P
    eps: np.ndarray  # (P, d) the directions


def perturbations(rng: np.random.Generator, pairs: int, dim: int) -> np.ndarray:
    """``(pairs, dim)`` standard normal directions."""
    if pairs < 1:
        raise ValueError(f"pairs: must be >= 1, got {pairs}")
    return rng.standard_normal((pairs, dim))


def antithetic_gradient(values: Callable[[np.ndarray], np.ndarray], x, sigma: float,
                        eps: np.ndarray) -> ESEstimate:
    """The antithetic estimate at ``x`` (d,) along ``eps`` (P, d); ``values`` maps a ``(2P, d)``
    batch of points to their ``(2P,)`` objective values (on common random numbers)."""
    x, eps = np.asarray(x, np.float64), np.asarray(eps, np.float64)
    if not sigma > 0:
        raise ValueError(f"sigma: must be > 0, got {sigma}")
    P = eps.shape[0]
    pts = np.concatenate([x + sigma * eps, x - sigma * eps])
    v = np.asarray(values(pts), np.float64).reshape(2 * P)
    g = ((v[:P] - v[P:])[:, None] * eps).sum(0) / (2.0 * sigma * P)
    return ESEstimate(g, float(v.mean()), v, eps)
