"""The README's "relaxed -> hard" table: max over seeds of |relaxed - hard| total regret.

Every registered algorithm, float64, 4 seeds, T = 60, the same keys for both runs; tau = tau_s.
Problems: 3 blocks x 2 (the node-wise algorithms), a chain of 3 nodes (adaptive_lazy, warm-up 8),
a clique factor graph of 3 nodes on 3 coordinates (the joint ones).

    python scripts/relaxed_limit.py
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gsjax import experiment, relaxed, runner
from gsjax.config import parse_config

jax.config.update("jax_enable_x64", True)
T, S, TAUS = 60, 4, (0.1, 1e-3, 1e-5, 1e-7)
BASE = {"seeds": S, "horizon": T, "dtype": "float64", "agent": {"lambda_reg": 0.5, "beta": 0.5}}
NOISE = {"sigma": 0.5}
THETA = {"distribution": "normal", "per_seed": True}
CONFIGS = [
    {"name": "blocks", "problem": {"structure": "blocks", "num_blocks": 3, "block_dim": 2,
                                   "noise": NOISE, "theta": THETA},
     "algorithms": {"lazy": {}, "async_lazy": {},
                    "lazy_own": {"algorithm": "lazy", "reference": "own"},
                    "linucb": {}}},
    {"name": "chain", "problem": {"structure": "graph", "graph": "chain", "num_nodes": 3,
                                  "noise": NOISE, "theta": THETA},
     "algorithms": {"adaptive_lazy": {"algorithm": "adaptive_lazy", "warmup": 8,
                                      "signal_gamma": 0.3}}},
    {"name": "factor", "problem": {"environment": "factor", "s0": 0.5, "noise": NOISE,
                                   "theta": THETA,
                                   "factor": {"num_coords": 3, "num_nodes": 3,
                                              "layout": "clique", "mixing": "orthogonal"}},
     "algorithms": {"joint_lazy": {}, "joint_linucb": {}}},
]


def main() -> None:
    print("| τ = τ_s | " + " | ".join(f"{t:g}" for t in TAUS) + " | hard totals |")
    print("|---" * (len(TAUS) + 2) + "|")
    keys = runner.seed_keys(jax.random.key(0), jnp.arange(S))
    for raw in CONFIGS:
        cfg = parse_config({**BASE, **raw})
        b = experiment.build(cfg)
        for ba in b.algorithms:
            hard = jax.vmap(lambda k, p: runner.run(k, ba.algo, b.structure, p, ba.params,
                                                    ba.move_cost, T)[1])(keys, b.problem)
            h = np.asarray(hard.prediction_regret + hard.movement_cost)
            obj = jax.jit(relaxed.make_objective(ba.kind, b.structure, ba.spec, T, True))
            gaps = []
            for tau in TAUS:
                _, tot = obj(ba.params, relaxed.relax_params(tau, dtype=jnp.float64), keys,
                             b.problem, ba.move_cost)
                gaps.append(np.max(np.abs(np.asarray(tot.prediction_regret
                                                     + tot.movement_cost) - h)))
            print(f"| {ba.name} | " + " | ".join(f"{g:.2g}" for g in gaps)
                  + f" | {h.min():.0f}–{h.max():.0f} |")


if __name__ == "__main__":
    main()
