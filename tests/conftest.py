"""Shared fixtures for the gsjax tests."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile

# The default run uses two pytest-xdist workers (`python -m pytest -q -n 2`): on a GPU machine
# each worker is its own process, and XLA's default preallocation (75 % of the GPU memory per
# process) would starve the second one.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# The command line keeps compiled programs in a persistent cache (gsjax.runner.default_cache_dir).
# The tests leave the user's cache alone: the session has its own, in a temporary folder that the
# process starting the session makes (and removes at its end), shared by the pytest-xdist workers
# and the CLI subprocesses (which inherit the variable), so a program that several tests compile
# (the same config at the same size, the same eager operation) is compiled once and loaded after.
# A loaded program is the compiled one, bit for bit (tests/test_cache.py). Tests that are about
# the cache name their own folders; GSJAX_TESTS_XLA_CACHE=off runs the session without one.
_SESSION_CACHE_OWNER = "GSJAX_TESTS_XLA_CACHE" not in os.environ
if _SESSION_CACHE_OWNER:
    os.environ["GSJAX_TESTS_XLA_CACHE"] = tempfile.mkdtemp(prefix="gsjax-tests-xla-")
_SESSION_CACHE = os.environ["GSJAX_TESTS_XLA_CACHE"]
_SESSION_CACHE = None if _SESSION_CACHE.lower() == "off" else _SESSION_CACHE
os.environ["GSJAX_CACHE_DIR"] = _SESSION_CACHE or "off"
if _SESSION_CACHE:  # a user's JAX cache is not used, here or in the subprocesses
    os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
# The gsjax command gives JAX one CPU device per core (gsjax.distributed.use_host_cores): the
# tests run on one device, whichever test first starts JAX in a worker; the device counts are
# tests/test_multidevice.py's.
os.environ["GSJAX_HOST_DEVICES"] = "1"
# Run folders get no figures (a second or two of matplotlib each, in many tests):
# the tests that look at figures ask for them (the `figures` fixture below, or GSJAX_FIGURES=on
# in a subprocess's environment).
os.environ["GSJAX_FIGURES"] = "off"
# A checkpoint after every chunk (the default waits 10 s between two), so the tests that stop
# a run mid-way find one; tests/test_resume.py checks the interval itself.
os.environ["GSJAX_CHECKPOINT_EVERY"] = "0"

import jax  # noqa: E402  (after the environment variables above)
import jax.numpy as jnp
import pytest

if _SESSION_CACHE:  # this process's JAX too
    jax.config.update("jax_compilation_cache_dir", _SESSION_CACHE)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def pytest_unconfigure(config):
    if _SESSION_CACHE_OWNER:  # the folder this process made
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


@pytest.fixture
def key():
    """A typed root key."""
    return jax.random.key(0)


@contextlib.contextmanager
def persistent_cache(folder):
    """JAX's persistent compilation cache while inside: the session's (above) when it has one,
    else one in ``folder``, whose setting and JAX's cache state are restored afterwards, so no
    test outside sees the folder."""
    from jax._src import compilation_cache

    if jax.config.jax_compilation_cache_dir:
        yield jax.config.jax_compilation_cache_dir
        return
    before = jax.config.jax_persistent_cache_min_compile_time_secs
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    compilation_cache.reset_cache()
    try:
        yield folder
    finally:
        jax.config.update("jax_compilation_cache_dir", None)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", before)
        compilation_cache.reset_cache()


@pytest.fixture
def compile_cache(tmp_path):
    """:func:`persistent_cache` for this test (a folder of its ``tmp_path`` when the session
    runs without one): a test that runs one config several times in this process (a reference
    run, an interrupted one, its resume) compiles each program once and loads it after (gsjax
    compiles each run's chunk anew, ahead of time)."""
    with persistent_cache(tmp_path / "xla-cache") as folder:
        yield folder


@pytest.fixture
def figures(monkeypatch):
    """Run folders written in this test get their figures (the suite's default is none)."""
    monkeypatch.setenv("GSJAX_FIGURES", "on")


@pytest.fixture
def x64():
    """Enable 64-bit types for one test, restoring the previous setting afterwards."""
    with jax.enable_x64(True):
        yield


def _agent_params(k, dtype, *, lambda_reg=1.0, beta=1.0, pgd_lr=0.05, log_trigger=math.log(2.0),
                  oful_delta=0.1, oful_S=1.0, oful_sigma=0.5, oful_L=None):
    from gsjax.algorithms import AgentParams

    vec = lambda v: jnp.broadcast_to(jnp.asarray(v, dtype), (k,))
    sca = lambda v: jnp.asarray(v, dtype)
    return AgentParams(
        lambda_reg=vec(lambda_reg),
        beta=vec(beta),
        pgd_lr=sca(pgd_lr),
        log_trigger=sca(log_trigger),
        oful_delta=sca(oful_delta),
        oful_S=sca(oful_S),
        oful_sigma=vec(oful_sigma),
        oful_L=None if oful_L is None else vec(oful_L),
    )


@pytest.fixture
def make_params():
    """Factory ``make_params(k, dtype, **overrides) -> AgentParams`` (log_trigger = log 2)."""
    return _agent_params


# A small bandit config: a 3-node chain, per-seed theta, the exact vertex solver, linucb and
# lazy. ``tiny_config(**overrides)`` changes it (nested dicts merge; ``None`` removes a key).
TINY_CONFIG = {
    "name": "tiny", "seeds": 2, "horizon": 40, "record_every": 10,
    "problem": {"structure": "graph", "graph": "chain", "num_nodes": 3,
                "theta": {"distribution": "normal", "per_seed": True}},
    "agent": {"lambda_reg": 0.3, "beta": 0.6, "solver": "vertex"},
    "algorithms": {"linucb": {}, "lazy": {}},
}


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict) and v:
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"tiny_config: no TOML for {v!r}")


def toml_text(raw: dict, prefix: str = "") -> str:
    """``raw`` (nested dicts of scalars and lists) as TOML text, tables after the plain keys."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in raw.items() if not isinstance(v, dict)]
    for k, v in raw.items():
        if isinstance(v, dict):
            lines += ["", f"[{prefix}{k}]", toml_text(v, f"{prefix}{k}.")]
    return "\n".join(lines).strip("\n") + "\n"


@pytest.fixture
def tiny_config(tmp_path):
    """Factory ``tiny_config(filename="tiny.toml", **overrides) -> Path``: TINY_CONFIG merged
    with ``overrides`` (``algorithms={...}`` replaces the whole table), written to tmp_path."""

    def make(filename: str = "tiny.toml", **overrides):
        algorithms = overrides.pop("algorithms", None)
        raw = _merge(TINY_CONFIG, overrides)
        if algorithms is not None:
            raw["algorithms"] = algorithms
        path = tmp_path / filename
        path.write_text(toml_text(raw))
        return path

    return make
