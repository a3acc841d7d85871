r"""The smoothed estimator of a hard (non-differentiable) objective's gradient.

For an objective ``f`` of ``d`` knobs (the HARD algorithm's mean regret over the tuning seeds, a
piecewise-constant function of the knobs for fixed seeds), the Gaussian smoothing

.. math:: F_\sigma(x) = \mathbb{E}_{\varepsilon \sim N(0, I_d)} f(x + \sigma\varepsilon)

is differentiable, with :math:`\nabla F_\sigma(x) = \mathbb{E}[\varepsilon f(x+\sigma\varepsilon)]/\sigma`.
The estimate (the evolution-strategies gradient of OpenES / PGPE, as in evosax) uses ``P``
antithetic pairs :math:`\pm\varepsilon_p` and common random numbers (both members of a pair, and
every pair, run on the SAME seeds, so the seed noise cancels in the differences):

.. math:: \hat g = \frac{1}{2\sigma P}\sum_{p=1}^P \big(f(x+\sigma\varepsilon_p) - f(x-\sigma\varepsilon_p)\big)\,\varepsilon_p .

It is unbiased for :math:`\nabla F_\sigma(x)` (for any ``f`` with finite second moments under
the smoothing); the antithetic pair removes the even part of ``f`` around ``x`` (a quadratic
``f`` gives :math:`\hat g = \frac1P\sum_p \varepsilon_p\varepsilon_p^\top \nabla f(x)` exactly).
No fitness shaping (OpenES's centred ranks) is applied: shaping biases the estimate.

Everything here is NumPy on the caller's values: ``values`` evaluates a batch of points (for
``gsjax tune --estimator es`` one grid sweep of the hard runner, one compiled program).
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
    x = np.asarray(x, np.float64)
    eps = np.asarray(eps, np.float64)
    if not sigma > 0:
        raise ValueError(f"sigma: must be > 0, got {sigma}")
    P = eps.shape[0]
    pts = np.concatenate([x + sigma * eps, x - sigma * eps])
    v = np.asarray(values(pts), np.float64).reshape(2 * P)
    diff = v[:P] - v[P:]
    g = (diff[:, None] * eps).sum(0) / (2.0 * sigma * P)
    return ESEstimate(g, float(v.mean()), v, eps)
