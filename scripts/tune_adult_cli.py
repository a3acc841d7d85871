"""Tune the UCI Adult decision threshold through the ``gsjax tuner`` CLI loop, as a live system would.

    python scripts/tune_adult_cli.py                     # 600 rounds in-process, about 1 min
    python scripts/tune_adult_cli.py --subprocess --rounds 20   # real processes (~3 s a call)

The "live system" is the Section 7.3 environment (``configs/section7_3.toml``): each round it
deploys the threshold the tuner suggests, measures the loss of a fresh batch of B held-out rows
at that threshold, and reports it. The loop is exactly what an engineer would script::

    gsjax tuner init section7_3 STATE --algorithm lazy
    loop:  TAU=$(gsjax tuner suggest STATE)
           ... deploy TAU, measure LOSS ...
           gsjax tuner observe STATE --setting "$TAU" --losses "[LOSS]"

By default the CLI is called in-process (``gsjax.cli.main``: the same argument parsing, state
file, lock and checks, without paying JAX's import per call); ``--subprocess`` runs each call as
its own process. Writes ``OUT/threshold.png`` (the deployed threshold over time, with the
optimum ``tau*``) and ``OUT/status.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _gsjax(args: list[str], use_subprocess: bool) -> str:
    if use_subprocess:
        out = subprocess.run([sys.executable, "-m", "gsjax", *args], capture_output=True,
                             text=True, check=False)
        if out.returncode:
            raise SystemExit(f"gsjax {' '.join(args)} failed: {out.stderr.strip()}")
        return out.stdout
    from gsjax import cli

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cli.main(args)
    if rc:
        raise SystemExit(f"gsjax {' '.join(args)} failed with exit {rc}")
    return buf.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=600)
    ap.add_argument("--algorithm", default="lazy", choices=["lazy", "linucb"])
    ap.add_argument("--batch-size", type=int, default=500)
    ap.add_argument("--gap-estimator", default="signed", choices=["plain", "signed", "split"],
                    help="how the system measures the TPR gap (default: the unbiased 'signed')")
    ap.add_argument("--seed", type=int, default=0, help="the system's batch draws")
    ap.add_argument("--out", type=Path, default=Path("runs/tune_adult"))
    ap.add_argument("--subprocess", action="store_true", help="one process per CLI call")
    args = ap.parse_args(argv)

    import jax
    import jax.numpy as jnp
    import numpy as np

    from gsjax import experiment
    from gsjax import problem as P
    from gsjax.config import load_config

    # The live system: the Section 7.3 environment (its ground truth is used only to draw).
    sets = [f"problem.adult.batch_size={args.batch_size}",
            f"problem.adult.gap_estimator={args.gap_estimator}"]
    cfg = load_config(ROOT / "configs" / "section7_3.toml", sets)
    built = experiment.build(cfg)
    system_key = jax.random.key(10_000 + args.seed)
    measure = jax.jit(lambda key, tau: P.observe(key, built.structure, built.problem, tau).y)
    tau_star = float(np.asarray(built.problem.s_star)[0])

    args.out.mkdir(parents=True, exist_ok=True)
    state = args.out / "learner.npz"
    _gsjax(["tuner", "init", str(ROOT / "configs" / "section7_3.toml"), str(state),
            "--algorithm", args.algorithm, "--set", sets[0], "--set", sets[1], "--force"],
           args.subprocess)
    deployed = []
    for t in range(1, args.rounds + 1):
        tau = json.loads(_gsjax(["tuner", "suggest", str(state)], args.subprocess))
        loss = np.asarray(measure(jax.random.fold_in(system_key, t), jnp.asarray(tau,
                                                                                 jnp.float32)))
        _gsjax(["tuner", "observe", str(state), "--setting", json.dumps(tau),
                "--losses", json.dumps([float(v) for v in loss])], args.subprocess)
        deployed.append(tau[0])
        if t % 50 == 0 or t == args.rounds:
            print(f"round {t}: deployed tau = {tau[0]:.4f}, measured loss {float(loss[0]):.4f}",
                  flush=True)
    status = json.loads(_gsjax(["tuner", "status", str(state)], args.subprocess))
    status["tau_star"] = tau_star
    status["deployed"] = deployed
    (args.out / "status.json").write_text(json.dumps(status, indent=2) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=110)
    ax.step(np.arange(1, len(deployed) + 1), deployed, where="post",
            label=f"deployed threshold ({args.algorithm})")
    ax.axhline(tau_star, color="k", ls="--", lw=1, label=f"τ* = {tau_star:.3f}")
    ax.set_xlabel("round (one observed batch each)")
    ax.set_ylabel("threshold τ")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"gsjax tuner on UCI Adult: {status['reoptimisations']} re-optimisations in "
                 f"{len(deployed)} rounds, movement {status['movement']:.2f}", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(args.out / "threshold.png")
    print(f"final tau {deployed[-1]:.4f} (tau* {tau_star:.4f}); {status['reoptimisations']} "
          f"re-optimisations, movement {status['movement']:.3f}; wrote {args.out}/threshold.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
