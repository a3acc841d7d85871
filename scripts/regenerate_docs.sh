#!/usr/bin/env bash
# Regenerate the published numbers that depend on the bandit runner's noise stream and
# arithmetic (run from the repository root; 21 min on 2 quiet CPU cores). Each step prints
# its wall time. The long Section 5.1/5.2 runs are separate (--long: about 17 min more,
# 2026-12-04; Section 5.1 with the DP solver is `python -m gsjax.paper.dp_scale`, days).
#
#   bash scripts/regenerate_docs.sh            # the cheap set
#   bash scripts/regenerate_docs.sh --long     # and adaptive_graph_1e5/1e6, large_graphs
set -euo pipefail
OUT=${OUT:-runs/regen}
mkdir -p "$OUT"
step() { local t0=$SECONDS; echo "== $*"; "$@"; echo "   ($((SECONDS - t0)) s)"; }
curate() {  # curate SRC DST FILE...: copy the small files the README shows
    local src=$1 dst=$2; shift 2; mkdir -p "$dst"
    for f in "$@"; do cp "$src/$f" "$dst/$f"; done
}

step python tests/golden/record.py
step python -m gsjax reproduce --only section7_1 --only section7_2 --out "$OUT/reproduce"
cp "$OUT/reproduce/report.md" docs/reproduce/report.md
curate "$OUT/reproduce/section7_1" docs/reproduce/section7_1 movement.png regret.png summary.json trajectories.png
curate "$OUT/reproduce/section7_2" docs/reproduce/section7_2 movement.png per_criterion.png regret.png summary.json trajectories.png
step python -m gsjax run section7_1 --quiet --force --out "$OUT/section7_1_random_pgd" \
    --set agent.pgd_include_current=false --set agent.pgd_starts=1 --set agent.pgd_steps=5
curate "$OUT/section7_1_random_pgd" docs/reproduce/section7_1_random_pgd movement.png summary.json trajectories.png
step python -m gsjax run section7_1 --quiet --force --out "$OUT/section7_1_random_pgd_T1200" \
    --horizon 1200 --set agent.pgd_include_current=false --set agent.pgd_starts=1 --set agent.pgd_steps=5
step python -m gsjax run section7_3 --quiet --force --out "$OUT/section7_3"
step python -m gsjax.paper.figure2 configs/figure2_joint.toml --out "$OUT/figure2" --docs docs/reproduce/figure2
step python -m gsjax.paper.figure2 configs/figure2_joint.toml --out "$OUT/figure2_identity" \
    --set problem.factor.mixing=identity --docs docs/reproduce/figure2_identity
step python -m gsjax.paper.figure2 configs/figure2_joint.toml --out "$OUT/figure2_identity_oful" \
    --set problem.factor.mixing=identity --set agent.beta_mode=oful --set seeds=20 \
    --docs docs/reproduce/figure2_identity_oful
step python -m gsjax.paper.adaptive_graph configs/adaptive_graph.toml --out "$OUT/adaptive_graph" \
    --seeds 50 --docs docs/reproduce/adaptive_graph
step python benchmarks/run.py --quick

if [[ "${1:-}" == "--long" ]]; then
    step python -m gsjax.paper.adaptive_graph adaptive_graph --out "$OUT/adaptive_long" --seeds 20 \
        --horizon 100000 --tau 0.25=1600 --tau 0.5=400 --tau 1.0=100 --docs docs/reproduce/adaptive_graph_1e5
    step python -m gsjax.paper.adaptive_graph adaptive_graph --out "$OUT/adaptive_1e6" --seeds 20 \
        --horizon 1000000 --set 'paper.gamma_sweep=[1.0]' --tau 1.0=100 --docs docs/reproduce/adaptive_graph_1e6
    step python -m gsjax.paper.large_graphs configs/large_graphs.toml --out "$OUT/large_graphs" \
        --seeds 10=100 --seeds 100=100 --seeds 1000=100 --horizon 200 --docs docs/reproduce/large_graphs
fi
