"""The tuner in a deployment loop: ask for a setting, deploy it only when it changed, measure one
loss per criterion, tell the learner.

The "live system" here is a stand-in: three blocks of two knobs, each criterion's loss linear in
its block with coefficients the learner never sees, plus Gaussian noise (NumPy, its own seed).
The learner is `gsjax.Tuner` with the lazy algorithm, its config given inline (shape and
hyperparameters only). 400 rounds, about 10 s on 2 CPU cores. Prints one JSON object: rounds,
redeployments, the learner's status counts, the movement the loop measured itself, and the true
regret of the deployed settings against never moving and against the best setting.
`gsjax tuner init/suggest/observe/status` is the same loop through files and processes.
"""

import itertools
import json
import tomllib

import numpy as np

import gsjax

CONFIG = """
name = "live_system"
[problem]
structure = "blocks"
num_blocks = 3
block_dim = 2
[agent]
lambda_reg = 0.5
beta = 0.5
move_cost = 1.0
[algorithms.lazy]
"""
ROUNDS, NOISE = 400, 0.3
rng = np.random.default_rng(0)
theta = rng.normal(size=(3, 2))  # the system's hidden coefficients: criterion i, knobs 2i, 2i+1


def measure(setting):
    """What the system reports for a deployed setting: one noisy loss per criterion."""
    return (theta * np.reshape(setting, (3, 2))).sum(axis=1) + NOISE * rng.normal(size=3)


def true_loss(setting):
    return float((theta * np.reshape(setting, (3, 2))).sum())


tuner = gsjax.Tuner(gsjax.parse_config(tomllib.loads(CONFIG)), algorithm="lazy")
deployed = np.full(6, 0.5)  # the system's setting before the loop (the config's s0)
start = deployed.copy()
redeploys, movement, loss_sum = 0, 0.0, 0.0
for _ in range(ROUNDS):
    setting = np.asarray(tuner.suggest())
    if not np.array_equal(setting, deployed):  # redeploy only on change
        movement += float(np.abs(setting - deployed).sum())
        deployed, redeploys = setting, redeploys + 1
    loss_sum += true_loss(deployed)
    tuner.observe(deployed, measure(deployed))

best = min(true_loss(v) for v in itertools.product((0.0, 1.0), repeat=6))  # linear: a vertex
status = tuner.status()
print(json.dumps({
    "rounds": status["rounds"],
    "redeploys": redeploys,
    "reoptimisations": status["reoptimisations"],
    "movement_status": status["movement"],
    "movement_measured": movement,
    "regret_tuner": loss_sum - ROUNDS * best,
    "regret_stay_at_start": ROUNDS * (true_loss(start) - best),
    "final_setting": deployed.tolist(),
    "theta": theta.tolist(),
}, indent=1))
