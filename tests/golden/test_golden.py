"""Golden outputs: every built-in config at a tiny size, the tuner and ``gsjax tune``.

Recorded by ``tests/golden/record.py`` before the one-core refactor; a refactor keeps them.
With the JAX version they were recorded with, numbers must be equal bit for bit (the same
arithmetic; the cases of ``REASSOCIATED`` below to a stated tolerance: reassociated on purpose,
or rounded differently on another CPU). With another JAX version XLA may fuse differently, so
floats are compared to ``rtol = 1e-4`` (float32 runs over a few rounds) and integers and
decisions exactly; re-record (and say why) only for a change meant to move numbers.

The configs whose own test files run them end to end (Adult, the joint factor graph, the
adaptive graph, the large graphs) and the OCO tune are in ``-m slow``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import CASES  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
SLOW = {"run_section7_3", "run_figure2_joint", "run_adaptive_graph", "run_large_graphs",
        "tune_oco"}
RTOL = 1e-4
# Cases whose arithmetic a refactor reassociated on purpose, with the tolerance it needs and why:
# the relaxed path became the bandit kernel with the soft logic (issue 15). Its forward values
# at the initial point are unchanged to the last bit; the reverse pass reassociates at the 1e-15
# level, which two descent steps carry into the trace, and the gradient check's relative error
# (a difference of nearly equal numbers) moves by 2e-8 relative.
# run_section7_3 (slow; UCI Adult, PGD in float32) was re-recorded on 2026-12-04 and compared
# exactly again (until the machine-dependence below): 843ba38 (YNNPACK fusions off, a
# correctness fix) changed the classifier's float32 training, which moved tau* by 4.4e-6 and the
# regret against it by up to 2e-3 relative (every count, decision and action equal); the slow
# cases were not rerun then, so it failed unseen.
# run_adaptive_graph (slow; adaptive_lazy with PGD in float32): XLA CPU's older loop emitter
# (runner.COMPILER_OPTIONS, 1a1be37) rounds its fused float32 arithmetic differently; the
# previous commit reproduces the recording bit for bit, 1a1be37 moves the mean regret by 3e-8
# relative and its standard error by 4e-6. Every count and decision is equal (integers are
# compared exactly).
# Machine-dependent, with the same JAX (XLA compiles for the host CPU, whose vector width sets
# the order of fused float32 sums): on an AMD EPYC machine (AVX2, no AVX-512; 2026-12-05) the
# tuner's status (theta_hat, the confidence half-widths, the predicted total loss) differs from
# the recording by up to 4.4e-7 relative; three slow cases by up to 1.1e-5 relative
# (run_figure2_joint: the joint estimator's regret), 4.4e-5 (run_section7_3: PGD's largest LCB
# residual, a difference of nearly equal numbers) and 3.6e-8 absolute (run_large_graphs, the
# same residual); every count, decision and action equal. The other cases are equal there bit
# for bit.
REASSOCIATED = {"tune_bandit": 1e-6, "run_adaptive_graph": 1e-4, "tuner_lazy": 1e-5,
                "tuner_async_lazy": 1e-5, "run_figure2_joint": 1e-4, "run_section7_3": 1e-4,
                "run_large_graphs": 1e-4}


def _close(a, b, exact: bool, path: str = "", rtol: float = RTOL) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), path
        for k in a:
            _close(a[k], b[k], exact, f"{path}.{k}", rtol)
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, exact, f"{path}[{i}]", rtol)
    elif isinstance(a, float) and not exact:
        assert isinstance(b, (int, float)), path
        assert (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=rtol,
                                                                 abs_tol=1e-6), (path, a, b)
    else:
        assert a == b, (path, a, b)


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else []) for n in CASES])
def test_golden(name, tmp_path):
    fn, arg = CASES[name]
    doc, arrays = fn(arg, tmp_path)
    ref = json.loads((DATA / f"{name}.json").read_text())
    exact = ref["jax_version"] == jax.__version__ and name not in REASSOCIATED
    rtol = REASSOCIATED.get(name, RTOL) if ref["jax_version"] == jax.__version__ else RTOL
    _close(ref["doc"], json.loads(json.dumps(doc)), exact, rtol=rtol)
    if name.startswith("run_") and "algorithms" in doc:
        for algo in doc["algorithms"].values():  # s* is the minimiser of the expected loss
            if "prediction_regret" in algo:
                assert algo["prediction_regret"]["mean"] >= -1e-4, name
    with np.load(DATA / f"{name}.npz") as z:
        assert sorted(z.files) == sorted(arrays)
        for key in z.files:
            want, got = z[key], np.asarray(arrays[key])
            assert want.dtype == got.dtype and want.shape == got.shape, key
            if exact or not np.issubdtype(want.dtype, np.floating):
                np.testing.assert_array_equal(got, want, err_msg=key)
            else:
                np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6, err_msg=key)
