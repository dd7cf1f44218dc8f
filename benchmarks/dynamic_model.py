"""The zoo's BERT encoder with a dynamic sequence length: one module for every T, against PyTorch and onnxruntime.

The encoder is imported with a symbolic T (``from_torch(..., dynamic=...)``), its six GEMM workloads are tuned
once each with DietCode (``tune_dynamic``), and ``build_dynamic`` compiles one Relax VM module for the whole
range. Every run checks that module against PyTorch at several T; without ``--check-only`` it then times one
inference per T in TVM, PyTorch and onnxruntime (an ONNX export with a dynamic sequence axis). Timing is for a
quiet machine, by hand; the check alone runs in a minute or two on a tiny encoder:

    python -m benchmarks.dynamic_model --check-only --layers 1 --hidden 64 --heads 2 --ffn 128 --t-range 1 16 \\
        --n-shapes 2 --rounds 1 --kernels-per-round 1 --max-kernels 1
    python -m benchmarks.dynamic_model --out dynamic_bert.csv   # BERT-base, 12 layers, T in [1, 128], timed
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from typing import Any

import numpy as np

from benchmarks._common import load_now, write_csv


def _encoder(args: argparse.Namespace) -> Any:
    """The zoo's BERT-base, or the zoo's encoder class at a smaller size, with BERT's N(0, 0.02) weights."""
    import torch
    from torch import nn

    from adatune.models import bert_base
    from adatune.models._zoo import BertEncoder

    if (args.hidden, args.heads, args.ffn) == (768, 12, 3072):
        return bert_base(args.seed, layers=args.layers)[0]
    torch.manual_seed(args.seed)
    model = BertEncoder(args.layers, args.hidden, args.heads, args.ffn).eval()
    for p in model.parameters():
        if p.dim() == 2:
            nn.init.normal_(p, std=0.02)
    return model


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
    from adatune.reference import physical_cores

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        path = os.path.join(tmp, "bert.onnx")
        x = torch.randn(1, max(t, 2), hidden)
        torch.onnx.export(module, (x,), path, dynamo=False, input_names=["x"], dynamic_axes={"x": {1: "T"}})
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = physical_cores()
        return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=3072)
    ap.add_argument("--t-range", type=int, nargs=2, default=(1, 128), metavar=("LO", "HI"))
    ap.add_argument("--check-t", type=int, nargs="*", help="T values checked and timed (default: a spread)")
    ap.add_argument("--n-shapes", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kernels-per-round", type=int, default=8)
    ap.add_argument("--max-kernels", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=30, help="timed inferences per T and engine (median kept)")
    ap.add_argument("--check-only", action="store_true", help="tune, build and check; time nothing")
    ap.add_argument("--out", help="CSV of the per-T timings")
    args = ap.parse_args(argv)

    import torch

    import adatune.models as am
    from adatune.models import compiled_latency, framework_latency
    from adatune.reference import physical_cores, time_callable

    lo, hi = args.t_range
    module = _encoder(args)
    start = time.time()
    model = am.from_torch(module, [torch.randn(1, max(lo, 2), args.hidden)], dynamic={"x": {1: (lo, hi)}})
    print(f"imported in {time.time() - start:.1f} s; symbols {model.symbols}")  # type: ignore[attr-defined]
    for name, wl in am.dynamic_workloads(model).items():
        print(f"  {name}: {wl}")
    start = time.time()
    results = am.tune_dynamic(
        model,
        n_shapes=args.n_shapes,
        rounds=args.rounds,
        kernels_per_round=args.kernels_per_round,
        max_kernels=args.max_kernels,
        seed=args.seed,
    )
    print(f"tuned {len(results)} GEMM workloads in {time.time() - start:.1f} s")
    for name, res in results.items():
        print(f"  {name}: {len(res.kernels)} kernels, {res.dispatcher.n_leaves} leaves")
    start = time.time()
    compiled = am.build_dynamic(model, results)
    print(f"built one module in {time.time() - start:.1f} s")
    ts = _check_ts(lo, hi, args.check_t)
    for t in ts:
        x = model.random_inputs(seed=t, t=t)  # type: ignore[call-arg]
        got, want = compiled.run(*x)[0], model.reference(*x)[0]
        tol = 1e-4 * max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=tol, err_msg=f"T={t}")
        print(f"  T={t}: max abs error {float(np.abs(got - want).max()):.2e} (ok)")
    with tempfile.TemporaryDirectory() as tmp:
        size = os.path.getsize(compiled.export_library(os.path.join(tmp, "bert.so")))
    print(f"export_library: {size / 1e6:.1f} MB")
    if args.check_only:
        return 0

    session = _ort_session(module, args.hidden, lo, lo, hi)
    torch.set_num_threads(physical_cores())
    rows = []
    load_before = load_now()
    for t in ts:
        x = model.random_inputs(seed=t, t=t)  # type: ignore[call-arg]
        row: dict[str, Any] = {"T": t, "adatune_s": compiled_latency(compiled, x, args.repeats)}
        row["pytorch_s"] = framework_latency(model, "pytorch", x, args.repeats)
        if session is not None:
            feed = {"x": x[0]}

            def run_ort(feed: dict[str, np.ndarray] = feed) -> None:
                session.run(None, feed)

            row["onnxruntime_s"] = time_callable(run_ort, args.repeats)
        rows.append(row)
        print("  " + "  ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    print(f"load average before {load_before[0]:.2f}, after {load_now()[0]:.2f}")
    if args.out:
        write_csv(args.out, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
