"""Types shared by the bandit algorithms: params, static spec, state, info, the algorithm triple.

An algorithm is three pure functions over NamedTuple states (BlackJAX/Optax shape), for ONE
seed; the runner adds ``lax.scan`` over rounds and ``vmap`` over seeds:

* ``init(key, params, problem) -> BanditState`` -- prior statistics and the first policy;
* ``act(key, state, params, problem) -> (action, state)`` -- the state to play this round;
* ``update(key, state, action, feedback, params, problem) -> (state, BanditInfo)`` -- add the
  round's observation, decide whether to re-optimise, and if so compute the next policy.

``update`` is ``prepare`` (statistics, trigger, references: cheap) followed, when the returned
:class:`SolveRequest` asks for it, by ``solve`` (the LCB minimisation: expensive). An algorithm
that exposes the two halves lets a batched runner solve only the seeds that triggered
(:func:`gsjax.runner.make_sweep` with ``compact=True``); ``update`` is the reference form.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple

import jax

from gsjax.linalg import RidgeStats

__all__ = [
    "AgentParams",
    "AgentSpec",
    "BanditState",
    "BanditInfo",
    "SolveRequest",
    "BanditAlgorithm",
]


class AgentParams(NamedTuple):
    """Float hyperparameters: traced, so they can be vmapped over or differentiated."""

    lambda_reg: jax.Array  # (k,) ridge regulariser per criterion (stiffness)
    beta: jax.Array  # (k,) constant exploration radius (beta_mode = "constant")
    pgd_lr: jax.Array  # () PGD step size
    log_trigger: jax.Array  # () log c: a trigger fires when log det V - log det V_ref > log c
    oful_delta: jax.Array  # () OFUL confidence level
    oful_S: jax.Array  # () OFUL bound on ||theta*||
    oful_sigma: jax.Array  # (k,) OFUL sub-Gaussian noise scale


@dataclasses.dataclass(frozen=True)
class AgentSpec:
    """Static agent settings: they fix the trace."""

    solver: str = "vertex"  # "vertex" | "pgd"
    pgd_steps: int = 50
    pgd_starts: int = 4
    pgd_optimizer: str = "adam"  # "adam" | "sgd"
    pgd_include_current: bool = True  # PGD start 0 is the current state (else all random)
    beta_mode: str = "constant"  # "constant" | "oful"
    reference: str = "global"  # global lazy only: "global" | "own"
    refresh_every: int = 1  # recompute V^{-1}, log det V from V every this many rounds


class BanditState(NamedTuple):
    """What the next round needs."""

    stats: RidgeStats  # per criterion: data_gram (k,d,d), lam (k,), inv (k,d,d), b (k,d), logdet (k,)
    logdet_ref: jax.Array  # (k,) log det V at each criterion's reference (last update)
    s: jax.Array  # (n,) active policy s_active, the state played next round
    t: jax.Array  # () int32, observations so far


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


InitFn = Callable[..., BanditState]
ActFn = Callable[..., tuple]
UpdateFn = Callable[..., tuple]


class BanditAlgorithm(NamedTuple):
    """An algorithm as pure functions with its static settings bound by closure.

    ``prepare`` and ``solve`` are optional (None for algorithms without the split).
    ``always_solves`` marks algorithms that re-optimise every round (no compaction possible).
    ``describe(state, problem) -> dict[str, Array]`` (optional) reduces ONE seed's final state
    to small diagnostics (e.g. the learned graph of ``adaptive_lazy``); the runner returns them
    per seed as :attr:`gsjax.runner.SweepResult.final`.
    """

    name: str
    init: InitFn
    act: ActFn
    update: UpdateFn
    prepare: Callable | None = None
    solve: Callable | None = None
    always_solves: bool = False
    describe: Callable | None = None
