"""``gsjax run`` as one program over several processes (jax.distributed), with real processes.

Every process is ``python -m gsjax run ... --coordinator 127.0.0.1:PORT --num-processes N
--process-id I`` (through ``tests/distributed_driver.py`` where a process must die or claim
other code), on the CPU backend with 2 fake devices each, talking over the loopback address.
The reference is the same config run by one process with one device: every array of the run
folder must be equal bit for bit (per-seed keys from global seed ids; the same arithmetic per
seed on CPU), and the summaries equal once timings and machine facts are dropped.

Default: a 2-process run that loses process 1 mid-run (SIGKILL after the second checkpoint):
process 0 stops with one line naming process 1 and exit status 4, keeps the checkpoint, and the
same command resumes it to the reference's numbers; processes with another config or another
code (these started with SLURM's variables instead of flags, on this one host) are refused at
start-up, each with one line; bad flags, one line. Slow: 4 processes
uninterrupted, and a checkpoint of 2 processes resumed by 1.

Subprocess timeouts are hang guards only; nothing here asserts a duration.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gsjax import checkpoint, cli, distributed

ROOT = Path(__file__).resolve().parents[1]
DRIVER = Path(__file__).with_name("distributed_driver.py")
GUARD = 600  # seconds: a hang guard for a whole run on a loaded machine, not a measurement
HEARTBEAT = "10"  # seconds without a heartbeat before a process counts as lost

# 5 seeds: not a multiple of the 4 (or 8) devices, so the seed axis is padded. lazy runs the
# compacted round, whose gather of the re-optimising seeds crosses devices (and processes).
CONFIG = """
name = "distributed"
seeds = 5
horizon = 30
record_every = 5
[problem]
structure = "graph"
graph = "chain"
num_nodes = 3
[problem.theta]
distribution = "normal"
per_seed = true
[agent]
lambda_reg = 0.3
beta = 0.6
solver = "vertex"
[algorithms.lazy]
"""
# Keys whose values are machine facts, not results.
NOT_RESULTS = {"compile_seconds", "run_seconds", "wall_seconds", "devices", "git_commit",
               "processes"}


def _free_port(candidates=(0,)) -> int:
    """A port free on the loopback address now (any, or the first free of ``candidates``)."""
    for port in candidates:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise OSError("no free port among the candidates")


def _env(cache: Path, devices: int) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu", GSJAX_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    flags = env.get("XLA_FLAGS", "").replace("--xla_force_host_platform_device_count=", "--x=")
    env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}"
    return env


def _gsjax(args, cache: Path, devices: int = 1, driver=(), env=None) -> subprocess.Popen:
    cmd = [sys.executable, str(DRIVER), *driver] if driver else [sys.executable, "-m", "gsjax"]
    return subprocess.Popen([*cmd, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**_env(cache, devices), **(env or {})}, cwd=ROOT)


def _launch(n: int, cfg: Path, out: Path, cache: Path, extra=(), drivers=None, extras=None):
    """The n processes of one run (2 fake CPU devices each); ``drivers[i]``: process i's
    ``tests/distributed_driver.py`` options, ``extras[i]``: its own further arguments."""
    port = _free_port()
    return [_gsjax(["run", cfg, "--out", out, "--chunk", "5", *extra,
                    *(extras or {}).get(i, ()),
                    "--coordinator", f"127.0.0.1:{port}", "--num-processes", n,
                    "--process-id", i, "--heartbeat-timeout", HEARTBEAT],
                   cache, devices=2, driver=(drivers or {}).get(i, ()))
            for i in range(n)]


def _launch_slurm(n: int, cfg: Path, out: Path, cache: Path, drivers=None):
    """The n processes of one run as ``srun`` starts them on one node: no multi-process flag,
    SLURM's variables (jax.distributed detects them; its coordinator port is
    ``61440 + job id % 4096``, so the job id is chosen for a free port)."""
    port = _free_port(random.Random().sample(range(61440, 65536), 4096))
    slurm = {"SLURM_JOB_ID": str(port - 61440), "SLURM_STEP_NODELIST": "localhost",
             "SLURM_NTASKS": str(n)}
    procs = []
    for i in range(n):
        env = {**slurm, "SLURM_PROCID": str(i), "SLURM_LOCALID": str(i)}
        procs.append(_gsjax(["run", cfg, "--out", out, "--chunk", "5"], cache, devices=2,
                            driver=(drivers or {}).get(i, ()), env=env))
    return procs


def _wait(procs) -> list[tuple[int, str, str]]:
    out = []
    try:
        for p in procs:
            o, e = p.communicate(timeout=GUARD)
            out.append((p.returncode, o, e))
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
    return out


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def _results(x):
    if isinstance(x, dict):
        return {k: _results(v) for k, v in x.items() if k not in NOT_RESULTS}
    if isinstance(x, list):
        return [_results(v) for v in x]
    return x


def _same_run(reference: Path, other: Path) -> None:
    """``other`` holds ``reference``'s results: every array bit for bit, the summary but for
    machine facts."""
    a = json.loads((reference / "summary.json").read_text())
    b = json.loads((other / "summary.json").read_text())
    assert _results(a) == _results(b)
    with np.load(reference / "arrays.npz") as za, np.load(other / "arrays.npz") as zb:
        assert sorted(za.files) == sorted(zb.files)
        for key in za.files:
            np.testing.assert_array_equal(za[key], zb[key], err_msg=key)
    assert a["algorithms"]["lazy"]["reoptimisations"]["mean"] > 0  # not two empty runs
    assert not (other / checkpoint.FILENAME).exists()


@pytest.fixture
def cfg(tmp_path) -> Path:
    path = tmp_path / "distributed.toml"
    path.write_text(CONFIG)
    return path


def test_two_processes_lose_one_stop_naming_it_and_resume_to_one_process_numbers(tmp_path,
                                                                                  cfg):
    cache, out, ref = tmp_path / "cache", tmp_path / "two", tmp_path / "one"
    # The single-process reference runs alongside (no distributed flags: a plain run).
    single = _gsjax(["run", cfg, "--out", ref, "--chunk", "5", "--quiet"], tmp_path / "c1")
    # Process 1 dies (SIGKILL) as chunk 3 gathers its results: chunks 1-2 are checkpointed,
    # chunk 2's though its write (a slow disk) outlasts the heartbeat that reports the loss.
    procs = _launch(2, cfg, out, cache, ["--quiet"],
                    {0: ["--slow-save-at", "10"], 1: ["--die-at-chunk", "3"]})
    (rc0, _, err0), (rc1, _, _) = _wait(procs)
    assert rc1 == -signal.SIGKILL
    assert rc0 == distributed.LOST, err0[-3000:]
    lines = _errors(err0)
    assert len(lines) == 1, err0[-3000:]
    assert "process 1 of 2 stopped responding" in lines[0], lines
    assert str(out) in lines[0]  # where the checkpoint is
    meta = checkpoint.meta(out)
    assert meta["processes"] == 2 and meta["current"]["rounds_done"] == 10
    assert not (out / "summary.json").exists()

    # The same command again resumes the checkpoint (said on stdout without --quiet).
    (rc0, o0, e0), (rc1, o1, e1) = _wait(_launch(2, cfg, out, cache))
    assert (rc0, rc1) == (0, 0), e0[-3000:] + e1[-3000:]
    assert "resuming from" in o0 and "lazy at round 10" in o0, o0
    # process 0 speaks for the run (gloo prints its own "[Gloo] Rank ..." lines)
    assert "resuming" not in o1 and "wrote" not in o1, o1
    assert json.loads((out / "summary.json").read_text())["meta"]["processes"] == 2

    (rc, _, err), = _wait([single])
    assert rc == 0, err[-3000:]
    _same_run(ref, out)


def test_processes_with_another_config_or_code_are_refused_with_one_line(tmp_path, cfg):
    cache = tmp_path / "cache"
    # process 1 runs another beta in one run, claims other code in the other (started the
    # way srun starts them: the processes come from SLURM's variables)
    runs = [_launch(2, cfg, tmp_path / "a", cache, extras={1: ["--set", "agent.beta=0.7"]}),
            _launch_slurm(2, cfg, tmp_path / "b", cache, {1: ["--code-version", "gsjax 0.0"]})]
    expected = ["different config hash from process 0", "different code from process 0"]
    for procs, what in zip(runs, expected):
        for rc, _, err in _wait(procs):
            assert rc == 2, err[-3000:]
            lines = _errors(err)
            assert len(lines) == 1 and what in lines[0], err[-3000:]
            assert "Traceback" not in err
    assert not (tmp_path / "a" / "summary.json").exists()
    assert not (tmp_path / "b" / "summary.json").exists()


@pytest.mark.parametrize("flags, field", [
    (["--coordinator", "127.0.0.1:1"], "--num-processes"),
    (["--coordinator", "localhost", "--num-processes", "2", "--process-id", "0"],
     "--coordinator"),
    (["--coordinator", "127.0.0.1:1", "--num-processes", "2", "--process-id", "2"],
     "--process-id"),
    (["--coordinator", "127.0.0.1:1", "--num-processes", "2", "--process-id", "0",
      "--heartbeat-timeout", "0"], "--heartbeat-timeout"),
])
def test_bad_multi_process_flags_are_one_line(flags, field, capsys, tmp_path, cfg):
    assert cli.main(["run", str(cfg), "--out", str(tmp_path / "o"), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {field}:"), err
    assert distributed.current() is None


@pytest.mark.slow
def test_four_processes_equal_one_and_resume_under_another_count(tmp_path, cfg):
    cache = tmp_path / "cache"
    single = _gsjax(["run", cfg, "--out", tmp_path / "one", "--chunk", "5", "--quiet"],
                    tmp_path / "c1")
    (rc, _, err), = _wait([single])
    assert rc == 0, err[-3000:]
    for rc, _, err in _wait(_launch(4, cfg, tmp_path / "four", cache, ["--quiet"])):
        assert rc == 0, err[-3000:]
    _same_run(tmp_path / "one", tmp_path / "four")
    # a checkpoint of 2 processes (process 0 lost this time) resumed by one process
    procs = _launch(2, cfg, tmp_path / "re", cache, ["--quiet"], {0: ["--die-at-chunk", "4"]})
    _wait(procs)
    assert checkpoint.meta(tmp_path / "re")["processes"] == 2
    (rc, out, err), = _wait([_gsjax(["run", cfg, "--out", tmp_path / "re", "--chunk", "5"],
                                    tmp_path / "c1")])
    assert rc == 0, err[-3000:]
    assert "written by 2 process(es), this run has 1" in out, out
    _same_run(tmp_path / "one", tmp_path / "re")
