"""A dynamic model's operators outside its GEMMs, over a symbolic T, against PyTorch: with and without vector tails.

``build_dynamic`` schedules every PrimFunc that is not a DietCode GEMM with ``schedule_generic``, one schedule for every
T. Its element-wise loops over T run whole vectors and a scalar remainder (the vector tails); ``vector_tails=False``
leaves them plain loops. Per operator (BERT-base's attention softmax over T, its layer norm and its exact GELU, each
legalised from Relax with a symbolic T) and T, the generic schedule built both ways through
``adatune.codegen.vector_math``'s pipeline (as ``build_dynamic`` builds it), the same schedule with T a constant
(``static``: what the symbolic extent costs), the vector tails with their buffers of symbolic size from TVM's workspace
pool (``pool``: without ``adatune.codegen.stack_bounds``, which ``build_dynamic`` gives every generic schedule with T's
upper bound, ``--t-max`` here) and PyTorch's operator (physical cores) are timed in ``--rounds`` rounds of turns, the
noise gate's probe read before every timing (``host_state``), each timing the mean of calls filling ``--min-ms``. Where
the two schedules are the same function (no loop over T to split), only one is timed. Ratios per T: the geometric mean
of per-round ratios with its 95% t-interval, over all rounds and over the rounds in the host's fast state.

    python -m benchmarks.generic_ops --out benchmarks/results/generic_ops

Writes results.json, results.csv, summary.md and speed.png under ``--out``.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
import tvm
from tvm import relax

import adatune
import adatune.codegen.vector_math
import adatune.models as am
from adatune.codegen.stack_bounds import with_upper_bounds
from adatune.measure.vendor_reference import physical_cores

from ._common import (
    evaluator_timer,
    geomean,
    geomean_interval,
    load_now,
    load_sentence,
    mean_call_timer,
    plot_latency_over_t,
    pyplot,
    run_meta,
    save_figure,
    write_csv,
    write_json,
    write_summary,
)
from .host_state import HostStates, interleaved_with_state, state_probe
from .noise_gate import NoiseGate

HIDDEN, HEADS, FFN = 768, 12, 3072
OPS = ("softmax", "layer-norm", "gelu")
ARMS = ("vector-tails", "pool", "plain", "static", "torch")
COMPARED = ("pool", "plain", "static", "torch")  # each arm's latency over the vector tails' per round
NAMES = {"pool": "pool buffers", "plain": "plain loops", "static": "T known at build", "torch": "PyTorch"}


def _legalised(op: str, t: tvm.tirx.Var | int) -> tvm.tirx.PrimFunc:
    """The PrimFunc LegalizeOps makes of the operator on float32 inputs with T symbolic (a Var) or known (an int)."""
    shape = {"softmax": [HEADS, t, t], "layer-norm": [t, HIDDEN], "gelu": [t, FFN]}[op]
    x = relax.Var("x", relax.TensorType(shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        if op == "softmax":
            y = relax.op.nn.softmax(x, -1)
        elif op == "gelu":
            y = relax.op.nn.gelu(x)
        else:
            ones, zeros = relax.const(np.ones(HIDDEN, "float32")), relax.const(np.zeros(HIDDEN, "float32"))
            y = relax.op.nn.layer_norm(x, ones, zeros, axes=[-1], epsilon=1e-12)
        bb.emit_func_output(bb.emit(y))
    mod = relax.transform.LegalizeOps()(bb.get())
    return next(f for _, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc))


def _input(op: str, t: int) -> np.ndarray:
    shape = {"softmax": (HEADS, t, t), "layer-norm": (t, HIDDEN), "gelu": (t, FFN)}[op]
    return np.random.default_rng(t).standard_normal(shape).astype("float32")


def _torch_op(op: str) -> Callable[[torch.Tensor], torch.Tensor]:
    if op == "softmax":
        return lambda x: F.softmax(x, -1)
    if op == "gelu":
        return F.gelu
    ones, zeros = torch.ones(HIDDEN), torch.zeros(HIDDEN)
    return lambda x: F.layer_norm(x, (HIDDEN,), ones, zeros, 1e-12)


def _tvm_timer(lib: Any, inputs: list[np.ndarray], min_ms: float) -> tuple[Callable[[], float], np.ndarray]:
    """A timer of the function on ``inputs`` (``time_evaluator``, caller off TVM's worker CPUs) and its output."""
    args = [tvm.runtime.tensor(a) for a in inputs] + [tvm.runtime.tensor(np.zeros_like(inputs[0]))]
    lib["main"](*args)
    return evaluator_timer(lib, args, min_ms), args[-1].numpy()


def _pooled(lib: Any) -> bool:
    """Whether the built function takes buffers from TVM's workspace pool."""
    return "TVMBackendAllocWorkspace" in lib.inspect_source("ll")


def _ratios(times: dict[str, list[float]], rounds: list[int], num: str, den: str) -> dict[str, float] | None:
    """``num``'s latency over ``den``'s (> 1: ``den`` faster): geomean of per-round ratios and its 95% interval."""
    if num not in times or den not in times or not rounds:
        return None
    centre, lo, hi = geomean_interval([times[num][i] / times[den][i] for i in rounds])
    return {"ratio": centre, "lo": lo, "hi": hi, "rounds": len(rounds)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    target = adatune.target.host()
    lanes = adatune.target.cpu_info(target).lanes("float32")
    pipeline = adatune.codegen.vector_math.tir_pipeline(target)
    torch.set_num_threads(physical_cores())
    gate = NoiseGate()
    probe = state_probe(timer=gate.compute_timer)
    gate.probe("before")
    rows: list[dict[str, Any]] = []
    t_sym = tvm.tirx.Var("T", "int64")
    for op in args.ops:
        func = _legalised(op, t_sym)
        tails, plain = (am.schedule_generic(func, lanes, vector_tails=v)[0] for v in (True, False))
        bound = {str(t_sym.name): args.t_max}
        funcs = {
            "vector-tails": with_upper_bounds(tails, bound),
            "pool": tails,
            "plain": with_upper_bounds(plain, bound),
        }
        same = funcs["vector-tails"].script() == funcs["plain"].script()
        libs = {
            arm: tvm.tirx.build(tvm.IRModule({"main": f.with_attr("global_symbol", "main")}), target, pipeline=pipeline)
            for arm, f in funcs.items()
            if not (same and arm == "plain")
        }
        if not _pooled(libs["pool"]):  # nothing of symbolic size to bound: the pool arm is the vector tails
            del libs["pool"]
        fn = _torch_op(op)
        for t in args.t:
            x = _input(op, t)
            xt = torch.from_numpy(x)
            # a layer norm's scale and shift are parameters of its PrimFunc: ones and zeros, as PyTorch's here
            inputs = [x, np.ones(HIDDEN, "float32"), np.zeros(HIDDEN, "float32")] if op == "layer-norm" else [x]
            with torch.no_grad():
                want = fn(xt).numpy()
            # the same schedule with T known at build: what the symbolic extent costs
            static = am.schedule_generic(_legalised(op, t), lanes)[0].with_attr("global_symbol", "main")
            arm_libs = libs | {"static": tvm.tirx.build(tvm.IRModule({"main": static}), target, pipeline=pipeline)}
            timers: dict[str, Callable[[], float]] = {}
            for arm, lib in arm_libs.items():
                timers[arm], got = _tvm_timer(lib, inputs, args.min_ms)
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{op} T={t} {arm}")
            timers["torch"] = mean_call_timer(functools.partial(fn, xt), args.min_ms)
            times, probes, orders = interleaved_with_state(timers, args.rounds, probe)
            states = HostStates(probes, orders)
            row: dict[str, Any] = {"op": op, "T": t, "same_schedule": same}
            row |= {f"{arm}_s": float(np.median(v)) for arm, v in times.items()}
            everything = list(range(args.rounds))
            for num in COMPARED:
                names = ["vector-tails", num]
                fast = states.rounds_in("fast", names) if num in times else []
                row[f"{num}_vs_tails"] = _ratios(times, everything, num, "vector-tails")
                row[f"{num}_vs_tails_fast"] = _ratios(times, fast, num, "vector-tails")
                row[f"{num}_fast_gated"] = bool(fast) and states.steady("fast", names)
            row["states"] = states.to_json()
            rows.append(row)
            cells = [f"{arm}={row[f'{arm}_s'] * 1e3:.3f} ms" for arm in times]
            print(f"{op} T={t}: " + ", ".join(cells), flush=True)
    gate.probe("after")
    return {"rows": rows, "noise_gate": gate.to_json(), "gate_sentence": gate.sentence(), "lanes": lanes}


def _cell(r: dict[str, float] | None) -> str:
    return "-" if r is None else f"{r['ratio']:.2f}x [{r['lo']:.2f}, {r['hi']:.2f}]"


def write(out: str, result: dict[str, Any], meta: dict[str, Any]) -> None:
    plt = pyplot()

    os.makedirs(out, exist_ok=True)
    rows = result["rows"]
    write_json(os.path.join(out, "results.json"), {"meta": meta} | result)
    flat = [{k: v for k, v in r.items() if not isinstance(v, dict | type(None))} for r in rows]
    write_csv(os.path.join(out, "results.csv"), flat)
    ops = list(dict.fromkeys(r["op"] for r in rows))
    fig, axes = plt.subplots(1, len(ops), figsize=(4.5 * len(ops), 3.6), squeeze=False)
    for ax, op in zip(axes[0], ops):
        have = [r for r in rows if r["op"] == op]
        plot_latency_over_t(ax, have, ARMS, "T")
        ax.set_title(op)
    save_figure(fig, out, "speed.png")
    host = meta["host"]
    lines = [
        "# Generic schedules over a symbolic T: vector tails, pool buffers, plain loops, T known at build and PyTorch",
        "",
        f"Command: `{meta['command']}`  ",
        f"Host: {host['model']} ({host['isa']}, {result['lanes']} fp32 lanes, {host['cores']} cores). "
        + load_sentence(meta, host["cores"]),
        result["gate_sentence"],
        "",
        "Latency per T (median of the rounds); ratios are another arm's latency over the vector tails' (> 1: the "
        "vector tails faster), geometric mean of per-round ratios [95% interval over rounds]; `fast`: only the "
        "rounds whose probe readings around both timings were in the host's fast state (gated when enough rounds "
        "and their readings steady).",
        "",
        "| op | T | vector tails (ms) | pool (ms) | plain (ms) | static (ms) | PyTorch (ms) | "
        + " | ".join(f"{NAMES[n]} / tails" for n in COMPARED)
        + " | "
        + " | ".join(f"{NAMES[n]} / tails, fast" for n in COMPARED)
        + " |",
        "|---|---:|" + "---:|" * (len(ARMS) + 2 * len(COMPARED)),
    ]
    for r in rows:
        ms = [f"{r[f'{a}_s'] * 1e3:.3f}" if f"{a}_s" in r else "same" for a in ARMS]
        every = [_cell(r[f"{n}_vs_tails"]) for n in COMPARED]
        fast = [
            _cell(r[f"{n}_vs_tails_fast"])
            + ("" if r[f"{n}_fast_gated"] or r[f"{n}_vs_tails_fast"] is None else " (not gated)")
            for n in COMPARED
        ]
        lines.append(f"| {r['op']} | {r['T']} | " + " | ".join(ms + every + fast) + " |")
    for op in ops:
        have = [r for r in rows if r["op"] == op]
        for n in COMPARED:
            ratios = [r[f"{n}_vs_tails"]["ratio"] for r in have if r[f"{n}_vs_tails"]]
            if ratios:
                g = geomean(ratios)
                lines.append(f"\n{op}: {NAMES[n]} / vector tails, geomean over T: {g:.2f}x")
    lines += ["", "![speed](speed.png)"]
    write_summary(out, lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.generic_ops", description=__doc__.splitlines()[0])
    ap.add_argument("--ops", nargs="*", default=list(OPS), choices=OPS)
    ap.add_argument("--t", type=int, nargs="*", default=[8, 33, 62, 64, 100, 128], help="sequence lengths timed")
    ap.add_argument("--t-max", type=int, default=128, help="T's upper bound stated to the vector tails' build")
    ap.add_argument("--rounds", type=int, default=15, help="rounds of turns per operator and T")
    ap.add_argument("--min-ms", type=float, default=20.0, help="each timing: the mean of calls filling this")
    ap.add_argument("--out", help="directory for results.json, results.csv, summary.md and speed.png")
    args = ap.parse_args(argv)
    if args.t and max(args.t) > args.t_max:
        ap.error(f"--t {max(args.t)} is above --t-max {args.t_max}: the bounded builds would be undefined there")
    started, t0, load_before = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), time.perf_counter(), load_now()
    result = run(args)
    if args.out:
        meta = run_meta("benchmarks.generic_ops", argv, started, t0, load_before)
        write(args.out, result, meta | {"host": adatune.target.describe_host()})
    print(result["gate_sentence"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
