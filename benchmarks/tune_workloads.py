"""Tune the built-in workloads with XGBTuner and RandomTuner under the same wall-clock budget, and time
PyTorch (oneDNN) and numpy (BLAS) on the same shapes in the same run.

    python -m benchmarks.tune_workloads                       # default suite, ~35 minutes on 2 cores
    python -m benchmarks.tune_workloads --workloads dense-1024 --budget 60 --tuners xgb

Writes benchmarks/results/tune_workloads/{results.json, trajectories.csv, best_gflops_vs_time.png, summary.md}.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import time

import adatune
from adatune.reference import measure_reference
from adatune.tuners import create_tuner
from adatune.workloads import get as get_workload

from ._common import write_summary
from .harness.run import host_record

# dense 1024^3, BERT's Q K^T, and every 3x3 conv layer of ResNet-18 (the README's bar)
DEFAULT_WORKLOADS = ["dense-1024", "bmm-bert-nt"] + [f"conv2d-resnet18-L{i}" for i in (2, 4, 6, 7, 9, 10, 12)]
OUT = "benchmarks/results/tune_workloads"


def tune_one(workload: str, tuner_name: str, budget: float, seed: int) -> dict:
    wl = get_workload(workload)
    task = wl.create_task(adatune.target.host())
    option = adatune.measure_option(adatune.LocalBuilder(), adatune.LocalRunner(number=5, repeat=3))
    tuner = create_tuner(tuner_name, task, seed=seed)
    t0 = time.time()
    try:
        tuner.tune(n_trial=100_000, measure_option=option, time_budget=budget)
    finally:
        option.close()
    wall = time.time() - t0
    errors: dict[str, int] = {}
    for t in tuner.trials:
        if t.error_no:
            name = adatune.MeasureErrorNo(t.error_no).name
            errors[name] = errors.get(name, 0) + 1
    return {
        "workload": workload,
        "tuner": tuner_name,
        "seed": seed,
        "budget_s": budget,
        "wall_s": wall,
        "space": task.space.size,
        "flop": task.flop,
        "trials": len(tuner.trials),
        "best_gflops": tuner.best_flops / 1e9,
        "best_config": tuner.best_config.to_json() if tuner.best_config else None,
        "errors": errors,
        "trajectory": [(t.clock, t.best_flops / 1e9) for t in tuner.trials],
    }


def plot(results: list[dict], refs: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(r["workload"] for r in results))
    cols = min(3, len(workloads))
    rows = math.ceil(len(workloads) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, wl in zip(axes.flat, workloads):
        for r in (r for r in results if r["workload"] == wl):
            xs = [c for c, _ in r["trajectory"]]
            ys = [b for _, b in r["trajectory"]]
            ax.step(xs, ys, where="post", label=f"{r['tuner']} (seed {r['seed']})")
        for lib, g in refs.get(wl, {}).items():
            ax.axhline(g, ls="--", lw=1, color="gray" if lib == "numpy" else "black", label=f"{lib} {g:.0f}")
        ax.set_title(wl)
        ax.set_xlabel("tuning wall-clock (s)")
        ax.set_ylabel("best GFLOPS")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(workloads) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", nargs="+", default=DEFAULT_WORKLOADS)
    p.add_argument("--tuners", nargs="+", default=["xgb", "random"])
    p.add_argument("--budget", type=float, default=90.0, help="seconds of tuning per workload and tuner")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=OUT)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results, refs = [], {}
    for wl in args.workloads:
        refs[wl] = measure_reference(get_workload(wl))
        print(f"{wl}: reference " + ", ".join(f"{k} {v:.1f} GFLOPS" for k, v in refs[wl].items()), flush=True)
        for tn in args.tuners:
            r = tune_one(wl, tn, args.budget, args.seed)
            results.append(r)
            print(
                f"  {tn:7s}: best {r['best_gflops']:.1f} GFLOPS after {r['trials']} trials in {r['wall_s']:.0f} s"
                f" (errors {r['errors']})",
                flush=True,
            )
    meta = {
        "cpu": adatune.target.to_json(adatune.target.host()),
        "host": host_record(),  # CPU model, ISA, caches, LLVM/TVM versions
        "python": platform.python_version(),
        "command": "python -m benchmarks.tune_workloads "
        + " ".join(
            f"--{k} {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in vars(args).items() if k != "out"
        ),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "references": refs, "results": results}, f, indent=1)
    with open(os.path.join(args.out, "trajectories.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["workload", "tuner", "seed", "trial", "clock_s", "best_gflops"])
        for r in results:
            for i, (c, b) in enumerate(r["trajectory"]):
                w.writerow([r["workload"], r["tuner"], r["seed"], i, f"{c:.3f}", f"{b:.3f}"])
    plot(results, refs, os.path.join(args.out, "best_gflops_vs_time.png"))
    lines = [
        f"# Tuning the built-in workloads ({meta['date']})",
        "",
        f"CPU target: `{json.dumps(meta['cpu'])}`; budget {args.budget:.0f} s of tuning per workload and "
        f"tuner; reference libraries timed in the same run.",
        "",
        f"Command: `{meta['command']}`",
        "",
        "| workload | tuner | trials | best GFLOPS | PyTorch GFLOPS | numpy GFLOPS | best / best reference |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        ref = refs[r["workload"]]
        top = max(ref.values()) if ref else float("nan")
        lines.append(
            f"| {r['workload']} | {r['tuner']} | {r['trials']} | {r['best_gflops']:.1f} | "
            f"{ref.get('torch', float('nan')):.1f} | {ref.get('numpy', float('nan')):.1f} | "
            f"{r['best_gflops'] / top:.2f} |"
        )
    write_summary(args.out, lines, echo=True)


if __name__ == "__main__":
    main()
