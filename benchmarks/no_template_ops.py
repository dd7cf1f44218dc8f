"""Operators with no knob template, tuned by trace search, against PyTorch per operator, timed in turns.

Models outside the zoo need trace search for their layer norms, softmaxes, depthwise convolutions and pooling. Four such
operators at model sizes, written in TE here (no topi but its fast exp), each a trace workload with a numpy reference:

- ``layer-norm``: BERT-base's, 128 tokens x 768, learnt scale and shift, eps 1e-12;
- ``softmax``: BERT-base attention scores, 12 heads x 128 queries over 128 keys; ``softmax-fast-exp`` with fast exp;
- ``depthwise-conv``: MobileNet-V1's 3x3 depthwise convolution at 56x56 with 128 channels, stride 1, pad 1;
- ``max-pool``: ResNet-18's stem pooling, 3x3 stride 2 pad 1 over 64 x 112 x 112.

Per operator, seed and rule set (``adatune.trace.RULE_SETS``): ``TraceSearchTuner`` (XGBoost) measures ``--trials``
candidates. Then every best program (built once and checked against numpy) and PyTorch's operator
(``torch.nn.functional``, physical cores) are timed in ``--rounds`` rounds of turns, each timing the mean of calls
filling ``--min-ms``; the median round is the latency. The noise gate frames the run. ``--generic`` adds the operator
under ``am.schedule_generic`` (no tuning; what ``am.build`` falls back to for a trace task without a record) to the
turns as rule set ``generic``, and as ``generic-row-window`` the same with a pooling or convolution window around its
whole output row and its pad inlined (``window_vectors=False``); ``--rules`` with no rule set times those alone.

    python -m benchmarks.no_template_ops --out benchmarks/results/no_template_ops

Writes results.json, results.csv, summary.md and speed.png under ``--out``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
import tvm
from tvm import te, topi

import adatune
import adatune.codegen.vector_math
import adatune.models as am
import adatune.trace
from adatune.measure.vendor_reference import physical_cores
from adatune.target import size_tvm_thread_pool
from adatune.trace import RULE_SETS, TraceTask
from adatune.tuners import TraceSearchTuner

from ._common import (
    evaluator_timer,
    geomean_interval,
    load_now,
    load_sentence,
    mean_call_timer,
    pyplot,
    run_meta,
    save_figure,
    write_csv,
    write_json,
    write_summary,
)
from .noise_gate import NoiseGate, interleaved

OPS = ("layer-norm", "softmax", "softmax-fast-exp", "depthwise-conv", "max-pool")
_NAMES = {op: f"no-template/{op}" for op in OPS}


# -- the operators (TE) and their numpy references ---------------------------------------------------------
def _layer_norm_ref(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * gamma + beta


@adatune.trace.workload(_NAMES["layer-norm"], reference=_layer_norm_ref)
def layer_norm(rows: int, cols: int) -> tvm.tirx.PrimFunc:
    x = te.placeholder((rows, cols), name="x")
    gamma, beta = te.placeholder((cols,), name="gamma"), te.placeholder((cols,), name="beta")
    k1, k2 = te.reduce_axis((0, cols), "k1"), te.reduce_axis((0, cols), "k2")
    total = te.compute((rows,), lambda i: te.sum(x[i, k1], axis=k1), name="total")
    squares = te.compute(
        (rows,),
        lambda i: te.sum((x[i, k2] - total[i] / cols) * (x[i, k2] - total[i] / cols), axis=k2),
        name="squares",
    )
    out = te.compute(
        (rows, cols),
        lambda i, j: (x[i, j] - total[i] / cols) * te.rsqrt(squares[i] / cols + 1e-12) * gamma[j] + beta[j],
        name="out",
    )
    return te.create_prim_func([x, gamma, beta, out])


def _softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _softmax(rows: int, cols: int, exp: Callable[[te.Tensor], te.Tensor]) -> tvm.tirx.PrimFunc:
    a = te.placeholder((rows, cols), name="A")
    k, k2 = te.reduce_axis((0, cols), name="k"), te.reduce_axis((0, cols), name="k2")
    mx = te.compute((rows,), lambda i: te.max(a[i, k], axis=k), name="mx")
    e = exp(te.compute((rows, cols), lambda i, j: a[i, j] - mx[i], name="shifted"))
    s = te.compute((rows,), lambda i: te.sum(e[i, k2], axis=k2), name="s")
    out = te.compute((rows, cols), lambda i, j: e[i, j] / s[i], name="out")
    return te.create_prim_func([a, out])


@adatune.trace.workload(_NAMES["softmax"], reference=_softmax_ref)
def softmax(rows: int, cols: int) -> tvm.tirx.PrimFunc:
    return _softmax(rows, cols, lambda x: te.compute(x.shape, lambda i, j: te.exp(x[i, j]), name="e"))


@adatune.trace.workload(_NAMES["softmax-fast-exp"], reference=_softmax_ref)
def softmax_fast_exp(rows: int, cols: int) -> tvm.tirx.PrimFunc:
    """The same with TVM's vectorisable exp approximation (``topi.fast_exp``), which a model imported with
    ``fast_math=True`` gets: the exact ``exp`` is a scalar libm call per element."""
    return _softmax(rows, cols, topi.fast_exp)


def _depthwise_ref(data: np.ndarray, weight: np.ndarray) -> np.ndarray:
    padded = np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))  # n, c, y, x, ky, kx
    return np.einsum("ncyxab,cab->ncyx", windows, weight)


@adatune.trace.workload(_NAMES["depthwise-conv"], reference=_depthwise_ref)
def depthwise_conv(channels: int, hw: int) -> tvm.tirx.PrimFunc:
    data = te.placeholder((1, channels, hw, hw), name="data")
    weight = te.placeholder((channels, 3, 3), name="weight")
    padded = te.compute(
        (1, channels, hw + 2, hw + 2),
        lambda b, c, y, x: te.if_then_else(te.all(y >= 1, y <= hw, x >= 1, x <= hw), data[b, c, y - 1, x - 1], 0.0),
        name="pad",
    )
    ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    out = te.compute(
        (1, channels, hw, hw),
        lambda b, c, y, x: te.sum(padded[b, c, y + ry, x + rx] * weight[c, ry, rx], axis=[ry, rx]),
        name="dwconv",
    )
    return te.create_prim_func([data, weight, out])


def _max_pool_ref(data: np.ndarray) -> np.ndarray:
    padded = np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))[:, :, ::2, ::2]
    return windows.max(axis=(-1, -2))


@adatune.trace.workload(_NAMES["max-pool"], reference=_max_pool_ref)
def max_pool(channels: int, hw: int) -> tvm.tirx.PrimFunc:
    data = te.placeholder((1, channels, hw, hw), name="data")
    padded = te.compute(
        (1, channels, hw + 2, hw + 2),
        lambda b, c, y, x: te.if_then_else(
            te.all(y >= 1, y <= hw, x >= 1, x <= hw), data[b, c, y - 1, x - 1], te.min_value("float32")
        ),
        name="pad",
    )
    out_hw = (hw + 2 - 3) // 2 + 1
    ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    out = te.compute(
        (1, channels, out_hw, out_hw),
        lambda b, c, y, x: te.max(padded[b, c, 2 * y + ry, 2 * x + rx], axis=[ry, rx]),
        name="pool",
    )
    return te.create_prim_func([data, out])


#: op -> (workload arguments, PyTorch's operator on the same numpy inputs)
SHAPES: dict[str, tuple[tuple[int, ...], Callable[..., Any]]] = {
    "layer-norm": ((128, 768), lambda x, g, b: F.layer_norm(x, (x.shape[-1],), g, b, eps=1e-12)),
    "softmax": ((12 * 128, 128), lambda x: torch.softmax(x, dim=-1)),
    "softmax-fast-exp": ((12 * 128, 128), lambda x: torch.softmax(x, dim=-1)),
    "depthwise-conv": (
        (128, 56),
        lambda x, w: F.conv2d(x, w.reshape(w.shape[0], 1, 3, 3), padding=1, groups=w.shape[0]),
    ),
    "max-pool": ((64, 112), lambda x: F.max_pool2d(x, 3, 2, 1)),
}


# -- timing --------------------------------------------------------------------------------------------------
def tvm_timer(
    task: TraceTask, mod: tvm.IRModule, inputs: list[np.ndarray], min_ms: float
) -> tuple[Callable[[], float], bool]:
    """A timer of the built program on ``inputs`` (``time_evaluator``, as the tuner's runner times it) and whether its
    output matches numpy's; built as adatune's builder builds it (``adatune.codegen.vector_math``'s pipeline)."""
    lib = tvm.tirx.build(mod, task.target, pipeline=adatune.codegen.vector_math.tir_pipeline(task.target))
    references = task.reference_outputs(inputs)
    if references is None:
        raise ValueError(f"task {task.name} has no numpy reference to check its programs against")
    expected = references[0]
    args = [tvm.runtime.tensor(x) for x in inputs] + [tvm.runtime.tensor(np.zeros(expected.shape, "float32"))]
    lib["main"](*args)
    ok = bool(np.allclose(args[-1].numpy(), expected, rtol=1e-4, atol=1e-4))
    return evaluator_timer(lib, args, min_ms), ok


def tune(
    task: TraceTask, trials: int, seed: int, plan_size: int, confirm: int = 0
) -> tuple[tvm.IRModule | None, float, int]:
    """(best program, tuning wall seconds, failed candidates) of one TraceSearchTuner run; ``confirm`` > 0:
    its fastest ``confirm`` programs re-timed in turns after it (``Tuner.confirm``, time included)."""
    tuner = TraceSearchTuner(task, cost_model="xgb", plan_size=plan_size, seed=seed)
    option = adatune.measure_option(
        adatune.LocalBuilder(timeout=30), adatune.LocalRunner(number=5, repeat=3, timeout=30)
    )
    t0 = time.perf_counter()
    failed = [0]

    def count(_tuner: Any, _inputs: Any, results: Any) -> None:
        failed[0] += sum(not r.ok for r in results)

    try:
        tuner.tune(n_trial=trials, measure_option=option, batch_size=plan_size, callbacks=[count])
        if confirm:
            tuner.confirm(option, top=confirm)
    finally:
        option.builder.close()
        option.runner.close()
    best = None if tuner.best_config is None else task.scheduled_module(tuner.best_config)
    return best, time.perf_counter() - t0, failed[0]


# -- the run ---------------------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.no_template_ops",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--ops", nargs="*", default=list(OPS), choices=OPS)
    p.add_argument("--rules", nargs="*", default=["tvm", "packed"], choices=list(RULE_SETS))
    p.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    p.add_argument("--trials", type=int, default=32, help="measured candidates per tuning run")
    p.add_argument("--plan-size", type=int, default=8)
    p.add_argument(
        "--confirm", type=int, default=0, help="after each tuning run, re-time its N fastest programs in turns (0: off)"
    )
    p.add_argument("--rounds", type=int, default=15, help="rounds of turns of every program and PyTorch")
    p.add_argument("--min-ms", type=float, default=20.0, help="each timing: the mean of calls filling this long")
    p.add_argument(
        "--generic",
        action="store_true",
        help="also time the operator under am.schedule_generic (no tuning: what am.build falls back to for a "
        "trace task without a record) in the same turns, as rule set 'generic'",
    )
    p.add_argument("--out", default="benchmarks/results/no_template_ops")
    return p


def run_op(op: str, args: argparse.Namespace, target: tvm.target.Target) -> list[dict[str, Any]]:
    shape, torch_op = SHAPES[op]
    tasks = {rules: adatune.task.create(RULE_SETS[rules].prefix + _NAMES[op], shape, target) for rules in args.rules}
    # the operator itself, through any rule set's name (``--generic`` needs none)
    base = adatune.task.create(RULE_SETS[(args.rules or ["tvm"])[0]].prefix + _NAMES[op], shape, target)
    specs = base.arg_specs
    rng = np.random.default_rng(0)  # one set of inputs for every program and PyTorch
    inputs = [rng.standard_normal(tuple(int(d) for d in s.shape)).astype("float32") for s in specs if not s.is_output]
    rows: list[dict[str, Any]] = []
    programs: dict[str, tuple[Callable[[], float], dict[str, Any]]] = {}
    for seed in args.seeds:
        for rules, task in tasks.items():
            assert isinstance(task, TraceTask)
            best, wall, failed = tune(task, args.trials, seed, args.plan_size, args.confirm)
            row = {"op": op, "rules": rules, "seed": seed, "tune_s": wall, "failed": failed, "correct": False}
            if best is not None:
                timer, row["correct"] = tvm_timer(task, best, inputs, args.min_ms)
                programs[f"{rules}/{seed}"] = (timer, row)
            rows.append(row)
            print(
                f"{op:>15} {rules:>7} seed {seed}: tuned {wall:5.1f} s, failed {failed}, correct {row['correct']}",
                flush=True,
            )
    if args.generic:  # the untuned fallback: the shape-generic schedule, no trials
        assert isinstance(base, TraceTask)
        func = base.unscheduled_module()["main"]
        lanes = adatune.target.cpu_info(target).lanes("float32")
        # "generic-row-window": a window around the whole output row, its pad inlined
        for name, window_vectors in (("generic", True), ("generic-row-window", False)):
            generic = tvm.IRModule({"main": am.schedule_generic(func, lanes, window_vectors=window_vectors)[0]})
            row = {"op": op, "rules": name, "seed": 0, "tune_s": 0.0, "failed": 0}
            timer, row["correct"] = tvm_timer(base, generic, inputs, args.min_ms)
            programs[name] = (timer, row)
            rows.append(row)
            print(f"{op:>15} {name} (untuned): correct {row['correct']}", flush=True)
    layouts = {"torch": [torch.from_numpy(x) for x in inputs]}
    if inputs[0].ndim == 4:  # PyTorch's NCHW pooling is far slower than its channels-last one
        layouts["torch-channels-last"] = [
            t.contiguous(memory_format=torch.channels_last) if t.ndim == 4 else t for t in layouts["torch"]
        ]
    with torch.no_grad():
        timers = {name: timer for name, (timer, _) in programs.items()}
        for name, torch_inputs in layouts.items():
            timers[name] = mean_call_timer(lambda t=torch_inputs: torch_op(*t), args.min_ms)  # type: ignore[misc]
        times = interleaved(timers, args.rounds)
    # PyTorch's faster layout in each round (the conversion not timed), so the comparison is with its best
    torch_best = [min(round_) for round_ in zip(*(times[name] for name in layouts))]
    for name, (_, row) in programs.items():
        row["latency_s"] = statistics.median(times[name])
        row.update({f"{layout.replace('-', '_')}_s": statistics.median(times[layout]) for layout in layouts})
        row["torch_best_s"] = statistics.median(torch_best)
        # per round, so that a burst of load divides out of the ratio
        row["speed_vs_torch"] = statistics.median(t / s for t, s in zip(torch_best, times[name]))
    return rows


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for op in dict.fromkeys(r["op"] for r in rows):
        for rules in dict.fromkeys(r["rules"] for r in rows):
            runs = [r for r in rows if r["op"] == op and r["rules"] == rules and "speed_vs_torch" in r]
            if not runs:
                continue
            speed, low, high = geomean_interval([r["speed_vs_torch"] for r in runs])
            out.append(
                {
                    "op": op,
                    "rules": rules,
                    "seeds": len(runs),
                    "all_correct": all(r["correct"] for r in runs),
                    "latency_ms": statistics.median(r["latency_s"] for r in runs) * 1e3,
                    "torch_ms": runs[0]["torch_best_s"] * 1e3,
                    "torch_nchw_ms": runs[0]["torch_s"] * 1e3,
                    "speed_vs_torch": speed,
                    "ci95": [low, high],
                    "tune_s": statistics.mean(r["tune_s"] for r in runs),
                }
            )
    return out


def write_outputs(
    out_dir: str, meta: dict[str, Any], rows: list[dict[str, Any]], summary: list[dict[str, Any]], gate: NoiseGate
) -> None:
    plt = pyplot()

    write_json(
        os.path.join(out_dir, "results.json"),
        {"meta": meta, "noise_gate": gate.to_json(), "summary": summary, "runs": rows},
    )
    write_csv(os.path.join(out_dir, "results.csv"), rows)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    labels = [f"{s['op']}\n{s['rules']}" for s in summary]
    centre = [s["speed_vs_torch"] for s in summary]
    err = np.array(
        [
            [
                c - (s["ci95"][0] if math.isfinite(s["ci95"][0]) else c),
                (s["ci95"][1] if math.isfinite(s["ci95"][1]) else c) - c,
            ]
            for c, s in zip(centre, summary)
        ]
    ).T
    ax.bar(range(len(summary)), centre, yerr=err, capsize=3)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(range(len(summary)), labels, fontsize=7)
    ax.set_ylabel("speed vs PyTorch (x)")
    ax.set_title("Trace search on operators with no template (geomean over seeds, 95% CI)", fontsize=9)
    save_figure(fig, out_dir, "speed.png", dpi=120)
    lines = [
        "# Operators with no knob template: trace search against PyTorch",
        "",
        f"Command: `{meta['command']}`  ",
        f"Host: {meta['host']}; target `{meta['target']}`; PyTorch {torch.__version__} on {meta['torch_threads']} "
        f"threads; started {meta['started']}, took {meta['wall_s']:.0f} s.  ",
        load_sentence(meta),
        "",
        gate.sentence(),
        "",
        f"Per op, seed and rule set: TraceSearchTuner (XGBoost), {meta['trials']} measured candidates; every best "
        f"program (checked against numpy) and PyTorch's operator timed in {meta['rounds']} rounds of turns (each "
        f"timing the mean of calls filling {meta['min_ms']:g} ms, then a pause for the engine's spinning "
        "threads); latency is the median round. For 4-D operators "
        "PyTorch is timed on NCHW and on channels-last tensors (converted before timing) and the faster of the two in "
        "each round is its time (its NCHW max-pool is an order of magnitude slower than its channels-last one). Speed "
        "is PyTorch's time over the program's per round (median), then the geometric mean over seeds with its 95% "
        "t-interval.",
        "",
        "| op | rule set | seeds | correct | latency ms (median over seeds) | PyTorch ms (best layout; NCHW) "
        "| speed vs PyTorch [95% CI] "
        "| tuning s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        low, high = s["ci95"]
        ci = f" [{low:.2f}, {high:.2f}]" if math.isfinite(low) else ""
        lines.append(
            f"| {s['op']} | {s['rules']} | {s['seeds']} | {'yes' if s['all_correct'] else 'no'} | "
            f"{s['latency_ms']:.4g} | {s['torch_ms']:.4g}; {s['torch_nchw_ms']:.4g} | {s['speed_vs_torch']:.2f}x{ci} | "
            f"{s['tune_s']:.0f} |"
        )
    lines += ["", "![speed.png](speed.png)"]
    write_summary(out_dir, lines)


def main(argv: list[str] | None = None) -> int:
    size_tvm_thread_pool()  # programs timed in this process get every core, as in adatune's workers
    args = _parser().parse_args(argv)
    if args.trials < 1 or args.plan_size < 1 or args.rounds < 1 or not args.seeds or not (args.rules or args.generic):
        print(
            "trials, plan size and rounds must be positive, and seeds and rule sets (or --generic) given",
            file=sys.stderr,
        )
        return 2
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(physical_cores())
    started, t0, load_before = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), time.perf_counter(), load_now()
    target = adatune.target.host()
    host = adatune.target.describe_host()
    gate = NoiseGate()
    gate.probe("before")
    rows: list[dict[str, Any]] = []
    for op in args.ops:
        rows += run_op(op, args, target)
    gate.probe("after")
    meta = {
        **run_meta("benchmarks.no_template_ops", argv, started, t0, load_before),
        "host": f"{host['model']}, ISA {host.get('isa')}, {os.cpu_count()} CPUs",
        "target": str(target),
        "torch_threads": torch.get_num_threads(),
        "trials": args.trials,
        "rounds": args.rounds,
        "min_ms": args.min_ms,
    }
    summary = summarise(rows)
    write_outputs(args.out, meta, rows, summary, gate)
    for s in summary:
        print(
            f"{s['op']:>15} {s['rules']:>7}: {s['latency_ms']:.4g} ms vs PyTorch {s['torch_ms']:.4g} ms, "
            f"speed {s['speed_vs_torch']:.2f}x {s['ci95']}"
        )
    print(f"wrote {args.out}/summary.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
