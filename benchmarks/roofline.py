"""How close a 7.2 sweep comes to this machine's limits, and where its time goes.

    python benchmarks/roofline.py            # about a minute on 2 CPU cores

1. The machine, measured once: peak float32 matmul rate (``jnp.dot`` of two 2048 x 2048
   matrices, all threads XLA uses) and memory bandwidth (8 passes of ``y * 1.0001`` over a
   256 MB array in one jitted loop: 512 MB read + written a pass; and a ``sum`` reading 256 MB).
2. The work per seed-round of the section7_2 lazy sweep (10 cliques x d = 2, vertex solver,
   compacted runner): the bytes of state it moves (the run's carry -- ridge statistics,
   references, policy, totals -- read and written once a round: ``2 x carry bytes / seed``) and
   the flops XLA's cost model counts for one round (``compiled.cost_analysis()`` of a one-round
   chunk, divided by the seeds; the solver's loop body is counted once, i.e. as if one buffer of
   seeds re-optimised every round, an overestimate for lazy).
3. The achieved rates at ``--seeds`` x ``--rounds``: seed-rounds/s, bytes/s and flops/s as
   fractions of the peaks; and the time split by ablation, side by side in this run: the same
   sweep with the environment's noise draw removed (feedback = expected loss), and with the
   solver never called (``log_trigger`` huge: no trigger fires after the first policy).

Writes ``benchmarks/results/roofline.json`` and prints a summary.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import jax  # noqa: E402

jax.config.update("jax_enable_x64", False)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from gsjax import graphs, runner  # noqa: E402
from gsjax import problem as P  # noqa: E402
from gsjax.algorithms import AgentParams, AgentSpec, make  # noqa: E402
from gsjax.results import write_json  # noqa: E402

LAMBDAS = [0.01, 0.05, 0.1, 0.3, 0.19, 0.6, 0.9, 1.2, 2.0, 1.4]  # configs/section7_2.toml


def _median_seconds(fn, args, repeats):
    jax.block_until_ready(fn(*args))
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def machine_peaks(repeats: int) -> dict:
    n = 2048
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (n, n), jnp.float32)
    mm = jax.jit(jnp.dot)
    t_mm = _median_seconds(mm, (a, b), repeats)
    big = jnp.ones((64 * 2**20,), jnp.float32)  # 256 MB
    passes = 8
    # 8 in-loop passes: the loop reuses its buffers, so page faults of a fresh output
    # (first touch) are paid once, not counted as bandwidth.
    scale = jax.jit(lambda x: jax.lax.fori_loop(0, passes, lambda i, y: y * 1.0001, x))
    total = jax.jit(jnp.sum)
    t_scale = _median_seconds(scale, (big,), repeats)
    t_sum = _median_seconds(total, (big,), repeats)
    return {
        "matmul_gflops": 2 * n**3 / t_mm / 1e9,
        "stream_scale_gb_per_s": passes * 2 * big.nbytes / t_scale / 1e9,
        "stream_sum_gb_per_s": big.nbytes / t_sum / 1e9,
    }


def _params(k: int, log_trigger: float = float(np.log(2.0))) -> AgentParams:
    return AgentParams(
        lambda_reg=jnp.asarray(LAMBDAS, jnp.float32), beta=jnp.full((k,), 0.5, jnp.float32),
        pgd_lr=jnp.asarray(0.05, jnp.float32), log_trigger=jnp.asarray(log_trigger, jnp.float32),
        oful_delta=jnp.asarray(0.05, jnp.float32), oful_S=jnp.asarray(1.0, jnp.float32),
        oful_sigma=jnp.full((k,), 0.5, jnp.float32),
    )


def sweep_costs(seeds: int, rounds: int, repeats: int) -> dict:
    k = 10
    scopes = graphs.block_scopes(k, 2)
    st = P.make_structure(scopes, "linear", "independent")
    prob = P.make_problem(jax.random.key(0), st, scopes, noise_sigma=0.5)
    algo = make("lazy", st, AgentSpec())
    keys = runner.seed_keys(jax.random.key(0), jnp.arange(seeds))
    buffer = max(2, seeds // 16)
    move = jnp.asarray(1.0, jnp.float32)

    # Work per seed-round: the carry (state moved each round) and XLA's flop count of a round.
    init_fn, one_round = runner.make_chunked(algo, st, 1, 1, compact=True, buffer=buffer)
    carry = init_fn(keys, prob, _params(k))
    carry_bytes = sum(x.nbytes for x in jax.tree_util.tree_leaves(carry)) / seeds
    compiled = one_round.lower(carry, 0, keys, prob, _params(k), move).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    flops = float(cost.get("flops", 0.0)) / seeds
    xla_bytes = float(cost.get("bytes accessed", 0.0)) / seeds

    def timed(params, noise=True):
        saved = runner.observe
        if not noise:
            runner.observe = lambda key, structure, problem, s: P.Feedback(
                y=P.expected_losses(structure, problem, s),
                expected_loss=P.total_loss(structure, problem, s))
        try:
            f = runner.make_sweep(algo, st, rounds, rounds, compact=True, buffer=buffer)
            t0 = time.perf_counter()
            compiled_ = f.lower(keys, prob, params, move).compile()
            compile_s = time.perf_counter() - t0
            run_s = _median_seconds(compiled_, (keys, prob, params, move), repeats)
        finally:
            runner.observe = saved
        return run_s, compile_s

    full, compile_s = timed(_params(k))
    no_noise, _ = timed(_params(k), noise=False)
    no_solve, _ = timed(_params(k, log_trigger=1e9))
    no_both, _ = timed(_params(k, log_trigger=1e9), noise=False)
    return {
        "seeds": seeds, "rounds": rounds, "compile_seconds": compile_s,
        "carry_bytes_per_seed": carry_bytes,
        "state_bytes_per_seed_round": 2 * carry_bytes,
        "xla_flops_per_seed_round": flops,
        "xla_bytes_accessed_per_seed_round": xla_bytes,
        "run_seconds": {"full": full, "no_noise": no_noise, "no_solve": no_solve,
                        "no_noise_no_solve": no_both},
    }


def markdown(out: dict) -> str:
    """The roofline summary as markdown (used by benchmarks/run.py for RESULTS.md)."""
    m, w, a, sh = out["machine"], out["work"], out["achieved"], out["shares"]
    rs = w["run_seconds"]
    meta = out["meta"]
    return "\n".join([
        f"Command: `{meta['command'].strip()}` ({meta['started']}, load average "
        f"{meta['loadavg_start']} -> {meta['loadavg_end']}).",
        "",
        f"* Machine: {m['matmul_gflops']:.0f} GFLOP/s float32 (2048^3 matmul), memory "
        f"{m['stream_scale_gb_per_s']:.1f} GB/s read+write stream, {m['stream_sum_gb_per_s']:.1f} "
        f"GB/s read-only (sum).",
        f"* Work per seed-round of the section7_2 lazy sweep: {w['state_bytes_per_seed_round']:.0f} "
        f"B of state moved (the {w['carry_bytes_per_seed']:.0f} B carry read and written); XLA's "
        f"cost model counts {w['xla_flops_per_seed_round']:.0f} flops and "
        f"{w['xla_bytes_accessed_per_seed_round']:.0f} B accessed per seed-round (one round, "
        f"solver loop body counted once).",
        f"* Achieved at {w['seeds']} seeds x {w['rounds']} rounds: "
        f"{a['seed_rounds_per_s']:,.0f} seed-rounds/s = {a['state_gb_per_s']:.2f} GB/s of state "
        f"({100 * a['fraction_of_bandwidth_state']:.0f} % of the stream bandwidth; "
        f"{100 * a['fraction_of_bandwidth_xla']:.0f} % counting every byte XLA touches) and "
        f"{a['gflops']:.2f} GFLOP/s ({100 * a['fraction_of_peak_flops']:.1f} % of peak).",
        f"* Where the time goes (ablations in the same run): full {rs['full']:.3f} s; without "
        f"the noise draw {rs['no_noise']:.3f} s; without any re-minimisation {rs['no_solve']:.3f} "
        f"s; without both {rs['no_noise_no_solve']:.3f} s. Noise: {100 * sh['noise']:.0f} % of "
        f"the run; solver: {100 * sh['solver']:.0f} %; the rest (features, statistics, trigger, "
        f"bookkeeping, loop): {100 * sh['rest']:.0f} %.",
    ]) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "roofline.json"))
    args = ap.parse_args(argv)
    meta = {"command": "python benchmarks/roofline.py " + " ".join(argv or sys.argv[1:]),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "devices": [str(d) for d in jax.devices()],
            "loadavg_start": [round(v, 2) for v in os.getloadavg()]}
    peaks = machine_peaks(args.repeats)
    work = sweep_costs(args.seeds, args.rounds, args.repeats)
    sr = args.seeds * args.rounds
    rate = sr / work["run_seconds"]["full"]
    achieved = {
        "seed_rounds_per_s": rate,
        "state_gb_per_s": rate * work["state_bytes_per_seed_round"] / 1e9,
        "xla_gb_per_s": rate * work["xla_bytes_accessed_per_seed_round"] / 1e9,
        "gflops": rate * work["xla_flops_per_seed_round"] / 1e9,
    }
    achieved["fraction_of_bandwidth_state"] = (achieved["state_gb_per_s"]
                                               / peaks["stream_scale_gb_per_s"])
    achieved["fraction_of_bandwidth_xla"] = (achieved["xla_gb_per_s"]
                                             / peaks["stream_scale_gb_per_s"])
    achieved["fraction_of_peak_flops"] = achieved["gflops"] / peaks["matmul_gflops"]
    rs = work["run_seconds"]
    shares = {
        "noise": (rs["full"] - rs["no_noise"]) / rs["full"],
        "solver": (rs["full"] - rs["no_solve"]) / rs["full"],
        "rest": rs["no_noise_no_solve"] / rs["full"],
    }
    meta["loadavg_end"] = [round(v, 2) for v in os.getloadavg()]
    out = {"meta": meta, "machine": peaks, "work": work, "achieved": achieved, "shares": shares}
    write_json(Path(args.out), out)
    print(f"machine: {peaks['matmul_gflops']:.1f} GFLOP/s float32 matmul, "
          f"{peaks['stream_scale_gb_per_s']:.1f} GB/s stream (scale), "
          f"{peaks['stream_sum_gb_per_s']:.1f} GB/s (sum)")
    print(f"work per seed-round: {work['state_bytes_per_seed_round']:.0f} B of state "
          f"(carry {work['carry_bytes_per_seed']:.0f} B read + written), XLA counts "
          f"{work['xla_flops_per_seed_round']:.0f} flops and "
          f"{work['xla_bytes_accessed_per_seed_round']:.0f} B accessed")
    print(f"achieved at {args.seeds} seeds x {args.rounds} rounds: {rate:,.0f} seed-rounds/s; "
          f"{achieved['state_gb_per_s']:.2f} GB/s of state = "
          f"{100 * achieved['fraction_of_bandwidth_state']:.1f} % of bandwidth "
          f"({100 * achieved['fraction_of_bandwidth_xla']:.1f} % counting XLA's bytes); "
          f"{achieved['gflops']:.2f} GFLOP/s = {100 * achieved['fraction_of_peak_flops']:.2f} % "
          f"of peak")
    print("run seconds: " + ", ".join(f"{k} {v:.3f}" for k, v in rs.items()))
    print("shares of the full run: " + ", ".join(f"{k} {100 * v:.0f} %" for k, v in shares.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
