"""``python -m benchmarks.harness.preset NAME``: a fixed set of schemes and workloads run through the harness, on
hardware, then on replay over the sweeps; each writes ``<out>/hardware`` and ``<out>/replay`` with the harness's report.

- ``ablation``: the AdaTune paper's ablation (NeurIPS 2020, sec. 5.3), each scheme adding one component to AutoTVM:
  XGB+SA, RFEI+SA (random forest + expected improvement), RFEI+CSA (+ contextual simulated annealing), RFEI+CSA+AE
  (+ the adaptive evaluator: AdaTune, real measurement only).
- ``release``: ReLeASE (Ahn et al., ICLR 2020) against AutoTVM: XGB+SA, RL (the PPO search agent), SA+AS (simulated
  annealing + k-means adaptive sampling), RL+AS (``ReleaseTuner``).

    flock /tmp/bench.lock python -m benchmarks.harness.preset ablation --budget 60 --seeds 3   # real measurement
    python -m benchmarks.harness.preset release --no-hardware --replay-seeds 20                # replay only
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from .__main__ import add_hardware_args, add_run_args, run_tuning
from .schemes import SCHEMES

__all__ = ["PRESETS", "run_preset"]

# name: (schemes, baseline first; workloads)
PRESETS = {
    "ablation": (("XGB+SA", "RFEI+SA", "RFEI+CSA", "RFEI+CSA+AE"), ("conv2d-resnet18-L6", "bmm-bert-nt")),
    "release": (
        ("XGB+SA", "RL", "SA+AS", "RL+AS"),
        ("conv2d-resnet18-L6", "conv2d-resnet18-L9", "conv2d-resnet18-L11"),
    ),
}


def run_preset(argv: Sequence[str] | None = None) -> None:
    """Parse the preset's name and flags, and run its hardware study, then its replay study."""
    prog = "python -m benchmarks.harness.preset"
    p = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("preset", choices=sorted(PRESETS))
    first = argparse.ArgumentParser(add_help=False)  # the name first: it sets the other flags' defaults
    first.add_argument("preset", nargs="?", choices=sorted(PRESETS), default="ablation")
    name = first.parse_known_args(argv)[0].preset
    schemes, workloads = PRESETS[name]
    add_run_args(p, schemes, f"benchmarks/results/{name}", baseline=schemes[0])
    add_hardware_args(p, workloads)
    p.add_argument("--sweeps", nargs="+", default=["benchmarks/data/*.jsonl*"], help="sweep logs for the replay")
    p.add_argument("--replay-seeds", type=int, default=20)
    p.add_argument("--replay-trials", type=int, default=96)
    p.add_argument("--replay-plan-size", type=int, default=16)
    p.add_argument("--no-hardware", action="store_true", help="only the replay comparison")
    p.add_argument("--no-replay", action="store_true")
    p.set_defaults(seeds=5)
    args = p.parse_args(argv)
    root = args.out
    if not args.no_hardware:
        args.out = os.path.join(root, "hardware")
        run_tuning(args, "hardware", f"{prog} {args.preset}: real measurement")
        print(f"wrote {args.out}")
    if not args.no_replay:
        args.out = os.path.join(root, "replay")
        args.schemes = [s for s in args.schemes if not SCHEMES[s].adaptive_evaluator]
        args.seeds, args.trials, args.plan_size = args.replay_seeds, args.replay_trials, args.replay_plan_size
        run_tuning(args, "replay", f"{prog} {args.preset}: replay over recorded sweeps")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    run_preset()
