"""End-to-end latency of a compiled model beside what users would otherwise run: PyTorch eager and onnxruntime,
both on all physical cores, same inputs, same process, same clock (``adatune.measure.vendor_reference.time_callable``:
median of repeated calls after a warm-up). ``adatune compile-model --bench`` and ``benchmarks/models`` print it."""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tvm

from ..measure.vendor_reference import physical_cores, time_callable
from ._build import CompiledModel
from ._frontend import Model

__all__ = ["FRAMEWORKS", "LatencyTable", "compiled_latency", "framework_latency", "latency_table", "onnx_proto"]

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
    """The model as ``onnx.ModelProto``: its ONNX source, else PyTorch's (TorchScript) export of it, else None."""
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


class _Unavailable(Exception):
    """Why an engine cannot run the model here."""


def _framework_timer(model: Model, framework: str, inputs: Sequence[np.ndarray]) -> Callable[[], Any]:
    """One inference in ``framework`` on all physical cores, ready to time; ``_Unavailable`` if it cannot run there."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}: choose from {', '.join(FRAMEWORKS)}")
    model.check_inputs(inputs)
    if framework == "pytorch":
        module = _torch_module(model)
        if module is None:
            raise _Unavailable("the model has no PyTorch module")
        import torch

        torch.set_num_threads(physical_cores())
        tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]

        def run_torch() -> None:
            with torch.inference_mode():
                module(*tensors)

        return run_torch
    try:
        import onnxruntime as ort
    except ImportError:
        raise _Unavailable("onnxruntime is not installed") from None
    proto = onnx_proto(model)
    if proto is None:
        raise _Unavailable("the model has no ONNX form (no ONNX or PyTorch source, or onnx is not installed)")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = physical_cores()
    session = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feed = {i.name: np.ascontiguousarray(a) for i, a in zip(session.get_inputs(), inputs)}
    return lambda: session.run(None, feed)


def framework_latency(model: Model, framework: str, inputs: Sequence[np.ndarray], repeats: int = 30) -> float | None:
    """Median seconds of one inference in ``framework`` (``pytorch`` or ``onnxruntime``) on all physical cores; None
    when it cannot run there (no PyTorch module, no onnxruntime); an export or session error raises."""
    try:
        run = _framework_timer(model, framework, inputs)
    except _Unavailable:
        return None
    return time_callable(run, repeats)


class LatencyTable(dict[str, float | None]):
    """Median seconds per inference by engine (``adatune`` first); None where one cannot run, why in ``unavailable``."""

    def __init__(self) -> None:
        super().__init__()
        self.unavailable: dict[str, str] = {}


def latency_table(
    compiled: CompiledModel, repeats: int = 30, frameworks: Sequence[str] = FRAMEWORKS, seed: int = 0
) -> LatencyTable:
    """Median seconds per inference of the compiled model (``adatune``) and each framework, on the same seeded inputs;
    an engine that cannot run (e.g. ``torch.onnx`` fails to export) is None, why in ``.unavailable``."""
    unknown = [fw for fw in frameworks if fw not in FRAMEWORKS]
    if unknown:
        raise ValueError(f"unknown framework {unknown[0]!r}: choose from {', '.join(FRAMEWORKS)}")
    inputs = compiled.model.random_inputs(seed)
    out = LatencyTable()
    out["adatune"] = compiled_latency(compiled, inputs, repeats)
    for fw in frameworks:
        try:
            out[fw] = time_callable(_framework_timer(compiled.model, fw, inputs), repeats)
        except Exception as err:  # noqa: BLE001 - an engine that cannot run is a row of the table, not a failure
            out[fw] = None
            out.unavailable[fw] = str(err) if isinstance(err, _Unavailable) else _first_line(err)
    return out


def _first_line(err: Exception) -> str:
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}"
