"""Presets: a fixed set of schemes and workloads run through the harness, on hardware and on replay.

The AdaTune ablation and the ReLeASE comparison are two such presets; each writes ``<out>/hardware`` and
``<out>/replay`` with the harness's one report.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from .__main__ import add_hardware_args, add_run_args, run_tuning
from .schemes import SCHEMES

__all__ = ["run_preset"]


def run_preset(
    prog: str, doc: str, schemes: Sequence[str], workloads: Sequence[str], out: str, argv: Sequence[str] | None
) -> None:
    """Parse the preset's flags and run its hardware study, then its replay study."""
    p = argparse.ArgumentParser(
        prog=f"python -m {prog}", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_args(p, schemes, out, baseline=schemes[0])
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
        run_tuning(args, "hardware", f"{prog}: real measurement")
        print(f"wrote {args.out}")
    if not args.no_replay:
        args.out = os.path.join(root, "replay")
        args.schemes = [s for s in args.schemes if not SCHEMES[s].adaptive_evaluator]
        args.seeds, args.trials, args.plan_size = args.replay_seeds, args.replay_trials, args.replay_plan_size
        run_tuning(args, "replay", f"{prog}: replay over recorded sweeps")
        print(f"wrote {args.out}")
