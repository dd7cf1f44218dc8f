"""``python -m benchmarks.release``: ReLeASE against AutoTVM on hardware and on the replay runner.

Full run (what the issue asks: ResNet-18 conv layers 6, 9 and 11 on this CPU, 5 seeds x 4 schemes x
200 s of tuner clock, about 3.5 hours on hardware; then 15 seeds x 4 schemes x 512 trials on every
recorded sweep in benchmarks/data/, roughly half an hour per sweep on 2 cores)::

    python -m benchmarks.release

Smoke run (two or three minutes)::

    python -m benchmarks.release --workloads conv2d-resnet18-L11 --budget 20 --seeds 1 --plan-size 16 \\
        --replay-seeds 1 --replay-trials 48 --out /tmp/release-smoke

Writes results.json, trials.csv, summary.csv, summary.md and PNG plots to ``--out``
(default benchmarks/results/release/).
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import math
import os
import shlex
import sys
import time

import numpy as np

from .._common import add_common_args, cpu_name
from . import SCHEMES
from .report import plot_best_vs, plot_steps, summarise, write_csv, write_markdown
from .run import RunConfig, run_hardware, run_replay

WORKLOADS = ("conv2d-resnet18-L6", "conv2d-resnet18-L9", "conv2d-resnet18-L11")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.release", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--workloads", nargs="*", default=list(WORKLOADS), help="adatune.workloads names (hardware)")
    p.add_argument("--schemes", nargs="*", default=list(SCHEMES), choices=list(SCHEMES))
    p.add_argument("--budget", type=float, default=200.0, help="seconds of tuner clock per (workload, seed, scheme)")
    p.add_argument("--max-trials", type=int, default=None, help="also stop a hardware run after this many trials")
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 on hardware")
    p.add_argument("--plan-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument(
        "--num-threads", type=int, default=None, help="XGBoost threads (default: its own; 1 helps on a loaded box)"
    )
    p.add_argument("--number", type=int, default=5, help="runner: runs averaged per repeat")
    p.add_argument("--repeat", type=int, default=3, help="runner: repeats")
    p.add_argument(
        "--quality", type=float, default=1.0, help="target = quality x the baseline's final best (mean over seeds)"
    )
    add_common_args(p, out="benchmarks/results/release")
    return p


def _json_default(o: object) -> object:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


def _finite(x: object) -> object:
    """JSON has no inf/nan: write None."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def _rows_json(summ: dict) -> dict:
    return {
        "target_gflops": summ["target_gflops"],
        "quality": summ["quality"],
        "schemes": {s: {k: _finite(v) for k, v in r.items()} for s, r in summ["rows"].items()},
    }


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s"
    )
    import adatune
    from adatune import workloads

    os.makedirs(args.out, exist_ok=True)
    cfg = RunConfig(
        budget=args.budget,
        max_trials=args.max_trials,
        seeds=tuple(range(args.seeds)),
        schemes=tuple(args.schemes),
        plan_size=args.plan_size,
        batch_size=args.batch_size,
        num_threads=args.num_threads,
        number=args.number,
        repeat=args.repeat,
        timeout=args.timeout,
        n_parallel=args.n_parallel,
        replay_seeds=tuple(range(args.replay_seeds)),
        replay_trials=args.replay_trials,
        records_dir=os.path.join(args.out, "records"),
    )
    target = adatune.target.host()
    argv_list = sys.argv[1:] if argv is None else argv
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "tvm": __import__("tvm").__version__,
        "target": str(target.kind.name),
        "command": "python -m benchmarks.release " + " ".join(shlex.quote(a) for a in argv_list),
        **{k: list(v) if isinstance(v, tuple) else v for k, v in vars(cfg).items()},
    }

    hardware: dict = {}
    if not args.no_hardware:
        for name in args.workloads:
            task = workloads.get(name).create_task(target)
            print(f"[release] {name}: {task}", flush=True)
            hardware[name] = run_hardware(task, cfg, name)
    replay: list = []
    if not args.no_replay:
        paths = sorted({p for g in args.replay_logs for p in glob.glob(g)})
        if not paths:
            print(f"[release] no replay logs match {args.replay_logs}; replay comparison skipped", flush=True)
        for path in paths:
            print(f"[release] replay {path}", flush=True)
            replay.extend(run_replay(path, cfg))

    hw_summ = {wl: summarise(d["runs"], args.quality) for wl, d in hardware.items()}
    replay_summ = [summarise(r["runs"], args.quality) for r in replay]
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(
            {
                "meta": meta,
                "hardware": hardware,
                "replay": replay,
                "summary": {
                    "hardware": {wl: _rows_json(s) for wl, s in hw_summ.items()},
                    "replay": [
                        {"log": r["log"], "task": r["task"], **_rows_json(s)} for r, s in zip(replay, replay_summ)
                    ],
                },
            },
            f,
            default=_json_default,
        )
    trials = [
        {"part": "hardware", "workload": wl, "scheme": r["scheme"], "seed": r["seed"], **t}
        for wl, d in hardware.items()
        for r in d["runs"]
        for t in r["trials"]
    ]
    trials += [
        {"part": "replay", "workload": rp["task"], "scheme": r["scheme"], "seed": r["seed"], **t}
        for rp in replay
        for r in rp["runs"]
        for t in r["trials"]
    ]
    write_csv(os.path.join(args.out, "trials.csv"), trials)
    summary_rows = [
        {
            "part": "hardware",
            "workload": wl,
            "target_gflops": s["target_gflops"],
            "scheme": k,
            **{kk: vv for kk, vv in v.items() if not kk.startswith("per_seed")},
        }
        for wl, s in hw_summ.items()
        for k, v in s["rows"].items()
    ]
    summary_rows += [
        {
            "part": "replay",
            "workload": rp["task"],
            "target_gflops": s["target_gflops"],
            "scheme": k,
            **{kk: vv for kk, vv in v.items() if not kk.startswith("per_seed")},
        }
        for rp, s in zip(replay, replay_summ)
        for k, v in s["rows"].items()
    ]
    write_csv(os.path.join(args.out, "summary.csv"), summary_rows)
    if hardware:
        panels = [(f"{wl} (CPU)", hw_summ[wl]) for wl in hardware]
        plot_best_vs(panels, os.path.join(args.out, "hardware_best_vs_trials.png"), "trials")
        plot_best_vs(panels, os.path.join(args.out, "hardware_best_vs_time.png"), "clock")
        plot_steps([(wl, d["runs"]) for wl, d in hardware.items()], os.path.join(args.out, "search_steps.png"))
    if replay:
        panels = [
            (f"replay: {os.path.basename(r['log'])} ({r['space']} configs)", s) for r, s in zip(replay, replay_summ)
        ]
        plot_best_vs(panels, os.path.join(args.out, "replay_best_vs_trials.png"), "trials")
        plot_steps(
            [(f"replay: {os.path.basename(r['log'])}", r["runs"]) for r in replay],
            os.path.join(args.out, "replay_search_steps.png"),
        )
    write_markdown(os.path.join(args.out, "summary.md"), meta, hardware, hw_summ, replay, replay_summ)
    print(open(os.path.join(args.out, "summary.md"), encoding="utf-8").read())


if __name__ == "__main__":
    main()
