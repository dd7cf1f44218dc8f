"""Command line: ``adatune tune``, ``adatune best``, ``adatune workloads``."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

__all__ = ["main"]


def _target(name: str, arch: str):  # noqa: ANN202 - tvm Target
    from . import target

    if name == "llvm":
        return target.host()
    if name == "cuda":
        return target.cuda(arch)
    return target.create(json.loads(name))


def cmd_workloads(args: argparse.Namespace) -> int:
    from .workloads import get, list_workloads

    for name in list_workloads():
        print(f"{name:28s} {get(name).description}")
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from . import callback, measure_option
    from .measure import LocalBuilder, LocalRunner
    from .records import load_from_file
    from .tuners import create_tuner
    from .workloads import get as get_workload

    wl = get_workload(args.workload)
    task = wl.create_task(_target(args.target, args.arch))
    print(f"{task}\ntarget: {task.target}")
    tuner = create_tuner(args.tuner, task, seed=args.seed)
    resumed = 0
    if args.log and os.path.exists(args.log):
        resumed = tuner.load_history(load_from_file(args.log))
        if resumed:
            print(f"resuming: {resumed} configs already measured in {args.log}; they will not be measured again")
    remaining = max(0, args.trials - resumed)
    option = measure_option(LocalBuilder(timeout=args.build_timeout, n_parallel=args.n_parallel),
                            LocalRunner(number=args.number, repeat=args.repeat, timeout=args.run_timeout,
                                        check_correctness=args.check_correctness),
                            min_converge_coef=args.min_converge_coef)
    callbacks = [callback.progress_bar(remaining, prefix=args.workload)]
    if args.log:
        callbacks.append(callback.log_to_file(args.log))
    try:
        tuner.tune(remaining, option, early_stopping=args.early_stopping, callbacks=callbacks)
    finally:
        option.close()
    if tuner.best_config is None:
        print("no valid config was found", file=sys.stderr)
        return 1
    print(f"best: {tuner.best_flops / 1e9:.1f} GFLOPS ({tuner.best_result.mean_cost * 1e3:.3f} ms), "
          f"config {tuner.best_config.index}: {tuner.best_config.to_json()['entity']}")
    print(f"trials: {len(tuner.trials)}, tuning clock: {tuner.clock:.1f} s")
    if args.reference:
        from .reference import measure_reference

        for lib, gflops in measure_reference(wl).items():
            print(f"reference {lib}: {gflops:.1f} GFLOPS -> adatune reaches {tuner.best_flops / 1e9 / gflops:.2f}x")
    return 0


def cmd_best(args: argparse.Namespace) -> int:
    from .records import load_from_file, pick_best

    recs = list(load_from_file(args.log))
    best = pick_best(recs)
    if not best:
        print(f"{args.log}: no valid record", file=sys.stderr)
        return 1
    for key, r in best.items():
        n = sum(1 for x in recs if x.workload_key == key)
        print(f"{r.task_name}{tuple(r.args)} on {r.target.get('kind')}/{r.target.get('mcpu', r.target.get('arch'))}: "
              f"{r.mean_cost * 1e3:.4f} ms, config {r.config_index} {r.config_entity} ({n} records)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="adatune", description="Auto-tune tensor programs on TVM 0.27.")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("workloads", help="list the built-in workloads").set_defaults(fn=cmd_workloads)
    t = sub.add_parser("tune", help="tune a built-in workload")
    t.add_argument("--workload", required=True)
    t.add_argument("--tuner", default="xgb", help="xgb, xgb-rank, random, grid, rfei, release")
    t.add_argument("--trials", type=int, default=200)
    t.add_argument("--log", help="JSON-lines log; an existing log is resumed")
    t.add_argument("--target", default="llvm", help="llvm (this CPU), cuda, or a JSON target dict")
    t.add_argument("--arch", default="sm_80", help="CUDA arch for --target cuda")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--number", type=int, default=5)
    t.add_argument("--repeat", type=int, default=3)
    t.add_argument("--min-converge-coef", type=float, default=None, help="enable AdaTune's adaptive evaluator")
    t.add_argument("--check-correctness", action="store_true")
    t.add_argument("--early-stopping", type=int, default=None)
    t.add_argument("--n-parallel", type=int, default=2, help="build workers")
    t.add_argument("--build-timeout", type=float, default=30.0)
    t.add_argument("--run-timeout", type=float, default=10.0)
    t.add_argument("--reference", action="store_true", help="also time PyTorch/numpy on the same shape")
    t.set_defaults(fn=cmd_tune)
    b = sub.add_parser("best", help="show the best record of each workload in a log")
    b.add_argument("log")
    b.set_defaults(fn=cmd_best)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":
    sys.exit(main())
