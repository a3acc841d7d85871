"""Experiment configuration schema for ``gsjax``.

TOML files, read with :mod:`tomllib`, are validated into frozen, hashable pydantic dataclasses
(strict types, closed key sets, ``Field`` bounds; the field comments document them).
``[problem]`` becomes the record its keys select: :class:`BlocksProblem`, :class:`ScopesProblem`,
:class:`GraphProblem`, :class:`AdultProblem` or :class:`FactorProblem`. Every problem raises
:class:`ConfigError`: its ``field`` is the dotted path of the offending entry
(``'agent.lambda_reg'``, ``'problem.edges[3]'``, ``'algorithms.lazy.reference'``), its one-line
message says what is allowed.

TOML layout (defaults in parentheses)::

    name = "my-experiment"          # required, non-empty
    description = ""                # ("")
    seeds = 10                      # int >= 1 (10)
    horizon = 300                   # int >= 1 (300)
    root_seed = 0                   # int in [0, SEED_MAX] (0)
    dtype = "float32"               # "float32" | "float64" ("float32")
    record_every = 1                # int >= 1 (auto: smallest divisor of horizon
                                    #   that keeps at most MAX_RECORDS records)

    [paper]                         # free-form reference numbers (optional)

    [problem]                       # required; the keys select the variant:
    structure = "blocks"            # "blocks" | "graph" | "scopes"
    num_blocks = 3                  # blocks
    block_dim = 2
    # unequal blocks: block_dims = [2, 3, 1] instead of num_blocks, block_dim
    # scopes: scopes = [[0, 1], [1, 2, 3], [3]] (criterion i reads scopes[i]),
    #         num_coords (default: the largest index + 1)
    # graph: graph = "edges" | "chain" | "complete" | "grid" | "random", num_nodes,
    #        graph_seed, and edges / grid_shape / max_degree, num_edges
    features = "linear"             # "linear" | "quadratic" | "rff"
    s0 = 0.5                        # float in [0, 1] or list of n floats

    [problem.theta]                 # distribution, values, scale, seed, per_seed
    [problem.noise]                 # kind, sigma
    # environment = "adult" (Section 7.3): the loss comes from UCI Adult data;
    # structure = "blocks", num_blocks = block_dim = 1, no theta/noise;
    # options in [problem.adult] (AdultConfig)
    # environment = "factor" (Section 5.3): a factor graph; structure omitted,
    # sizes, layout and mixing in [problem.factor] (FactorConfig)

    [agent]                         # shared defaults for all algorithms (AgentConfig)

    [algorithms.lazy]               # one table per algorithm, file order kept
    algorithm = "lazy"              # defaults to the table name
    beta = 2.0                      # any [agent] key overrides the shared value

    [grid]                          # optional: run every algorithm on a grid of
    beta = [0.25, 0.5, 1.0]         # float hyperparameters (Cartesian product) in
    lambda_reg = [0.1, 1.0]         # one compiled program; keys: GRID_FIELDS

    [relaxed]                       # optional: the differentiable mode of
    temperature = 0.05              # gsjax tune (RelaxedConfig); gsjax run ignores it

Every int field is at most ``INT32_MAX`` (rounds, counts and sizes are int32 in the run);
the seeds of JAX keys (``root_seed``, ``problem.theta.seed``, ``classifier_seed``) at most
``SEED_MAX`` (``jax.random.key`` keeps a uint32: larger seeds would wrap silently), and so are
the run's seed ids (:func:`check_seed_range`).

Only the standard library and pydantic are imported here (no JAX): command-line tools can
validate a file cheaply. :mod:`gsjax.oco.config` reuses the machinery.
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

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Discriminator, Field, Strict
from pydantic import Tag, TypeAdapter, ValidationError, ValidationInfo, field_validator
from pydantic import model_validator
from pydantic.dataclasses import dataclass as _pydantic_dataclass
from pydantic_core import ArgsKwargs

__all__ = [
    "ALGORITHM_NAMES", "AdaptiveAgentConfig", "AdultConfig", "AdultProblem", "AgentConfig",
    "AlgorithmEntry", "BlocksProblem", "ConfigError", "EdgesGraph", "ExperimentConfig",
    "FactorConfig", "FactorProblem", "FactorSpec", "GRID_FIELDS", "GraphProblem", "GridGraph",
    "INT32_MAX", "MAX_RECORDS", "NoiseConfig", "ProblemConfig", "RandomGraph", "RelaxedConfig",
    "SEED_MAX", "ScopesProblem", "ThetaConfig", "UnequalBlocksProblem", "apply_overrides",
    "builtin_config_dir", "check_seed_range", "config_dirs", "config_hash", "config_to_dict",
    "dict_hash", "default_record_every", "find_config", "load_config", "num_coords",
    "num_criteria", "parse_config", "pick_entry", "read_toml", "register_algorithm_name",
]


# --- Errors: a pydantic ValidationError as one ConfigError with a dotted path ---------------


class ConfigError(ValueError):
    """Invalid experiment configuration.

    Attributes:
        field: Dotted path of the offending entry, e.g. ``'agent.lambda_reg'``,
            ``'problem.edges[3]'``; ``'<file>'`` for unreadable files, ``'--set'`` for malformed
            overrides and ``'<root>'`` when the whole config is not a table.
        message: What is wrong and what is allowed (one line).
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")

    def __reduce__(self):  # keep picklable despite the two-argument __init__
        return (type(self), (self.field, self.message))


class _Invalid(ValueError):
    """Raised by a validator: ``loc`` is relative to the record being validated."""

    def __init__(self, loc: tuple, message: str) -> None:
        self.loc, self.message = loc, message
        super().__init__(message)


def _fail(loc: Any, message: str):
    raise _Invalid(loc if isinstance(loc, tuple) else (loc,), message)


def _show(value: Any, text=repr) -> str:
    """``text(value)``; an int too long for ``str`` (over 4300 digits) as its size."""
    if isinstance(value, int) and value.bit_length() > 1000:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    return text(value)


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {_show(value)}"


def _one_of(choices: Sequence[str], got: Any) -> str:
    return f"must be one of {', '.join(repr(c) for c in choices)}; got {got!r}"


_EXPECTED = {"int_type": "an integer", "float_type": "a number", "string_type": "a string",
             "bool_type": "a boolean (true/false)", "tuple_type": "a list", "list_type": "a list",
             "dict_type": "a table", "dataclass_type": "a table", "named_tuple_type": "a table"}
_BOUNDS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def _first_error(exc: ValidationError) -> tuple[tuple, str]:
    """The first error as ``(loc without the union tags, one-line message)``."""
    e = exc.errors(include_url=False)[0]
    loc, kind, ctx, value = e["loc"], e["type"], e.get("ctx") or {}, e.get("input")
    if isinstance(ctx.get("error"), _Invalid):
        loc, message = loc + ctx["error"].loc, ctx["error"].message
    elif kind in _EXPECTED:
        message = f"expected {_EXPECTED[kind]}, got {_describe(value)}"
    elif bound := next((b for b in _BOUNDS if b in ctx), None):
        what = "an integer " if isinstance(ctx[bound], int) else ""
        message = f"must be {what}{_BOUNDS[bound]} {ctx[bound]}, got {_show(value, str)}"
    elif kind == "literal_error":
        message = f"must be one of {ctx['expected'].replace(' or ', ', ')}; got {_show(value)}"
    else:
        message = {"finite_number": f"must be a finite number, got {_show(value, str)}",
                   "extra_forbidden": "unknown key",
                   "too_short": "must list at least one value",
                   "missing": "required but missing"}.get(kind, e["msg"])
    return tuple(p for p in loc if not (isinstance(p, str) and p.startswith("~"))), message


def _dotted(loc: Sequence) -> str:
    """``a.b[3].c``; an empty or unprintable key (a newline) quoted as ``repr`` writes it."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{_key(p)}" for p in loc).lstrip(".")


def _key(name) -> str:
    name = str(name)
    return name if name and name.isprintable() else repr(name)


def _validate(adapter: Any, data: Any, path=_dotted, at: tuple | None = None):
    """Validate; the first error a ConfigError at ``path(loc)`` (with ``at``: _Invalid there)."""
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        loc, message = _first_error(exc)
        if at is not None:
            raise _Invalid(at + loc, message) from None
        raise ConfigError(path(loc) or "<root>", message) from None


# --- Declarative building blocks ----------------------------------------------------------


INT32_MAX = 2 ** 31 - 1  # the largest int field: the run keeps rounds and counts in int32
SEED_MAX = 2 ** 32 - 1  # the largest seed: jax.random.key and the seed ids are uint32


def Int(ge: int | None = None, le: int | None = INT32_MAX):  # noqa: N802 (a type)
    return Annotated[int, Strict(), Field(ge=ge, le=le)]


Seed = Int(0, SEED_MAX)  # a JAX key's seed


def Float(**bounds: float):  # noqa: N802
    return Annotated[float, Strict(), Field(allow_inf_nan=False, **bounds)]


def Floats(**bounds: float):  # noqa: N802
    """A float or a list of floats, each in bounds (the record checks the list's length)."""
    return Annotated[Union[Annotated[Float(**bounds), Tag("~one")],
                           Annotated[tuple[Float(**bounds), ...], Tag("~each")]],
                     Discriminator(lambda v: "~each" if isinstance(v, (list, tuple)) else "~one")]


def _nonempty(value: str) -> str:
    if not value.strip():
        _fail((), "must be a non-empty string")
    return value


Bool = Annotated[bool, Strict()]
Str = Annotated[str, Strict()]
Name = Annotated[str, Strict(), AfterValidator(_nonempty)]
_NONEMPTY = Field(min_length=1)


def record(cls=None, *, kw_only: bool = True):
    """A frozen, hashable pydantic dataclass (with :class:`_Record`'s checks if it is one)."""
    wrap = _pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid"), kw_only=kw_only)
    return wrap if cls is None else wrap(cls)


def _length(value: Any, length: int, desc: str, loc: Any) -> None:
    if isinstance(value, tuple) and len(value) != length:
        _fail(loc, f"a list here must have {desc} = {length} entries, got {len(value)}")


@record
class _Record:
    """A TOML table with a closed key set; ``_check``: the cross-field checks."""

    _misplaced: ClassVar[Mapping[str, str]] = {}  # keys of other variants -> where they belong
    _refused: ClassVar[tuple[str, ...]] = ()  # fields a table may not set (in _misplaced)
    _why: ClassVar[str] = ""  # what the required keys are required for
    _keys: ClassVar[tuple[str, ...] | None] = None  # the TOML keys to list (default: the fields)
    _omit: ClassVar[tuple[str, ...]] = ()  # fields config_to_dict leaves out
    # fields it leaves out at their default (added later: configs without them keep their
    # dicts, hence hashes, and resume the checkpoints of earlier versions)
    _when_set: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="before")
    @classmethod
    def _check_table(cls, data: Any) -> Any:
        if isinstance(data, ArgsKwargs) or dataclasses.is_dataclass(data):
            return data  # built in Python (a constructor, dataclasses.replace)
        if not isinstance(data, dict):
            _fail((), f"expected a table, got {_describe(data)}")
        names = cls._table(data)[0]
        for key in data:
            if key in cls._misplaced and (key in cls._refused or key not in names):
                _fail(str(key), cls._misplaced[key])
            if key not in names:
                _fail(str(key), f"unknown key {str(key)!r}; allowed keys: "
                                f"{', '.join(cls._keys or names)}")
        cls._require(data)
        return data

    @classmethod
    def _require(cls, data: dict) -> None:
        for name in (name for name in cls._table(data)[1] if name not in data):
            why = cls._why.format_map(data)
            _fail(name, f"required{' ' + why if why else ''} but missing")

    @classmethod
    def _table(cls, data: dict) -> tuple[list[str], list[str]]:
        """The keys ``data`` may set and those it must set: the fields, those without default."""
        fields = dataclasses.fields(cls)
        return [f.name for f in fields], [f.name for f in fields if f.default is f.default_factory
                                          is dataclasses.MISSING]

    @model_validator(mode="after")
    def _after(self):
        fields = dataclasses.fields(self)  # (records built in Python skip _check_table)
        self._require({f.name: v for f in fields if (v := getattr(self, f.name)) is not None})
        self._check()
        return self

    def _check(self) -> None:
        pass


def _dict(obj: Any) -> Any:
    """Records as dicts (without ``None``, ``_omit``, ``_when_set`` at default), tuples as lists."""
    if isinstance(obj, FactorSpec):
        obj = obj._asdict()
    if isinstance(obj, dict):
        return {key: _dict(v) for key, v in obj.items()}
    if dataclasses.is_dataclass(obj):
        return {f.name: _dict(v) for f in dataclasses.fields(obj)
                if (v := getattr(obj, f.name)) is not None and f.name not in obj._omit
                and not (f.name in obj._when_set and v == f.default)}
    return [_dict(v) for v in obj] if isinstance(obj, tuple) else obj


# --- The problem: one record per structure or environment ----------------------------------

_STRUCTURES = ("blocks", "graph", "scopes")
_GRAPH_KINDS = ("edges", "chain", "grid", "random", "complete")
_ENVIRONMENTS = ("linear", "adult", "factor")
_ONLY = "only allowed when problem.{} = {!r}"
_HOME = {  # where the keys of the other problem variants belong
    **{k: _ONLY.format("structure", "blocks") for k in ("num_blocks", "block_dim", "block_dims")},
    **{k: _ONLY.format("structure", "scopes") for k in ("scopes", "num_coords")},
    **{k: _ONLY.format("structure", "graph") for k in ("graph", "num_nodes", "graph_seed")},
    "edges": _ONLY.format("graph", "edges"), "grid_shape": _ONLY.format("graph", "grid"),
    "max_degree": _ONLY.format("graph", "random"), "num_edges": _ONLY.format("graph", "random"),
    "adult": _ONLY.format("environment", "adult"), "factor": _ONLY.format("environment", "factor"),
}


@record(kw_only=False)
class ThetaConfig(_Record):
    """How the true parameters are chosen (``[problem.theta]``)."""

    distribution: Literal["explicit", "normal", "uniform", "signal"] = "normal"
    values: tuple[tuple[Float(), ...], ...] | None = None  # 'explicit': one row per criterion
    scale: Float(gt=0.0) = 1.0  # of the random distributions
    seed: Seed = 0  # the key theta is drawn with
    per_seed: Bool = False  # redraw theta for every experiment seed

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
    """Observation noise (``[problem.noise]``)."""

    kind: Literal["independent", "correlated"] = "independent"
    sigma: Floats(ge=0.0) = 0.5  # independent: a float or k of them; correlated: n


@record
class ProblemConfig(_Record):
    """The bandit problem (``[problem]``): the fields every variant has. ``ProblemConfig(**kw)``
    builds the variant ``kw`` selects; a field of another variant reads ``None`` (``p.edges``
    of a blocks problem)."""

    features: Literal["linear", "quadratic", "rff"] = "linear"
    rff_dim: Int(1) = 16  # random Fourier features ('rff')
    rff_lengthscale: Float(gt=0.0) = 0.5
    s0: Floats(ge=0.0, le=1.0) = 0.5  # the initial state: a float or n of them
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

    def _theta_rows(self) -> int:
        return self.sizes[0]

    def _check(self) -> None:
        self._structure()
        (k, n), kind = self.sizes, self.noise.kind
        _length(self.s0, n, "n (number of coordinates)", "s0")
        length, desc = (k, "k (criteria)") if kind == "independent" else (n, "n (coordinates)")
        _length(self.noise.sigma, length, f"{desc} for kind {kind!r}", ("noise", "sigma"))
        rows, values = self._theta_rows(), self.theta.values
        if values is not None and len(values) != rows:
            _fail(("theta", "values"), f"expected k = {rows} rows (one per criterion), got "
                                       f"{len(values)}")


@record
class BlocksProblem(ProblemConfig):
    """``structure = 'blocks'``: ``num_blocks`` blocks of ``block_dim`` coordinates, or with
    ``block_dims`` consecutive blocks of these sizes (:data:`UnequalBlocksProblem` is another
    name of this record)."""

    structure: Literal["blocks"] = "blocks"
    num_blocks: Int(1) | None = None
    block_dim: Int(1) | None = None
    block_dims: Annotated[tuple[Int(1), ...], _NONEMPTY] | None = None
    _why = "for problem.structure = 'blocks'"
    _misplaced = {**_HOME, **dict.fromkeys(("num_blocks", "block_dim"), (
        "not allowed with problem.block_dims (the blocks' sizes are given there)"))}

    @classmethod
    def _table(cls, data: dict) -> tuple[list[str], list[str]]:
        own = ("block_dims",) if "block_dims" in data else ("num_blocks", "block_dim")
        names = [k for k in super()._table(data)[0] if k in own or k not in _HOME]
        return names, [k for k in names if k in own]

    @property
    def sizes(self) -> tuple[int, int]:
        if self.block_dims is not None:
            return len(self.block_dims), sum(self.block_dims)
        return self.num_blocks, self.num_blocks * self.block_dim


UnequalBlocksProblem = BlocksProblem


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
        n, top = self.num_coords, max(max(r) for r in self.scopes)
        if n is not None and top >= n:
            i = next(i for i, r in enumerate(self.scopes) if max(r) == top)
            _fail(("scopes", i), f"coordinate index {top} out of range [0, {n}) "
                                 f"(problem.num_coords = {n})")
        object.__setattr__(self, "num_coords", top + 1 if n is None else n)


_GRAPH_KEYS = {"edges": ("edges",), "grid": ("grid_shape",), "random": ("max_degree", "num_edges")}


@record
class GraphProblem(ProblemConfig):
    """``structure = 'graph'``, the criteria are its nodes, joined by ``graph = 'chain'``,
    ``'complete'``, ``'edges'`` (explicit ``(i, j)`` pairs), ``'grid'`` (``num_nodes`` resolves
    to rows*cols) or ``'random'`` (``num_edges`` random edges, degrees at most ``max_degree``).
    Each kind sets only its own keys (:data:`EdgesGraph` etc. are other names of this record)."""

    structure: Literal["graph"] = "graph"
    graph: Literal[_GRAPH_KINDS]
    num_nodes: Int(1) | None = None  # required except for 'grid'
    graph_seed: Int(0, le=None) = 0  # NumPy seed (any size)
    edges: tuple[tuple[Int(), ...], ...] | None = None
    grid_shape: tuple[Int(1), ...] | None = None  # [rows, cols]
    max_degree: Int(1) | None = None
    num_edges: Int(0) | None = None
    _why = "for problem.graph = {graph!r}"

    @classmethod
    def _table(cls, data: dict) -> tuple[list[str], list[str]]:
        names, required = super()._table(data)
        own = _GRAPH_KEYS.get(data.get("graph"), ())
        names = [k for k in names if k in own or not any(k in v for v in _GRAPH_KEYS.values())]
        need = (*own, *("num_nodes",) * (data.get("graph") != "grid"), *required)
        return names, [k for k in names if k in need]

    @property
    def sizes(self) -> tuple[int, int]:
        return self.num_nodes, self.num_nodes

    def _structure(self) -> None:
        n = self.num_nodes
        if self.graph == "grid":
            if len(self.grid_shape) != 2:
                _fail("grid_shape", f"must be [rows, cols], got {len(self.grid_shape)} entries")
            if n not in (None, nodes := math.prod(self.grid_shape)):
                _fail("num_nodes", f"must be absent or equal rows*cols = {nodes} for "
                                   f"problem.graph = 'grid', got {n}")
            object.__setattr__(self, "num_nodes", nodes)
        seen: set[frozenset] = set()
        for i, edge in enumerate(self.edges or ()):
            if len(edge) != 2:
                _fail(("edges", i), f"must be a pair [i, j] of node indices, got {list(edge)}")
            if (node := next((v for v in edge if not 0 <= v < n), None)) is not None:
                _fail(("edges", i), f"node index {node} out of range [0, {n})")
            if edge[0] == edge[1]:
                _fail(("edges", i), f"self-loop {list(edge)} not allowed (i == j)")
            if frozenset(edge) in seen:
                _fail(("edges", i), f"duplicate edge {list(edge)}")
            seen.add(frozenset(edge))
        if self.graph == "random" and self.num_edges > (
                bound := min(n * self.max_degree // 2, n * (n - 1) // 2)):
            _fail("num_edges", "must be <= min(num_nodes*max_degree//2, "
                               f"num_nodes*(num_nodes-1)//2) = {bound}, got {self.num_edges}")


EdgesGraph = GridGraph = RandomGraph = GraphProblem


@record
class AdultConfig(_Record):
    """The UCI Adult threshold environment (``[problem.adult]``; see :mod:`gsjax.fairness`)."""

    batch_size: Int(1) = 100  # held-out rows drawn (with replacement) per round (>= 2: 'split')
    # 'plain': the batch's |TPR_m - TPR_f|; 'signed': unbiased TPR_m - TPR_f; 'split': the sign
    # of one half-batch's estimate times the other half's
    gap_estimator: Literal["plain", "signed", "split"] = "plain"
    classifier_seed: Seed = 0  # key of the logistic regression's starting weights
    classifier_steps: Int(1) = 200  # L-BFGS iterations
    classifier_l2: Float(ge=0.0) = 1e-4  # L2 penalty on the weights
    raw_data: Name | None = None  # folder of adult.data, adult.test to parse (None: shipped file)

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
    features default to ``'quadratic'`` ([1, tau, tau^2]: Example 1 with k = 1)."""

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
    """A factor-graph problem (``[problem.factor]``, Section 5.3; see :mod:`gsjax.factor`)."""

    num_coords: Int(1)  # n
    num_nodes: Int(1)  # the criteria, k
    # 'clique': one factor over every coordinate, shared by every node (the dense case)
    layout: Literal["clique", "explicit"] = "clique"
    factors: Annotated[tuple[FactorSpec, ...], _NONEMPTY] | None = None  # 'explicit' only
    mixing: Literal["orthogonal", "scaled", "identity"] = "orthogonal"  # node-specific features
    mixing_seed: Int(0, le=None) = 0  # NumPy seed (any size) of the mixing matrices

    def _check(self) -> None:
        if (self.layout == "clique") != (self.factors is None):
            _fail("factors", "only allowed when problem.factor.layout = 'explicit'"
                  if self.factors else "required for layout = 'explicit' but missing")
        for c, spec in enumerate(self.factors or ()):
            for key, size in (("coords", self.num_coords), ("nodes", self.num_nodes)):
                idx = getattr(spec, key)
                for j in (j for j, v in enumerate(idx) if not 0 <= v < size):
                    _fail(("factors", c, key, j), f"index {idx[j]} out of range [0, {size})")
                if len(set(idx)) != len(idx):
                    _fail(("factors", c, key), f"duplicate index in {list(idx)}")
        covered = {i for spec in self.factors or () for i in spec.nodes}
        if self.factors and (missing := [i for i in range(self.num_nodes) if i not in covered]):
            _fail("factors", f"node {missing[0]} belongs to no factor; every node needs at "
                             "least one")


@record
class FactorProblem(ProblemConfig):
    """``environment = 'factor'`` (Section 5.3), its sizes from ``[problem.factor]``;
    ``'explicit'`` theta values have one row per FACTOR, of ``d_C`` entries (``|C|`` linear,
    ``2|C|+1`` quadratic, ``rff_dim`` rff)."""

    structure: Literal["factor"] = "factor"
    environment: Literal["factor"]
    factor: FactorConfig
    _why = "for problem.environment = 'factor'"
    _misplaced = dict.fromkeys([k for k in _HOME if k != "factor"], "not used by problem."
                               "environment = 'factor' (the sizes come from [problem.factor])")
    _omit = ()

    @property
    def sizes(self) -> tuple[int, int]:
        return self.factor.num_nodes, self.factor.num_coords

    def _theta_rows(self) -> int:
        return len(self.factor.factors or [()])

    def _check(self) -> None:
        super()._check()
        fac = self.factor
        scopes = [c for c, _ in fac.factors] if fac.factors else [range(fac.num_coords)]
        for c, (row, coords) in enumerate(zip(self.theta.values or (), scopes)):
            d_c = {"linear": len(coords), "quadratic": 2 * len(coords) + 1}.get(self.features,
                                                                                 self.rff_dim)
            if len(row) != d_c:
                _fail(("theta", "values", c), f"factor {c} has {d_c} {self.features} features; "
                                              f"got {len(row)} values")


_VARIANTS = {"blocks": BlocksProblem, "scopes": ScopesProblem, "graph": GraphProblem,
             "adult": AdultProblem, "factor": FactorProblem}
_PROBLEM_FIELDS = {f.name for v in _VARIANTS.values() for f in dataclasses.fields(v)}


def _problem(data: Any) -> ProblemConfig:
    """``[problem]`` as the record its ``environment`` (else ``structure``) selects."""
    if isinstance(data, ProblemConfig):
        return data
    if not isinstance(data, dict):
        _fail((), f"expected a table, got {_describe(data)}")
    env, structure = data.get("environment", "linear"), data.get("structure")
    if env not in _ENVIRONMENTS:
        _fail("environment", _one_of(_ENVIRONMENTS, env))
    if env == "linear" and structure not in _STRUCTURES:
        _fail("structure", _one_of(_STRUCTURES, structure) if "structure" in data
              else "required but missing")
    if env == "linear" and structure == "graph" and data.get("graph") not in _GRAPH_KINDS:
        _fail("graph", _one_of(_GRAPH_KINDS, data["graph"]) if "graph" in data
              else "required for problem.structure = 'graph' but missing")
    cls = _VARIANTS[structure if env == "linear" else env]
    return _validate(cls.__pydantic_validator__, data, at=())


Problem = Annotated[ProblemConfig, BeforeValidator(_problem)]
_PROBLEM = TypeAdapter(Problem)


# --- Agents and algorithm entries ---------------------------------------------------------

_NAME_RE = re.compile(r"[a-z][a-z0-9_]*")

#: Algorithm names accepted by ``[algorithms.NAME].algorithm``. Mutable: extend it with
#: :func:`register_algorithm_name`.
ALGORITHM_NAMES: set[str] = {"linucb", "lazy", "async_lazy", "joint_lazy", "joint_linucb",
                             "adaptive_lazy"}


def register_algorithm_name(name: str) -> None:
    """Add ``name`` (``[a-z][a-z0-9_]*``, else ``ValueError``) to :data:`ALGORITHM_NAMES`."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ValueError(f"algorithm name must be a string matching [a-z][a-z0-9_]*, got {name!r}")
    ALGORITHM_NAMES.add(name)


@record
class AgentConfig(_Record):
    """Agent hyper-parameters (``[agent]`` and per-algorithm overrides)."""

    lambda_reg: Floats(gt=0.0) = 1.0  # ridge regularisation: a float or k of them
    beta: Float(ge=0.0) = 1.0  # confidence-width multiplier
    beta_mode: Literal["constant", "oful"] = "constant"
    oful_delta: Float(gt=0.0, lt=1.0) = 0.05  # OFUL failure probability
    oful_S: Float(gt=0.0) = 1.0  # OFUL norm bound on theta
    oful_sigma: Float(ge=0.0) | None = None  # OFUL noise level (None: the problem's sigma)
    oful_L: Float(gt=0.0) | None = None  # OFUL bound on ||phi_i(s)|| (None: the feature map's)
    move_cost: Float(ge=0.0) = 1.0  # cost of moving the state
    solver: Literal["vertex", "pgd", "dp"] = "vertex"  # 'vertex', 'dp': exact, linear features
    pgd_steps: Int(1) = 50  # projected-gradient steps, learning rate, restarts, optimiser
    pgd_lr: Float(gt=0.0) = 0.05
    pgd_starts: Int(1) = 4
    pgd_optimizer: Literal["sgd", "adam"] = "adam"
    pgd_include_current: Bool = True  # PGD start 0 is the current state (else all uniform)
    # solver 'pgd' on a graph the DP takes: each solve's residual (summary: max_lcb_residual) is
    # PGD's LCB above the exact minimum of the same objective (a diagnostic: a DP every solve)
    pgd_gap: Bool = False
    reference: Literal["global", "own"] = "global"
    trigger_ratio: Float(gt=1.0) = 2.0  # determinant-ratio update trigger
    refresh_every: Int(1) = 1  # refresh period in rounds
    # how a refresh recomputes V^-1, log det V of blocks of d >= 3 features: LAPACK's Cholesky,
    # or the same factorisation unrolled (vectorised: faster for many small blocks, last bits vary)
    refresh_method: Literal["cholesky", "unrolled"] = "cholesky"
    # how S = sum phi phi^T is summed: 'plain', or 'compensated' (Kahan; one more (d, d) array a
    # criterion). With fractional (PGD) states a float32 plain sum can turn V indefinite over
    # ~10^4 rounds at a small lambda_reg; at vertex states both are exact
    gram_summation: Literal["plain", "compensated"] = "plain"
    dp_max_table: Int(2) = 2 ** 16  # solver 'dp': most entries of one table, 2^(width + 1)
    dp_exact_ties: Bool = True  # solver 'dp': the vertex enumerator's tie rule (False: min-fill)
    # solver 'dp' whose tables would exceed dp_max_table: 'none' refuses the config, 'pgd' runs
    # that entry with the PGD solver instead (summary.json: algorithms.NAME.solver_used)
    dp_fallback: Literal["none", "pgd"] = "none"
    _when_set = ("pgd_gap", "refresh_method", "gram_summation")
    _misplaced = dict.fromkeys(("warmup", "signal_gamma", "refined"), (
        "only allowed for algorithm 'adaptive_lazy' (in its [algorithms.NAME] table, "
        "not in [agent])"))


@record
class AdaptiveAgentConfig(AgentConfig):
    """:class:`AgentConfig` of an ``'adaptive_lazy'`` entry (Section 5.2)."""

    warmup: Int(0)  # rounds tau of uniform exploration on the complete super-graph (0: none)
    signal_gamma: Float(ge=0.0) | None = None  # gamma of Assumption B (needed if warmup > 0)
    refined: Literal["lazy", "async_lazy"] | None = None  # plays on the refined graph (lazy)
    _misplaced = {}
    _why = ("for algorithm 'adaptive_lazy' (rounds of exploration before the sparsity test; "
            "0: none)")

    def _check(self) -> None:
        if self.warmup > 0 and self.signal_gamma is None:
            _fail("signal_gamma", "required for algorithm 'adaptive_lazy' with warmup > 0 (the "
                                  "sparsity test keeps |theta_hat| > gamma/2)")


_AGENT_KEYS = tuple(f.name for f in dataclasses.fields(AgentConfig))


@record(kw_only=False)
class AlgorithmEntry(_Record):
    """One ``[algorithms.NAME]`` table: ``agent`` is ``[agent]`` merged with its overrides (an
    :class:`AdaptiveAgentConfig` for ``'adaptive_lazy'``)."""

    name: str  # the table key
    algorithm: str  # from ALGORITHM_NAMES
    agent: AgentConfig

    @field_validator("agent", mode="before")
    @classmethod
    def _adaptive(cls, agent: Any, info: ValidationInfo) -> Any:
        if info.data.get("algorithm") != "adaptive_lazy" or isinstance(agent, AgentConfig):
            return agent
        return _validate(AdaptiveAgentConfig.__pydantic_validator__, agent, at=())


def _entry_tables(raw: Mapping, known: Any, keys: Sequence[str], what: str = "algorithm"):
    """``(name, algorithm, other keys)`` of each checked ``[algorithms.NAME]`` table."""
    tables = raw.get("algorithms")
    if tables is not None and not isinstance(tables, dict):
        raise ConfigError("algorithms", f"expected a table, got {_describe(tables)}")
    if not tables:
        raise ConfigError("algorithms", "at least one [algorithms.NAME] table is required")
    names = ", ".join(repr(a) for a in sorted(known))
    for name, table in tables.items():
        path = f"algorithms.{_key(name)}"
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise ConfigError(path, f"entry name {name!r} must match [a-z][a-z0-9_]*")
        if not isinstance(table, dict):
            raise ConfigError(path, f"expected a table, got {_describe(table)}")
        for key in (key for key in table if key not in keys):
            raise ConfigError(f"{path}.{_key(key)}", f"unknown key {key!r}; allowed keys: "
                                               f"{', '.join(keys)}")
        algorithm = table.get("algorithm", name)
        if "algorithm" in table and (not isinstance(algorithm, str) or algorithm not in known):
            raise ConfigError(f"{path}.algorithm",
                              f"unknown {what} {algorithm!r}; must be one of {names}")
        if algorithm not in known:
            raise ConfigError(f"{path}.algorithm", f"missing, and the entry name {name!r} is "
                                                   f"not a known {what}; set it to one of {names}")
        yield name, algorithm, {k: v for k, v in table.items() if k != "algorithm"}


# --- Grid, relaxed mode and the experiment ------------------------------------------------

#: Agent fields a [grid] may vary (float hyperparameters), with their allowed ranges.
GRID_FIELDS = {"beta": dict(ge=0.0), "lambda_reg": dict(gt=0.0), "move_cost": dict(ge=0.0),
               "pgd_lr": dict(gt=0.0), "trigger_ratio": dict(gt=1.0),
               "oful_delta": dict(gt=0.0, lt=1.0), "oful_S": dict(gt=0.0)}
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
        axes.append((key, _validate(_AXES[key], vals, at=(key,))))
        if len(set(axes[-1][1])) != len(vals):
            _fail(key, "values must be distinct")
    if (size := math.prod(len(v) for _, v in axes)) > MAX_GRID_POINTS:
        _fail((), f"{size} grid points; at most {MAX_GRID_POINTS} allowed")
    return tuple(axes)


@record
class RelaxedConfig(_Record):
    """``[relaxed]``: the differentiable mode of ``gsjax tune`` (:mod:`gsjax.relaxed`);
    ``gsjax run`` always runs the hard algorithms."""

    temperature: Float(gt=0.0) = 0.05  # soft-trigger temperature, log-det units
    solve_temperature: Float(gt=0.0) | None = None  # soft-min temperature (None: temperature)
    # soft-min index penalty kappa: candidate p pays kappa sqrt(solve_temperature) p
    tie_break: Float(ge=0.0) = 0.01
    block: Int(1) | None = None  # rounds per checkpointed block (divides horizon; None: ~sqrt)
    # environment = "adult": bandwidth h of the smoothed loss sigma((score - tau) / h)
    loss_bandwidth: Float(gt=0.0) = 0.01


@record
class ExperimentConfig(_Record):
    """A fully validated experiment configuration. ``agent`` is ``[agent]`` as written; the
    algorithms use their entry's merged ``agent``. ``grid``: the ``[grid]`` axes in file order
    (empty for an ordinary run); ``paper_json``: ``[paper]`` as canonical JSON."""

    name: Name
    description: Str = ""
    seeds: Int(1) = 10
    horizon: Int(1) = 300
    root_seed: Seed = 0
    dtype: Literal["float32", "float64"] = "float32"
    record_every: Int(1) = 1  # parse_config's default: default_record_every(horizon)
    problem: Problem
    agent: AgentConfig = AgentConfig()
    algorithms: tuple[AlgorithmEntry, ...] = ()
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
        block = getattr(self.relaxed, "block", None)
        if block is not None and self.horizon % block:
            _fail(("relaxed", "block"), f"must divide horizon ({self.horizon}); got {block}")


# --- Public API ---------------------------------------------------------------------------


def apply_overrides(raw: dict, overrides: Sequence[str]) -> dict:
    """A copy of ``raw`` with ``"dotted.key=value"`` overrides applied (missing tables made).

    The value is parsed as a TOML value, else used verbatim as a string (``agent.solver=pgd``).

    Raises:
        ConfigError: ``field='--set'`` for a malformed override or one into a non-table value.
    """
    result = copy.deepcopy(raw)
    for item in (overrides,) if isinstance(overrides, str) else overrides:
        if not isinstance(item, str) or "=" not in item:
            raise ConfigError("--set", f"expected 'dotted.key=value', got {item!r}")
        key, value_text = item.split("=", 1)
        parts = [p.strip() for p in key.strip().split(".")]
        if not all(parts):
            raise ConfigError("--set", f"invalid key {key.strip()!r} in override {item!r}")
        try:
            value = tomllib.loads("v = " + value_text)["v"]
        except ValueError:  # TOMLDecodeError, or an int over Python's 4300-digit limit
            value = value_text.strip()
        node = result
        for depth, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError("--set", f"cannot set {key.strip()!r}: "
                                           f"{'.'.join(parts[:depth + 1])!r} is not a table")
        node[parts[-1]] = value
    return result


def _paper_default(obj: Any) -> Any:
    if isinstance(obj, (datetime.datetime, datetime.date, datetime.time)):
        return obj.isoformat()
    raise TypeError(f"{type(obj).__name__} is not JSON-serialisable")


def _root(raw: Any, overrides: Sequence[str]) -> dict:
    """The raw config, overrides applied, with ``[paper]`` as canonical JSON ``paper_json``."""
    if not isinstance(raw, dict):
        raise ConfigError("<root>", f"config must be a table, got {_describe(raw)}")
    raw = apply_overrides(raw, overrides) if overrides else raw
    paper = raw.get("paper", {})
    if not isinstance(paper, dict):
        raise ConfigError("paper", f"expected a table, got {_describe(paper)}")
    try:
        paper_json = json.dumps(paper, sort_keys=True, default=_paper_default)
    except (TypeError, ValueError) as exc:
        raise ConfigError("paper", f"must contain only JSON-serialisable values ({exc})")
    return {**{k: v for k, v in raw.items() if k != "paper"}, "paper_json": paper_json}


def _toml_path(tables: list, renames: Mapping[str, str] = {"paper_json": "paper"}):
    """The TOML path of ``loc``: entries by name, an agent key an entry leaves as ``agent.KEY``."""

    def path(loc: tuple) -> str:
        if loc[:1] == ("algorithms",) and len(loc) > 1:
            name, _, table = tables[loc[1]]
            if loc[2:3] == ("agent",) and len(loc) > 3:
                from_agent = loc[3] not in table and loc[3] in _AGENT_KEYS
                return _dotted((("agent",) if from_agent else ("algorithms", name)) + loc[3:])
            return _dotted(("algorithms", name, *loc[2:]))
        return _dotted((renames.get(loc[0], loc[0]), *loc[1:]) if loc else loc)

    return path


def parse_config(raw: dict, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Validate a raw config dict (from :func:`tomllib.load`; not modified), ``overrides``
    (``"dotted.key=value"``) applied first; raises :class:`ConfigError` on the first error."""
    data = _root(raw, overrides)
    if "record_every" not in data and type(horizon := data.get("horizon", 300)) is int:
        data["record_every"] = default_record_every(max(horizon, 1))
    shared = data.get("agent", {}) if isinstance(data.get("agent", {}), dict) else {}
    keys = ("algorithm", *(f.name for f in dataclasses.fields(AdaptiveAgentConfig)))
    tables = list(_entry_tables(data, ALGORITHM_NAMES, keys))
    data["algorithms"] = [{"name": name, "algorithm": algorithm, "agent": {**shared, **table}}
                          for name, algorithm, table in tables]
    return _validate(ExperimentConfig.__pydantic_validator__, data, _toml_path(tables))


def check_seed_range(seeds: int, seed_start: int, field: str = "--seed-start") -> None:
    """ConfigError at ``field`` unless the seed ids ``seed_start .. seed_start + seeds - 1``
    are in ``[0, SEED_MAX]`` (the runner casts them to uint32)."""
    if seed_start < 0:
        raise ConfigError(field, f"must be >= 0, got {seed_start}")
    if seed_start + seeds - 1 > SEED_MAX:
        raise ConfigError(field, f"seed ids {seed_start}..{seed_start + seeds - 1} exceed "
                                 f"{SEED_MAX} (uint32); need {field} <= {SEED_MAX + 1 - seeds}")


MAX_RECORDS = 1000


def default_record_every(horizon: int) -> int:
    """Smallest divisor ``r`` of ``horizon`` with ``horizon / r <= MAX_RECORDS``."""
    return next(r for r in range(max(1, -(-horizon // MAX_RECORDS)), horizon + 1)
                if horizon % r == 0)


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
    """A config path from a path or a built-in name (``section7_1`` -> ``section7_1.toml``);
    else :class:`ConfigError` ``'<file>'`` listing the built-in names."""
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
    """The raw table of a TOML file or built-in config name (:class:`ConfigError` ``'<file>'``
    if it cannot be found, read or parsed)."""
    path = path if Path(path).exists() else find_config(path)
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError("<file>", f"cannot read config file {os.fspath(path)!r}: {reason}")
    except ValueError as exc:  # TOMLDecodeError, or an int over Python's 4300-digit limit
        raise ConfigError("<file>", f"invalid TOML in {os.fspath(path)!r}: {exc}")


def load_config(path: str | os.PathLike, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Read (a path or a built-in name: :func:`find_config`), override and validate a config."""
    return parse_config(read_toml(path), overrides)


def config_to_dict(cfg: ExperimentConfig) -> dict:
    """The fully resolved, JSON-serialisable dict of ``cfg`` (defaults filled in, ``None``
    fields omitted, each entry's complete merged agent): ``parse_config`` of it is ``cfg``."""
    return {
        **{key: getattr(cfg, key) for key in ExperimentConfig._keys[:7]},
        "problem": _dict(cfg.problem), "agent": _dict(cfg.agent),
        "algorithms": {e.name: {"algorithm": e.algorithm, **_dict(e.agent)}
                       for e in cfg.algorithms},
        "paper": cfg.paper,
        **({"grid": {key: list(vals) for key, vals in cfg.grid}} if cfg.grid else {}),
        **({"relaxed": _dict(cfg.relaxed)} if cfg.relaxed is not None else {}),
    }


def config_hash(cfg: ExperimentConfig) -> str:
    """SHA-256 of the canonical JSON of :func:`config_to_dict` (sorted keys; the entries as an
    ordered list of ``[name, entry]`` pairs, so that like ``==`` it depends on their order)."""
    return dict_hash(config_to_dict(cfg))


def dict_hash(d: dict) -> str:
    """SHA-256 of a resolved config dict's canonical JSON, its ``algorithms`` hashed in order."""
    d = {**d, "algorithms": [[name, entry] for name, entry in d["algorithms"].items()]}
    text = json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def num_criteria(cfg: ExperimentConfig | ProblemConfig) -> int:
    """Number of criteria k of a config or its problem."""
    return (cfg.problem if isinstance(cfg, ExperimentConfig) else cfg).sizes[0]


def num_coords(cfg: ExperimentConfig | ProblemConfig) -> int:
    """Number of coordinates n of a config or its problem."""
    return (cfg.problem if isinstance(cfg, ExperimentConfig) else cfg).sizes[1]


def pick_entry(cfg, name: str | None = None, field: str = "--algorithm", preferred=None,
               error: type = ConfigError):
    """The entry of ``cfg.algorithms`` named ``name`` (a bandit or OCO config); by default the
    first entry ``preferred(entry)`` accepts, else the first. An unknown name is ``error(field,
    ...)`` listing the entries."""
    entries = list(cfg.algorithms)
    if name is None:
        return next((e for e in entries if preferred is not None and preferred(e)), entries[0])
    for e in entries:
        if e.name == name:
            return e
    raise error(field, f"no algorithm entry {name!r} in the config; entries: "
                       f"{[e.name for e in entries]}")
