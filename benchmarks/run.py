"""Speed against NumPy, honestly: gsjax and the NumPy baselines alternated in ONE process.

    python benchmarks/run.py --quick    # section7_2, S = 1024, T = 400: under 5 minutes, 2 cores
    python benchmarks/run.py            # full: S = 1024 x T = 2000, S = 16384, sparse_graph
    bash benchmarks/gpu.sh              # --mode gpu: 10^4 - 10^6 seeds on a CUDA GPU

Workloads: ``benchmarks/workloads.py`` (gsjax in float32, every NumPy baseline in float64).
The report replaces the top of ``benchmarks/RESULTS.md``; its dated sections (``## YYYY-MM-DD
...``, the measurements written by hand) are kept below it. ``--render`` rewrites the top from
``benchmarks/results/latest.json``.

Per row (workload, algorithm, seeds S, horizon T) the contenders run alternately repetition by
repetition (``benchmarks/timing.py``: A B C ..., ... C B A, one untimed warm-up call each), and
the table gives the median over repetitions of seed-rounds per second of wall time and of CPU
time (the process's, all threads), compile time apart:

* ``gsjax``: ``runner.make_sweep`` as ``runner.sweep`` configures it (compacted solver for lazy
  algorithms, buffer ``max(2, S // 16)``, totals only), compiled once, each call timed;
* ``gsjax sweep``: ``runner.sweep`` itself, the path of the ``gsjax run`` command (one device
  per core as the command sets up, ``GSJAX_HOST_DEVICES``; seed padding,
  chunked driver, finiteness check, final description), a new compile each call: its wall rate
  is from its own ``run_seconds`` (compile excluded, as the CLI reports it), its CPU rate is not
  measured (the call's CPU time includes the compile). A persistent compilation cache in a
  temporary folder is on for the whole process, so its compiles after the first are cache hits;
* ``numpy strong`` (section7_2 only): :func:`numpy_baselines.run_strong` -- vectorised over
  seeds with the seed axis last, closed-form 2x2 algebra from the Gram sums;
* ``numpy vectorised``: :func:`numpy_baselines.run_vectorised` (seed axis first, matrices);
* ``numpy loop``: :func:`numpy_baselines.run_loop` (a Python loop over seeds and rounds).

NumPy calls stop at a time budget (``max_seconds``) after at least a few rounds: the `T'`
column says how many rounds they ran when fewer than T. A lazy run cut short sees the early
rounds, where most seeds re-optimise. NumPy draws its own noise (a ``Generator``), gsjax its
keys: totals agree in distribution (``tests/test_baselines.py`` checks the steps with the same
noise).

The ``gsjax run`` command is then run as a subprocess, twice: with an empty compilation cache
(cold), then with the cache it filled (warm) (``--seeds S`` of the first section7_2 row;
``--horizon 2000`` in quick mode, issue 16's command, else that row's T); the cold run's
``summary.json`` ``run_seconds`` / ``compile_seconds`` per algorithm are compared with the strong baseline's median rate of that row (not interleaved;
its theta* is drawn per seed). Kernels per round come from ``benchmarks/kernels.py``.

Quick mode also measures how throughput grows with the seeds (issue 16: S = 16384 against
S = 1024, :func:`measure_scaling`: gsjax alone at both sizes, the same horizon, alternated),
with the state the large run moves a second against the stream bandwidth measured in the same
process (``benchmarks/roofline.py``'s ``machine_peaks``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import jax  # noqa: E402

from gsjax import distributed  # noqa: E402

# One JAX device per core, as the gsjax command sets up (GSJAX_HOST_DEVICES; before anything
# starts JAX): the `gsjax sweep` rows shard their seeds over them like `gsjax run`; the `gsjax`
# rows are one compiled program on the first device, as before.
distributed.use_host_cores()
jax.config.update("jax_enable_x64", False)  # gsjax in float32

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import kernels, noise, roofline, variants  # noqa: E402
from benchmarks.numpy_baselines import run_loop, run_strong, run_vectorised  # noqa: E402
from benchmarks.timing import interleave, machine  # noqa: E402
from benchmarks.workloads import baseline_args, params, section7_2, sparse_graph  # noqa: E402
from gsjax import runner  # noqa: E402
from gsjax.algorithms import AgentSpec, make  # noqa: E402
from gsjax.results import write_json, write_text  # noqa: E402

LOOP_MAX_SEEDS = 64
BUILDERS = {"section7_2": section7_2, "sparse_graph": sparse_graph}
MODES = {
    # rows: (workload, seeds, horizon); budgets in seconds per NumPy call.
    "quick": dict(rows=[("section7_2", 1024, 400)], repeats=5, strong_budget=30.0,
                  vec_budget=1.5, loop_budget=1.0, min_rounds=5, cli=True,
                  cli_horizon=2000, scaling=(1024, 16384, 400)),
    "full": dict(rows=[("section7_2", 1024, 2000), ("section7_2", 16384, 200),
                       ("sparse_graph", 64, 20)],
                 repeats=5, strong_budget=60.0, vec_budget=5.0, loop_budget=5.0, min_rounds=5,
                 cli=True),
    "gpu": dict(rows=[("section7_2", 10_000, 1000), ("section7_2", 100_000, 1000),
                      ("section7_2", 1_000_000, 100), ("sparse_graph", 10_000, 20)],
                repeats=3, strong_budget=10.0, vec_budget=5.0, loop_budget=2.0, min_rounds=2,
                cli=False),
}


def _gsjax_memory_mb(compiled):
    stats = jax.devices()[0].memory_stats()
    if stats and "peak_bytes_in_use" in stats:
        return stats["peak_bytes_in_use"] / 2**20
    try:
        ma = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 -- not every backend implements it
        return None
    if ma is None:
        return None
    total = ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes
    return (total - getattr(ma, "alias_size_in_bytes", 0)) / 2**20


def _sweep(w, kind, seeds, horizon):
    """gsjax's sweep as ``runner.sweep`` configures it (compacted solver for lazy algorithms,
    buffer ``max(2, S // 16)``, totals only): ``(algo, fn, args)``, ``fn(*args)`` the call."""
    algo = make(kind, w["structure"], AgentSpec(**w["spec"]))
    fn = runner.make_sweep(algo, w["structure"], horizon, record_every=horizon,
                           compact=not algo.always_solves, buffer=max(2, seeds // 16))
    keys = runner.seed_keys(jax.random.key(0), jnp.arange(seeds, dtype=jnp.uint32))
    return algo, fn, (keys, w["problem"], params(w), jnp.float32(w["move_cost"]))


def measure_scaling(w, kind, small: int, large: int, horizon: int, repeats: int) -> dict:
    """gsjax alone at ``small`` and at ``large`` seeds (same horizon), alternated repetition by
    repetition, medians, compile apart: seed-rounds/s of each, and the state the large run moves
    (its carry read and written once a round: ``2 x carry bytes`` a seed-round, the roofline's
    measure) in GB/s."""
    calls = {}
    for seeds in (small, large):
        algo, fn, args = _sweep(w, kind, seeds, horizon)
        compiled = fn.lower(*args).compile()
        calls[seeds] = lambda c=compiled, a=args: jax.block_until_ready(c(*a))
    # the large run's carry and every byte XLA's cost model has one of its rounds touch (a
    # one-round chunk; the solver's loop body counted once, as if one buffer of seeds re-solved
    # every round)
    init, one_round = runner.make_chunked(algo, w["structure"], 1, 1,
                                          compact=not algo.always_solves,
                                          buffer=max(2, large // 16))
    carry = init(*args[:3])
    carry_bytes = sum(x.nbytes for x in jax.tree_util.tree_leaves(carry)) / large
    cost = one_round.lower(carry, 0, *args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    xla_bytes = float(cost.get("bytes accessed", 0.0)) / large
    timed = interleave(calls, repeats)
    rate = {s: statistics.median(s * horizon / t for t in timed[s]["wall"]) for s in calls}
    cpu = {s: statistics.median(s * horizon / t for t in timed[s]["cpu"]) for s in calls}
    return dict(algorithm=kind, small=small, large=large, horizon=horizon, repeats=repeats,
                rate_small=rate[small], rate_large=rate[large], cpu_small=cpu[small],
                cpu_large=cpu[large], ratio=rate[large] / rate[small],
                ratio_cpu=cpu[large] / cpu[small], carry_bytes_per_seed=carry_bytes,
                state_gb_per_s=2 * carry_bytes * rate[large] / 1e9,
                xla_bytes_per_seed_round=xla_bytes, xla_gb_per_s=xla_bytes * rate[large] / 1e9)


def contenders(w, kind, seeds, horizon, cfg):
    """``({name: call}, {name: compile info})``; a call returns ``(seed_rounds, run_s | None,
    mean re-optimisations per seed, rounds run)``."""
    algo, fn, (keys, _, p, move_cost) = _sweep(w, kind, seeds, horizon)
    t0 = time.perf_counter()
    compiled = fn.lower(keys, w["problem"], p, move_cost).compile()
    info = {"gsjax": dict(compile_seconds=time.perf_counter() - t0,
                          memory_mb=_gsjax_memory_mb(compiled)),
            "gsjax sweep": dict(compile_seconds=[], cpu_rates=[]),
            "kernels": dict(kernels.round_kernels(compiled.as_text(), horizon),
                            executed=kernels.executed(compiled, (keys, w["problem"], p,
                                                                 move_cost), horizon))}

    def gsjax_call():
        totals = jax.block_until_ready(compiled(keys, w["problem"], p, move_cost))[0]
        return seeds * horizon, None, float(np.mean(totals.reoptimisations)), horizon

    def sweep_call():
        marks = []  # (wall, CPU) after each chunk: the CPU rate is that of chunks 2..4

        def progress(done, total):
            marks.append((time.perf_counter(), time.process_time()))

        quarter = horizon // 4
        # forget the programs runner keeps in-process: the warm compile is the persistent
        # cache's (a new process's), as in a second `gsjax run`
        runner._PROGRAMS.clear()
        runner._chunked.cache_clear()
        res = runner.sweep(jax.random.key(0), np.arange(seeds), algo, w["structure"],
                           w["problem"], p, move_cost, horizon, record_every=quarter,
                           chunk_rounds=quarter, progress=progress)
        info["gsjax sweep"]["compile_seconds"].append(res.compile_seconds)
        info["gsjax sweep"]["cpu_rates"].append(
            seeds * (horizon - quarter) / (marks[-1][1] - marks[0][1]))
        return seeds * horizon, res.run_seconds, float(np.mean(res.totals.reoptimisations)), \
            horizon

    args = baseline_args(w, kind)
    rngs = iter(np.random.SeedSequence(1).spawn(1000))

    def numpy_call(fn, budget, n):
        def call():
            out = fn(**args, horizon=horizon, seeds=n, rng=np.random.default_rng(next(rngs)),
                     max_seconds=budget, min_rounds=cfg["min_rounds"])
            rounds = out.get("rounds_run", min(out["seed_rounds"], horizon))
            touched = -(-out["seed_rounds"] // rounds)  # the loop's seeds run, the last in part
            return out["seed_rounds"], out["seconds"], \
                float(np.sum(out["reoptimisations"]) / touched), rounds
        return call

    calls = {"gsjax": gsjax_call, "gsjax sweep": sweep_call}
    if w["name"] == "section7_2":
        strong = dict(kind=kind, scopes=args["scopes"], theta=args["theta"], s0=args["s0"],
                      lambda_reg=args["lambda_reg"], beta=args["beta"],
                      log_trigger=args["log_trigger"], noise_sigma=args["noise_sigma"],
                      move_cost=args["move_cost"], loss_star=args["loss_star"])
        calls["numpy strong"] = numpy_call(
            lambda **kw: run_strong(**{**strong, **{k: kw[k] for k in (
                "horizon", "seeds", "rng", "max_seconds", "min_rounds")}}),
            cfg["strong_budget"], seeds)
    calls["numpy vectorised"] = numpy_call(run_vectorised, cfg["vec_budget"], seeds)
    calls["numpy loop"] = numpy_call(run_loop, cfg["loop_budget"], min(seeds, LOOP_MAX_SEEDS))
    return calls, info


def measure_row(w, kind, seeds, horizon, cfg) -> list[dict]:
    calls, info = contenders(w, kind, seeds, horizon, cfg)
    timed = interleave(calls, cfg["repeats"])
    rows = []
    for name, t in timed.items():
        sr = [r[0] for r in t["results"]]
        run_s = [r[1] if (name == "gsjax sweep") else wall for r, wall in zip(t["results"],
                                                                              t["wall"])]
        cpu = (statistics.median(info[name]["cpu_rates"][-len(sr):]) if name == "gsjax sweep"
               else statistics.median(n / c for n, c in zip(sr, t["cpu"])))
        comp = info.get(name, {}).get("compile_seconds")
        rows.append(dict(
            workload=w["name"], algorithm=kind, seeds=seeds, horizon=horizon, contender=name,
            rate_wall=statistics.median(n / s for n, s in zip(sr, run_s)), rate_cpu=cpu,
            repeats=len(sr), rounds=min(r[3] for r in t["results"]),
            reoptimisations=statistics.median(r[2] for r in t["results"]),
            compile_seconds=comp if not isinstance(comp, list) else (comp[0] if comp else None),
            compile_seconds_warm=(statistics.median(comp[1:]) if isinstance(comp, list)
                                  and len(comp) > 1 else None),
            memory_mb=info.get(name, {}).get("memory_mb"),
            kernels=info["kernels"] if name == "gsjax" else None,
            walls=t["wall"], cpus=t["cpu"]))
    base = next((r for r in rows if r["contender"] == "numpy strong"), None)
    for r in rows:
        r["vs_strong_wall"] = r["rate_wall"] / base["rate_wall"] if base else None
        r["vs_strong_cpu"] = (r["rate_cpu"] / base["rate_cpu"]
                              if base and r["rate_cpu"] else None)
    return rows


def run_cli(seeds, horizon) -> dict:
    """``gsjax run section7_2 --seeds S --horizon T`` in a subprocess, twice: with an empty
    persistent compilation cache (cold), then again with the cache that run filled (warm).
    The rates are the cold run's; ``compile_warm`` is the second run's compile time."""
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for attempt in ("cold", "warm"):
            out = Path(tmp) / attempt
            cmd = [sys.executable, "-m", "gsjax", "run", "section7_2", "--seeds", str(seeds),
                   "--horizon", str(horizon), "--out", str(out), "--quiet", "--cache-dir",
                   str(Path(tmp) / "cache")]
            env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep +
                       os.environ.get("PYTHONPATH", ""))
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
            wall = time.perf_counter() - t0
            if proc.returncode:
                return dict(command=" ".join(cmd[2:]), error=proc.stderr.strip()[-500:])
            runs.append((wall, json.loads((out / "summary.json").read_text())))
    (wall, summary), (_, warm) = runs
    algos = {name: dict(run_seconds=a["run_seconds"], compile_seconds=a["compile_seconds"],
                        compile_warm=warm["algorithms"][name]["compile_seconds"],
                        rate=seeds * horizon / a["run_seconds"])
             for name, a in summary["algorithms"].items()}
    return dict(command=f"gsjax run section7_2 --seeds {seeds} --horizon {horizon}",
                seeds=seeds, horizon=horizon, wall_seconds=wall, algorithms=algos)


# ------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------


def _fmt(x, digits=3):
    if x is None:
        return "–"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def results_markdown(res) -> str:
    m = res["meta"]
    lines = [
        "# gsjax speed against NumPy",
        "",
        f"Written by `benchmarks/run.py` ({m['mode']} mode, {m['start']['time']}). Command:",
        "",
        "```",
        m["command"],
        "```",
        "",
        f"Machine: `jax.devices()` = {m['devices']}; {m['start']['cpu_count']} CPU cores; "
        f"{m['platform']}; load average {m['start']['loadavg']} at start, "
        f"{m.get('end', {}).get('loadavg', '(running)')} at end (the machine is shared). "
        f"jax {m['jax_version']}, numpy {m['numpy_version']}; gsjax float32, NumPy float64. "
        f"Total time {m.get('total_seconds', 0):.0f} s"
        + (f" ({m['cpu_seconds']:.0f} CPU-seconds, the `gsjax run` subprocess included)."
           if "cpu_seconds" in m else "."),
        "",
    ]
    for name, desc in m["workloads"].items():
        lines.append(f"* `{name}`: {desc}.")
    lines += [
        "",
        "Contenders alternated repetition by repetition in one process (A B C ... C B A ...), "
        "medians of N repetitions; rates are seed-rounds per second of wall time and of the "
        "process's CPU time (all threads); compile apart (`compile s`; `gsjax sweep`: cold, "
        "then median warm from the persistent cache). `vs strong` = rate / the strong NumPy "
        "baseline's rate (> 1: faster than it). `T'`: rounds run when a NumPy budget cut the "
        "call short. See the docstring of `benchmarks/run.py` for what each contender is.",
        "",
        "| workload | algorithm | S | T | contender | wall /s | CPU /s | **vs strong (wall)** | "
        "vs strong (CPU) | N | T' | re-opt / seed | compile s | MB |",
        "|" + "---|" * 14,
    ]
    for r in res["rows"]:
        comp = _fmt(r["compile_seconds"], 2)
        if r.get("compile_seconds_warm") is not None:
            comp += f" / {_fmt(r['compile_seconds_warm'], 2)} warm"
        lines.append(
            f"| {r['workload']} | {r['algorithm']} | {r['seeds']} | {r['horizon']} | "
            f"{r['contender']} | {_fmt(r['rate_wall'])} | {_fmt(r['rate_cpu'])} | "
            f"**{_fmt(r['vs_strong_wall'])}** | {_fmt(r['vs_strong_cpu'])} | {r['repeats']} | "
            f"{r['rounds'] if r['rounds'] < r['horizon'] else ''} | "
            f"{_fmt(r['reoptimisations'])} | {comp} | {_fmt(r['memory_mb'])} |")
    lines += [
        "",
        "Reading it: on a shared machine the wall rates swing from one repetition to the next "
        "(other sessions' load falls on whichever call is running); the CPU rates (process CPU "
        "time, every thread) are the steadier comparison. The NumPy baselines run on one "
        "thread. `re-opt / seed`: mean re-optimisations per seed over the rounds run (NumPy "
        "draws its own noise, so these agree in distribution; with the same noise they agree "
        "exactly, `tests/test_baselines.py`).",
    ]
    lines += _targets_markdown(res)
    cli = res.get("cli")
    if cli:
        lines += ["", "## Through the command line", ""]
        if "error" in cli:
            lines.append(f"`{cli['command']}` failed: {cli['error']}")
        else:
            lines += [
                f"`{cli['command']}` (run as a subprocess after the table above, twice: "
                "with an empty and with a warm persistent compilation cache; "
                f"{cli['wall_seconds']:.0f} s in all, start-up included). Rates from "
                "`summary.json`'s `run_seconds` (chunking, checkpoints and records included, "
                "compile excluded); `vs strong`: against the strong NumPy median wall rate "
                "of the same algorithm in the table, per seed-round (`lazy_own` against "
                "`lazy`).",
                "",
                "| algorithm | run s | compile s (cold) | compile s (warm) | seed-rounds/s | "
                "**vs strong** |",
                "|---|---|---|---|---|---|",
            ]
            for name, a in cli["algorithms"].items():
                kind = "lazy" if name == "lazy_own" else name
                base = next((r["rate_wall"] for r in res["rows"] if r["contender"] ==
                             "numpy strong" and r["algorithm"] == kind and r["seeds"] ==
                             cli["seeds"]), None)
                lines.append(f"| {name} | {a['run_seconds']:.2f} | {a['compile_seconds']:.1f} "
                             f"| {a.get('compile_warm', float('nan')):.1f} | {_fmt(a['rate'])} "
                             f"| **{_fmt(base and a['rate'] / base)}** |")
    if res.get("kernels"):
        lines += ["", "## Kernels per round", "", kernels.markdown(res["kernels"]),
                  "Counted from the optimised HLO by `benchmarks/kernels.py` (its docstring "
                  "says how)."]
    return "\n".join(lines) + "\n"


def _targets_markdown(res) -> list[str]:
    """Issue 16's targets against this run's numbers (section7_2 at the first row's S)."""
    rows = [r for r in res["rows"] if r["workload"] == "section7_2"]
    if not rows:
        return []
    seeds = rows[0]["seeds"]
    out = ["", f"Targets of issue 16 (section7_2, S = {seeds}; gsjax / strong NumPy, wall and "
           "CPU):", ""]
    for kind in dict.fromkeys(r["algorithm"] for r in rows):
        for name in ("gsjax", "gsjax sweep"):
            r = next((x for x in rows if x["algorithm"] == kind and x["contender"] == name
                      and x["seeds"] == seeds), None)
            if r and r["vs_strong_wall"] is not None:
                ok = "holds" if min(r["vs_strong_wall"], r["vs_strong_cpu"] or 0) >= 3 else \
                    "not met"
                out.append(f"* {kind}, `{name}` >= 3x: {_fmt(r['vs_strong_wall'])}x wall, "
                           f"{_fmt(r['vs_strong_cpu'])}x CPU -- {ok}.")
    ks = [(r["algorithm"], r["kernels"]["executed"]) for r in rows
          if r["contender"] == "gsjax" and r.get("kernels") and r["seeds"] == seeds]
    if ks:
        out.append("* kernels per round <= 40 (executed, from a profiler trace): " +
                   ", ".join(f"{k} {n:.0f}" for k, n in ks) +
                   (" -- holds." if max(n for _, n in ks) <= 40 else " -- not met."))
    warm = [r["compile_seconds_warm"] for r in rows if r.get("compile_seconds_warm")]
    if warm:
        out.append(f"* warm-cache compile < 2 s: `runner.sweep` recompiled from the persistent "
                   f"cache in {_fmt(max(warm), 2)} s at most (the CLI keeps one by default: "
                   f"`--cache-dir`, `--no-cache`) -- "
                   f"{'holds' if max(warm) < 2 else 'not met'} in-process.")
    cli = res.get("cli")
    if cli and "algorithms" in cli:
        comp = sum(a["compile_seconds"] for a in cli["algorithms"].values())
        run = sum(a["run_seconds"] for a in cli["algorithms"].values())
        out.append(f"* `{cli['command']}` compiles less than it runs (cold cache): compile "
                   f"{comp:.1f} s, run {run:.1f} s -- {'holds' if comp < run else 'not met'}.")
        warm_cli = [a.get("compile_warm") for a in cli["algorithms"].values()]
        if None not in warm_cli:
            out.append(f"* the same command again (warm cache) compiles in < 2 s per algorithm: "
                       f"{_fmt(max(warm_cli), 2)} s at most -- "
                       f"{'holds' if max(warm_cli) < 2 else 'not met'}.")
    sc = res.get("scaling")
    if sc:
        bw = sc["peaks"]["stream_scale_gb_per_s"]
        rows = sc["rows"]
        ok = all(r["ratio"] >= 1.5 for r in rows)
        out.append(f"* throughput at S = {rows[0]['large']} >= 1.5x that at S = "
                   f"{rows[0]['small']} (T = {rows[0]['horizon']}, gsjax alone, alternated), or "
                   f"the round at the memory roofline: " + ", ".join(
                       f"{r['algorithm']} {_fmt(r['ratio'])}x wall, {_fmt(r['ratio_cpu'])}x CPU "
                       f"(at S = {r['large']}: {r['state_gb_per_s']:.2f} GB/s of state, "
                       f"{100 * r['state_gb_per_s'] / bw:.0f} % of the {bw:.1f} GB/s stream "
                       f"bandwidth measured in this run; {r['xla_gb_per_s']:.1f} GB/s counting "
                       f"every byte XLA's cost model has a round touch, "
                       f"{r['xla_bytes_per_seed_round']:,.0f} B a seed-round)" for r in rows) +
                   f" -- {'holds' if ok else 'not met'}.")
    return out


_DATED = re.compile(r"^## \d{4}-\d{2}-\d{2}", re.M)


def _write_report(path: Path, generated: str) -> None:
    """Write the generated report at the top of ``path``, keeping the file's dated sections
    (``## YYYY-MM-DD ...``, the measurements written by hand below the table) after it."""
    old = path.read_text() if path.is_file() else ""
    dated = _DATED.search(old)
    kept = "\n\n" + old[dated.start():].rstrip("\n") if dated else ""
    write_text(path, generated.rstrip("\n") + kept + "\n")


def _extra_markdown(folder: Path) -> str:
    """Sections from benchmarks/noise.py, roofline.py and variants.py results, when present."""
    parts = []
    files = {n: folder / f"{n}.json" for n in ("noise", "roofline", "variants")}
    if files["noise"].is_file():
        parts += ["", "## Noise options", "", noise.markdown(json.loads(
            files["noise"].read_text()))]
    if files["roofline"].is_file():
        parts += ["", "## The limit: roofline and where the time goes", "",
                  roofline.markdown(json.loads(files["roofline"].read_text()))]
    if files["variants"].is_file():
        d = json.loads(files["variants"].read_text())
        parts += ["", "## Variants: noise draws and small-matrix layouts", "",
                  variants.markdown(d["meta"], d["rows"])]
    missing = [f"`benchmarks/{n}.py`" for n, f in files.items() if not f.is_file()]
    if missing:
        parts += ["", f"({' and '.join(missing)} add their sections here when their results "
                  f"are in `{folder.name}/`; absent from this run.)"]
    return "\n".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="section7_2 at 1024 seeds, < 5 minutes")
    ap.add_argument("--mode", choices=sorted(MODES), default=None,
                    help="size preset (default: full, or quick with --quick)")
    ap.add_argument("--out", default="benchmarks/results/latest.json", help="results JSON")
    ap.add_argument("--results-md", default="benchmarks/RESULTS.md", help="markdown report")
    ap.add_argument("--workloads", default="section7_2,sparse_graph",
                    help="comma-separated subset of section7_2,sparse_graph")
    ap.add_argument("--algorithms", default=None, help="comma-separated subset of algorithms")
    ap.add_argument("--no-cli", action="store_true", help="skip the `gsjax run` subprocess")
    ap.add_argument("--repeats", type=int, default=None, help="override the mode's repetitions")
    ap.add_argument("--render", action="store_true",
                    help="measure nothing: rewrite --results-md from --out (and the other JSONs)")
    args = ap.parse_args(argv)
    mode = args.mode or ("quick" if args.quick else "full")
    cfg = dict(MODES[mode])
    if args.repeats is not None:
        cfg["repeats"] = args.repeats
    wanted = [x.strip() for x in args.workloads.split(",") if x.strip()]
    for name in wanted:
        if name not in BUILDERS:
            ap.error(f"--workloads: unknown {name!r}; allowed: {sorted(BUILDERS)}")
    out_path, md_path = (Path(p) if Path(p).is_absolute() else Path.cwd() / p
                         for p in (args.out, args.results_md))
    if args.render:
        res = json.loads(out_path.read_text())
        _write_report(md_path, results_markdown(res) + _extra_markdown(out_path.parent))
        print(f"wrote {md_path} from {out_path}")
        return 0
    cache = tempfile.mkdtemp(prefix="gsjax-bench-cache-")
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    t_begin = time.perf_counter()
    argv = sys.argv[1:] if argv is None else argv
    meta = dict(mode=mode, command=" ".join(["python benchmarks/run.py", *argv]),
                start=machine(), devices=[str(d) for d in jax.devices()],
                platform=platform.platform(), jax_version=jax.__version__,
                numpy_version=np.__version__, settings=cfg, workloads={})
    res = {"meta": meta, "rows": []}
    built = {}
    for name, seeds, horizon in cfg["rows"]:
        if name not in wanted:
            continue
        if name not in built:
            built[name] = BUILDERS[name]()
            meta["workloads"][name] = built[name]["description"]
        w = built[name]
        kinds = w["algorithms"] if args.algorithms is None else [
            k for k in args.algorithms.split(",") if k in w["algorithms"]]
        for kind in kinds:
            rows = measure_row(w, kind, seeds, horizon, cfg)
            res["rows"] += rows
            for r in rows:
                print(f"{name:>12s} {kind:>10s} S={seeds:<7d} T={horizon:<5d} "
                      f"{r['contender']:>16s} {r['rate_wall']:>13,.0f}/s wall "
                      f"{_fmt(r['rate_cpu']):>12s}/s CPU  x{_fmt(r['vs_strong_wall'])} strong",
                      flush=True)
            meta["total_seconds"] = time.perf_counter() - t_begin
            write_json(out_path, res)
            _write_report(md_path, results_markdown(res))
    first = next(((s, h) for n, s, h in cfg["rows"] if n == "section7_2"), None)
    if first and "section7_2" in wanted:
        res["kernels"] = {"meta": dict(command=meta["command"], note=" (the gsjax rows' programs)",
                                       workload="section7_2", seeds=first[0],
                                       time=machine()["time"]),
                          "rows": [dict(r["kernels"], algorithm=r["algorithm"])
                                   for r in res["rows"] if r["kernels"] and r["seeds"] ==
                                   first[0] and r["workload"] == "section7_2"]}
        if cfg.get("scaling"):
            small, large, horizon = cfg["scaling"]
            w = built["section7_2"]
            kinds = w["algorithms"] if args.algorithms is None else [
                k for k in args.algorithms.split(",") if k in w["algorithms"]]
            res["scaling"] = {"peaks": roofline.machine_peaks(3), "rows": []}
            for kind in kinds:
                r = measure_scaling(w, kind, small, large, horizon, cfg["repeats"])
                res["scaling"]["rows"].append(r)
                print(f"scaling {kind:>10s} S={large} / S={small}: x{r['ratio']:.2f} wall, "
                      f"x{r['ratio_cpu']:.2f} CPU, {r['state_gb_per_s']:.2f} GB/s of state",
                      flush=True)
        if cfg["cli"] and not args.no_cli:
            res["cli"] = run_cli(first[0], cfg.get("cli_horizon", first[1]))
    meta["end"] = machine()
    meta["total_seconds"] = time.perf_counter() - t_begin
    meta["cpu_seconds"] = time.process_time() + resource.getrusage(
        resource.RUSAGE_CHILDREN).ru_utime
    write_json(out_path, res)
    _write_report(md_path, results_markdown(res) + _extra_markdown(out_path.parent))
    print(f"wrote {out_path} and {md_path} in {meta['total_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
