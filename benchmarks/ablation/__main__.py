"""``python -m benchmarks.ablation``: run the AdaTune ablation and write results, figures and a summary.

Full run (what the issue asks: 2 workloads x 5 seeds x 4 schemes x the budget, i.e. 3.3 hours at the default
300 s, plus the evaluator check and, if a sweep log exists, the replay comparison over 15 seeds)::

    python -m benchmarks.ablation

Smoke run (a minute or two)::

    python -m benchmarks.ablation --budget 5 --seeds 1 --plan-size 8 --check-configs 4 \
        --replay-seeds 1 --replay-trials 24 --out /tmp/ablation-smoke
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import math
import os
import platform
import sys
import time

import numpy as np

from .._common import add_common_args, cpu_name
from . import SCHEMES
from .report import iteration_times, plot_best_vs, plot_measure_vs_search, summarise, write_csv, write_markdown
from .run import RunConfig, run_hardware, run_replay

WORKLOADS = ("conv2d-resnet18-L6", "bmm-bert-nt")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.ablation", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--workloads", nargs="*", default=list(WORKLOADS), help="adatune.workloads names (hardware)")
    p.add_argument("--schemes", nargs="*", default=list(SCHEMES), choices=list(SCHEMES))
    p.add_argument("--budget", type=float, default=300.0, help="seconds of tuner clock per (workload, seed, scheme)")
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 on hardware")
    p.add_argument("--target", default="llvm", choices=["llvm", "cuda"], help="cuda needs a GPU on this machine")
    p.add_argument("--plan-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--n-trees", type=int, default=100)
    p.add_argument(
        "--num-threads",
        type=int,
        default=None,
        help="threads for XGBoost and the forest (default: each library's own; 1 helps on a loaded box)",
    )
    p.add_argument("--number", type=int, default=10, help="DE: runs averaged per repeat")
    p.add_argument("--repeat", type=int, default=20, help="DE: repeats; the cap of both evaluators is number*repeat")
    p.add_argument("--micro-batch", type=int, default=10, help="AE: runs per micro-batch")
    p.add_argument("--min-micro-batches", type=int, default=3)
    p.add_argument("--min-converge-coef", type=float, default=0.1)
    p.add_argument("--check-configs", type=int, default=24, help="configs in the AE-vs-DE check (0: skip)")
    p.add_argument(
        "--confirm-repeats", type=int, default=5, help="DE re-measurements of AE's and DE's picks in the check"
    )
    add_common_args(p, out="benchmarks/results/ablation")
    return p


def _gpu_note(target: str) -> tuple[bool, str]:
    import tvm

    has = bool(tvm.cuda(0).exist)
    if not has:
        return False, (
            "no CUDA GPU on this machine: the CUDA ablation was not run (re-run with --target cuda on a "
            "machine with one)"
        )
    if target == "cuda":
        return True, f"CUDA GPU present ({tvm.cuda(0).device_name}); this run used the CUDA templates"
    return True, "a CUDA GPU is present but this run used the CPU; re-run with --target cuda for the GPU ablation"


def _json_default(o: object) -> object:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s"
    )
    logging.getLogger("benchmarks.ablation").setLevel(logging.INFO)
    import adatune
    from adatune import workloads

    os.makedirs(args.out, exist_ok=True)
    cfg = RunConfig(
        budget=args.budget,
        seeds=tuple(range(args.seeds)),
        schemes=tuple(args.schemes),
        plan_size=args.plan_size,
        batch_size=args.batch_size,
        n_trees=args.n_trees,
        number=args.number,
        repeat=args.repeat,
        micro_batch=args.micro_batch,
        min_micro_batches=args.min_micro_batches,
        min_converge_coef=args.min_converge_coef,
        timeout=args.timeout,
        n_parallel=args.n_parallel,
        check_configs=args.check_configs,
        confirm_repeats=args.confirm_repeats,
        num_threads=args.num_threads,
        replay_seeds=tuple(range(args.replay_seeds)),
        replay_trials=args.replay_trials,
    )
    has_gpu, gpu_note = _gpu_note(args.target)
    if args.target == "cuda" and not has_gpu:
        raise SystemExit("--target cuda: " + gpu_note)
    target = adatune.target.cuda() if args.target == "cuda" else adatune.target.host()
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "tvm": __import__("tvm").__version__,
        "target": str(target.kind.name),
        "gpu": has_gpu,
        "gpu_note": gpu_note,
        "seeds": args.seeds,
        "argv": sys.argv[1:] if argv is None else argv,
        **vars(cfg),
    }
    meta["cpu"] = cpu_name() or meta["cpu"]

    hardware: dict = {}
    if not args.no_hardware:
        for name in args.workloads:
            task = workloads.get(name).create_task(target)
            print(f"[ablation] {name}: {task}", flush=True)
            hardware[name] = run_hardware(task, cfg)
    replay: list = []
    if not args.no_replay:
        paths = sorted({p for g in args.replay_logs for p in glob.glob(g)})
        for path in paths:
            print(f"[ablation] replay {path}", flush=True)
            replay.extend(run_replay(path, cfg))

    hw_summ = {wl: summarise(d["runs"], "clock", cfg.budget) for wl, d in hardware.items()}
    replay_summ = [summarise(r["runs"], "trial", r["max_trials"]) for r in replay]
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(
            {
                "meta": meta,
                "hardware": hardware,
                "replay": replay,
                "summary": {
                    "hardware": {
                        wl: {
                            k: {kk: _finite(vv) if isinstance(vv, float) else vv for kk, vv in v.items()}
                            for k, v in s["rows"].items()
                        }
                        for wl, s in hw_summ.items()
                    },
                    "replay": [
                        {
                            k: {kk: _finite(vv) if isinstance(vv, float) else vv for kk, vv in v.items()}
                            for k, v in s["rows"].items()
                        }
                        for s in replay_summ
                    ],
                },
            },
            f,
            default=_json_default,
        )
    rows = [
        {"part": "hardware", "workload": wl, "scheme": r["scheme"], "seed": r["seed"], **t}
        for wl, d in hardware.items()
        for r in d["runs"]
        for t in r["trials"]
    ]
    rows += [
        {"part": "replay", "workload": rp["task"], "scheme": r["scheme"], "seed": r["seed"], **t}
        for rp in replay
        for r in rp["runs"]
        for t in r["trials"]
    ]
    write_csv(os.path.join(args.out, "trials.csv"), rows)
    if hardware:
        plot_best_vs(
            [(f"{wl} ({args.target})", hw_summ[wl]) for wl in hardware],
            os.path.join(args.out, "best_vs_time.png"),
            "wall-clock (s): search + build + measurement",
        )
        plot_measure_vs_search(
            [(wl, iteration_times(d["runs"], cfg.plan_size)) for wl, d in hardware.items()],
            os.path.join(args.out, "measure_vs_search.png"),
            cfg.plan_size,
        )
    if replay:
        plot_best_vs(
            [(f"replay: {os.path.basename(r['log'])} ({r['space']} configs)", s) for r, s in zip(replay, replay_summ)],
            os.path.join(args.out, "replay_best_vs_trials.png"),
            "trials",
        )
    write_markdown(os.path.join(args.out, "summary.md"), meta, hardware, hw_summ, replay, replay_summ)
    print(open(os.path.join(args.out, "summary.md"), encoding="utf-8").read())


if __name__ == "__main__":
    main()
