"""Per-candidate overhead of ``RPCRunner`` against ``LocalRunner``, side by side on the same built candidates.

One batch of dense candidates is built once; each runner then measures it ``--rounds`` times with the same
timing options (after one untimed warm-up batch that pays the worker processes' start). The RPC side runs on
a loopback fleet (a tracker and two CPU servers on 127.0.0.1), once with one candidate in flight
(``n_parallel=1``: the latency a candidate pays) and once with one per server (``n_parallel=2``).

Per candidate, overhead = the runner's own wall time for it (``run_time``, plus the wait for a free server on
RPC) minus the kernel time the evaluator timed (``runs x mean cost``); the RPC stages (upload, remote load,
argument set-up and check, timing) come from ``MeasureResult.extra["rpc_stages"]``. The loopback servers share
this machine's cores with the client, so RPC numbers here are a floor on a real fleet's network costs, not a
model of them.

    flock /tmp/bench.lock .venv/bin/python -m benchmarks.rpc_overhead --out benchmarks/results/rpc_overhead
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence

import numpy as np

import adatune
from adatune.measure import BuildResult, LocalBuilder, LocalRunner, MeasureInput, MeasureResult, RPCRunner, Runner
from adatune.measure.rpc_fleet import LoopbackFleet

from ._common import write_csv

#: the RPC path's steps per candidate: tracker answer, session set-up, upload, remote load, arguments + check, timing
STAGES = ("wait", "connect", "upload", "load", "prepare", "evaluate")


def _kernel_seconds(r: MeasureResult) -> float:
    return r.mean_cost * r.runs if r.ok else 0.0


def _overhead(r: MeasureResult) -> float:
    return r.run_time + float(r.extra.get("rpc_wait", 0.0)) - _kernel_seconds(r)


def measure_runner(
    name: str, runner: Runner, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult], rounds: int
) -> tuple[dict, list[dict]]:
    """Warm the runner up, then time ``rounds`` batches; returns a summary and one row per candidate."""
    t0 = time.perf_counter()
    runner.run(inputs[:2], builds[:2])
    startup = time.perf_counter() - t0
    rows: list[dict] = []
    walls = []
    for rnd in range(rounds):
        t0 = time.perf_counter()
        results = runner.run(inputs, builds)
        walls.append(time.perf_counter() - t0)
        for k, r in enumerate(results):
            row = {
                "runner": name,
                "round": rnd,
                "candidate": inputs[k].config.key,
                "ok": r.ok,
                "error_no": int(r.error_no),
                "mean_cost_us": r.mean_cost * 1e6 if r.ok else None,
                "runs": r.runs,
                "kernel_ms": _kernel_seconds(r) * 1e3,
                "run_time_ms": r.run_time * 1e3,
                "overhead_ms": _overhead(r) * 1e3,
                "server": r.extra.get("rpc_server", "local"),
                "wait_ms": float(r.extra.get("rpc_wait", 0.0)) * 1e3,
            }
            for stage, sec in r.extra.get("rpc_stages", {}).items():
                row[f"{stage}_ms"] = sec * 1e3
            rows.append(row)
    ok = [row for row in rows if row["ok"]]
    n = len(inputs)
    summary = {
        "runner": name,
        "startup_s": round(startup, 3),
        "candidates": n * rounds,
        "errors": len(rows) - len(ok),
        "median_overhead_ms": round(statistics.median(r["overhead_ms"] for r in ok), 2) if ok else None,
        "mean_overhead_ms": round(statistics.fmean(r["overhead_ms"] for r in ok), 2) if ok else None,
        "median_kernel_ms": round(statistics.median(r["kernel_ms"] for r in ok), 3) if ok else None,
        "wall_per_candidate_ms": round(1e3 * sum(walls) / (n * rounds), 2),
        "servers_used": sorted({r["server"] for r in rows}),
    }
    for stage in STAGES:
        vals = [r[f"{stage}_ms"] for r in ok if f"{stage}_ms" in r]
        if vals and name != "local":
            summary[f"median_{stage}_ms"] = round(statistics.median(vals), 2)
    return summary, rows


def _markdown(cfg: dict, summaries: list[dict], agreement: dict) -> str:
    lines = [
        "# RPCRunner vs LocalRunner: per-candidate overhead",
        "",
        f"Command: `{cfg['command']}`  ",
        f"Workload: `dense.x86{tuple(cfg['args'])}`, {cfg['n_candidates']} candidates x {cfg['rounds']} rounds, "
        f"number={cfg['number']} repeat={cfg['repeat']} (deterministic evaluator), built once and shared.  ",
        f"Machine: {cfg['machine']}; shared with other agents' builds and tests while this ran (load average "
        f"{cfg['load_before']} before, {cfg['load_after']} after), so absolute numbers are noisy.  ",
        "RPC: loopback tracker + 2 CPU servers on 127.0.0.1 (same cores as the client): no network cost "
        "is in these numbers. With two candidates in flight (n_parallel=2) both servers' kernels, each using "
        "every core, run on the same cores at once, so kernel times and overheads rise here; on a real fleet "
        "each server has its own device and the batch's wall time divides by the servers.",
        "",
        "overhead = runner wall time per candidate (+ wait for a free server) - kernel time timed (runs x mean).",
        "",
        "| runner | startup s | candidates | errors | median overhead ms | mean overhead ms | median kernel ms "
        "| wall per candidate ms | median wait / connect / upload / load / prepare / evaluate ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        stages = " / ".join(str(s.get(f"median_{k}_ms", "-")) for k in STAGES)
        lines.append(
            f"| {s['runner']} | {s['startup_s']} | {s['candidates']} | {s['errors']} | {s['median_overhead_ms']} "
            f"| {s['mean_overhead_ms']} | {s['median_kernel_ms']} | {s['wall_per_candidate_ms']} "
            f"| {stages if s['runner'] != 'local' else '-'} |"
        )
    lines += [
        "",
        f"Kernel times: median ratio of a candidate's mean cost over RPC to its local mean cost "
        f"= {agreement['median_ratio']} (over {agreement['n']} candidates; n_parallel=1 against local, same "
        "candidates and rounds).",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="benchmarks/results/rpc_overhead")
    ap.add_argument("--n-candidates", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--number", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size", type=int, default=64, help="dense N = L = M")
    args = ap.parse_args(argv)
    if args.n_candidates < 2 or args.rounds < 1:
        ap.error("--n-candidates must be >= 2 and --rounds >= 1")
    os.makedirs(args.out, exist_ok=True)
    load_before = os.getloadavg()[0]

    task_args = (args.size, args.size, args.size, "float32")
    task = adatune.task.create("dense.x86", task_args, adatune.target.host())
    cands = task.space.random_candidates(np.random.default_rng(0), args.n_candidates)
    inputs = [MeasureInput(task, c) for c in cands]
    builder = LocalBuilder(n_parallel=2)
    builds = builder.build(inputs)
    builder.close()

    timing = {"number": args.number, "repeat": args.repeat}
    summaries, rows = [], []
    with LoopbackFleet(n_servers=2, key="bench-cpu", start_timeout=300) as fleet:
        runners: list[tuple[str, Runner]] = [
            ("local", LocalRunner(**timing)),
            ("rpc n_parallel=1", RPCRunner(fleet.key, fleet.host, fleet.port, n_parallel=1, **timing)),
            ("rpc n_parallel=2", RPCRunner(fleet.key, fleet.host, fleet.port, n_parallel=2, **timing)),
        ]
        for name, runner in runners:
            summary, runner_rows = measure_runner(name, runner, inputs, builds, args.rounds)
            runner.close()
            summaries.append(summary)
            rows += runner_rows
            print(json.dumps(summary))

    local = {(r["candidate"], r["round"]): r["mean_cost_us"] for r in rows if r["runner"] == "local" and r["ok"]}
    ratios = [
        r["mean_cost_us"] / local[(r["candidate"], r["round"])]
        for r in rows
        if r["runner"] == "rpc n_parallel=1" and r["ok"] and (r["candidate"], r["round"]) in local
    ]
    agreement = {"median_ratio": round(statistics.median(ratios), 3) if ratios else None, "n": len(ratios)}
    cfg = {
        "command": "flock /tmp/bench.lock .venv/bin/python -m benchmarks.rpc_overhead "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "args": list(task_args),
        "n_candidates": args.n_candidates,
        "rounds": args.rounds,
        **timing,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "tvm": __import__("tvm").__version__,
    }
    with open(os.path.join(args.out, "rpc_overhead.json"), "w", encoding="utf-8") as f:
        json.dump({"config": cfg, "summary": summaries, "kernel_agreement": agreement}, f, indent=1)
    write_csv(os.path.join(args.out, "candidates.csv"), rows)
    with open(os.path.join(args.out, "summary.md"), "w", encoding="utf-8") as f:
        f.write(_markdown(cfg, summaries, agreement))
    print(_markdown(cfg, summaries, agreement))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
