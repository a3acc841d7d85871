"""Issue 18, the run folder's edges: damaged files and bad ``--out`` folders (item 2), orphan
temporary files (item 7), a resume with another chunk size (item 11), ``kind = "oco"`` folders
merged and resumed (item 13), and the command line's top level and progress (item 8).

Every refusal is one line on stderr with exit status 2 and leaves every file of the folder with
its bytes and modification time.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from gsjax import checkpoint, cli, commands, experiment
from gsjax.__main__ import main as gsjax_main
from gsjax.config import load_config
from gsjax.paper import report

CONFIG = """
name = "rel"
seeds = 3
horizon = 120
record_every = 2
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
[algorithms.linucb]
[algorithms.lazy]
"""


def _quiet(*args, **kwargs):
    pass


def _stopped(tmp_path, chunk_rounds: int, stop_at: int):
    """``(config path, ref, out)``: the config run whole into ``ref`` and, in chunks of
    ``chunk_rounds``, stopped by a KeyboardInterrupt after round ``stop_at`` of ``lazy`` into
    ``out`` (its checkpoint there)."""
    path = tmp_path / "c.toml"
    path.write_text(CONFIG)
    cfg = load_config(path)
    experiment.run_config(cfg, tmp_path / "ref", log=_quiet, figures=False)

    def stop(name, horizon, seeds):
        def update(done, total):
            if name == "lazy" and done == stop_at:
                raise KeyboardInterrupt
        return update

    with pytest.raises(KeyboardInterrupt):
        experiment.run_config(cfg, tmp_path / "out", log=_quiet, figures=False,
                              chunk_rounds=chunk_rounds, progress=stop)
    return path, tmp_path / "ref", tmp_path / "out"


def _files(folder):
    """Every file under ``folder`` (the checkpoint's parts too): bytes and modification time."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _same_arrays(a_dir, b_dir):
    with np.load(a_dir / "arrays.npz") as a, np.load(b_dir / "arrays.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def _refused(capsys, argv, *needles):
    """``gsjax ARGV`` exits 2 with one line on stderr holding every needle, nothing on stdout."""
    capsys.readouterr()
    assert cli.main(argv) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1 and cap.err.startswith("error: "), cap
    for needle in needles:
        assert needle in cap.err, (needle, cap.err)
    return cap.err


def _data_offset(npz: bytes) -> int:
    """An offset in the middle of the stored bytes of the largest member of a zip (``.npz``):
    a flip there fails the member's CRC check when it is read, wherever the zip's layout puts
    it (a flip at a fixed offset may land in bytes no reader checks, e.g. a header's padding)."""
    member = max(zipfile.ZipFile(io.BytesIO(npz)).infolist(), key=lambda m: m.compress_size)
    local = member.header_offset
    name_len, extra_len = struct.unpack("<HH", npz[local + 26: local + 30])
    return local + 30 + name_len + extra_len + member.compress_size // 2


def test_damaged_checkpoint_or_config_is_one_line_and_changes_nothing(tmp_path, capsys,
                                                                      compile_cache):
    """Item 2: a truncated, random, bit-flipped or empty ``checkpoint.npz``, and a truncated or
    empty ``config.json``, on ``--resume DIR`` and on ``run CONFIG --out DIR``."""
    path, ref, out = _stopped(tmp_path, chunk_rounds=6, stop_at=12)
    good = (out / checkpoint.FILENAME).read_bytes()
    flipped = bytearray(good)
    flipped[_data_offset(good)] ^= 0x10  # inside an array's bytes, which the CRC covers
    rng = np.random.default_rng(0)
    damaged = {"truncated": good[: len(good) // 2], "random": rng.bytes(len(good)),
               "bit-flipped": bytes(flipped), "empty": b""}
    for kind, data in damaged.items():
        (out / checkpoint.FILENAME).write_bytes(data)
        before = _files(out)
        for argv in (["run", "--resume", str(out), "--quiet"],
                     ["run", str(path), "--out", str(out), "--quiet", "--chunk", "6"]):
            err = _refused(capsys, argv, f"{out / checkpoint.FILENAME} cannot be read", "delete")
            assert "--force" in err, (kind, err)
            assert _files(out) == before, (kind, argv)

    (out / checkpoint.FILENAME).write_bytes(good)
    # a part the checkpoint names, damaged or missing: the same one line, nothing changed
    part = out / checkpoint.PARTS / checkpoint.meta(out)["parts"]["records"][-1]
    kept = part.read_bytes()
    for data in (kept[: len(kept) // 2], None):
        part.unlink() if data is None else part.write_bytes(data)
        before = _files(out)
        err = _refused(capsys, ["run", "--resume", str(out), "--quiet"],
                       f"{out / checkpoint.FILENAME} cannot be read", part.name, "delete")
        assert _files(out) == before, err
    part.write_bytes(kept)
    config = (out / "config.json").read_bytes()
    for data in (config[: len(config) // 2], b"", b"[1, 2]"):
        (out / "config.json").write_bytes(data)
        before = _files(out)
        _refused(capsys, ["run", "--resume", str(out), "--quiet"],
                 f"--resume: {out / 'config.json'} cannot be read", f"--out {out}")
        assert _files(out) == before
    # The original config resumes the folder and writes a readable config.json again.
    assert cli.main(["run", str(path), "--out", str(out), "--quiet", "--chunk", "6"]) == 0
    assert json.loads((out / "config.json").read_text()) == json.loads(config)
    _same_arrays(ref, out)


def test_out_that_is_a_file_or_cannot_be_written(tmp_path, capsys):
    """Item 2: ``--out`` naming a file, a folder under a file, or a place the system refuses
    (``/proc`` refuses even root) is one line naming ``--out`` or the path, exit 2."""
    path = tmp_path / "c.toml"
    path.write_text(CONFIG)
    afile = tmp_path / "afile"
    afile.write_text("keep")
    run = ["run", str(path), "--quiet", "--seeds", "1", "--horizon", "4", "--out"]
    _refused(capsys, [*run, str(afile)], "--out", "not a folder")
    _refused(capsys, [*run, str(afile / "sub")], "--out", "is a file")
    _refused(capsys, ["merge", str(afile), str(tmp_path)], "--out", "not a folder")
    assert afile.read_text() == "keep" and sorted(p.name for p in tmp_path.iterdir()) == [
        "afile", "c.toml"]
    _refused(capsys, [*run, "/proc/gsjax-not-here"], "/proc")
    assert not os.path.exists("/proc/gsjax-not-here")


def test_orphan_temporary_files_go_on_the_next_write(tmp_path, capsys, compile_cache):
    """Item 7: the temporary files a kill during a write leaves (``.NAME.XXXXXXXX.tmp``) are
    removed when the folder is next written (a resume, a merge's output); other files stay, and
    a refused resume removes nothing."""
    path, ref, out = _stopped(tmp_path, chunk_rounds=6, stop_at=12)
    orphans = [".checkpoint.npz.ab12cd34.tmp", ".arrays.npz.x_y9z8w7.tmp",
               ".summary.json.qwertyui.tmp", ".regret.png.a1b2c3d4.tmp"]
    others = ["notes.tmp", ".notes.txt.ab12cd34.tmp", ".arrays.npz.tmp"]
    for name in orphans + others:
        (out / name).write_bytes(b"partial")
    # A refused resume (another seed range) leaves them.
    _refused(capsys, ["run", str(path), "--out", str(out), "--quiet", "--seed-start", "5"],
             "<resume>")
    assert set(orphans + others) <= set(os.listdir(out))
    assert cli.main(["run", "--resume", str(out), "--quiet", "--chunk", "6"]) == 0
    left = set(os.listdir(out))
    assert not left & set(orphans) and set(others) <= left
    _same_arrays(ref, out)

    merged = tmp_path / "merged"
    merged.mkdir()
    for name in orphans:
        (merged / name).write_bytes(b"partial")
    assert cli.main(["merge", str(merged), str(out)]) == 0
    assert not set(os.listdir(merged)) & set(orphans)


def test_resume_with_the_default_chunk_never_runs_past_the_horizon(tmp_path, capsys, compile_cache):
    """Item 11: horizon 120 in records of 2 has a default chunk of 6 (20 chunks) where a
    round is work enough (the default run's is not: one chunk of 120); a run made in chunks
    of 4 and stopped at round 8, which neither divides, resumes with ``--resume`` (the default
    chunk) in chunks of their gcd with 8, ends exactly at the horizon with the uninterrupted
    run's arrays, and its checkpoint is gone. An explicit ``--chunk`` that does not divide the
    checkpoint's round stays a one-line refusal that changes nothing."""
    import math

    from gsjax.runner import MIN_CHUNK_WORK, auto_chunk

    assert auto_chunk(120, 2) == auto_chunk(120, 2, round_work=MIN_CHUNK_WORK) == 6
    cut = math.gcd(auto_chunk(120, 2, round_work=3 * 3), 8)  # 3 seeds x 3 criteria
    assert cut == 8
    path, ref, out = _stopped(tmp_path, chunk_rounds=4, stop_at=8)
    current = checkpoint.meta(out)["current"]
    assert (current["name"], current["rounds_done"]) == ("lazy", 8)
    before = _files(out)
    _refused(capsys, ["run", "--resume", str(out), "--quiet", "--chunk", "12"], "--chunk")
    assert _files(out) == before
    capsys.readouterr()
    assert cli.main(["run", "--resume", str(out)]) == 0
    assert f"chunks of {cut} rounds" in capsys.readouterr().out
    assert not (out / checkpoint.FILENAME).exists()
    with np.load(out / "arrays.npz") as z:
        assert z["rounds"][-1] == 120 and len(z["rounds"]) == 60
        assert z["lazy/cum_regret"].shape[1] == 60
    _same_arrays(ref, out)


OCO = ["--quiet", "--set", "horizon=[40]", "--set", "budget_exponents=[0.5, 0.75, 1.0]",
       "--set", "record_every=10"]


def test_oco_folders_merge_and_resume(tmp_path, capsys, compile_cache):
    """Item 13: ``kind = "oco"`` folders of seeds 0 and 1-3 merge to the 4-seed run (every
    array, the per-entry summaries and the trade-off equal; the records of the first 4 seeds
    come from both folders), and an interrupted OCO folder resumes with ``--resume``."""
    whole, a, b, m = (tmp_path / n for n in ("whole", "a", "b", "m"))
    assert cli.main(["run", "section6_rates", "--seeds", "4", "--out", str(whole), *OCO]) == 0
    assert cli.main(["run", "section6_rates", "--seeds", "1", "--out", str(a), *OCO]) == 0
    assert cli.main(["run", "section6_rates", "--seeds", "3", "--seed-start", "1",
                     "--out", str(b), *OCO]) == 0
    assert cli.main(["merge", str(m), str(b), str(a)]) == 0
    _same_arrays(whole, m)
    s_whole, s_m = (json.loads((d / "summary.json").read_text()) for d in (whole, m))
    for key in ("algorithms", "fits", "tradeoff"):
        assert s_whole[key] == s_m[key], key
    assert (s_m["meta"]["seeds"], s_m["meta"]["seed_start"]) == (4, 0)
    assert json.loads((m / "config.json").read_text()) == json.loads(
        (whole / "config.json").read_text())
    # Gapped ranges are refused in one line, as for bandit folders.
    _refused(capsys, ["merge", str(tmp_path / "x"), str(whole), str(b)], "<merge>", "expected")

    # Resume: stop the 4-seed run after its second entry's first chunk, resume with --resume.
    from gsjax.oco import experiment as oco_experiment
    from gsjax.oco.config import parse_oco_config

    cfg = parse_oco_config(json.loads((whole / "config.json").read_text()))
    stopped = tmp_path / "stopped"

    def stop(name, horizon, seeds):
        def update(done, total):
            if name.startswith("lazy_ogd/") and done == 10:
                raise KeyboardInterrupt
        return update

    with pytest.raises(KeyboardInterrupt):
        oco_experiment.run_and_write(cfg, stopped, log=_quiet, chunk_rounds=10, progress=stop)
    assert checkpoint.meta(stopped)["current"]["rounds_done"] == 10
    assert cli.main(["run", "--resume", str(stopped), "--quiet"]) == 0
    assert not (stopped / checkpoint.FILENAME).exists()
    _same_arrays(whole, stopped)


def test_help_version_and_a_typo_do_not_import_jax():
    """Item 8: ``gsjax --help``, ``--version``, no command and a mistyped one are answered
    without importing JAX (in a fresh interpreter), with the exit codes of argparse."""
    code = ("import sys\nfrom gsjax.__main__ import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit as e:\n    print('exit', e.code)\n"
            "print('jax loaded:', 'jax' in sys.modules)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for argv, status in ((["--help"], 0), (["--version"], 0), ([], 2), (["rnu"], 2),
                         (["rnu", "--seeds", "3"], 2)):
        proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                              text=True, timeout=120, env=env)
        assert f"exit {status}\njax loaded: False\n" in proc.stdout, (argv, proc)
    assert "invalid choice: 'rnu'" in proc.stderr


def test_the_top_level_parser_is_the_full_parsers_top_level():
    """Item 8: the JAX-free top level (:mod:`gsjax.commands`) lists every command of the full
    parser with the same help, so ``gsjax --help`` reads the same either way."""
    full = cli.build_parser(extra=(report.add_parser,))
    assert commands.top_parser().format_help() == full.format_help()


def test_a_command_runs_through_the_top_level(tmp_path, capsys):
    """Item 8: a command that runs gets its own arguments through ``gsjax.__main__``."""
    path = tmp_path / "c.toml"
    path.write_text(CONFIG)
    assert gsjax_main(["check", str(path)]) == 0
    assert "ok (rel, 2 algorithms)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        gsjax_main(["run", "--no-such-flag"])
    assert e.value.code == 2 and "--no-such-flag" in capsys.readouterr().err


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("stream_type", [io.StringIO, _Terminal])
def test_progress_shows_compiling_and_rates_from_the_first_chunk(stream_type):
    """Item 8: a run shows "compiling" until its first report, which gives that phase's time;
    rates and the time left are measured from the first report on. With 2 seeds, a compile
    plus first chunk of 50 s, then 10 rounds per second: 20 seed-rounds/s, and 8 s left at
    round 20 of 100 (not 20 rounds over 51 s, as a clock started before the compile says)."""
    stream, clock = stream_type(), _Clock()
    update = cli.progress_reporter(stream, clock=clock)("lazy", 100, 2)
    assert "lazy: compiling" in stream.getvalue()
    clock.now = 50.0
    update(10, 100)
    assert "compile and first chunk 50.0 s" in stream.getvalue()
    clock.now = 51.0
    update(20, 100)
    out = stream.getvalue()
    assert "20 seed-rounds/s" in out, out
    if stream_type is io.StringIO:
        assert out.splitlines()[-1].strip() == "lazy: round 20/100, 20 seed-rounds/s, 8 s left"
    clock.now = 59.0
    update(100, 100)


def test_output_cut_short_by_its_reader_is_not_an_error():
    """``gsjax list | head``: a closed pipe ends the command quietly (exit 0, no stderr)."""
    proc = subprocess.Popen([sys.executable, "-m", "gsjax", "list"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader goes away before the first line (start-up takes longer)
    err = proc.stderr.read()
    assert proc.wait() == 0 and err == b"", err
