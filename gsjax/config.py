"""Experiment configuration schema for ``gsjax``.

Experiment configs are TOML files parsed with the standard-library :mod:`tomllib` and validated
into frozen, hashable records declared below as pydantic dataclasses: strict types, closed key
sets and ``Field`` bounds, with the variants of a table as tagged unions (a blocks, unequal
blocks, scopes, one graph kind, Adult or factor problem each its own record). Every problem raises
:class:`ConfigError`, whose ``field`` attribute is the dotted path of the offending entry (for
example ``'agent.lambda_reg'``, ``'problem.edges[3]'`` or ``'algorithms.lazy.reference'``) and
whose message says what is allowed.

TOML layout (defaults in parentheses; each record's docstring lists its fields)::

    name = "my-experiment"          # required, non-empty
    description = ""                # ("")
    seeds = 10                      # int >= 1 (10)
    horizon = 300                   # int >= 1 (300)
    root_seed = 0                   # int >= 0 (0)
    dtype = "float32"               # "float32" | "float64" ("float32")
    record_every = 1                # int >= 1 (auto: smallest divisor of horizon
                                    #   that keeps at most MAX_RECORDS records)

    [paper]                         # free-form reference numbers (optional)

    [problem]                       # required; the keys select the variant:
    structure = "blocks"            # "blocks" | "graph" | "scopes"
    num_blocks = 3                  # blocks (BlocksProblem)
    block_dim = 2
    # unequal blocks: block_dims = [2, 3, 1] instead (UnequalBlocksProblem)
    # scopes: scopes = [[0, 1], [1, 2, 3], [3]] (criterion i reads scopes[i]),
    #         num_coords (default: the largest index + 1) (ScopesProblem)
    # graph: graph = "edges" | "chain" | "complete" | "grid" | "random", num_nodes,
    #        graph_seed, and edges / grid_shape / max_degree, num_edges (GraphProblem)
    features = "linear"             # "linear" | "quadratic" | "rff"
    s0 = 0.5                        # float in [0, 1] or list of n floats

    [problem.theta]                 # distribution, values, scale, seed, per_seed (ThetaConfig)
    [problem.noise]                 # kind, sigma (NoiseConfig)
    # environment = "adult" (Section 7.3): the loss comes from UCI Adult data;
    # structure = "blocks", num_blocks = block_dim = 1, no theta/noise;
    # options in [problem.adult] (AdultProblem, AdultConfig)
    # environment = "factor" (Section 5.3): a factor graph; structure omitted,
    # sizes, layout and mixing in [problem.factor] (FactorProblem, FactorConfig)

    [agent]                         # shared defaults for all algorithms (AgentConfig)

    [algorithms.lazy]               # one table per algorithm, file order kept
    algorithm = "lazy"              # defaults to the table name
    beta = 2.0                      # any [agent] key overrides the shared value

    [grid]                          # optional: run every algorithm on a grid of
    beta = [0.25, 0.5, 1.0]         # float hyperparameters (Cartesian product) in
    lambda_reg = [0.1, 1.0]         # one compiled program; keys: GRID_FIELDS

    [relaxed]                       # optional: the differentiable mode of
    temperature = 0.05              # gsjax tune (RelaxedConfig); gsjax run ignores it

Only the standard library and pydantic are imported here, so the module can be used by
command-line tools without pulling in JAX. :mod:`gsjax.oco.config` reuses the machinery.
"""

import copy
import dataclasses
import datetime
import hashlib
import json
import math
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Mapping, NamedTuple, Sequence, Union

from pydantic import ConfigDict, Discriminator, Field, Strict, Tag, TypeAdapter, ValidationError
from pydantic import AfterValidator, BeforeValidator, model_validator
from pydantic.dataclasses import dataclass as _pydantic_dataclass
from pydantic_core import ArgsKwargs

__all__ = [
    "ALGORITHM_NAMES", "AdultConfig", "AdultProblem", "AgentConfig", "AdaptiveAgentConfig",
    "AlgorithmEntry", "BlocksProblem", "ConfigError", "ExperimentConfig", "FactorConfig",
    "FactorProblem", "GRID_FIELDS", "GraphProblem", "MAX_RECORDS", "NoiseConfig",
    "ProblemConfig", "RelaxedConfig", "ScopesProblem", "ThetaConfig", "UnequalBlocksProblem",
    "apply_overrides", "builtin_config_dir", "config_dirs", "config_hash", "config_to_dict",
    "default_record_every", "find_config", "load_config", "num_coords", "num_criteria",
    "parse_config", "register_algorithm_name",
]


# ---------------------------------------------------------------------------
# Errors: pydantic's ValidationError as one dotted-path ConfigError
# ---------------------------------------------------------------------------


class ConfigError(ValueError):
    """Invalid experiment configuration.

    Attributes:
        field: Dotted path of the offending entry, e.g. ``'agent.lambda_reg'``,
            ``'problem.edges[3]'``; ``'<file>'`` for unreadable files, ``'--set'`` for malformed
            overrides and ``'<root>'`` when the whole config is not a table.
        message: Human-readable description of what is wrong and what is allowed.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"

    def __reduce__(self):  # keep picklable despite the two-argument __init__
        return (type(self), (self.field, self.message))


class _Invalid(ValueError):
    """Raised inside a validator: ``loc`` is relative to the record being validated."""

    def __init__(self, loc: tuple, message: str) -> None:
        self.loc, self.message = loc, message
        super().__init__(message)


def _fail(loc: Any, message: str):
    raise _Invalid(loc if isinstance(loc, tuple) else (loc,), message)


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def _one_of(choices: Sequence[str], got: Any) -> str:
    return f"must be one of {', '.join(repr(c) for c in choices)}; got {got!r}"


_EXPECTED = {"int_type": "an integer", "float_type": "a number", "string_type": "a string",
             "bool_type": "a boolean (true/false)", "tuple_type": "a list", "list_type": "a list",
             "dict_type": "a table", "dataclass_type": "a table", "named_tuple_type": "a table"}
_BOUNDS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def _first_error(exc: ValidationError) -> tuple[tuple, str]:
    """The first error as ``(loc without union tags, one-line message)``."""
    e = exc.errors(include_url=False)[0]
    loc, kind, ctx, value = e["loc"], e["type"], e.get("ctx") or {}, e.get("input")
    if isinstance(ctx.get("error"), _Invalid):
        loc, message = loc + ctx["error"].loc, ctx["error"].message
    elif kind in _EXPECTED:
        message = f"expected {_EXPECTED[kind]}, got {_describe(value)}"
    elif bound := next((b for b in _BOUNDS if b in ctx), None):
        what = "an integer " if isinstance(ctx[bound], int) else ""
        message = f"must be {what}{_BOUNDS[bound]} {ctx[bound]}, got {value}"
    elif kind == "finite_number":
        message = f"must be a finite number, got {value}"
    elif kind == "literal_error":
        message = f"must be one of {ctx['expected'].replace(' or ', ', ')}; got {value!r}"
    elif kind == "extra_forbidden":
        message = f"unknown key {loc[-1]!r}"
    elif kind == "too_short":
        message = "must list at least one value"
    elif kind == "missing":
        message = "required but missing"
    else:
        message = e["msg"]
    return tuple(p for p in loc if not (isinstance(p, str) and p.startswith("~"))), message


def _dotted(loc: Sequence) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def _validate(adapter: TypeAdapter, data: Any, path=_dotted):
    """``adapter.validate_python(data)``; the first error as a :class:`ConfigError`."""
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        loc, message = _first_error(exc)
        raise ConfigError(path(loc) or "<root>", message) from None


def _part(adapter: TypeAdapter, data: Any, loc: tuple):
    """Validate a piece inside a validator, its first error re-raised relative to ``loc``."""
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        sub, message = _first_error(exc)
        raise _Invalid(loc + sub, message) from None


# ---------------------------------------------------------------------------
# Declarative building blocks
# ---------------------------------------------------------------------------


def Int(ge: int | None = None):  # noqa: N802 (a type)
    return Annotated[int, Strict(), Field(ge=ge)]


def Float(**bounds: float):  # noqa: N802
    return Annotated[float, Strict(), Field(allow_inf_nan=False, **bounds)]


def Floats(**bounds: float):  # noqa: N802
    """A float, or a list of floats (each in bounds; its length is checked by the record)."""
    return Annotated[
        Union[Annotated[Float(**bounds), Tag("~one")],
              Annotated[tuple[Float(**bounds), ...], Tag("~each")]],
        Discriminator(lambda v: "~each" if isinstance(v, (list, tuple)) else "~one"),
    ]


def _nonempty(value: str) -> str:
    if not value.strip():
        _fail((), "must be a non-empty string")
    return value


Bool = Annotated[bool, Strict()]
Str = Annotated[str, Strict()]
Name = Annotated[str, Strict(), AfterValidator(_nonempty)]
_NONEMPTY = Field(min_length=1)
_CONFIG = ConfigDict(extra="forbid")


def record(cls=None, *, kw_only: bool = True):
    """A frozen, hashable pydantic dataclass with the key, required and cross checks of
    :class:`_Record`."""
    wrap = _pydantic_dataclass(frozen=True, config=_CONFIG, kw_only=kw_only)
    return wrap if cls is None else wrap(cls)


def _get(value: Any, key: str, default: Any = None) -> Any:
    """``value[key]`` of a raw table or the attribute of a record (for discriminators)."""
    if isinstance(value, dict):
        return value.get(key, default)
    return getattr(value, key, default)


def _length(value: Any, length: int, desc: str, loc: Any) -> None:
    if isinstance(value, tuple) and len(value) != length:
        _fail(loc, f"a list here must have {desc} = {length} entries, got {len(value)}")


@record
class _Record:
    """Base of every record: a TOML table with a closed key set.

    ``_misplaced`` maps keys of other variants (and the fields in ``_refused``, which a table
    may not set) to the message that says where they belong; ``_needs`` lists keys the table must give (``_why`` says for what); ``_keys`` the TOML keys
    (the fields by default); ``_omit`` the fields :func:`config_to_dict` leaves out;
    ``_check`` runs the record's cross-field checks.
    """

    _misplaced: ClassVar[Mapping[str, str]] = {}
    _refused: ClassVar[tuple[str, ...]] = ()
    _needs: ClassVar[tuple[str, ...]] = ()
    _why: ClassVar[str] = ""
    _keys: ClassVar[tuple[str, ...] | None] = None
    _omit: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="before")
    @classmethod
    def _check_table(cls, data: Any) -> Any:
        if isinstance(data, ArgsKwargs) or dataclasses.is_dataclass(data):
            return data  # built in Python (dataclasses.replace, a constructor)
        if not isinstance(data, dict):
            _fail((), f"expected a table, got {_describe(data)}")
        fields = [f.name for f in dataclasses.fields(cls)]
        for key in data:
            if key in cls._misplaced and (key in cls._refused or key not in fields):
                _fail(str(key), cls._misplaced[key])
            if key not in fields:
                _fail(str(key), f"unknown key {str(key)!r}; allowed keys: "
                                f"{', '.join(cls._keys or fields)}")
        required = [f.name for f in dataclasses.fields(cls)
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        for key in (*required, *cls._needs):
            if key not in data:
                why = cls._why.format_map(data)
                _fail(key, f"required{' ' + why if why else ''} but missing")
        return data

    @model_validator(mode="after")
    def _after(self):
        self._check()
        return self

    def _check(self) -> None:
        pass


def _dict(obj: Any) -> Any:
    """Records as dicts (``None`` fields and ``_omit`` left out), tuples as lists."""
    if isinstance(obj, FactorSpec):
        return _dict(obj._asdict())
    if isinstance(obj, dict):
        return {key: _dict(v) for key, v in obj.items()}
    if dataclasses.is_dataclass(obj):
        return {f.name: _dict(v) for f in dataclasses.fields(obj)
                if (v := getattr(obj, f.name)) is not None and f.name not in obj._omit}
    return [_dict(v) for v in obj] if isinstance(obj, tuple) else obj


# ---------------------------------------------------------------------------
# The problem: one record per variant
# ---------------------------------------------------------------------------

_STRUCTURES = ("blocks", "graph", "scopes")
_GRAPH_KINDS = ("edges", "chain", "grid", "random", "complete")
_ENVIRONMENTS = ("linear", "adult", "factor")
_ONLY = "only allowed when problem.{} = {!r}"
#: Where the keys of the other problem variants belong.
_HOME = {
    **{k: _ONLY.format("structure", "blocks") for k in ("num_blocks", "block_dim", "block_dims")},
    **{k: _ONLY.format("structure", "scopes") for k in ("scopes", "num_coords")},
    **{k: _ONLY.format("structure", "graph") for k in ("graph", "num_nodes", "graph_seed")},
    "edges": _ONLY.format("graph", "edges"), "grid_shape": _ONLY.format("graph", "grid"),
    "max_degree": _ONLY.format("graph", "random"), "num_edges": _ONLY.format("graph", "random"),
    "adult": _ONLY.format("environment", "adult"), "factor": _ONLY.format("environment", "factor"),
}


@record(kw_only=False)
class ThetaConfig(_Record):
    """How the true parameters are chosen (``[problem.theta]``).

    Attributes:
        distribution: ``'explicit'``, ``'normal'``, ``'uniform'`` or ``'signal'``.
        values: For ``'explicit'``: one tuple of floats per criterion (k rows; per factor for
            ``environment = 'factor'``); ``None`` otherwise.
        scale: Scale of the random distribution (> 0).
        seed: Seed used to draw theta (>= 0).
        per_seed: Whether theta is redrawn for every experiment seed.
    """

    distribution: Literal["explicit", "normal", "uniform", "signal"] = "normal"
    values: tuple[tuple[Float(), ...], ...] | None = None
    scale: Float(gt=0.0) = 1.0
    seed: Int(0) = 0
    per_seed: Bool = False

    def _check(self) -> None:
        if self.distribution != "explicit" and self.values is not None:
            _fail("values", "only allowed when problem.theta.distribution = 'explicit', "
                            f"not {self.distribution!r}")
        if self.distribution == "explicit" and self.values is None:
            _fail("values", "required when problem.theta.distribution = 'explicit' but missing")
        for i, row in enumerate(self.values or ()):
            if not row:
                _fail(("values", i), "row must be a non-empty list of numbers")


@record(kw_only=False)
class NoiseConfig(_Record):
    """Observation noise (``[problem.noise]``).

    Attributes:
        kind: ``'independent'`` (one sigma per criterion, length k) or ``'correlated'`` (one
            sigma per coordinate, length n).
        sigma: A float >= 0 or a tuple of floats >= 0.
    """

    kind: Literal["independent", "correlated"] = "independent"
    sigma: Floats(ge=0.0) = 0.5


@record
class ProblemConfig(_Record):
    """The bandit problem (``[problem]``): the fields every variant has.

    Calling ``ProblemConfig(**fields)`` builds the variant the fields select; reading a field
    of another variant (``p.edges`` of a blocks problem) gives ``None``.

    Attributes:
        features: ``'linear'``, ``'quadratic'`` or ``'rff'``.
        rff_dim: Random Fourier feature dimension (used for ``'rff'``).
        rff_lengthscale: RFF lengthscale (used for ``'rff'``).
        s0: Initial state, a float in [0, 1] or a tuple of n such floats.
        theta: True-parameter specification.
        noise: Observation-noise specification.
        environment: ``'linear'`` (the linear model), ``'adult'`` or ``'factor'``.
    """

    features: Literal["linear", "quadratic", "rff"] = "linear"
    rff_dim: Int(1) = 16
    rff_lengthscale: Float(gt=0.0) = 0.5
    s0: Floats(ge=0.0, le=1.0) = 0.5
    theta: ThetaConfig = ThetaConfig()
    noise: NoiseConfig = NoiseConfig()
    environment: Literal["linear"] = "linear"
    _misplaced = _HOME
    _omit = ("environment",)  # (linear configs keep their dicts, hence hashes)

    def __new__(cls, *args, **kwargs):
        if cls is ProblemConfig and kwargs:
            return _validate(_PROBLEM, kwargs, lambda loc: _dotted(("problem", *loc)))
        return object.__new__(cls)

    def __getattr__(self, name: str):
        if name in _PROBLEM_FIELDS:
            return None
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def sizes(self) -> tuple[int, int]:
        """``(k criteria, n coordinates)``."""
        raise NotImplementedError

    def _structure(self) -> None:
        pass

    def _check(self) -> None:
        self._structure()
        k, n = self.sizes
        _length(self.s0, n, "n (number of coordinates)", "s0")
        kind = self.noise.kind
        length, desc = (k, "k (criteria)") if kind == "independent" else (n, "n (coordinates)")
        _length(self.noise.sigma, length, f"{desc} for kind {kind!r}", ("noise", "sigma"))
        rows, what = self._theta_rows()
        if self.theta.values is not None and len(self.theta.values) != rows:
            _fail(("theta", "values"), f"expected {what} = {rows} rows (one per criterion), got "
                                       f"{len(self.theta.values)}")

    def _theta_rows(self) -> tuple[int, str]:
        return self.sizes[0], "k"


@record
class BlocksProblem(ProblemConfig):
    """``structure = 'blocks'``: ``num_blocks`` blocks of ``block_dim`` coordinates."""

    structure: Literal["blocks"] = "blocks"
    num_blocks: Int(1)
    block_dim: Int(1)
    _why = "for problem.structure = 'blocks'"

    @property
    def sizes(self) -> tuple[int, int]:
        return self.num_blocks, self.num_blocks * self.block_dim


@record
class UnequalBlocksProblem(ProblemConfig):
    """``structure = 'blocks'`` with ``block_dims``: blocks of unequal sizes, consecutive."""

    structure: Literal["blocks"] = "blocks"
    block_dims: Annotated[tuple[Int(1), ...], _NONEMPTY]
    _misplaced = {**_HOME, **dict.fromkeys(("num_blocks", "block_dim"), (
        "not allowed with problem.block_dims (the blocks' sizes are given there)"))}

    @property
    def sizes(self) -> tuple[int, int]:
        return len(self.block_dims), sum(self.block_dims)


@record
class ScopesProblem(ProblemConfig):
    """``structure = 'scopes'``: criterion ``i`` reads coordinates ``scopes[i]`` (any sizes,
    may overlap); ``num_coords`` defaults to the largest index + 1."""

    structure: Literal["scopes"] = "scopes"
    scopes: tuple[tuple[Int(0), ...], ...]
    num_coords: Int(1) | None = None
    _why = "for problem.structure = 'scopes'"

    @property
    def sizes(self) -> tuple[int, int]:
        return len(self.scopes), self.num_coords

    def _structure(self) -> None:
        if not self.scopes:
            _fail("scopes", "must list at least one criterion's scope")
        for i, row in enumerate(self.scopes):
            if not row:
                _fail(("scopes", i), "empty scope: every criterion reads at least one coordinate")
            if (dup := next((v for v in row if row.count(v) > 1), None)) is not None:
                _fail(("scopes", i), f"coordinate {dup} listed twice")
        largest = max(max(r) for r in self.scopes)
        if self.num_coords is None:
            object.__setattr__(self, "num_coords", largest + 1)
        elif largest >= self.num_coords:
            i = next(i for i, r in enumerate(self.scopes) if max(r) == largest)
            _fail(("scopes", i), f"coordinate index {largest} out of range [0, {self.num_coords}) "
                                 f"(problem.num_coords = {self.num_coords})")


@record
class GraphProblem(ProblemConfig):
    """``structure = 'graph'``: criteria are the nodes; ``graph = 'chain'`` or ``'complete'``
    (this record), ``'edges'``, ``'grid'`` or ``'random'`` (its subclasses)."""

    structure: Literal["graph"] = "graph"
    graph: Literal["chain", "complete"]
    num_nodes: Int(1)
    graph_seed: Int(0) = 0
    _why = "for problem.graph = {graph!r}"

    @property
    def sizes(self) -> tuple[int, int]:
        return self.num_nodes, self.num_nodes


@record
class EdgesGraph(GraphProblem):
    """``graph = 'edges'``: explicit ``(i, j)`` pairs."""

    graph: Literal["edges"]
    edges: tuple[tuple[Int(), ...], ...]

    def _structure(self) -> None:
        seen: set[frozenset] = set()
        for idx, edge in enumerate(self.edges):
            if len(edge) != 2:
                _fail(("edges", idx), f"must be a pair [i, j] of node indices, got {list(edge)}")
            for node in edge:
                if not 0 <= node < self.num_nodes:
                    _fail(("edges", idx), f"node index {node} out of range [0, {self.num_nodes})")
            if edge[0] == edge[1]:
                _fail(("edges", idx), f"self-loop {list(edge)} not allowed (i == j)")
            if frozenset(edge) in seen:
                _fail(("edges", idx), f"duplicate edge {list(edge)}")
            seen.add(frozenset(edge))


@record
class GridGraph(GraphProblem):
    """``graph = 'grid'``: a ``grid_shape = [rows, cols]`` grid; ``num_nodes`` is resolved to
    ``rows * cols``."""

    graph: Literal["grid"]
    num_nodes: Int(1) | None = None
    grid_shape: tuple[Int(1), ...]

    @property
    def sizes(self) -> tuple[int, int]:
        return (math.prod(self.grid_shape),) * 2

    def _structure(self) -> None:
        if len(self.grid_shape) != 2:
            _fail("grid_shape", f"must be [rows, cols], got {len(self.grid_shape)} entries")
        rows_cols = math.prod(self.grid_shape)
        if self.num_nodes not in (None, rows_cols):
            _fail("num_nodes", f"must be absent or equal rows*cols = {rows_cols} for "
                               f"problem.graph = 'grid', got {self.num_nodes}")
        object.__setattr__(self, "num_nodes", rows_cols)


@record
class RandomGraph(GraphProblem):
    """``graph = 'random'``: ``num_edges`` random edges of degree at most ``max_degree``."""

    graph: Literal["random"]
    max_degree: Int(1)
    num_edges: Int(0)

    def _structure(self) -> None:
        n = self.num_nodes
        bound = min(n * self.max_degree // 2, n * (n - 1) // 2)
        if self.num_edges > bound:
            _fail("num_edges", "must be <= min(num_nodes*max_degree//2, "
                               f"num_nodes*(num_nodes-1)//2) = {bound}, got {self.num_edges}")


@record
class AdultConfig(_Record):
    """The UCI Adult threshold environment (``[problem.adult]``; see :mod:`gsjax.fairness`).

    Attributes:
        batch_size: Held-out rows drawn (with replacement) per round, B >= 1 (>= 2 for
            ``'split'``).
        gap_estimator: ``'plain'`` (the batch's |TPR_m - TPR_f|), ``'signed'`` (unbiased
            TPR_m - TPR_f) or ``'split'`` (sign of one half-batch times the other half's estimate).
        classifier_seed: Key of the logistic regression's starting weights.
        classifier_steps: L-BFGS iterations (>= 1).
        classifier_l2: L2 penalty on the weights (>= 0).
        raw_data: Folder holding adult.data and adult.test to parse instead of the file shipped
            in the package (``None``: the shipped file).
    """

    batch_size: Int(1) = 100
    gap_estimator: Literal["plain", "signed", "split"] = "plain"
    classifier_seed: Int(0) = 0
    classifier_steps: Int(1) = 200
    classifier_l2: Float(ge=0.0) = 1e-4
    raw_data: Name | None = None

    def _check(self) -> None:
        if self.gap_estimator == "split" and self.batch_size < 2:
            _fail("batch_size", f"must be an integer >= 2 for gap_estimator 'split', "
                                f"got {self.batch_size}")
        for name in ("adult.data", "adult.test") if self.raw_data is not None else ():
            if not os.path.isfile(os.path.join(self.raw_data, name)):
                _fail("raw_data", f"{name} not found in {self.raw_data!r}")


_NOT_IN_ADULT = ("not used by problem.environment = 'adult' (the loss comes from the data); "
                 "remove it (set agent.oful_sigma for the OFUL radius)")
_ONE_THRESHOLD = "problem.environment = 'adult' has one threshold tau in [0, 1]: use 1"


@record
class AdultProblem(ProblemConfig):
    """``environment = 'adult'`` (Section 7.3): one threshold, so one block of one coordinate;
    the features default to ``'quadratic'`` ([1, tau, tau^2]: Example 1 with k = 1)."""

    features: Literal["linear", "quadratic", "rff"] = "quadratic"
    structure: Literal["blocks"] = "blocks"
    num_blocks: Int(1) = 1
    block_dim: Int(1) = 1
    environment: Literal["adult"]
    adult: AdultConfig = AdultConfig()
    _misplaced = {**_HOME, "theta": _NOT_IN_ADULT, "noise": _NOT_IN_ADULT,
                  "block_dims": f"{_ONE_THRESHOLD} (num_blocks = block_dim = 1)"}
    _refused = _omit = ("theta", "noise")

    sizes = BlocksProblem.sizes

    def _structure(self) -> None:
        for key in ("num_blocks", "block_dim"):
            if getattr(self, key) != 1:
                _fail(key, f"{_ONE_THRESHOLD}, got {getattr(self, key)}")


class FactorSpec(NamedTuple):
    """One factor of ``[problem.factor].factors``: its coordinates and the nodes that read it."""

    coords: Annotated[tuple[Int(), ...], _NONEMPTY]
    nodes: Annotated[tuple[Int(), ...], _NONEMPTY]


@record
class FactorConfig(_Record):
    """A factor-graph problem (``[problem.factor]``, Section 5.3; see :mod:`gsjax.factor`).

    Attributes:
        num_coords: Coordinates n (>= 1).
        num_nodes: Nodes (criteria) k (>= 1).
        layout: ``'clique'`` (one factor over every coordinate shared by every node, the dense
            case of Section 5.3) or ``'explicit'``.
        factors: For ``'explicit'``: one ``(coords, nodes)`` :class:`FactorSpec` per factor;
            ``None`` for ``'clique'``.
        mixing: Node-specific feature mixing ``'orthogonal'``, ``'scaled'`` or ``'identity'``.
        mixing_seed: NumPy seed of the mixing matrices (>= 0).
    """

    num_coords: Int(1)
    num_nodes: Int(1)
    layout: Literal["clique", "explicit"] = "clique"
    factors: Annotated[tuple[FactorSpec, ...], _NONEMPTY] | None = None
    mixing: Literal["orthogonal", "scaled", "identity"] = "orthogonal"
    mixing_seed: Int(0) = 0

    def _check(self) -> None:
        if self.layout == "clique":
            if self.factors is not None:
                _fail("factors", "only allowed when problem.factor.layout = 'explicit'")
            return
        if self.factors is None:
            _fail("factors", "required for layout = 'explicit' but missing")
        for c, spec in enumerate(self.factors):
            for key, size in (("coords", self.num_coords), ("nodes", self.num_nodes)):
                idx = getattr(spec, key)
                for j, v in enumerate(idx):
                    if not 0 <= v < size:
                        _fail(("factors", c, key, j), f"index {v} out of range [0, {size})")
                if len(set(idx)) != len(idx):
                    _fail(("factors", c, key), f"duplicate index in {list(idx)}")
        covered = {i for spec in self.factors for i in spec.nodes}
        if missing := [i for i in range(self.num_nodes) if i not in covered]:
            _fail("factors", f"node {missing[0]} belongs to no factor; every node needs at least one")


@record
class FactorProblem(ProblemConfig):
    """``environment = 'factor'`` (Section 5.3): the sizes come from ``[problem.factor]``;
    ``'explicit'`` theta values have one row per FACTOR, of ``d_C`` entries (``|C|`` linear,
    ``2|C|+1`` quadratic, ``rff_dim`` rff)."""

    structure: Literal["factor"] = "factor"
    environment: Literal["factor"]
    factor: FactorConfig
    _why = "for problem.environment = 'factor'"
    _misplaced = dict.fromkeys(
        ("num_blocks", "block_dim", "block_dims", "scopes", "num_coords",
         "graph", "num_nodes", "edges", "grid_shape", "max_degree", "num_edges", "graph_seed",
         "adult"),
        "not used by problem.environment = 'factor' (the sizes come from [problem.factor])")
    _omit = ()

    @property
    def sizes(self) -> tuple[int, int]:
        return self.factor.num_nodes, self.factor.num_coords

    def _factor_scopes(self) -> list[tuple[int, ...]]:
        fac = self.factor
        return [tuple(range(fac.num_coords))] if fac.factors is None else [c for c, _ in fac.factors]

    def _theta_rows(self) -> tuple[int, str]:
        return len(self._factor_scopes()), "factors"

    def _check(self) -> None:
        super()._check()
        for c, (row, coords) in enumerate(zip(self.theta.values or (), self._factor_scopes())):
            m = len(coords)
            d_c = {"linear": m, "quadratic": 2 * m + 1}.get(self.features, self.rff_dim)
            if len(row) != d_c:
                _fail(("theta", "values", c), f"factor {c} has {d_c} {self.features} features; "
                                              f"got {len(row)} values")


@record
class _BadProblem:
    """The ``[problem]`` tables no variant takes: says why."""

    @model_validator(mode="before")
    @classmethod
    def _explain(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            _fail((), f"expected a table, got {_describe(data)}")
        if (env := data.get("environment", "linear")) not in _ENVIRONMENTS:
            _fail("environment", _one_of(_ENVIRONMENTS, env))
        if "structure" not in data:
            _fail("structure", "required but missing")
        if data["structure"] not in _STRUCTURES:
            _fail("structure", _one_of(_STRUCTURES, data["structure"]))
        if "graph" not in data:
            _fail("graph", "required for problem.structure = 'graph' but missing")
        _fail("graph", _one_of(_GRAPH_KINDS, data["graph"]))


_VARIANTS = {"blocks": BlocksProblem, "dims": UnequalBlocksProblem, "scopes": ScopesProblem,
             "chain": GraphProblem, "complete": GraphProblem, "edges": EdgesGraph,
             "grid": GridGraph, "random": RandomGraph, "adult": AdultProblem,
             "factor": FactorProblem, "bad": _BadProblem}
_PROBLEM_FIELDS = {f.name for v in _VARIANTS.values() for f in dataclasses.fields(v)}


def _problem_tag(v: Any) -> str:
    env = _get(v, "environment", "linear")
    if env in ("adult", "factor"):
        tag = env
    elif env != "linear" or not isinstance(v, (dict, ProblemConfig)):
        tag = "bad"
    else:
        structure = _get(v, "structure")
        tag = {"blocks": "dims" if _get(v, "block_dims") is not None else "blocks",
               "scopes": "scopes", "graph": _get(v, "graph")}.get(structure, "bad")
    return f"~{tag if tag in _VARIANTS else 'bad'}"


Problem = Annotated[Union[tuple(Annotated[cls, Tag(f"~{tag}")] for tag, cls in _VARIANTS.items())],
                    Discriminator(_problem_tag)]
_PROBLEM = TypeAdapter(Problem)


# ---------------------------------------------------------------------------
# Agents and algorithm entries
# ---------------------------------------------------------------------------

_NAME_RE = re.compile(r"[a-z][a-z0-9_]*")

#: Algorithm names accepted by ``[algorithms.NAME].algorithm``. Mutable: extend it with
#: :func:`register_algorithm_name`.
ALGORITHM_NAMES: set[str] = {
    "linucb", "lazy", "async_lazy", "joint_lazy", "joint_linucb", "adaptive_lazy",
}


def register_algorithm_name(name: str) -> None:
    """Add ``name`` (matching ``[a-z][a-z0-9_]*``) to :data:`ALGORITHM_NAMES` (idempotent).

    Raises:
        ValueError: If ``name`` is not a string of the allowed form.
    """
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ValueError(f"algorithm name must be a string matching [a-z][a-z0-9_]*, got {name!r}")
    ALGORITHM_NAMES.add(name)


_ADAPTIVE_ONLY = ("only allowed for algorithm 'adaptive_lazy' (in its [algorithms.NAME] "
                  "table, not in [agent])")


@record
class AgentConfig(_Record):
    """Agent hyper-parameters (``[agent]`` and per-algorithm overrides).

    Attributes:
        lambda_reg: Ridge regularisation, float > 0 or tuple of k floats > 0.
        beta: Confidence-width multiplier (>= 0).
        beta_mode: ``'constant'`` or ``'oful'``.
        oful_delta: OFUL failure probability, in (0, 1).
        oful_S: OFUL norm bound on theta (> 0).
        oful_sigma: OFUL noise level (>= 0); ``None`` means use the problem's noise sigma.
        move_cost: Cost of moving the state (>= 0).
        solver: ``'vertex'`` (exact for linear features) or ``'pgd'``.
        pgd_steps: Projected-gradient steps (>= 1).
        pgd_lr: Projected-gradient learning rate (> 0).
        pgd_starts: Number of PGD restarts (>= 1).
        pgd_optimizer: ``'sgd'`` or ``'adam'``.
        pgd_include_current: Whether PGD start 0 is the current state (else every start is
            drawn uniformly on the box).
        reference: ``'global'`` or ``'own'``.
        trigger_ratio: Determinant-ratio update trigger (> 1).
        refresh_every: Refresh period in rounds (>= 1).
    """

    lambda_reg: Floats(gt=0.0) = 1.0
    beta: Float(ge=0.0) = 1.0
    beta_mode: Literal["constant", "oful"] = "constant"
    oful_delta: Float(gt=0.0, lt=1.0) = 0.05
    oful_S: Float(gt=0.0) = 1.0
    oful_sigma: Float(ge=0.0) | None = None
    move_cost: Float(ge=0.0) = 1.0
    solver: Literal["vertex", "pgd"] = "vertex"
    pgd_steps: Int(1) = 50
    pgd_lr: Float(gt=0.0) = 0.05
    pgd_starts: Int(1) = 4
    pgd_optimizer: Literal["sgd", "adam"] = "adam"
    pgd_include_current: Bool = True
    reference: Literal["global", "own"] = "global"
    trigger_ratio: Float(gt=1.0) = 2.0
    refresh_every: Int(1) = 1
    _misplaced = dict.fromkeys(("warmup", "signal_gamma", "refined"), _ADAPTIVE_ONLY)


@record
class AdaptiveAgentConfig(AgentConfig):
    """:class:`AgentConfig` of an ``'adaptive_lazy'`` entry (Section 5.2), plus:

    Attributes:
        warmup: Warm-up rounds tau (>= 0, required) of uniform exploration on the complete
            super-graph.
        signal_gamma: The signal level gamma of Assumption B (>= 0; required when warmup > 0);
            the sparsity test keeps |theta_hat| > gamma/2.
        refined: ``'lazy'`` (``None``: the default) or ``'async_lazy'`` play on the refined graph.
    """

    warmup: Int(0) = 0
    signal_gamma: Float(ge=0.0) | None = None
    refined: Literal["lazy", "async_lazy"] | None = None
    _misplaced = {}
    _needs = ("warmup",)
    _why = ("for algorithm 'adaptive_lazy' (rounds of exploration before the sparsity test; "
            "0: none)")

    def _check(self) -> None:
        if self.warmup > 0 and self.signal_gamma is None:
            _fail("signal_gamma", "required for algorithm 'adaptive_lazy' with warmup > 0 (the "
                                  "sparsity test keeps |theta_hat| > gamma/2)")


_AGENT_KEYS = tuple(f.name for f in dataclasses.fields(AgentConfig))
_ENTRY_KEYS = ("algorithm", *(f.name for f in dataclasses.fields(AdaptiveAgentConfig)))


@record(kw_only=False)
class AlgorithmEntry(_Record):
    """One ``[algorithms.NAME]`` table.

    Attributes:
        name: Entry name (the table key), matching ``[a-z][a-z0-9_]*``.
        algorithm: Algorithm identifier from :data:`ALGORITHM_NAMES`.
        agent: The shared ``[agent]`` merged with this entry's overrides
            (an :class:`AdaptiveAgentConfig` for ``'adaptive_lazy'``).
    """

    name: str
    algorithm: str
    agent: AgentConfig


@record(kw_only=False)
class _AdaptiveEntry(AlgorithmEntry):
    agent: AdaptiveAgentConfig


Entry = Annotated[
    Union[Annotated[AlgorithmEntry, Tag("~plain")], Annotated[_AdaptiveEntry, Tag("~adaptive")]],
    Discriminator(lambda v: "~adaptive" if _get(v, "algorithm") == "adaptive_lazy" else "~plain"),
]


def _entry_tables(raw: Mapping, known: Any, what: str = "algorithm", keys=None):
    """``(name, algorithm, table)`` of each ``[algorithms.NAME]`` table, checked: the name, the
    keys (``keys``), and the algorithm (default: the name) in ``known``."""
    tables = raw.get("algorithms")
    if not isinstance(tables, dict) or not tables:
        if tables is not None and not isinstance(tables, dict):
            raise ConfigError("algorithms", f"expected a table, got {_describe(tables)}")
        raise ConfigError("algorithms", "at least one [algorithms.NAME] table is required")
    names = ", ".join(repr(a) for a in sorted(known))
    for name, table in tables.items():
        path = f"algorithms.{name}"
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise ConfigError(path, f"entry name {name!r} must match [a-z][a-z0-9_]*")
        if not isinstance(table, dict):
            raise ConfigError(path, f"expected a table, got {_describe(table)}")
        for key in table if keys else ():
            if key not in keys:
                raise ConfigError(f"{path}.{key}", f"unknown key {key!r}; allowed keys: "
                                                   f"{', '.join(keys)}")
        algorithm = table.get("algorithm", name)
        if "algorithm" in table and (not isinstance(algorithm, str) or algorithm not in known):
            raise ConfigError(f"{path}.algorithm",
                              f"unknown {what} {algorithm!r}; must be one of {names}")
        if algorithm not in known:
            raise ConfigError(f"{path}.algorithm", f"missing, and the entry name {name!r} is "
                                                   f"not a known {what}; set it to one of {names}")
        yield name, algorithm, {k: v for k, v in table.items() if k != "algorithm"}


# ---------------------------------------------------------------------------
# Grid, relaxed mode and the experiment
# ---------------------------------------------------------------------------

# Agent fields a [grid] may vary (float hyperparameters), with their allowed ranges.
GRID_FIELDS = {
    "beta": dict(ge=0.0),
    "lambda_reg": dict(gt=0.0),
    "move_cost": dict(ge=0.0),
    "pgd_lr": dict(gt=0.0),
    "trigger_ratio": dict(gt=1.0),
    "oful_delta": dict(gt=0.0, lt=1.0),
    "oful_S": dict(gt=0.0),
}
MAX_GRID_POINTS = 4096
_AXES = {key: TypeAdapter(Annotated[tuple[Float(**b), ...], _NONEMPTY])
         for key, b in GRID_FIELDS.items()}


def _grid_axes(value: Any) -> Any:
    """``[grid]`` as ``((agent field, values), ...)`` in file order."""
    if isinstance(value, tuple):
        return value
    if not isinstance(value, dict):
        _fail((), f"expected a table, got {_describe(value)}")
    axes = []
    for key, vals in value.items():
        if key not in GRID_FIELDS:
            _fail(key, f"unknown key {key!r}; allowed keys: {', '.join(GRID_FIELDS)}")
        axes.append((key, _part(_AXES[key], vals, (key,))))
        if len(set(axes[-1][1])) != len(axes[-1][1]):
            _fail(key, "values must be distinct")
    if (size := math.prod(len(v) for _, v in axes)) > MAX_GRID_POINTS:
        _fail((), f"{size} grid points; at most {MAX_GRID_POINTS} allowed")
    return tuple(axes)


@record
class RelaxedConfig(_Record):
    """The ``[relaxed]`` table: the differentiable mode used by ``gsjax tune``
    (:mod:`gsjax.relaxed`). ``gsjax run`` always runs the hard algorithms.

    Attributes:
        temperature: Soft-trigger temperature in log-det units (> 0).
        solve_temperature: Soft-min temperature in LCB units (> 0); ``None`` means
            ``temperature``.
        tie_break: Soft-min index penalty kappa (>= 0): candidate p is penalised by
            kappa sqrt(solve_temperature) p (hard tie rule in the limit).
        block: Rounds per checkpointed block (>= 1, divides horizon); ``None`` means the
            divisor of horizon closest to sqrt(horizon).
        loss_bandwidth: ``environment = "adult"`` only: bandwidth h (> 0) of the smoothed
            loss, ``1[score >= tau]`` -> ``sigma((score - tau) / h)`` (:func:`gsjax.fairness.smooth`).
    """

    temperature: Float(gt=0.0) = 0.05
    solve_temperature: Float(gt=0.0) | None = None
    tie_break: Float(ge=0.0) = 0.01
    block: Int(1) | None = None
    loss_bandwidth: Float(gt=0.0) = 0.01


@record
class ExperimentConfig(_Record):
    """A fully validated experiment configuration.

    Attributes:
        name: Experiment name (non-empty).
        description: Free-text description.
        seeds: Number of independent seeds (>= 1).
        horizon: Number of rounds (>= 1).
        root_seed: Root PRNG seed (>= 0).
        dtype: ``'float32'`` or ``'float64'``.
        record_every: Per-round arrays are kept every this many rounds. When the file omits
            it: the smallest divisor of ``horizon`` giving at most :data:`MAX_RECORDS` records,
            so outputs do not grow with T.
        problem: The bandit problem (one of the :class:`ProblemConfig` variants).
        agent: Shared agent defaults as written in ``[agent]``. Algorithms should use
            ``AlgorithmEntry.agent``, which includes overrides (and is the one cross-checked
            against the problem).
        algorithms: Algorithm entries in file order.
        grid: ``[grid]`` axes in file order, ``(agent field, values)``; every algorithm runs
            on the Cartesian product of the axes in one compiled program. Empty for an
            ordinary run.
        paper_json: The free-form ``[paper]`` table as canonical JSON (sorted keys); use the
            :attr:`paper` property for a dict.
        relaxed: ``[relaxed]``: the settings of gsjax tune's relaxed mode, or ``None``.
    """

    name: Name
    description: Str = ""
    seeds: Int(1) = 10
    horizon: Int(1) = 300
    root_seed: Int(0) = 0
    dtype: Literal["float32", "float64"] = "float32"
    record_every: Int(1) = 1
    problem: Problem
    agent: AgentConfig = AgentConfig()
    algorithms: tuple[Entry, ...] = ()
    paper_json: str = "{}"
    grid: Annotated[tuple[tuple[str, tuple[float, ...]], ...], BeforeValidator(_grid_axes)] = ()
    relaxed: RelaxedConfig | None = None
    _keys = ("name", "description", "seeds", "horizon", "root_seed", "dtype", "record_every",
             "paper", "problem", "agent", "algorithms", "grid", "relaxed")

    @property
    def paper(self) -> dict:
        """The ``[paper]`` table as a fresh plain dict."""
        return json.loads(self.paper_json)

    @property
    def algorithm_names(self) -> tuple[str, ...]:
        """Entry names of :attr:`algorithms`, in order."""
        return tuple(entry.name for entry in self.algorithms)

    def _check(self) -> None:
        p = self.problem
        k, n = p.sizes
        _length(self.agent.lambda_reg, k, "k (criteria)", ("agent", "lambda_reg"))
        for i, entry in enumerate(self.algorithms):
            ac, at = entry.agent, ("algorithms", i, "agent")
            _length(ac.lambda_reg, k, "k (criteria)", (*at, "lambda_reg"))
            if ac.solver == "vertex" and p.features != "linear":
                _fail((*at, "solver"), "solver 'vertex' (vertex enumeration) is exact only for "
                      f"linear features, but problem.features = {p.features!r}; use 'pgd'")
            if entry.algorithm != "adaptive_lazy":
                continue
            if p.environment != "linear" or p.features not in ("linear", "quadratic"):
                _fail(("algorithms", i, "algorithm"), "'adaptive_lazy' needs the linear "
                      "environment with 'linear' or 'quadratic' features (a coefficient per "
                      f"coordinate); got environment {p.environment!r}, features {p.features!r}")
            if ac.solver == "vertex" and n > 16:
                _fail((*at, "solver"), "vertex enumeration on the complete super-graph needs "
                                       f"n <= 16 coordinates (here n = {n}); use 'pgd'")
        block = self.relaxed.block if self.relaxed is not None else None
        if block is not None and self.horizon % block:
            _fail(("relaxed", "block"), f"must divide horizon ({self.horizon}); got {block}")


_EXPERIMENT = TypeAdapter(ExperimentConfig)


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def apply_overrides(raw: dict, overrides: Sequence[str]) -> dict:
    """Apply ``"dotted.key=value"`` overrides to a raw config dict.

    The value is parsed as a TOML value (``tomllib.loads("v = " + value)``); if that fails it
    is used verbatim as a string, so ``agent.solver=pgd`` works without quotes. Missing
    intermediate tables are created.

    Args:
        raw: Raw (unvalidated) config dict; not modified.
        overrides: Override strings.

    Returns:
        A new dict with the overrides applied.

    Raises:
        ConfigError: With ``field='--set'`` for a malformed override or one that descends into
            a non-table value.
    """
    if isinstance(overrides, str):
        overrides = (overrides,)
    result = copy.deepcopy(raw)
    for item in overrides:
        if not isinstance(item, str) or "=" not in item:
            raise ConfigError("--set", f"expected 'dotted.key=value', got {item!r}")
        key, value_text = item.split("=", 1)
        key = key.strip()
        parts = key.split(".")
        if not key or any(not p.strip() for p in parts):
            raise ConfigError("--set", f"invalid key {key!r} in override {item!r}")
        parts = [p.strip() for p in parts]
        try:
            value = tomllib.loads("v = " + value_text)["v"]
        except tomllib.TOMLDecodeError:
            value = value_text.strip()
        node = result
        for depth, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                prefix = ".".join(parts[: depth + 1])
                raise ConfigError("--set", f"cannot set {key!r}: {prefix!r} is not a table")
            node = child
        node[parts[-1]] = value
    return result


def _paper_default(obj: Any) -> Any:
    if isinstance(obj, (datetime.datetime, datetime.date, datetime.time)):
        return obj.isoformat()
    raise TypeError(f"{type(obj).__name__} is not JSON-serialisable")


def _paper_json(value: Any) -> str:
    """The free-form ``[paper]`` table as canonical JSON."""
    if not isinstance(value, dict):
        raise ConfigError("paper", f"expected a table, got {_describe(value)}")
    try:
        return json.dumps(value, sort_keys=True, default=_paper_default)
    except (TypeError, ValueError) as exc:
        raise ConfigError("paper", f"must contain only JSON-serialisable values ({exc})")


def _root(raw: Any, overrides: Sequence[str]) -> dict:
    """The raw config with overrides applied and ``[paper]`` as ``paper_json``."""
    if not isinstance(raw, dict):
        raise ConfigError("<root>", f"config must be a table, got {_describe(raw)}")
    raw = apply_overrides(raw, overrides) if overrides else raw
    data = {k: v for k, v in raw.items() if k != "paper"}
    data["paper_json"] = _paper_json(raw.get("paper", {}))
    return data


def _toml_path(tables: list, renames: Mapping[str, str] = {"paper_json": "paper"}):
    """The dotted TOML path of a record's ``loc``: entries by name, not index; an entry's agent
    key that came from ``[agent]`` (or its default) as ``agent.KEY``; renamed fields."""

    def path(loc: tuple) -> str:
        if loc[:1] == ("algorithms",) and len(loc) > 1:
            name, _, table = tables[loc[1]]
            rest = loc[2:]
            if rest[:1] == ("agent",) and len(rest) > 1:
                from_agent = rest[1] not in table and rest[1] in _AGENT_KEYS
                return _dotted(("agent", *rest[1:]) if from_agent else ("algorithms", name,
                                                                        *rest[1:]))
            return _dotted(("algorithms", name, *rest))
        return _dotted((renames.get(loc[0], loc[0]), *loc[1:]) if loc else loc)

    return path


def parse_config(raw: dict, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Validate a raw config dict (e.g. from :func:`tomllib.load`).

    Args:
        raw: The raw config; not modified.
        overrides: Optional ``"dotted.key=value"`` overrides, applied first.

    Returns:
        The validated :class:`ExperimentConfig`.

    Raises:
        ConfigError: On the first invalid entry, naming its dotted path.
    """
    data = _root(raw, overrides)
    horizon = data.get("horizon", 300)
    if "record_every" not in data and type(horizon) is int and horizon >= 1:
        data["record_every"] = default_record_every(horizon)
    shared = data.get("agent", {}) if isinstance(data.get("agent", {}), dict) else {}
    tables = list(_entry_tables(data, ALGORITHM_NAMES, keys=_ENTRY_KEYS))
    data["algorithms"] = [{"name": name, "algorithm": algorithm, "agent": {**shared, **table}}
                          for name, algorithm, table in tables]

    return _validate(_EXPERIMENT, data, _toml_path(tables))


MAX_RECORDS = 1000


def default_record_every(horizon: int) -> int:
    """Smallest divisor ``r`` of ``horizon`` with ``horizon / r <= MAX_RECORDS``."""
    for r in range(max(1, -(-horizon // MAX_RECORDS)), horizon + 1):
        if horizon % r == 0:
            return r
    return horizon


def builtin_config_dir() -> Path:
    """The built-in configs: ``gsjax/configs`` in an installed package (package data), the
    repository's ``configs/`` in a source checkout or an editable install."""
    here = Path(__file__).resolve().parent
    installed = here / "configs"
    return installed if installed.is_dir() else here.parent / "configs"


def config_dirs() -> list[Path]:
    """Where built-in config names are looked up: ``./configs``, then the built-in ones."""
    out: list[Path] = []
    for d in (Path.cwd() / "configs", builtin_config_dir()):
        if d.is_dir() and d.resolve() not in [o.resolve() for o in out]:
            out.append(d)
    return out


def find_config(name_or_path: str | os.PathLike) -> Path:
    """A config path from a path or a built-in name (``section7_1`` -> ``section7_1.toml``).

    Raises:
        ConfigError: ``field='<file>'``, listing the built-in names, if neither is found.
    """
    p = Path(name_or_path)
    if p.is_file():
        return p
    for d in config_dirs():
        for cand in (d / p, d / f"{p}.toml"):
            if cand.is_file():
                return cand
    known = sorted({c.stem for d in config_dirs() for c in d.glob("*.toml")})
    raise ConfigError("<file>", f"no config file or built-in config {os.fspath(name_or_path)!r}; "
                                f"built-in: {known}")


def read_toml(path: str | os.PathLike) -> dict:
    """The raw table of a TOML file, or of a built-in config name.

    Raises:
        ConfigError: ``field='<file>'`` if the file cannot be found or read or is not valid TOML.
    """
    if not Path(path).exists():
        path = find_config(path)
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError("<file>", f"cannot read config file {os.fspath(path)!r}: {reason}")
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("<file>", f"invalid TOML in {os.fspath(path)!r}: {exc}")


def load_config(path: str | os.PathLike, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Read, override and validate a TOML experiment config file.

    Args:
        path: Path of the TOML file, or the name of a built-in config (``"section7_2"``; see
            :func:`find_config`).
        overrides: Optional ``"dotted.key=value"`` overrides.

    Raises:
        ConfigError: ``field='<file>'`` if the file cannot be read or is not valid TOML;
            otherwise as :func:`parse_config`.
    """
    return parse_config(read_toml(path), overrides)


def config_to_dict(cfg: ExperimentConfig) -> dict:
    """Fully resolved, JSON-serialisable dict form of ``cfg``.

    Defaults are filled in, ``None`` fields are omitted, every algorithm entry lists its
    complete merged agent settings, and ``parse_config(config_to_dict(cfg)) == cfg`` holds.
    """
    return {
        "name": cfg.name,
        "description": cfg.description,
        "seeds": cfg.seeds,
        "horizon": cfg.horizon,
        "root_seed": cfg.root_seed,
        "dtype": cfg.dtype,
        "record_every": cfg.record_every,
        "problem": _dict(cfg.problem),
        "agent": _dict(cfg.agent),
        "algorithms": {e.name: {"algorithm": e.algorithm, **_dict(e.agent)}
                       for e in cfg.algorithms},
        "paper": cfg.paper,
        **({"grid": {key: list(vals) for key, vals in cfg.grid}} if cfg.grid else {}),
        **({"relaxed": _dict(cfg.relaxed)} if cfg.relaxed is not None else {}),
    }


def config_hash(cfg: ExperimentConfig) -> str:
    """SHA-256 hex digest of the canonical JSON of :func:`config_to_dict`.

    Keys are sorted, except that the algorithm entries are hashed as an ordered list of
    ``[name, entry]`` pairs so that, like ``==``, the hash depends on their order.
    """
    d = config_to_dict(cfg)
    d["algorithms"] = [[name, entry] for name, entry in d["algorithms"].items()]
    text = json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def num_criteria(cfg: ExperimentConfig | ProblemConfig) -> int:
    """Number of criteria k of a config or its problem."""
    return (cfg.problem if isinstance(cfg, ExperimentConfig) else cfg).sizes[0]


def num_coords(cfg: ExperimentConfig | ProblemConfig) -> int:
    """Number of coordinates n of a config or its problem."""
    return (cfg.problem if isinstance(cfg, ExperimentConfig) else cfg).sizes[1]
