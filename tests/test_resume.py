"""Kill a run with SIGKILL mid-way, resume it, and get the uninterrupted run's arrays bit for bit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

CONFIG = """
name = "resume"
seeds = 6
horizon = 600
record_every = 10
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
solver = "pgd"
pgd_steps = 10
pgd_starts = 3
[algorithms.linucb]
[algorithms.lazy]
[algorithms.async_lazy]
"""


def _run(cfg, out, *extra, wait=True):
    # The four processes of the test share one compilation cache (in the test's own folder):
    # the first compiles, the others load the same programs (the time from a process start to
    # the kill window is compilation; the window itself, the chunks of the second and third
    # algorithms, is unchanged).
    cmd = [sys.executable, "-m", "gsjax", "run", str(cfg), "--out", str(out), "--chunk", "20",
           "--quiet", "--cache-dir", str(cfg.parent / "xla-cache"), *extra]
    if wait:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _checkpoint_meta(folder):
    path = folder / "checkpoint.npz"
    if not path.exists():
        return None
    try:
        with np.load(path) as z:
            return json.loads(str(z["meta"]))
    except Exception:  # noqa: BLE001 - the file is being replaced: try again
        return None


def test_sigkill_then_resume_is_bit_identical(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    ref = _run(cfg, tmp_path / "ref")
    assert ref.returncode == 0, ref.stderr

    out = tmp_path / "killed"
    proc = _run(cfg, out, wait=False)
    meta = None
    deadline = time.time() + 300
    while time.time() < deadline:
        meta = _checkpoint_meta(out)
        # Wait until the first algorithm is done and the second is part-way: both kinds of
        # saved state (finished runs, a carry mid-run) are then exercised.
        if meta and meta["completed"] and 0 < meta["current"]["rounds_done"] < 600:
            break
        if proc.poll() is not None:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed mid-way"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "summary.json").exists()
    meta = _checkpoint_meta(out)
    assert meta is not None and meta["completed"]

    # A changed config is refused, and the checkpoint is kept (in this process: refused before
    # anything is built).
    from gsjax import cli

    assert cli.main(["run", str(cfg), "--out", str(out), "--chunk", "20", "--quiet",
                     "--set", "agent.beta=0.9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: <resume>:") and "refusing to mix" in err
    assert (out / "checkpoint.npz").exists()

    # The same command resumes; --resume DIR would do the same.
    again = _run(cfg, out)
    assert again.returncode == 0, again.stderr
    assert not (out / "checkpoint.npz").exists()
    with np.load(tmp_path / "ref" / "arrays.npz") as a, np.load(out / "arrays.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    s_ref = json.loads((tmp_path / "ref" / "summary.json").read_text())
    s_res = json.loads((out / "summary.json").read_text())
    for name, a in s_ref["algorithms"].items():
        for key in ("prediction_regret", "movement_cost", "updates_per_criterion"):
            assert a[key] == s_res["algorithms"][name][key], (name, key)


# The small runs below: tests/conftest.py's tiny config on this file's 4-node chain, 6 seeds.
SMALL = dict(seeds=6, problem={"num_nodes": 4})


def test_resume_flag_uses_the_folder_config(tmp_path, capsys, tiny_config):
    from gsjax import cli

    cfg = tiny_config(**SMALL, algorithms={"lazy": {}})
    out = tmp_path / "o"
    assert cli.main(["run", str(cfg), "--out", str(out), "--quiet"]) == 0
    first = (out / "arrays.npz").read_bytes()
    # A finished folder has no checkpoint: --resume reruns its config from the start.
    assert cli.main(["run", "--resume", str(out), "--quiet"]) == 0
    assert (out / "arrays.npz").read_bytes() == first
    assert cli.main(["run", "--resume", str(tmp_path / "nope")]) == 2
    assert "--resume" in capsys.readouterr().err


def test_nonfinite_feedback_stops_the_run_and_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    """NaN feedback from round 45 on for global seed 4: the run stops naming seed 4 and round
    45, and the checkpoint holds the last good chunk (rounds 1-40)."""
    import jax.numpy as jnp
    import pytest

    from gsjax import checkpoint, experiment, runner
    from gsjax.config import parse_config
    import tomllib

    real = runner._accumulate

    def poisoned(structure, tot, problem, action, s_prev, fb, info, move_cost, t):
        # The seed is identified through its theta row sum, unique per seed (per-seed theta).
        is_seed = jnp.abs(jnp.sum(problem.theta) - target) < 1e-4
        y = jnp.where((t >= 45) & is_seed, jnp.nan, fb.y)
        return real(structure, tot, problem, action, s_prev, fb._replace(y=y), info, move_cost,
                    t)

    raw = tomllib.loads(CONFIG)
    raw["horizon"] = 100
    cfg = parse_config(raw, ["seeds=3"])
    built = experiment.build(cfg, seed_start=3)
    target = float(jnp.sum(built.problem.theta[1]))  # global seed 4 = row 1 of seeds 3..5
    monkeypatch.setattr(runner, "_accumulate", poisoned)
    with pytest.raises(runner.NonFiniteFeedback) as e:
        experiment.run_experiment(cfg, built, chunk_rounds=20, checkpoint_dir=tmp_path)
    assert (e.value.seed_id, e.value.round) == (4, 45)
    assert "seed 4" in str(e.value) and "round 45" in str(e.value)
    ck = checkpoint.load(tmp_path)
    assert ck["current"] == "linucb" and ck["rounds_done"] == 40


def _stopped_at_lazy_round(tmp_path, tiny_config, chunk_rounds, stop_at=20, seed_start=0,
                           **config):
    """``(ref, out)``: a two-algorithm run uninterrupted in ``ref`` and stopped by a
    KeyboardInterrupt after round ``stop_at`` of its second algorithm (``lazy``) in ``out``
    (``config``: tiny-config overrides)."""
    from gsjax import experiment
    from gsjax.config import load_config

    cfg = load_config(tiny_config(**SMALL, **config))  # linucb, then lazy: 40 rounds each
    quiet = lambda *a, **k: None  # noqa: E731
    kw = dict(log=quiet, figures=False, chunk_rounds=chunk_rounds, seed_start=seed_start)
    experiment.run_config(cfg, tmp_path / "ref", **kw)

    def stop(name, horizon, seeds):
        def update(done, total):
            if name == "lazy" and done == stop_at:
                raise KeyboardInterrupt
        return update

    with pytest.raises(KeyboardInterrupt):
        experiment.run_config(cfg, tmp_path / "out", progress=stop, **kw)
    return tmp_path / "ref", tmp_path / "out"


def _assert_same_arrays(ref, out):
    with np.load(ref / "arrays.npz") as a, np.load(out / "arrays.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_resume_needs_a_chunk_size_dividing_the_checkpoint(tmp_path, capsys, tiny_config,
                                                           compile_cache):
    """Stopped after round 20 of its second algorithm (chunks of 10), a bandit run resumes only
    with a chunk size dividing 20: another one is a one-line ``--chunk`` error that keeps the
    checkpoint; chunks of 20 finish it with the uninterrupted run's arrays."""
    from gsjax import checkpoint, cli

    ref, out = _stopped_at_lazy_round(tmp_path, tiny_config, chunk_rounds=10)
    ck = checkpoint.load(out)
    assert (list(ck["completed"]), ck["current"], ck["rounds_done"]) == (["linucb"], "lazy", 20)
    capsys.readouterr()
    assert cli.main(["run", "--resume", str(out), "--chunk", "40", "--quiet"]) == 2
    assert capsys.readouterr().err.startswith("error: --chunk: the checkpoint stopped lazy at "
                                              "round 20")
    assert (out / checkpoint.FILENAME).exists()
    assert cli.main(["run", "--resume", str(out), "--chunk", "20"]) == 0
    assert f"resuming from {out}: linucb done, lazy at round 20" in capsys.readouterr().out
    assert not (out / checkpoint.FILENAME).exists()
    _assert_same_arrays(ref, out)


def test_resume_on_a_finished_folder_says_it_is_complete(tmp_path, capsys, tiny_config):
    """Issue 18 item 4: ``--resume`` on a finished folder prints one line and exits 0 without
    running anything (every file keeps its bytes and its modification time)."""
    from gsjax import cli

    cfg = tiny_config(**SMALL, horizon=20, algorithms={"lazy": {}})
    out = tmp_path / "o"
    assert cli.main(["run", str(cfg), "--out", str(out), "--quiet"]) == 0
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()}
    capsys.readouterr()
    assert cli.main(["run", "--resume", str(out)]) == 0
    cap = capsys.readouterr()
    assert cap.err == "" and cap.out.count("\n") == 1 and "complete" in cap.out
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()} == before


def test_resume_keeps_the_folders_seed_start(tmp_path, capsys, tiny_config, compile_cache):
    """Issue 18 item 12: a run of global seeds 2-7 interrupted part-way resumes with
    ``--resume DIR`` (no ``--seed-start``) over seeds 2-7, to the uninterrupted run's arrays;
    another ``--seed-start`` is a one-line error that keeps the checkpoint."""
    from gsjax import checkpoint, cli

    ref, out = _stopped_at_lazy_round(tmp_path, tiny_config, chunk_rounds=20, seed_start=2)
    assert checkpoint.load(out)["seed_start"] == 2
    capsys.readouterr()
    assert cli.main(["run", "--resume", str(out), "--seed-start", "0", "--quiet"]) == 2
    assert capsys.readouterr().err.startswith("error: --seed-start: ")
    assert (out / checkpoint.FILENAME).exists()
    assert cli.main(["run", "--resume", str(out), "--chunk", "20", "--quiet"]) == 0
    assert not (out / checkpoint.FILENAME).exists()
    with np.load(ref / "arrays.npz") as a:
        assert a["seed_ids"].tolist() == list(range(2, 8))
    _assert_same_arrays(ref, out)
    meta = json.loads((out / "summary.json").read_text())["meta"]
    assert meta["seed_range"] == {"start": 2, "stop": 8}


def test_parts_are_written_once_and_a_one_file_checkpoint_still_resumes(tmp_path, capsys,
                                                                        tiny_config, compile_cache):
    """A checkpoint names one records part per chunk of the current run (each holding that
    chunk's rounds only) and a result part per finished run; the finished run's chunk parts are
    gone. The one-file layout of gsjax before the parts (everything in ``checkpoint.npz``),
    written here from the loaded checkpoint, resumes to the uninterrupted run's arrays."""
    import json

    from gsjax import checkpoint, cli
    from gsjax.results import flatten, write_npz

    ref, out = _stopped_at_lazy_round(tmp_path, tiny_config, chunk_rounds=10)
    parts = checkpoint.meta(out)["parts"]
    assert list(parts["completed"]) == ["linucb"] and len(parts["records"]) == 2
    on_disk = sorted(p.name for p in (out / checkpoint.PARTS).iterdir())
    assert on_disk == sorted([*parts["completed"].values(), *parts["records"]])
    ck = checkpoint.load(out)
    with np.load(ref / "arrays.npz") as a:  # the two chunks: rounds 1-10 and 11-20 of lazy
        whole = {f: a[f"lazy/{f}"] for f in ck["records"][0]._fields}
    every = ck["records"][0].cum_regret.shape[1]
    for i, piece in enumerate(ck["records"]):
        for f, v in piece._asdict().items():
            np.testing.assert_array_equal(v, whole[f][:, i * every:(i + 1) * every], err_msg=f)

    # the same checkpoint in one file, as gsjax wrote it before the parts
    arrays = {f"current/carry/{i:05d}": x for i, x in enumerate(ck["carry_leaves"])}
    records = type(ck["records"][0])(*[None if v[0] is None else np.concatenate(v, axis=1)
                                       for v in zip(*ck["records"])])
    arrays.update(flatten("current/records", records))
    for name, res in ck["completed"].items():
        for f in ("totals", "records", "final"):
            arrays.update(flatten(f"completed/{name}/{f}", getattr(res, f)))
    meta = checkpoint.meta(out)
    del meta["parts"]
    arrays["meta"] = np.asarray(json.dumps(meta))
    checkpoint.remove(out)
    write_npz(out / checkpoint.FILENAME, arrays, compress=False)
    capsys.readouterr()
    assert cli.main(["run", "--resume", str(out), "--chunk", "10"]) == 0
    assert f"resuming from {out}: linucb done, lazy at round 20" in capsys.readouterr().out
    assert not (out / checkpoint.FILENAME).exists() and not (out / checkpoint.PARTS).exists()
    _assert_same_arrays(ref, out)


def test_resumed_run_reports_the_whole_runs_seconds(tmp_path, tiny_config, compile_cache):
    """A checkpoint keeps the current run's compile and run seconds so far, and the resumed run
    reports them plus its own (not only the time since the resume): with the checkpoint's
    seconds set to 500 and 1000, the resumed lazy run reports at least that, and at most that
    plus the resume's wall time; the finished run keeps its seconds; the arrays are the
    uninterrupted run's."""
    import time

    from gsjax import checkpoint, experiment
    from gsjax.config import load_config
    from gsjax.results import read_npz, write_npz

    ref, out = _stopped_at_lazy_round(tmp_path, tiny_config, chunk_rounds=10)
    cur = checkpoint.meta(out)["current"]
    assert cur["compile_seconds"] > 0 and cur["run_seconds"] > 0
    done = checkpoint.meta(out)["completed"]["linucb"]
    arrays = read_npz(out / checkpoint.FILENAME)
    meta = json.loads(str(arrays["meta"]))
    meta["current"].update(compile_seconds=500.0, run_seconds=1000.0)
    arrays["meta"] = np.asarray(json.dumps(meta))
    write_npz(out / checkpoint.FILENAME, arrays, compress=False)
    assert checkpoint.load(out)["seconds"] == (500.0, 1000.0)

    t0 = time.perf_counter()
    summary = experiment.run_config(load_config(tiny_config(**SMALL)), out, log=lambda *a: None,
                                    figures=False, chunk_rounds=10)
    wall = time.perf_counter() - t0
    lazy = summary["algorithms"]["lazy"]
    assert 500.0 < lazy["compile_seconds"] <= 500.0 + wall
    assert 1000.0 < lazy["run_seconds"] <= 1000.0 + wall
    assert (summary["algorithms"]["linucb"]["compile_seconds"],
            summary["algorithms"]["linucb"]["run_seconds"]) == (done["compile_seconds"],
                                                              done["run_seconds"])
    _assert_same_arrays(ref, out)


def test_checkpoints_wait_the_interval_between_two(tmp_path, monkeypatch):
    # A checkpoint at the end of a chunk only once `checkpoint_every` seconds (the clock's)
    # have passed since the last one or the start; 0 writes one after every chunk.
    from gsjax import checkpoint
    from gsjax.experiment import run_sweeps

    saved, now = [], [0.0]
    monkeypatch.setattr(checkpoint.Parts, "save",
                        lambda self, *a, **k: saved.append((a[4], a[6])))  # name, rounds

    def run(start=None, on_chunk=None, progress=None, chunk_rounds=None):
        for rounds, t in zip((10, 20, 30, 40, 50), (3.0, 6.0, 11.0, 12.0, 25.0)):
            now[0] = t
            on_chunk([np.zeros(2)], rounds, None, (0.0, 0.0))
        return "done"

    for every, want in ((5.0, [20, 30, 50]), (0.0, [10, 20, 30, 40, 50]), (100.0, [])):
        saved.clear()
        now[0] = 0.0
        out = run_sweeps([("a", 50, 10, run)], 4, tmp_path / str(every), "d" * 64, 0,
                         checkpoint_every=every, clock=lambda: now[0])
        assert out == {"a": "done"}
        assert saved == [("a", r) for r in want], every


def test_checkpoint_interval_refuses_bad_values(tmp_path, monkeypatch, capsys, tiny_config):
    from gsjax.config import ConfigError
    from gsjax.experiment import checkpoint_interval

    monkeypatch.delenv("GSJAX_CHECKPOINT_EVERY")
    assert checkpoint_interval() == 10.0 and checkpoint_interval(2) == 2.0
    monkeypatch.setenv("GSJAX_CHECKPOINT_EVERY", "0.5")
    assert checkpoint_interval() == 0.5
    for text in ("soon", "-1", "nan"):
        monkeypatch.setenv("GSJAX_CHECKPOINT_EVERY", text)
        with pytest.raises(ConfigError, match="GSJAX_CHECKPOINT_EVERY"):
            checkpoint_interval()
    monkeypatch.setenv("GSJAX_CHECKPOINT_EVERY", "0")
    from gsjax import cli

    out = tmp_path / "o"
    capsys.readouterr()
    assert cli.main(["run", str(tiny_config()), "--out", str(out), "--checkpoint-every",
                     "-2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--checkpoint-every" in err, err
    assert not out.exists()


def test_chunks_between_checkpoints_keep_their_records_for_the_next(tmp_path, monkeypatch,
                                                                    tiny_config, compile_cache):
    # With a checkpoint every 2.5 s of a clock that ticks 1 s a call, every third chunk (of 5
    # rounds) writes one: stopped at lazy's round 30, the folder holds lazy's round-20
    # checkpoint, whose parts carry the records of the chunks that wrote none; resumed, the
    # arrays are the uninterrupted run's.
    import itertools

    from gsjax import checkpoint, experiment

    def throttled(*args, run_sweeps=experiment.run_sweeps, **kwargs):  # a clock per run
        ticks = itertools.count()
        kwargs.update(checkpoint_every=2.5, clock=lambda: float(next(ticks)))
        return run_sweeps(*args, **kwargs)

    monkeypatch.setattr(experiment, "run_sweeps", throttled)
    ref, out = _stopped_at_lazy_round(tmp_path, tiny_config, 5, stop_at=30, record_every=5)
    ck = checkpoint.load(out)
    assert ck["current"] == "lazy" and ck["rounds_done"] == 20
    assert len(ck["parts"]["records"]) == 4  # rounds 5, 10, 15, 20
    monkeypatch.undo()
    from gsjax.config import load_config

    experiment.run_config(load_config(tiny_config(**SMALL, record_every=5)), out,
                          log=lambda *a, **k: None, figures=False, chunk_rounds=5)
    _assert_same_arrays(ref, out)
