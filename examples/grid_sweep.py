"""A hyperparameter grid: every (beta, trigger_ratio) pair of the lazy algorithm in ONE compiled
program, then the best point, from Python.

A small Section 7.2-like problem (4 cliques x d = 2, linear features, exact vertex solver),
16 seeds x 500 rounds, a 4 x 3 grid. Prints one JSON object: every grid point's mean total
regret and the point the summary names as best. About 15 s on 2 CPU cores. Saved as a file, the
same config runs with `gsjax run grid.toml`; `--set grid.beta=[...]` adds a grid to any config.
"""

import json
import tomllib

from gsjax import experiment, parse_config

CONFIG = """
name = "grid_example"
seeds = 16
horizon = 500
[problem]
structure = "blocks"
num_blocks = 4
block_dim = 2
[problem.theta]
distribution = "normal"
per_seed = true
[problem.noise]
sigma = 0.5
[agent]
lambda_reg = 0.5
move_cost = 1.0
[algorithms.lazy]
[grid]
beta = [0.125, 0.25, 0.5, 1.0]
trigger_ratio = [1.5, 2.0, 4.0]
"""

cfg = parse_config(tomllib.loads(CONFIG))
summary = experiment.summarise(experiment.run_experiment(cfg))

rows = summary["grid"]["points"]
best = summary["algorithms"]["lazy"]
print(json.dumps({
    "axes": summary["grid"]["axes"],
    "points": [{"point": r["point"], "total_regret": r["algorithms"]["lazy"]["total_regret"]["mean"],
                "reoptimisations": r["algorithms"]["lazy"]["reoptimisations"]["mean"]}
               for r in rows],
    "best": {"point": best["grid_point"], "total_regret": best["total_regret"]["mean"]},
}, indent=1))
