"""The command line on 2 (and, with ``-m slow``, 4) fake CPU devices writes what it writes on one.

Each device count runs ``tests/multidevice_driver.py`` in its own process (the device count is
fixed when JAX starts): a run of several chunks, a crash after a checkpoint and ``--resume``, a
grid, an ask/tell tuner loop and ``gsjax tune``. Summaries must agree once timings and device
lists are dropped; arrays bit for bit (the seed-sharded program does the same arithmetic per
seed on CPU). Before the fix, the second chunk of any multi-device run was refused by the
compiled first chunk (issue 14).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

DRIVER = Path(__file__).with_name("multidevice_driver.py")
RUN_FOLDERS = ("chunks", "resumed", "grid")
# Keys whose values are machine facts, not results.
NOT_RESULTS = {"compile_seconds", "run_seconds", "wall_seconds", "devices", "git_commit"}


def _start(out: Path, devices: int) -> subprocess.Popen:
    # Each process keeps its compiled programs in its own cache folder of the test's tmp_path:
    # the crashed run and its --resume load the programs the multi-chunk run compiled (the same
    # config and chunk size), as the command line does by default.
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               GSJAX_CACHE_DIR=str(out.parent / f"cache{devices}"))
    flags = env.get("XLA_FLAGS", "").replace("--xla_force_host_platform_device_count=", "--x=")
    env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}"
    return subprocess.Popen([sys.executable, str(DRIVER), str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _finish(proc: subprocess.Popen, out: Path, devices: int) -> Path:
    _, err = proc.communicate()
    assert proc.returncode == 0, err[-4000:]
    assert json.loads((out / "devices.json").read_text()) == devices
    return out


def _results(x):
    if isinstance(x, dict):
        return {k: _results(v) for k, v in x.items() if k not in NOT_RESULTS}
    if isinstance(x, list):
        return [_results(v) for v in x]
    return x


@pytest.mark.parametrize("devices", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_cli_on_several_devices_equals_one(tmp_path, devices):
    # The single-device reference runs beside the other count, in its own process (a shared
    # fixture would run it once per pytest-xdist worker anyway). 4 devices (2 seeds and a pad
    # on each) with `-m slow`.
    outs = {d: tmp_path / f"devices{d}" for d in (1, devices)}
    procs = {d: _start(out, d) for d, out in outs.items()}
    done = {d: _finish(procs[d], outs[d], d) for d in procs}
    _compare(done[1], done[devices], devices)


def _compare(single: Path, many: Path, devices: int) -> None:
    for name in RUN_FOLDERS:
        a = json.loads((single / name / "summary.json").read_text())
        b = json.loads((many / name / "summary.json").read_text())
        assert b["meta"]["devices"] == [f"cpu:{i}" for i in range(devices)]
        assert _results(a) == _results(b), name
        assert not (many / name / "checkpoint.npz").exists()
        with np.load(single / name / "arrays.npz") as za, np.load(many / name / "arrays.npz") as zb:
            assert sorted(za.files) == sorted(zb.files), name
            for key in za.files:
                np.testing.assert_array_equal(za[key], zb[key], err_msg=f"{name}: {key}")
    # The resumed run is the uninterrupted one, on either device count.
    with np.load(many / "chunks" / "arrays.npz") as za, np.load(many / "resumed" / "arrays.npz") as zb:
        for key in za.files:
            np.testing.assert_array_equal(za[key], zb[key], err_msg=key)
    # Every algorithm re-optimised: the comparison is not between two empty runs.
    summary = json.loads((many / "chunks" / "summary.json").read_text())
    assert all(a["reoptimisations"]["mean"] > 0 for a in summary["algorithms"].values())
    assert (json.loads((single / "tuner_status.json").read_text())
            == json.loads((many / "tuner_status.json").read_text()))
    assert (_results(json.loads((single / "tune" / "tune.json").read_text()))
            == _results(json.loads((many / "tune" / "tune.json").read_text())))
    ta = json.loads((single / "tune" / "trace.json").read_text())
    tb = json.loads((many / "tune" / "trace.json").read_text())
    assert ta["trace"] == tb["trace"]


def _gsjax(out: Path, config: str, host_devices: str, xla_devices: int | None = None,
           resume: bool = False):
    env = dict(os.environ, JAX_PLATFORMS="cpu", GSJAX_HOST_DEVICES=host_devices)
    flags = env.get("XLA_FLAGS", "").replace("--xla_force_host_platform_device_count=", "--x=")
    if xla_devices is not None:
        flags += f" --xla_force_host_platform_device_count={xla_devices}"
    env["XLA_FLAGS"] = flags
    # chunks of 10 rounds throughout: the killed run and its resume load the programs that the
    # 1- and 2-device runs compiled (the session's cache, conftest)
    run = (["--resume", str(out)] if resume else
           [config, "--seeds", "5", "--horizon", "40", "--out", str(out)])
    return subprocess.Popen([sys.executable, "-m", "gsjax", "run", *run, "--chunk", "10",
                             "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_the_command_gives_jax_a_device_per_core_with_the_same_numbers(tmp_path):
    # GSJAX_HOST_DEVICES (default 'auto': one per core) sets JAX's CPU device count for a
    # single-process command; a device count in XLA_FLAGS wins. The vertex and PGD solvers'
    # runs on 2 devices equal the 1-device runs bit for bit (5 seeds: one padded), and so does
    # a run killed after a checkpoint on 1 device and resumed on 2 (a folder from before the
    # command's default changed). (Other configs on several devices: the test above,
    # tests/test_sharding.py.)
    cases = {("section7_1", "1", None): 1, ("section7_1", "2", None): 2,
             ("section7_1", "2", 1): 1}
    procs = {c: _gsjax(tmp_path / "-".join(map(str, c)), *c) for c in cases}
    bad = _gsjax(tmp_path / "bad", "section7_1", "two")
    for c, proc in procs.items():
        _, err = proc.communicate()
        assert proc.returncode == 0, err[-4000:]
        meta = json.loads((tmp_path / "-".join(map(str, c)) / "summary.json").read_text())["meta"]
        assert meta["devices"] == [f"cpu:{i}" for i in range(cases[c])], c
    _, err = bad.communicate()
    assert bad.returncode == 2
    assert err.strip().splitlines() == [
        "error: GSJAX_HOST_DEVICES: expected 'auto' or a count >= 1, got 'two'"]
    # A run killed after a checkpoint on one device resumes on two, to the same numbers.
    cut = tmp_path / "cut"
    crash = ("import sys\nsys.path.insert(0, %r)\nimport multidevice_driver as d\n"
             "d.crash_after(3)\ntry:\n    d._run('run', 'section7_1', '--seeds', '5', "
             "'--horizon', '40', '--chunk', '10', '--out', %r, '--quiet')\n"
             "except d.Crash:\n    pass\nelse:\n    raise SystemExit('not interrupted')\n"
             % (str(DRIVER.parent), str(cut)))
    env = dict(os.environ, JAX_PLATFORMS="cpu", GSJAX_HOST_DEVICES="1")
    subprocess.run([sys.executable, "-c", crash], env=env, check=True)
    assert (cut / "checkpoint.npz").exists() and not (cut / "summary.json").exists()
    resume = _gsjax(cut, "section7_1", "2", resume=True)
    _, err = resume.communicate()
    assert resume.returncode == 0, err[-4000:]
    assert json.loads((cut / "summary.json").read_text())["meta"]["devices"] == ["cpu:0", "cpu:1"]
    with np.load(tmp_path / "section7_1-1-None" / "arrays.npz") as za, \
            np.load(cut / "arrays.npz") as zb:
        assert sorted(za.files) == sorted(zb.files)
        for key in za.files:
            np.testing.assert_array_equal(za[key], zb[key], err_msg=f"resumed: {key}")
    one, two = (tmp_path / f"section7_1-{n}-None" for n in (1, 2))
    assert (_results(json.loads((one / "summary.json").read_text()))
            == _results(json.loads((two / "summary.json").read_text())))
    with np.load(one / "arrays.npz") as za, np.load(two / "arrays.npz") as zb:
        assert sorted(za.files) == sorted(zb.files)
        for key in za.files:
            np.testing.assert_array_equal(za[key], zb[key], err_msg=key)
