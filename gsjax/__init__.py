"""gsjax: graph-structured, continuous-state linear bandits with movement costs, in JAX.

The public surface:

* problems -- :mod:`gsjax.graphs` (scopes and graph generators, your own scopes with
  :func:`scopes_from_rows`), :mod:`gsjax.problem` (feature maps, feedback, ``s*``, the
  :class:`Environment` interface);
* algorithms -- :data:`gsjax.algorithms.REGISTRY` of pure ``init/act/update`` triples;
* running -- :func:`gsjax.runner.run` (one seed, one ``lax.scan``), :func:`gsjax.runner.sweep`
  (``vmap`` over seeds);
* experiments -- :func:`gsjax.config.load_config`, :func:`gsjax.experiment.run_experiment`,
  the ``gsjax`` command line;
* live systems -- :class:`gsjax.Tuner` (ask/tell, state on disk; ``gsjax tuner``).
"""

import importlib
import os
from typing import TYPE_CHECKING


def _xla_knows(flag: str) -> bool:
    """Whether the installed jaxlib's XLA has the option ``flag`` (its name is in jaxlib's
    largest library; XLA aborts the process on an unknown flag in ``XLA_FLAGS``)."""
    import mmap
    from importlib.util import find_spec

    spec = find_spec("jaxlib")
    if spec is None or not spec.origin:
        return False
    folder = os.path.dirname(spec.origin)
    libs = [os.path.join(folder, f) for f in os.listdir(folder)
            if f.endswith((".so", ".dylib", ".pyd"))]
    if not libs:
        return False
    with open(max(libs, key=os.path.getsize), "rb") as f, \
            mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(flag.encode()) >= 0


# XLA:CPU's YNNPACK fusions compute float32 rows past 4096 wrongly (tests/test_dp.py) and run
# gsjax's small batched contractions slowly: off for a process that imports gsjax before its
# first JAX computation (the sweeps also pass it as a compile option, gsjax.xla), unless
# XLA_FLAGS names it already or this XLA does not know it.
_YNN = "xla_cpu_experimental_ynn_fusion_type"
if _YNN not in os.environ.get("XLA_FLAGS", "") and _xla_knows(_YNN):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --{_YNN}=".strip()

if TYPE_CHECKING:  # loaded on first use, by __getattr__ below
    from gsjax import algorithms, graphs, lcb, linalg, problem, runner
    from gsjax.algorithms import REGISTRY, AgentParams, AgentSpec, BanditAlgorithm
    from gsjax.config import ConfigError, ExperimentConfig, load_config, parse_config
    from gsjax.graphs import Scopes, block_scopes, check_scopes, graph_scopes, scopes_from_rows
    from gsjax.problem import (Environment, Feedback, Problem, Structure, make_problem,
                               make_structure)
    from gsjax.runner import run, seed_keys, sweep
    from gsjax.tuner import Tuner, TunerError

__version__ = "0.1.0"

__all__ = [
    "algorithms", "graphs", "lcb", "linalg", "problem", "runner",
    "REGISTRY", "AgentParams", "AgentSpec", "BanditAlgorithm",
    "ConfigError", "ExperimentConfig", "load_config", "parse_config",
    "Scopes", "block_scopes", "graph_scopes", "scopes_from_rows", "check_scopes",
    "Environment", "Feedback", "Problem", "Structure", "make_problem", "make_structure",
    "run", "seed_keys", "sweep",
    "Tuner", "TunerError",
]

# The module each public name comes from. They are imported on first use (PEP 562) so that
# importing the package, as `gsjax --help` does, does not import JAX.
_SOURCE = {
    **{m: f"gsjax.{m}" for m in ("algorithms", "graphs", "lcb", "linalg", "problem", "runner")},
    **dict.fromkeys(["REGISTRY", "AgentParams", "AgentSpec", "BanditAlgorithm"],
                    "gsjax.algorithms"),
    **dict.fromkeys(["ConfigError", "ExperimentConfig", "load_config", "parse_config"],
                    "gsjax.config"),
    **dict.fromkeys(["Scopes", "block_scopes", "graph_scopes", "scopes_from_rows",
                     "check_scopes"], "gsjax.graphs"),
    **dict.fromkeys(["Environment", "Feedback", "Problem", "Structure", "make_problem",
                     "make_structure"], "gsjax.problem"),
    **dict.fromkeys(["run", "seed_keys", "sweep"], "gsjax.runner"),
    **dict.fromkeys(["Tuner", "TunerError"], "gsjax.tuner"),
}


def __getattr__(name: str):
    if name not in _SOURCE:
        raise AttributeError(f"module 'gsjax' has no attribute {name!r}")
    module = importlib.import_module(_SOURCE[name])
    value = module if module.__name__ == f"gsjax.{name}" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
