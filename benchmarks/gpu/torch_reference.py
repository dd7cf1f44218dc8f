"""cuBLAS / cuDNN reference times through PyTorch, for the shapes a round exported (``shapes.json``).

Standalone (torch with CUDA, and ``cupy_runner.py`` beside it):
``python torch_reference.py ROUND_DIR --out torch_reference.json``. TF32 is off (float32 as the candidates compute
it). Each operator is warmed up and timed by ``time_op``; the median seconds per call is written per workload.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any


def operator_for(op: str, args: list, torch: Any, dev: str = "cuda") -> Callable[[], Any]:
    """The PyTorch call computing workload ``op`` with template arguments ``args`` on random tensors."""
    if op == "dense":
        n, k, m, dtype = args[:4]
        dt = getattr(torch, dtype)
        a, b = torch.rand(n, k, device=dev, dtype=dt), torch.rand(k, m, device=dev, dtype=dt)
        return lambda: torch.matmul(a, b)
    if op == "batch_matmul":
        bsz, m, n, k, layout, dtype = args[:6]
        dt = getattr(torch, dtype)
        a = torch.rand(bsz, m, k, device=dev, dtype=dt)
        b = (
            torch.rand(bsz, n, k, device=dev, dtype=dt)
            if layout == "NT"
            else torch.rand(bsz, k, n, device=dev, dtype=dt)
        )
        return (lambda: torch.bmm(a, b.transpose(1, 2))) if layout == "NT" else (lambda: torch.bmm(a, b))
    if op == "conv2d_nchw":
        n, ci, h, w, co, kh, kw, stride, pad, dtype = args[:10]
        dt = getattr(torch, dtype)
        x, wt = torch.rand(n, ci, h, w, device=dev, dtype=dt), torch.rand(co, ci, kh, kw, device=dev, dtype=dt)
        return lambda: torch.nn.functional.conv2d(x, wt, stride=stride, padding=pad)
    raise ValueError(f"no PyTorch reference for operator {op!r}")


def time_op(fn: Callable[[], Any], number: int, repeat: int, torch: Any) -> float:
    """Median seconds per call, timed as the standalone runner times cuBLAS (its ``time_op``: ``number`` calls
    captured once in a CUDA graph, the graph replayed ``repeat`` times between CUDA events)."""
    return float(_runner().time_op(fn, number, repeat, torch))


def _runner() -> Any:
    """The standalone runner beside this file in an exported round (``write_round`` copies it), else adatune's."""
    beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cupy_runner.py")
    if not os.path.exists(beside):
        from adatune.cuda_export import cupy_runner

        return cupy_runner
    spec = importlib.util.spec_from_file_location("cupy_runner", beside)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="cuBLAS/cuDNN times through PyTorch for a round's shapes")
    p.add_argument("round_dir")
    p.add_argument("--out", required=True)
    p.add_argument("--number", type=int, default=50)
    p.add_argument("--repeat", type=int, default=10)
    args = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("error: PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    # float32 as the candidates compute it: cuDNN would otherwise run convolutions in TF32 (10-bit mantissa)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with open(os.path.join(args.round_dir, "shapes.json")) as f:
        shapes = json.load(f)
    seconds: dict[str, float] = {}
    out = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "tf32": False,
        "timing": "cuda-graph",
        "seconds": seconds,
    }
    for name, (op, op_args) in shapes.items():
        seconds[name] = time_op(operator_for(op, op_args, torch), args.number, args.repeat, torch)
        print(f"{name}: {seconds[name] * 1e6:.2f} us")
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
