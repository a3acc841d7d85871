r"""UCI Adult (Census Income): the data of Section 7.3, and the logistic-regression classifier.

Data source (CC BY 4.0; credit it wherever the data or a derived file is shipped):
Becker, B. and Kohavi, R. (1996). *Adult*. UCI Machine Learning Repository,
https://doi.org/10.24432/C5XW20.

``gsjax/data/adult.npz`` is derived from the raw ``adult.data`` and ``adult.test`` by
``scripts/build_adult_data.py`` (its ``source`` entry carries the citation): the columns the
experiment uses in compact integer dtypes, rows in file order, training rows first. Rows with a
missing value (``?``) are dropped, as ``adult.names`` describes: 30,162 training and 15,060
test rows. ``fnlwgt`` (a census sampling weight) and ``education`` (one-to-one with
``education-num``) are not kept. :func:`load` reads it, or parses the raw files (same arrays).

The classifier (:func:`train_logistic_regression`): logistic regression on one-hot categorical
and standardised numeric columns (TRAINING rows' statistics; ``sex`` included, as in the usual
Adult baselines), L2 penalty :math:`\tfrac{\lambda}{2}\|w\|^2` on the weights, fitted by
full-batch L-BFGS (optax) for a fixed number of steps in one ``lax.scan``; its key draws the
small starting weights (the problem is convex).
"""

from __future__ import annotations

import functools
import importlib.resources
import os
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gsjax.results import write_npz

__all__ = [
    "CITATION", "RAW_COLUMNS", "CATEGORICAL", "NUMERIC", "LABEL", "NUM_TRAIN", "NUM_TEST",
    "AdultTable", "Classifier", "shipped_path", "parse_raw", "load", "save", "encode",
    "train_logistic_regression", "held_out_scores",
]

CITATION = (
    "Becker, B. and Kohavi, R. (1996). Adult. UCI Machine Learning Repository, "
    "https://doi.org/10.24432/C5XW20. Licensed CC BY 4.0. Derived by gsjax "
    "scripts/build_adult_data.py: rows with missing values ('?') dropped, columns fnlwgt and "
    "education removed, categories coded as int8 (codes index the 'categories/<column>' arrays)."
)

# The 15 fields of adult.data / adult.test, in file order (adult.names).
RAW_COLUMNS = ("age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
               "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
               "hours_per_week", "native_country", "income")
CATEGORICAL = ("workclass", "marital_status", "occupation", "relationship", "race", "sex",
               "native_country")
# Numeric columns kept and their stored dtypes (capital_gain reaches 99,999).
NUMERIC = {"age": np.int16, "education_num": np.int16, "capital_gain": np.int32,
           "capital_loss": np.int16, "hours_per_week": np.int16}
LABEL = "income"  # stored as int8: 1 for '>50K', 0 for '<=50K'
NUM_TRAIN = 30162
NUM_TEST = 15060


class AdultTable(NamedTuple):
    """The kept columns of the complete rows; training rows first, then test rows."""

    columns: dict  # name -> (N,) integer array (categorical codes int8, numbers int16/int32)
    categories: dict  # categorical name -> tuple of category strings (code i -> categories[i])
    num_train: int  # rows [0, num_train) are adult.data's, the rest adult.test's

    @property
    def num_rows(self) -> int:
        return int(self.columns[LABEL].shape[0])

    def code(self, column: str, value: str) -> int:
        """The integer code of ``value`` in a categorical ``column``."""
        return self.categories[column].index(value)


def shipped_path() -> Path:
    """Path of the data file shipped inside the package."""
    return Path(str(importlib.resources.files("gsjax") / "data" / "adult.npz"))


def _read_rows(path: Path, skip_first: bool) -> list[list[str]]:
    rows = []
    for line in path.read_text(encoding="ascii").splitlines()[int(skip_first):]:
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != len(RAW_COLUMNS):
            raise ValueError(f"{path}: expected {len(RAW_COLUMNS)} fields, got {line!r}")
        if "?" in fields:  # adult.names: instances with unknown values are removed
            continue
        fields[-1] = fields[-1].rstrip(".")  # adult.test's labels end with '.'
        rows.append(fields)
    return rows


def parse_raw(folder: str | os.PathLike) -> AdultTable:
    """Parse ``adult.data`` and ``adult.test`` in ``folder`` (the test file's first line skipped);
    category vocabularies: the sorted distinct values over the complete rows of both files."""
    train = _read_rows(Path(folder) / "adult.data", skip_first=False)
    rows = train + _read_rows(Path(folder) / "adult.test", skip_first=True)
    idx = {name: i for i, name in enumerate(RAW_COLUMNS)}
    columns, categories = {}, {}
    for name in CATEGORICAL:
        values = [r[idx[name]] for r in rows]
        categories[name] = vocab = tuple(sorted(set(values)))
        if len(vocab) > 127:
            raise ValueError(f"column {name} has {len(vocab)} categories; int8 codes hold 127")
        lookup = {v: i for i, v in enumerate(vocab)}
        columns[name] = np.asarray([lookup[v] for v in values], np.int8)
    for name, dtype in NUMERIC.items():
        raw = np.asarray([int(r[idx[name]]) for r in rows], np.int64)
        if raw.min() < np.iinfo(dtype).min or raw.max() > np.iinfo(dtype).max:
            raise ValueError(f"column {name} does not fit {np.dtype(dtype).name}")
        columns[name] = raw.astype(dtype)
    labels = [r[idx[LABEL]] for r in rows]
    if unknown := set(labels) - {">50K", "<=50K"}:
        raise ValueError(f"unexpected labels {sorted(unknown)}")
    columns[LABEL] = np.asarray([lab == ">50K" for lab in labels], np.int8)
    return AdultTable(columns, categories, len(train))


def save(table: AdultTable, path: str | os.PathLike) -> Path:
    """Write ``table`` as a compressed ``.npz`` with its citation (no pickled objects)."""
    return write_npz(path, {
        **{f"col/{k}": v for k, v in table.columns.items()},
        **{f"categories/{k}": np.asarray(v) for k, v in table.categories.items()},
        "num_train": np.asarray(table.num_train, np.int32), "source": np.asarray(CITATION)})


def _source(raw_folder) -> str | None:
    """The in-memory caches' key of a data source: None (shipped file) or an absolute folder."""
    return None if raw_folder is None else str(Path(raw_folder).resolve())


@functools.lru_cache(maxsize=4)
def _load_cached(path: str | None) -> AdultTable:
    if path is not None:
        return parse_raw(path)
    with np.load(shipped_path(), allow_pickle=False) as z:
        columns = {k[4:]: z[k] for k in z.files if k.startswith("col/")}
        categories = {k[11:]: tuple(str(s) for s in z[k]) for k in z.files
                      if k.startswith("categories/")}
        num_train = int(z["num_train"])
    return AdultTable(columns, categories, num_train)


def load(raw_folder: str | os.PathLike | None = None) -> AdultTable:
    """The Adult table: from the shipped file, or parsed from a folder holding the raw files;
    cached in memory per source (the arrays are shared: do not modify them in place)."""
    return _load_cached(_source(raw_folder))


def encode(table: AdultTable) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)``: one-hot categorical plus standardised numeric features, float32, all rows;
    numbers standardised with the training rows' mean and standard deviation (no test leak)."""
    parts = [np.eye(len(table.categories[c]), dtype=np.float32)[table.columns[c].astype(np.int64)]
             for c in CATEGORICAL]
    tr = slice(0, table.num_train)
    for name in NUMERIC:
        x = table.columns[name].astype(np.float64)
        mu, sd = x[tr].mean(), x[tr].std()
        parts.append(((x - mu) / sd).astype(np.float32)[:, None])
    return np.concatenate(parts, axis=1), table.columns[LABEL].astype(np.float32)


class Classifier(NamedTuple):
    """A fitted logistic regression and its held-out numbers."""

    weights: np.ndarray  # (p,) float32
    bias: float
    test_scores: np.ndarray  # (num_test,) float32, P(income > 50K) on the test rows
    test_accuracy: float  # at threshold 0.5
    train_accuracy: float


def _fit(X, y, key, steps: int, l2: float):
    params = {"w": 0.01 * jax.random.normal(key, (X.shape[1],), X.dtype),
              "b": jnp.zeros((), X.dtype)}

    def loss(params):
        z = X @ params["w"] + params["b"]
        # log(1 + e^z) - y z, the numerically stable binary cross-entropy on logits.
        nll = jnp.mean(jnp.logaddexp(0.0, z) - y * z)
        return nll + 0.5 * l2 * jnp.sum(params["w"] ** 2)

    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(loss)

    def step(carry, _):
        params, state = carry
        value, grad = value_and_grad(params, state=state)
        updates, state = opt.update(grad, state, params, value=value, grad=grad, value_fn=loss)
        return (optax.apply_updates(params, updates), state), value

    (params, _), values = jax.lax.scan(step, (params, opt.init(params)), None, length=steps)
    return params, values


_fit_jit = jax.jit(_fit, static_argnames=("steps",))


@functools.lru_cache(maxsize=8)
def _train_cached(raw_folder: str | None, seed: int, steps: int, l2: float) -> Classifier:
    table = load(raw_folder)
    X, y = encode(table)
    n = table.num_train
    params, _ = _fit_jit(jnp.asarray(X[:n]), jnp.asarray(y[:n]), jax.random.key(seed), steps, l2)
    w, b = np.asarray(params["w"], np.float32), np.float32(params["b"])
    scores = (1.0 / (1.0 + np.exp(-(X @ w + b).astype(np.float64)))).astype(np.float32)
    pred = scores >= np.float32(0.5)
    acc = lambda sl: float(np.mean(pred[sl] == (y[sl] > 0.5)))  # noqa: E731
    return Classifier(w, float(b), scores[n:], acc(slice(n, None)), acc(slice(0, n)))


def train_logistic_regression(seed: int = 0, steps: int = 100, l2: float = 1e-4,
                              raw_folder: str | os.PathLike | None = None) -> Classifier:
    """A :class:`Classifier` fitted on the training rows, scoring the test rows; cached in
    memory per arguments. ``seed``: key of the starting weights (``jax.random.key(seed)``);
    ``steps``: L-BFGS iterations; ``l2``: weight of the L2 penalty; ``raw_folder``: parse the
    raw files there instead of reading the shipped file."""
    return _train_cached(_source(raw_folder), int(seed), int(steps), float(l2))


def held_out_scores(clf: Classifier, table: AdultTable
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(scores, labels, male)`` of the test rows: float32, bool, bool."""
    n = table.num_train
    male = table.columns["sex"][n:] == table.code("sex", "Male")
    return clf.test_scores, table.columns[LABEL][n:] > 0, male
