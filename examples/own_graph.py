"""Your own graph, from Python: lazy against LinUCB and a policy that never moves.

Five criteria over six coordinates, each reading its own scope (overlaps allowed), linear
features, one draw of theta*, 32 seeds x 2000 rounds. Prints one JSON object: per policy the
mean prediction regret, movement cost, total regret and re-optimisations over the seeds, and
the problem's s* and theta*.
About 15 s on 2 CPU cores (compilation included). `python examples/own_graph.py [--seeds S]
[--horizon T]`.
"""

import argparse
import json

import jax
import numpy as np

import gsjax
from gsjax import problem as gproblem

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--seeds", type=int, default=32)
parser.add_argument("--horizon", type=int, default=2000)
args = parser.parse_args()

# criterion i reads the coordinates scopes[i]
scopes = gsjax.scopes_from_rows([[0, 1], [1, 2], [2, 3, 4], [4, 5], [5, 0]], num_coords=6)
structure = gsjax.make_structure(scopes, "linear", "independent")
problem = gsjax.make_problem(jax.random.key(0), structure, scopes, noise_sigma=0.3)
params = gsjax.AgentParams.create(structure.num_criteria, lambda_reg=0.5, beta=0.5)
move_cost = 0.1

out = {}
for name in ("lazy", "linucb"):
    algo = gsjax.algorithms.make(name, structure, gsjax.AgentSpec())
    res = gsjax.sweep(jax.random.key(1), range(args.seeds), algo, structure, problem, params,
                      move_cost=move_cost, horizon=args.horizon)
    t = res.totals
    out[name] = {
        "prediction_regret": float(np.mean(t.prediction_regret)),
        "movement_cost": float(np.mean(t.movement_cost)),
        "total_regret": float(np.mean(t.prediction_regret + t.movement_cost)),
        "reoptimisations": float(np.mean(t.reoptimisations)),
    }

# the trivial policy: stay at the start s0 forever (no movement, the same regret every round)
gap = float(gproblem.total_loss(structure, problem, problem.s0) - problem.loss_star)
out["stay_at_s0"] = {"prediction_regret": args.horizon * gap, "movement_cost": 0.0,
                     "total_regret": args.horizon * gap, "reoptimisations": 0.0}
out["s_star"] = np.asarray(problem.s_star).tolist()
out["theta"] = np.asarray(problem.theta).tolist()  # (k, d): criterion i's coefficients
print(json.dumps(out, indent=1))
