"""The workloads of benchmarks/run.py and benchmarks/kernels.py (float32 on gsjax's side).

* ``section7_2`` -- 10 cliques x d = 2, linear features, exact vertex solver, ``lambda_reg`` of
  ``configs/section7_2.toml``, constant beta 0.5, sigma 0.5, theta* ~ N(0, 1) drawn once (key 0),
  s0 = 0.5; algorithms ``lazy``, ``linucb``, ``async_lazy``.
* ``sparse_graph`` -- 100 nodes, ``random_bounded_degree_edges(100, 4, 200, seed=0)``, closed
  neighbourhoods (scopes of up to 5 coordinates, d = 11), pairwise-quadratic features, PGD with
  Adam (4 starts incl. the current state, 20 steps, lr 0.05), constant beta 0.5, lambda_reg 1,
  sigma 0.2, theta* ~ 0.3 N(0, 1) drawn once; algorithms ``linucb``, ``lazy``, ``async_lazy``.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from gsjax import graphs
from gsjax import problem as P
from gsjax.algorithms import AgentParams

ROOT = Path(__file__).resolve().parents[1]
DTYPE = np.float32
BUILDERS = ("section7_2", "sparse_graph")


def section7_2():
    """The Section 7.2 workload (see the module docstring)."""
    with open(ROOT / "configs" / "section7_2.toml", "rb") as f:
        cfg = tomllib.load(f)
    lambda_reg = np.asarray(cfg["agent"]["lambda_reg"], DTYPE)
    scopes = graphs.block_scopes(10, 2)
    structure = P.make_structure(scopes, "linear", "independent")
    problem = P.make_problem(jax.random.key(0), structure, scopes, theta_scale=1.0,
                             noise_sigma=0.5, s0=0.5, dtype=jnp.float32)
    return dict(
        name="section7_2", scopes=scopes, structure=structure, problem=problem,
        algorithms=("lazy", "linucb", "async_lazy"), lambda_reg=lambda_reg, beta=0.5, sigma=0.5,
        spec=dict(solver="vertex"), move_cost=1.0,
        description="10 cliques x d=2, linear, vertex solver, lambda_reg of "
                    "configs/section7_2.toml, constant beta 0.5, sigma 0.5, theta* ~ N(0,1) "
                    "drawn once",
    )


def sparse_graph():
    """The sparse-graph PGD workload (see the module docstring)."""
    edges = graphs.random_bounded_degree_edges(100, 4, 200, seed=0)
    scopes = graphs.graph_scopes(100, edges)
    structure = P.make_structure(scopes, "quadratic", "independent")
    problem = jax.jit(lambda key: P.make_problem(
        key, structure, scopes, theta_scale=0.3, noise_sigma=0.2, s0=0.5, dtype=jnp.float32
    ))(jax.random.key(0))
    return dict(
        name="sparse_graph", scopes=scopes, structure=structure, problem=problem,
        algorithms=("linucb", "lazy", "async_lazy"), lambda_reg=np.ones(100, DTYPE), beta=0.5,
        sigma=0.2, spec=dict(solver="pgd", pgd_steps=20, pgd_starts=4), pgd_lr=0.05,
        move_cost=1.0,
        description=f"100 nodes, {len(edges)} edges, degree <= 4 (scopes <= 5, d = 11), "
                    "quadratic features, PGD (4 starts incl. current, 20 Adam steps, lr 0.05), "
                    "constant beta 0.5, lambda_reg 1, sigma 0.2, theta* ~ 0.3 N(0,1) drawn once",
    )


def params(w):
    """gsjax's ``AgentParams`` of workload ``w`` (float32)."""
    k = w["structure"].num_criteria
    f32 = lambda v: jnp.asarray(v, jnp.float32)  # noqa: E731
    return AgentParams(
        lambda_reg=jnp.broadcast_to(f32(w["lambda_reg"]), (k,)),
        beta=jnp.broadcast_to(f32(w["beta"]), (k,)),
        pgd_lr=f32(w.get("pgd_lr", 0.05)),
        log_trigger=f32(math.log(2.0)),
        oful_delta=f32(0.05),
        oful_S=f32(1.0),
        oful_sigma=jnp.broadcast_to(f32(w["sigma"]), (k,)),
    )


def baseline_args(w, kind, dtype=np.float64):
    """Keyword arguments of the generic NumPy baselines for workload ``w``."""
    spec = w["spec"]
    return dict(
        kind=kind, scopes=w["scopes"].index, scope_mask=w["scopes"].mask,
        feature_kind=w["structure"].features, theta=np.asarray(w["problem"].theta),
        s0=np.asarray(w["problem"].s0), lambda_reg=w["lambda_reg"], beta=w["beta"],
        log_trigger=math.log(2.0), noise_sigma=w["sigma"], move_cost=w["move_cost"],
        solver=spec["solver"], pgd_steps=spec.get("pgd_steps", 50),
        pgd_starts=spec.get("pgd_starts", 4), pgd_lr=w.get("pgd_lr", 0.05),
        loss_star=float(w["problem"].loss_star), dtype=dtype,
    )
