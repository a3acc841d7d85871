"""The command line's persistent compilation cache (gsjax.runner.use_compilation_cache)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from gsjax import runner


# Each run is its own process (the cache is what a second process finds), on the conftest's
# small config (two algorithms, the vertex solver): the programs of a built-in config with PGD
# entries cost twice the compile time and exercise nothing more of the cache.
def _run(out, cache, tmp_path):
    env = {**os.environ, "GSJAX_CACHE_DIR": str(cache)}
    subprocess.run([sys.executable, "-m", "gsjax", "run", str(tmp_path / "tiny.toml"),
                    "--quiet", "--out", str(out)],
                   check=True, env=env, cwd=tmp_path)
    with np.load(out / "arrays.npz") as z:
        return {k: z[k] for k in z.files}


def test_cache_is_filled_then_reused_with_identical_results(tmp_path, tiny_config):
    tiny_config()
    cache = tmp_path / "cache"
    first = _run(tmp_path / "a", cache, tmp_path)
    entries = sorted(p.name for p in cache.iterdir())
    assert entries, "the first run wrote no compiled program to the cache"
    second = _run(tmp_path / "b", cache, tmp_path)
    # the second process derives the same cache keys, so it finds every program and writes
    # nothing new (keys that changed between processes would add entries here)
    assert sorted(p.name for p in cache.iterdir()) == entries
    assert first.keys() == second.keys()
    for k in first:
        np.testing.assert_array_equal(first[k], second[k], err_msg=k)


def test_cache_off(tmp_path, tiny_config):
    tiny_config()
    _run(tmp_path / "a", "off", tmp_path)
    assert not (tmp_path / "off").exists()


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("GSJAX_CACHE_DIR", "off")
    assert runner.default_cache_dir() is None
    monkeypatch.setenv("GSJAX_CACHE_DIR", str(tmp_path / "c"))
    assert runner.default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("GSJAX_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert runner.default_cache_dir() == tmp_path / "gsjax" / "xla"


def test_cli_flags_choose_the_cache(tmp_path, tiny_config):
    """``--cache-dir`` names the folder; ``--no-cache`` wins over it and the environment."""
    base = [sys.executable, "-m", "gsjax", "run", str(tiny_config()), "--horizon", "20",
            "--quiet", "--force"]
    env = {**os.environ, "GSJAX_CACHE_DIR": str(tmp_path / "from_env")}
    subprocess.run(base + ["--out", str(tmp_path / "a"), "--cache-dir", str(tmp_path / "flag")],
                   check=True, env=env, cwd=tmp_path)
    assert any((tmp_path / "flag").iterdir()) and not (tmp_path / "from_env").exists()
    subprocess.run(base + ["--out", str(tmp_path / "b"), "--no-cache", "--cache-dir",
                           str(tmp_path / "never")], check=True, env=env, cwd=tmp_path)
    assert not (tmp_path / "never").exists() and not (tmp_path / "from_env").exists()
