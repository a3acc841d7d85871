"""An ask/tell tuner for a live system: the simulator's algorithms, one observation at a time.

A :class:`Tuner` holds ONE learner (the runner's seed ``seed``) of an experiment config's
algorithm (its ``theta*`` is never read):

* :meth:`Tuner.suggest` -- the setting ``s`` in ``[0, 1]^n`` to deploy; it changes only when
  the algorithm re-optimises.
* :meth:`Tuner.observe` -- the per-criterion losses measured at a setting: one observation
  ``(k,)`` or several ``(B, k)``, each one round of the algorithm. The setting must be the one
  suggested unless ``allow_off_policy=True`` (the ridge statistics then use it as played).
* :meth:`Tuner.save` / :meth:`Tuner.load` -- the learner in one versioned file, written
  atomically; the file it replaces is kept as ``STATE.prev``.

A round is the kernel's ``act`` then ``update`` with the runner's keys (DESIGN section 3), so fed
a simulated run's feedback a tuner takes exactly the simulator's decisions.

Every bad input raises :class:`TunerError` before the state is touched (wrong lengths, settings
outside the box, non-finite values or values that overflow the state's dtype, a setting other
than the one suggested); a batch is applied all or nothing. An unreadable state file is refused
on one line that says how to go back to ``STATE.prev`` when it exists.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from gsjax import experiment, linalg
from gsjax.algorithms.kernel import exploration_radius
from gsjax.config import (ConfigError, ExperimentConfig, config_hash, config_to_dict, find_config,
                          parse_config, pick_entry, read_toml)
from gsjax.oco import algorithms as oalgs
from gsjax.oco import experiment as oexp
from gsjax.oco.config import OCOConfig, config_kind, oco_config_to_dict, parse_oco_config
from gsjax.problem import Feedback, all_features, seed_rows
from gsjax.results import remove_orphan_tmps, write_npz

__all__ = ["Tuner", "OGDTuner", "TunerError", "STATE_VERSION", "open_config", "load"]

STATE_VERSION = 1
_FORMAT = "gsjax-tuner"


class TunerError(ConfigError):
    """A bad input to the tuner; ``field`` names what is wrong."""


_CACHE: dict = {}


def _cached(key, make):
    """``make()`` once per ``key`` in this process (a state loaded every round builds once)."""
    if key not in _CACHE:
        _CACHE[key] = make()
    return _CACHE[key]


def _check_seed(seed) -> None:
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise TunerError("seed", f"must be an integer >= 0; got {seed!r}")


def _vector(value, length: int, field: str, what: str) -> np.ndarray:
    """A finite float64 array whose last axis has ``length`` entries (one or several rows)."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond float64
        raise TunerError(field, f"expected a list of {length} numbers ({what}); "
                                f"got {value!r}") from None
    if arr.ndim not in (1, 2) or arr.shape[-1] != length:
        raise TunerError(field, f"expected {length} numbers ({what}) or a list of such rows; "
                                f"got shape {list(arr.shape)}")
    if not np.all(np.isfinite(arr)):
        raise TunerError(field, f"must be finite numbers; got {value!r}")
    return arr


def _rows(setting, values, n: int, length: int, field: str, what: str):
    """Validated ``(settings (B, n), values (B, length))`` of one or several observations."""
    vs = np.atleast_2d(_vector(values, length, field, what))
    ss = np.atleast_2d(_vector(setting, n, "setting", f"one value per coordinate, n = {n}"))
    if ss.shape[0] == 1 and vs.shape[0] > 1:
        ss = np.broadcast_to(ss, (vs.shape[0], n))
    if ss.shape[0] != vs.shape[0]:
        noun = "observations" if field == "losses" else "gradients"
        raise TunerError("setting", f"{ss.shape[0]} settings for {vs.shape[0]} {noun}")
    if np.any(ss < 0.0) or np.any(ss > 1.0):
        bad = np.argwhere((ss < 0.0) | (ss > 1.0))[0]
        raise TunerError("setting", f"must lie in the box [0, 1]^{n}; coordinate {bad[-1]} "
                                    f"is {float(ss[tuple(bad)])!r}")
    return ss, vs


def _check_fits(values: np.ndarray, dtype, field: str) -> None:
    """Refuse values that are finite in float64 but overflow the learner's ``dtype``."""
    dtype = np.dtype(dtype)
    with np.errstate(over="ignore"):
        finite = np.isfinite(values.astype(dtype))
    if not np.all(finite):
        row, col = np.argwhere(~finite)[0]
        raise TunerError(field, f"observation {row}, entry {col}: {float(values[row, col])!r} "
                                f"overflows the learner's {dtype.name} (largest finite "
                                f"{float(np.finfo(dtype).max):.8g}); rescale the values")


def _check_state_finite(before, after, values: np.ndarray, dtype, field: str) -> None:
    """Refuse observations whose sums overflow the state (a leaf finite before, not after)."""
    for old, new in zip(jax.tree_util.tree_leaves(before), jax.tree_util.tree_leaves(after)):
        if (jnp.issubdtype(new.dtype, jnp.inexact) and np.all(np.isfinite(np.asarray(old)))
                and not np.all(np.isfinite(np.asarray(new)))):
            raise TunerError(field, f"values up to {float(np.max(np.abs(values)))!r} would "
                                    f"overflow the learner's {np.dtype(dtype).name} state; "
                                    f"rescale the values")


def _prev_path(path: Path) -> Path:
    return path.with_name(path.name + ".prev")


def _intact(path: Path) -> bool:
    """Whether ``path`` is a zip whose members all pass their CRC check."""
    try:
        with zipfile.ZipFile(path) as z:
            return z.testzip() is None
    except Exception:  # a damaged zip raises nearly anything (see Tuner.load)
        return False


def _keep_prev(path: Path) -> None:
    """Keep ``path`` as ``STATE.prev`` atomically (link or copy, then rename) unless damaged."""
    if not path.is_file() or not _intact(path):
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.prev.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        os.unlink(tmp)
        try:
            os.link(path, tmp)
        except OSError:
            shutil.copyfile(path, tmp)
        os.replace(tmp, _prev_path(path))
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class _Learner:
    """What both tuners share: the counters, the observe loop, status's common fields and the
    state file. A subclass sets ``_schema`` (its config type and functions), ``_observed =
    (length, field, what)`` and ``_learn`` (one round's update after ``act``)."""

    family: str
    _off_policy_use: str  # what --allow-off-policy lets the learner do, for the error

    def _start(self, cfg, algorithm: str, seed: int, problem, params, dtype) -> None:
        self.cfg, self.algorithm, self.seed = cfg, algorithm, int(seed)
        self._problem, self._params, self._dtype = problem, params, dtype
        self._seed_key = jax.random.fold_in(jax.random.key(cfg.root_seed), self.seed)

    def _key(self, *path):
        """The seed key folded with ``path`` (round ``t``'s act key: ``_key(t, 1)``)."""
        return functools.reduce(jax.random.fold_in, path, self._seed_key)

    def _set_state(self, state, restore: dict | None, **fresh) -> None:
        """The state and counters, fresh or as saved (``fresh``: the counters' names and types)."""
        self._counter_names = tuple(fresh)
        saved = fresh if restore is None else restore["counters"]
        for name, value in fresh.items():
            setattr(self, name, np.asarray(saved[name], value.dtype)
                    if isinstance(value, np.ndarray) else type(value)(saved[name]))
        if restore is None:
            self._state = state
            return
        leaves, treedef = jax.tree_util.tree_flatten(state)
        saved = restore["leaves"]
        if len(saved) != len(leaves) or any(np.shape(a) != np.shape(b)
                                            for a, b in zip(saved, leaves)):
            raise TunerError("<state>", "the saved learner does not match its config "
                                        "(shapes differ); was the file edited?")
        self._state = jax.tree_util.tree_unflatten(
            treedef, [jnp.asarray(a, b.dtype) for a, b in zip(saved, leaves)])

    @classmethod
    def from_config(cls, config, algorithm: str | None = None, seed: int = 0, overrides=(),
                    **options):
        """A fresh tuner from a config path, a built-in name or a parsed config."""
        kind, parse, to_dict = cls._schema
        if isinstance(config, kind):
            cfg = config if not overrides else parse(to_dict(config), overrides)
        else:
            cfg = parse(read_toml(find_config(str(config))), overrides)
        return cls(cfg, algorithm=algorithm, seed=seed, **options)

    def suggest(self) -> np.ndarray:
        """(n,) the setting to deploy for the next observation (``s_t``)."""
        action, _ = self._act(self._key(self.rounds + 1, 1), self._state, self._params,
                              self._problem)
        return np.asarray(action, np.float64)

    def _observe(self, setting, values, allow_off_policy: bool) -> dict:
        ss, vs = _rows(setting, values, self.num_coords, *self._observed)
        _check_fits(vs, self._dtype, self._observed[1])
        # All or nothing: step copies, commit once every row is accepted.
        state, c = self._state, {name: getattr(self, name) for name in self._counter_names}
        for j in range(vs.shape[0]):
            t = c["rounds"] + 1
            suggested, acted = self._act(self._key(t, 1), state, self._params, self._problem)
            played = jnp.asarray(ss[j], self._dtype)
            off = not bool(jnp.all(played == suggested))
            if off and not allow_off_policy:
                raise TunerError(
                    "setting",
                    f"observation {j}: {ss[j].tolist()} is not the suggested setting "
                    f"{np.asarray(suggested, np.float64).tolist()} (pass allow_off_policy / "
                    f"--allow-off-policy to {self._off_policy_use})")
            c["off_policy"] += int(off)
            state = self._learn(t, acted, played, vs[j], off, c)
            played64 = np.asarray(played, np.float64)
            c["movement"] += float(np.sum(np.abs(played64 - c["last_setting"])))
            c["last_setting"], c["rounds"] = played64, t
        _check_state_finite(self._state, state, vs, self._dtype, self._observed[1])
        self._state = state
        vars(self).update(c)
        return {"rounds": self.rounds, "observations": int(vs.shape[0]),
                "suggested": self.suggest().tolist()}

    def _status(self, **fields) -> dict:
        return {"config": self.cfg.name, "algorithm": self.algorithm, "kind": self.kind,
                "seed": self.seed, "rounds": self.rounds, **fields, "movement": self.movement,
                "off_policy_observations": self.off_policy,
                "last_setting": self.last_setting.tolist(), "suggested": self.suggest().tolist()}

    def save(self, path, **extra) -> Path:
        """Write the learner to ``path`` atomically (versioned ``.npz``); the file it replaces
        is kept as ``STATE.prev``."""
        counters = {name: np.asarray(getattr(self, name)).tolist() for name in self._counter_names}
        meta = {"format": _FORMAT, "version": STATE_VERSION, "family": self.family,
                "config": self._schema[2](self.cfg), "algorithm": self.algorithm,
                "seed": self.seed, **extra, "counters": counters}
        leaves = jax.tree_util.tree_leaves(self._state)
        arrays = {"meta": np.asarray(json.dumps(meta)),
                  **{f"state/{i:05d}": np.asarray(leaf) for i, leaf in enumerate(leaves)}}
        path = Path(path)
        remove_orphan_tmps(path, tags=("prev",))
        _keep_prev(path)
        return write_npz(path, arrays)

    @classmethod
    def load(cls, path):
        """Read a tuner written by :meth:`save` (a :class:`Tuner` or an :class:`OGDTuner`)."""
        path = Path(path)
        if not path.is_file():
            raise TunerError("<state>", f"{path}: no such tuner state file (create one with "
                                        f"`gsjax tuner init CONFIG {path}`)")
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
                leaves = [z[f] for f in sorted(f for f in z.files if f.startswith("state/"))]
        except Exception as e:  # BadZipFile, zlib.error, EOFError, ...: all mean unreadable
            raise _unreadable(path, e) from None
        if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
            raise _unreadable(path, None)
        if meta.get("version") != STATE_VERSION:
            raise TunerError("<state>", f"{path}: state version {meta.get('version')!r}; this "
                                        f"gsjax reads version {STATE_VERSION}")
        try:
            restore = {"leaves": leaves, "counters": meta["counters"]}
            if meta.get("family", "bandit") == "ogd":
                return OGDTuner(parse_oco_config(meta["config"]), algorithm=meta["algorithm"],
                                seed=meta["seed"], budget_index=meta.get("budget_index", 0),
                                _restore=restore)
            return Tuner(parse_config(meta["config"]), algorithm=meta["algorithm"],
                         seed=meta["seed"], _restore=restore)
        except ConfigError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise _unreadable(path, e) from None


def _unreadable(path: Path, error) -> TunerError:
    """The one-line refusal of an unreadable state file, with the way back to ``STATE.prev``."""
    why = "" if error is None else " ({}: {})".format(type(error).__name__,
                                                      " ".join(str(error).split()))
    prev = _prev_path(path)
    hint = (f"; the state before its last write is kept in {prev}: `cp {prev} {path}` to "
            f"go back to it" if prev.is_file() else "")
    return TunerError("<state>",
                      f"{path}: not a gsjax tuner state file, or a damaged one{why}{hint}")


class Tuner(_Learner):
    """One learner of a config's algorithm, stepped by the observations of a live system.

    Build with :meth:`from_config` or :meth:`load`.
    """

    family = "bandit"
    _off_policy_use = "learn from another setting"
    _schema = (ExperimentConfig, parse_config, config_to_dict)  # type, parse, to_dict

    def __init__(self, cfg: ExperimentConfig, algorithm: str | None = None, seed: int = 0,
                 _restore: dict | None = None):
        _check_seed(seed)
        if cfg.grid:
            raise TunerError("grid", "a tuner runs one set of hyperparameters; remove [grid]")
        algorithm = pick_entry(cfg, algorithm, "algorithm", error=TunerError).name
        cfg_one = parse_config(dict(config_to_dict(cfg), seeds=1))
        built = _cached(config_hash(cfg_one), lambda: experiment.build(cfg_one))
        entry = next(b for b in built.algorithms if b.name == algorithm)
        problem = seed_rows(built.problem, 0, built.problem_per_seed)
        # No ground truth: the learner never reads theta*, s* or L(s*); blank them.
        problem = problem._replace(theta=jnp.zeros_like(problem.theta),
                                   s_star=jnp.full_like(problem.s_star, jnp.nan),
                                   loss_star=jnp.full_like(problem.loss_star, jnp.nan))
        self._start(cfg, algorithm, seed, problem, entry.params, built.dtype)
        self.kind, self._spec, self._structure = entry.kind, entry.spec, built.structure
        self._act, self._update = jax.jit(entry.algo.act), jax.jit(entry.algo.update)
        n, k = built.structure.num_coords, built.structure.num_criteria
        self.num_coords, self.num_criteria = n, k
        self._observed = (k, "losses", f"one loss per criterion, k = {k}")
        state = jax.jit(entry.algo.init)(self._key(0), self._params, problem)
        self._set_state(state, _restore, rounds=0, movement=0.0, updates=np.zeros(k, np.int64),
                       triggers=np.zeros(k, np.int64), reoptimisations=0, off_policy=0,
                       last_setting=np.asarray(problem.s0, np.float64))

    def observe(self, setting, losses, allow_off_policy: bool = False) -> dict:
        """Add observations; returns ``rounds``, ``observations`` and the next ``suggested``.

        Args:
          setting: (n,) the setting the losses were measured at, or (B, n) one per row.
          losses: (k,) per-criterion losses, or (B, k) for B observations (in order).
          allow_off_policy: accept settings other than the suggested one.
        """
        return self._observe(setting, losses, allow_off_policy)

    def _learn(self, t, acted, played, y, off, c):
        dt = self._dtype
        fb = Feedback(y=jnp.asarray(y, dt), expected_loss=jnp.asarray(jnp.nan, dt))
        state, info = self._update(self._key(t, 2), acted, played, fb, self._params, self._problem)
        c["updates"] = c["updates"] + np.asarray(info.updated, np.int64)
        c["triggers"] = c["triggers"] + np.asarray(info.triggered, np.int64)
        c["reoptimisations"] += int(info.reoptimised)
        return state

    def status(self) -> dict:
        """Rounds, updates, movement, and per criterion the estimate and its confidence."""
        out = self._status(reoptimisations=self.reoptimisations, updates=self.updates.tolist(),
                           triggers=self.triggers.tolist())
        stats, prob, k = self._state.stats, self._problem, self.num_criteria
        if np.ndim(stats.data_gram) != 3 or stats.data_gram.shape[0] != k:  # not one ridge
            return out  # per criterion
        inv = jax.vmap(linalg.inverse)(stats)
        theta = jax.vmap(jnp.matmul)(inv, stats.b)
        phi = all_features(self._structure, prob, jnp.asarray(out["suggested"], self._dtype))
        mean = np.asarray(jnp.sum(phi * theta, -1), np.float64)
        q = np.asarray(jnp.einsum("ki,kij,kj->k", phi, inv, phi), np.float64)
        bound = self._structure.env.feature_norm_sq_bound(self._structure, prob)
        beta = np.asarray(exploration_radius(self._spec, self._params, prob.feat_mask, bound,
                                             jnp.asarray(self.rounds, self._dtype)), np.float64)
        beta = np.broadcast_to(beta, mean.shape)
        width = beta * np.sqrt(np.maximum(q, 0.0))
        theta, mask = np.asarray(theta, np.float64), np.asarray(prob.feat_mask)
        out["criteria"] = [
            {"theta_hat": theta[i][mask[i]].tolist(), "logdet_V": float(stats.logdet[i]),
             "predicted_loss_at_suggested": float(mean[i]),
             "confidence_halfwidth": float(width[i]), "beta": float(beta[i])}
            for i in range(k)]
        out["predicted_total_loss"] = {"estimate": float(mean.sum()),
                                       "lower": float((mean - width).sum()),
                                       "upper": float((mean + width).sum())}
        return out


def _ogd_step(state, grad, eta):
    """``w <- clip(w - eta * g, 0, 1)`` with the observed gradient (one round)."""
    w = jnp.clip(state.w - jnp.repeat(eta, grad.shape[-1] // eta.shape[-1]) * grad, 0.0, 1.0)
    return state._replace(w=w)


class OGDTuner(_Learner):
    """Randomized Lazy OGD (Section 6) for a live system: the gradient is what is observed.

    Built from a ``kind = "oco"`` config (:mod:`gsjax.oco`): its ``[problem]`` gives the shape
    and the step-size rule's bounds, an ``[algorithms.NAME]`` entry the algorithm and its
    budgets (``budget_index`` picks one), the first horizon the planned ``T`` (``p = M/T``).

    OGD takes the gradient of the round's loss at its VIRTUAL iterate ``w_t`` (:meth:`query`),
    not always the deployed setting (:meth:`suggest`, ``s_t``); :meth:`observe` takes the
    deployed setting and the gradient at the query point. Keys follow
    :mod:`gsjax.oco.runner`, so the tuner deploys exactly the simulator's settings.
    """

    family = "ogd"
    _off_policy_use = "record another deployed setting"
    _schema = (OCOConfig, parse_oco_config, oco_config_to_dict)

    def __init__(self, cfg, algorithm: str | None = None, seed: int = 0, budget_index: int = 0,
                 _restore: dict | None = None):
        _check_seed(seed)
        entry = pick_entry(cfg, algorithm, "algorithm", error=TunerError)
        algorithm = entry.name
        if cfg.dtype == "float64":
            jax.config.update("jax_enable_x64", True)
        horizon = int(cfg.horizons[0])
        oexp.check(cfg)
        spec, problem, dtype = oexp.build_problem(cfg)
        params, budgets = oexp.entry_params(cfg, entry, horizon, dtype)
        if not 0 <= budget_index < params.p.shape[0]:
            raise TunerError("budget_index", f"entry {algorithm!r} has {params.p.shape[0]} "
                                             f"budget(s); got index {budget_index}")
        self._start(cfg, algorithm, seed, problem,
                    jax.tree_util.tree_map(lambda a: a[budget_index], params), dtype)
        self.budget = np.asarray(budgets[budget_index], np.float64)
        self.kind, self.horizon, self.budget_index = entry.algorithm, horizon, int(budget_index)
        self.num_coords, self.num_components = spec.n, spec.num_components
        self._observed = (spec.n, "gradient", f"the loss gradient at the query point, n = {spec.n}")
        algo = _cached(("oco", spec, entry.algorithm), lambda: oalgs.make(entry.algorithm, spec))
        self._act, self._step = jax.jit(algo.act), jax.jit(_ogd_step)
        state = algo.init(self._key(0, 1), self._params, problem)
        self._set_state(state, _restore, rounds=0, movement=0.0,
                       switches=np.zeros(spec.num_components, np.int64), off_policy=0,
                       last_setting=np.asarray(problem.s0, np.float64))

    def query(self) -> np.ndarray:
        """(n,) where this round's loss gradient is to be measured (the virtual iterate)."""
        return np.asarray(self._state.w, np.float64)

    def observe(self, setting, gradient, allow_off_policy: bool = False) -> dict:
        """Add rounds: the deployed ``setting`` (n,) or (B, n) and the gradient (n,) or (B, n)
        of each round's loss at the query point."""
        return dict(self._observe(setting, gradient, allow_off_policy), query=self.query().tolist())

    def _learn(self, t, acted, played, gradient, off, c):
        if off:
            acted = acted._replace(s=played)
        c["switches"] = c["switches"] + np.asarray(acted.switched, np.int64)
        return self._step(acted, jnp.asarray(gradient, self._dtype), self._params.eta)

    def status(self) -> dict:
        """Rounds, the step size and switching probability, switches, movement, the query."""
        return dict(self._status(
            planned_horizon=self.horizon, budget=self.budget.tolist(),
            switch_probability=np.asarray(self._params.p, np.float64).tolist(),
            step_size=np.asarray(self._params.eta, np.float64).tolist(),
            switches=self.switches.tolist()), query=self.query().tolist())

    def save(self, path) -> Path:
        """Write the learner to ``path`` atomically (versioned ``.npz``)."""
        return super().save(path, budget_index=self.budget_index)


def open_config(config, algorithm: str | None = None, seed: int = 0, overrides=(),
                budget_index: int = 0):
    """A fresh :class:`Tuner` or :class:`OGDTuner`, by the config's kind."""
    if not isinstance(config, (OCOConfig, ExperimentConfig)):
        config = find_config(str(config))
    if isinstance(config, OCOConfig) or (isinstance(config, Path) and config_kind(config) == "oco"):
        return OGDTuner.from_config(config, algorithm, seed, overrides, budget_index=budget_index)
    return Tuner.from_config(config, algorithm, seed, overrides)


def load(path):
    """Read a tuner state file of either family."""
    return Tuner.load(path)
