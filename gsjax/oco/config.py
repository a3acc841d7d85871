"""``kind = "oco"`` experiment configs (paper Section 6), validated into frozen records.

Same schema machinery as :mod:`gsjax.config` (pydantic records, :class:`~gsjax.config.ConfigError`
naming the dotted field, ``--set`` overrides).

TOML layout (defaults in parentheses)::

    kind = "oco"                    # required: marks the file for gsjax.oco
    name = "section6_rates"         # required
    description = ""
    seeds = 100                     # int >= 1 (100)
    horizon = [1000, 10000]         # int or list of ints >= 1; one run per horizon (1000)
    root_seed = 0                   # int in [0, 2^32 - 1] (0); every int is <= 2^31 - 1
    dtype = "float64"               # "float32" | "float64" ("float64": regret is a small
                                    #   difference of sums of T losses)
    record_every = 10               # optional; must divide every horizon (auto per horizon)
    record_seeds = 4                # seeds whose trajectories are kept for figures (4)
    move_cost = 1.0                 # lambda of the regret (>= 0)
    move_costs = [0.1, 1.0, 10.0]   # lambdas of the trade-off report ([move_cost])
    budget_exponents = [0.5, 1.0]   # default budget points of the lazy algorithms: M = T^a
    # budgets = [100, 1000]         # ... or absolute M (exclusive with budget_exponents)

    [problem]                       # OCOProblemConfig
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

import os
import tomllib
from typing import Annotated, Literal, Sequence

from pydantic import TypeAdapter

from gsjax.config import (
    _NONEMPTY, ConfigError, ExperimentConfig, Float, Floats, Int, Name, Seed, Str, _dict, _dotted,
    _entry_tables, _fail, _length, _Record, _root, _toml_path, _validate, read_toml, record,
)
from gsjax.oco.algorithms import REGISTRY, STEP_RULES
from gsjax.oco.problem import ADVERSARIES, LOSSES, TARGETS

__all__ = [
    "KIND", "OCOProblemConfig", "OCOEntry", "OCOConfig", "config_kind", "parse_oco_config",
    "load_oco_config", "oco_config_to_dict",
]

KIND = "oco"


@record
class OCOProblemConfig(_Record):
    """``[problem]``: the loss family and its targets (see :mod:`gsjax.oco.problem`); each
    vector field is a float or a list of n floats."""

    loss: Literal[LOSSES] = "squared"
    targets: Literal[TARGETS] = "adversarial"
    adversary: Literal[ADVERSARIES] = "previous"
    num_components: Int(1) = 2
    block_dim: Int(1) = 1
    s0: Floats(ge=0.0, le=1.0) = 0.5
    target_low: Floats() = 0.0
    target_high: Floats() = 1.0
    weights: Floats(gt=0.0) = 1.0
    drift: Floats(ge=0.0) = 0.02
    switch_period: Int(1) = 100

    @property
    def n(self) -> int:
        return self.num_components * self.block_dim

    def _check(self) -> None:
        for key in ("s0", "target_low", "target_high", "weights", "drift"):
            _length(getattr(self, key), self.n, "n (coordinates)", key)
        lows, highs = ((v if isinstance(v, tuple) else (v,) * self.n)
                       for v in (self.target_low, self.target_high))
        for j, (lo, hi) in enumerate(zip(lows, highs)):
            if hi < lo:
                _fail("target_high", "must be >= problem.target_low on every coordinate; "
                                     f"coordinate {j}: {hi} < {lo}")


@record(kw_only=False)
class OCOEntry(_Record):
    """One ``[algorithms.NAME]`` table. ``budget_kind`` is ``"exponent"`` (``M = T^a``),
    ``"absolute"`` or ``"none"`` (ogd); each of ``budgets`` is a float (every component) or a
    tuple of k floats."""

    name: str
    algorithm: str
    step_rule: Literal[STEP_RULES] = "lazy"
    eta: Float(gt=0.0) | None = None
    eta_scale: Float(gt=0.0) = 1.0
    budget_kind: Literal["exponent", "absolute", "none"] = "none"
    budgets: tuple = ()

    def _check(self) -> None:
        if self.step_rule == "constant" and self.eta is None:
            _fail("eta", "required for step_rule = 'constant' but missing")
        if self.step_rule != "constant" and self.eta is not None:
            _fail("eta", f"only allowed with step_rule = 'constant', not {self.step_rule!r}")


@record
class OCOConfig(_Record):
    """A validated ``kind = "oco"`` config (``horizons``: the TOML's ``horizon``, as a tuple;
    ``move_costs`` defaults to ``(move_cost,)``)."""

    kind: Literal["oco"] = KIND
    name: Name
    description: Str = ""
    seeds: Int(1) = 100
    horizons: Annotated[tuple[Int(1), ...], _NONEMPTY] = (1000,)
    root_seed: Seed = 0
    dtype: Literal["float32", "float64"] = "float64"
    record_every: Int(1) | None = None
    record_seeds: Int(0) = 4
    move_cost: Float(ge=0.0) = 1.0
    move_costs: Annotated[tuple[Float(ge=0.0), ...], _NONEMPTY] | None = None
    problem: OCOProblemConfig = OCOProblemConfig()
    algorithms: tuple[OCOEntry, ...] = ()
    paper_json: str = "{}"
    _keys = ("kind", "name", "description", "seeds", "horizon", "root_seed", "dtype",
             "record_every", "record_seeds", "move_cost", "move_costs", "budget_exponents",
             "budgets", "paper", "problem", "algorithms")

    paper = ExperimentConfig.paper

    @property
    def horizon(self) -> int:
        """The largest horizon (for messages)."""
        return max(self.horizons)

    def _check(self) -> None:
        if len(set(self.horizons)) != len(self.horizons):
            _fail("horizons", "values must be distinct")
        for T in self.horizons if self.record_every else ():
            if T % self.record_every:
                _fail("record_every", f"must divide every horizon; {T} % {self.record_every} != 0")
        if self.move_costs is None:
            object.__setattr__(self, "move_costs", (self.move_cost,))


_POINTS = {kind: TypeAdapter(list[Floats(**bounds)]) for kind, bounds in
           (("exponent", dict(gt=0.0, le=1.0)), ("absolute", dict(gt=0.0)))}
_KEYS = ("budget_exponents", "budgets")


def config_kind(path: str | os.PathLike) -> str:
    """The top-level ``kind`` of a TOML config file: ``"oco"``, or ``"bandit"`` when absent or
    when the file is unreadable (the usual loader then reports the error)."""
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except (OSError, ValueError):  # ValueError: bad TOML, or an int over 4300 digits
        return "bandit"
    kind = raw.get("kind", "bandit")
    return kind if isinstance(kind, str) else "bandit"


def _budgets(table: dict, path: tuple, k: int, per_component: bool):
    """``(kind, points)`` of a table's ``budget_exponents`` or ``budgets``; ``None`` if neither."""
    given = [key for key in _KEYS if key in table]
    if len(given) == 2:
        raise ConfigError(".".join((*path, "budgets")),
                          "give budget_exponents or budgets, not both")
    if not given:
        return None
    key = given[0]
    kind = "exponent" if key == "budget_exponents" else "absolute"
    where = lambda *loc: _dotted((*path, key, *loc))  # noqa: E731
    points = _validate(_POINTS[kind], table[key], lambda loc: where(*loc))
    if not points:
        raise ConfigError(where(), "must list at least one budget point")
    for i, pt in enumerate(points):
        if isinstance(pt, tuple) and not per_component:
            raise ConfigError(where(i), "a per-component budget (a list) needs algorithm "
                                        "'componentwise_lazy_ogd'; this algorithm has one budget")
        if isinstance(pt, tuple) and len(pt) != k:
            raise ConfigError(where(i), f"a per-component budget must have k = {k} entries, "
                                        f"got {len(pt)}")
    return kind, tuple(points)


def parse_oco_config(raw: dict, overrides: Sequence[str] = ()) -> OCOConfig:
    """Validate a raw ``kind = "oco"`` config dict; errors name the dotted field."""
    data = _root(raw, overrides)
    if data.get("kind") != KIND:
        raise ConfigError("kind", f"must be {KIND!r} for an OCO config, got {data.get('kind')!r}")
    problem = _validate(OCOProblemConfig.__pydantic_validator__, data.get("problem", {}),
                        lambda loc: _dotted(("problem", *loc)))
    k = problem.num_components
    default = _budgets(data, (), k, per_component=True)
    tables = list(_entry_tables(data, REGISTRY, ("algorithm", "step_rule", "eta", "eta_scale",
                                                 *_KEYS), "OCO algorithm"))
    entries = []
    for name, algorithm, table in tables:
        path = ("algorithms", name)
        if algorithm == "ogd":
            for key in (key for key in _KEYS if key in table):
                raise ConfigError(f"algorithms.{name}.{key}", "ogd deploys every round (M = T); "
                                                              "it takes no budget")
            got = ("none", ())
        else:
            got = _budgets(table, path, k, algorithm == "componentwise_lazy_ogd") or default
            if got is None:
                raise ConfigError(f"algorithms.{name}.budget_exponents", "a lazy algorithm needs "
                                  "budgets: set budget_exponents or budgets here or at the top "
                                  "level")
            if got is default and algorithm == "lazy_ogd" and any(isinstance(b, tuple)
                                                                  for b in got[1]):
                raise ConfigError(_KEYS[got[0] != "exponent"], "per-component budget points "
                                  f"cannot be the default of lazy_ogd entry {name!r}; give it "
                                  "its own budgets")
        rest = {key: v for key, v in table.items() if key not in _KEYS}
        entries.append({"name": name, "algorithm": algorithm, **rest, "budget_kind": got[0],
                        "budgets": got[1]})
    horizon = data.pop("horizon", 1000)
    data = {**{key: v for key, v in data.items() if key not in _KEYS}, "problem": problem,
            "algorithms": entries,
            "horizons": horizon if isinstance(horizon, (list, tuple)) else [horizon]}
    renames = {"paper_json": "paper", "horizons": "horizon"}
    return _validate(OCOConfig.__pydantic_validator__, data, _toml_path(tables, renames))


def load_oco_config(path: str | os.PathLike, overrides: Sequence[str] = ()) -> OCOConfig:
    """Read, override and validate a ``kind = "oco"`` TOML file (or built-in name)."""
    return parse_oco_config(read_toml(path), overrides)


def oco_config_to_dict(cfg: OCOConfig) -> dict:
    """The resolved config as a JSON-ready dict; ``parse_oco_config`` of it gives ``cfg``."""
    keys = ("kind", "name", "description", "seeds", "horizons", "root_seed", "dtype",
            "record_seeds", "move_cost", "move_costs", "problem")
    algos = {e.name: {"algorithm": e.algorithm, "step_rule": e.step_rule,
                      "eta_scale": e.eta_scale, **({} if e.eta is None else {"eta": e.eta}),
                      **({} if e.budget_kind == "none" else
                         {_KEYS[e.budget_kind != "exponent"]: _dict(e.budgets)})}
             for e in cfg.algorithms}
    return {**{"horizon" if key == "horizons" else key: _dict(getattr(cfg, key))
               for key in keys}, "algorithms": algos, "paper": cfg.paper,
            **({} if cfg.record_every is None else {"record_every": cfg.record_every})}
