"""Full-information online convex optimisation with movement cost (paper Section 6).

* :mod:`gsjax.oco.problem` -- losses (squared, L1), target processes (drifting, switching,
  adversarial), the exact best fixed point in hindsight;
* :mod:`gsjax.oco.algorithms` -- projected OGD, Randomized Lazy OGD, component-wise Lazy OGD
  (``init/act/update``, :data:`~gsjax.oco.algorithms.REGISTRY`) and the step-size rule;
* :mod:`gsjax.oco.runner` -- the OCO round (``vmap`` over budgets inside a seed) and the
  hindsight comparator on :mod:`gsjax.runner`'s loop (chunks, checkpoints, sharding);
* :mod:`gsjax.oco.config`, :mod:`gsjax.oco.experiment` -- ``kind = "oco"`` configs, runs,
  summaries, exponent fits, figures (``gsjax run configs/section6_*.toml``).
"""

from gsjax.oco.algorithms import (REGISTRY, STEP_RULES, OCOAlgorithm, OCOInfo, OCOParams,
                                  OCOState, make, register, step_size)
from gsjax.oco.problem import OCOProblem, OCOSpec, make_problem

__all__ = [
    "REGISTRY", "STEP_RULES", "OCOAlgorithm", "OCOInfo", "OCOParams", "OCOState", "make",
    "register", "step_size", "OCOProblem", "OCOSpec", "make_problem",
]
