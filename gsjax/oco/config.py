"""``kind = "oco"`` experiment configs (paper Section 6), validated into frozen dataclasses.

Same conventions as :mod:`gsjax.config` (whose :class:`~gsjax.config.ConfigError` and small
validators are reused): strict keys, every error names its dotted field, ``--set`` overrides.

TOML layout (defaults in parentheses)::

    kind = "oco"                    # required: marks the file for gsjax.oco
    name = "section6_rates"         # required
    description = ""
    seeds = 100                     # int >= 1 (100)
    horizon = [1000, 10000]         # int or list of ints >= 1; one run per horizon (1000)
    root_seed = 0
    dtype = "float64"               # "float32" | "float64" ("float64": regret is a small
                                    #   difference of sums of T losses)
    record_every = 10               # optional; must divide every horizon (auto per horizon)
    record_seeds = 4                # seeds whose trajectories are kept for figures (4)
    move_cost = 1.0                 # lambda of the regret (>= 0)
    move_costs = [0.1, 1.0, 10.0]   # lambdas of the trade-off report ([move_cost])
    budget_exponents = [0.5, 1.0]   # default budget points of the lazy algorithms: M = T^a
    # budgets = [100, 1000]         # ... or absolute M (exclusive with budget_exponents)

    [problem]
    loss = "squared"                # "squared" | "l1"
    targets = "adversarial"         # "iid" | "coin" | "drift" | "switch" | "random_switch"
                                    #   | "adversarial"
    adversary = "previous"          # "previous" | "mean" (adversarial targets)
    num_components = 2              # k (2)
    block_dim = 1                   # d coordinates per component; n = k d (1)
    s0 = 0.5                        # float or list of n floats in [0, 1]
    target_low = 0.0                # float or list of n (0.0)
    target_high = 1.0               # float or list of n, >= target_low (1.0)
    weights = 1.0                   # loss weight a_j, float or list of n, > 0 (1.0)
    drift = 0.02                    # random-walk std per round ("drift"), >= 0
    switch_period = 100             # P ("switch", "random_switch"), int >= 1

    [algorithms.lazy]               # one table per algorithm entry, file order kept
    algorithm = "lazy_ogd"          # "ogd" | "lazy_ogd" | "componentwise_lazy_ogd"
                                    #   (defaults to the table name)
    step_rule = "lazy"              # "lazy" | "ogd" | "movement" | "constant" ("lazy")
    eta = 0.01                      # rule "constant" only
    eta_scale = 1.0                 # multiplies the rule's step (> 0)
    budget_exponents = [[0.5, 1.0]] # points; a point is a number (every component) or,
                                    #   for componentwise_lazy_ogd, a list of k numbers

A budget exponent ``a`` in ``(0, 1]`` gives ``M = T^a``; an absolute budget must satisfy
``0 < M <= T`` for every horizon (checked when the run is built). ``ogd`` takes no budget
(``M = T``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from pathlib import Path
from typing import Any, Sequence

from gsjax.config import (
    _NAME_RE,
    ConfigError,
    _check_keys,
    _choice,
    _float,
    _float_or_list,
    _int,
    _list,
    _parse_paper,
    _required,
    _str,
    _table,
    apply_overrides,
    find_config,
)
from gsjax.oco.algorithms import REGISTRY, STEP_RULES
from gsjax.oco.problem import ADVERSARIES, LOSSES, TARGETS

__all__ = [
    "KIND",
    "OCOProblemConfig",
    "OCOEntry",
    "OCOConfig",
    "config_kind",
    "parse_oco_config",
    "load_oco_config",
    "oco_config_to_dict",
]

KIND = "oco"


@dataclasses.dataclass(frozen=True)
class OCOProblemConfig:
    """``[problem]``: the loss family and its targets (see :mod:`gsjax.oco.problem`)."""

    loss: str = "squared"
    targets: str = "adversarial"
    adversary: str = "previous"
    num_components: int = 2
    block_dim: int = 1
    s0: float | tuple[float, ...] = 0.5
    target_low: float | tuple[float, ...] = 0.0
    target_high: float | tuple[float, ...] = 1.0
    weights: float | tuple[float, ...] = 1.0
    drift: float | tuple[float, ...] = 0.02
    switch_period: int = 100

    @property
    def n(self) -> int:
        return self.num_components * self.block_dim


@dataclasses.dataclass(frozen=True)
class OCOEntry:
    """One ``[algorithms.NAME]`` table.

    ``budget_kind`` is ``"exponent"`` (``M = T^a``), ``"absolute"`` or ``"none"`` (ogd); each
    of ``budgets`` is a float (every component) or a tuple of k floats.
    """

    name: str
    algorithm: str
    step_rule: str = "lazy"
    eta: float | None = None
    eta_scale: float = 1.0
    budget_kind: str = "none"
    budgets: tuple = ()


@dataclasses.dataclass(frozen=True)
class OCOConfig:
    """A validated ``kind = "oco"`` config."""

    name: str
    description: str = ""
    seeds: int = 100
    horizons: tuple[int, ...] = (1000,)
    root_seed: int = 0
    dtype: str = "float64"
    record_every: int | None = None
    record_seeds: int = 4
    move_cost: float = 1.0
    move_costs: tuple[float, ...] = (1.0,)
    problem: OCOProblemConfig = dataclasses.field(default_factory=OCOProblemConfig)
    algorithms: tuple[OCOEntry, ...] = ()
    paper_json: str = "{}"
    kind: str = KIND

    @property
    def paper(self) -> dict:
        return json.loads(self.paper_json)

    @property
    def horizon(self) -> int:
        """The largest horizon (for messages)."""
        return max(self.horizons)


_TOP_KEYS = ("kind", "name", "description", "seeds", "horizon", "root_seed", "dtype",
             "record_every", "record_seeds", "move_cost", "move_costs", "budget_exponents",
             "budgets", "paper", "problem", "algorithms")
_PROBLEM_KEYS = tuple(f.name for f in dataclasses.fields(OCOProblemConfig))
_ENTRY_KEYS = ("algorithm", "step_rule", "eta", "eta_scale", "budget_exponents", "budgets")


def config_kind(path: str | os.PathLike) -> str:
    """The top-level ``kind`` of a TOML config file: ``"oco"``, or ``"bandit"`` when absent.

    Unreadable files answer ``"bandit"``, so the usual loader reports the error.
    """
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return "bandit"
    kind = raw.get("kind", "bandit")
    return kind if isinstance(kind, str) else "bandit"


def _int_list(value: Any, field: str, minimum: int) -> tuple[int, ...]:
    if isinstance(value, (list, tuple)):
        if not value:
            raise ConfigError(field, "must list at least one value")
        out = tuple(_int(v, f"{field}[{i}]", minimum=minimum) for i, v in enumerate(value))
        if len(set(out)) != len(out):
            raise ConfigError(field, "values must be distinct")
        return out
    return (_int(value, field, minimum=minimum),)


def _budget_points(value: Any, field: str, k: int, kind: str, per_component: bool) -> tuple:
    """A list of budget points: each a number or (per_component) a list of k numbers."""
    points = _list(value, field)
    if not points:
        raise ConfigError(field, "must list at least one budget point")
    bounds = dict(gt=0.0, le=1.0) if kind == "exponent" else dict(gt=0.0)
    out = []
    for i, pt in enumerate(points):
        f = f"{field}[{i}]"
        if isinstance(pt, (list, tuple)):
            if not per_component:
                raise ConfigError(
                    f, "a per-component budget (a list) needs algorithm "
                       "'componentwise_lazy_ogd'; this algorithm has one budget")
            if len(pt) != k:
                raise ConfigError(f, f"a per-component budget must have k = {k} entries, "
                                     f"got {len(pt)}")
            out.append(tuple(_float(v, f"{f}[{j}]", **bounds) for j, v in enumerate(pt)))
        else:
            out.append(_float(pt, f, **bounds))
    return tuple(out)


def _parse_budgets(table: dict, path: str, k: int, per_component: bool, default=None):
    has_e, has_a = "budget_exponents" in table, "budgets" in table
    if has_e and has_a:
        raise ConfigError(_join(path, "budgets"), "give budget_exponents or budgets, not both")
    if has_e:
        f = _join(path, "budget_exponents")
        return "exponent", _budget_points(table["budget_exponents"], f, k, "exponent",
                                          per_component)
    if has_a:
        f = _join(path, "budgets")
        return "absolute", _budget_points(table["budgets"], f, k, "absolute", per_component)
    return default


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _parse_problem(raw: dict) -> OCOProblemConfig:
    path = "problem"
    _check_keys(raw, path, _PROBLEM_KEYS)
    f = lambda key: f"{path}.{key}"  # noqa: E731
    d = OCOProblemConfig()
    k = _int(raw.get("num_components", d.num_components), f("num_components"), minimum=1)
    dim = _int(raw.get("block_dim", d.block_dim), f("block_dim"), minimum=1)
    n = k * dim
    vec = lambda key, **b: _float_or_list(raw.get(key, getattr(d, key)), f(key), n,  # noqa: E731
                                          "n (coordinates)", **b)
    low, high = vec("target_low"), vec("target_high")
    lows = low if isinstance(low, tuple) else (low,) * n
    highs = high if isinstance(high, tuple) else (high,) * n
    for j, (lo, hi) in enumerate(zip(lows, highs)):
        if hi < lo:
            raise ConfigError(f("target_high"), f"must be >= problem.target_low on every "
                                                f"coordinate; coordinate {j}: {hi} < {lo}")
    return OCOProblemConfig(
        loss=_choice(raw.get("loss", d.loss), f("loss"), LOSSES),
        targets=_choice(raw.get("targets", d.targets), f("targets"), TARGETS),
        adversary=_choice(raw.get("adversary", d.adversary), f("adversary"), ADVERSARIES),
        num_components=k,
        block_dim=dim,
        s0=vec("s0", ge=0.0, le=1.0),
        target_low=low,
        target_high=high,
        weights=vec("weights", gt=0.0),
        drift=vec("drift", ge=0.0),
        switch_period=_int(raw.get("switch_period", d.switch_period), f("switch_period"),
                           minimum=1),
    )


def _parse_entry(name: str, raw: dict, k: int, default_budgets) -> OCOEntry:
    path = f"algorithms.{name}"
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ConfigError(path, f"entry name {name!r} must match [a-z][a-z0-9_]*")
    raw = _table(raw, path)
    _check_keys(raw, path, _ENTRY_KEYS)
    known = ", ".join(repr(a) for a in sorted(REGISTRY))
    if "algorithm" in raw:
        algorithm = raw["algorithm"]
        if not isinstance(algorithm, str) or algorithm not in REGISTRY:
            raise ConfigError(f"{path}.algorithm",
                              f"unknown OCO algorithm {algorithm!r}; must be one of {known}")
    else:
        algorithm = name
        if algorithm not in REGISTRY:
            raise ConfigError(f"{path}.algorithm",
                              f"missing, and the entry name {name!r} is not an OCO algorithm; "
                              f"set it to one of {known}")
    rule = _choice(raw.get("step_rule", "lazy"), f"{path}.step_rule", STEP_RULES)
    eta = None
    if rule == "constant":
        eta = _float(_required(raw, "eta", f"{path}.eta", "for step_rule = 'constant'"),
                     f"{path}.eta", gt=0.0)
    elif "eta" in raw:
        raise ConfigError(f"{path}.eta", f"only allowed with step_rule = 'constant', not {rule!r}")
    scale = _float(raw.get("eta_scale", 1.0), f"{path}.eta_scale", gt=0.0)
    if algorithm == "ogd":
        for key in ("budget_exponents", "budgets"):
            if key in raw:
                raise ConfigError(f"{path}.{key}", "ogd deploys every round (M = T); "
                                                   "it takes no budget")
        kind, budgets = "none", ()
    else:
        per_comp = algorithm == "componentwise_lazy_ogd"
        got = _parse_budgets(raw, path, k, per_comp, default=None)
        if got is None:
            if default_budgets is None:
                raise ConfigError(f"{path}.budget_exponents",
                                  "a lazy algorithm needs budgets: set budget_exponents or "
                                  "budgets here or at the top level")
            got = default_budgets
        kind, budgets = got
    return OCOEntry(name, algorithm, rule, eta, scale, kind, budgets)


def parse_oco_config(raw: dict, overrides: Sequence[str] = ()) -> OCOConfig:
    """Validate a raw ``kind = "oco"`` config dict; errors name the dotted field."""
    if not isinstance(raw, dict):
        raise ConfigError("<root>", f"config must be a table, got {type(raw).__name__}")
    if overrides:
        raw = apply_overrides(raw, overrides)
    _check_keys(raw, "", _TOP_KEYS)
    kind = raw.get("kind")
    if kind != KIND:
        raise ConfigError("kind", f"must be {KIND!r} for an OCO config, got {kind!r}")
    name = _str(_required(raw, "name", "name"), "name", nonempty=True)
    problem = _parse_problem(_table(raw.get("problem", {}), "problem"))
    k = problem.num_components
    horizons = _int_list(raw.get("horizon", 1000), "horizon", minimum=1)
    record_every = None
    if "record_every" in raw:
        record_every = _int(raw["record_every"], "record_every", minimum=1)
        for T in horizons:
            if T % record_every:
                raise ConfigError("record_every", f"must divide every horizon; {T} % "
                                                  f"{record_every} != 0")
    move_cost = _float(raw.get("move_cost", 1.0), "move_cost", ge=0.0)
    if "move_costs" in raw:
        lams = _list(raw["move_costs"], "move_costs")
        if not lams:
            raise ConfigError("move_costs", "must list at least one value")
        move_costs = tuple(_float(v, f"move_costs[{i}]", ge=0.0) for i, v in enumerate(lams))
    else:
        move_costs = (move_cost,)
    default_budgets = _parse_budgets(raw, "", k, per_component=True, default=None)
    algos_raw = _table(_required(raw, "algorithms", "algorithms",
                                 "(at least one [algorithms.NAME] table)"), "algorithms")
    if not algos_raw:
        raise ConfigError("algorithms", "at least one [algorithms.NAME] table is required")
    entries = []
    for entry_name, entry_raw in algos_raw.items():
        db = default_budgets
        if db is not None and entry_raw.get("algorithm", entry_name) == "lazy_ogd" and any(
                isinstance(b, tuple) for b in db[1]):
            raise ConfigError("budget_exponents" if db[0] == "exponent" else "budgets",
                              f"per-component budget points cannot be the default of "
                              f"lazy_ogd entry {entry_name!r}; give it its own budgets")
        entries.append(_parse_entry(entry_name, entry_raw, k, db))
    return OCOConfig(
        name=name,
        description=_str(raw.get("description", ""), "description"),
        seeds=_int(raw.get("seeds", 100), "seeds", minimum=1),
        horizons=horizons,
        root_seed=_int(raw.get("root_seed", 0), "root_seed", minimum=0),
        dtype=_choice(raw.get("dtype", "float64"), "dtype", ("float32", "float64")),
        record_every=record_every,
        record_seeds=_int(raw.get("record_seeds", 4), "record_seeds", minimum=0),
        move_cost=move_cost,
        move_costs=move_costs,
        problem=problem,
        algorithms=tuple(entries),
        paper_json=_parse_paper(raw.get("paper", {})),
    )


def load_oco_config(path: str | os.PathLike, overrides: Sequence[str] = ()) -> OCOConfig:
    """Read, override and validate a ``kind = "oco"`` TOML file."""
    if not Path(path).exists():
        path = find_config(path)
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError("<file>", f"cannot read config file {os.fspath(path)!r}: "
                                    f"{exc.strerror or exc}")
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("<file>", f"invalid TOML in {os.fspath(path)!r}: {exc}")
    return parse_oco_config(raw, overrides)


def _plain(v):
    return [_plain(x) for x in v] if isinstance(v, tuple) else v


def oco_config_to_dict(cfg: OCOConfig) -> dict:
    """The resolved config as a JSON-ready dict; ``parse_oco_config`` of it gives ``cfg``."""
    prob = {f.name: _plain(getattr(cfg.problem, f.name))
            for f in dataclasses.fields(OCOProblemConfig)}
    algos = {}
    for e in cfg.algorithms:
        d: dict[str, Any] = {"algorithm": e.algorithm, "step_rule": e.step_rule,
                             "eta_scale": e.eta_scale}
        if e.eta is not None:
            d["eta"] = e.eta
        if e.budget_kind != "none":
            d["budget_exponents" if e.budget_kind == "exponent" else "budgets"] = _plain(e.budgets)
        algos[e.name] = d
    out = {
        "kind": cfg.kind, "name": cfg.name, "description": cfg.description, "seeds": cfg.seeds,
        "horizon": list(cfg.horizons), "root_seed": cfg.root_seed, "dtype": cfg.dtype,
        "record_seeds": cfg.record_seeds, "move_cost": cfg.move_cost,
        "move_costs": list(cfg.move_costs), "problem": prob, "algorithms": algos,
        "paper": cfg.paper,
    }
    if cfg.record_every is not None:
        out["record_every"] = cfg.record_every
    return out

