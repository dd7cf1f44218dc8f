#!/usr/bin/env bash
# Every benchmark, one after another (never two timing runs at once on a small machine).
# Budgets are sized so the whole chain fits in about 75 minutes on a 2-core CPU.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
mkdir -p benchmarks/results
run() { echo "=== $* ($(date +%T))"; "$@"; echo "=== exit $? ($(date +%T))"; }
[ "${SKIP_SWEEP:-0}" = 1 ] || run $PY -m benchmarks.sweep --workload conv2d-resnet18-L6-small --number 3 --repeat 3
run $PY -m benchmarks.tune_workloads --budget 50
run $PY -m benchmarks.ablation --budget 30 --seeds 5 --plan-size 32 --num-threads 1 --replay-trials 256
run $PY -m benchmarks.release --budget 20 --seeds 5 --plan-size 32 --num-threads 1 --replay-trials 256
