"""Shared fixtures for the gsjax tests."""

from __future__ import annotations

import math
import os

# The default run uses two pytest-xdist workers (`python -m pytest -q -n 2`): on a GPU machine
# each worker is its own process, and XLA's default preallocation (75 % of the GPU memory per
# process) would starve the second one.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# The command line keeps compiled programs in a persistent cache (gsjax.runner.default_cache_dir);
# the tests (and the CLI subprocesses they start) leave the user's cache alone, except
# tests/test_cache.py, which points it at a temporary folder.
os.environ["GSJAX_CACHE_DIR"] = "off"

import jax  # noqa: E402  (after the environment variable above)
import jax.numpy as jnp
import pytest


@pytest.fixture
def key():
    """A typed root key."""
    return jax.random.key(0)


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
