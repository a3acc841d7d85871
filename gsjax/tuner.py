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

from gsjax.config import ConfigError, ExperimentConfig, config_to_dict, load_config, parse_config
from gsjax.problem import Feedback

__all__ = ["Tuner", "TunerError", "STATE_VERSION"]

STATE_VERSION = 1
_FORMAT = "gsjax-tuner"


class TunerError(ConfigError):
    """A bad input to the tuner; ``field`` names what is wrong."""


_COMPILED: dict = {}


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


class Tuner:
    """One learner of a config's algorithm, stepped by the observations of a live system.

    Build with :meth:`from_config` or :meth:`load`.
    """

    def __init__(self, cfg: ExperimentConfig, algorithm: str | None = None, seed: int = 0,
                 _restore: dict | None = None):
        from gsjax import experiment

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
        built = experiment.build(cfg_one)
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
            leaves, treedef = jax.tree_util.tree_flatten(state)
            saved = _restore["leaves"]
            if len(saved) != len(leaves) or any(
                    np.shape(a) != np.shape(b) for a, b in zip(saved, leaves)):
                raise TunerError("<state>", "the saved learner does not match its config "
                                            "(shapes differ); was the file edited?")
            self._state = jax.tree_util.tree_unflatten(
                treedef, [jnp.asarray(a, b.dtype) for a, b in zip(saved, leaves)])
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
            from gsjax.cli import find_config

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
        y = _vector(losses, k, "losses", f"one loss per criterion, k = {k}")
        s = _vector(setting, n, "setting", f"one value per coordinate, n = {n}")
        ys = y[None] if y.ndim == 1 else y
        ss = s[None] if s.ndim == 1 else s
        if ss.shape[0] == 1 and ys.shape[0] > 1:
            ss = np.broadcast_to(ss, (ys.shape[0], n))
        if ss.shape[0] != ys.shape[0]:
            raise TunerError("setting", f"{ss.shape[0]} settings for {ys.shape[0]} observations")
        if np.any(ss < 0.0) or np.any(ss > 1.0):
            bad = np.argwhere((ss < 0.0) | (ss > 1.0))[0]
            raise TunerError("setting", f"must lie in the box [0, 1]^{n}; coordinate {bad[-1]} "
                                        f"is {float(ss[tuple(bad)])!r}")
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
        from gsjax import linalg
        from gsjax.algorithms._ucb import exploration_radius
        from gsjax.problem import all_features

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
            beta = np.asarray(exploration_radius(self._spec, self._params, prob,
                                                 jnp.asarray(self.rounds, self._dtype)),
                              np.float64)
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
        from gsjax.results import write_npz

        meta = {
            "format": _FORMAT, "version": STATE_VERSION, "config": config_to_dict(self.cfg),
            "algorithm": self.algorithm, "seed": self.seed,
            "counters": {"rounds": self.rounds, "movement": self.movement,
                         "updates": self.updates.tolist(), "triggers": self.triggers.tolist(),
                         "reoptimisations": self.reoptimisations,
                         "off_policy": self.off_policy,
                         "last_setting": self.last_setting.tolist()},
        }
        arrays = {"meta": np.asarray(json.dumps(meta))}
        for i, leaf in enumerate(jax.tree_util.tree_leaves(self._state)):
            arrays[f"state/{i:05d}"] = np.asarray(leaf)
        return write_npz(path, arrays)

    @classmethod
    def load(cls, path) -> "Tuner":
        """Read a tuner written by :meth:`save`."""
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
        cfg = parse_config(meta["config"])
        return cls(cfg, algorithm=meta["algorithm"], seed=meta["seed"],
                   _restore={"leaves": leaves, "counters": meta["counters"]})
