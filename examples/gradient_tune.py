"""Gradient tuning through whole runs: Adam on the step size of Randomized Lazy OGD (Section 6).

`gsjax tune` differentiates the total regret (loss regret + movement) of whole runs with respect
to `eta_scale`, the multiplier of the step rule's step. The setting is the one where the rule's
own step is too large (the learner starts at a corner, movement weighs 10): Section 6's
adversarial trade-off at its budget point 15 (M = T^0.85), shrunk to T = 2000, 16 tuning seeds,
32 held-out seeds and 10 Adam steps; about 15 s on 2 CPU cores. The full-size run is on the
"Gradients through whole runs" page. Prints the tuned point, the held-out hard regret before and
after, and the gradient check (autodiff against central finite differences).
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

with tempfile.TemporaryDirectory() as tmp:
    subprocess.run(
        [sys.executable, "-m", "gsjax", "tune", "section6_tradeoff", "--params", "eta_scale",
         "--set", "problem.s0=0.0", "--set", "move_cost=10", "--point", "15",
         "--seeds", "16", "--heldout-seeds", "32", "--steps", "10", "--horizon", "2000",
         "--out", tmp, "--quiet"],
        check=True)
    tune = json.loads((Path(tmp) / "tune.json").read_text())

print(json.dumps({
    "eta_scale": tune["params"]["eta_scale"],
    "heldout_hard_regret": {k: v["mean"] for k, v in tune["heldout_hard"].items()},
    "heldout_hard_stderr": {k: v["stderr"] for k, v in tune["heldout_hard"].items()},
    "gradient_check_max_rel_error": tune["gradient_check"]["max_rel_error"],
}, indent=1))
