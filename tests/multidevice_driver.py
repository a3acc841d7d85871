"""Run the command-line paths of ``tests/test_multidevice.py`` in one process.

``python tests/multidevice_driver.py OUT`` runs, through :func:`gsjax.cli.main` (the code behind
the ``gsjax`` command), a multi-chunk run, a crash after the second checkpoint followed by
``--resume``, a grid, an ask/tell tuner loop and a gradient tune, writing each into a folder of
``OUT``. The device count is whatever ``XLA_FLAGS`` gives this process; the test runs the script
with 1, 2 and 4 fake CPU devices and compares the folders.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax

from gsjax import checkpoint, cli

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
from cases import TUNE_BANDIT  # noqa: E402

# 7 seeds: not a multiple of 2 or 4, so the padding of the seed axis is exercised. linucb runs
# the plain vmap chunk, lazy the compacted one (async_lazy shares lazy's path).
CONFIG = """
name = "multidevice"
seeds = 7
horizon = 40
record_every = 5
[problem]
structure = "graph"
graph = "chain"
num_nodes = 4
[problem.theta]
distribution = "normal"
per_seed = true
[agent]
lambda_reg = 0.3
beta = 0.6
solver = "vertex"
[algorithms.linucb]
[algorithms.lazy]
"""

GRID = """
[grid]
beta = [0.3, 1.0]
trigger_ratio = [2.0, 4.0]
"""

# the golden cases' tiny tune config (a relaxed lazy run on two blocks)
TUNE = TUNE_BANDIT


class Crash(BaseException):
    """Stands in for a kill: raised right after a checkpoint is on disk."""


def _run(*argv: str) -> None:
    rc = cli.main([*argv])
    if rc != 0:
        raise SystemExit(f"gsjax {' '.join(argv)} exited {rc}")


def crash_after(n: int):
    """Make the n-th checkpoint write the last thing the process does before 'dying'."""
    real, calls = checkpoint.save, [0]

    def save(*args, **kwargs):
        path = real(*args, **kwargs)
        calls[0] += 1
        if calls[0] == n:
            checkpoint.save = real
            raise Crash
        return path

    checkpoint.save = save


def tuner_loop(cfg: Path, state: Path, rounds: int = 12) -> dict:
    """init / suggest / observe through the CLI; losses from a fixed linear model."""
    import contextlib
    import io

    def call(*argv: str) -> str:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            _run("tuner", *argv)
        return buf.getvalue()

    call("init", str(cfg), str(state), "--algorithm", "lazy")
    for t in range(rounds):
        s = json.loads(call("suggest", str(state)))
        # criterion i reads node i and its chain neighbours: a deterministic loss per criterion
        losses = [0.1 * (i + 1) * sum(s) - 0.3 * s[i] + 0.01 * t for i in range(len(s))]
        call("observe", str(state), "--setting", json.dumps(s), "--losses", json.dumps(losses))
    return json.loads(call("status", str(state), "--compact"))


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cfg = out / "c.toml"
    cfg.write_text(CONFIG)
    grid = out / "grid.toml"
    grid.write_text(CONFIG.replace("[algorithms.linucb]\n", "") + GRID)
    tune = out / "tune.toml"
    tune.write_text(TUNE)

    _run("run", str(cfg), "--out", str(out / "chunks"), "--chunk", "10", "--quiet")

    crash_after(6)  # 4 chunks of linucb, then lazy part-way: a finished run and a carry saved
    try:
        _run("run", str(cfg), "--out", str(out / "resumed"), "--chunk", "10", "--quiet")
    except Crash:
        pass
    else:
        raise SystemExit("the run was not interrupted")
    assert (out / "resumed" / checkpoint.FILENAME).exists()
    _run("run", "--resume", str(out / "resumed"), "--chunk", "10", "--quiet")

    _run("run", str(grid), "--out", str(out / "grid"), "--chunk", "20", "--quiet")
    status = tuner_loop(cfg, out / "tuner.npz")
    (out / "tuner_status.json").write_text(json.dumps(status))
    _run("tune", str(tune), "--params", "beta,trigger", "--steps", "1", "--heldout-seeds", "3",
         "--out", str(out / "tune"), "--quiet")
    (out / "devices.json").write_text(json.dumps(jax.device_count()))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
