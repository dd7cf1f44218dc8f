"""How fast a model can run on this host at all: its FLOPs at the cores' measured peak FMA rate.

A latency goal set against another engine (BERT-base at 0.8x onnxruntime's latency) can only be met if the FLOP
rate it implies fits under the host's peak. This measures the peak: a chain of independent vector FMAs held in
registers, compiled by the system C compiler for the host's vector width (``adatune.target.cpu_info``), run as one
process pinned to each CPU, all at once, framed by the noise gate and with the gate's probe read around each
repeat (the host's state). It reads the model's FLOPs from a ``benchmarks.models`` run's ``tasks.csv`` (weight x
GFLOP of every task) and each engine's latency from a ``benchmarks.models.run_ab`` result (median over every round
and over the rounds in the host's fast state), and writes the rate each engine reached and the rate the goal needs,
as shares of the peak. Nothing is tuned or built with TVM here::

    python -m benchmarks.models.peak_bound --tasks benchmarks/results/models_zen4/tasks.csv \\
        --ab benchmarks/results/models_zen4_bert_vs_engines_placed --goal 0.8 --out benchmarks/results/peak_bound_zen4
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import adatune  # noqa: E402
from adatune.target import cpu_info  # noqa: E402

from .._common import load_now, run_meta, write_csv, write_summary  # noqa: E402
from ..harness.run import host_record  # noqa: E402
from ..host_state import HostStates, state_probe  # noqa: E402
from ..noise_gate import NoiseGate  # noqa: E402

#: independent accumulators: enough to cover the FMA latency on every pipe (4-5 cycles x 2 pipes)
ACCUMULATORS = 16

C_SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef float vec __attribute__((vector_size(LANES * 4)));
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    vec acc[ACC], a, b;
    for (int l = 0; l < LANES; l++) { a[l] = 0.999999f; b[l] = 1e-7f * (l + 1); }
    for (int k = 0; k < ACC; k++) acc[k] = b * (float)(k + 1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
#pragma GCC unroll 64
        for (int k = 0; k < ACC; k++) acc[k] = acc[k] * a + b;
        __asm__ volatile("" : "+v"(a));  /* a stays opaque: nothing folds */
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    float sum = 0;
    for (int k = 0; k < ACC; k++) for (int l = 0; l < LANES; l++) sum += acc[k][l];
    printf("%.9f %g\n", (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec), sum);
    return 0;
}
"""


def compile_fma_chain(lanes: int, out_dir: str) -> str:
    """The FMA chain for ``lanes`` float32 lanes per vector, built with ``-march=native`` (FMA contraction on)."""
    src, exe = os.path.join(out_dir, "fma_chain.c"), os.path.join(out_dir, "fma_chain")
    with open(src, "w", encoding="utf-8") as f:
        f.write(C_SOURCE)
    cmd = ["cc", "-O3", "-march=native", "-ffp-contract=fast", f"-DLANES={lanes}", f"-DACC={ACCUMULATORS}"]
    subprocess.run([*cmd, "-o", exe, src], check=True, capture_output=True)
    return exe


def flops_per_iteration(lanes: int) -> int:
    return ACCUMULATORS * lanes * 2  # one FMA is two FLOPs


def peak_rate(exe: str, lanes: int, cpus: list[int], iterations: int) -> float:
    """FLOP/s of one FMA-chain process per CPU in ``cpus``, started together, each pinned to its CPU (summed)."""
    procs = [
        subprocess.Popen(
            [exe, str(iterations)],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=lambda cpu=cpu: os.sched_setaffinity(0, {cpu}),  # type: ignore[misc]
        )
        for cpu in cpus
    ]
    seconds = [float(p.communicate()[0].split()[0]) for p in procs]
    return sum(iterations * flops_per_iteration(lanes) / s for s in seconds)


def model_gflop(tasks_csv: str) -> float:
    """A model run's FLOPs per inference: weight x GFLOP summed over its tasks."""
    with open(tasks_csv, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{tasks_csv}: no tasks")
    return sum(float(r["weight"]) * float(r["gflop"]) for r in rows)


def engine_latencies(ab_dir: str) -> dict[str, dict[str, float]]:
    """Each engine's median latency (s) over every round of every seed of a ``run_ab`` result, and over the rounds
    whose probe readings around it were fast."""
    with open(os.path.join(ab_dir, "results.json"), encoding="utf-8") as f:
        results = json.load(f)["results"]
    out: dict[str, dict[str, float]] = {}
    for name in results[0]["rounds_s"]:
        every, fast = [], []
        for r in results:
            times = r["rounds_s"][name]
            every += times
            hs = r.get("host_state")
            if hs:
                states = HostStates(hs["round_probes_s"], hs["round_orders"])
                fast += [times[i] for i in states.rounds_in("fast", [name])]
        out[name] = {"all_rounds": statistics.median(every)}
        if fast:
            out[name]["fast_state"] = statistics.median(fast)
    return out


def bound_table(gflop: float, peak: float, latencies: dict[str, dict[str, float]], goal: float, reference: str
                ) -> list[dict[str, Any]]:  # fmt: skip
    """Per engine and state: its FLOP rate and share of the peak; then the goal's latency (``goal`` x the reference
    engine's) and the rate and share it needs."""
    rows = []
    for state in ("all_rounds", "fast_state"):
        for name, lat in latencies.items():
            if state in lat:
                rate = gflop * 1e9 / lat[state]
                rows.append({"state": state, "what": name, "latency_ms": lat[state] * 1e3, "gflops": rate / 1e9,
                             "share_of_peak": rate / peak})  # fmt: skip
        if state in latencies.get(reference, {}):
            target = goal * latencies[reference][state]
            rate = gflop * 1e9 / target
            rows.append({"state": state, "what": f"goal: {goal:g}x {reference}'s latency", "latency_ms": target * 1e3,
                         "gflops": rate / 1e9, "share_of_peak": rate / peak})  # fmt: skip
    return rows


def plot(out: str, rows: list[dict[str, Any]], peak: float) -> str:
    """Each engine's and the goal's FLOP rate per state, against the peak (a line)."""
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [f"{r['what']}\n({r['state'].replace('_', ' ')})" for r in rows]
    colors = ["C3" if r["what"].startswith("goal") else "C0" if r["state"] == "all_rounds" else "C2" for r in rows]
    ax.bar(range(len(rows)), [r["gflops"] for r in rows], color=colors)
    ax.axhline(peak / 1e9, color="k", linestyle="--", label=f"measured peak {peak / 1e9:.1f} GFLOP/s")
    ax.set_xticks(range(len(rows)), labels, fontsize=6, rotation=30, ha="right")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("model FLOPs per second against the host's peak FMA rate")
    ax.legend(fontsize=8)
    path = os.path.join(out, "peak_bound.png")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", required=True, help="a benchmarks.models run's tasks.csv")
    p.add_argument("--ab", required=True, help="a benchmarks.models.run_ab result directory (the engines' latencies)")
    p.add_argument("--goal", type=float, default=0.8, help="latency goal as a fraction of the reference engine's")
    p.add_argument("--reference", default="onnxruntime")
    p.add_argument("--repeats", type=int, default=11)
    p.add_argument("--iterations", type=int, default=100_000_000)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    started, t0, load_before = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), time.perf_counter(), load_now()
    lanes = cpu_info(adatune.target.host()).fp32_lanes
    cpus = sorted(os.sched_getaffinity(0))
    gate = NoiseGate()
    gate.probe("before")
    probe = state_probe(timer=gate.compute_timer)
    both, single, readings = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        exe = compile_fma_chain(lanes, tmp)
        for _ in range(args.repeats):
            before = probe()
            both.append(peak_rate(exe, lanes, cpus, args.iterations))
            single.append(peak_rate(exe, lanes, cpus[:1], args.iterations))
            readings.append([before, probe()])
    gate.probe("after")
    peak = statistics.median(both)
    gflop = model_gflop(args.tasks)
    rows = bound_table(gflop, peak, engine_latencies(args.ab), args.goal, args.reference)
    result = {
        "meta": run_meta("benchmarks.models.peak_bound", argv, started, t0, load_before)
        | {"host": host_record(), "noise_gate": gate.to_json(), "lanes": lanes, "cpus": cpus},
        "peak_flops_all_cpus": both,
        "peak_flops_one_cpu": single,
        "probe_readings_s": readings,
        "model_gflop": gflop,
        "rows": rows,
    }
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    write_csv(os.path.join(args.out, "rows.csv"), rows)
    figure = os.path.basename(plot(args.out, rows, peak))
    states = HostStates(readings)
    lines = [
        "# A model's FLOPs against the host's peak FMA rate",
        "",
        f"Command: `python -m benchmarks.models.peak_bound {' '.join(argv or [])}`".rstrip(),
        f"Host: {host_record().get('model')} ({host_record().get('isa')}, {lanes} fp32 lanes), CPUs {cpus}.  ",
        gate.sentence() + "  ",
        states.sentence(),
        "",
        f"Peak: {ACCUMULATORS} independent {lanes}-lane FMA chains per CPU, one pinned process per CPU at once: "
        f"median {peak / 1e9:.1f} GFLOP/s over {args.repeats} repeats (range {min(both) / 1e9:.1f}-"
        f"{max(both) / 1e9:.1f}); one CPU alone {statistics.median(single) / 1e9:.1f}.",
        f"Model: {gflop:.2f} GFLOP per inference (`{args.tasks}`); latencies from `{args.ab}`.",
        "",
        "| state | engine or goal | latency (ms) | GFLOP/s | share of the peak |",
        "|---|---|---:|---:|---:|",
    ]
    lines += [f"| {r['state']} | {r['what']} | {r['latency_ms']:.2f} | {r['gflops']:.1f} | {r['share_of_peak']:.0%} |"
              for r in rows]  # fmt: skip
    lines += ["", f"![rates]({figure})"]
    write_summary(args.out, lines, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
