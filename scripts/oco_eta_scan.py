"""Scan of Lazy OGD's ``eta_scale`` on an OCO config: the mean total regret (loss regret +
lambda x movement, 64 seeds) at eta_scale = 2^-4 .. 2^4 (a factor sqrt 2 apart), for every
third budget point of the first entry and every lambda of ``move_costs``. The README's Section 6
tuning paragraph quotes it:

    python scripts/oco_eta_scan.py section6_tradeoff                      # s0 = 0.5, as shipped
    python scripts/oco_eta_scan.py section6_tradeoff problem.s0=0.0       # start at a corner

(about 15 s each on 2 cores). Extra arguments are ``--set`` overrides.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

from gsjax.config import find_config
from gsjax.oco import algorithms as algs
from gsjax.oco.config import load_oco_config
from gsjax.oco.experiment import entry_params, spec_of
from gsjax.oco.problem import make_problem
from gsjax.oco.runner import sweep

SEEDS = 64
SCALES = 2.0 ** np.arange(-4, 4.5, 0.5)


def main(name, *sets):
    cfg = load_oco_config(find_config(name), [f"seeds={SEEDS}", *sets])
    with jax.enable_x64(True):
        spec, pc = spec_of(cfg), cfg.problem
        problem = make_problem(spec, pc.s0, pc.target_low, pc.target_high, pc.weights, pc.drift,
                               jnp.float64)
        T, e = cfg.horizons[0], cfg.algorithms[0]
        params, budgets = entry_params(cfg, e, T, jnp.float64)
        print(f"{name} {' '.join(sets)}: T = {T}, eta_scale = {SCALES.round(3).tolist()}")
        for j in range(0, len(budgets), 3):
            unit = params.eta[j] / e.eta_scale
            prm = algs.OCOParams(p=jnp.repeat(params.p[j][None], len(SCALES), 0),
                                 eta=jnp.asarray(SCALES)[:, None] * unit[None])
            r = sweep(jax.random.key(cfg.root_seed), np.arange(SEEDS), algs.make(e.algorithm, spec),
                      spec, problem, prm, T).result
            a = e.budgets[j] if e.budgets else "T"
            for lam in cfg.move_costs:
                tot = (r.loss_regret.sum(-1) + lam * r.movement.sum(-1)).mean(0)
                b = int(np.argmin(tot))
                print(f"point {j} (a = {a}, M = {budgets[j][0]:.0f}) lambda {lam:g}: at 1: "
                      f"{tot[8]:.1f}, best eta_scale {SCALES[b]:.3g}: {tot[b]:.1f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
