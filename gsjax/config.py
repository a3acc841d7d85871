"""Experiment configuration schema for ``gsjax``.

Experiment configs are TOML files parsed with the standard-library
:mod:`tomllib` and validated into a tree of frozen, hashable dataclasses.
Validation is strict: every problem raises :class:`ConfigError`, whose
``field`` attribute is the dotted path of the offending entry (for example
``'agent.lambda_reg'``, ``'problem.edges[3]'`` or
``'algorithms.lazy.reference'``) and whose message says what is allowed.

TOML layout (defaults in parentheses)::

    name = "my-experiment"          # required, non-empty
    description = ""                # ("")
    seeds = 10                      # int >= 1 (10)
    horizon = 300                   # int >= 1 (300)
    root_seed = 0                   # int >= 0 (0)
    dtype = "float32"               # "float32" | "float64" ("float32")
    record_every = 1                # int >= 1 (auto: smallest divisor of horizon
                                    #   that keeps at most MAX_RECORDS records)

    [paper]                         # free-form reference numbers (optional)

    [problem]                       # required
    structure = "blocks"            # "blocks" | "graph" | "scopes"
    num_blocks = 3                  # blocks only
    block_dim = 2                   # blocks only
    # blocks of unequal sizes: block_dims = [2, 3, 1] instead of num_blocks, block_dim
    # scopes only: scopes = [[0, 1], [1, 2, 3], [3]] (criterion i reads scopes[i]),
    #              num_coords (default: the largest index + 1)
    # graph only: graph, num_nodes, edges, grid_shape, max_degree,
    #             num_edges, graph_seed
    features = "linear"             # "linear" | "quadratic" | "rff"
    s0 = 0.5                        # float in [0, 1] or list of n floats

    [problem.theta]                 # distribution, values, scale, seed, per_seed
    [problem.noise]                 # kind, sigma
    # environment = "adult" (Section 7.3): the loss comes from UCI Adult data;
    # needs structure = "blocks", num_blocks = block_dim = 1, no theta/noise;
    # options in [problem.adult] (AdultConfig)
    # environment = "factor" (Section 5.3): a factor graph; structure omitted,
    # sizes, layout and mixing in [problem.factor] (FactorConfig)

    [agent]                         # shared defaults for all algorithms

    [algorithms.lazy]               # one table per algorithm, file order kept
    algorithm = "lazy"              # defaults to the table name
    beta = 2.0                      # any [agent] key overrides the shared value

    [grid]                          # optional: run every algorithm on a grid of
    beta = [0.25, 0.5, 1.0]         # float hyperparameters (Cartesian product) in
    lambda_reg = [0.1, 1.0]         # one compiled program; keys: GRID_FIELDS

    [relaxed]                       # optional: the differentiable mode of
    temperature = 0.05              # gsjax tune (RelaxedConfig); gsjax run ignores it

Only the standard library is imported here, so the module can be used by
command-line tools without pulling in JAX.
"""

from __future__ import annotations

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
from typing import Any, Mapping, Sequence

__all__ = [
    "ALGORITHM_NAMES",
    "AdultConfig",
    "AgentConfig",
    "AlgorithmEntry",
    "ConfigError",
    "ExperimentConfig",
    "FactorConfig",
    "GRID_FIELDS",
    "MAX_RECORDS",
    "default_record_every",
    "NoiseConfig",
    "ProblemConfig",
    "RelaxedConfig",
    "ThetaConfig",
    "apply_overrides",
    "config_hash",
    "config_dirs",
    "config_to_dict",
    "builtin_config_dir",
    "find_config",
    "load_config",
    "num_coords",
    "num_criteria",
    "parse_config",
    "register_algorithm_name",
]


# ---------------------------------------------------------------------------
# Errors and registry
# ---------------------------------------------------------------------------


class ConfigError(ValueError):
    """Invalid experiment configuration.

    Attributes:
        field: Dotted path of the offending entry, e.g. ``'agent.lambda_reg'``,
            ``'problem.edges[3]'``; ``'<file>'`` for unreadable files,
            ``'--set'`` for malformed overrides and ``'<root>'`` when the
            whole config is not a table.
        message: Human-readable description of what is wrong and what is
            allowed.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"

    def __reduce__(self):  # keep picklable despite the two-argument __init__
        return (type(self), (self.field, self.message))


_NAME_RE = re.compile(r"[a-z][a-z0-9_]*")

#: Algorithm names accepted by ``[algorithms.NAME].algorithm``. Mutable:
#: extend it with :func:`register_algorithm_name`.
ALGORITHM_NAMES: set[str] = {
    "linucb", "lazy", "async_lazy", "joint_lazy", "joint_linucb", "adaptive_lazy",
}


def register_algorithm_name(name: str) -> None:
    """Add ``name`` to :data:`ALGORITHM_NAMES` (idempotent).

    Args:
        name: Algorithm identifier matching ``[a-z][a-z0-9_]*``.

    Raises:
        ValueError: If ``name`` is not a string of the allowed form.
    """
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ValueError(
            f"algorithm name must be a string matching [a-z][a-z0-9_]*, got {name!r}"
        )
    ALGORITHM_NAMES.add(name)


# ---------------------------------------------------------------------------
# Dataclasses
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ThetaConfig:
    """How the true parameters are chosen (``[problem.theta]``).

    Attributes:
        distribution: ``'explicit'``, ``'normal'`` or ``'uniform'``.
        values: For ``'explicit'``: one tuple of floats per criterion (k
            rows); ``None`` otherwise. Row lengths are checked elsewhere.
        scale: Scale of the random distribution (> 0).
        seed: Seed used to draw theta (>= 0).
        per_seed: Whether theta is redrawn for every experiment seed.
    """

    distribution: str = "normal"
    values: tuple[tuple[float, ...], ...] | None = None
    scale: float = 1.0
    seed: int = 0
    per_seed: bool = False


@dataclasses.dataclass(frozen=True)
class NoiseConfig:
    """Observation noise (``[problem.noise]``).

    Attributes:
        kind: ``'independent'`` (one sigma per criterion, length k) or
            ``'correlated'`` (one sigma per coordinate, length n).
        sigma: A float >= 0 or a tuple of floats >= 0.
    """

    kind: str = "independent"
    sigma: float | tuple[float, ...] = 0.5


@dataclasses.dataclass(frozen=True)
class AdultConfig:
    """The UCI Adult threshold environment (``[problem.adult]``; see :mod:`gsjax.fairness`).

    Attributes:
        batch_size: Held-out rows drawn (with replacement) per round, B >= 1
            (>= 2 for ``'split'``).
        gap_estimator: ``'plain'`` (the batch's |TPR_m - TPR_f|), ``'signed'``
            (unbiased TPR_m - TPR_f) or ``'split'`` (sign of one half-batch
            times the other half's estimate).
        classifier_seed: Key of the logistic regression's starting weights.
        classifier_steps: L-BFGS iterations (>= 1).
        classifier_l2: L2 penalty on the weights (>= 0).
        raw_data: Folder holding adult.data and adult.test to parse instead
            of the file shipped in the package (``None``: the shipped file).
    """

    batch_size: int = 100
    gap_estimator: str = "plain"
    classifier_seed: int = 0
    classifier_steps: int = 200
    classifier_l2: float = 1e-4
    raw_data: str | None = None


@dataclasses.dataclass(frozen=True)
class FactorConfig:
    """A factor-graph problem (``[problem.factor]``, Section 5.3; see :mod:`gsjax.factor`).

    Attributes:
        num_coords: Coordinates n (>= 1).
        num_nodes: Nodes (criteria) k (>= 1).
        layout: ``'clique'`` (one factor over every coordinate shared by every
            node, the dense case of Section 5.3) or ``'explicit'``.
        factors: For ``'explicit'``: one ``(coords, nodes)`` pair of index
            tuples per factor; ``None`` for ``'clique'``.
        mixing: Node-specific feature mixing ``'orthogonal'``, ``'scaled'``
            or ``'identity'``.
        mixing_seed: NumPy seed of the mixing matrices (>= 0).
    """

    num_coords: int
    num_nodes: int
    layout: str = "clique"
    factors: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] | None = None
    mixing: str = "orthogonal"
    mixing_seed: int = 0


@dataclasses.dataclass(frozen=True)
class ProblemConfig:
    """The bandit problem (``[problem]``).

    Fields that do not apply to the chosen ``structure`` / ``graph`` are
    ``None``. For ``graph = 'grid'``, ``num_nodes`` is resolved to
    ``rows * cols``.

    Attributes:
        structure: ``'blocks'``, ``'graph'`` or ``'scopes'``.
        num_blocks: Number of blocks (criteria) for ``'blocks'`` of equal size.
        block_dim: Coordinates per block for ``'blocks'`` of equal size.
        block_dims: Coordinates of each block, for ``'blocks'`` of unequal sizes (then
            ``num_blocks`` and ``block_dim`` are ``None``).
        scopes: Criterion ``i``'s coordinates, for ``'scopes'`` (any sizes, may overlap).
        num_coords: Number of coordinates for ``'scopes'``.
        graph: ``'edges'``, ``'chain'``, ``'grid'``, ``'random'`` or
            ``'complete'`` for ``'graph'``.
        num_nodes: Number of graph nodes for ``'graph'``.
        edges: Explicit ``(i, j)`` pairs for ``graph = 'edges'``.
        grid_shape: ``(rows, cols)`` for ``graph = 'grid'``.
        max_degree: Degree bound for ``graph = 'random'``.
        num_edges: Edge count for ``graph = 'random'``.
        graph_seed: Seed for random graphs (``None`` for ``'blocks'``).
        features: ``'linear'``, ``'quadratic'`` or ``'rff'``.
        rff_dim: Random Fourier feature dimension (used for ``'rff'``).
        rff_lengthscale: RFF lengthscale (used for ``'rff'``).
        s0: Initial state, a float in [0, 1] or a tuple of n such floats.
        theta: True-parameter specification.
        noise: Observation-noise specification.
        environment: ``'linear'`` (the linear model above) or ``'adult'``
            (threshold tuning on UCI Adult, Section 7.3).
        adult: Options of ``environment = 'adult'`` (``None`` otherwise).
    """

    structure: str
    num_blocks: int | None = None
    block_dim: int | None = None
    block_dims: tuple[int, ...] | None = None
    scopes: tuple[tuple[int, ...], ...] | None = None
    num_coords: int | None = None
    graph: str | None = None
    num_nodes: int | None = None
    edges: tuple[tuple[int, int], ...] | None = None
    grid_shape: tuple[int, int] | None = None
    max_degree: int | None = None
    num_edges: int | None = None
    graph_seed: int | None = None
    features: str = "linear"
    rff_dim: int = 16
    rff_lengthscale: float = 0.5
    s0: float | tuple[float, ...] = 0.5
    theta: ThetaConfig = dataclasses.field(default_factory=ThetaConfig)
    noise: NoiseConfig = dataclasses.field(default_factory=NoiseConfig)
    environment: str = "linear"
    adult: AdultConfig | None = None
    factor: FactorConfig | None = None  # environment = 'factor' (Section 5.3)


@dataclasses.dataclass(frozen=True)
class AgentConfig:
    """Agent hyper-parameters (``[agent]`` and per-algorithm overrides).

    Attributes:
        lambda_reg: Ridge regularisation, float > 0 or tuple of k floats > 0.
        beta: Confidence-width multiplier (>= 0).
        beta_mode: ``'constant'`` or ``'oful'``.
        oful_delta: OFUL failure probability, in (0, 1).
        oful_S: OFUL norm bound on theta (> 0).
        oful_sigma: OFUL noise level (>= 0); ``None`` means use the
            problem's noise sigma.
        move_cost: Cost of moving the state (>= 0).
        solver: ``'vertex'`` (exact for linear features) or ``'pgd'``.
        pgd_steps: Projected-gradient steps (>= 1).
        pgd_lr: Projected-gradient learning rate (> 0).
        pgd_starts: Number of PGD restarts (>= 1).
        pgd_optimizer: ``'sgd'`` or ``'adam'``.
        pgd_include_current: Whether PGD start 0 is the current state (else
            every start is drawn uniformly on the box).
        reference: ``'global'`` or ``'own'``.
        trigger_ratio: Determinant-ratio update trigger (> 1).
        refresh_every: Refresh period in rounds (>= 1).
        warmup: ``'adaptive_lazy'`` only (Section 5.2): warm-up rounds tau
            (>= 0) of uniform exploration on the complete super-graph.
        signal_gamma: ``'adaptive_lazy'`` only: the signal level gamma of
            Assumption B (>= 0); the sparsity test keeps |theta_hat| > gamma/2.
        refined: ``'adaptive_lazy'`` only: ``'lazy'`` or ``'async_lazy'``
            play on the refined graph.
    """

    lambda_reg: float | tuple[float, ...] = 1.0
    beta: float = 1.0
    beta_mode: str = "constant"
    oful_delta: float = 0.05
    oful_S: float = 1.0
    oful_sigma: float | None = None
    move_cost: float = 1.0
    solver: str = "vertex"
    pgd_steps: int = 50
    pgd_lr: float = 0.05
    pgd_starts: int = 4
    pgd_optimizer: str = "adam"
    pgd_include_current: bool = True
    reference: str = "global"
    trigger_ratio: float = 2.0
    refresh_every: int = 1
    # Adaptive graph refinement (Section 5.2); None (omitted from dicts and hashes) elsewhere.
    warmup: int | None = None
    signal_gamma: float | None = None
    refined: str | None = None


@dataclasses.dataclass(frozen=True)
class AlgorithmEntry:
    """One ``[algorithms.NAME]`` table.

    Attributes:
        name: Entry name (the table key), matching ``[a-z][a-z0-9_]*``.
        algorithm: Algorithm identifier from :data:`ALGORITHM_NAMES`.
        agent: The shared ``[agent]`` merged with this entry's overrides.
    """

    name: str
    algorithm: str
    agent: AgentConfig


@dataclasses.dataclass(frozen=True)
class RelaxedConfig:
    """The ``[relaxed]`` table: the differentiable mode used by ``gsjax tune``
    (:mod:`gsjax.relaxed`). ``gsjax run`` always runs the hard algorithms.

    Attributes:
        temperature: Soft-trigger temperature in log-det units (> 0).
        solve_temperature: Soft-min temperature in LCB units (> 0); ``None``
            means ``temperature``.
        tie_break: Soft-min index penalty kappa (>= 0): candidate p is
            penalised by kappa sqrt(solve_temperature) p (hard tie rule in the limit).
        block: Rounds per checkpointed block (>= 1, divides horizon); ``None``
            means the divisor of horizon closest to sqrt(horizon).
        loss_bandwidth: ``environment = "adult"`` only: bandwidth h (> 0) of the
            smoothed loss, ``1[score >= tau]`` -> ``sigma((score - tau) / h)``
            (:func:`gsjax.fairness.smooth`).
    """

    temperature: float = 0.05
    solve_temperature: float | None = None
    tie_break: float = 0.01
    block: int | None = None
    loss_bandwidth: float = 0.01


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """A fully validated experiment configuration.

    Attributes:
        name: Experiment name (non-empty).
        description: Free-text description.
        seeds: Number of independent seeds (>= 1).
        horizon: Number of rounds (>= 1).
        root_seed: Root PRNG seed (>= 0).
        dtype: ``'float32'`` or ``'float64'``.
        record_every: Per-round arrays are kept every this many rounds. When
            the file omits it: the smallest divisor of ``horizon`` giving at
            most :data:`MAX_RECORDS` records, so outputs do not grow with T.
        problem: The bandit problem.
        agent: Shared agent defaults as written in ``[agent]``. Algorithms
            should use ``AlgorithmEntry.agent``, which includes overrides
            (and is the one cross-checked against the problem).
        algorithms: Algorithm entries in file order.
        grid: ``[grid]`` axes in file order, ``(agent field, values)``; every
            algorithm runs on the Cartesian product of the axes in one compiled
            program. Empty for an ordinary run.
        paper_json: The free-form ``[paper]`` table as canonical JSON
            (sorted keys); use the :attr:`paper` property for a dict.
    """

    name: str
    description: str = ""
    seeds: int = 10
    horizon: int = 300
    root_seed: int = 0
    dtype: str = "float32"
    record_every: int = 1
    problem: ProblemConfig | None = None
    agent: AgentConfig = dataclasses.field(default_factory=AgentConfig)
    algorithms: tuple[AlgorithmEntry, ...] = ()
    paper_json: str = "{}"
    grid: tuple[tuple[str, tuple[float, ...]], ...] = ()
    relaxed: RelaxedConfig | None = None  # [relaxed]: settings of gsjax tune's relaxed mode

    @property
    def paper(self) -> dict:
        """The ``[paper]`` table as a fresh plain dict."""
        return json.loads(self.paper_json)

    @property
    def algorithm_names(self) -> tuple[str, ...]:
        """Entry names of :attr:`algorithms`, in order."""
        return tuple(entry.name for entry in self.algorithms)


# ---------------------------------------------------------------------------
# Primitive validators
# ---------------------------------------------------------------------------

_MISSING = object()

_TOP_KEYS = (
    "name", "description", "seeds", "horizon", "root_seed", "dtype",
    "record_every", "paper", "problem", "agent", "algorithms", "grid",
    "relaxed",
)
_BLOCK_KEYS = ("num_blocks", "block_dim", "block_dims")
_SCOPE_KEYS = ("scopes", "num_coords")
_GRAPH_KEYS = (
    "graph", "num_nodes", "edges", "grid_shape", "max_degree", "num_edges",
    "graph_seed",
)
_PROBLEM_KEYS = (
    ("structure",) + _BLOCK_KEYS + _GRAPH_KEYS + _SCOPE_KEYS
    + ("features", "rff_dim", "rff_lengthscale", "s0", "theta", "noise")
    + ("environment", "adult")
    + ("factor",)
)
_ADULT_KEYS = tuple(f.name for f in dataclasses.fields(AdultConfig))
_ENVIRONMENTS = ("linear", "adult", "factor")
_FACTOR_KEYS = tuple(f.name for f in dataclasses.fields(FactorConfig))
_MIXINGS = ("orthogonal", "scaled", "identity")
_GAP_ESTIMATORS = ("plain", "signed", "split")
_THETA_KEYS = ("distribution", "values", "scale", "seed", "per_seed")
_NOISE_KEYS = ("kind", "sigma")
_AGENT_KEYS = tuple(f.name for f in dataclasses.fields(AgentConfig))

_STRUCTURES = ("blocks", "graph", "scopes")
_GRAPH_KINDS = ("edges", "chain", "grid", "random", "complete")
_FEATURES = ("linear", "quadratic", "rff")
_DTYPES = ("float32", "float64")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def _check_keys(table: Mapping, path: str, allowed: Sequence[str]) -> None:
    for key in table:
        if key not in allowed:
            raise ConfigError(
                _join(path, str(key)),
                f"unknown key {str(key)!r}; allowed keys: {', '.join(allowed)}",
            )


def _table(value: Any, field: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(field, f"expected a table, got {_describe(value)}")
    return value


def _int(value: Any, field: str, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(field, f"expected an integer, got {_describe(value)}")
    if minimum is not None and value < minimum:
        raise ConfigError(field, f"must be an integer >= {minimum}, got {value}")
    return int(value)


def _float(
    value: Any,
    field: str,
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(field, f"expected a number, got {_describe(value)}")
    value = float(value)
    if not math.isfinite(value):
        raise ConfigError(field, f"must be a finite number, got {value}")
    lower = f"> {gt}" if gt is not None else (f">= {ge}" if ge is not None else None)
    upper = f"< {lt}" if lt is not None else (f"<= {le}" if le is not None else None)
    ok = (
        (gt is None or value > gt)
        and (ge is None or value >= ge)
        and (lt is None or value < lt)
        and (le is None or value <= le)
    )
    if not ok:
        bounds = " and ".join(b for b in (lower, upper) if b)
        raise ConfigError(field, f"must be {bounds}, got {value}")
    return value


def _bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(field, f"expected a boolean (true/false), got {_describe(value)}")
    return value


def _str(value: Any, field: str, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise ConfigError(field, f"expected a string, got {_describe(value)}")
    if nonempty and not value.strip():
        raise ConfigError(field, "must be a non-empty string")
    return value


def _choice(value: Any, field: str, choices: Sequence[str]) -> str:
    allowed = ", ".join(repr(c) for c in choices)
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(field, f"must be one of {allowed}; got {value!r}")
    return value


def _list(value: Any, field: str) -> list:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(field, f"expected a list, got {_describe(value)}")
    return list(value)


def _float_or_list(
    value: Any, field: str, length: int, length_desc: str, **bounds: float
) -> float | tuple[float, ...]:
    """A scalar float or a list of exactly ``length`` floats, all in bounds."""
    if isinstance(value, (list, tuple)):
        if len(value) != length:
            raise ConfigError(
                field,
                f"a list here must have {length_desc} = {length} entries, "
                f"got {len(value)}",
            )
        return tuple(
            _float(v, f"{field}[{i}]", **bounds) for i, v in enumerate(value)
        )
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(
            field, f"expected a number or a list of numbers, got {_describe(value)}"
        )
    return _float(value, field, **bounds)


def _required(table: Mapping, key: str, field: str, why: str = "") -> Any:
    if key not in table:
        raise ConfigError(field, f"required{(' ' + why) if why else ''} but missing")
    return table[key]


# ---------------------------------------------------------------------------
# Section parsers
# ---------------------------------------------------------------------------


def _parse_problem(raw: dict) -> tuple[ProblemConfig, int, int]:
    path = "problem"
    _check_keys(raw, path, _PROBLEM_KEYS)
    f = lambda key: _join(path, key)  # noqa: E731
    if raw.get("environment") == "factor":  # Section 5.3: sizes come from [problem.factor]
        return _parse_factor_problem(raw)
    if "factor" in raw:
        raise ConfigError(f("factor"), "only allowed when problem.environment = 'factor'")

    structure = _choice(_required(raw, "structure", f("structure")),
                        f("structure"), _STRUCTURES)
    for other_structure, keys in (("blocks", _BLOCK_KEYS), ("graph", _GRAPH_KEYS),
                                  ("scopes", _SCOPE_KEYS)):
        for key in keys:
            if key in raw and other_structure != structure:
                raise ConfigError(
                    f(key), f"only allowed when problem.structure = {other_structure!r}"
                )

    fields: dict[str, Any] = {"structure": structure}
    if structure == "blocks" and "block_dims" in raw:
        for key in ("num_blocks", "block_dim"):
            if key in raw:
                raise ConfigError(f(key), "not allowed with problem.block_dims (the blocks' "
                                          "sizes are given there)")
        dims = _list(raw["block_dims"], f("block_dims"))
        if not dims:
            raise ConfigError(f("block_dims"), "must list at least one block size")
        block_dims = tuple(_int(v, f"{f('block_dims')}[{i}]", minimum=1)
                           for i, v in enumerate(dims))
        fields["block_dims"] = block_dims
        k, n = len(block_dims), sum(block_dims)
    elif structure == "blocks":
        why = "for problem.structure = 'blocks'"
        num_blocks = _int(_required(raw, "num_blocks", f("num_blocks"), why),
                          f("num_blocks"), minimum=1)
        block_dim = _int(_required(raw, "block_dim", f("block_dim"), why),
                         f("block_dim"), minimum=1)
        fields.update(num_blocks=num_blocks, block_dim=block_dim)
        k, n = num_blocks, num_blocks * block_dim
    elif structure == "scopes":
        scopes, n = _parse_scopes(raw, f)
        fields.update(scopes=scopes, num_coords=n)
        k = len(scopes)
    else:
        graph = _choice(
            _required(raw, "graph", f("graph"), "for problem.structure = 'graph'"),
            f("graph"), _GRAPH_KINDS,
        )
        only = {"edges": "edges", "grid_shape": "grid",
                "max_degree": "random", "num_edges": "random"}
        for key, kind in only.items():
            if key in raw and graph != kind:
                raise ConfigError(
                    f(key), f"only allowed when problem.graph = {kind!r}, "
                    f"not {graph!r}",
                )
        why = f"for problem.graph = {graph!r}"
        fields["graph"] = graph
        if graph == "grid":
            shape = _list(_required(raw, "grid_shape", f("grid_shape"), why),
                          f("grid_shape"))
            if len(shape) != 2:
                raise ConfigError(
                    f("grid_shape"), f"must be [rows, cols], got {len(shape)} entries"
                )
            rows, cols = (_int(v, f"{f('grid_shape')}[{i}]", minimum=1)
                          for i, v in enumerate(shape))
            num_nodes = rows * cols
            if "num_nodes" in raw:
                given = _int(raw["num_nodes"], f("num_nodes"), minimum=1)
                if given != num_nodes:
                    raise ConfigError(
                        f("num_nodes"),
                        f"must be absent or equal rows*cols = {num_nodes} for "
                        f"problem.graph = 'grid', got {given}",
                    )
            fields["grid_shape"] = (rows, cols)
        else:
            num_nodes = _int(_required(raw, "num_nodes", f("num_nodes"), why),
                             f("num_nodes"), minimum=1)
        fields["num_nodes"] = num_nodes

        if graph == "edges":
            edges_raw = _list(_required(raw, "edges", f("edges"), why), f("edges"))
            edges: list[tuple[int, int]] = []
            seen: set[frozenset] = set()
            for idx, edge in enumerate(edges_raw):
                ef = f"{f('edges')}[{idx}]"
                if not isinstance(edge, (list, tuple)) or len(edge) != 2:
                    raise ConfigError(
                        ef, f"must be a pair [i, j] of node indices, got {edge!r}"
                    )
                i, j = (_int(v, ef) for v in edge)
                for node in (i, j):
                    if not 0 <= node < num_nodes:
                        raise ConfigError(
                            ef, f"node index {node} out of range [0, {num_nodes})"
                        )
                if i == j:
                    raise ConfigError(ef, f"self-loop [{i}, {j}] not allowed (i == j)")
                key = frozenset((i, j))
                if key in seen:
                    raise ConfigError(ef, f"duplicate edge [{i}, {j}]")
                seen.add(key)
                edges.append((i, j))
            fields["edges"] = tuple(edges)
        elif graph == "random":
            max_degree = _int(_required(raw, "max_degree", f("max_degree"), why),
                              f("max_degree"), minimum=1)
            num_edges = _int(_required(raw, "num_edges", f("num_edges"), why),
                             f("num_edges"), minimum=0)
            bound = min(num_nodes * max_degree // 2, num_nodes * (num_nodes - 1) // 2)
            if num_edges > bound:
                raise ConfigError(
                    f("num_edges"),
                    f"must be <= min(num_nodes*max_degree//2, "
                    f"num_nodes*(num_nodes-1)//2) = {bound}, got {num_edges}",
                )
            fields.update(max_degree=max_degree, num_edges=num_edges)
        fields["graph_seed"] = _int(raw.get("graph_seed", 0), f("graph_seed"),
                                    minimum=0)
        k = n = num_nodes

    fields["features"] = _choice(raw.get("features", "linear"), f("features"),
                                 _FEATURES)
    fields["rff_dim"] = _int(raw.get("rff_dim", 16), f("rff_dim"), minimum=1)
    fields["rff_lengthscale"] = _float(raw.get("rff_lengthscale", 0.5),
                                       f("rff_lengthscale"), gt=0.0)
    fields["s0"] = _float_or_list(raw.get("s0", 0.5), f("s0"), n,
                                  "n (number of coordinates)", ge=0.0, le=1.0)
    fields["theta"] = _parse_theta(_table(raw.get("theta", {}), f("theta")), k)
    fields["noise"] = _parse_noise(_table(raw.get("noise", {}), f("noise")), k, n)
    environment = _choice(raw.get("environment", "linear"), f("environment"), _ENVIRONMENTS)
    if environment == "adult":
        fields.update(environment=environment, adult=_parse_adult(raw, fields))
        if "features" not in raw:  # [1, tau, tau^2]: Example 1 with k = 1
            fields["features"] = "quadratic"
    elif "adult" in raw:
        raise ConfigError(f("adult"), "only allowed when problem.environment = 'adult'")
    return ProblemConfig(**fields), k, n


def _parse_scopes(raw: dict, f) -> tuple[tuple[tuple[int, ...], ...], int]:
    """``problem.scopes`` (lists of coordinate indices) and ``problem.num_coords``."""
    rows = _list(_required(raw, "scopes", f("scopes"), "for problem.structure = 'scopes'"),
                 f("scopes"))
    if not rows:
        raise ConfigError(f("scopes"), "must list at least one criterion's scope")
    scopes = []
    for i, row in enumerate(rows):
        rf = f"{f('scopes')}[{i}]"
        row = _list(row, rf)
        if not row:
            raise ConfigError(rf, "empty scope: every criterion reads at least one coordinate")
        idx = tuple(_int(v, f"{rf}[{j}]", minimum=0) for j, v in enumerate(row))
        if len(set(idx)) != len(idx):
            dup = next(v for v in idx if idx.count(v) > 1)
            raise ConfigError(rf, f"coordinate {dup} listed twice")
        scopes.append(idx)
    largest = max(max(r) for r in scopes)
    if "num_coords" in raw:
        n = _int(raw["num_coords"], f("num_coords"), minimum=1)
        if largest >= n:
            i = next(i for i, r in enumerate(scopes) if max(r) == largest)
            raise ConfigError(f"{f('scopes')}[{i}]", f"coordinate index {largest} out of range "
                                                     f"[0, {n}) (problem.num_coords = {n})")
    else:
        n = largest + 1
    return tuple(scopes), n


def _parse_adult(raw: dict, fields: Mapping) -> AdultConfig:
    """``[problem.adult]``, and the shape the Adult environment needs (one threshold)."""
    why = "problem.environment = 'adult' has one threshold tau in [0, 1]: use 1"
    if fields["structure"] != "blocks":
        raise ConfigError("problem.structure",
                          "must be 'blocks' (num_blocks = block_dim = 1) for "
                          "problem.environment = 'adult'")
    if "block_dims" in fields:
        raise ConfigError("problem.block_dims", f"{why} (num_blocks = block_dim = 1)")
    for key in ("num_blocks", "block_dim"):
        if fields[key] != 1:
            raise ConfigError(f"problem.{key}", f"{why}, got {fields[key]}")
    for key in ("theta", "noise"):
        if key in raw:
            raise ConfigError(
                f"problem.{key}",
                "not used by problem.environment = 'adult' (the loss comes from the data); "
                "remove it (set agent.oful_sigma for the OFUL radius)",
            )
    path = "problem.adult"
    table = _table(raw.get("adult", {}), path)
    _check_keys(table, path, _ADULT_KEYS)
    f = lambda key: _join(path, key)  # noqa: E731
    d = AdultConfig()
    estimator = _choice(table.get("gap_estimator", d.gap_estimator), f("gap_estimator"),
                        _GAP_ESTIMATORS)
    batch = _int(table.get("batch_size", d.batch_size), f("batch_size"),
                 minimum=2 if estimator == "split" else 1)
    raw_data = table.get("raw_data", None)
    if raw_data is not None:
        raw_data = _str(raw_data, f("raw_data"), nonempty=True)
        for name in ("adult.data", "adult.test"):
            if not os.path.isfile(os.path.join(raw_data, name)):
                raise ConfigError(f("raw_data"), f"{name} not found in {raw_data!r}")
    return AdultConfig(
        batch_size=batch,
        gap_estimator=estimator,
        classifier_seed=_int(table.get("classifier_seed", d.classifier_seed),
                             f("classifier_seed"), minimum=0),
        classifier_steps=_int(table.get("classifier_steps", d.classifier_steps),
                              f("classifier_steps"), minimum=1),
        classifier_l2=_float(table.get("classifier_l2", d.classifier_l2), f("classifier_l2"),
                             ge=0.0),
        raw_data=raw_data,
    )


def _parse_factor_problem(raw: dict) -> tuple[ProblemConfig, int, int]:
    """``environment = 'factor'``: a factor graph, its sizes from ``[problem.factor]``.

    ``structure`` may be omitted (it is ``'factor'``); the block and graph keys do not apply.
    ``[problem.theta]`` draws the factor parameters ``w*_C``: ``'explicit'`` values have one
    row per FACTOR, of ``d_C`` entries (``|C|`` linear, ``2|C|+1`` quadratic, ``rff_dim`` rff).
    """
    f = lambda key: _join("problem", key)  # noqa: E731
    if raw.get("structure", "factor") != "factor":
        raise ConfigError(f("structure"), "must be 'factor' (or omitted) for "
                          "problem.environment = 'factor'")
    for key in _BLOCK_KEYS + _GRAPH_KEYS + ("adult",):
        if key in raw:
            raise ConfigError(f(key), "not used by problem.environment = 'factor' (the sizes "
                              "come from [problem.factor])")
    path = "problem.factor"
    table = _table(_required(raw, "factor", path, "for problem.environment = 'factor'"), path)
    _check_keys(table, path, _FACTOR_KEYS)
    g = lambda key: _join(path, key)  # noqa: E731
    n = _int(_required(table, "num_coords", g("num_coords")), g("num_coords"), minimum=1)
    k = _int(_required(table, "num_nodes", g("num_nodes")), g("num_nodes"), minimum=1)
    layout = _choice(table.get("layout", "clique"), g("layout"), ("clique", "explicit"))
    factors = None
    if layout == "explicit":
        rows = _list(_required(table, "factors", g("factors"), "for layout = 'explicit'"),
                     g("factors"))
        if not rows:
            raise ConfigError(g("factors"), "must list at least one factor")
        parsed = []
        for c, row in enumerate(rows):
            rf = f"{g('factors')}[{c}]"
            row = _table(row, rf)
            _check_keys(row, rf, ("coords", "nodes"))
            pair = []
            for key, size in (("coords", n), ("nodes", k)):
                vals = _list(_required(row, key, f"{rf}.{key}"), f"{rf}.{key}")
                if not vals:
                    raise ConfigError(f"{rf}.{key}", "must be a non-empty list of indices")
                idx = tuple(_int(v, f"{rf}.{key}[{j}]") for j, v in enumerate(vals))
                for j, v in enumerate(idx):
                    if not 0 <= v < size:
                        raise ConfigError(f"{rf}.{key}[{j}]", f"index {v} out of range [0, {size})")
                if len(set(idx)) != len(idx):
                    raise ConfigError(f"{rf}.{key}", f"duplicate index in {list(idx)}")
                pair.append(idx)
            parsed.append(tuple(pair))
        covered = {i for _, nodes in parsed for i in nodes}
        missing = [i for i in range(k) if i not in covered]
        if missing:
            raise ConfigError(g("factors"), f"node {missing[0]} belongs to no factor; every node "
                              "needs at least one")
        factors = tuple(parsed)
    elif "factors" in table:
        raise ConfigError(g("factors"), "only allowed when problem.factor.layout = 'explicit'")
    fc = FactorConfig(
        num_coords=n, num_nodes=k, layout=layout, factors=factors,
        mixing=_choice(table.get("mixing", "orthogonal"), g("mixing"), _MIXINGS),
        mixing_seed=_int(table.get("mixing_seed", 0), g("mixing_seed"), minimum=0),
    )
    features = _choice(raw.get("features", "linear"), f("features"), _FEATURES)
    rff_dim = _int(raw.get("rff_dim", 16), f("rff_dim"), minimum=1)
    scopes = [tuple(range(n))] if factors is None else [c for c, _ in factors]
    theta = _parse_theta(_table(raw.get("theta", {}), f("theta")), len(scopes))
    if theta.values is not None:
        for c, (row, coords) in enumerate(zip(theta.values, scopes)):
            m = len(coords)
            d_c = m if features == "linear" else (2 * m + 1 if features == "quadratic" else rff_dim)
            if len(row) != d_c:
                raise ConfigError(f"problem.theta.values[{c}]",
                                  f"factor {c} has {d_c} {features} features; got {len(row)} values")
    problem = ProblemConfig(
        structure="factor",
        features=features,
        rff_dim=rff_dim,
        rff_lengthscale=_float(raw.get("rff_lengthscale", 0.5), f("rff_lengthscale"), gt=0.0),
        s0=_float_or_list(raw.get("s0", 0.5), f("s0"), n, "n (number of coordinates)",
                          ge=0.0, le=1.0),
        theta=theta,
        noise=_parse_noise(_table(raw.get("noise", {}), f("noise")), k, n),
        environment="factor",
        factor=fc,
    )
    return problem, k, n


def _parse_theta(raw: dict, k: int) -> ThetaConfig:
    path = "problem.theta"
    _check_keys(raw, path, _THETA_KEYS)
    f = lambda key: _join(path, key)  # noqa: E731
    dist = _choice(raw.get("distribution", "normal"), f("distribution"),
                   ("explicit", "normal", "uniform", "signal"))
    values = None
    if dist == "explicit":
        rows = _list(
            _required(raw, "values", f("values"),
                      "when problem.theta.distribution = 'explicit'"),
            f("values"),
        )
        if len(rows) != k:
            raise ConfigError(
                f("values"),
                f"expected k = {k} rows (one per criterion), got {len(rows)}",
            )
        parsed = []
        for i, row in enumerate(rows):
            rf = f"{f('values')}[{i}]"
            row = _list(row, rf)
            if not row:
                raise ConfigError(rf, "row must be a non-empty list of numbers")
            parsed.append(tuple(_float(v, f"{rf}[{j}]") for j, v in enumerate(row)))
        values = tuple(parsed)
    elif "values" in raw:
        raise ConfigError(
            f("values"),
            f"only allowed when problem.theta.distribution = 'explicit', not {dist!r}",
        )
    return ThetaConfig(
        distribution=dist,
        values=values,
        scale=_float(raw.get("scale", 1.0), f("scale"), gt=0.0),
        seed=_int(raw.get("seed", 0), f("seed"), minimum=0),
        per_seed=_bool(raw.get("per_seed", False), f("per_seed")),
    )


def _parse_noise(raw: dict, k: int, n: int) -> NoiseConfig:
    path = "problem.noise"
    _check_keys(raw, path, _NOISE_KEYS)
    kind = _choice(raw.get("kind", "independent"), _join(path, "kind"),
                   ("independent", "correlated"))
    length, desc = ((k, f"k (criteria) for kind {kind!r}") if kind == "independent"
                    else (n, f"n (coordinates) for kind {kind!r}"))
    sigma = _float_or_list(raw.get("sigma", 0.5), _join(path, "sigma"), length,
                           desc, ge=0.0)
    return NoiseConfig(kind=kind, sigma=sigma)


def _parse_agent(values: Mapping, fields: Mapping[str, str], k: int) -> AgentConfig:
    """Validate merged agent ``values``; ``fields[key]`` is each key's path."""
    d = AgentConfig()

    def get(key: str) -> tuple[Any, str]:
        return values.get(key, getattr(d, key)), fields.get(key, f"agent.{key}")

    out: dict[str, Any] = {}
    v, fld = get("lambda_reg")
    out["lambda_reg"] = _float_or_list(v, fld, k, "k (criteria)", gt=0.0)
    v, fld = get("beta")
    out["beta"] = _float(v, fld, ge=0.0)
    v, fld = get("beta_mode")
    out["beta_mode"] = _choice(v, fld, ("constant", "oful"))
    v, fld = get("oful_delta")
    out["oful_delta"] = _float(v, fld, gt=0.0, lt=1.0)
    v, fld = get("oful_S")
    out["oful_S"] = _float(v, fld, gt=0.0)
    v, fld = get("oful_sigma")
    out["oful_sigma"] = None if v is None else _float(v, fld, ge=0.0)
    v, fld = get("move_cost")
    out["move_cost"] = _float(v, fld, ge=0.0)
    v, fld = get("solver")
    out["solver"] = _choice(v, fld, ("vertex", "pgd"))
    v, fld = get("pgd_steps")
    out["pgd_steps"] = _int(v, fld, minimum=1)
    v, fld = get("pgd_lr")
    out["pgd_lr"] = _float(v, fld, gt=0.0)
    v, fld = get("pgd_starts")
    out["pgd_starts"] = _int(v, fld, minimum=1)
    v, fld = get("pgd_optimizer")
    out["pgd_optimizer"] = _choice(v, fld, ("sgd", "adam"))
    v, fld = get("pgd_include_current")
    out["pgd_include_current"] = _bool(v, fld)
    v, fld = get("reference")
    out["reference"] = _choice(v, fld, ("global", "own"))
    v, fld = get("trigger_ratio")
    out["trigger_ratio"] = _float(v, fld, gt=1.0)
    v, fld = get("refresh_every")
    out["refresh_every"] = _int(v, fld, minimum=1)
    v, fld = get("warmup")
    out["warmup"] = None if v is None else _int(v, fld, minimum=0)
    v, fld = get("signal_gamma")
    out["signal_gamma"] = None if v is None else _float(v, fld, ge=0.0)
    v, fld = get("refined")
    out["refined"] = None if v is None else _choice(v, fld, ("lazy", "async_lazy"))
    return AgentConfig(**out)


_ADAPTIVE_KEYS = ("warmup", "signal_gamma", "refined")


def _check_adaptive(ac: AgentConfig, algorithm: str, path: str, fields: Mapping[str, str],
                    problem: ProblemConfig, n: int) -> None:
    """The options of ``'adaptive_lazy'`` (Section 5.2): given there, and only there."""
    if algorithm != "adaptive_lazy":
        for key in _ADAPTIVE_KEYS:
            if getattr(ac, key) is not None:
                raise ConfigError(fields[key], "only allowed for algorithm 'adaptive_lazy'")
        return
    if ac.warmup is None:
        raise ConfigError(f"{path}.warmup", "required for algorithm 'adaptive_lazy' (rounds "
                          "of exploration before the sparsity test; 0: none)")
    if ac.warmup > 0 and ac.signal_gamma is None:
        raise ConfigError(f"{path}.signal_gamma", "required for algorithm 'adaptive_lazy' "
                          "with warmup > 0 (the sparsity test keeps |theta_hat| > gamma/2)")
    if problem.environment != "linear" or problem.features not in ("linear", "quadratic"):
        raise ConfigError(f"{path}.algorithm", "'adaptive_lazy' needs the linear environment "
                          "with 'linear' or 'quadratic' features (a coefficient per coordinate)"
                          f"; got environment {problem.environment!r}, features "
                          f"{problem.features!r}")
    if ac.solver == "vertex" and n > 16:
        raise ConfigError(fields["solver"], "vertex enumeration on the complete super-graph "
                          f"needs n <= 16 coordinates (here n = {n}); use 'pgd'")


def _paper_default(obj: Any) -> Any:
    if isinstance(obj, (datetime.datetime, datetime.date, datetime.time)):
        return obj.isoformat()
    raise TypeError(f"{type(obj).__name__} is not JSON-serialisable")


def _parse_paper(value: Any) -> str:
    table = _table(value, "paper")
    try:
        return json.dumps(table, sort_keys=True, default=_paper_default)
    except (TypeError, ValueError) as exc:
        raise ConfigError("paper", f"must contain only JSON-serialisable values ({exc})")


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def apply_overrides(raw: dict, overrides: Sequence[str]) -> dict:
    """Apply ``"dotted.key=value"`` overrides to a raw config dict.

    The value is parsed as a TOML value (``tomllib.loads("v = " + value)``);
    if that fails it is used verbatim as a string, so ``agent.solver=pgd``
    works without quotes. Missing intermediate tables are created.

    Args:
        raw: Raw (unvalidated) config dict; not modified.
        overrides: Override strings.

    Returns:
        A new dict with the overrides applied.

    Raises:
        ConfigError: With ``field='--set'`` for a malformed override or one
            that descends into a non-table value.
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
                raise ConfigError(
                    "--set", f"cannot set {key!r}: {prefix!r} is not a table"
                )
            node = child
        node[parts[-1]] = value
    return result


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
    if not isinstance(raw, dict):
        raise ConfigError("<root>", f"config must be a table, got {_describe(raw)}")
    if overrides:
        raw = apply_overrides(raw, overrides)
    _check_keys(raw, "", _TOP_KEYS)

    name = _str(_required(raw, "name", "name"), "name", nonempty=True)
    description = _str(raw.get("description", ""), "description")
    seeds = _int(raw.get("seeds", 10), "seeds", minimum=1)
    horizon = _int(raw.get("horizon", 300), "horizon", minimum=1)
    root_seed = _int(raw.get("root_seed", 0), "root_seed", minimum=0)
    dtype = _choice(raw.get("dtype", "float32"), "dtype", _DTYPES)
    if "record_every" in raw:
        record_every = _int(raw["record_every"], "record_every", minimum=1)
    else:
        record_every = default_record_every(horizon)
    paper_json = _parse_paper(raw.get("paper", {}))

    if "problem" not in raw:
        raise ConfigError("problem", "required table [problem] is missing")
    problem, k, _n = _parse_problem(_table(raw["problem"], "problem"))

    agent_raw = _table(raw.get("agent", {}), "agent")
    _check_keys(agent_raw, "agent", _AGENT_KEYS)
    shared_fields = {key: f"agent.{key}" for key in _AGENT_KEYS}
    agent = _parse_agent(agent_raw, shared_fields, k)
    for key in _ADAPTIVE_KEYS:
        if key in agent_raw:
            raise ConfigError(f"agent.{key}", "set it in the [algorithms.NAME] table of an "
                              "'adaptive_lazy' entry, not in [agent]")

    if "algorithms" not in raw:
        raise ConfigError(
            "algorithms", "at least one [algorithms.NAME] table is required"
        )
    algos_raw = _table(raw["algorithms"], "algorithms")
    if not algos_raw:
        raise ConfigError(
            "algorithms", "at least one [algorithms.NAME] table is required"
        )
    known = ", ".join(repr(a) for a in sorted(ALGORITHM_NAMES))
    entries = []
    for entry_name, entry_raw in algos_raw.items():
        path = f"algorithms.{entry_name}"
        if not isinstance(entry_name, str) or not _NAME_RE.fullmatch(entry_name):
            raise ConfigError(
                path, f"entry name {entry_name!r} must match [a-z][a-z0-9_]*"
            )
        entry_raw = _table(entry_raw, path)
        _check_keys(entry_raw, path, ("algorithm",) + _AGENT_KEYS)
        if "algorithm" in entry_raw:
            algorithm = entry_raw["algorithm"]
            if not isinstance(algorithm, str) or algorithm not in ALGORITHM_NAMES:
                raise ConfigError(
                    f"{path}.algorithm",
                    f"unknown algorithm {algorithm!r}; must be one of {known}",
                )
        else:
            algorithm = entry_name
            if algorithm not in ALGORITHM_NAMES:
                raise ConfigError(
                    f"{path}.algorithm",
                    f"missing, and the entry name {entry_name!r} is not a known "
                    f"algorithm; set it to one of {known}",
                )
        overrides_ = {key: v for key, v in entry_raw.items() if key != "algorithm"}
        merged = {**agent_raw, **overrides_}
        fields = {
            key: (f"{path}.{key}" if key in overrides_ else f"agent.{key}")
            for key in _AGENT_KEYS
        }
        entry_agent = _parse_agent(merged, fields, k)
        if entry_agent.solver == "vertex" and problem.features != "linear":
            raise ConfigError(
                fields["solver"],
                "solver 'vertex' (vertex enumeration) is exact only for linear "
                f"features, but problem.features = {problem.features!r}; "
                "use 'pgd'",
            )
        _check_adaptive(entry_agent, algorithm, path, fields, problem, _n)
        entries.append(AlgorithmEntry(entry_name, algorithm, entry_agent))

    grid = _parse_grid(raw.get("grid", {}))
    relaxed = _parse_relaxed(raw["relaxed"], horizon) if "relaxed" in raw else None

    return ExperimentConfig(
        name=name,
        description=description,
        seeds=seeds,
        horizon=horizon,
        root_seed=root_seed,
        dtype=dtype,
        record_every=record_every,
        problem=problem,
        agent=agent,
        algorithms=tuple(entries),
        paper_json=paper_json,
        grid=grid,
        relaxed=relaxed,
    )


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


def _parse_relaxed(value: Any, horizon: int) -> RelaxedConfig:
    """Validate the ``[relaxed]`` table (see :class:`RelaxedConfig`)."""
    table = _table(value, "relaxed")
    _check_keys(table, "relaxed", tuple(f.name for f in dataclasses.fields(RelaxedConfig)))
    d = RelaxedConfig()
    ts = table.get("solve_temperature")
    block = table.get("block")
    if block is not None:
        block = _int(block, "relaxed.block", minimum=1)
        if horizon % block:
            raise ConfigError("relaxed.block", f"must divide horizon ({horizon}); got {block}")
    return RelaxedConfig(
        temperature=_float(table.get("temperature", d.temperature), "relaxed.temperature",
                           gt=0.0),
        solve_temperature=None if ts is None else _float(ts, "relaxed.solve_temperature",
                                                         gt=0.0),
        tie_break=_float(table.get("tie_break", d.tie_break), "relaxed.tie_break", ge=0.0),
        block=block,
        loss_bandwidth=_float(table.get("loss_bandwidth", d.loss_bandwidth),
                              "relaxed.loss_bandwidth", gt=0.0),
    )


def _parse_grid(value: Any) -> tuple:
    table = _table(value, "grid")
    _check_keys(table, "grid", tuple(GRID_FIELDS))
    axes = []
    size = 1
    for key, vals in table.items():
        field = f"grid.{key}"
        vals = _list(vals, field)
        if not vals:
            raise ConfigError(field, "must list at least one value")
        parsed = tuple(
            _float(v, f"{field}[{i}]", **GRID_FIELDS[key]) for i, v in enumerate(vals)
        )
        if len(set(parsed)) != len(parsed):
            raise ConfigError(field, "values must be distinct")
        axes.append((key, parsed))
        size *= len(parsed)
    if size > MAX_GRID_POINTS:
        raise ConfigError("grid", f"{size} grid points; at most {MAX_GRID_POINTS} allowed")
    return tuple(axes)


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


def load_config(
    path: str | os.PathLike, overrides: Sequence[str] = ()
) -> ExperimentConfig:
    """Read, override and validate a TOML experiment config file.

    Args:
        path: Path of the TOML file, or the name of a built-in config (``"section7_2"``; see
            :func:`find_config`).
        overrides: Optional ``"dotted.key=value"`` overrides.

    Returns:
        The validated :class:`ExperimentConfig`.

    Raises:
        ConfigError: ``field='<file>'`` if the file cannot be read or is not
            valid TOML; otherwise as :func:`parse_config`.
    """
    if not Path(path).exists():
        path = find_config(path)
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError("<file>", f"cannot read config file {os.fspath(path)!r}: {reason}")
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("<file>", f"invalid TOML in {os.fspath(path)!r}: {exc}")
    return parse_config(raw, overrides)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _dataclass_dict(obj: Any, skip: Sequence[str] = ()) -> dict:
    """Shallow field dict, tuples to lists, ``None`` fields omitted."""
    out = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.name in skip or value is None:
            continue
        out[f.name] = _plain(value)
    return out


def config_to_dict(cfg: ExperimentConfig) -> dict:
    """Fully resolved, JSON-serialisable dict form of ``cfg``.

    Defaults are filled in, ``None`` fields are omitted, every algorithm
    entry lists its complete merged agent settings, and
    ``parse_config(config_to_dict(cfg)) == cfg`` holds.

    Args:
        cfg: A validated config.

    Returns:
        A new nested dict of str/int/float/bool/list/dict values.
    """
    problem = _dataclass_dict(cfg.problem, skip=("theta", "noise", "environment", "adult",
                                                 "factor"))
    if cfg.problem.environment == "linear":  # (omitted: hashes of linear configs unchanged)
        problem["theta"] = _dataclass_dict(cfg.problem.theta)
        problem["noise"] = _dataclass_dict(cfg.problem.noise)
    elif cfg.problem.environment == "factor":  # Section 5.3
        problem["environment"] = "factor"
        problem["theta"] = _dataclass_dict(cfg.problem.theta)
        problem["noise"] = _dataclass_dict(cfg.problem.noise)
        fac = _dataclass_dict(cfg.problem.factor, skip=("factors",))
        if cfg.problem.factor.factors is not None:
            fac["factors"] = [{"coords": list(c), "nodes": list(v)}
                              for c, v in cfg.problem.factor.factors]
        problem["factor"] = fac
    else:  # a data environment has no theta / noise tables
        problem["environment"] = cfg.problem.environment
        problem["adult"] = _dataclass_dict(cfg.problem.adult)
    return {
        "name": cfg.name,
        "description": cfg.description,
        "seeds": cfg.seeds,
        "horizon": cfg.horizon,
        "root_seed": cfg.root_seed,
        "dtype": cfg.dtype,
        "record_every": cfg.record_every,
        "problem": problem,
        "agent": _dataclass_dict(cfg.agent),
        "algorithms": {
            e.name: {"algorithm": e.algorithm, **_dataclass_dict(e.agent)}
            for e in cfg.algorithms
        },
        "paper": cfg.paper,
        **({"grid": {key: list(vals) for key, vals in cfg.grid}} if cfg.grid else {}),
        **({"relaxed": _dataclass_dict(cfg.relaxed)} if cfg.relaxed is not None else {}),
    }


def config_hash(cfg: ExperimentConfig) -> str:
    """SHA-256 hex digest of the canonical JSON of :func:`config_to_dict`.

    Keys are sorted, except that the algorithm entries are hashed as an
    ordered list of ``[name, entry]`` pairs so that, like ``==``, the hash
    depends on their order.

    Args:
        cfg: A validated config.

    Returns:
        64-character lowercase hex string.
    """
    d = config_to_dict(cfg)
    d["algorithms"] = [[name, entry] for name, entry in d["algorithms"].items()]
    text = json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def num_criteria(cfg: ExperimentConfig | ProblemConfig) -> int:
    """Number of criteria k (``num_blocks`` for blocks, ``num_nodes`` for graphs).

    Args:
        cfg: An :class:`ExperimentConfig` or its :class:`ProblemConfig`.
    """
    p = cfg.problem if isinstance(cfg, ExperimentConfig) else cfg
    if p.environment == "factor":
        return p.factor.num_nodes
    if p.structure == "scopes":
        return len(p.scopes)
    if p.block_dims is not None:
        return len(p.block_dims)
    return p.num_blocks if p.structure == "blocks" else p.num_nodes


def num_coords(cfg: ExperimentConfig | ProblemConfig) -> int:
    """Number of coordinates n (``num_blocks*block_dim`` or ``num_nodes``).

    Args:
        cfg: An :class:`ExperimentConfig` or its :class:`ProblemConfig`.
    """
    p = cfg.problem if isinstance(cfg, ExperimentConfig) else cfg
    if p.environment == "factor":
        return p.factor.num_coords
    if p.structure == "scopes":
        return p.num_coords
    if p.block_dims is not None:
        return sum(p.block_dims)
    if p.structure == "blocks":
        return p.num_blocks * p.block_dim
    return p.num_nodes
