"""Whole models into Relax: PyTorch (torch.export) and ONNX, prepared (``_graph.prepare``) into one PrimFunc per
task. Weights are constants of the module, so every fused PrimFunc takes them as parameters.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tvm
from tvm import relax

from ._dynamic_import import import_dynamic
from ._graph import InputSpec, Model, prepare, simplify, torch_reference
from ._layout import resolve_conv_layout

__all__ = [
    "Model",
    "InputSpec",
    "from_torch",
    "from_onnx",
    "from_relax",
    "load_builtin",
    "prepare",
    "simplify",
    "torch_reference",
]


def _input_specs(mod: tvm.IRModule) -> list[InputSpec]:
    specs = []
    for param in mod["main"].params:
        ty, name = param.ty, str(getattr(param, "name_hint", None) or param.name)
        shape: Any = getattr(ty, "shape", None)
        if not isinstance(ty, relax.TensorType) or not hasattr(shape, "values"):
            raise ValueError(f"model input {name!r} is not a tensor with a known shape")
        dims = list(shape.values)
        if not all(isinstance(d, tvm.tirx.IntImm) for d in dims):
            raise ValueError(f"model input {name!r} has a dynamic shape {dims}: give static shapes")
        specs.append(InputSpec(name, tuple(int(d) for d in dims), str(ty.dtype)))
    return specs


def from_torch(
    module: Any,
    example_inputs: Sequence[Any],
    name: str | None = None,
    fast_math: bool = False,
    dynamic: Mapping[str, Mapping[int, tuple[int, int]]] | None = None,
    conv_layout: str = "NCHW",
    winograd: bool | Sequence[Sequence[int]] = False,
) -> Model:
    """A ``torch.nn.Module`` (in eval mode) traced by ``torch.export`` with ``example_inputs`` (their shapes are the
    model's); ``fast_math``: approximate erf/exp/softmax/tanh; ``conv_layout``: ``"NCHW"``, ``"NCHW<b>c"`` or
    ``"auto"`` (the host's SIMD width); ``winograd``: True, or (smallest map in pixels, tile) pairs (see ``prepare``).
    ``dynamic`` (input name -> {axis: (lo, hi)}) makes those axes symbolic and returns a ``DynamicModel`` for
    ``tune_dynamic`` and ``build_dynamic``."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_torch needs a torch.nn.Module, got {type(module).__name__}")
    example = tuple(example_inputs)
    if not example or not all(isinstance(t, torch.Tensor) for t in example):
        raise ValueError("from_torch needs a non-empty sequence of example input tensors")
    module = module.eval()
    conv_layout = resolve_conv_layout(conv_layout)
    if dynamic is not None:
        if conv_layout != "NCHW" or winograd:
            raise ValueError("conv_layout and winograd apply to static-shape models; a dynamic model keeps NCHW")
        return import_dynamic(module, example, dynamic, name, fast_math)
    with torch.no_grad():
        try:
            exported = torch.export.export(module, example)
        except Exception as err:
            raise ValueError(
                f"torch.export could not trace the model with inputs of shapes "
                f"{[tuple(t.shape) for t in example]}: {err}"
            ) from err
        mod = from_exported_program(exported, keep_params_as_input=False)
    fused = prepare(mod, fast_math, conv_layout, winograd)
    return Model(name or type(module).__name__, fused, _input_specs(fused), torch_reference(module), source=module)


def from_relax(mod: tvm.IRModule, name: str = "relax", prepared: bool = False) -> Model:
    """A Relax module with a static-shape ``main`` (from any frontend, or written by hand), prepared as the importers
    prepare theirs (``prepare``) unless ``prepared`` (it already holds one fused PrimFunc per operator, e.g. after
    ``relax.get_pipeline("zero")``). No framework reference: ``reference`` and ``latency_table`` need another import."""
    if not isinstance(mod, tvm.IRModule) or "main" not in [gv.name_hint for gv in mod.get_global_vars()]:
        raise TypeError(f"from_relax needs an IRModule with a Relax function 'main', got {type(mod).__name__}")
    fused = mod if prepared else prepare(mod)
    return Model(name, fused, _input_specs(fused))


def from_onnx(
    model: str | os.PathLike | Any,
    shapes: Mapping[str, Sequence[int]] | None = None,
    name: str | None = None,
    fast_math: bool = False,
    conv_layout: str = "NCHW",
    winograd: bool | Sequence[Sequence[int]] = False,
) -> Model:
    """An ONNX model (a path or an ``onnx.ModelProto``) with static ``shapes`` for its inputs (by input name;
    needed when the file's shapes are symbolic). onnxruntime, when installed, is the reference; ``fast_math``,
    ``conv_layout`` and ``winograd`` as for ``from_torch``."""
    try:
        import onnx
    except ImportError as err:
        raise ImportError("from_onnx needs the 'onnx' package (pip install onnx==1.23.2)") from err
    from tvm.relax.frontend.onnx import from_onnx as relax_from_onnx

    path = None
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise ValueError(f"ONNX model file {path!r} does not exist")
        try:
            proto = onnx.load(path)
            onnx.checker.check_model(proto)
        except Exception as err:
            raise ValueError(f"{path!r} is not a valid ONNX model: {err}") from err
    elif isinstance(model, onnx.ModelProto):
        proto = model
    else:
        raise TypeError(f"from_onnx needs a path or an onnx.ModelProto, got {type(model).__name__}")
    graph_inputs = {i.name: i for i in proto.graph.input}
    init_names = {i.name for i in proto.graph.initializer}
    declared = {n: i for n, i in graph_inputs.items() if n not in init_names}
    shape_dict: dict[str, list[int]] = {}
    for n, info in declared.items():
        dims = info.type.tensor_type.shape.dim
        shape_dict[n] = [d.dim_value if d.HasField("dim_value") else -1 for d in dims]
    for n, shape in (shapes or {}).items():
        if n not in declared:
            raise ValueError(f"the ONNX model has no input {n!r} (inputs: {', '.join(declared)})")
        fixed = shape_dict[n]
        given = [int(s) for s in shape]
        if len(given) != len(fixed) or any(f > 0 and f != g for f, g in zip(fixed, given)):
            raise ValueError(f"ONNX input {n!r} has shape {fixed} (-1: free), got {given}")
        shape_dict[n] = given
    for n, shape in shape_dict.items():
        if any(s <= 0 for s in shape):
            raise ValueError(f"ONNX input {n!r} has a symbolic shape {shape}: pass shapes={{{n!r}: [...]}}")
    conv_layout = resolve_conv_layout(conv_layout)
    mod = relax_from_onnx(proto, shape_dict=shape_dict, keep_params_in_input=False)
    fused = prepare(mod, fast_math, conv_layout, winograd)
    return Model(
        name or (os.path.basename(path) if path else proto.graph.name or "onnx"),
        fused,
        _input_specs(fused),
        _onnxruntime_reference(proto, list(declared)),
        source=proto,
    )


def _onnxruntime_reference(proto: Any, names: list[str]) -> Any:
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])

    def reference(*arrays: np.ndarray) -> list[np.ndarray]:
        return [np.asarray(o) for o in session.run(None, dict(zip(names, arrays)))]

    return reference


def load_builtin(
    name: str,
    seed: int = 0,
    fast_math: bool = False,
    conv_layout: str = "NCHW",
    winograd: bool | Sequence[Sequence[int]] = False,
) -> Model:
    """A built-in model (``adatune.models.BUILTIN_MODELS``: ResNet-18 and -34, BERT-base and -large), imported through
    torch.export."""
    from ._zoo import builtin_model

    module, example = builtin_model(name, seed)
    return from_torch(module, example, name=name, fast_math=fast_math, conv_layout=conv_layout, winograd=winograd)
