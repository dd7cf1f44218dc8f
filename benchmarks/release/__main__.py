"""``python -m benchmarks.release``: ReLeASE's components against AutoTVM on hardware (same tuner-clock budget,
incumbents re-measured by one common evaluator) and on replay over the recorded sweeps.

    flock /tmp/bench.lock python -m benchmarks.release --budget 60 --seeds 3       # real measurement
    python -m benchmarks.release --no-hardware --replay-seeds 20                   # replay only
"""

from benchmarks.harness.preset import run_preset

from . import SCHEMES, WORKLOADS

if __name__ == "__main__":
    run_preset("benchmarks.release", __doc__ or "", SCHEMES, WORKLOADS, "benchmarks/results/release", None)
