"""Where the time of a 7.2 round goes on CPU: noise draws and small-matrix layouts, side by side.

    python benchmarks/variants.py            # about a minute on 2 CPU cores
    python benchmarks/variants.py --seeds 1024 --rounds 1000 --repeats 5

Every variant runs ``rounds`` rounds for ``seeds`` seeds and ``k = 10`` criteria of ``d = 2``
(the section7_2 workload) inside ONE jitted ``lax.scan``, compiled once and timed as the median
of ``repeats`` calls (compile time excluded). Rows:

Noise (k normals per seed-round):

* ``threefry fold_in x2 + normal`` -- what gsjax does (DESIGN section 3: ``key_t =
  fold_in(seed_key, t)``, noise from ``fold_in(key_t, 0)``): a seed's draws do not depend on
  the batch size, the chunking or the device count.
* ``threefry fold_in x2 + raw bits`` -- the same hashing without the bits-to-normal transform
  (``erf_inv``), to split the cost.
* ``no noise`` -- the loop alone (an add per round), the floor of this harness.
* ``threefry block of 32 rounds`` -- one key per (seed, block of 32 rounds), ``normal((32, k))``
  outside the round loop (keeps the rule per seed): "summed at once" reduces the block in one
  fused op (an upper bound on the saving); "used round by round" feeds its rows to an inner
  ``lax.scan`` over the block's rounds, as a runner would.
* ``numpy Generator.standard_normal`` -- what the vectorised NumPy baseline pays (stateful,
  sequential; not batch-invariant), a Python loop over rounds.

Ridge statistics (rank-one update of ``S``, ``b`` and the closed-form ``V^-1``, ``log det V``):

* ``matrix (S, k, 2, 2)`` -- gsjax's form: :func:`gsjax.linalg.update` ``vmap``-ed twice.
* ``element-wise (S, k)`` -- the same formulas on separate component arrays, seed axis first.
* ``element-wise (k, S)`` -- the same, seed axis last (inputs laid out seed-last too).
* ``numpy element-wise (S, k)`` -- the vectorised NumPy baseline's way.

Writes ``benchmarks/results/variants.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
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

from gsjax import linalg, runner  # noqa: E402
from gsjax.results import write_json  # noqa: E402

K, D = 10, 2
BLOCK = 32


def _time(fn, args, repeats):
    """(compile seconds, median run seconds) of ``jit(fn)(*args)``."""
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - t0
    jax.block_until_ready(compiled(*args))
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        runs.append(time.perf_counter() - t0)
    return compile_s, statistics.median(runs)


def noise_variants(seeds, rounds, repeats):
    keys = runner.seed_keys(jax.random.key(0), jnp.arange(seeds))
    ts = jnp.arange(1, rounds + 1)

    def per_round(draw):
        def fn(keys):
            def body(acc, t):
                return acc + jax.vmap(lambda kk: draw(kk, t))(keys), None
            return jax.lax.scan(body, jnp.zeros((seeds, K)), ts)[0]
        return fn

    def rule(kk, t):
        return jax.random.normal(jax.random.fold_in(jax.random.fold_in(kk, t), 0), (K,))

    def bits(kk, t):
        b = jax.random.bits(jax.random.fold_in(jax.random.fold_in(kk, t), 0), (K,))
        return b.astype(jnp.float32)

    def block_summed(keys):
        def body(acc, blk):
            eta = jax.vmap(lambda kk: jax.random.normal(jax.random.fold_in(kk, blk),
                                                        (BLOCK, K)))(keys)
            return acc + jnp.sum(eta, axis=1), None
        return jax.lax.scan(body, jnp.zeros((seeds, K)), jnp.arange(rounds // BLOCK))[0]

    def block_consumed(keys):
        def body(acc, blk):
            eta = jax.vmap(lambda kk: jax.random.normal(jax.random.fold_in(kk, blk),
                                                        (BLOCK, K)))(keys)

            def one_round(acc, e):
                return acc + e, None
            return jax.lax.scan(one_round, acc, jnp.swapaxes(eta, 0, 1))[0], None
        return jax.lax.scan(body, jnp.zeros((seeds, K)), jnp.arange(rounds // BLOCK))[0]

    rows = []
    for name, fn in (("no noise", per_round(lambda kk, t: jnp.zeros((K,)) + t)),
                     ("threefry fold_in x2 + normal (gsjax)", per_round(rule)),
                     ("threefry fold_in x2 + raw bits", per_round(bits)),
                     (f"threefry block of {BLOCK} rounds, summed at once", block_summed),
                     (f"threefry block of {BLOCK} rounds, used round by round", block_consumed)):
        c, r = _time(fn, (keys,), repeats)
        rows.append({"group": "noise", "variant": name, "run_seconds": r, "compile_seconds": c})
    gen = np.random.default_rng(0)
    runs = []
    for _ in range(repeats):
        acc = np.zeros((seeds, K), np.float32)
        t0 = time.perf_counter()
        for _t in range(rounds):
            acc += gen.standard_normal((seeds, K), dtype=np.float32)
        runs.append(time.perf_counter() - t0)
    rows.append({"group": "noise", "variant": "numpy Generator.standard_normal",
                 "run_seconds": statistics.median(runs), "compile_seconds": 0.0})
    return rows


def stats_variants(seeds, rounds, repeats):
    x = jnp.round(jax.random.uniform(jax.random.key(1), (rounds, seeds, K, D)))
    y = jax.random.normal(jax.random.key(2), (rounds, seeds, K))
    lam = jnp.linspace(0.01, 2.0, K, dtype=jnp.float32)

    def matrix(x, y):
        st = jax.vmap(lambda _: jax.vmap(lambda l: linalg.init(l, D))(lam))(jnp.arange(seeds))
        upd = jax.vmap(jax.vmap(linalg.update, in_axes=(0, 0, 0, None)), in_axes=(0, 0, 0, None))

        def body(st, xy):
            return upd(st, xy[0], xy[1], True), None
        return jax.lax.scan(body, st, (x, y))[0].logdet

    def elementwise(x0, x1, y, lamv):
        z = jnp.zeros_like(x0[0])

        def body(c, xy):
            ga, gb, gc, b0, b1, _, _, _, _ = c
            a0, a1, yy = xy
            ga, gb, gc = ga + a0 * a0, gb + a0 * a1, gc + a1 * a1
            det = (ga * gc - gb * gb) + lamv * (ga + gc) + lamv * lamv
            c = (ga, gb, gc, b0 + a0 * yy, b1 + a1 * yy, jnp.log(det),
                 (gc + lamv) / det, -gb / det, (ga + lamv) / det)
            return c, None
        return jax.lax.scan(body, (z,) * 9, (x0, x1, y))[0][5]

    first = (x[..., 0], x[..., 1], y, lam)
    last = (jnp.moveaxis(x[..., 0], 1, -1), jnp.moveaxis(x[..., 1], 1, -1),
            jnp.moveaxis(y, 1, -1), lam[:, None])
    rows = []
    for name, fn, args in (("matrix (S, k, 2, 2) (gsjax)", matrix, (x, y)),
                           ("element-wise (S, k)", elementwise, first),
                           ("element-wise (k, S)", elementwise, last)):
        c, r = _time(fn, args, repeats)
        rows.append({"group": "ridge statistics", "variant": name, "run_seconds": r,
                     "compile_seconds": c})
    xn, yn, lamn = np.asarray(x), np.asarray(y), np.asarray(lam)
    runs = []
    for _ in range(repeats):
        ga = gb = gc = b0 = b1 = np.zeros((seeds, K), np.float32)
        t0 = time.perf_counter()
        for t in range(rounds):
            a0, a1, yy = xn[t, ..., 0], xn[t, ..., 1], yn[t]
            ga, gb, gc = ga + a0 * a0, gb + a0 * a1, gc + a1 * a1
            b0, b1 = b0 + a0 * yy, b1 + a1 * yy
            det = (ga * gc - gb * gb) + lamn * (ga + gc) + lamn * lamn
            _ = np.log(det), (gc + lamn) / det, -gb / det, (ga + lamn) / det
        runs.append(time.perf_counter() - t0)
    rows.append({"group": "ridge statistics", "variant": "numpy element-wise (S, k)",
                 "run_seconds": statistics.median(runs), "compile_seconds": 0.0})
    return rows


def markdown(meta, rows) -> str:
    lines = [
        f"Command: `{meta['command']}` ({meta['seeds']} seeds x {meta['rounds']} rounds, "
        f"k = {K}, d = {D}, float32, median of {meta['repeats']}; {meta['started']}, "
        f"load average {meta['loadavg_start']} -> {meta['loadavg_end']}).",
        "",
        "| group | variant | run s | ns per seed-round | compile s |",
        "|---|---|---|---|---|",
    ]
    sr = meta["seeds"] * meta["rounds"]
    for r in rows:
        lines.append(f"| {r['group']} | {r['variant']} | {r['run_seconds']:.3f} | "
                     f"{1e9 * r['run_seconds'] / sr:.0f} | {r['compile_seconds']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "variants.json"))
    args = ap.parse_args(argv)
    if args.rounds % BLOCK:
        ap.error(f"--rounds must be a multiple of {BLOCK}")
    meta = {
        "command": "python benchmarks/variants.py " + " ".join(argv or sys.argv[1:]),
        "seeds": args.seeds, "rounds": args.rounds, "repeats": args.repeats,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"), "devices": [str(d) for d in jax.devices()],
        "loadavg_start": [round(v, 2) for v in os.getloadavg()],
    }
    rows = noise_variants(args.seeds, args.rounds, args.repeats)
    rows += stats_variants(args.seeds, args.rounds, args.repeats)
    meta["loadavg_end"] = [round(v, 2) for v in os.getloadavg()]
    write_json(Path(args.out), {"meta": meta, "rows": rows})
    print(markdown(meta, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
