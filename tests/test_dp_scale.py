"""Section 5.1 at scale (gsjax/paper/dp_scale.py): the configs it writes are the built-in ones
at k = 100 (the driver's add the level plan, the unrolled refresh and one lazy entry a run), its
table is the runs' summaries, a finished run is read rather than rerun (from its folder or from
--keep's file), and bad input is one line."""

from __future__ import annotations

import functools
import json
import math
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from gsjax.config import ConfigError, config_hash, dict_hash, load_config, parse_config
from gsjax.experiment import run_config
from gsjax.paper import dp_scale
from gsjax.paper._common import pm, ratio
from gsjax.results import read_json, read_npz
from gsjax.runner import NonFiniteFeedback

from conftest import persistent_cache

REPO = Path(__file__).resolve().parent.parent
FAMILIES = ("chain", "ring", "tree", "grid")


def _hash(tmp_path, text: str) -> str:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return config_hash(load_config(path))


@pytest.mark.parametrize("family", FAMILIES)
def test_family_config_is_the_builtin_config(tmp_path, family):
    builtin = REPO / "configs" / f"dp_{family}.toml"
    text = dp_scale.family_config(family, 100)
    assert _hash(tmp_path, text) == config_hash(load_config(builtin))
    assert text == builtin.read_text()  # benchmarks/dp.py --config FAMILY 100 wrote it


def test_driver_config_settings(tmp_path):
    """What the driver writes, read back: sizes, record_every, the plan, the PGD settings."""
    texts = dp_scale.scale_configs("tree", 12, 5, 10000, 1000, pgd=True)
    assert list(texts) == ["dp_tree_12_lazy", "dp_tree_12_lazy_own", "dp_tree_12_async_lazy",
                           "dp_tree_12_linucb", "dp_tree_12_pgd"]
    lazy, own, asy, lin, pgd = (load_config(_write(tmp_path, n, t)) for n, t in texts.items())
    assert [c.algorithm_names for c in (lazy, own, asy)] == [("lazy",), ("lazy_own",),
                                                             ("async_lazy",)]
    assert lazy.problem == own.problem == asy.problem and own.agent == lazy.agent
    main = lazy
    large = load_config(REPO / "configs" / "large_graphs.toml").agent
    assert (main.name, main.seeds, main.horizon, main.record_every) == ("dp_tree_12_lazy", 5,
                                                                         10000, 250)
    assert (lin.horizon, lin.record_every, lin.algorithm_names) == (1000, 250, ("linucb",))
    assert pgd.algorithm_names == ("lazy", "lazy_own", "async_lazy")
    assert (main.agent.solver, main.agent.dp_exact_ties) == ("dp", False)  # tree: level plan
    assert main.agent.refresh_method == lin.agent.refresh_method == "unrolled"
    assert pgd.agent.refresh_method == "unrolled"
    assert pgd.agent.solver == "pgd"
    assert (pgd.agent.gram_summation, main.agent.gram_summation) == ("compensated", "plain")
    for key in ("pgd_starts", "pgd_steps", "pgd_lr", "pgd_optimizer", "pgd_include_current"):
        assert getattr(pgd.agent, key) == getattr(large, key), key
    assert pgd.problem == main.problem and pgd.agent.lambda_reg == main.agent.lambda_reg
    grid = load_config(_write(tmp_path, "r", dp_scale.scale_configs(
        "grid", 12, 5, 90, 30, pgd=False)["dp_grid_12_lazy"]))
    assert not grid.agent.dp_exact_ties and grid.record_every == 2  # largest divisor <= 2


def _write(tmp_path, name, text):
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


TINY = ["--families", "ring", "grid", "--k", "12", "--seeds", "3", "--horizon", "20",
        "--linucb-horizon", "10", "--pgd-max-k", "12"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("dp_scale")
    # lazy, lazy_own and async_lazy are one program (traced flags), compiled once
    with persistent_cache(tmp_path_factory.mktemp("xla-cache")):
        assert dp_scale.main(["--out", str(out), *TINY]) == 0
    return out


def _ratio(a, b):  # ratio of means, delta-method standard error (written out again)
    r = a["mean"] / b["mean"]
    return r, r * math.sqrt((a["stderr"] / a["mean"]) ** 2 + (b["stderr"] / b["mean"]) ** 2)


def test_driver_table_is_the_runs_summaries(tiny_run):
    out = tiny_run
    res = json.loads((out / "dp_scale.json").read_text())
    md = (out / "dp_scale.md").read_text()
    assert md.startswith(f"Command: `python -m gsjax.paper.dp_scale --out {out} "
                         "--families ring grid --k 12 --seeds 3 --horizon 20 --linucb-horizon 10 "
                         "--pgd-max-k 12`")
    assert (out / "dp_scale.png").stat().st_size > 0
    assert list(res["families"]) == ["ring", "grid"]
    for family, (row,) in res["families"].items():
        s = {a: read_json(out / f"dp_{family}_12_{a}" / "summary.json")["algorithms"][a]
             for a in ("lazy", "lazy_own", "async_lazy")}
        lin = read_json(out / f"dp_{family}_12_linucb" / "summary.json")["algorithms"]["linucb"]
        pgd = read_json(out / f"dp_{family}_12_pgd" / "summary.json")["algorithms"]
        assert (row["k"], row["seeds"], row["horizon"]) == (12, 3, 20)
        assert row["exact_ties"] is False
        assert not load_config(out / "configs" / f"dp_{family}_12_lazy.toml").agent.dp_exact_ties
        cells = []
        for a in ("lazy", "lazy_own", "async_lazy"):
            for key in ("total_updates", "movement_cost", "prediction_regret"):
                assert row["algorithms"][a][key] == s[a][key]
            assert row["algorithms"][a]["seconds_per_seed"] == s[a]["run_seconds"] / 3
        for waste, key in (("waste_updates", "total_updates"), ("waste_movement", "movement_cost")):
            for a in ("lazy", "lazy_own"):
                r, se = _ratio(s[a][key], s["async_lazy"][key])
                assert row[waste][a]["mean"] == pytest.approx(r, rel=1e-12)
                assert row[waste][a]["stderr"] == pytest.approx(se, rel=1e-12)
                cells.append(f"{r:.2f} ± {se:.2f}")
        assert row["linucb"]["horizon"] == 10
        assert row["linucb"]["total_updates"] == lin["total_updates"]
        assert row["linucb"]["prediction_regret"] == lin["prediction_regret"]
        pgd_seeds = read_npz(out / f"dp_{family}_12_pgd" / "arrays.npz")
        for a in ("lazy", "lazy_own", "async_lazy"):
            dp_seeds = read_npz(out / f"dp_{family}_12_{a}" / "arrays.npz")
            for key in ("prediction_regret", "movement_cost"):
                d = row["pgd_minus_dp"][a][key]
                assert d["mean"] == pytest.approx(pgd[a][key]["mean"] - s[a][key]["mean"],
                                                  abs=1e-9)
                diff = (pgd_seeds[f"{a}/totals/{key}"].astype(np.float64)
                        - dp_seeds[f"{a}/totals/{key}"])  # paired over the 3 seeds
                assert d["paired"] is True
                assert d["stderr"] == pytest.approx(diff.std(ddof=1) / math.sqrt(3), rel=1e-9)
        (line,) = [ln for ln in md.splitlines() if ln.startswith("| 12 | 3 × 20 |")
                   and f"| {lin['prediction_regret']['mean']:.1f} ±" in ln]
        u = s["async_lazy"]["total_updates"]
        assert f"| {u['mean']:.0f} ± {u['stderr']:.0f} |" in line
        assert f"| {cells[0]}, {cells[1]} | {cells[2]}, {cells[3]} |" in line


def test_driver_reads_finished_runs(tiny_run, monkeypatch, tmp_path):
    before = (tiny_run / "dp_scale.json").read_text()

    def fail(*a, **k):
        raise AssertionError("a finished run was run again")

    monkeypatch.setattr(dp_scale, "run_config", fail)
    assert dp_scale.main(["--out", str(tiny_run), *TINY]) == 0
    assert (tiny_run / "dp_scale.json").read_text() == before
    # a finished run of another config in the folder is refused, not mixed in
    other = [a if a != "3" else "4" for a in TINY]
    assert dp_scale.main(["--out", str(tiny_run), *other]) == 2


def test_keep_file_carries_finished_runs_to_another_folder(tiny_run, monkeypatch, tmp_path):
    """--keep: each finished run's table fields go into one JSON with its config hash; a fresh
    --out (another machine) reads them from it and gives the same table; an entry whose hash
    does not match its config is run again, not trusted."""
    keep = tmp_path / "runs.json"
    assert dp_scale.main(["--out", str(tiny_run), *TINY, "--keep", str(keep)]) == 0
    kept = read_json(keep)
    names = sorted(f"dp_{f}_12_{x}" for f in ("grid", "ring")
                   for x in ("lazy", "lazy_own", "async_lazy", "linucb", "pgd"))
    assert sorted(kept) == names
    for name in names:
        summary = read_json(tiny_run / name / "summary.json")
        assert kept[name]["config_hash"] == dict_hash(read_json(tiny_run / name / "config.json"))
        for a, v in kept[name]["summary"]["algorithms"].items():
            assert v == {key: summary["algorithms"][a][key] for key in v}
            assert v["prediction_regret"] == summary["algorithms"][a]["prediction_regret"]

    def fail(*a, **k):
        raise AssertionError("a kept run was run again")

    monkeypatch.setattr(dp_scale, "run_config", fail)
    fresh = tmp_path / "fresh"
    assert dp_scale.main(["--out", str(fresh), *TINY, "--keep", str(keep)]) == 0
    a, b = (read_json(d / "dp_scale.json") for d in (tiny_run, fresh))
    assert a["families"] == b["families"]
    assert (fresh / "dp_scale.md").read_text().split("\n", 1)[1] == (
        tiny_run / "dp_scale.md").read_text().split("\n", 1)[1]
    kept["dp_ring_12_linucb"]["config_hash"] = "0" * 16  # a stale entry: run again
    keep.write_text(json.dumps(kept))
    ran = []
    monkeypatch.setattr(dp_scale, "run_config", lambda cfg, *a, **k: ran.append(cfg.name) or
                        read_json(tiny_run / cfg.name / "summary.json"))
    assert dp_scale.main(["--out", str(tmp_path / "again"), *TINY, "--keep", str(keep)]) == 0
    assert ran == ["dp_ring_12_linucb"]
    assert read_json(keep)["dp_ring_12_linucb"]["config_hash"] != "0" * 16


@pytest.mark.parametrize("argv, field", [
    (["--families", "ring", "wheel"], "--families"),
    (["--families", "ring", "grid", "--k", "12", "10"], "--k"),
    (["--families", "chain", "--k", "2"], "--k"),
    (["--families", "ring", "--seeds", "0"], "--seeds"),
])
def test_bad_input_is_one_line(tmp_path, capsys, monkeypatch, argv, field):
    monkeypatch.setattr(dp_scale, "run_config", lambda *a, **k: pytest.fail("ran"))
    assert dp_scale.main(["--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}:") and err.count("\n") == 1
    with pytest.raises(ConfigError):
        dp_scale.family_config("grid", 10)


def test_one_run_per_lazy_entry_equals_one_run_of_all(tiny_run, tmp_path):
    """The driver runs lazy, lazy_own and async_lazy as three configs; one config holding all
    three (the same seeds, problem and agent) gives every one the same totals."""
    text = dp_scale.scale_configs("ring", 12, 3, 20, 10, pgd=False)["dp_ring_12_lazy"]
    data = tomllib.loads(text)
    data["algorithms"] = {"lazy": {}, "lazy_own": {"algorithm": "lazy", "reference": "own"},
                          "async_lazy": {}}
    both = run_config(parse_config(data), tmp_path / "all", log=lambda *a, **k: None,
                      figures=False)
    for a in ("lazy", "lazy_own", "async_lazy"):
        one = read_json(tiny_run / f"dp_ring_12_{a}" / "summary.json")["algorithms"][a]
        for key in ("prediction_regret", "movement_cost", "total_updates", "total_changes"):
            assert one[key] == both["algorithms"][a][key], (a, key)


def test_kept_runs_are_the_driver_configs():
    """docs/reproduce/dp_scale/runs.json, the runs finished so far: each entry's hash is that of
    the config the driver writes for its name today (else --keep would run it again), and it
    has the fields the table reads."""
    kept = read_json(REPO / "docs" / "reproduce" / "dp_scale" / "runs.json")
    assert kept
    # one (family, k) holds many entries, and a run's seed parts one config (the large graphs'
    # configs list their edges: parsing each once keeps the test short)
    configs = functools.cache(lambda family, k: dp_scale.scale_configs(
        family, k, 100, 10000, 1000, pgd=k <= 1000))
    part_config = functools.cache(lambda text, parts: dp_scale.seed_part_config(text, parts)[0])
    digest = functools.cache(lambda text: config_hash(parse_config(tomllib.loads(text))))
    for name, entry in kept.items():
        _, family, k, *rest = name.split("_")
        texts = configs(family, int(k))
        if "seed_start" in entry:  # one seed part of a run: NAME_sSTART (NAME_sSTART_ofN:
            # one of N parts, a finer split of a part finished piece by piece, kept until the
            # part is whole)
            base, start, of = re.fullmatch(r"(.*)_s(\d+)(?:_of(\d+))?", name).groups()
            assert int(start) == entry["seed_start"]
            assert of is None or int(of) == entry["seed_parts"]
            text = part_config(texts[base], entry["seed_parts"])
            assert len(entry["summary"]["per_seed"]) == len(entry["summary"]["algorithms"])
        else:
            text = texts[name]
        assert entry["config_hash"] == digest(text)
        for a, v in entry["summary"]["algorithms"].items():
            assert {"prediction_regret", "movement_cost", "total_updates", "run_seconds"} <= set(v)


def test_seed_parts_merge_to_the_whole_run(tiny_run, monkeypatch, tmp_path, compile_cache):
    """--seed-parts: a run split into runs of consecutive seeds, each kept by itself, merges
    into the whole run's numbers (a seed's draws depend on its global id only); --part runs some
    parts now, the row comes when the last is in, and kept parts are not run again."""
    keep = tmp_path / "runs.json"
    argv = ["--families", "ring", "--k", "12", "--seeds", "3", "--horizon", "20",
            "--linucb-horizon", "10", "--pgd-max-k", "10", "--keep", str(keep),
            "--seed-parts", "3"]
    assert dp_scale.main(["--out", str(tmp_path / "a"), *argv, "--part", "0", "2"]) == 0
    assert read_json(tmp_path / "a" / "dp_scale.json")["families"]["ring"] == []
    kept = read_json(keep)
    algo = {"lazy": "lazy", "lazy_own": "lazy_own", "async_lazy": "async_lazy",
            "linucb": "linucb"}
    runs = [f"dp_ring_12_{x}" for x in algo]
    assert sorted(kept) == sorted(f"{r}_s{i}" for r in runs for i in (0, 2))
    whole = read_json(tiny_run / "dp_scale.json")["families"]["ring"][0]
    for x, a in algo.items():  # a part's seeds are the whole run's seeds from its start
        r = f"dp_ring_12_{x}"
        seeds = read_npz(tiny_run / r / "arrays.npz")[f"{a}/totals/prediction_regret"]
        for i in (0, 2):
            assert kept[f"{r}_s{i}"]["seed_start"] == i
            assert kept[f"{r}_s{i}"]["summary"]["per_seed"][a]["prediction_regret"] == [
                float(seeds[i])]
    ran = []
    real = dp_scale.run_config
    monkeypatch.setattr(dp_scale, "run_config", lambda cfg, *a, **k: ran.append(
        (cfg.name, k["seed_start"])) or real(cfg, *a, **k))
    assert dp_scale.main(["--out", str(tmp_path / "b"), *argv, "--part", "1"]) == 0
    assert sorted(ran) == sorted((r, 1) for r in runs)
    (row,) = read_json(tmp_path / "b" / "dp_scale.json")["families"]["ring"]
    for a in dp_scale.LAZY:
        for key in ("prediction_regret", "movement_cost", "total_updates", "total_regret",
                    "total_changes"):
            assert row["algorithms"][a][key] == whole["algorithms"][a][key], (a, key)
        for key in ("waste_updates", "waste_movement"):
            assert row[key] == whole[key]
    for key in ("prediction_regret", "movement_cost", "total_updates"):
        assert row["linucb"][key] == whole["linucb"][key]
    kept = read_json(keep)
    for r in runs:
        parts = [kept[f"{r}_s{i}"]["summary"]["algorithms"] for i in range(3)]
        assert kept[r]["seed_parts"] == 3
        for a, v in kept[r]["summary"]["algorithms"].items():
            assert v["run_seconds"] == sum(p[a]["run_seconds"] for p in parts)
    ran.clear()
    assert dp_scale.main(["--out", str(tmp_path / "c"), *argv]) == 0  # all kept: nothing runs
    assert ran == []
    assert dp_scale.main(["--out", str(tmp_path / "d"), *argv[:-1], "2"]) == 2  # 2 does not divide 3


def test_readme_table_is_the_kept_runs():
    """The README's 10^4-node table: each cell is computed again from
    docs/reproduce/dp_scale/runs.json (ratios of means with the delta-method error)."""
    readme = (REPO / "README.md").read_text()
    kept = read_json(REPO / "docs" / "reproduce" / "dp_scale" / "runs.json")
    rows = re.findall(r"^\| (ring|chain|tree|grid) \| (.*) \|$", readme, re.M)
    assert rows
    for family, cells in rows:
        s = {a: kept[f"dp_{family}_10000_{a}"]["summary"]["algorithms"][a]
             for a in ("lazy", "async_lazy")}
        waste_u, waste_m, regret, seconds = cells.split(" | ")
        for cell, key in ((waste_u, "total_updates"), (waste_m, "movement_cost")):
            assert cell == pm(ratio(s["lazy"][key], s["async_lazy"][key]), 2)
        assert regret == ", ".join(f"{s[a]['prediction_regret']['mean']:,.0f} ± "
                                   f"{s[a]['prediction_regret']['stderr']:,.0f}"
                                   for a in ("lazy", "async_lazy"))
        assert seconds.startswith(", ".join(f"{s[a]['run_seconds']:,.0f} s"
                                            for a in ("lazy", "async_lazy")))


def test_a_pgd_run_that_stops_leaves_the_exact_row(tiny_run, monkeypatch, tmp_path):
    """A PGD comparison run stopped by the non-finite check (PGD's fractional states can make
    a float32 Gram sum indefinite over 10^4 rounds) does not take the exact runs' row with it:
    the row is there, without PGD's differences, and the table says why."""
    real = dp_scale._run

    def run(text, out, name, *a, **k):
        if name.endswith("_pgd"):
            raise NonFiniteFeedback(7, 1234)
        return real(text, tiny_run, name, *a, **k)

    monkeypatch.setattr(dp_scale, "_run", run)
    logged = []
    result, md = dp_scale.run_all(tmp_path / "o", ["ring"], [12], 3, 20, 10, 12,
                                  log=logged.append)
    (row,) = result["families"]["ring"]
    whole = read_json(tiny_run / "dp_scale.json")["families"]["ring"][0]
    assert row["algorithms"] == whole["algorithms"] and "pgd_minus_dp" not in row
    assert row["pgd_stopped"] == ("stopped: non-finite feedback (NaN or inf) from the "
                                  "environment for seed 7 in round 1234")
    assert f"| 12 | all | the PGD run {row['pgd_stopped']} | | | |" in md
    assert any("dp_ring_12_pgd stopped" in line for line in logged)


def test_read_only_shows_the_kept_rows_and_runs_nothing(tiny_run, monkeypatch, tmp_path):
    """--read-only: the rows whose runs are kept, the same as when they were run; a (family, k)
    with a run not kept has no row; a PGD run not kept leaves its row without the comparison;
    nothing runs."""
    keep = tmp_path / "runs.json"
    assert dp_scale.main(["--out", str(tiny_run), *TINY, "--keep", str(keep)]) == 0
    kept = read_json(keep)
    del kept["dp_grid_12_async_lazy"], kept["dp_ring_12_pgd"]
    keep.write_text(json.dumps(kept))
    monkeypatch.setattr(dp_scale, "run_config", lambda *a, **k: pytest.fail("ran"))
    fresh = tmp_path / "fresh"
    assert dp_scale.main(["--out", str(fresh), *TINY, "--keep", str(keep), "--read-only"]) == 0
    res = read_json(fresh / "dp_scale.json")
    assert res["families"]["grid"] == []
    (row,) = res["families"]["ring"]
    whole = read_json(tiny_run / "dp_scale.json")["families"]["ring"][0]
    assert "pgd_minus_dp" not in row
    assert {key: v for key, v in whole.items() if key != "pgd_minus_dp"} == row
    assert res["command"].endswith("--read-only")
