"""``python -m adatune.cuda_export export --workload dense-1024 --n 32 --out batch/ [--log tune.jsonl]``:
random candidates not yet in the log, exported for ``cupy_runner.py`` on a GPU machine."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import target as _target
from ..measure.device_limits import profile
from ..templates import workloads
from ._export import export_batch, logged_keys, select_candidates


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m adatune.cuda_export")
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="write a batch of CUDA candidates for cupy_runner.py")
    e.add_argument("--workload", required=True, help="built-in name or spec, e.g. dense:M=128,N=3072,K=768")
    e.add_argument("--n", type=int, default=32, help="candidates in the batch")
    e.add_argument("--out", required=True, help="new folder for the batch")
    e.add_argument("--log", help="records log: candidates already in it are not exported again")
    e.add_argument("--arch", default="sm_80", help="CUDA arch of the target (records name it)")
    e.add_argument("--device-profile", default=None, help="reject candidates over this GPU's limits (h100, a100..)")
    e.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        task = workloads.get(args.workload).create_task(_target.cuda(args.arch))
        limits = profile(args.device_profile) if args.device_profile else None
        cands = select_candidates(task, args.n, args.seed, logged_keys(task, args.log))
        manifest = export_batch(task, cands, args.out, limits)
    except (ValueError, KeyError, FileExistsError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    bad = sum(1 for c in manifest["candidates"] if "error" in c)
    print(f"{len(cands)} candidates of {task.name}{tuple(task.args)} in {args.out} ({bad} rejected before export)")
    print(f"measure there: python {args.out}/cupy_runner.py {args.out} --out results.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
