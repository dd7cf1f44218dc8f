"""The zoo's BERT encoder with a dynamic sequence length: one module for every T, against PyTorch and onnxruntime.

The encoder is imported with a symbolic T (``from_torch(..., dynamic=...)``), its six GEMM workloads are tuned once each
with DietCode (``tune_dynamic``), and ``build_dynamic`` compiles one Relax VM module for the whole range. Every run
checks that module against PyTorch at several T; without ``--check-only`` it then times one inference per T in TVM,
PyTorch and onnxruntime. Timing is for a quiet machine, by hand; the check alone is quick on a tiny encoder:

    python -m benchmarks.dynamic_model --check-only --layers 1 --hidden 64 --heads 2 --ffn 128 --t-range 1 16 \\
        --n-shapes 2 --tune-rounds 1 --kernels-per-round 1 --max-kernels 1
    python -m benchmarks.dynamic_model --out benchmarks/results/dynamic_bert   # BERT-base, T in [1, 128], timed
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._common import (
    command_line,
    geomean,
    load_now,
    plot_latency_over_t,
    pyplot,
    save_figure,
    settled,
    write_csv,
    write_json,
    write_summary,
)
from .noise_gate import NoiseGate, interleaved


def _encoder(args: argparse.Namespace) -> Any:
    """The zoo's BERT-base, or the zoo's encoder class at a smaller size, with BERT's N(0, 0.02) weights."""
    import torch
    from torch import nn

    from adatune.models import bert_base
    from adatune.models._zoo import BertEncoder  # no public name: bert_base builds BERT-base sizes only

    if (args.hidden, args.heads, args.ffn) == (768, 12, 3072):
        return bert_base(args.seed, layers=args.layers)[0]
    torch.manual_seed(args.seed)
    model = BertEncoder(args.layers, args.hidden, args.heads, args.ffn).eval()
    for p in model.parameters():
        if p.dim() == 2:
            nn.init.normal_(p, std=0.02)
    return model


def _static_model(args: argparse.Namespace) -> tuple[Any, int, list[str]]:
    """The static bert-base built from ``--static-log``, its sequence length and the tasks the log has no record for
    (fallback schedules), checked against PyTorch. Imported with the dynamic model's ``--fast-math``: a log tuned with
    fast math names GELU's and softmax's tasks differently, and built without it those two tasks would run untuned."""
    import adatune.models as am

    model = am.load_builtin("bert-base", seed=args.seed, fast_math=args.fast_math)
    compiled = am.build(model, args.static_log)
    x = model.random_inputs(0)
    got, want = compiled.run(*x)[0], model.reference(*x)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))
    applied = sum(v == "record" for v in compiled.applied.values())
    print(f"static bert-base from {args.static_log}: {applied} of {len(compiled.applied)} tasks from records (ok)")
    return compiled, int(x[0].shape[1]), sorted(name for name, how in compiled.applied.items() if how != "record")


def _check_ts(lo: int, hi: int, given: list[int] | None) -> list[int]:
    if given:
        return sorted(set(given))
    return sorted({t for t in (lo, 7, 13, (lo + hi) // 2, hi) if lo <= t <= hi})


def _ort_session(module: Any, hidden: int, t: int, lo: int, hi: int) -> Any:
    """onnxruntime on an ONNX export whose sequence axis is dynamic; None without onnx/onnxruntime."""
    try:
        import onnxruntime as ort
        import torch
    except ImportError:
        return None
    from adatune.measure.vendor_reference import physical_cores

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        path = os.path.join(tmp, "bert.onnx")
        x = torch.randn(1, max(t, 2), hidden)
        torch.onnx.export(module, (x,), path, dynamo=False, input_names=["x"], dynamic_axes={"x": {1: "T"}})
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = physical_cores()
        return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.dynamic_model", description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=3072)
    ap.add_argument("--t-range", type=int, nargs=2, default=(1, 128), metavar=("LO", "HI"))
    ap.add_argument("--check-t", type=int, nargs="*", help="T values checked and timed (default: a spread)")
    ap.add_argument("--n-shapes", type=int, default=8)
    ap.add_argument("--tune-rounds", type=int, default=3)
    ap.add_argument("--kernels-per-round", type=int, default=8)
    ap.add_argument("--max-kernels", type=int, default=None, help="cap on kernels per GEMM (default: none)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fast-math", action="store_true", help="erf, exp and tanh as TVM's approximations")
    ap.add_argument("--repeats", type=int, default=5, help="timed inferences per round, T and engine (median kept)")
    ap.add_argument("--check-only", action="store_true", help="tune, build and check; time nothing")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds per T")
    ap.add_argument("--out", help="directory for results.json, per_t.csv, latency.png and summary.md")
    ap.add_argument(
        "--breakdown-t", type=int, default=None, help="after the timing, time every VM call at this T (default: hi)"
    )
    ap.add_argument(
        "--static-log",
        help="a tuning log of the static bert-base (seq 128; e.g. benchmarks.models' records): that model is built "
        "from it and timed in turns with the others at T=128",
    )
    args = ap.parse_args(argv)
    if args.static_log and (args.layers, args.hidden, args.heads, args.ffn) != (12, 768, 12, 3072):
        ap.error("--static-log compares with the static bert-base: keep the BERT-base sizes")
    if args.static_log and not os.path.exists(args.static_log):
        ap.error(f"--static-log {args.static_log}: no such file")

    import torch

    import adatune.models as am
    from adatune.measure.vendor_reference import physical_cores, time_callable
    from adatune.models import compiled_latency, framework_latency

    lo, hi = args.t_range
    module = _encoder(args)
    start = time.time()
    example = [torch.randn(1, max(lo, 2), args.hidden)]
    model = am.from_torch(module, example, dynamic={"x": {1: (lo, hi)}}, fast_math=args.fast_math)
    print(f"imported in {time.time() - start:.1f} s; symbols {model.symbols}")  # type: ignore[attr-defined]
    for name, wl in am.dynamic_workloads(model).items():
        print(f"  {name}: {wl}")
    start = time.time()
    results = am.tune_dynamic(
        model,
        n_shapes=args.n_shapes,
        rounds=args.tune_rounds,
        kernels_per_round=args.kernels_per_round,
        max_kernels=args.max_kernels,
        seed=args.seed,
    )
    tuning_s = time.time() - start
    print(f"tuned {len(results)} GEMM workloads in {tuning_s:.1f} s")
    for name, res in results.items():
        print(f"  {name}: {len(res.kernels)} kernels, {res.dispatcher.n_leaves} leaves")
    start = time.time()
    compiled = am.build_dynamic(model, results)
    print(f"built one module in {time.time() - start:.1f} s")
    ts = _check_ts(lo, hi, args.check_t)
    for t in ts:
        x = model.random_inputs(seed=t, t=t)  # type: ignore[call-arg]
        want = model.reference(*x)[0]
        got = compiled.run(*x)[0]
        np.testing.assert_allclose(
            got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())), err_msg=f"T={t}"
        )
        print(f"  T={t}: max abs error {float(np.abs(got - want).max()):.2e} (ok)")
    with tempfile.TemporaryDirectory() as tmp:
        size = os.path.getsize(compiled.export_library(os.path.join(tmp, "bert.so")))
    print(f"export_library: {size / 1e6:.1f} MB")
    if args.check_only:
        return 0

    static, static_t, static_fallback = _static_model(args) if args.static_log else (None, None, [])
    session = _ort_session(module, args.hidden, lo, lo, hi)
    torch.set_num_threads(physical_cores())
    load_before = load_now()
    gate = NoiseGate()
    gate.probe("before")
    rows = []
    for t in ts:
        x = model.random_inputs(seed=t, t=t)  # type: ignore[call-arg]
        timers = {
            "adatune": lambda x=x: compiled_latency(compiled, x, args.repeats),
            "pytorch": lambda x=x: framework_latency(model, "pytorch", x, args.repeats) or float("nan"),
        }
        if static is not None and t == static_t:
            timers["static"] = lambda x=x: settled(compiled_latency(static, x, args.repeats))
        if session is not None:
            ort = lambda x=x: time_callable(lambda: session.run(None, {"x": x[0]}), args.repeats)  # noqa: E731
            timers["onnxruntime"] = lambda ort=ort: settled(ort())
        rounds = interleaved(timers, args.rounds)  # engines in turns, so load that comes and goes hits all alike
        row: dict[str, Any] = {"T": t} | {f"{k}_s": float(np.median(v)) for k, v in rounds.items()}
        rows.append(row)
        print("  " + "  ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    gate.probe("after")
    print(gate.sentence())
    try:  # a secondary table: its failure must not cost the timings above
        breakdown = _breakdown(compiled, model, args.breakdown_t or hi, args.repeats)
    except Exception as err:  # noqa: BLE001
        breakdown = f"The per-call breakdown failed: {type(err).__name__}: {err}\n"
    print(breakdown)
    if args.out:
        _write(args.out, argv, rows, gate, load_before, tuning_s, len(results), breakdown, static_fallback)
    return 0


def _breakdown(compiled: Any, model: Any, t: int, repeats: int) -> str:
    """Markdown: where one inference at T goes: the DietCode micro-kernels (``*_mk<i>``), the other (generic)
    functions, the VM's builtins, and the time outside any call; then the slowest calls."""
    from adatune.models import kernel_breakdown

    bd = kernel_breakdown(compiled, model.random_inputs(seed=t, t=t), max(repeats, 5))
    # a GEMM's ``*_dispatch`` Relax function holds the call of its micro-kernel: its time includes the kernel's
    gemm = sum(c.seconds for c in bd.calls if c.symbol.endswith("_dispatch"))
    micro = sum(c.seconds for c in bd.calls if "_mk" in c.symbol)
    other = bd.kernels - gemm - micro
    lines = [
        f"## Where one inference goes at T={t}",
        "",
        f"End to end {bd.end_to_end * 1e3:.2f} ms (uninstrumented): DietCode GEMMs {gemm * 1e3:.2f} ms "
        f"({gemm / bd.end_to_end:.0%}; their micro-kernels {micro * 1e3:.2f} ms, the dispatch around them the "
        f"rest), other functions {other * 1e3:.2f} ms ({other / bd.end_to_end:.0%}), VM builtins "
        f"{bd.builtins * 1e3:.2f} ms, outside calls {(bd.end_to_end - gemm - other - bd.builtins) * 1e3:.2f} ms "
        f"(each call timed with an instrument, which adds its own cost; medians of {max(repeats, 5)} inferences).",
        "",
        "| calls | ms | share | function |",
        "|---:|---:|---:|---|",
    ]
    for c in bd.calls[:15]:
        lines.append(f"| {c.calls} | {c.seconds * 1e3:.3f} | {c.seconds / bd.end_to_end:.1%} | `{c.symbol}` |")
    return "\n".join(lines) + "\n"


def _write(
    out: str, argv: list[str] | None, rows: list[dict[str, Any]], gate: Any, load_before: list[float],
    tuning_s: float, workloads: int, breakdown: str = "", static_fallback: Sequence[str] = (),
) -> None:  # fmt: skip
    """results.json, per_t.csv, latency.png and summary.md (engine speed ratios per T and their geomeans)."""
    plt = pyplot()

    import adatune

    os.makedirs(out, exist_ok=True)
    write_csv(os.path.join(out, "per_t.csv"), rows)
    engines = list(dict.fromkeys(k[:-2] for r in rows for k in r if k.endswith("_s")))  # static: at one T only
    ratios = {  # engines timed at every T (the static model runs at one T: its own sentence below)
        e: geomean([r[f"{e}_s"] / r["adatune_s"] for r in rows if np.isfinite(r.get(f"{e}_s", np.nan))])
        for e in engines
        if e != "adatune" and all(f"{e}_s" in r for r in rows)
    }
    meta = {
        "command": command_line("benchmarks.dynamic_model", argv),
        "host": adatune.target.describe_host(),
        "load_before": load_before,
        "load_after": load_now(),
        "tuning_s": tuning_s,
        "noise_gate": gate.to_json(),
        "static_fallback_tasks": list(static_fallback),
    }
    write_json(os.path.join(out, "results.json"), {"meta": meta, "rows": rows, "geomean_speed_vs": ratios})
    fig, ax = plt.subplots(figsize=(8, 4))
    plot_latency_over_t(ax, rows, engines, "T (sequence length)")
    save_figure(fig, out, "latency.png")
    host = meta["host"]
    lines = [
        "# One dynamic-shape module for every T vs PyTorch and onnxruntime",
        "",
        f"Command: `{meta['command']}`  ",
        f"Host: {host['model']} ({host['isa']}, {host['cores']} cores); {workloads} GEMM workloads tuned once each "
        f"with DietCode in {tuning_s:.0f} s; one module built for the whole range and checked against PyTorch at "
        "every timed T. Engines timed in turns at each T (median of the rounds; each round the median of the "
        "given repeats); PyTorch and onnxruntime on all physical cores.",
        gate.sentence(),
        "",
        "| T | " + " | ".join(f"{e} (ms)" for e in engines) + " |",
        "|---:|" + "---:|" * len(engines),
    ]
    for r in rows:
        cells = [f"{r[f'{e}_s'] * 1e3:.2f}" if f"{e}_s" in r else "-" for e in engines]
        lines.append(f"| {r['T']} | " + " | ".join(cells) + " |")
    lines += ["", "Geomean over T of engine latency / adatune latency (> 1: adatune faster): "
              + ", ".join(f"{e} {v:.2f}x" for e, v in ratios.items()), "", "![latency](latency.png)", "",
              breakdown]  # fmt: skip
    at_static = [r for r in rows if "static_s" in r]
    if at_static:
        r = at_static[0]
        ratio = r["adatune_s"] / r["static_s"]
        lines[-1:-1] = [
            f"Against the statically tuned model at T={r['T']} (built from the given log, same weights, timed in "
            f"the same turns): dynamic {r['adatune_s'] * 1e3:.2f} ms, static {r['static_s'] * 1e3:.2f} ms, "
            f"dynamic / static = {ratio:.2f}x."
            + (
                f" **The static model is not fully tuned**: {len(static_fallback)} of its tasks have no record in "
                f"the log and ran fallback schedules ({', '.join(static_fallback)}), which favours the dynamic "
                "model (was the log tuned with another `--fast-math` setting?)."
                if static_fallback
                else " Every task of the static model came from the log."
            ),
            "",
        ]
    write_summary(out, lines)


if __name__ == "__main__":
    raise SystemExit(main())
