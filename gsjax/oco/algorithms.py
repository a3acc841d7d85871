r"""Projected OGD and Randomized Lazy OGD (paper Section 6.2, 6.4), as ``init/act/update``.

Every algorithm keeps a *virtual* projected-OGD iterate ``w_t`` updated every round from the
gradient at ``w_t`` (full information), and a *deployed* state ``s_t``, played and charged for
movement:

* ``act`` (round ``t``): draw coins ``c_{t,i}``; component ``i`` deploys, ``s_{t,i} = w_{t,i}``,
  when ``c_{t,i} = 1``, else keeps ``s_{t-1,i}``;
* ``update``: ``w_{t+1} = \Pi_{[0,1]^n}(w_t - \eta \odot \nabla f_t(w_t))``.

``ogd``: ``c_t = 1`` always (plain projected OGD, ``s_t = w_t``).
``lazy_ogd`` (Randomized Lazy OGD, Section 6.2): ONE coin per round for the whole state,
``c_t = [u_t < p]`` with ``u_t`` uniform on ``[0,1)``, ``p = M/T``; one step size.
``componentwise_lazy_ogd`` (Section 6.4): independent ``c_{t,i} = [u_{t,i} < p_i]``,
``p_i = M_i/T``, and a step size ``\eta_i`` per component.

With ``p = 1`` every coin is 1 (``u < 1``): Lazy OGD is plain OGD, bit for bit; on one seed a
larger ``p`` deploys in every round a smaller one does (common random numbers).

Step size (:func:`step_size`): the deployed state is the virtual iterate of the last deploy
``\tau``, ``t - \tau`` is geometric with mean ``(1-p)/p`` and
``\|w_t - w_\tau\| \le \eta G (t - \tau)``; with diameter ``D`` and gradient bound ``G``,

.. math::
   E[\text{loss regret}] \le \underbrace{\frac{D^2}{2\eta} + \frac{\eta G^2 T}{2}}_{\text{OGD on } w}
   + \underbrace{\eta G^2 T \frac{1-p}{p}}_{\text{coupling } f_t(s_t) - f_t(w_t)}
   = \frac{D^2}{2\eta} + \frac{\eta G^2 T}{2}\Big(\frac{2}{p} - 1\Big),

minimised by ``\eta^* = D / (G \sqrt{T (2/p - 1)})`` (rule ``"lazy"``, the default): the
paper's ``O(DGT/\sqrt M)`` (Theorem 10). Rule ``"movement"`` adds the virtual path length
``\lambda T \eta G_1`` to the bound:
``\eta = D / \sqrt{T (G^2 (2/p - 1) + 2 \lambda \sqrt{m} G)}`` (``m`` coordinates). Rule
``"ogd"`` ignores ``p`` (``D/(G\sqrt T)``); ``"constant"`` uses a given ``\eta``. Uniform Lazy
OGD uses the whole state's ``D = \sqrt n`` and ``G``; the component-wise one each component's
``D_i = \sqrt d``, ``G_i``, ``p_i``.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from gsjax.oco.problem import OCOProblem, OCOSpec, coord_grad, coord_loss

__all__ = ["OCOParams", "OCOState", "OCOInfo", "OCOAlgorithm", "STEP_RULES", "step_size",
           "REGISTRY", "register", "make"]

STEP_RULES = ("lazy", "ogd", "movement", "constant")


class OCOParams(NamedTuple):
    """Float hyperparameters (traced: a budget sweep vmaps over them)."""

    p: jax.Array  # (k,) switching probability per component (M_i / T); equal for lazy_ogd
    eta: jax.Array  # (k,) step size per component; equal for ogd / lazy_ogd


class OCOState(NamedTuple):
    """What the next round needs."""

    w: jax.Array  # (n,) virtual OGD iterate w_t (gradient taken here next update)
    s: jax.Array  # (n,) deployed state: the last one played (s_0 before round 1)
    switched: jax.Array  # (k,) bool: component i deployed w in the last act


class OCOInfo(NamedTuple):
    """Per-round diagnostics (not carried)."""

    switched: jax.Array  # (k,) bool: component i took w_t this round (a "switch")
    virtual_loss: jax.Array  # (n,) per-coordinate loss of the virtual iterate f_t(w_t)


class OCOAlgorithm(NamedTuple):
    name: str
    init: Callable
    act: Callable
    update: Callable
    lazy: bool  # takes a budget (p < 1 possible)
    componentwise: bool  # independent coins and step sizes per component


def step_size(rule: str, horizon: int, budget: float, diameter: float, grad_bound: float,
              move_cost: float = 0.0, coords: int = 1, eta: float | None = None,
              scale: float = 1.0) -> float:
    """The step size ``eta`` of ``rule`` (:data:`STEP_RULES`, see the module docstring) for
    ``p = budget / horizon`` (``M / T``, ``0 < M <= T``), diameter ``D``, gradient bound ``G``;
    ``move_cost`` and ``coords`` for rule "movement", ``eta`` for rule "constant"; the step is
    multiplied by ``scale``."""
    p = budget / horizon
    if rule == "constant":
        if eta is None:
            raise ValueError("rule 'constant' needs eta")
        return float(eta) * scale
    if rule == "ogd":
        base = diameter / (grad_bound * math.sqrt(horizon))
    elif rule == "lazy":
        base = diameter / (grad_bound * math.sqrt(horizon * (2.0 / p - 1.0)))
    elif rule == "movement":
        denom = horizon * (grad_bound**2 * (2.0 / p - 1.0)
                           + 2.0 * move_cost * math.sqrt(coords) * grad_bound)
        base = diameter / math.sqrt(denom)
    else:
        raise ValueError(f"unknown step rule {rule!r}; one of {STEP_RULES}")
    return base * scale


def _make(name: str, spec: OCOSpec, lazy: bool, componentwise: bool) -> OCOAlgorithm:
    k, d = spec.num_components, spec.block_dim

    def init(key, params: OCOParams, problem: OCOProblem) -> OCOState:
        del key, params
        return OCOState(w=problem.s0, s=problem.s0, switched=jnp.zeros((k,), bool))

    def act(key, state: OCOState, params: OCOParams, problem: OCOProblem):
        del problem
        if not lazy:
            coins = jnp.ones((k,), bool)
            s = state.w
        else:
            shape = (k,) if componentwise else ()
            u = jax.random.uniform(key, shape, params.p.dtype)
            coins = jnp.broadcast_to(u < params.p, (k,))
            s = jnp.where(jnp.repeat(coins, d), state.w, state.s)
        return s, OCOState(w=state.w, s=s, switched=coins)

    def update(key, state: OCOState, action, target, params: OCOParams, problem: OCOProblem):
        del key, action
        g = coord_grad(spec, state.w, target, problem.weight)
        w = jnp.clip(state.w - jnp.repeat(params.eta, d) * g, 0.0, 1.0)
        vloss = coord_loss(spec, state.w, target, problem.weight)
        return state._replace(w=w), OCOInfo(switched=state.switched, virtual_loss=vloss)

    return OCOAlgorithm(name, init, act, update, lazy, componentwise)


REGISTRY: dict[str, Callable[[OCOSpec], OCOAlgorithm]] = {
    name: functools.partial(_make, name, lazy=lazy, componentwise=cw) for name, lazy, cw in
    (("ogd", False, False), ("lazy_ogd", True, False), ("componentwise_lazy_ogd", True, True))}


def register(name: str, factory: Callable[[OCOSpec], OCOAlgorithm]) -> None:
    """Add an OCO algorithm factory ``factory(spec) -> OCOAlgorithm``."""
    if name in REGISTRY:
        raise ValueError(f"OCO algorithm {name!r} is already registered")
    REGISTRY[name] = factory


def make(name: str, spec: OCOSpec) -> OCOAlgorithm:
    """Look up and build an OCO algorithm; unknown names list the registered ones."""
    try:
        return REGISTRY[name](spec)
    except KeyError:
        raise ValueError(f"unknown OCO algorithm {name!r}; registered: {sorted(REGISTRY)}") from None
