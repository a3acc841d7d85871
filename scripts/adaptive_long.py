"""The numbers docs/paper/section5_2.md derives from the long adaptive-graph runs.

    python scripts/adaptive_long.py runs/adaptive_long runs/adaptive_1e6

Each argument is the ``--out`` folder of one ``python -m gsjax.paper.adaptive_graph`` run (its
``gamma*/arrays.npz``). Per gamma, from every seed's total regret (prediction + movement) curve:
the gap adaptive - supergraph of the mean curves at T = 10^4, 10^5, 10^6 (those within the run);
the excess of ``supergraph`` and ``adaptive`` over ``true_graph_async`` at 10^4 and at T; the
round from which the adaptive mean curve stays below the super-graph's; at T the paired
difference adaptive - supergraph (mean +- s.e., median, seeds where adaptive is lower); the
gap's shrink over the decade 10^4 -> 10^5 and, at that rate per decade, the T where it would
reach 0; for ``true_graph`` and ``supergraph``, the seed whose regret grew most over the second
half of the run (a round, beside the median seed's: a seed held on a wrong vertex between two
lazy updates shows there), and the paired difference at T without that super-graph seed.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gsjax.results import read_npz  # noqa: E402


def _at(rounds, curve, t):
    """``curve`` at round ``t`` (the record at or after it), None past the run."""
    i = int(np.searchsorted(rounds, t))
    return None if i >= len(rounds) else curve[..., i]


def _paired(diff):
    """(mean, s.e., median, how many below 0) of per-seed differences."""
    return (float(diff.mean()), float(diff.std(ddof=1) / math.sqrt(len(diff))),
            float(np.median(diff)), int(np.sum(diff < 0)))


def gamma_numbers(folder: Path) -> dict:
    """The numbers of one gamma's run folder (see the module docstring)."""
    arr = read_npz(folder / "arrays.npz")
    rounds = np.asarray(arr["rounds"])
    total = {n: np.asarray(arr[f"{n}/cum_regret"], np.float64)
             + np.asarray(arr[f"{n}/cum_movement"], np.float64)
             for n in ("true_graph", "true_graph_async", "supergraph", "adaptive")}
    mean = {n: c.mean(axis=0) for n, c in total.items()}
    horizon = int(rounds[-1])
    gap_curve = mean["adaptive"] - mean["supergraph"]
    gap = {t: None if (g := _at(rounds, gap_curve, t)) is None else float(g)
           for t in (10**4, 10**5, 10**6)}
    below = mean["adaptive"] < mean["supergraph"]
    cross = next((int(rounds[i]) for i in range(len(below)) if below[i:].all()), None)
    diff = total["adaptive"][:, -1] - total["supergraph"][:, -1]
    excess = {n: {t: float(_at(rounds, mean[n] - mean["true_graph_async"], t))
                  for t in (10**4, horizon)} for n in ("supergraph", "adaptive")}
    half = len(rounds) // 2
    growth = {}  # the seed whose regret grew most over the run's second half; the median's
    for n in ("true_graph", "supergraph"):
        slope = (total[n][:, -1] - total[n][:, half]) / float(rounds[-1] - rounds[half])
        growth[n] = (int(np.argmax(slope)), float(slope.max()), float(np.median(slope)))
    shrink = (None if gap[10**5] is None else gap[10**4] - gap[10**5])
    reach = (None if not shrink or shrink <= 0 or gap[10**5] <= 0
             else 10 ** (5 + gap[10**5] / shrink))
    return {"horizon": horizon, "seeds": int(diff.shape[0]), "gap": gap, "crossover": cross,
            "paired": _paired(diff),
            "excess": excess, "shrink_per_decade": shrink, "zero_at": reach,
            "growth": growth, "paired_without": _paired(np.delete(diff, growth["supergraph"][0]))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="--out folders of adaptive_graph runs")
    args = ap.parse_args(argv)
    print("| gamma | T | seeds | gap at 10^4 / 10^5 / 10^6 | shrink 10^4 -> 10^5 | gap 0 at T ~ "
          "| crossover round | paired at T: mean +- s.e., median, adaptive lower "
          "| excess over true_graph_async at 10^4 -> T: supergraph, adaptive "
          "| most growth a round over the second half, true_graph, supergraph: seed: its (the "
          "median seed's) | paired at T without that supergraph seed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for run in args.runs:
        for folder in sorted(run.glob("gamma*")):
            r = gamma_numbers(folder)
            gaps = " / ".join("–" if g is None else f"{g:.0f}" for g in r["gap"].values())
            m, se, med, lower = r["paired"]
            w = r["paired_without"]
            ex = r["excess"]
            exs = ", ".join(f"{ex[n][10**4]:.0f} -> {ex[n][r['horizon']]:.0f}"
                            for n in ("supergraph", "adaptive"))
            lin = ", ".join(f"{s}: {v:.4f} ({m:.4f})" for s, v, m in r["growth"].values())
            shrink = "–" if r["shrink_per_decade"] is None else f"{r['shrink_per_decade']:.0f}"
            zero = "–" if r["zero_at"] is None else f"{r['zero_at']:.0e}"
            print(f"| {folder.name[5:]} | {r['horizon']:.0e} | {r['seeds']} | {gaps} | "
                  f"{shrink} | {zero} | "
                  f"{r['crossover'] if r['crossover'] is not None else '> T'} | "
                  f"{m:.0f} ± {se:.0f}, {med:.0f}, {lower} of {r['seeds']} | {exs} | "
                  f"{lin} | {w[0]:.0f} ± {w[1]:.0f}, {w[2]:.0f}, {w[3]} of {r['seeds'] - 1} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
