"""Golden cases: every built-in config at a tiny size, the tuner and ``gsjax tune``.

Recorded before the one-core refactor (issue 15) by ``python tests/golden/record.py`` and kept
equal by ``tests/golden/test_golden.py``. Everything goes through :func:`gsjax.cli.main`, the
code behind the ``gsjax`` command, so that moving code inside the package cannot move a case.

A case's result is a pair ``(doc, arrays)``: ``doc`` a JSON-able dict (a summary with the
machine facts removed) and ``arrays`` a flat dict of NumPy arrays.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np

from gsjax import cli

REPO = Path(__file__).resolve().parents[2]
# Keys whose values are facts about the machine or the checkout, not results.
NOT_RESULTS = {"compile_seconds", "run_seconds", "wall_seconds", "devices", "git_commit",
               "jax_version", "figures", "config_hash"}

TINY = ["seeds=2", "horizon=8", "record_every=2"]
TINY_OCO = ["seeds=3", "horizon=[40]"]
# Per config: the overrides that make it tiny (its paper-size sweeps are not part of `gsjax run`).
RUNS = {
    "adaptive_graph": TINY + ["algorithms.adaptive.warmup=4"],
    "example_graph": TINY,
    "figure2_joint": TINY,
    "large_graphs": TINY,
    "section6_heterogeneous": TINY_OCO,
    "section6_rates": TINY_OCO,
    "section6_tradeoff": ["seeds=3", "horizon=40"],
    "section7_1": TINY,
    "section7_2": TINY,
    "section7_3": TINY,
}

TUNE_BANDIT = """
name = "golden_tune"
seeds = 2
horizon = 20
[problem]
structure = "blocks"
num_blocks = 2
block_dim = 2
[problem.theta]
distribution = "normal"
per_seed = true
[problem.noise]
sigma = 0.5
[agent]
lambda_reg = [0.3, 1.0]
beta = 0.5
[algorithms.linucb]
[algorithms.lazy]
[relaxed]
temperature = 0.1
solve_temperature = 0.05
"""

TUNER = """
name = "golden_tuner"
seeds = 1
horizon = 10
[problem]
structure = "graph"
graph = "chain"
num_nodes = 3
[agent]
lambda_reg = 0.3
beta = 0.6
solver = "vertex"
[algorithms.lazy]
[algorithms.async_lazy]
"""


def results(x):
    """``x`` without the machine facts (recursively)."""
    if isinstance(x, dict):
        return {k: results(v) for k, v in x.items() if k not in NOT_RESULTS}
    if isinstance(x, list):
        return [results(v) for v in x]
    return x


def _main(*argv: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cli.main([*argv])
    if rc != 0:
        raise RuntimeError(f"gsjax {' '.join(argv)} exited {rc}")
    return buf.getvalue()


def _folder(out: Path):
    doc = results(json.loads((out / "summary.json").read_text()))
    with np.load(out / "arrays.npz") as z:
        arrays = {k: z[k] for k in z.files}
    return doc, arrays


def run_case(name: str, tmp: Path):
    """``gsjax run NAME`` at its tiny size."""
    out = tmp / name
    argv = ["run", name, "--out", str(out), "--quiet"]
    for o in RUNS[name]:
        argv += ["--set", o]
    _main(*argv)
    return _folder(out)


def tuner_case(algorithm: str, tmp: Path):
    """``gsjax tuner`` init / suggest / observe / status, losses from a fixed model."""
    cfg = tmp / "tuner.toml"
    cfg.write_text(TUNER)
    state = tmp / f"tuner_{algorithm}.npz"
    _main("tuner", "init", str(cfg), str(state), "--algorithm", algorithm)
    settings = []
    for t in range(10):
        s = json.loads(_main("tuner", "suggest", str(state)))
        settings.append(s)
        losses = [0.2 * (i + 1) * s[i] - 0.1 * sum(s) + 0.05 * ((t * 7 + i) % 3) for i in range(3)]
        _main("tuner", "observe", str(state), "--setting", json.dumps(s),
              "--losses", json.dumps(losses))
    status = json.loads(_main("tuner", "status", str(state), "--compact"))
    return results(status), {"settings": np.asarray(settings)}


def tune_case(kind: str, tmp: Path):
    """``gsjax tune`` on a bandit config (two knobs) or an OCO config (``eta_scale``)."""
    out = tmp / f"tune_{kind}"
    if kind == "bandit":
        cfg = tmp / "tune.toml"
        cfg.write_text(TUNE_BANDIT)
        argv = [str(cfg), "--params", "beta,trigger", "--steps", "2", "--heldout-seeds", "2"]
    else:
        argv = ["section6_tradeoff", "--params", "eta_scale", "--steps", "2", "--seeds", "3",
                "--heldout-seeds", "3", "--horizon", "40"]
    _main("tune", *argv, "--out", str(out), "--quiet")
    doc = {"tune": results(json.loads((out / "tune.json").read_text())),
           "trace": results(json.loads((out / "trace.json").read_text())["trace"])}
    return doc, {}


CASES = {f"run_{n}": (run_case, n) for n in RUNS}
CASES.update({"tuner_lazy": (tuner_case, "lazy"), "tuner_async_lazy": (tuner_case, "async_lazy"),
              "tune_bandit": (tune_case, "bandit"), "tune_oco": (tune_case, "oco")})
