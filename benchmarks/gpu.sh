#!/usr/bin/env bash
# The speed harness on a CUDA GPU: 10^4 - 10^6 seeds, about 8 minutes, the table printed last.
#
#     bash benchmarks/gpu.sh
#
# Uses the current Python if its jax already sees a GPU; otherwise makes .venv-gpu and installs
# gsjax with jax[cuda12] (needs the network). Writes benchmarks/results/gpu.json and
# benchmarks/RESULTS-gpu.md (copy the table into RESULTS.md with the device name).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
has_gpu() { "$1" -c 'import jax, sys; sys.exit(0 if jax.default_backend() == "gpu" else 1)' 2>/dev/null; }
if ! has_gpu "$PY"; then
    "$PY" -m venv .venv-gpu
    PY=.venv-gpu/bin/python
    "$PY" -m pip install -q --upgrade pip
    "$PY" -m pip install -q -e . "jax[cuda12]"
    has_gpu "$PY" || { echo "gpu.sh: jax sees no GPU ($("$PY" -c 'import jax; print(jax.devices())'))" >&2; exit 1; }
fi
"$PY" -c 'import jax; print("devices:", jax.devices())'
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
timeout 480 "$PY" benchmarks/run.py --mode gpu --out benchmarks/results/gpu.json \
    --results-md benchmarks/RESULTS-gpu.md || echo "gpu.sh: harness stopped (exit $?); partial rows are in benchmarks/results/gpu.json" >&2
[ -f benchmarks/RESULTS-gpu.md ] && cat benchmarks/RESULTS-gpu.md
