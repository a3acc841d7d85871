r"""Section 5.1 at scale with the exact LCB solver (issue 17): waste of global lazy updates.

Per graph family (chain, ring, tree of degree <= 3, 4 x k/4 grid) and size ``k``, the runs of
the config :func:`family_config` writes (linear features, theta* ~ N(0, I) per seed, noise
N(0, 0.5^2), beta = 0.5, stiffness log-uniform in [0.01, 2], as ``configs/large_graphs.toml``),
all with the unrolled ridge refresh (``refresh_method = "unrolled"``: 2.5x a round of a ring of
10^4, ``python benchmarks/refresh.py``):

* ``dp_FAMILY_K_{lazy,lazy_own,async_lazy}``: global lazy (reference "global" and "own") and
  async lazy, one run each, with the exact DP solver, ``--seeds`` x ``--horizon`` rounds, all
  with ``dp_exact_ties = false`` (the level plan on chains, rings and trees; on grids, whose
  levels do not shrink, the sequential plan with the criteria tables computed seed-last);
* ``dp_FAMILY_K_linucb``: LinUCB alone at ``--linucb-horizon`` (it solves every round);
* ``dp_FAMILY_K_pgd`` (``k <= --pgd-max-k``): the first run with PGD in place of the DP (the
  settings of ``configs/large_graphs.toml``), reported as pgd minus dp per algorithm.

Each run is written to ``OUT/configs/NAME.toml`` and run into ``OUT/NAME`` by
:func:`gsjax.experiment.run_config`: an interrupted run resumes from its checkpoint, a finished
one (``summary.json``) is read, and so is a run in ``--keep``'s file of finished runs (same
config hash; each run that finishes is added to it). ``record_every`` is the largest divisor of
``--horizon`` at most ``horizon // 40`` (250 at T = 10^4). The result:
``OUT/dp_scale.{json,md,png}``.

    python -m gsjax.paper.dp_scale --out runs/dp_scale --families chain ring tree grid \
        --k 10 100 1000 10000 --seeds 100 --horizon 10000 --linucb-horizon 1000 --pgd-max-k 1000

(with the default ``--k``, the grid's smallest size is 12: a 4 x k/4 grid needs 4 | k).
"""

from __future__ import annotations

import argparse
import math
import re
import shlex
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np

from gsjax import checkpoint, graphs
from gsjax.config import (ConfigError, config_hash, dict_hash, find_config, load_config,
                          parse_config)
from gsjax.experiment import run_config
from gsjax.paper._common import pm, ratio, script_section
from gsjax.paper.large_graphs import stiffness
from gsjax.plotting import _plt, _save
from gsjax.results import mean_stderr, read_json, read_npz, write_json, write_text
from gsjax.runner import NonFiniteFeedback

__all__ = ["FAMILIES", "GRAPHS", "FAMILY_ABOUT", "tree_edges", "family_config", "check_sizes",
           "default_sizes", "scale_configs", "seed_part_config", "NotKept", "run_family",
           "run_all", "table", "plot", "report_section", "main"]

FAMILIES = ("chain", "ring", "tree", "grid")
DEFAULT_K = (10, 100, 1000, 10000)
#: The lazy and async entries of the scale runs (LinUCB runs apart, at its own horizon).
LAZY = ("lazy", "lazy_own", "async_lazy")
# Every family runs without the vertex enumerator's tie rule (``dp_exact_ties = false``): the
# level plan on chains, rings and trees (a tree 5.5x faster at 10^4 nodes than the sequential
# plan, ``python benchmarks/dp.py --levels 10000 --graphs ring chain tree --seeds 100``); on the
# grid, whose levels do not shrink, the sequential plan with its criteria tables multiplied out
# seed-last (1.85x the exact-ties plan at 10^4 nodes, ``python benchmarks/dp.py --levels 1000
# 10000 --graphs grid --seeds 100``).


def tree_edges(n: int, max_degree: int, seed: int) -> list[tuple[int, int]]:
    """A random tree of degree <= ``max_degree``: node ``v`` joins a uniform earlier node with
    spare degree (NumPy ``default_rng(seed)``), then every node ``v`` is renumbered ``n-1-v``,
    so the root is ``n - 1`` and a parent comes after its children: width 3 under the DP's
    tie-rule order, where numbered from the root it is over 19 at ``n = 100``."""
    rng = np.random.default_rng(seed)
    deg, edges = [0] * n, []
    spare = [0]  # the earlier nodes with spare degree, ascending (what the draw indexes)
    for v in range(1, n):
        u = spare[int(rng.integers(len(spare)))]  # the draw choice(spare) makes
        deg[u], deg[v] = deg[u] + 1, deg[v] + 1
        if deg[u] >= max_degree:
            spare.remove(u)
        if deg[v] < max_degree:
            spare.append(v)
        edges.append((n - 1 - v, n - 1 - u))
    return sorted(edges)


GRAPHS = {
    "chain": graphs.chain_edges,
    "ring": lambda n: graphs.chain_edges(n) + [(n - 1, 0)],
    "tree": lambda n: tree_edges(n, 3, 0),
    "grid": lambda n: graphs.grid_edges(n // 4, 4),
    "random": lambda n: graphs.random_bounded_degree_edges(n, 3, n, 0),
}

FAMILY_ABOUT = {
    "chain": "a chain (path) of k nodes, elimination width 2",
    "ring": "a ring (cycle) of k nodes, width 4",
    "tree": "a random tree of degree <= 3 (benchmarks/dp.py tree_edges(k, 3, 0): every parent "
            "numbered after its children), width 3",
    "grid": "a 4 x k/4 grid numbered along its short side (rows of 4), width 8",
}

_TABLES = {"linucb": "[algorithms.linucb]\n", "lazy": "[algorithms.lazy]\n",
           "lazy_own": '[algorithms.lazy_own]\nalgorithm = "lazy"\nreference = "own"\n',
           "async_lazy": "[algorithms.async_lazy]\n"}


def _pgd_lines() -> str:
    """The ``[agent]`` solver lines of ``configs/large_graphs.toml``'s PGD, every setting
    written out (read from the config, so the two stay the same)."""
    ac = load_config(find_config("large_graphs")).agent
    return (f'solver = "pgd"\npgd_starts = {ac.pgd_starts}\npgd_steps = {ac.pgd_steps}\n'
            f"pgd_lr = {ac.pgd_lr!r}\npgd_optimizer = \"{ac.pgd_optimizer}\"\n"
            f"pgd_include_current = {str(ac.pgd_include_current).lower()}\n")


def family_config(family: str, k: int, *, name: str | None = None, seeds: int = 20,
                  horizon: int = 1000, record_every: int | None = None,
                  algorithms=("linucb", "lazy", "lazy_own", "async_lazy"),
                  exact_ties: bool = True, solver: str = "dp",
                  refresh_method: str = "cholesky") -> str:
    """The TOML text of ``configs/dp_FAMILY.toml`` at ``k`` nodes (see :data:`FAMILY_ABOUT`):
    Section 5.1 as ``configs/large_graphs.toml`` has it (linear features, theta* ~ N(0, I) per
    seed, noise N(0, 0.5^2), beta = 0.5, stiffness log-uniform in [0.01, 2], seed 0) with the
    exact DP solver, LinUCB, lazy under both reference readings and async.

    ``name``: default ``dp_FAMILY``; ``record_every``: default ``max(1, horizon // 20)``;
    ``algorithms``: the entries, in this order, of ``linucb``, ``lazy``, ``lazy_own`` (lazy,
    reference "own") and ``async_lazy``; ``exact_ties = False``: ``dp_exact_ties = false``
    (the level plan where its levels shrink); ``solver = "pgd"``: large_graphs.toml's PGD
    instead of the DP, each solve's residual its LCB above the DP's exact minimum
    (``pgd_gap = true``), the data Gram matrices summed with Kahan compensation
    (``gram_summation = "compensated"``: PGD's fractional states);
    ``refresh_method = "unrolled"``: the ridge refresh unrolled (:func:`gsjax.linalg.refresh`).
    """
    check_sizes([family], [k])
    unknown = [a for a in algorithms if a not in _TABLES]
    if unknown or not algorithms:
        raise ConfigError("algorithms", f"unknown or no entries {unknown}; known: "
                                        f"{', '.join(_TABLES)}")
    if solver not in ("dp", "pgd"):
        raise ConfigError("solver", f"must be 'dp' or 'pgd'; got {solver!r}")
    lam = stiffness(k, 0.01, 2.0, 0)
    if family == "grid":
        graph = f'graph = "grid"\ngrid_shape = [{k // 4}, 4]'
    elif family == "chain":
        graph = f'graph = "chain"\nnum_nodes = {k}'
    else:
        graph = f'graph = "edges"\nnum_nodes = {k}\nedges = {_rows(GRAPHS[family](k))}'
    using = ('the exact LCB solver (solver = "dp", issue 17)' if solver == "dp" else
             'PGD in place of the exact LCB solver (solver = "pgd", the settings of '
             "large_graphs.toml; issue 17)")
    about = textwrap.fill(
        f"Section 5.1 with {using} on "
        f'{FAMILY_ABOUT[family]}: LinUCB, global lazy (reference "global" and "own") and async '
        "lazy. Linear features, theta* ~ N(0, I) per seed, noise N(0, 0.5^2), beta = 0.5, "
        "stiffness lambda_reg,i log-uniform in [0.01, 2.0] (NumPy seed 0, one per node), as in "
        f"large_graphs.toml. Written by `python benchmarks/dp.py --config {family} {k}`; other "
        "sizes the same way.", 99, break_on_hyphens=False,
        initial_indent=" " * 17).lstrip()  # room for 'description = """'
    levels = "" if exact_ties else (
        "dp_exact_ties = false  # the level plan (many eliminations at once) where its levels "
        "shrink\n")
    if solver == "pgd":
        solver_lines = (_pgd_lines() + "pgd_gap = true  # max_lcb_residual: PGD's LCB above the "
                        "exact minimum (the DP's) at its solves\n"
                        'gram_summation = "compensated"  # fractional states: a plain float32 '
                        "Gram sum can turn V indefinite in 10^4 rounds\n" + levels)
    else:
        solver_lines = 'solver = "dp"\n' + levels
    if refresh_method != "cholesky":
        solver_lines += (f'refresh_method = "{refresh_method}"  # V^-1 and log det V of the '
                         "blocks of 3 to 5 without a LAPACK call each (2.5x a round at 10^4)\n")
    every = max(1, horizon // 20) if record_every is None else record_every
    return f"""name = "{name or f'dp_{family}'}"
description = \"\"\"{about}\"\"\"
seeds = {seeds}
horizon = {horizon}
root_seed = 0
record_every = {every}

[problem]
structure = "graph"
{graph}
features = "linear"
s0 = 0.5

[problem.theta]
distribution = "normal"
scale = 1.0
seed = 0
per_seed = true

[problem.noise]
kind = "independent"
sigma = 0.5

[agent]
lambda_reg = {_rows(lam)}
beta = 0.5
move_cost = 1.0
{solver_lines}
""" + "".join(_TABLES[a] for a in algorithms)


def _rows(values) -> str:
    """A TOML array of numbers or pairs, one row per line of at most 100 characters."""
    items = [f"[{v[0]}, {v[1]}]" if isinstance(v, tuple) else f"{v:.6g}" for v in values]
    lines = [""]
    for item in items:
        if len(lines[-1]) + len(item) > 94:
            lines.append("")
        lines[-1] += f"{item}, "
    return "[\n  " + "\n  ".join(line.rstrip() for line in lines) + "\n]"


# --- The driver -----------------------------------------------------------------------------


def check_sizes(families, ks) -> None:
    """One-line :class:`ConfigError` for an unknown family or a size it cannot take."""
    for f in families:
        if f not in FAMILY_ABOUT:
            raise ConfigError("--families", f"unknown family {f!r}; known: {', '.join(FAMILIES)}")
    for k in ks:
        if k < 4:
            raise ConfigError("--k", f"sizes must be >= 4; got {k}")
        if "grid" in families and k % 4:
            raise ConfigError("--k", f"the grid family (4 x k/4) needs k divisible by 4; got {k}")


def default_sizes(family: str) -> list[int]:
    """:data:`DEFAULT_K`, each raised to the next multiple of 4 for the grid (10 -> 12)."""
    return [-(-k // 4) * 4 if family == "grid" else k for k in DEFAULT_K]


def _record_every(horizon: int) -> int:
    """The largest divisor of ``horizon`` at most ``max(1, horizon // 40)``."""
    every = max(1, horizon // 40)
    while horizon % every:
        every -= 1
    return every


#: From this k on, the compacted sweep's solver buffer is sized to the triggers (the numbers do
#: not depend on it): async re-minimises some coordinates of almost every seed in every round, so
#: it solves every seed at once (``--buffer`` = seeds); global lazy re-optimises a seed in 70 % of
#: its first 250 rounds but 15 % by round 1500 and fewer after, so it solves ``LAZY_BUFFER`` seeds
#: at a time. ``python benchmarks/buffer.py --resume FOLDER`` from the runs' own checkpoints (25
#: seeds): the grid's k = 10^4 at round 1500, 136 ms a round with 4 against 409 with 25; its
#: k = 10^3 at round 7500 (``lazy_own``), 18 against 42 ms; 4 loses only in the first rounds
#: (754 against 430 ms in rounds 1-20 at k = 10^4). ``lazy_own`` at k = 10^4 re-optimises a seed
#: in most rounds to the end (the tree's and the ring's: 7,991 and 7,966 of 10^4 rounds), so from
#: ``OWN_ALL_K`` it solves every seed at once too: the grid's whole-scan solve of 25 seeds took
#: 452-463 ms against 120 ms for 4 (7 passes: 840 ms; 18-20 ms a seed from 8 seeds on, 30 ms at
#: 4; measured by the ad hoc script that became ``python benchmarks/dp_widths.py --n 10000
#: --widths 4 8 16 25``, two runs at nice 19 beside). Below ``LARGE_K``, the default buffer (a
#: 16th of the seeds).
LARGE_K = 1000
LAZY_BUFFER = 4
OWN_ALL_K = 10000


def _buffer(key: str, k: int, seeds: int) -> int | None:
    """The solver buffer of the run ``key`` (``lazy``, ``async_lazy``, ``linucb``, ``pgd``, ...)
    of ``seeds`` seeds at size ``k`` (see :data:`LARGE_K`; the runner caps it at the seeds a
    part or a device holds); None: the runner's default (LinUCB solves every seed anyway)."""
    if k < LARGE_K or key == "linucb":
        return None
    if key == "lazy" or (key == "lazy_own" and k < OWN_ALL_K):
        return LAZY_BUFFER
    return seeds


class NotKept(LookupError):
    """A run that ``--read-only`` would have had to run."""


def _run(text: str, out: Path, name: str, log, buffer: int | None = None,
         keep: Path | None = None, seed_start: int | None = None, seed_parts: int = 1,
         read_only: bool = False) -> dict:
    """Run the config ``text`` into ``OUT/NAME``, written first to ``OUT/configs/NAME.toml``; a
    finished run of the same config there is read, not rerun (one of another config is refused
    before anything is written). ``buffer``: :func:`gsjax.experiment.run_config`'s.

    ``keep``: a JSON file of finished runs' results (what the table reads of each summary, by
    name, with the config hash): a run found there under the same hash is read from it, and a
    run that finishes is added to it. Small enough to commit, so that a run finished on one
    machine is not run again on the next (``docs/reproduce/dp_scale/runs.json``).

    ``seed_start``: run the seeds from this global id (one of ``seed_parts`` parts of a run
    split by :func:`_run_parts`). The summary also holds each seed's numbers (``per_seed``:
    what :func:`_merge` joins and :func:`_diff` pairs). ``read_only``: raise :class:`NotKept`
    rather than run."""
    cfg = parse_config(tomllib.loads(text))
    digest = config_hash(cfg)
    if (entry := _kept_entry(keep, name, digest, seed_start)) is not None:
        log(f"-- {name}: finished, read from {keep}")
        return entry["summary"]
    folder = out / name
    finished = (folder / "summary.json").is_file() and not (folder / checkpoint.FILENAME).exists()
    if finished:
        try:
            same = dict_hash(read_json(folder / "config.json")) == digest
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            same = False
        if not same:
            raise ConfigError("--out", f"{folder} holds a finished run of another config; "
                                       "refusing to mix them: use another --out")
    if read_only and not finished:
        raise NotKept(name)
    write_text(out / "configs" / f"{name}.toml", text)
    if finished:
        log(f"-- {name}: finished, read from {folder}")
        summary = read_json(folder / "summary.json")
    else:
        log(f"-- {name}: {cfg.seeds} seeds x {cfg.horizon} rounds"
            + ("" if seed_start is None else f" from seed {seed_start}"))
        summary = run_config(cfg, folder, log=log, figures=False, buffer=buffer,
                             seed_start=seed_start or 0)
    summary = _kept(summary)
    if (folder / "arrays.npz").is_file():
        summary["per_seed"] = _per_seed(read_npz(folder / "arrays.npz"), summary["algorithms"])
    _add_kept(keep, name, {"config_hash": digest, "summary": summary, **(
        {} if seed_start is None else {"seed_start": seed_start, "seed_parts": seed_parts})})
    return summary


def _kept_entry(keep: Path | None, name: str, digest: str, seed_start: int | None = None
                ) -> dict | None:
    """``keep``'s entry of run ``name`` when it is of this config hash and first seed."""
    entry = (read_json(keep) if keep is not None and keep.is_file() else {}).get(name, {})
    same = (entry.get("config_hash"), entry.get("seed_start")) == (digest, seed_start)
    return entry if same else None


def _add_kept(keep: Path | None, name: str, entry: dict) -> None:
    """Add (or replace) run ``name``'s entry in ``keep`` (nothing when None)."""
    if keep is not None:
        kept = read_json(keep) if keep.is_file() else {}
        kept[name] = entry
        write_json(keep, dict(sorted(kept.items())))


def _per_seed(arrays: dict, algorithms) -> dict:
    """Each seed's numbers behind :func:`_kept`'s means, per algorithm, computed as
    :func:`gsjax.experiment.summarise` computes them (in the arrays' own dtypes)."""
    out = {}
    for a in algorithms:
        t = {f: np.asarray(arrays[f"{a}/totals/{f}"])
             for f in ("prediction_regret", "movement_cost", "updates", "changes",
                       "max_lcb_residual")}
        out[a] = {"prediction_regret": t["prediction_regret"].tolist(),
                  "movement_cost": t["movement_cost"].tolist(),
                  "total_regret": (t["prediction_regret"] + t["movement_cost"]).tolist(),
                  "total_updates": t["updates"].sum(-1).tolist(),
                  "total_changes": t["changes"].sum(-1).tolist(),
                  "max_lcb_residual": t["max_lcb_residual"].tolist()}
    return out


def _merge(parts: list[dict]) -> dict:
    """One summary (:func:`_kept`'s keys) from the summaries of a run's seed parts, in seed
    order: means and standard errors over all their seeds, seconds summed over the parts, and
    the seeds' numbers joined."""
    algos, per_seed = {}, {}
    for a in parts[0]["algorithms"]:
        per_seed[a] = seeds = {key: [x for p in parts for x in p["per_seed"][a][key]]
                               for key in parts[0]["per_seed"][a]}
        algos[a] = {**{key: mean_stderr(seeds[key]) for key in _KEYS if key in seeds},
                    **{key: sum(p["algorithms"][a][key] for p in parts)
                       for key in ("compile_seconds", "run_seconds")}}
        if "max_lcb_residual" in parts[0]["algorithms"][a]:
            algos[a]["max_lcb_residual"] = max(seeds["max_lcb_residual"])
    return {"algorithms": algos, "per_seed": per_seed}


def seed_part_config(text: str, parts: int) -> tuple[str, int]:
    """The config of one of ``parts`` equal parts of the seeds of the config ``text`` (its
    ``seeds`` line divided; the part's first seed is given at run time) and the part's size."""
    seeds = tomllib.loads(text)["seeds"]
    if parts < 1 or seeds % parts:
        raise ConfigError("--seed-parts", f"must be >= 1 and divide the seeds ({seeds}); "
                                          f"got {parts}")
    part, n = re.subn(r"(?m)^seeds = \d+$", f"seeds = {seeds // parts}", text, count=1)
    assert n == 1, "a driver config has its seeds on a line of its own"
    return part, seeds // parts


def _run_parts(text: str, out: Path, name: str, log, buffer: int | None = None,
               keep: Path | None = None, parts: int = 1, only=None, read_only: bool = False
               ) -> dict | None:
    """:func:`_run` in ``parts`` runs of consecutive seeds (``OUT/NAME_sSTART``, each kept by
    itself), so that a run too long for one machine's session is finished piece by piece: the
    seeds' draws depend on their global ids only (DESIGN section 3), so the merged summary
    (:func:`_merge`, kept under the whole run's name and config hash) is the whole run's.
    ``only``: the part indices to run now (default all); returns None while a part is
    missing."""
    if parts == 1:
        return _run(text, out, name, log, buffer, keep, read_only=read_only)
    digest = config_hash(parse_config(tomllib.loads(text)))
    if (entry := _kept_entry(keep, name, digest)) is not None:
        log(f"-- {name}: finished, read from {keep}")
        return entry["summary"]
    part_text, size = seed_part_config(text, parts)
    part_digest = config_hash(parse_config(tomllib.loads(part_text)))
    done = []
    for i in range(parts):
        part = f"{name}_s{i * size}"
        if only is not None and i not in only and _kept_entry(keep, part, part_digest,
                                                              i * size) is None:
            log(f"-- {part}: not run now (--part)")
            continue
        done.append(_run(part_text, out, part, log, buffer, keep, seed_start=i * size,
                         seed_parts=parts, read_only=read_only))
    if len(done) < parts:
        return None
    summary = _merge(done)
    _add_kept(keep, name, {"config_hash": digest, "summary": summary, "seed_parts": parts})
    return summary


_KEYS = ("prediction_regret", "movement_cost", "total_regret", "total_updates",
         "total_changes", "compile_seconds", "run_seconds")


def _kept(summary: dict) -> dict:
    """What the table reads of a run's summary: per algorithm, :data:`_KEYS` and, for PGD
    runs, ``max_lcb_residual``."""
    return {"algorithms": {a: {key: v[key] for key in (*_KEYS, "max_lcb_residual") if key in v}
                           for a, v in summary["algorithms"].items()}}


def _algo(summary: dict, name: str, seeds: int) -> dict:
    a = summary["algorithms"][name]
    return {**{key: a[key] for key in _KEYS}, "seconds_per_seed": a["run_seconds"] / seeds}


def _diff(a: dict, b: dict, algo: str, key: str) -> dict:
    """Run summary ``a`` minus ``b`` in ``key`` of ``algo``, over the same seeds: the mean and
    standard error of the seeds' differences where both keep each seed's numbers
    (``paired``), else the difference of the means with the errors added in quadrature (which
    overstates the paired error)."""
    pa, pb = (s.get("per_seed", {}).get(algo, {}).get(key) for s in (a, b))
    if pa is not None and pb is not None and len(pa) == len(pb):
        return {**mean_stderr(np.subtract(pa, pb)), "paired": True}
    x, y = a["algorithms"][algo][key], b["algorithms"][algo][key]
    return {"mean": x["mean"] - y["mean"], "stderr": math.hypot(x["stderr"], y["stderr"]),
            "paired": False}


def scale_configs(family: str, k: int, seeds: int, horizon: int, linucb_horizon: int,
                  pgd: bool) -> dict[str, str]:
    """``{name: TOML text}`` of the runs of one (family, k): ``dp_FAMILY_K_A`` for each lazy
    entry ``A`` of :data:`LAZY` (one run each: at k = 10^4 each takes an hour or more, and a
    finished one is kept apart), ``dp_FAMILY_K_linucb`` and, with ``pgd``, ``dp_FAMILY_K_pgd``
    (the three lazy entries)."""
    every = _record_every(horizon)
    common = dict(seeds=seeds, exact_ties=False, refresh_method="unrolled")
    name = f"dp_{family}_{k}"
    texts = {f"{name}_{a}": family_config(family, k, name=f"{name}_{a}", horizon=horizon,
                                          record_every=every, algorithms=(a,), **common)
             for a in LAZY}
    texts |= {f"{name}_linucb": family_config(family, k, name=f"{name}_linucb",
                                             horizon=linucb_horizon,
                                             record_every=math.gcd(every, linucb_horizon),
                                             algorithms=("linucb",), **common)}
    if pgd:
        texts[f"{name}_pgd"] = family_config(family, k, name=f"{name}_pgd", horizon=horizon,
                                             record_every=every, algorithms=LAZY, solver="pgd",
                                             **common)
    return texts


def run_family(family: str, k: int, out: Path, seeds: int, horizon: int, linucb_horizon: int,
               pgd: bool, log=print, keep: Path | None = None, seed_parts: int = 1,
               part=None, read_only: bool = False) -> dict | None:
    """The runs of one (family, k); returns its row of ``dp_scale.json``, or None while a seed
    part of one of its runs is missing (``keep``: see :func:`_run`; ``seed_parts``, ``part``:
    :func:`_run_parts`'s ``parts`` and ``only``), or, ``read_only``, while a run is neither
    kept nor finished in ``out``."""
    texts = scale_configs(family, k, seeds, horizon, linucb_horizon, pgd)
    name = f"dp_{family}_{k}"
    try:
        runs = {key: _run_parts(texts[f"{name}_{key}"], out, f"{name}_{key}", log,
                                _buffer(key, k, seeds), keep, seed_parts, part, read_only)
                for key in (*LAZY, "linucb")}
    except NotKept as e:
        log(f"-- {name}: no row yet ({e} is not kept)")
        return None
    stopped = None
    if pgd:
        try:
            runs["pgd"] = _run_parts(texts[f"{name}_pgd"], out, f"{name}_pgd", log,
                                     _buffer("pgd", k, seeds), keep,
                                     seed_parts, part, read_only)
        except NonFiniteFeedback as e:  # the exact runs' row stands; the table says why
            stopped = f"stopped: {e}"
            log(f"-- {name}_pgd {stopped}")
        except NotKept:  # read-only: the row without the PGD comparison
            pgd = False
    if any(r is None for r in runs.values()):
        return None
    main = {"algorithms": {a: runs[a]["algorithms"][a] for a in LAZY}}
    lin = runs["linucb"]
    row = {"k": k, "name": name, "seeds": seeds, "horizon": horizon,
           "exact_ties": False,
           "algorithms": {a: _algo(main, a, seeds) for a in LAZY},
           "linucb": {"horizon": linucb_horizon, **_algo(lin, "linucb", seeds)}}
    g = row["algorithms"]
    row["waste_updates"] = {r: ratio(g[r]["total_updates"], g["async_lazy"]["total_updates"])
                            for r in ("lazy", "lazy_own")}
    row["waste_movement"] = {r: ratio(g[r]["movement_cost"], g["async_lazy"]["movement_cost"])
                             for r in ("lazy", "lazy_own")}
    if stopped:
        row["pgd_stopped"] = stopped
    elif pgd:
        p = runs["pgd"]
        row["pgd_minus_dp"] = {a: {key: _diff(p, runs[a], a, key)
                                   for key in ("prediction_regret", "movement_cost")}
                               for a in LAZY}
        for a in LAZY:  # PGD's LCB above the exact minimum, largest over its solves and seeds
            row["pgd_minus_dp"][a]["max_lcb_gap"] = p["algorithms"][a]["max_lcb_residual"]
    return row


def _command(families, sizes, seeds, horizon, linucb_horizon, pgd_max_k, out, keep,
             seed_parts=1, read_only=False) -> str:
    ks = sorted({k for f in families for k in sizes[f]})
    return (f"python -m gsjax.paper.dp_scale --out {shlex.quote(str(out))} --families "
            f"{' '.join(families)} --k {' '.join(map(str, ks))} --seeds {seeds} --horizon "
            f"{horizon} --linucb-horizon {linucb_horizon} --pgd-max-k {pgd_max_k}"
            + ("" if keep is None else f" --keep {shlex.quote(str(keep))}")
            + ("" if seed_parts == 1 else f" --seed-parts {seed_parts}")
            + (" --read-only" if read_only else ""))


def run_all(out, families=FAMILIES, ks=None, seeds: int = 100, horizon: int = 10000,
            linucb_horizon: int = 1000, pgd_max_k: int = 1000, log=print, keep=None,
            seed_parts: int = 1, part=None, read_only: bool = False
            ) -> tuple[dict, list[str]]:
    """Every (family, k): ``dp_scale.{json,md,png}`` in ``out``; returns the result and its
    markdown lines (the command first). ``ks``: the sizes of every family (default
    :func:`default_sizes`); ``keep``: a JSON file of finished runs (see :func:`_run`);
    ``seed_parts``, ``part``: each run in that many parts of its seeds, only the parts listed
    run now (see :func:`_run_parts`); a (family, k) with a part missing has no row yet.
    ``read_only``: run nothing, the rows of the runs kept (or finished in ``out``) only."""
    out = Path(out)
    keep = None if keep is None else Path(keep)
    families = list(families)
    check_sizes(families, ks or [])
    for key, value in (("--seeds", seeds), ("--horizon", horizon),
                       ("--linucb-horizon", linucb_horizon)):
        if value < 1:
            raise ConfigError(key, f"must be >= 1; got {value}")
    if seed_parts < 1 or seeds % seed_parts:
        raise ConfigError("--seed-parts", f"must be >= 1 and divide --seeds ({seeds}); "
                                          f"got {seed_parts}")
    if part is not None and not all(0 <= i < seed_parts for i in part):
        raise ConfigError("--part", f"indices must be in 0..{seed_parts - 1}; got {list(part)}")
    sizes = {f: list(ks) if ks else default_sizes(f) for f in families}
    command = _command(families, sizes, seeds, horizon, linucb_horizon, pgd_max_k, out, keep,
                       seed_parts, read_only)
    result = {"command": command, "seeds": seeds, "horizon": horizon,
              "linucb_horizon": linucb_horizon, "pgd_max_k": pgd_max_k,
              "record_every": _record_every(horizon),
              "families": {f: [row for k in sizes[f]
                               if (row := run_family(f, k, out, seeds, horizon, linucb_horizon,
                                                     k <= pgd_max_k, log, keep, seed_parts,
                                                     part, read_only)) is not None]
                           for f in families}}
    write_json(out / "dp_scale.json", result)
    if any(result["families"].values()):  # no row yet while a seed part is missing
        plot(result, out / "dp_scale.png")
    md = table(result)
    write_text(out / "dp_scale.md", "\n".join(md) + "\n")
    return result, md


def table(result: dict) -> list[str]:
    """Markdown: the command, then per family the waste table and, where run, pgd minus dp."""
    md = [f"Command: `{result['command']}`", "",
          "Mean ± standard error over seeds; waste = global lazy / async (updates: criteria "
          "re-optimised, summed over criteria; movement: the movement cost), the ratio of the "
          "means with its delta-method error; `own`: global lazy with reference \"own\". "
          "Regret: prediction regret.", ""]
    head = ("| k | seeds × T | updates global | updates own | updates async | waste updates "
            "(global, own) | waste movement (global, own) | regret global | regret own | "
            "regret async | run s / seed (global, own, async) | LinUCB T | LinUCB updates | "
            "LinUCB regret | LinUCB run s / seed |")
    for family, rows in result["families"].items():
        md += [f"### {family}: {FAMILY_ABOUT[family]}", "", head,
               "|" + "---|" * (head.count("|") - 1)]
        for r in rows:
            g, lin = r["algorithms"], r["linucb"]
            md.append(
                f"| {r['k']} | {r['seeds']} × {r['horizon']} | "
                + " | ".join(pm(g[a]["total_updates"], 0) for a in LAZY) + " | "
                + " | ".join(", ".join(pm(r[w][a], 2) for a in ("lazy", "lazy_own"))
                             for w in ("waste_updates", "waste_movement")) + " | "
                + " | ".join(pm(g[a]["prediction_regret"]) for a in LAZY) + " | "
                + ", ".join(f"{g[a]['seconds_per_seed']:.3g}" for a in LAZY)
                + f" | {lin['horizon']} | {pm(lin['total_updates'], 0)} | "
                f"{pm(lin['prediction_regret'])} | {lin['seconds_per_seed']:.3g} |")
        pgd = [r for r in rows if "pgd_minus_dp" in r or "pgd_stopped" in r]
        if pgd:
            md += ["", f"PGD (large_graphs.toml's settings) minus the exact DP, {family}, the same "
                   "seeds (standard error of the seeds' differences where both runs kept each "
                   "seed's numbers, `paired`, else the two errors added in quadrature):", "",
                   "| k | algorithm | regret pgd − dp | movement pgd − dp | error | PGD's largest "
                   "LCB gap at its solves |", "|---|---|---|---|---|---|"]
            for r in pgd:
                if "pgd_stopped" in r:
                    md.append(f"| {r['k']} | all | the PGD run {r['pgd_stopped']} | | | |")
                for a, d in r.get("pgd_minus_dp", {}).items():
                    how = "paired" if d["prediction_regret"].get("paired") else "quadrature"
                    md.append(f"| {r['k']} | `{a}` | {pm(d['prediction_regret'])} | "
                              f"{pm(d['movement_cost'], 2)} | {how} | {d['max_lcb_gap']:.3g} |")
        md.append("")
    return md


def plot(result: dict, path) -> Path:
    """Waste factors against k, one line per family (solid: global, dashed: own reference)."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, key, what in zip(axes, ("waste_updates", "waste_movement"), ("updates", "movement")):
        for i, (family, rows) in enumerate(result["families"].items()):
            if not rows:
                continue
            ks = [r["k"] for r in rows]
            for ref, style in (("lazy", "o-"), ("lazy_own", "s--")):
                q = [r[key][ref] for r in rows]
                ax.errorbar(ks, [x["mean"] for x in q], yerr=[x["stderr"] for x in q],
                            fmt=style, color=f"C{i}", ms=4, capsize=2,
                            label=f"{family}" + (" (own)" if ref == "lazy_own" else ""))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("k (nodes)")
        ax.set_ylabel(f"waste in {what}: global / async")
    axes[0].legend(fontsize=7, ncol=2)
    fig.suptitle("global lazy vs async with the exact solver (issue 17)")
    fig.tight_layout()
    return _save(fig, Path(path))


def report_section(path, out, quick: bool, log) -> list[str]:
    """The ``gsjax reproduce --long`` section: the sizes of the config's ``[paper]`` table
    (``families``, ``seeds``, ``horizon``, ``linucb_horizon``, ``pgd_max_k``; the default sizes
    of every family); quick: ring and tree at k = 12, 4 seeds x 20 rounds, LinUCB 10."""
    cfg = load_config(path)
    p = cfg.paper
    if quick:
        kw = dict(families=("ring", "tree"), ks=[12], seeds=4, horizon=20, linucb_horizon=10,
                  pgd_max_k=12)
    else:
        kw = dict(families=p.get("families", FAMILIES), ks=p.get("k_sweep"),
                  seeds=p.get("seeds", 100), horizon=p.get("horizon", 10000),
                  linucb_horizon=p.get("linucb_horizon", 1000),
                  pgd_max_k=p.get("pgd_max_k", 1000))
    _, md = run_all(Path(out) / cfg.name, log=log, **kw)
    what = (f"What is run: for each family ({', '.join(kw['families'])}) and size k, global lazy "
            "(both reference readings) and async lazy with the exact DP solver, "
            f"{kw['seeds']} seeds x T = {kw['horizon']}; LinUCB alone at T = "
            f"{kw['linucb_horizon']} (it solves every round); and, for k <= {kw['pgd_max_k']}, "
            "the lazy and async runs again with large_graphs.toml's PGD in place of the DP, "
            "reported as PGD minus DP. Each run's config is in configs/ of the section's folder; "
            "an interrupted run resumes from its checkpoint and a finished one is read.")
    return script_section(cfg, [textwrap.fill(what, 99), "", *md], "dp_scale.png")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gsjax.paper.dp_scale",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/dp_scale")
    ap.add_argument("--families", nargs="+", default=list(FAMILIES), metavar="FAMILY",
                    help=f"of {', '.join(FAMILIES)}")
    ap.add_argument("--k", type=int, nargs="+", help="sizes (default 10 100 1000 10000; the "
                                                     "grid's 10 is 12)")
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--horizon", type=int, default=10000)
    ap.add_argument("--linucb-horizon", type=int, default=1000)
    ap.add_argument("--pgd-max-k", type=int, default=1000,
                    help="the PGD runs for k up to this")
    ap.add_argument("--keep", metavar="JSON",
                    help="a file of finished runs' results: read a run from it (same config "
                         "hash) instead of running it, add each run that finishes")
    ap.add_argument("--seed-parts", type=int, default=1, metavar="N",
                    help="run each run as N runs of consecutive seeds, each kept by itself "
                         "(for runs longer than one machine's session); the row comes when "
                         "every part is done")
    ap.add_argument("--part", type=int, nargs="+", metavar="I",
                    help="with --seed-parts: run only these parts (0-based) now")
    ap.add_argument("--read-only", action="store_true",
                    help="run nothing: the table and figure of the rows whose runs are kept "
                         "(or finished in --out)")
    args = ap.parse_args(argv)
    try:
        _, md = run_all(args.out, args.families, args.k, args.seeds, args.horizon,
                        args.linucb_horizon, args.pgd_max_k, keep=args.keep,
                        seed_parts=args.seed_parts, part=args.part, read_only=args.read_only)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
