"""Where onnxruntime is faster: a tuned model's kernels against onnxruntime's nodes, per operator class, in turns.

A whole-model ratio says which engine is faster, not where. This probe takes one ``benchmarks.models`` run (its
model, layout and log), builds the tuned model, and in each of ``--rounds`` rounds times, one after the other:
every VM call of the tuned model (``am.kernel_breakdown``) and every node of onnxruntime's session on the same
inputs (onnxruntime's own profiler: per node, the kernel's time inside ``session.run``), then both engines'
uninstrumented end-to-end latency; the order is reversed every other round, and the noise gate frames the run.
Both sides are grouped into the same operator classes (GEMMs by their output width and reduction depth, attention's
batched GEMMs, convolutions by layer shape, normalisation, element-wise and layout work), so a class where onnxruntime
spends less time is where the tuned model loses. onnxruntime fuses more than Relax does (its ``Attention``,
``SkipLayerNormalization`` and ``BiasGelu`` nodes cover what are several kernels here); such a fused node is its own
class, set beside the sum of the kernels it replaces.

    python -m benchmarks.models.engine_profile benchmarks/results/models_zen3_bert_confirm --out DIR
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import tempfile
import warnings
from collections.abc import Mapping
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import adatune.models as am  # noqa: E402
from adatune.models._latency import compiled_latency, onnx_proto  # noqa: E402
from adatune.reference import physical_cores, time_callable  # noqa: E402

from .._common import write_csv, write_summary  # noqa: E402
from ..noise_gate import gated_run  # noqa: E402
from .run_ab import log_target, run_config, tuned_model  # noqa: E402

# a tuned model's function names (Relax's fused names) -> operator class
_TVM_CLASSES = (
    (re.compile(r"matmul\d*_add\d*_gelu|gelu"), "GEMM + GELU"),
    (re.compile(r"^fused_matmul\d*_(add\d*_)?divide|^matmul\d+$|batch_matmul"), "attention GEMMs"),
    (re.compile(r"matmul|dense"), "GEMM"),
    (re.compile(r"softmax"), "softmax"),
    (re.compile(r"layer_norm"), "layer norm"),
    (re.compile(r"conv"), "convolution"),
    (re.compile(r"reshape|transpose|broadcast|concat|split|strided|take|layout"), "layout and copies"),
)
_ORT_CLASSES = {
    "Attention": "attention (fused)",
    "MultiHeadAttention": "attention (fused)",
    "SkipLayerNormalization": "layer norm",
    "LayerNormalization": "layer norm",
    "SimplifiedLayerNormalization": "layer norm",
    "BiasGelu": "GELU",
    "Gelu": "GELU",
    "FastGelu": "GELU",
    "Softmax": "softmax",
    "Conv": "convolution",
    "FusedConv": "convolution",
    "Reshape": "layout and copies",
    "Transpose": "layout and copies",
    "Concat": "layout and copies",
    "Split": "layout and copies",
    "Gather": "layout and copies",
    "Slice": "layout and copies",
    "Unsqueeze": "layout and copies",
    "Squeeze": "layout and copies",
    "Shape": "layout and copies",
}


def tvm_class(symbol: str) -> str:
    for pattern, name in _TVM_CLASSES:
        if pattern.search(symbol):
            return name
    return "other"


def conv_class(kh: int, kw: int, stride: int, ci: int, co: int, oh: int, ow: int) -> str:
    """A convolution's class named by its layer shape, the same on both engines, so a model of many convolutions
    (ResNet-18) is compared layer by layer rather than as one total."""
    return f"convolution {kh}x{kw}/{stride} {ci}->{co} @{oh}x{ow}"


def task_conv_class(kind: str, args: tuple) -> str | None:
    """A model task's convolution class from its template's arguments (None for any other task)."""
    if kind in ("conv2d_nchw.x86", "conv2d_NCHWc.x86"):
        _, ci, h, w, co, kh, kw, stride, pad = (int(a) for a in args[:9])
        return conv_class(kh, kw, stride, ci, co, (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1)
    if kind == "conv2d_winograd.x86":  # stride-1 3x3 only
        _, ci, h, w, co, pad = (int(a) for a in args[:6])
        return conv_class(3, 3, 1, ci, co, h + 2 * pad - 2, w + 2 * pad - 2)
    return None


def ort_class(op: str, shapes: list[list[int]], out_shapes: list[list[int]] | None = None) -> str:
    if op in ("MatMul", "FusedMatMul", "Gemm", "MatMulNBits"):
        # a 3-d or 4-d product of two activations is attention's; a weight is 2-d
        return "attention GEMMs" if len(shapes) > 1 and all(len(s) >= 3 for s in shapes[:2]) else "GEMM"
    if op in ("Conv", "FusedConv") and len(shapes) > 1 and out_shapes and len(shapes[0]) == 4 == len(out_shapes[0]):
        (_, ci, h, _), (co, _, kh, kw), (_, _, oh, ow) = shapes[0], shapes[1], out_shapes[0]
        return conv_class(kh, kw, max(1, round(h / oh)), ci, co, oh, ow)
    return _ORT_CLASSES.get(op, "other")


def _gemm_key(shapes: list[list[int]], out_shapes: list[list[int]]) -> str:
    """A GEMM named by its reduction depth and output width (``K x N``; onnxruntime lists no pre-packed weight)."""
    if shapes and out_shapes and shapes[0] and out_shapes[0]:
        return f"{shapes[0][-1]}x{out_shapes[0][-1]}"
    return ""


def ort_session(model: am.Model, profile_dir: str) -> Any:
    """An onnxruntime session on all physical cores (as ``framework_latency``'s) with its profiler on."""
    import onnxruntime as ort

    proto = onnx_proto(model)
    if proto is None:
        raise ValueError(f"{model.name}: no ONNX export to run in onnxruntime")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = physical_cores()
    opts.enable_profiling = True
    opts.profile_file_prefix = os.path.join(profile_dir, "ort")
    return ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def ort_nodes(profile_path: str, skip: int = 1) -> dict[str, float]:
    """Seconds per inference per (class, node) from an onnxruntime profile, over its runs after the first ``skip``
    (the first run allocates and pre-packs weights)."""
    with open(profile_path, encoding="utf-8") as f:
        events = json.load(f)
    runs = sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"
    )
    kept = runs[skip:]
    if not kept:
        raise ValueError(f"{profile_path}: fewer than {skip + 1} runs profiled")
    total: dict[str, float] = collections.defaultdict(float)
    for e in events:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time"):
            continue
        if not any(a <= e["ts"] <= b for a, b in kept):
            continue
        args = e.get("args", {})
        shapes = [list(s.values())[0] for s in args.get("input_type_shape", []) if s]
        out_shapes = [list(s.values())[0] for s in args.get("output_type_shape", []) if s]
        op = args.get("op_name", "?")
        cls = ort_class(op, shapes, out_shapes)
        key = f"{cls}|{op} {_gemm_key(shapes, out_shapes)}".strip() if cls == "GEMM" else f"{cls}|{op}"
        total[key] += float(e["dur"]) * 1e-6
    return {k: v / len(kept) for k, v in total.items()}


def tvm_calls(
    compiled: am.CompiledModel, inputs: list[np.ndarray], repeats: int, classes: Mapping[str, str] = {}
) -> dict[str, float]:
    """Seconds per inference per (class, function) of the tuned model's VM calls; ``classes`` names the class of
    some functions outright (convolutions by layer shape), the rest go by their name."""
    report = am.kernel_breakdown(compiled, inputs, repeats=repeats)
    out: dict[str, float] = collections.defaultdict(float)
    for c in report.calls:
        out[f"{classes.get(c.symbol) or tvm_class(c.symbol)}|{c.symbol}"] += c.seconds
    return out


def model_classes(model: am.Model) -> dict[str, str]:
    """Function name -> class for the model's functions a task's arguments name better than the function's name."""
    out: dict[str, str] = {}
    for t in am.extract_tasks(model):
        cls = task_conv_class(t.kind, tuple(t.task.args)) if t.kind != "trace" else None  # no trace task made
        if cls:
            out.update(dict.fromkeys(t.global_vars, cls))
    return out


def probe(run_dir: str, rounds: int, repeats: int) -> dict[str, Any]:
    name, _, log, config = run_config(run_dir)
    model = tuned_model(name, config, log)
    target = log_target(log)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tasks without a record fall back, as in the benchmark's build
        compiled = am.build(model, log, target)
    classes = model_classes(model)
    inputs = model.random_inputs(0)
    feed_inputs = [np.ascontiguousarray(a) for a in inputs]
    tvm_rounds: list[dict[str, float]] = []
    ort_rounds: list[dict[str, float]] = []
    e2e: dict[str, list[float]] = {"adatune": [], "onnxruntime": []}
    with tempfile.TemporaryDirectory() as tmp:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = physical_cores()
        proto = onnx_proto(model)
        if proto is None:
            raise ValueError(f"{name}: no ONNX export to run in onnxruntime")
        plain = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        feed = {i.name: a for i, a in zip(plain.get_inputs(), feed_inputs)}

        def run_tvm() -> None:
            tvm_rounds.append(tvm_calls(compiled, inputs, repeats, classes))

        def run_ort() -> None:
            session = ort_session(model, tmp)
            for _ in range(repeats + 1):
                session.run(None, feed)
            ort_rounds.append(ort_nodes(session.end_profiling(), skip=1))

        def run_plain() -> None:
            e2e["adatune"].append(compiled_latency(compiled, inputs, repeats))
            e2e["onnxruntime"].append(time_callable(lambda: plain.run(None, feed), repeats))

        steps = [run_tvm, run_ort, run_plain]
        for r in range(rounds):
            for step in steps if r % 2 == 0 else steps[::-1]:
                step()
    return {"tvm": tvm_rounds, "ort": ort_rounds, "end_to_end_s": e2e, "model": name}


def by_class(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Median over rounds of each class's seconds per inference."""
    per: dict[str, list[float]] = collections.defaultdict(list)
    for r in rounds:
        sums: dict[str, float] = collections.defaultdict(float)
        for k, v in r.items():
            sums[k.split("|")[0]] += v
        for k, v in sums.items():
            per[k].append(v)
    return {k: statistics.median(v + [0.0] * (len(rounds) - len(v))) for k, v in per.items()}


def by_item(rounds: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for r in rounds for k in r}
    return {k: statistics.median([r.get(k, 0.0) for r in rounds]) for k in keys}


def plot(out: str, tvm: dict[str, float], ort: dict[str, float]) -> str:
    classes = sorted(set(tvm) | set(ort), key=lambda c: -max(tvm.get(c, 0.0), ort.get(c, 0.0)))
    fig, ax = plt.subplots(figsize=(8, 4))
    x = np.arange(len(classes))
    ax.bar(x - 0.2, [tvm.get(c, 0.0) * 1e3 for c in classes], 0.4, label="adatune (tuned)")
    ax.bar(x + 0.2, [ort.get(c, 0.0) * 1e3 for c in classes], 0.4, label="onnxruntime")
    ax.set_xticks(x, classes, rotation=30, ha="right")
    ax.set_ylabel("ms per inference (median over rounds)")
    ax.legend()
    fig.tight_layout()
    path = os.path.join(out, "engine_profile.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.models.engine_profile", description=__doc__)
    parser.add_argument("run", help="a benchmarks.models output directory (one model, one arm)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=10, help="inferences per engine per round")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    data, meta, gate = gated_run(
        "benchmarks.models.engine_profile", argv, lambda: probe(args.run, args.rounds, args.repeats)
    )
    meta["run"] = args.run
    started, load_before = meta["started"], meta["load_before"]
    tvm_cls, ort_cls = by_class(data["tvm"]), by_class(data["ort"])
    tvm_items, ort_items = by_item(data["tvm"]), by_item(data["ort"])
    e2e = {k: statistics.median(v) for k, v in data["end_to_end_s"].items()}
    results = {"meta": meta, **data, "by_class": {"adatune": tvm_cls, "onnxruntime": ort_cls}}
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, default=str)
    rows = [
        {"engine": eng, "class": k.split("|")[0], "item": k.split("|", 1)[1], "ms": round(v * 1e3, 4)}
        for eng, items in (("adatune", tvm_items), ("onnxruntime", ort_items))
        for k, v in sorted(items.items(), key=lambda kv: -kv[1])
    ]
    write_csv(os.path.join(args.out, "items.csv"), rows)
    png = plot(args.out, tvm_cls, ort_cls)
    lines = [
        "# Where the time goes: the tuned model's kernels against onnxruntime's nodes, per operator class",
        "",
        f"Command: `{meta['command']}`; started {started}, wall {meta['wall_s']:.0f} s.  ",
        f"Host: {meta['host']['model']} ({meta['host']['isa']}, {meta['host']['cores']} cores); load before "
        f"{load_before}.  ",
        f"Run probed: `{args.run}`; {args.rounds} rounds of {args.repeats} inferences per engine, in turns (reversed "
        "every other round).",
        "",
        gate.sentence(),
        "",
        f"End to end (uninstrumented, median over rounds): adatune {e2e['adatune'] * 1e3:.2f} ms, onnxruntime "
        f"{e2e['onnxruntime'] * 1e3:.2f} ms (adatune at {e2e['onnxruntime'] / e2e['adatune']:.2f}x onnxruntime's "
        "speed).",
        "",
        "Instrumented sums (both engines' per-kernel timers add overhead): "
        f"adatune {sum(tvm_cls.values()) * 1e3:.2f} ms in VM calls, onnxruntime {sum(ort_cls.values()) * 1e3:.2f} "
        "ms in nodes.",
        "",
        "| class | adatune (ms) | onnxruntime (ms) | adatune - onnxruntime (ms) |",
        "|---|---:|---:|---:|",
    ]
    for c in sorted(set(tvm_cls) | set(ort_cls), key=lambda c: -max(tvm_cls.get(c, 0.0), ort_cls.get(c, 0.0))):
        a, o = tvm_cls.get(c, 0.0) * 1e3, ort_cls.get(c, 0.0) * 1e3
        lines.append(f"| {c} | {a:.2f} | {o:.2f} | {a - o:+.2f} |")
    lines += ["", "Largest items per engine (median over rounds, ms per inference; all in items.csv):", ""]
    lines += ["| engine | class | item | ms |", "|---|---|---|---:|"]
    for eng, items in (("adatune", tvm_items), ("onnxruntime", ort_items)):
        for k, v in sorted(items.items(), key=lambda kv: -kv[1])[:10]:
            cls, item = k.split("|", 1)
            lines.append(f"| {eng} | {cls} | {item} | {v * 1e3:.3f} |")
    lines += ["", f"![per class]({os.path.basename(png)})"]
    write_summary(args.out, lines, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
