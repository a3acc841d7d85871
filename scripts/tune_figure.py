"""Figure and numbers of the README's gradient-tuning section (gsjax tune vs a [grid] sweep).

    python scripts/tune_figure.py runs/tune/s73_bt_smooth runs/tune/s73_grid_signed_tune docs/tune/section7_3.png

Left: the relaxed objective along the Adam steps. Right: the grid's held-out hard regret of the
tuned entry over (beta, trigger ratio), the initial point (o) and the tuned point (x).
"""

import json
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def main(tune_dir, grid_dir, out_png):
    tune = json.loads((Path(tune_dir) / "tune.json").read_text())
    tr = json.loads((Path(tune_dir) / "trace.json").read_text())
    grid = json.loads((Path(grid_dir) / "summary.json").read_text())
    meta = tr["meta"]
    name = meta["algorithm"]
    axes = grid["grid"]["axes"]
    betas, trig = axes["beta"], axes["trigger_ratio"]
    vals = np.array([r["algorithms"][name]["total_regret"]["mean"] for r in grid["grid"]["points"]])
    vals = vals.reshape(len(betas), len(trig))
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.6))
    a.plot([t["step"] for t in tr["trace"]], [t["objective"] for t in tr["trace"]], "o-", ms=3)
    a.set_xlabel("Adam step")
    a.set_ylabel("relaxed regret (tuning seeds)")
    a.set_title(f"gsjax tune ({name})")
    im = b.imshow(vals, origin="lower", aspect="auto", cmap="viridis")
    b.set_xticks(range(len(trig)), [f"{t:g}" for t in trig])
    b.set_yticks(range(len(betas)), [f"{x:g}" for x in betas])
    b.set_xlabel("trigger ratio c")
    b.set_ylabel("beta")
    seeds = grid["meta"]["seed_range"]  # the grid's: held-out (S..) or tuning (0..S-1)
    lo, hi = seeds["start"], seeds["stop"]
    fig.colorbar(im, ax=b, label=f"hard regret, seeds {lo}..{hi - 1}")

    def pos(beta, c):  # fractional grid coordinates (log scale)
        fx = np.interp(math.log(c), np.log(trig), np.arange(len(trig)))
        fy = np.interp(math.log(beta), np.log(betas), np.arange(len(betas)))
        return fx, fy

    p = tune["params"]
    for when, mk in (("initial", "wo"), ("final", "rx")):
        x, y = pos(p["beta"][when], p["trigger"][when])
        b.plot(x, y, mk, ms=9, mew=2, label=f"{when}: {tune['heldout_hard'][when]['mean']:.0f}")
    g = np.unravel_index(np.argmin(vals), vals.shape)
    b.plot(g[1], g[0], "s", mfc="none", mec="orange", ms=12, mew=2,
           label=f"grid best: {vals[g]:.0f}")
    b.legend(fontsize=7, loc="upper right")
    b.set_title(f"grid: hard regret on seeds {lo}..{hi - 1}; o, x: held-out", fontsize=9)
    fig.tight_layout()
    Path(out_png).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=80)
    print(f"grid best {name}: beta={betas[g[0]]}, c={trig[g[1]]}, regret {vals[g]:.1f}; "
          f"grid points {vals.size}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
