"""Figures of the README's gsjax tune vs grid comparison, from a ``compare.json`` of
``python -m gsjax.paper.tune_vs_grid`` (run with ``--iterates`` for the bandit figure's left panel).

    python scripts/tune_vs_grid_figure.py runs/tune/s72_vs_grid/compare.json \
        docs/tune/section7_2_vs_grid.png
    python scripts/tune_vs_grid_figure.py runs/tune/s6_vs_grid/compare.json \
        runs/tune/s6_s05_vs_grid/compare.json docs/tune/section6_eta_scale.png

Bandit (two grid axes, beta x trigger_ratio): left, the held-out hard regret of every Adam
iterate of each tuned run, beside the defaults and the grid's choice (made on the tuning seeds);
right, the grid's held-out hard regret with the paths of the tuned runs and their final points.
OCO (eta_scale; one panel per compare.json): the grid's mean total regret against eta_scale on
the tuning and on the held-out seeds, with the defaults, the grid's choice and the tuned
point(s).
"""

import json
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _label(row):
    rx = row.get("relaxed") or {}
    t = rx.get("temperature")
    tau = f", tau={t:g}" if t is not None else ""
    return f"{Path(row['dir']).name} (lr={row['lr']:g}{tau}, select {row.get('select')})"


def bandit(c, out_png):
    axes = c["grid"]["axes"]
    betas, trig = axes["beta"], axes["trigger_ratio"]
    vals = np.array([p["heldout"]["mean"] for p in c["grid"]["points"]]).reshape(len(betas),
                                                                                 len(trig))
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    chosen = c["grid"]["chosen"]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, row in enumerate(c["tuned"]):
        it = row.get("iterates")
        if it is None:
            continue
        st = it["steps"]
        col = colors[i % len(colors)]
        a.plot([s["step"] for s in st], [s["heldout_hard"] for s in st], "-", lw=1.2,
               color=col, label=_label(row))
        sel = row.get("selected_step")
        if sel is None:  # tune.json from before selected_step was recorded: relaxed selection
            sel = int(np.argmin([s["relaxed_objective"] for s in st]))
        a.plot(st[sel]["step"], st[sel]["heldout_hard"], "x", color=col, ms=8, mew=2)
    a.axhline(c["defaults"]["heldout"]["mean"], color="k", ls=":", lw=1, label="defaults")
    a.axhline(chosen["heldout"]["mean"], color="orange", ls="--", lw=1.5,
              label="grid choice (tuning seeds)")
    a.set_yscale("log")
    a.set_xlabel("Adam step (x: the reported final iterate)")
    a.set_ylabel("held-out hard regret (mean)")
    a.set_title(f"{Path(c['config']).stem}: iterates of gsjax tune")
    a.legend(fontsize=6, loc="upper left")

    im = b.imshow(vals, origin="lower", aspect="auto", cmap="viridis",
                  norm=matplotlib.colors.LogNorm())
    b.set_xticks(range(len(trig)), [f"{t:g}" for t in trig])
    b.set_yticks(range(len(betas)), [f"{x:g}" for x in betas])
    b.set_xlabel("trigger ratio c")
    b.set_ylabel("beta")
    fig.colorbar(im, ax=b, label="held-out hard regret")

    def pos(beta, cc):  # fractional grid coordinates (log scale)
        return (np.interp(math.log(cc), np.log(trig), np.arange(len(trig))),
                np.interp(math.log(beta), np.log(betas), np.arange(len(betas))))

    d = c["defaults"]["point"]
    b.plot(*pos(d["beta"], d["trigger_ratio"]), "wo", ms=8, mew=2, label="defaults")
    for i, row in enumerate(c["tuned"]):
        col = colors[i % len(colors)]
        it = row.get("iterates")
        if it is not None:
            xy = np.array([pos(s["point"]["beta"], s["point"]["trigger_ratio"])
                           for s in it["steps"]])
            b.plot(xy[:, 0], xy[:, 1], "-", color=col, lw=1)
        p = row["point"]
        b.plot(*pos(p["beta"], p["trigger_ratio"]), "x", color=col, ms=8, mew=2)
    gi = np.unravel_index(chosen["index"], vals.shape)
    b.plot(gi[1], gi[0], "s", mfc="none", mec="orange", ms=13, mew=2,
           label=f"grid choice: {chosen['heldout']['mean']:.0f}")
    b.legend(fontsize=7, loc="upper right")
    b.set_title("held-out hard regret over the grid")
    fig.tight_layout()
    return fig


def oco(c, a):
    pts = c["grid"]["points"]
    x = np.array([p["point"]["eta_scale"] for p in pts])
    a.plot(x, [p["tuning"]["mean"] for p in pts], "o-", ms=3, lw=1,
           label=f"grid, tuning seeds ({c['tuning_seeds']})")
    if "heldout" in pts[0]:
        m = np.array([p["heldout"]["mean"] for p in pts])
        se = np.array([p["heldout"]["stderr"] for p in pts])
        a.fill_between(x, m - 2 * se, m + 2 * se, alpha=0.3)
        a.plot(x, m, "-", lw=1.5, label=f"grid, held-out seeds ({c['heldout_seeds']})")
    d = c["defaults"]
    a.plot(d["point"]["eta_scale"], d["heldout"]["mean"], "ko", ms=7,
           label=f"defaults: {d['heldout']['mean']:.1f}")
    ch = c["grid"]["chosen"]
    a.plot(ch["point"]["eta_scale"], ch["heldout"]["mean"], "s", mfc="none", mec="orange",
           ms=11, mew=2, label=f"grid choice: {ch['heldout']['mean']:.1f}")
    for row in c["tuned"]:
        a.plot(row["point"]["eta_scale"], row["heldout"]["mean"], "rx", ms=9, mew=2,
               label=f"tuned ({row['steps']} steps): {row['heldout']['mean']:.1f}")
    a.set_xscale("log")
    a.set_xlabel("eta_scale (x the lazy rule's step)")
    a.set_ylabel("total regret (mean)")
    over = " ".join(c.get("overrides", [])) or "(as shipped)"
    a.set_title(f"{Path(c['config']).stem} {over}, T={c['horizon']}, budget point "
                f"{c.get('point')}", fontsize=8)
    a.legend(fontsize=7)


def main(*args):
    *jsons, out_png = args
    cs = [json.loads(Path(j).read_text()) for j in jsons]
    if cs[0]["kind"] == "oco":  # one panel per compare.json
        fig, axs = plt.subplots(1, len(cs), figsize=(5.2 * len(cs), 3.6), squeeze=False)
        for c, a in zip(cs, axs[0]):
            oco(c, a)
        fig.tight_layout()
    else:
        fig = bandit(cs[0], out_png)
    Path(out_png).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=80)
    print(f"wrote {out_png}")


if __name__ == "__main__":
    main(*sys.argv[1:])
