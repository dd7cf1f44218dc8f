"""Tuned x86 kernels against PyTorch on the same machine, in the same process, timed in turns.

For each workload: RandomTuner measures a fixed number of configs of the x86 template's space; the best
few are re-timed, and the fastest of them and PyTorch (oneDNN, all physical cores) are then timed in
alternation for several rounds, so that load from other processes hits both alike. Reports the median
GFLOPS of each, the median of the per-round ratios and their spread.

    python -m benchmarks.kernels_vs_pytorch                       # dense-1024 and conv2d-resnet18-L6
    python -m benchmarks.kernels_vs_pytorch --workloads dense-1024 conv2d-resnet18-L2 --trials 128

Writes benchmarks/results/kernels_vs_pytorch/{results.json, summary.md} with ``describe_host()``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import tvm

import adatune
from adatune.reference import physical_cores, time_callable
from adatune.tuners import RandomTuner
from adatune.workloads import get as get_workload
from adatune.workloads import torch_reference

DEFAULT_WORKLOADS = ["dense-1024", "conv2d-resnet18-L6"]
OUT = "benchmarks/results/kernels_vs_pytorch"


def tune(task: Any, trials: int, seed: int, timeout: float) -> RandomTuner:
    """``trials`` random configs of the task's space, each checked against numpy before it is timed."""
    option = adatune.measure_option(
        adatune.LocalBuilder(timeout=timeout),
        adatune.LocalRunner(number=3, repeat=3, timeout=timeout, check_correctness=True),
    )
    tuner = RandomTuner(task, seed=seed)
    try:
        tuner.tune(n_trial=trials, measure_option=option)
    finally:
        option.close()
    return tuner


def kernel_timer(task: Any, config: Any, repeats: int) -> Callable[[], float]:
    """Builds ``config`` and returns a function giving the median seconds of ``repeats`` runs."""
    lib = tvm.tirx.build(task.scheduled_module(config), task.target)
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    host = [rng.uniform(-1, 1, s.shape).astype(s.dtype) for s in task.arg_specs]
    args = [tvm.runtime.tensor(a, dev) for a in host]
    lib["main"](*args)  # the tuner checked correctness; check the kernel that is reported once more
    want = task.reference_outputs([a for a, s in zip(host, task.arg_specs) if not s.is_output])
    if want is not None:
        got = [a.numpy() for a, s in zip(args, task.arg_specs) if s.is_output]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3)
    evaluator = lib.time_evaluator("main", dev, number=1, repeat=repeats)
    evaluator(*args)  # warm-up: thread pool, caches, page tables
    return lambda: statistics.median(evaluator(*args).results)


def interleaved(
    task: Any, timers: dict[str, Callable[[], float]], torch_fn: Callable[[], Any], rounds: int, repeats: int
) -> dict[str, list[float]]:
    """GFLOPS per round of every kernel and of PyTorch, timed in turns (the order alternates by round)."""
    names = list(timers)
    out: dict[str, list[float]] = {n: [] for n in [*names, "torch"]}
    for r in range(rounds):
        order = ["torch", *names] if r % 2 == 0 else [*names[::-1], "torch"]
        for n in order:
            seconds = time_callable(torch_fn, repeats, warmup_s=0.1) if n == "torch" else timers[n]()
            out[n].append(task.flop / seconds / 1e9)
    return out


def summarize(gflops: list[float], torch_gflops: list[float]) -> dict[str, Any]:
    ratios = [a / b for a, b in zip(gflops, torch_gflops)]
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    return {
        "gflops_median": statistics.median(gflops),
        "torch_gflops_median": statistics.median(torch_gflops),
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "ratio_q1": q1,
        "ratio_q3": q3,
        "gflops_rounds": gflops,
        "torch_gflops_rounds": torch_gflops,
        "ratio_rounds": ratios,
    }


def run_workload(name: str, args: argparse.Namespace) -> dict[str, Any]:
    wl = get_workload(name)
    task = wl.create_task(adatune.target.host())
    t0 = time.time()
    tuner = tune(task, args.trials, args.seed, args.timeout)
    tune_s = time.time() - t0
    ok = sorted(((t.flops, t.key) for t in tuner.trials if t.flops > 0), reverse=True)
    if not ok:
        raise RuntimeError(f"{name}: no config of {len(tuner.trials)} built and ran correctly")
    finalists = [key for _, key in ok[: args.finalists]]
    timers = {key: kernel_timer(task, task.space.get(int(key)), args.repeats) for key in finalists}
    torch_fn = torch_reference(wl)
    heats = interleaved(task, timers, torch_fn, 3, args.repeats)  # pick the finalist that is fast again
    best = max(finalists, key=lambda k: statistics.median(heats[k]))
    final = interleaved(task, {best: timers[best]}, torch_fn, args.rounds, args.repeats)
    summary = summarize(final[best], final["torch"])
    errors: dict[str, int] = {}
    for t in tuner.trials:
        if t.error_no:
            err = adatune.MeasureErrorNo(t.error_no).name
            errors[err] = errors.get(err, 0) + 1
    print(
        f"{name}: {summary['gflops_median']:.1f} GFLOPS vs PyTorch {summary['torch_gflops_median']:.1f} "
        f"(ratio {summary['ratio_median']:.2f}, rounds {summary['ratio_min']:.2f}-{summary['ratio_max']:.2f})",
        flush=True,
    )
    return {
        "workload": name,
        "template": task.name,
        "args": list(task.args),
        "flop": task.flop,
        "space": len(task.config_space),
        "trials": len(tuner.trials),
        "errors": errors,
        "tune_s": tune_s,
        "tuning_best_gflops": ok[0][0] / 1e9,
        "finalists": {k: statistics.median(heats[k]) for k in finalists},
        "best_config": task.space.get(int(best)).to_json(),
        **summary,
    }


def write_summary(path: str, results: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    host = meta["host"]
    lines = [
        "# Tuned x86 kernels vs PyTorch",
        "",
        f"Host: {host['model']} ({host['mcpu']}, {host['isa']}, {host['fp32_lanes']} fp32 lanes, "
        f"{host['vector_registers']} vector registers, L1d {host['l1d_bytes'] >> 10} KiB, "
        f"L2 {host['l2_bytes'] >> 10} KiB, L3 {host['l3_bytes'] >> 20} MiB, {host['cores']} cores); "
        f"PyTorch {meta['torch_version']} with {meta['torch_threads']} threads; TVM {host['tvm_version']}.",
        "",
        f"Command: `{meta['command']}`",
        "",
        f"{meta['trials']} random configs per workload (RandomTuner, seed {meta['seed']}), the best "
        f"{meta['finalists']} re-timed, then the fastest and PyTorch timed in turns for {meta['rounds']} rounds "
        f"(median of {meta['repeats']} runs each). Ratio = adatune / PyTorch per round; spread = min-max and "
        "interquartile range of the rounds.",
        "",
        "| workload | space | adatune GFLOPS | PyTorch GFLOPS | ratio (median) | ratio min-max | ratio IQR |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['workload']} | {r['space']} | {r['gflops_median']:.1f} | {r['torch_gflops_median']:.1f} "
            f"| {r['ratio_median']:.2f} | {r['ratio_min']:.2f}-{r['ratio_max']:.2f} "
            f"| {r['ratio_q1']:.2f}-{r['ratio_q3']:.2f} |"
        )
    lines += ["", "Best configs:", ""]
    lines += [f"- {r['workload']}: `{json.dumps(r['best_config']['entity'])}`" for r in results]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", nargs="+", default=DEFAULT_WORKLOADS)
    p.add_argument("--trials", type=int, default=128, help="configs measured per workload")
    p.add_argument("--finalists", type=int, default=4, help="best tuning configs re-timed before the final")
    p.add_argument("--rounds", type=int, default=9, help="interleaved timing rounds of the final")
    p.add_argument("--repeats", type=int, default=15, help="runs per timing (median)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=30.0, help="build/run timeout per candidate (s)")
    p.add_argument("--out", default=OUT)
    args = p.parse_args(argv)
    torch.set_num_threads(physical_cores())
    meta = {
        "host": adatune.target.describe_host(),
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "command": " ".join(["python -m benchmarks.kernels_vs_pytorch", *sys.argv[1:]]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **{k: getattr(args, k) for k in ("trials", "finalists", "rounds", "repeats", "seed")},
    }
    results = [run_workload(name, args) for name in args.workloads]
    meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    write_summary(os.path.join(args.out, "summary.md"), results, meta)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
