"""The relaxed objective of ``gsjax tune`` against the hard regret, over beta, on section7_2's
``lazy`` entry (T = 1000, the 16 tuning seeds 0..15, c = 2, float64), for several temperature
pairs (tau for the trigger, tau_s for the soft-min), with d(objective)/d(log beta):

    python scripts/relaxed_landscape.py      # about 50 s on 2 cores

The README's temperature study quotes its output.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from gsjax import experiment, relaxed, runner
from gsjax.config import load_config

S, T = 16, 1000
BETAS = [0.25, 0.5, 1.0, 2.0]
PAIRS = [(0.05, 0.05), (0.2, 0.2), (1.0, 1.0), (1.0, 0.05), (0.05, 1.0), (1.0, 0.01),
         (0.01, 0.01), (1e-3, 1e-3)]


def main():
    from gsjax.config import find_config

    cfg = load_config(find_config("section7_2"), ["dtype=float64", f"seeds={S}", f"horizon={T}"])
    entry = next(e for e in cfg.algorithms if e.name == "lazy")
    cfg = dataclasses.replace(cfg, algorithms=(entry,))
    b = experiment.build(cfg)
    ba = b.algorithms[0]
    k = b.structure.num_criteria
    keys = runner.seed_keys(jax.random.key(cfg.root_seed), jnp.arange(S))
    obj = relaxed.make_objective("lazy", b.structure, ba.spec, T, b.problem_per_seed)

    def f(log_beta, rp):
        p = ba.params._replace(beta=jnp.full((k,), jnp.exp(log_beta)))
        return obj(p, rp, keys, b.problem, ba.move_cost)[0]

    vg = jax.jit(jax.value_and_grad(f))
    stacked = jax.tree_util.tree_map(
        lambda *x: jnp.stack(x), *[ba.params._replace(beta=jnp.full((k,), x)) for x in BETAS])
    res = runner.sweep(jax.random.key(cfg.root_seed), np.arange(S), ba.algo, b.structure,
                       b.problem, stacked, jnp.full((len(BETAS),), ba.move_cost), T,
                       cfg.record_every, b.problem_per_seed, grid=True)
    hard = np.asarray(res.totals.prediction_regret + res.totals.movement_cost).mean(1)
    print("beta:", BETAS)
    print("hard regret:", np.round(hard, 1).tolist())
    for tau, tau_s in PAIRS:
        rp = relaxed.relax_params(tau, tau_s, 0.01, jnp.float64)
        out = [vg(jnp.log(x), rp) for x in BETAS]
        print(f"tau={tau:g} tau_s={tau_s:g}: relaxed {[round(float(v), 1) for v, _ in out]}"
              f"  d/dlog(beta) {[float(f'{float(g):.2g}') for _, g in out]}")


if __name__ == "__main__":
    main()
