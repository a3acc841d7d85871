"""The command line and the experiment pipeline: files, schema, errors with exit code 2."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gsjax import cli, experiment
from gsjax.__main__ import main as gsjax_main
from gsjax.config import ConfigError, load_config

REPO = Path(__file__).resolve().parent.parent
CONFIGS = sorted(p for p in (REPO / "configs").glob("*.toml")
                 if "kind = \"oco\"" not in p.read_text())  # Section 6: tests/test_oco.py

TINY = """
name = "tiny"
seeds = 3
horizon = 12
record_every = 3
[problem]
structure = "blocks"
num_blocks = 2
block_dim = 2
[problem.theta]
distribution = "explicit"
values = [[-0.5, 0.3], [0.2, -0.4]]
[agent]
lambda_reg = [0.1, 1.0]
beta = 0.5
[algorithms.linucb]
[algorithms.lazy]
[algorithms.async_lazy]
"""


def _write(tmp_path, text, name="c.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_run_writes_files_and_summary_schema(tmp_path, figures):
    cfg_path = _write(tmp_path, TINY)
    out = tmp_path / "out"
    assert cli.main(["run", str(cfg_path), "--out", str(out), "--quiet"]) == 0
    for f in ("config.json", "summary.json", "arrays.npz", "movement.png", "regret.png",
              "trajectories.png", "per_criterion.png"):
        assert (out / f).is_file(), f
    s = json.loads((out / "summary.json").read_text())
    assert set(s["algorithms"]) == {"linucb", "lazy", "async_lazy"}
    for a in s["algorithms"].values():
        for key in ("prediction_regret", "movement_cost", "total_updates"):
            assert set(a[key]) >= {"mean", "stderr"}
        for key in ("updates_per_criterion", "changes_per_criterion"):
            assert len(a[key]["mean"]) == 2 and len(a[key]["stderr"]) == 2
    meta = s["meta"]
    assert meta["seeds"] == 3 and meta["horizon"] == 12
    for key in ("jax_version", "devices", "compile_seconds", "run_seconds"):
        assert key in meta
    # LinUCB re-optimises every criterion every round.
    assert s["algorithms"]["linucb"]["total_updates"]["mean"] == 2 * 12
    # The summary agrees with the saved arrays (mean and standard error recomputed here).
    z = np.load(out / "arrays.npz")
    move = z["lazy/totals/movement_cost"].astype(np.float64)
    assert np.isclose(s["algorithms"]["lazy"]["movement_cost"]["mean"], move.mean())
    assert np.isclose(s["algorithms"]["lazy"]["movement_cost"]["stderr"],
                      move.std(ddof=1) / np.sqrt(3))
    # The last recorded cumulative movement is the run's total.
    np.testing.assert_allclose(z["lazy/cum_movement"][:, -1], z["lazy/totals/movement_cost"], rtol=1e-6)
    assert z["lazy/action"].shape == (3, 4, 4)
    # The resolved config reloads to the same config.
    resolved = json.loads((out / "config.json").read_text())
    assert resolved["seeds"] == 3


def test_no_figures_then_plot_draws_them(tmp_path, monkeypatch):
    # --no-figures wins over GSJAX_FIGURES=on; GSJAX_FIGURES=off alone does the same; the
    # numbers are those of a run with figures, and `gsjax plot` draws the figures afterwards.
    cfg_path = _write(tmp_path, TINY)
    pngs = {"movement.png", "regret.png", "trajectories.png", "per_criterion.png"}
    outs = {}
    for name, env, flags in (("with", "on", []), ("flag", "on", ["--no-figures"]),
                             ("env", "off", [])):
        monkeypatch.setenv("GSJAX_FIGURES", env)
        outs[name] = tmp_path / name
        assert cli.main(["run", str(cfg_path), "--out", str(outs[name]), "--quiet",
                         *flags]) == 0
    assert {p.name for p in outs["with"].glob("*.png")} == pngs
    assert json.loads((outs["with"] / "summary.json").read_text())["meta"]["figures"]
    for name in ("flag", "env"):
        assert not list(outs[name].glob("*.png")), name
        assert "figures" not in json.loads((outs[name] / "summary.json").read_text())["meta"]
        with np.load(outs["with"] / "arrays.npz") as a, np.load(outs[name] / "arrays.npz") as b:
            for key in a.files:
                np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert cli.main(["plot", str(outs["flag"])]) == 0
    assert {p.name for p in outs["flag"].glob("*.png")} == pngs


def test_overrides_from_the_command_line(tmp_path):
    cfg_path = _write(tmp_path, TINY)
    out = tmp_path / "o"
    rc = cli.main(["run", str(cfg_path), "--out", str(out), "--quiet", "--seeds", "2",
                   "--horizon", "6", "--set", "agent.beta=0.1", "--set", "record_every=2"])
    assert rc == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["seeds"] == 2 and cfg["horizon"] == 6 and cfg["agent"]["beta"] == 0.1
    assert np.load(out / "arrays.npz")["rounds"].tolist() == [2, 4, 6]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--set", "agent.lambda_reg=-1"], "agent.lambda_reg"),
        (["--set", "algorithms.lazy.algorithm=nope"], "algorithms.lazy.algorithm"),
        (["--set", "record_every=5"], "record_every"),
        (["--set", "problem.theta.values=[[1.0], [0.1, 0.2]]"], "problem.theta.values[0]"),
        (["--set", "bogus=1"], "bogus"),
        (["--set", "agent.beta"], "--set"),
        (["--seed-start", "-1"], "--seed-start"),
        # issue 18 item 6: seed ids past uint32 (2**32 - 1) would wrap in the runner
        (["--seeds", "2", "--seed-start", str(2**32 - 1)], "--seed-start"),
        (["--buffer", "0"], "--buffer"),
    ],
)
def test_bad_input_exits_2_with_the_field_named(tmp_path, capsys, args, needle):
    cfg_path = _write(tmp_path, TINY)
    rc = cli.main(["run", str(cfg_path), "--out", str(tmp_path / "x"), "--quiet", *args])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and needle in err
    assert "Traceback" not in err
    assert not (tmp_path / "x" / "summary.json").exists()


def test_missing_config_file(capsys):
    assert cli.main(["run", "no_such_config_anywhere"]) == 2
    assert "no config file" in capsys.readouterr().err


def test_vertex_solver_refused_on_large_overlapping_graph():
    raw = {
        "name": "g", "problem": {"structure": "graph", "graph": "chain", "num_nodes": 20},
        "algorithms": {"lazy": {}},
    }
    from gsjax.config import parse_config

    with pytest.raises(ConfigError) as e:
        experiment.build(parse_config(raw))
    assert e.value.field == "algorithms.lazy.solver"


def test_python_dash_m_and_console_script_agree(tmp_path):
    cfg_path = _write(tmp_path, TINY)
    proc = subprocess.run(
        [sys.executable, "-m", "gsjax", "check", str(cfg_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout
    bad = _write(tmp_path, TINY.replace("seeds = 3", "seeds = 0"), "bad.toml")
    proc = subprocess.run(
        [sys.executable, "-m", "gsjax", "check", str(bad)], capture_output=True, text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: seeds:")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in CONFIGS])
def test_every_config_and_variant_builds(path):
    """Each shipped config and each of its sensitivity variants validates and builds. Running
    every config at a tiny size is tests/golden/test_golden.py's job (it also checks the numbers)."""
    cfg = load_config(path, ["seeds=2", "horizon=4", "record_every=1"])
    experiment.build(cfg)
    for v in cfg.paper.get("sensitivity", []):
        vcfg = load_config(path, ["seeds=2", "horizon=4", "record_every=1", *v["set"]])
        experiment.build(vcfg)


def test_split_seed_ranges_merge_to_the_single_run(tmp_path):
    """Two 'hosts' run seeds 0-2 and 3-6 of a per-seed-theta config; merged == one 7-seed run."""
    text = TINY.replace('distribution = "explicit"\nvalues = [[-0.5, 0.3], [0.2, -0.4]]',
                        'distribution = "normal"\nper_seed = true')
    cfg_path = _write(tmp_path, text)
    common = ["--quiet", "--set", "seeds=7"]
    assert cli.main(["run", str(cfg_path), "--out", str(tmp_path / "all"), *common]) == 0
    assert cli.main(["run", str(cfg_path), "--out", str(tmp_path / "a"), "--quiet",
                     "--set", "seeds=3"]) == 0
    assert cli.main(["run", str(cfg_path), "--out", str(tmp_path / "b"), "--quiet",
                     "--set", "seeds=4", "--seed-start", "3"]) == 0
    assert cli.main(["merge", str(tmp_path / "m"), str(tmp_path / "b"), str(tmp_path / "a")]) == 0
    whole = np.load(tmp_path / "all" / "arrays.npz")
    merged = np.load(tmp_path / "m" / "arrays.npz")
    assert sorted(whole.files) == sorted(merged.files)
    for key in whole.files:
        np.testing.assert_array_equal(whole[key], merged[key], err_msg=key)
    s_all = json.loads((tmp_path / "all" / "summary.json").read_text())
    s_m = json.loads((tmp_path / "m" / "summary.json").read_text())
    for name in s_all["algorithms"]:
        for key in ("prediction_regret", "movement_cost", "updates_per_criterion"):
            assert s_all["algorithms"][name][key] == s_m["algorithms"][name][key]
    assert s_m["meta"]["seed_range"] == {"start": 0, "stop": 7}
    # Overlapping or gapped ranges are refused.
    rc = cli.main(["merge", str(tmp_path / "x"), str(tmp_path / "a"), str(tmp_path / "all")])
    assert rc == 2


def test_progress_lines_when_not_on_a_terminal(tmp_path, capsys):
    # In this process: captured stderr is not a terminal, as a pipe is not (the command itself
    # in a subprocess: test_python_dash_m_and_console_script_agree).
    cfg_path = _write(tmp_path, TINY)
    assert gsjax_main(["run", str(cfg_path), "--out", str(tmp_path / "o"), "--chunk", "3"]) == 0
    err = capsys.readouterr().err
    lines = [l for l in err.splitlines() if "round" in l]
    # 3 algorithms x 4 chunks of 3 rounds; rates from the second report on.
    assert len(lines) == 12, err
    assert lines[0].strip() == "linucb: round 3/12"
    assert "seed-rounds/s" in lines[1] and "s left" in lines[1]
    assert gsjax_main(["run", str(cfg_path), "--out", str(tmp_path / "q"), "--chunk", "3",
                       "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")
    assert gsjax_main(["run", str(cfg_path), "--out", str(tmp_path / "b"), "--chunk", "5"]) == 2
    assert capsys.readouterr().err.startswith("error: --chunk:")


def test_reproduce_runs_the_long_experiments_only_when_asked(tmp_path, monkeypatch):
    # The configs with [paper].script (Sections 5.1 / 5.2 at scale) are left out of a default
    # `gsjax reproduce`, included by --long or --only, and run through their module's
    # report_section (stubbed here: the real ones take minutes even in quick mode).
    import gsjax.paper.adaptive_graph
    import gsjax.paper.dp_scale
    import gsjax.paper.large_graphs
    from gsjax.paper import report

    stems = lambda **kw: {p.stem for p in report.paper_configs(**kw)}  # noqa: E731
    assert not {"adaptive_graph", "large_graphs", "dp_scale"} & stems()
    assert {"adaptive_graph", "large_graphs", "dp_scale"} <= stems(long=True)
    assert stems() <= stems(long=True)
    calls = []
    for mod in (gsjax.paper.adaptive_graph, gsjax.paper.large_graphs, gsjax.paper.dp_scale):
        monkeypatch.setattr(mod, "report_section",
                            lambda path, out, quick, log, m=mod.__name__: calls.append(
                                (m, Path(path).stem, quick)) or [f"SECTION {m}"])
    assert gsjax_main(["reproduce", "--quick", "--only", "large_graphs", "--out",
                     str(tmp_path / "a")]) == 0
    assert calls == [("gsjax.paper.large_graphs", "large_graphs", True)]
    assert "SECTION gsjax.paper.large_graphs" in (tmp_path / "a" / "report.md").read_text()
    calls.clear()
    monkeypatch.setattr(report, "paper_configs",
                        lambda long=False, f=report.paper_configs: [
                            p for p in f(long)
                            if p.stem in ("adaptive_graph", "dp_scale", "large_graphs")])
    assert gsjax_main(["reproduce", "--out", str(tmp_path / "b")]) == 0
    assert calls == []
    assert gsjax_main(["reproduce", "--long", "--out", str(tmp_path / "c")]) == 0
    assert [c[0] for c in calls] == ["gsjax.paper.adaptive_graph", "gsjax.paper.dp_scale",
                                     "gsjax.paper.large_graphs"]
    assert not any(c[2] for c in calls)


def _files(folder):
    """``{name: bytes}`` of the files in ``folder``."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_finished_run_of_another_config_is_refused_and_force_clears_it(tmp_path, capsys, figures,
                                                                       compile_cache):
    """Issue 18 item 1: another config over a finished folder is one ``--out`` line and exit 2,
    every file untouched; ``--force`` deletes the old run's files (those its summary names
    included, nothing else) and runs; the same config over its own folder runs again."""
    cfg_path = _write(tmp_path, TINY)
    out = tmp_path / "o"
    assert cli.main(["run", str(cfg_path), "--out", str(out), "--quiet"]) == 0
    # A figure the old run drew that the new one would not: --force must not leave it behind.
    summary = json.loads((out / "summary.json").read_text())
    summary["meta"]["figures"].append("old_only.png")
    (out / "summary.json").write_text(json.dumps(summary))
    (out / "old_only.png").write_bytes(b"old")
    (out / "notes.txt").write_text("the user's own file")
    before = _files(out)
    capsys.readouterr()
    assert cli.main(["run", str(cfg_path), "--out", str(out), "--set", "horizon=6"]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err.startswith("error: --out: ") and cap.err.count("\n") == 1
    assert "--force" in cap.err
    assert _files(out) == before

    assert cli.main(["run", str(cfg_path), "--out", str(out), "--set", "horizon=6",
                     "--force"]) == 0
    printed = capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["horizon"] == 6
    assert np.load(out / "arrays.npz")["rounds"].tolist() == [3, 6]
    figures = json.loads((out / "summary.json").read_text())["meta"]["figures"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["config.json", "summary.json", "arrays.npz", "notes.txt", *figures])
    # The end of the run names every figure it wrote.
    assert figures and all(str(out / f) in printed for f in figures)

    # The same config over its own finished folder: it runs again (no refusal, same numbers).
    first = np.load(out / "arrays.npz")
    assert cli.main(["run", str(cfg_path), "--out", str(out), "--set", "horizon=6",
                     "--quiet"]) == 0
    again = np.load(out / "arrays.npz")
    for key in first.files:
        np.testing.assert_array_equal(first[key], again[key], err_msg=key)


def test_version_and_list(capsys):
    """Issue 18 item 8: ``--version`` prints the version of pyproject.toml; ``list`` prints every
    built-in config with the start of its TOML description."""
    import tomllib

    from gsjax.config import builtin_config_dir

    with pytest.raises(SystemExit) as e:
        gsjax_main(["--version"])
    assert e.value.code == 0
    with open(REPO / "pyproject.toml", "rb") as f:
        version = tomllib.load(f)["project"]["version"]
    assert capsys.readouterr().out.strip() == f"gsjax {version}"

    assert gsjax_main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    paths = sorted(builtin_config_dir().glob("*.toml"))
    assert len(lines) == len(paths) > 0
    for line, path in zip(lines, paths):
        with open(path, "rb") as f:
            words = tomllib.load(f)["description"].split()
        assert line.split()[0] == path.stem
        assert " ".join(words[:4]) in " ".join(line.split()[1:]), line
        assert len(line) <= 100


def test_buffer_changes_no_number(tmp_path, tiny_config, capsys):
    """``--buffer`` (the seeds solved at once per device in a lazy or async sweep) leaves every
    array equal: one seed at a time, and all of them at once, against the default; an OCO
    config refuses it in one line."""
    cfg = tiny_config(seeds=5, algorithms={"lazy": {}, "lazy_own": {"algorithm": "lazy",
                                                                     "reference": "own"},
                                           "async_lazy": {}})
    outs = {}
    for b in (None, 1, 5):
        out = tmp_path / f"b{b}"
        extra = [] if b is None else ["--buffer", str(b)]
        assert cli.main(["run", str(cfg), "--out", str(out), "--quiet", *extra]) == 0
        with np.load(out / "arrays.npz") as z:
            outs[b] = {k: z[k] for k in z.files}
    assert sum(int(v.sum()) for k, v in outs[None].items() if k.endswith("reoptimisations")) > 0
    for b in (1, 5):
        assert sorted(outs[b]) == sorted(outs[None])
        for k in outs[None]:
            np.testing.assert_array_equal(outs[b][k], outs[None][k], err_msg=f"{b} {k}")
    capsys.readouterr()
    assert cli.main(["run", "section6_rates", "--out", str(tmp_path / "oco"), "--quiet",
                     "--buffer", "4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --buffer") and err.count("\n") == 1
