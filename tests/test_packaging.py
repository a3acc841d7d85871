"""What a non-editable install holds: every package, the built-in configs and the Adult data.

The wheel is built from the checkout with ``pip wheel --no-build-isolation`` (the test extra
brings the build backend, so no download is needed), unpacked into a folder outside the
checkout, and used from a third folder with nothing else of the checkout on the path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_every_package_is_listed():
    """The package list is written out (configs/ is mapped into the package): a new
    subpackage must be added to it, or a wheel would silently lack it."""
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "gsjax").rglob("__init__.py")}
    assert found <= listed, f"add to [tool.setuptools].packages: {sorted(found - listed)}"
    assert "gsjax.configs" in listed and "gsjax.data" in listed


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The wheel's contents unpacked into a folder of their own."""
    tmp = tmp_path_factory.mktemp("wheel")
    # Built from a copy: pip builds in the source tree, and setuptools' build/ folder would
    # both litter the checkout and carry stale modules into later wheels.
    src = tmp / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    for name in ("gsjax", "configs"):
        shutil.copytree(REPO / name, src / name, ignore=skip)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = tmp.glob("gsjax-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        z.extractall(tmp / "site")
    return tmp / "site", names


def test_wheel_holds_the_configs_and_data(site):
    _, names = site
    for cfg in (REPO / "configs").glob("*.toml"):
        assert f"gsjax/configs/{cfg.name}" in names
    assert "gsjax/data/adult.npz" in names
    assert not any(n.startswith(("tests/", "benchmarks/", "configs/")) for n in names)


def test_installed_package_runs_built_in_configs(site, tmp_path):
    folder, _ = site
    env = dict(os.environ, PYTHONPATH=str(folder), JAX_PLATFORMS="cpu")
    work = tmp_path / "elsewhere"  # no configs/ folder here: the names come from the package
    work.mkdir()
    probe = subprocess.run(
        [sys.executable, "-c",
         "import gsjax, pathlib; c = gsjax.load_config('section7_2'); "
         "print(c.name, c.horizon, pathlib.Path(gsjax.__file__).parent)"],
        cwd=work, env=env, capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr[-3000:]
    name, horizon, where = probe.stdout.split()
    assert (name, horizon) == ("section7_2", "10000")
    assert Path(where) == folder / "gsjax"  # the installed copy, not the checkout
    run = subprocess.run(
        [sys.executable, "-m", "gsjax", "run", "section7_1", "--seeds", "4", "--horizon", "50",
         "--out", str(work / "out"), "--quiet"], cwd=work, env=env, capture_output=True,
        text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (work / "out" / "summary.json").is_file()
    # An unknown name lists the built-in ones, from the package.
    bad = subprocess.run([sys.executable, "-m", "gsjax", "check", "no_such_config"], cwd=work,
                         env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "section7_2" in bad.stderr
