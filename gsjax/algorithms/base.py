"""Types shared by the bandit algorithms: params, static spec, state, info, the algorithm triple.

An algorithm is pure functions over NamedTuple states, for ONE seed (the runner adds
``lax.scan`` over rounds and ``vmap`` over seeds): ``init(key, params, problem) -> BanditState``,
``act(key, state, params, problem) -> (action, state)``, and
``update(key, state, action, feedback, params, problem) -> (state, BanditInfo)``, which is
``prepare`` (statistics, trigger, references: cheap) then, when its :class:`SolveRequest` asks,
``solve`` (the LCB minimisation), so a batched runner can solve only the seeds that triggered.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gsjax.checks import check_bounds, check_float_dtype, shape_and_values
from gsjax.linalg import RidgeStats

__all__ = ["AgentParams", "AgentSpec", "BanditState", "BanditInfo", "SolveRequest",
           "BanditAlgorithm", "with_reference"]


class AgentParams(NamedTuple):
    """Float hyperparameters: traced, so they can be vmapped over or differentiated."""

    lambda_reg: jax.Array  # (k,) ridge regulariser per criterion (stiffness)
    beta: jax.Array  # (k,) constant exploration radius (beta_mode = "constant")
    pgd_lr: jax.Array  # () PGD step size
    log_trigger: jax.Array  # () log c: a trigger fires when log det V - log det V_ref > log c
    oful_delta: jax.Array  # () OFUL confidence level
    oful_S: jax.Array  # () OFUL bound on ||theta*||
    oful_sigma: jax.Array  # (k,) OFUL sub-Gaussian noise scale
    oful_L: jax.Array | None = None  # (k,) OFUL bound on ||phi_i(s)||; None: the feature map's
    # () traced reference reading, 1.0 "own", 0.0 "global"; None: ``AgentSpec.reference``
    own_reference: jax.Array | None = None
    # () traced 1.0: decide per criterion (async_lazy), 0.0 globally (lazy); None: the kind's
    # own. With ``own_reference``, lazy and async_lazy share one program (:func:`with_reference`)
    per_criterion: jax.Array | None = None

    @classmethod
    def create(cls, k: int, *, lambda_reg=1.0, beta=1.0, pgd_lr=0.05, trigger_ratio=2.0,
               oful_delta=0.1, oful_S=1.0, oful_sigma=0.5, oful_L=None,
               dtype=jnp.float32) -> AgentParams:
        """Checked params for ``k`` criteria.

        ``lambda_reg``, ``beta``, ``oful_sigma`` and ``oful_L`` are a scalar or ``k`` values
        (``oful_L = None``: the feature map's bound); the others are scalars;
        ``log_trigger = log(trigger_ratio)`` (float64 for a concrete ratio). Ranges (as
        :mod:`gsjax.config`): all finite, ``lambda_reg > 0``, ``beta >= 0``, ``pgd_lr > 0``,
        ``trigger_ratio > 1``, ``0 < oful_delta < 1``, ``oful_S > 0``, ``oful_sigma >= 0``,
        ``oful_L > 0``, ``k >= 1`` an integer, ``dtype`` floating; a violation is a
        ``ValueError`` naming the field. Traced values have only their shapes checked.
        """
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"{_WHERE}: k: must be an integer >= 1 (the number of criteria), "
                             f"got {k!r}")
        k = int(k)
        check_float_dtype(dtype, f"{_WHERE}: dtype")
        per = lambda v, name, **b: _checked(v, name, dtype, k, **b)[0]  # noqa: E731
        one = lambda v, name, **b: _checked(v, name, dtype, **b)[0]  # noqa: E731
        return cls(
            lambda_reg=per(lambda_reg, "lambda_reg", gt=0.0),
            beta=per(beta, "beta", ge=0.0),
            pgd_lr=one(pgd_lr, "pgd_lr", gt=0.0),
            log_trigger=_log_trigger(trigger_ratio, dtype),
            oful_delta=one(oful_delta, "oful_delta", gt=0.0, lt=1.0),
            oful_S=one(oful_S, "oful_S", gt=0.0),
            oful_sigma=per(oful_sigma, "oful_sigma", ge=0.0),
            oful_L=None if oful_L is None else per(oful_L, "oful_L", gt=0.0),
        )


def with_reference(params: AgentParams, spec: AgentSpec, per_criterion: bool = False
                   ) -> AgentParams:
    """``params`` with ``spec.reference`` and ``per_criterion`` (async_lazy) as traced values,
    so that lazy of either reading and async_lazy compile to one program."""
    dtype = params.log_trigger.dtype
    return params._replace(own_reference=jnp.asarray(spec.reference == "own", dtype),
                           per_criterion=jnp.asarray(per_criterion, dtype))


_WHERE = "AgentParams.create"


def _checked(value, name: str, dtype, k: int | None = None, **bounds):
    """``(array, concrete float64 values or None when traced)``: a checked scalar as a ``()``
    array or, given ``k``, a scalar or ``(k,)`` value as a ``(k,)`` array."""
    shape, values = shape_and_values(value, f"{_WHERE}: {name}")
    if shape not in ((), (k,)):
        want = "a scalar" if k is None else f"a scalar or k = {k} values (one per criterion)"
        raise ValueError(f"{_WHERE}: {name}: expected {want}, got shape {shape}")
    if values is not None:
        check_bounds(values, f"{_WHERE}: {name}", **bounds)
    return jnp.broadcast_to(jnp.asarray(value, dtype), shape if k is None else (k,)), values


def _log_trigger(trigger_ratio, dtype) -> jax.Array:
    """``log(trigger_ratio)``, the ratio checked ``> 1``; float64 ``math.log`` when concrete."""
    ratio, values = _checked(trigger_ratio, "trigger_ratio", dtype, gt=1.0)
    return jnp.log(ratio) if values is None else jnp.asarray(math.log(float(values)), dtype)


@dataclasses.dataclass(frozen=True)
class AgentSpec:
    """Static agent settings: they fix the trace."""

    solver: str = "vertex"  # "vertex" | "pgd" | "dp"
    pgd_steps: int = 50
    pgd_starts: int = 4
    pgd_optimizer: str = "adam"  # "adam" | "sgd"
    pgd_include_current: bool = True  # PGD start 0 is the current state (else all random)
    pgd_gap: bool = False  # PGD's residual: its LCB above the DP's exact minimum (needs dp_plan)
    beta_mode: str = "constant"  # "constant" | "oful"
    reference: str = "global"  # global lazy only: "global" | "own"
    refresh_every: int = 1  # recompute V^{-1}, log det V from V every this many rounds
    refresh_method: str = "cholesky"  # d >= 3: "cholesky" (LAPACK) | "unrolled" (linalg.refresh)
    gram_summation: str = "plain"  # "plain" | "compensated" (Kahan: linalg.add_gram)
    # adaptive_lazy only (Section 5.2, gsjax.algorithms.adaptive):
    warmup: int = 100  # tau, rounds of uniform exploration on the super-graph (0: no test)
    signal_gamma: float = 0.5  # gamma of Assumption B: slots with statistic > gamma / 2 kept
    refined: str = "lazy"  # schedule after the test: "lazy" | "async_lazy"
    dp_plan: object = None  # solver "dp": gsjax.dp.make_plan(scopes), its static elimination


class BanditState(NamedTuple):
    """What the next round needs."""

    stats: RidgeStats  # per criterion: data_gram, inv (k,d,d), lam, logdet (k,), b (k,d)
    logdet_ref: jax.Array  # (k,) log det V at each criterion's reference (last update)
    s: jax.Array  # (n,) active policy s_active, the state played next round
    t: jax.Array  # () int32, observations so far
    graph: object = ()  # the estimator's extra state: adaptive_lazy's kept scope slots (k, n)


class BanditInfo(NamedTuple):
    """Per-round diagnostics (not carried)."""

    triggered: jax.Array  # (k,) bool: log det V - log det V_ref > log c held for criterion i
    updated: jax.Array  # (k,) bool: criterion i counted as re-optimised this round
    reoptimised: jax.Array  # () bool: the LCB was re-minimised this round
    lcb_residual: jax.Array  # () projected-gradient norm of the solver's answer (0 if kept)


class SolveRequest(NamedTuple):
    """What ``prepare`` asks of ``solve`` for one seed."""

    reoptimise: jax.Array  # () bool: re-minimise this round
    free: jax.Array  # (n,) bool: coordinates that may move
    beta: jax.Array  # (k,) exploration radius for this round


class BanditAlgorithm(NamedTuple):
    """An algorithm as pure functions, its static settings bound by closure
    (:func:`gsjax.algorithms.kernel.make_kernel` builds every one).

    ``update`` is ``prepare`` then, when its request asks, ``solve``. ``always_solves``: it
    re-optimises every round (no compaction). ``describe(state, problem) -> dict[str, Array]``
    reduces ONE seed's final state to small diagnostics (:attr:`gsjax.runner.SweepResult.final`;
    e.g. ``adaptive_lazy``'s learned graph). ``relaxed``: built with the soft logic (update
    counts are probabilities). ``exact``: its solver's residual is always 0.
    """

    name: str
    init: Callable  # (key, params, problem) -> BanditState
    act: Callable  # (key, state, params, problem) -> (action, state)
    update: Callable  # (key, state, action, feedback, params, problem) -> (state, BanditInfo)
    prepare: Callable
    solve: Callable
    always_solves: bool
    describe: Callable
    relaxed: bool = False
    exact: bool = False  # the solver's residual is always 0 (vertex, DP): not scattered back
