"""An ask/tell tuner for a live system: the simulator's algorithms, one observation at a time.

A :class:`Tuner` is built from an experiment config -- the scopes and features of the problem,
the algorithm and its parameters; the config's ``theta*`` is never read -- and holds ONE
learner (the runner's seed ``seed``). Its loop:

* :meth:`Tuner.suggest` -- the setting to deploy, ``s`` in ``[0, 1]^n``. It changes only when
  the algorithm re-optimises (for the lazy algorithms: when a trigger fires).
* :meth:`Tuner.observe` -- the per-criterion losses the system measured at a setting, one
  observation (``(k,)``) or several (``(B, k)``, with one setting or one per row). Each
  observation is one round of the algorithm. By default the setting must be the one suggested;
  ``allow_off_policy=True`` accepts any setting in the box (the ridge statistics use it as
  played).
* :meth:`Tuner.save` / :meth:`Tuner.load` -- the whole learner in one versioned file, written
  atomically (a temporary file, then a rename).

Keys follow the runner (DESIGN section 3): seed key ``fold_in(key(root_seed), seed)``, round
``t`` (the ``t``-th observation) uses ``fold_in(seed_key, t)`` with ``act`` / ``update``
sub-keys 1 and 2, ``init`` uses ``fold_in(seed_key, 0)``. Fed the feedback a simulated run
observed, a tuner therefore takes exactly the simulator's decisions
(``tests/test_tuner.py``).

Every bad input raises :class:`TunerError` (a :class:`~gsjax.config.ConfigError`: the CLI
prints it on one line and exits with status 2) before the state is touched: a vector of the
wrong length, a setting outside the box, NaN or infinite values, a setting other than the one
suggested. A batch of observations is applied all or nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from gsjax import experiment, linalg
from gsjax.algorithms.kernel import exploration_radius
from gsjax.config import (
    ConfigError,
    ExperimentConfig,
    config_hash,
    config_to_dict,
    find_config,
    load_config,
    parse_config,
)
from gsjax.oco import algorithms as oalgs
from gsjax.oco import experiment as oexp
from gsjax.oco.config import (
    OCOConfig,
    config_kind,
    load_oco_config,
    oco_config_to_dict,
    parse_oco_config,
)
from gsjax.oco.problem import make_problem as make_oco_problem
from gsjax.problem import Feedback, all_features
from gsjax.results import write_npz

__all__ = ["Tuner", "OGDTuner", "TunerError", "STATE_VERSION", "open_config", "load"]

STATE_VERSION = 1
_FORMAT = "gsjax-tuner"


class TunerError(ConfigError):
    """A bad input to the tuner; ``field`` names what is wrong."""


_COMPILED: dict = {}
_BUILT: dict = {}


def _build(cfg_one: ExperimentConfig):
    """``experiment.build`` of a one-seed config, cached by the config's hash in this process
    (a loop that loads the state file every round builds the problem once)."""

    key = config_hash(cfg_one)
    if key not in _BUILT:
        _BUILT[key] = experiment.build(cfg_one)
    return _BUILT[key]


def _jitted(kind: str, structure, spec, algo):
    """``jit``-ed (init, act, update) of an algorithm, shared by every tuner of the same
    (kind, structure, spec) in this process: a loop that loads the state file each round
    compiles once."""
    key = (kind, structure, spec)
    if key not in _COMPILED:
        _COMPILED[key] = (jax.jit(algo.init), jax.jit(algo.act), jax.jit(algo.update))
    return _COMPILED[key]


def _vector(value, length: int, field: str, what: str) -> np.ndarray:
    """A finite float64 array whose last axis has ``length`` entries (one or several rows)."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TunerError(field, f"expected a list of {length} numbers ({what}); got {value!r}") from None
    if arr.ndim not in (1, 2) or arr.shape[-1] != length:
        raise TunerError(field, f"expected {length} numbers ({what}) or a list of such rows; "
                                f"got shape {list(arr.shape)}")
    if not np.all(np.isfinite(arr)):
        raise TunerError(field, f"must be finite numbers; got {value!r}")
    return arr


def _restored(fresh_state, restore: dict):
    """The saved leaves put back into the tree of a freshly initialised state."""
    leaves, treedef = jax.tree_util.tree_flatten(fresh_state)
    saved = restore["leaves"]
    if len(saved) != len(leaves) or any(np.shape(a) != np.shape(b) for a, b in zip(saved, leaves)):
        raise TunerError("<state>", "the saved learner does not match its config "
                                    "(shapes differ); was the file edited?")
    return jax.tree_util.tree_unflatten(
        treedef, [jnp.asarray(a, b.dtype) for a, b in zip(saved, leaves)])


def _rows(setting, values, n: int, length: int, field: str, what: str):
    """Validated ``(settings (B, n), values (B, length))`` of one or several observations."""
    v = _vector(values, length, field, what)
    s = _vector(setting, n, "setting", f"one value per coordinate, n = {n}")
    vs = v[None] if v.ndim == 1 else v
    ss = s[None] if s.ndim == 1 else s
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


def _save(path, meta: dict, state) -> Path:
    """The versioned state file: ``meta`` as JSON beside the state's leaves, atomically."""

    arrays = {"meta": np.asarray(json.dumps(dict(format=_FORMAT, version=STATE_VERSION, **meta)))}
    for i, leaf in enumerate(jax.tree_util.tree_leaves(state)):
        arrays[f"state/{i:05d}"] = np.asarray(leaf)
    return write_npz(path, arrays)


class Tuner:
    """One learner of a config's algorithm, stepped by the observations of a live system.

    Build with :meth:`from_config` or :meth:`load`.
    """

    family = "bandit"

    def __init__(self, cfg: ExperimentConfig, algorithm: str | None = None, seed: int = 0,
                 _restore: dict | None = None):
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise TunerError("seed", f"must be an integer >= 0; got {seed!r}")
        if cfg.grid:
            raise TunerError("grid", "a tuner runs one set of hyperparameters; remove [grid]")
        names = [e.name for e in cfg.algorithms]
        if algorithm is None:
            algorithm = names[0]
        if algorithm not in names:
            raise TunerError("algorithm", f"no algorithm entry {algorithm!r} in the config; "
                                          f"entries: {names}")
        cfg_one = parse_config(dict(config_to_dict(cfg), seeds=1))
        built = _build(cfg_one)
        entry = next(b for b in built.algorithms if b.name == algorithm)
        problem = built.problem
        if built.problem_per_seed:
            problem = jax.tree_util.tree_map(lambda a: a[0], problem)
        # No ground truth: the learner never reads theta*, s* or L(s*); blank them.
        problem = problem._replace(theta=jnp.zeros_like(problem.theta),
                                   s_star=jnp.full_like(problem.s_star, jnp.nan),
                                   loss_star=jnp.full_like(problem.loss_star, jnp.nan))
        self.cfg, self.algorithm, self.seed = cfg, algorithm, int(seed)
        self.kind = entry.kind
        self._spec = entry.spec
        self._algo, self._params, self._problem = entry.algo, entry.params, problem
        self._structure = built.structure
        self._dtype = built.dtype
        self._seed_key = jax.random.fold_in(jax.random.key(cfg.root_seed), self.seed)
        init, self._act, self._update = _jitted(entry.kind, built.structure, entry.spec,
                                                entry.algo)
        state = init(jax.random.fold_in(self._seed_key, 0), self._params, self._problem)
        n, k = self._structure.num_coords, self._structure.num_criteria
        self.num_coords, self.num_criteria = n, k
        if _restore is None:
            self._state = state
            self.rounds = 0
            self.movement = 0.0
            self.updates = np.zeros(k, np.int64)
            self.triggers = np.zeros(k, np.int64)
            self.reoptimisations = 0
            self.off_policy = 0
            self.last_setting = np.asarray(problem.s0, np.float64)
        else:
            self._state = _restored(state, _restore)
            c = _restore["counters"]
            self.rounds = int(c["rounds"])
            self.movement = float(c["movement"])
            self.updates = np.asarray(c["updates"], np.int64)
            self.triggers = np.asarray(c["triggers"], np.int64)
            self.reoptimisations = int(c["reoptimisations"])
            self.off_policy = int(c["off_policy"])
            self.last_setting = np.asarray(c["last_setting"], np.float64)

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def from_config(cls, config, algorithm: str | None = None, seed: int = 0,
                    overrides=()) -> "Tuner":
        """A fresh tuner from a config path, a built-in name or an ExperimentConfig."""
        if isinstance(config, ExperimentConfig):
            cfg = config if not overrides else parse_config(config_to_dict(config), overrides)
        else:
            cfg = load_config(find_config(str(config)), overrides)
        return cls(cfg, algorithm=algorithm, seed=seed)

    # -- the loop ---------------------------------------------------------------------------

    def _round_keys(self, t: int):
        key_t = jax.random.fold_in(self._seed_key, t)
        return jax.random.fold_in(key_t, 1), jax.random.fold_in(key_t, 2)

    def suggest(self) -> np.ndarray:
        """(n,) the setting to deploy for the next observation."""
        k_act, _ = self._round_keys(self.rounds + 1)
        action, _ = self._act(k_act, self._state, self._params, self._problem)
        return np.asarray(action, np.float64)

    def observe(self, setting, losses, allow_off_policy: bool = False) -> dict:
        """Add observations; returns what happened (``rounds``, ``reoptimised``, ``updated``).

        Args:
          setting: (n,) the setting the losses were measured at, or (B, n) one per row.
          losses: (k,) per-criterion losses, or (B, k) for B observations (in order).
          allow_off_policy: accept settings other than the suggested one.
        """
        n, k = self.num_coords, self.num_criteria
        ss, ys = _rows(setting, losses, n, k, "losses", f"one loss per criterion, k = {k}")
        # All or nothing: step a copy, commit once every row is accepted.
        state, rounds, s_prev = self._state, self.rounds, self.last_setting
        movement, off = self.movement, self.off_policy
        updates, triggers, reopts = self.updates.copy(), self.triggers.copy(), self.reoptimisations
        dt = self._dtype
        for j in range(ys.shape[0]):
            t = rounds + 1
            k_act, k_upd = self._round_keys(t)
            suggested, state = self._act(k_act, state, self._params, self._problem)
            played = jnp.asarray(ss[j], dt)
            if not bool(jnp.all(played == suggested)):
                if not allow_off_policy:
                    raise TunerError(
                        "setting",
                        f"observation {j}: {ss[j].tolist()} is not the suggested setting "
                        f"{np.asarray(suggested, np.float64).tolist()} (pass allow_off_policy / "
                        f"--allow-off-policy to learn from another setting)")
                off += 1
            fb = Feedback(y=jnp.asarray(ys[j], dt), expected_loss=jnp.asarray(jnp.nan, dt))
            state, info = self._update(k_upd, state, played, fb, self._params, self._problem)
            played64 = np.asarray(played, np.float64)
            movement += float(np.sum(np.abs(played64 - s_prev)))
            s_prev = played64
            updates += np.asarray(info.updated, np.int64)
            triggers += np.asarray(info.triggered, np.int64)
            reopts += int(info.reoptimised)
            rounds = t
        self._state, self.rounds, self.last_setting = state, rounds, s_prev
        self.movement, self.off_policy = movement, off
        self.updates, self.triggers, self.reoptimisations = updates, triggers, reopts
        return {"rounds": self.rounds, "observations": int(ys.shape[0]),
                "suggested": self.suggest().tolist()}

    # -- what it knows ----------------------------------------------------------------------

    def status(self) -> dict:
        """Rounds, updates, movement, and per criterion the estimate and its confidence."""

        state, prob = self._state, self._problem
        out = {
            "config": self.cfg.name, "algorithm": self.algorithm, "kind": self.kind,
            "seed": self.seed, "rounds": self.rounds,
            "reoptimisations": self.reoptimisations,
            "updates": self.updates.tolist(), "triggers": self.triggers.tolist(),
            "movement": self.movement, "off_policy_observations": self.off_policy,
            "last_setting": self.last_setting.tolist(), "suggested": self.suggest().tolist(),
        }
        stats = getattr(state, "stats", None)
        per_criterion = (stats is not None and np.ndim(stats.inv) == 3
                         and stats.inv.shape[0] == self.num_criteria)
        if per_criterion:
            theta = np.asarray(jax.vmap(linalg.theta_hat)(stats), np.float64)
            mask = np.asarray(prob.feat_mask)
            s = jnp.asarray(out["suggested"], self._dtype)
            phi = all_features(self._structure, prob, s)
            mean = np.asarray(jnp.sum(phi * jax.vmap(linalg.theta_hat)(stats), -1), np.float64)
            q = np.asarray(jnp.einsum("ki,kij,kj->k", phi, stats.inv, phi), np.float64)
            beta = np.asarray(exploration_radius(
                self._spec, self._params, prob.feat_mask,
                self._structure.env.feature_norm_sq_bound(self._structure, prob),
                jnp.asarray(self.rounds, self._dtype)), np.float64)
            beta = np.broadcast_to(beta, mean.shape)
            width = beta * np.sqrt(np.maximum(q, 0.0))
            out["criteria"] = [
                {"theta_hat": theta[i][mask[i]].tolist(),
                 "logdet_V": float(stats.logdet[i]),
                 "predicted_loss_at_suggested": float(mean[i]),
                 "confidence_halfwidth": float(width[i]), "beta": float(beta[i])}
                for i in range(self.num_criteria)]
            out["predicted_total_loss"] = {"estimate": float(mean.sum()),
                                           "lower": float((mean - width).sum()),
                                           "upper": float((mean + width).sum())}
        return out

    # -- files ------------------------------------------------------------------------------

    def save(self, path) -> Path:
        """Write the learner to ``path`` atomically (versioned ``.npz``)."""
        meta = {
            "family": self.family, "config": config_to_dict(self.cfg),
            "algorithm": self.algorithm, "seed": self.seed,
            "counters": {"rounds": self.rounds, "movement": self.movement,
                         "updates": self.updates.tolist(), "triggers": self.triggers.tolist(),
                         "reoptimisations": self.reoptimisations,
                         "off_policy": self.off_policy,
                         "last_setting": self.last_setting.tolist()},
        }
        return _save(path, meta, self._state)

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
        except (OSError, ValueError, KeyError) as e:
            raise TunerError("<state>", f"{path}: not a gsjax tuner state file ({e})") from None
        if meta.get("format") != _FORMAT:
            raise TunerError("<state>", f"{path}: not a gsjax tuner state file")
        if meta.get("version") != STATE_VERSION:
            raise TunerError("<state>", f"{path}: state version {meta.get('version')!r}; this "
                                        f"gsjax reads version {STATE_VERSION}")
        restore = {"leaves": leaves, "counters": meta["counters"]}
        if meta.get("family", "bandit") == "ogd":
            return OGDTuner(parse_oco_config(meta["config"]), algorithm=meta["algorithm"],
                            seed=meta["seed"], budget_index=meta.get("budget_index", 0),
                            _restore=restore)
        cfg = parse_config(meta["config"])
        return Tuner(cfg, algorithm=meta["algorithm"], seed=meta["seed"], _restore=restore)


class OGDTuner:
    """Randomized Lazy OGD (Section 6) for a live system: the gradient is what is observed.

    Built from a ``kind = "oco"`` config (:mod:`gsjax.oco`): its ``[problem]`` gives the shape
    (components, coordinates per component) and the bounds the step-size rule needs (target
    range, weights), an ``[algorithms.NAME]`` entry the algorithm (``ogd``, ``lazy_ogd``,
    ``componentwise_lazy_ogd``) and its budget, the first horizon of ``horizon`` the planned
    ``T`` (the switching probability is ``p = M/T``; its step rule gives ``eta``). With several
    budgets in the entry, ``budget_index`` picks one. No target is ever drawn.

    The loop differs from the bandit tuner in one way: OGD takes the gradient of the round's
    loss at its VIRTUAL iterate ``w_t`` (:meth:`query`), which is not always the deployed
    setting (:meth:`suggest`, ``s_t``; the lazy algorithms deploy ``w_t`` with probability
    ``p``). :meth:`observe` takes the setting that was deployed and the gradient at the query
    point. Keys follow :mod:`gsjax.oco.runner`, so fed the gradients of a simulated run the
    tuner deploys exactly the simulator's settings (``tests/test_tuner.py``).
    """

    family = "ogd"

    def __init__(self, cfg, algorithm: str | None = None, seed: int = 0, budget_index: int = 0,
                 _restore: dict | None = None):
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise TunerError("seed", f"must be an integer >= 0; got {seed!r}")
        names = [e.name for e in cfg.algorithms]
        algorithm = names[0] if algorithm is None else algorithm
        if algorithm not in names:
            raise TunerError("algorithm", f"no algorithm entry {algorithm!r} in the config; "
                                          f"entries: {names}")
        entry = next(e for e in cfg.algorithms if e.name == algorithm)
        if cfg.dtype == "float64":
            jax.config.update("jax_enable_x64", True)
        dtype = jnp.float64 if cfg.dtype == "float64" else jnp.float32
        horizon = int(cfg.horizons[0])
        oexp.check(cfg)
        params, budgets = oexp.entry_params(cfg, entry, horizon, dtype)
        if not 0 <= budget_index < params.p.shape[0]:
            raise TunerError("budget_index", f"entry {algorithm!r} has {params.p.shape[0]} "
                                             f"budget(s); got index {budget_index}")
        self._params = jax.tree_util.tree_map(lambda a: a[budget_index], params)
        self.budget = np.asarray(budgets[budget_index], np.float64)
        self.cfg, self.algorithm, self.seed, self.kind = cfg, algorithm, int(seed), entry.algorithm
        self.horizon, self.budget_index = horizon, int(budget_index)
        self._spec = oexp.spec_of(cfg)
        pc = cfg.problem
        self._problem = make_oco_problem(self._spec, pc.s0, pc.target_low, pc.target_high,
                                         pc.weights, pc.drift, dtype)
        self._algo = oalgs.make(entry.algorithm, self._spec)
        self._dtype = dtype
        self._seed_key = jax.random.fold_in(jax.random.key(cfg.root_seed), self.seed)
        self.num_coords, self.num_components = self._spec.n, self._spec.num_components
        key = ("oco", self._spec, entry.algorithm)
        if key not in _COMPILED:
            _COMPILED[key] = (jax.jit(self._algo.act), jax.jit(self._ogd_step))
        self._act, self._step = _COMPILED[key]
        init_key = jax.random.fold_in(jax.random.fold_in(self._seed_key, 0), 1)
        state = self._algo.init(init_key, self._params, self._problem)
        k = self.num_components
        if _restore is None:
            self._state = state
            self.rounds, self.movement, self.off_policy = 0, 0.0, 0
            self.switches = np.zeros(k, np.int64)
            self.last_setting = np.asarray(self._problem.s0, np.float64)
        else:
            self._state = _restored(state, _restore)
            c = _restore["counters"]
            self.rounds, self.movement = int(c["rounds"]), float(c["movement"])
            self.off_policy = int(c["off_policy"])
            self.switches = np.asarray(c["switches"], np.int64)
            self.last_setting = np.asarray(c["last_setting"], np.float64)

    @staticmethod
    def _ogd_step(state, grad, eta):
        """``w <- clip(w - eta * g, 0, 1)`` with the observed gradient (one round)."""
        w = jnp.clip(state.w - jnp.repeat(eta, grad.shape[-1] // eta.shape[-1]) * grad, 0.0, 1.0)
        return state._replace(w=w)

    @classmethod
    def from_config(cls, config, algorithm: str | None = None, seed: int = 0,
                    overrides=(), budget_index: int = 0) -> "OGDTuner":
        if isinstance(config, OCOConfig):
            cfg = config if not overrides else parse_oco_config(oco_config_to_dict(config),
                                                                overrides)
        else:
            cfg = load_oco_config(find_config(str(config)), overrides)
        return cls(cfg, algorithm=algorithm, seed=seed, budget_index=budget_index)

    def _act_at(self, t: int, state):
        k_act = jax.random.fold_in(jax.random.fold_in(self._seed_key, t), 1)
        return self._act(k_act, state, self._params, self._problem)

    def suggest(self) -> np.ndarray:
        """(n,) the setting to deploy this round (``s_t``)."""
        s, _ = self._act_at(self.rounds + 1, self._state)
        return np.asarray(s, np.float64)

    def query(self) -> np.ndarray:
        """(n,) where this round's loss gradient is to be measured (the virtual iterate)."""
        return np.asarray(self._state.w, np.float64)

    def observe(self, setting, gradient, allow_off_policy: bool = False) -> dict:
        """Add rounds: the deployed ``setting`` (n,) or (B, n) and the gradient (n,) or (B, n)
        of each round's loss at the query point."""
        n = self.num_coords
        ss, gs = _rows(setting, gradient, n, n, "gradient",
                       f"the loss gradient at the query point, n = {n}")
        state, rounds, s_prev = self._state, self.rounds, self.last_setting
        movement, off, switches = self.movement, self.off_policy, self.switches.copy()
        for j in range(gs.shape[0]):
            t = rounds + 1
            suggested, acted = self._act_at(t, state)
            played = jnp.asarray(ss[j], self._dtype)
            if not bool(jnp.all(played == suggested)):
                if not allow_off_policy:
                    raise TunerError(
                        "setting",
                        f"observation {j}: {ss[j].tolist()} is not the suggested setting "
                        f"{np.asarray(suggested, np.float64).tolist()} (pass allow_off_policy / "
                        f"--allow-off-policy to record another deployed setting)")
                off += 1
                acted = acted._replace(s=played)
            switches += np.asarray(acted.switched, np.int64)
            state = self._step(acted, jnp.asarray(gs[j], self._dtype), self._params.eta)
            played64 = np.asarray(played, np.float64)
            movement += float(np.sum(np.abs(played64 - s_prev)))
            s_prev, rounds = played64, t
        self._state, self.rounds, self.last_setting = state, rounds, s_prev
        self.movement, self.off_policy, self.switches = movement, off, switches
        return {"rounds": self.rounds, "observations": int(gs.shape[0]),
                "suggested": self.suggest().tolist(), "query": self.query().tolist()}

    def status(self) -> dict:
        return {
            "config": self.cfg.name, "algorithm": self.algorithm, "kind": self.kind,
            "seed": self.seed, "rounds": self.rounds, "planned_horizon": self.horizon,
            "budget": self.budget.tolist(),
            "switch_probability": np.asarray(self._params.p, np.float64).tolist(),
            "step_size": np.asarray(self._params.eta, np.float64).tolist(),
            "switches": self.switches.tolist(), "movement": self.movement,
            "off_policy_observations": self.off_policy,
            "last_setting": self.last_setting.tolist(), "suggested": self.suggest().tolist(),
            "query": self.query().tolist(),
        }

    def save(self, path) -> Path:

        meta = {
            "family": self.family, "config": oco_config_to_dict(self.cfg),
            "algorithm": self.algorithm, "seed": self.seed, "budget_index": self.budget_index,
            "counters": {"rounds": self.rounds, "movement": self.movement,
                         "switches": self.switches.tolist(), "off_policy": self.off_policy,
                         "last_setting": self.last_setting.tolist()},
        }
        return _save(path, meta, self._state)


def open_config(config, algorithm: str | None = None, seed: int = 0, overrides=(),
                budget_index: int = 0):
    """A fresh :class:`Tuner` or :class:`OGDTuner`, by the config's kind."""

    if isinstance(config, OCOConfig):
        return OGDTuner.from_config(config, algorithm, seed, overrides, budget_index)
    if not isinstance(config, ExperimentConfig):
        path = find_config(str(config))
        if config_kind(path) == "oco":
            return OGDTuner.from_config(path, algorithm, seed, overrides, budget_index)
        config = path
    return Tuner.from_config(config, algorithm, seed, overrides)


def load(path):
    """Read a tuner state file of either family."""
    return Tuner.load(path)
