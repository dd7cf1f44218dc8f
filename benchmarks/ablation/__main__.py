"""``python -m benchmarks.ablation``: the AdaTune ablation on hardware (same tuner-clock budget per run, every
incumbent re-measured by one common evaluator) and on replay over the recorded sweeps.

    flock /tmp/bench.lock python -m benchmarks.ablation --budget 60 --seeds 3      # real measurement
    python -m benchmarks.ablation --no-hardware --replay-seeds 20                  # replay only
"""

from benchmarks.harness.preset import run_preset

from . import SCHEMES, WORKLOADS

if __name__ == "__main__":
    run_preset("benchmarks.ablation", __doc__ or "", SCHEMES, WORKLOADS, "benchmarks/results/ablation", None)
