"""Tuned x86 kernels against PyTorch on the same machine, in the same process, timed in turns.

For each workload and seed: a tuner (XGB by default, as ``make demo``) measures a fixed number of configs of the x86
template's space; the best few are re-timed, and the fastest of them and PyTorch (oneDNN, all physical cores) are then
timed in turns for several rounds, so that load from other processes hits both alike; the noise gate frames each
workload's timings, and a failed gate is stated beside the ratios. Reports per seed the median GFLOPS of each and the
median of the per-round ratios, and over the seeds the median ratio and its spread.

    python -m benchmarks.kernels_vs_pytorch                       # dense-1024 and conv2d-resnet18-L6
    python -m benchmarks.kernels_vs_pytorch --workloads dense-1024 --seeds 0 1 2 --trials 128

Writes benchmarks/results/kernels_vs_pytorch/{results.json, summary.md} with ``describe_host()``; a run replaces the
entries of its workloads and keeps the others, so workloads can be run one at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import tvm

import adatune
from adatune.measure.vendor_reference import physical_cores, time_callable
from adatune.records import load_from_file
from adatune.target import one_blas_thread, size_tvm_thread_pool
from adatune.templates.workloads import get as get_workload
from adatune.templates.workloads import torch_reference
from adatune.tuners import create_tuner
from adatune.tuners.callback import log_to_file

from ._common import command_line, write_json
from .noise_gate import CV_LIMIT, NoiseGate, interleaved, probe_timer, robust_cv

DEFAULT_WORKLOADS = ["dense-1024", "conv2d-resnet18-L6"]
OUT = "benchmarks/results/kernels_vs_pytorch"


def records_path(out: str, name: str, seed: int) -> str:
    return os.path.join(out, "records", f"{name}-seed{seed}.jsonl")


def tune(task: Any, tuner_name: str, trials: int, seed: int, timeout: float, log: str) -> dict[str, Any]:
    """``trials`` configs of the task's space picked by the tuner, each checked against numpy when timed and
    appended to ``log``; a log left by an interrupted run is loaded first and not measured again."""
    option = adatune.measure_option(
        adatune.LocalBuilder(timeout=timeout),
        adatune.LocalRunner(number=2, repeat=2, timeout=timeout, check_correctness=True),
    )
    tuner = create_tuner(tuner_name, task, seed=seed)
    done = tuner.load_history(load_from_file(log)) if os.path.exists(log) else 0
    os.makedirs(os.path.dirname(log), exist_ok=True)
    side = log.replace(".jsonl", ".tune.json")
    spent = 0.0
    if done and os.path.exists(side):
        with open(side, encoding="utf-8") as f:
            spent = float(json.load(f)["tune_s"])
    t0 = time.time()
    try:
        tuner.tune(n_trial=max(0, trials - done), measure_option=option, callbacks=[log_to_file(log)])
    finally:
        option.close()
        info = {
            "tuner": tuner_name,
            "seed": seed,
            "resumed": done,
            "tune_s": spent + time.time() - t0,
            "command": command_line("benchmarks.kernels_vs_pytorch", None),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        write_json(side, info, indent=None)
    return info


def best_measured(task: Any, log: str, n: int) -> tuple[list[tuple[float, Any]], int, dict[str, int]]:
    """The ``n`` fastest correct configs of a tuning log (GFLOPS, config), its record count and error counts."""
    if not os.path.exists(log):
        raise FileNotFoundError(f"{log}: no tuning log; run --stage tune first")
    recs = [r for r in load_from_file(log) if r.workload_key == task.workload_key]
    errors: dict[str, int] = {}
    for r in recs:
        if r.result.error_no:
            name = adatune.MeasureErrorNo(r.result.error_no).name
            errors[name] = errors.get(name, 0) + 1
    ok = sorted(((task.flop / r.mean_cost / 1e9, r.key, r.config) for r in recs if not r.result.error_no), reverse=True)
    if not ok:
        raise RuntimeError(f"{log}: no config of {len(recs)} built and ran correctly")
    return [(g, task.candidate_from_json(c)) for g, _, c in ok[:n]], len(recs), errors


def kernel_timer(task: Any, config: Any, repeats: int, cpu_time: bool = False) -> Callable[[], float]:
    """Builds ``config`` and returns a function giving the median seconds of ``repeats`` runs (with
    ``cpu_time``, this thread's CPU seconds per call: for one-thread runs on a machine other jobs share)."""
    lib = tvm.tirx.build(task.scheduled_module(config), task.target)
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    host = [rng.uniform(-1, 1, s.shape).astype(s.dtype) for s in task.arg_specs]
    args = [tvm.runtime.tensor(a, dev) for a in host]
    lib["main"](*args)  # the tuner checked correctness; check the kernel that is reported once more
    with one_blas_thread():  # BLAS workers left spinning would share the cores with the timed kernel
        want = task.reference_outputs([a for a, s in zip(host, task.arg_specs) if not s.is_output])
    if want is not None:
        got = [a.numpy() for a, s in zip(args, task.arg_specs) if s.is_output]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3)
    if cpu_time:
        kernel = lib["main"]
        return lambda: time_callable(lambda: kernel(*args), repeats, warmup_s=0.05, clock=time.thread_time)
    evaluator = lib.time_evaluator("main", dev, number=1, repeat=repeats)
    evaluator(*args)  # warm-up: thread pool, caches, page tables

    def timer() -> float:
        with adatune.target.tvm_main_thread():
            return statistics.median(evaluator(*args).results)

    return timer


def gflops_in_turns(
    task: Any,
    timers: dict[str, Callable[[], float]],
    torch_fn: Callable[[], Any],
    rounds: int,
    repeats: int,
    clock: Callable[[], float] = time.perf_counter,
    probe: Callable[[], float] | None = None,
) -> dict[str, list[float]]:
    """GFLOPS per round of every kernel and of PyTorch (``"torch"``), in turns (``interleaved``); with ``probe``, the
    peak-FMA probe is timed every round too (``"probe_s"``, seconds), to tell rounds in the host's slow state apart."""
    turns = {"torch": lambda: time_callable(torch_fn, repeats, 0.1, clock), **timers}
    times = interleaved(turns | ({"probe_s": probe} if probe is not None else {}), rounds)
    return {n: v if n == "probe_s" else [task.flop / s / 1e9 for s in v] for n, v in times.items()}


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


def time_seed(name: str, seed: int, args: argparse.Namespace, probe: Callable[[], float]) -> dict[str, Any]:
    """Time the best kernels one seed's tuning found against PyTorch, in turns."""
    wl = get_workload(name)
    task = wl.create_task(adatune.target.host())
    log = records_path(args.out, name, seed)
    best, n_records, errors = best_measured(task, log, args.finalists)
    with open(log.replace(".jsonl", ".tune.json"), encoding="utf-8") as f:
        tuning = json.load(f)
    timers = {str(c.key): kernel_timer(task, c, args.repeats) for _, c in best}
    configs = {str(c.key): c for _, c in best}
    torch_fn = torch_reference(wl)
    heats = gflops_in_turns(task, timers, torch_fn, 3, args.repeats)  # pick the finalist that is fast again
    key = max(timers, key=lambda k: statistics.median(heats[k]))
    final = gflops_in_turns(task, {key: timers[key]}, torch_fn, args.rounds, args.repeats, probe=probe)
    summary = summarize(final[key], final["torch"])
    probe_cv = robust_cv(final["probe_s"])
    summary.update(probe_rounds_s=final["probe_s"], probe_roundsrobust_cv=probe_cv, probe_steady=probe_cv <= CV_LIMIT)
    one_thread = single_thread_cpu_time(task, configs[key], torch_fn, args.cpu_rounds, args.repeats)
    print(
        f"{name} seed {seed}: {summary['gflops_median']:.1f} GFLOPS vs PyTorch {summary['torch_gflops_median']:.1f} "
        f"(ratio {summary['ratio_median']:.2f}, rounds {summary['ratio_min']:.2f}-{summary['ratio_max']:.2f})",
        flush=True,
    )
    return {
        "seed": seed,
        "trials": n_records,
        "tune_s": tuning["tune_s"],
        "tune_command": tuning["command"],
        "tuner": tuning["tuner"],
        "errors": errors,
        "tuning_best_gflops": best[0][0],
        "finalists": {k: statistics.median(heats[k]) for k in timers},
        "best_config": configs[key].to_json(),
        **summary,
        "one_thread_cpu_time": one_thread,
    }


def single_thread_cpu_time(
    task: Any, config: Any, torch_fn: Callable[[], Any], rounds: int, repeats: int
) -> dict[str, Any] | None:
    """The same kernel and PyTorch on one thread each, timed by that thread's CPU time in turns: the quality of the code
    itself, which other jobs disturb far less than the wall-clock time of two threads that wait for each other."""
    if rounds < 1:
        return None
    pool = tvm.get_global_func("runtime.config_threadpool")
    threads = int(tvm.runtime.num_threads())
    pool(1, 1)  # TVM runs kernels in the calling thread
    torch.set_num_threads(1)
    try:
        timer = kernel_timer(task, config, repeats, cpu_time=True)
        got = gflops_in_turns(task, {"adatune": timer}, torch_fn, rounds, repeats, clock=time.thread_time)
    finally:
        pool(1, threads)
        torch.set_num_threads(physical_cores())
    return summarize(got["adatune"], got["torch"])


def run_workload(name: str, args: argparse.Namespace, probe: Callable[[], float]) -> dict[str, Any]:
    """Every seed of one workload, and the spread of their ratios."""
    task = get_workload(name).create_task(adatune.target.host())
    seeds = [time_seed(name, seed, args, probe) for seed in args.seeds]
    ratios = [r["ratio_median"] for r in seeds]
    return {
        "workload": name,
        "template": task.name,
        "args": list(task.args),
        "flop": task.flop,
        "space": task.space.size,
        "tuner": seeds[0]["tuner"],
        "seeds": seeds,
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "gflops_median": statistics.median(r["gflops_median"] for r in seeds),
        "torch_gflops_median": statistics.median(r["torch_gflops_median"] for r in seeds),
        "one_thread_cpu_time_ratios": [
            r["one_thread_cpu_time"]["ratio_median"] for r in seeds if r.get("one_thread_cpu_time")
        ],
    }


def _probe_cell(seed: dict[str, Any]) -> str:
    cv = seed.get("probe_roundsrobust_cv")
    if cv is None:
        return "-"
    return f"{cv:.1%}" + ("" if seed.get("probe_steady") else " (host state moved: ratio not claimed)")


def _one_thread(seed: dict[str, Any]) -> str:
    c = seed.get("one_thread_cpu_time")
    if not c:
        return "-"
    return f"{c['gflops_median']:.1f} / {c['torch_gflops_median']:.1f} ({c['ratio_median']:.2f})"


def write_summary(path: str, results: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    host = meta["host"]
    lines = [
        "# Tuned x86 kernels vs PyTorch",
        "",
        f"Host: {host['model']} ({host['mcpu']}, {host['isa']}, {host['fp32_lanes']} fp32 lanes, "
        f"{host['vector_registers']} vector registers, L1d {host['l1d_bytes'] >> 10} KiB, "
        f"L2 {host['l2_bytes'] >> 10} KiB, L3 {host['l3_bytes'] >> 20} MiB, {host['cores']} cores); "
        f"PyTorch {meta['torch_version']} with {meta['torch_threads']} threads, TVM's pool with "
        f"{meta['tvm_threads']} threads; TVM {host['tvm_version']}. What else ran on the machine shows in each "
        "workload's load averages and noise gate below.",
        "",
    ]
    for r in results:
        m = r["meta"]
        lines += [
            f"## {r['workload']} ({r['template']}{tuple(r['args'])}, {r['space']} configs in the space)",
            "",
            f"Tuning: `{r['seeds'][0]['tune_command']}`: {r['seeds'][0]['trials']} configs per seed picked by the "
            f"`{r['tuner']}` tuner (logs in `records/`). Timing: `{m['command']}` ({m['started']} to "
            f"{m['finished']}): each seed's best {m['finalists']} re-timed, then the fastest and PyTorch timed in "
            f"turns for {m['rounds']} rounds (median of {m['repeats']} runs each); only these timings make the ratios.",
            "",
            f"**Ratio over {len(r['seeds'])} seeds: median {r['ratio_median']:.2f}, min-max "
            f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}.** "
            + m.get("noise_sentence", "No noise gate was recorded for this older run.")
            + (
                f" One thread each, by CPU time: ratios {', '.join(f'{x:.2f}' for x in cpu)}."
                if (cpu := r.get("one_thread_cpu_time_ratios"))
                else ""
            ),
            "",
            "| seed | adatune GFLOPS | PyTorch GFLOPS | ratio (median of rounds) | rounds min-max | rounds IQR "
            "| peak-FMA probe over the rounds: robust CV | 1 thread, CPU time: adatune / PyTorch GFLOPS (ratio) "
            "| tuning s | best config |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for sd in r["seeds"]:
            lines.append(
                f"| {sd['seed']} | {sd['gflops_median']:.1f} | {sd['torch_gflops_median']:.1f} "
                f"| {sd['ratio_median']:.2f} | {sd['ratio_min']:.2f}-{sd['ratio_max']:.2f} "
                f"| {sd['ratio_q1']:.2f}-{sd['ratio_q3']:.2f} | {_probe_cell(sd)} | {_one_thread(sd)} "
                f"| {sd['tune_s']:.0f} "
                f"| `{json.dumps(sd['best_config']['entity'])}` |"
            )
        lines.append("")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    size_tvm_thread_pool()  # kernels timed in this process get every core, as in adatune's workers
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.kernels_vs_pytorch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--workloads", nargs="+", default=DEFAULT_WORKLOADS)
    p.add_argument("--tuner", default="xgb", help="tuner name (adatune tuners lists them)")
    p.add_argument("--trials", type=int, default=128, help="configs measured per workload and seed")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--finalists", type=int, default=3, help="best tuning configs re-timed before the final")
    p.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds of the final")
    p.add_argument("--repeats", type=int, default=15, help="runs per timing (median)")
    p.add_argument(
        "--cpu-rounds", type=int, default=5, help="rounds of the one-thread CPU-time comparison (0: skip it)"
    )
    p.add_argument("--timeout", type=float, default=30.0, help="build/run timeout per candidate (s)")
    p.add_argument("--out", default=OUT)
    p.add_argument(
        "--stage",
        choices=["all", "tune", "time"],
        default="all",
        help="tune: write tuning logs (out/records); time: time the logs' best kernels against PyTorch",
    )
    args = p.parse_args(argv)
    torch.set_num_threads(physical_cores())
    if args.stage in ("all", "tune"):
        for name in args.workloads:
            task = get_workload(name).create_task(adatune.target.host())
            for seed in args.seeds:
                log = records_path(args.out, name, seed)
                if args.stage == "all" and os.path.exists(log):
                    os.remove(log)  # a fresh run
                info = tune(task, args.tuner, args.trials, seed, args.timeout, log)
                print(f"{name} seed {seed}: tuned in {info['tune_s']:.0f} s -> {log}", flush=True)
        if args.stage == "tune":
            return 0
    meta = {
        "host": adatune.target.describe_host(),
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "tvm_threads": int(tvm.runtime.num_threads()),
    }
    path = os.path.join(args.out, "results.json")
    kept: list[dict[str, Any]] = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            kept = [r for r in json.load(f)["results"] if r["workload"] not in args.workloads]
    results = []
    for name in args.workloads:
        run = {
            "command": command_line("benchmarks.kernels_vs_pytorch", argv),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **{k: getattr(args, k) for k in ("finalists", "rounds", "repeats")},
        }
        gate = NoiseGate()  # the probe kernel's spread before and after this workload's timings
        gate.probe("before")
        result = run_workload(name, args, probe_timer())
        gate.probe("after")
        run["noise_gate"], run["noise_sentence"] = gate.to_json(), gate.sentence()
        run["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        results.append({**result, "meta": run})
        print(
            f"{name}: ratio to PyTorch over seeds {args.seeds}: median {result['ratio_median']:.2f} "
            f"(min {result['ratio_min']:.2f}, max {result['ratio_max']:.2f})",
            flush=True,
        )
    order = {n: i for i, n in enumerate(DEFAULT_WORKLOADS)}
    everything = sorted([*kept, *results], key=lambda r: (order.get(r["workload"], len(order)), r["workload"]))
    os.makedirs(args.out, exist_ok=True)
    write_json(path, {"meta": meta, "results": everything})
    write_summary(os.path.join(args.out, "summary.md"), everything, meta)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
