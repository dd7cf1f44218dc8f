"""End-to-end latency of a compiled model beside what users would otherwise run: PyTorch eager and onnxruntime,
both on all physical cores, same inputs, same process, same clock (``adatune.reference.time_callable``: median
of repeated calls after a warm-up). ``adatune compile-model --bench`` and ``benchmarks/models`` print it.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import tvm

from ..reference import physical_cores, time_callable
from ._build import CompiledModel
from ._frontend import Model

__all__ = ["FRAMEWORKS", "compiled_latency", "framework_latency", "latency_table", "onnx_proto"]

FRAMEWORKS = ("pytorch", "onnxruntime")


def compiled_latency(compiled: CompiledModel, inputs: Sequence[np.ndarray], repeats: int = 30) -> float:
    """Median seconds of one inference of ``compiled``; the inputs are copied to the device once, before timing."""
    compiled.model.check_inputs(inputs)
    args = [tvm.runtime.tensor(a, tvm.cpu()) for a in inputs]
    fn = compiled.main
    return time_callable(lambda: fn(*args), repeats)


def _torch_module(model: Model) -> Any:
    try:
        import torch
    except ImportError:
        return None
    return model.source if isinstance(model.source, torch.nn.Module) else None


def onnx_proto(model: Model) -> Any:
    """The model as an ``onnx.ModelProto``: its source if imported from ONNX, else PyTorch's (TorchScript-based)
    ONNX export of its module; None when neither is available."""
    try:
        import onnx
    except ImportError:
        return None
    if isinstance(model.source, onnx.ModelProto):
        return model.source
    module = _torch_module(model)
    if module is None:
        return None
    import torch

    example = tuple(torch.from_numpy(a) for a in model.random_inputs())
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        path = os.path.join(tmp, "model.onnx")
        torch.onnx.export(module, example, path, dynamo=False, input_names=[s.name for s in model.inputs])
        return onnx.load(path)


def framework_latency(model: Model, framework: str, inputs: Sequence[np.ndarray], repeats: int = 30) -> float | None:
    """Median seconds of one inference in ``framework`` (``pytorch`` or ``onnxruntime``) on all physical cores;
    None when the model cannot run there (no PyTorch module, onnxruntime not installed)."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}: choose from {', '.join(FRAMEWORKS)}")
    model.check_inputs(inputs)
    if framework == "pytorch":
        module = _torch_module(model)
        if module is None:
            return None
        import torch

        torch.set_num_threads(physical_cores())
        tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]

        def run_torch() -> None:
            with torch.inference_mode():
                module(*tensors)

        return time_callable(run_torch, repeats)
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    proto = onnx_proto(model)
    if proto is None:
        return None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = physical_cores()
    session = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feed = {i.name: np.ascontiguousarray(a) for i, a in zip(session.get_inputs(), inputs)}
    return time_callable(lambda: session.run(None, feed), repeats)


def latency_table(
    compiled: CompiledModel, repeats: int = 30, frameworks: Sequence[str] = FRAMEWORKS, seed: int = 0
) -> dict[str, float | None]:
    """Median seconds per inference of the compiled model (key ``adatune``) and of each framework, on the same
    seeded inputs."""
    inputs = compiled.model.random_inputs(seed)
    out: dict[str, float | None] = {"adatune": compiled_latency(compiled, inputs, repeats)}
    for fw in frameworks:
        out[fw] = framework_latency(compiled.model, fw, inputs, repeats)
    return out
