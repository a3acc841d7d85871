"""Cost of a lazy sweep against a standard-LinUCB sweep (issue: re-optimisation cost must follow
the number of triggers, not T x PGD steps).

    python benchmarks/lazy_vs_linucb.py            # 1024 seeds vertex, 64 seeds PGD, T = 10^4

Run seconds exclude compilation (gsjax.runner.sweep reports them apart); one run each.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from gsjax import graphs, problem as P, runner
from gsjax.algorithms import AgentParams, AgentSpec, make

LAMBDAS = [0.01, 0.05, 0.1, 0.3, 0.19, 0.6, 0.9, 1.2, 2.0, 1.4]  # configs/section7_2.toml


def _params(k: int) -> AgentParams:
    return AgentParams(
        lambda_reg=jnp.asarray(LAMBDAS, jnp.float32), beta=jnp.full((k,), 0.5),
        pgd_lr=jnp.asarray(0.05), log_trigger=jnp.log(2.0), oful_delta=jnp.asarray(0.05),
        oful_S=jnp.asarray(1.0), oful_sigma=jnp.full((k,), 0.5),
    )


def bench(label, spec, seeds, horizon):
    scopes = graphs.block_scopes(10, 2)
    st = P.make_structure(scopes, "linear", "independent")
    prob = P.make_problem(jax.random.key(0), st, scopes, noise_sigma=0.5)
    out = {}
    for name in ("linucb", "lazy", "async_lazy"):
        algo = make(name, st, spec)
        res = runner.sweep(jax.random.key(0), np.arange(seeds), algo, st, prob, _params(10), 1.0,
                           horizon, horizon)
        out[name] = res.run_seconds
    print(f"{label}: {seeds} seeds x {horizon} rounds, run seconds: "
          + ", ".join(f"{k} {v:.2f}" for k, v in out.items())
          + f"; lazy/linucb {out['lazy'] / out['linucb']:.3f}, "
          f"async/linucb {out['async_lazy'] / out['linucb']:.3f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--horizon", type=int, default=10_000)
    args = p.parse_args()
    bench("section7_2, exact vertex solver", AgentSpec(), 1024, args.horizon)
    bench("section7_2, PGD 4 starts x 20 steps", AgentSpec(solver="pgd", pgd_starts=4, pgd_steps=20),
          64, args.horizon)


if __name__ == "__main__":
    main()
