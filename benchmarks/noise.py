"""The noise draw of a round, side by side: 10 normals per seed-round for S seeds, T rounds.

    python benchmarks/noise.py                          # S = 1024, T = 1024, 7 repetitions
    python benchmarks/noise.py --seeds 1024 --rounds 1024 --repeats 7

Every option keeps DESIGN section 3 (a seed's draws are a function of the root, its global id,
the round and the draw index) and runs inside ONE jitted ``lax.scan`` over the rounds, adding
the round's normals into a carry (so nothing is dead code). Compiled first (compile time apart),
then timed alternately repetition by repetition in one process (``benchmarks/timing.py``):

* ``threefry key per (seed, round)`` -- gsjax's runner today: ``key_t = fold_in(seed_key, t)``,
  ``normal(fold_in(key_t, 0), (10,))``, ``vmap`` over seeds (seed axis first);
* the same traced under ``jax.threefry_partitionable(False)`` (another threefry layout; the
  bits differ from the default's);
* ``philox (root, seed id; round, index)`` -- :func:`gsjax.philox.normals`, seed axis last,
  float32 Box--Muller;
* ``threefry key per (seed, block of 32 rounds)`` -- ``normal(fold_in(seed_key, b), (32, 10))``
  once per block ``b``, its rows fed to an inner scan over the block's rounds;
* ``no noise`` -- the scan adding a constant: the harness's floor.

Writes ``benchmarks/results/noise.json`` and prints a markdown table (``benchmarks/run.py`` puts
it in RESULTS.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import jax  # noqa: E402

jax.config.update("jax_enable_x64", False)

import jax.numpy as jnp  # noqa: E402

from benchmarks.kernels import round_kernels  # noqa: E402
from benchmarks.timing import interleave, machine  # noqa: E402
from gsjax import philox  # noqa: E402
from gsjax.results import write_json  # noqa: E402

K = 10
BLOCK = 32
ROOT_SEED = 0


def _per_round(seeds: int, rounds: int):
    keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(
        jax.random.key(ROOT_SEED), jnp.arange(seeds, dtype=jnp.uint32))

    def draw(key, t):
        return jax.random.normal(jax.random.fold_in(jax.random.fold_in(key, t), 0), (K,))

    def run(keys):
        def body(acc, t):
            return acc + jax.vmap(draw, in_axes=(0, None))(keys, t), None

        return jax.lax.scan(body, jnp.zeros((seeds, K)), jnp.arange(1, rounds + 1))[0]

    return run, (keys,)


def _philox(seeds: int, rounds: int):
    ids = jnp.arange(seeds, dtype=jnp.uint32)

    def run(ids):
        def body(acc, t):
            return acc + philox.normals(ROOT_SEED, ids, t, K), None

        return jax.lax.scan(body, jnp.zeros((K, seeds)), jnp.arange(1, rounds + 1))[0]

    return run, (ids,)


def _block(seeds: int, rounds: int):
    keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(
        jax.random.key(ROOT_SEED), jnp.arange(seeds, dtype=jnp.uint32))

    def run(keys):
        def block(acc, b):
            z = jax.vmap(lambda k: jax.random.normal(jax.random.fold_in(k, b), (BLOCK, K)))(keys)

            def body(acc, z_t):
                return acc + z_t, None

            return jax.lax.scan(body, acc, jnp.moveaxis(z, 1, 0))[0], None

        return jax.lax.scan(block, jnp.zeros((seeds, K)), jnp.arange(rounds // BLOCK))[0]

    return run, (keys,)


def _floor(seeds: int, rounds: int):
    def run(x):
        def body(acc, t):
            return acc + x * t.astype(jnp.float32), None

        return jax.lax.scan(body, jnp.zeros((K, seeds)), jnp.arange(1, rounds + 1))[0]

    return run, (jnp.ones((K, seeds)),)


OPTIONS = {
    "threefry key per (seed, round) (gsjax until 2026-12-02)": (_per_round, True),
    "threefry key per (seed, round), threefry_partitionable(False)": (_per_round, False),
    "philox (root, seed id; round, index), seed axis last": (_philox, True),
    f"threefry key per (seed, block of {BLOCK} rounds)": (_block, True),
    "no noise (the scan alone)": (_floor, True),
}


def measure(seeds: int, rounds: int, repeats: int) -> dict:
    """Compile every option, then time them interleaved; rows of medians."""
    if rounds % BLOCK:
        raise ValueError(f"rounds: must be a multiple of {BLOCK}, got {rounds}")
    calls, compile_s, kernels = {}, {}, {}
    for name, (build, partitionable) in OPTIONS.items():
        fn, args = build(seeds, rounds)
        with jax.threefry_partitionable(partitionable):
            t0 = time.perf_counter()
            compiled = jax.jit(fn).lower(*args).compile()
            compile_s[name] = time.perf_counter() - t0
        # Per round: the whole program's kernels over the rounds (the block option's draw is
        # in the loop over blocks, its rounds in an inner loop).
        kernels[name] = round_kernels(compiled.as_text(), rounds // BLOCK if build is _block
                                      else rounds)["whole_program"] / rounds
        calls[name] = (lambda c, a: lambda: jax.block_until_ready(c(*a)))(compiled, args)
    timed = interleave(calls, repeats)
    sr = seeds * rounds
    floor = timed["no noise (the scan alone)"]["wall_median"]
    cpu_floor = timed["no noise (the scan alone)"]["cpu_median"]
    return [dict(option=n, compile_seconds=compile_s[n], wall_seconds=t["wall_median"],
                 cpu_seconds=t["cpu_median"], ns_per_seed_round=1e9 * t["wall_median"] / sr,
                 cpu_ns_per_seed_round=1e9 * t["cpu_median"] / sr,
                 net_ns_per_seed_round=1e9 * (t["wall_median"] - floor) / sr,
                 net_cpu_ns_per_seed_round=1e9 * (t["cpu_median"] - cpu_floor) / sr,
                 kernels_per_round=kernels[n], walls=t["wall"], cpus=t["cpu"])
            for n, t in timed.items()]


def markdown(res: dict) -> str:
    m = res["meta"]
    lines = [
        f"Command: `{m['command']}` ({m['seeds']} seeds x {m['rounds']} rounds x {K} normals, "
        f"float32, {m['repeats']} repetitions alternated in one process, medians; "
        f"{m['start']['time']}, load average {m['start']['loadavg']} -> {m['end']['loadavg']}, "
        f"{m['start']['cpu_count']} cores).",
        "",
        "| option | wall ns / seed-round | CPU ns / seed-round | net of the floor (wall, CPU) | "
        "**vs threefry (CPU)** | vs threefry (wall) | kernels per round | compile s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = res["rows"][0]
    for r in res["rows"]:
        ratio = lambda key: (f"{base[key] / r[key]:.2f}x" if r[key] > 0  # noqa: E731
                             else "–")
        lines.append(
            f"| {r['option']} | {r['ns_per_seed_round']:.0f} | {r['cpu_ns_per_seed_round']:.0f} | "
            f"{r['net_ns_per_seed_round']:.0f}, {r['net_cpu_ns_per_seed_round']:.0f} | "
            f"**{ratio('net_cpu_ns_per_seed_round')}** | {ratio('net_ns_per_seed_round')} | "
            f"{r['kernels_per_round']:.1f} | {r['compile_seconds']:.2f} |")
    lines += [
        "",
        "Philox is `gsjax/philox.py` (Philox-4x32-10 in `jax.numpy`, key (root, global seed id),"
        " counter (block, round, stream, 0), inverse-CDF float32 normals); `tests/test_philox.py`"
        " checks its words bit for bit against NumPy's `Philox` (through a width-generic "
        "reference: NumPy's is Philox-4x64) and Random123's known answers, and its normals by "
        "moments and a KS test. gsjax's runner draws the environment's noise with it. "
        "`kernels per round`: the "
        "compiled program's kernels over the rounds (`benchmarks/kernels.py`'s count). Under "
        "load the CPU ratio is the steadier one.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "noise.json"))
    args = ap.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    meta = dict(command=" ".join(["python benchmarks/noise.py", *argv]), seeds=args.seeds,
                rounds=args.rounds, repeats=args.repeats, start=machine(),
                devices=[str(d) for d in jax.devices()])
    rows = measure(args.seeds, args.rounds, args.repeats)
    res = {"meta": dict(meta, end=machine()), "rows": rows}
    write_json(Path(args.out), res)
    print(markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
