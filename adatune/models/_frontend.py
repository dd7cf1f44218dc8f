"""Whole models into Relax: PyTorch (torch.export) and ONNX, legalised and fused into one PrimFunc per task.

The preparation is the front half of TVM's static-shape tuning pipeline: ``DecomposeOpsForInference`` (so a
BatchNorm left in the graph becomes element-wise ops that fuse into its convolution), then the ``zero``
pipeline (LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR). Weights are constants of the
module (FoldConstant pre-transposes linear weights), so every fused PrimFunc takes them as parameters.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import relax

from ._layout import convert_conv_layout, resolve_conv_layout
from ._winograd import legalize_winograd, winograd_tiles

__all__ = ["Model", "InputSpec", "from_torch", "from_onnx", "load_builtin", "prepare"]


@dataclass(frozen=True)
class InputSpec:
    """Name, static shape and dtype of one model input."""

    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass
class Model:
    """A model imported into Relax and fused: ``mod["main"]`` calls one PrimFunc per fused operator.

    ``reference`` (when known) computes the framework's own outputs for numpy inputs, so compiled models can
    be checked against it. ``source`` is what it was imported from (the ``torch.nn.Module`` or the
    ``onnx.ModelProto``), so its latency can be measured beside TVM's (``adatune.models.latency_table``).
    """

    name: str
    mod: tvm.IRModule
    inputs: list[InputSpec]
    reference: Any = field(default=None, repr=False)
    source: Any = field(default=None, repr=False)

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Seeded standard-normal inputs of the model's shapes."""
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(s.shape).astype(s.dtype) for s in self.inputs]

    def check_inputs(self, arrays: Sequence[np.ndarray]) -> None:
        """ValueError naming the input whose count, shape or dtype differs from the model's."""
        if len(arrays) != len(self.inputs):
            raise ValueError(f"model {self.name!r} takes {len(self.inputs)} inputs, got {len(arrays)}")
        for spec, arr in zip(self.inputs, arrays):
            if tuple(arr.shape) != spec.shape:
                raise ValueError(
                    f"input {spec.name!r} of model {self.name!r} has shape {spec.shape}, got {tuple(arr.shape)}"
                )
            if str(arr.dtype) != spec.dtype:
                raise ValueError(f"input {spec.name!r} of model {self.name!r} is {spec.dtype}, got {arr.dtype}")


def prepare(
    mod: tvm.IRModule,
    fast_math: bool = False,
    conv_layout: str = "NCHW",
    winograd: bool | Sequence[Sequence[int]] = False,
) -> tvm.IRModule:
    """BN to element-wise ops, legalise, fold constants, fuse: one PrimFunc per task. With ``fast_math``,
    erf (GELU), exp and softmax, and tanh become TVM's vectorisable approximations (``FastMathTransform``)
    first: the exact erf in a dense layer's GELU write-back is a scalar libm call per element. ``conv_layout``
    ``"NCHW<b>c"`` (e.g. ``"NCHW8c"``) runs the convolutions on channel-blocked activations with kernels blocked
    once, here (``_layout.convert_conv_layout``); ``"NCHW"`` keeps the model's layout. ``winograd`` runs the
    3x3 stride-1 NCHW convolutions with large enough outputs as Winograd F(m x m, 3 x 3), m by the output map's
    size (True: ``_winograd.WINOGRAD_TILE_BY_MAP``; or a table of one's own, ``_winograd.winograd_tiles``), their
    kernels transformed here (``_winograd.legalize_winograd``)."""
    tiles = winograd_tiles(winograd)
    if tiles and conv_layout != "NCHW":
        raise ValueError(f"winograd convolutions take NCHW activations, got conv_layout={conv_layout!r}")
    mod = simplify(mod, fast_math)
    mod = legalize_winograd(mod, tiles) if tiles else convert_conv_layout(mod, conv_layout)
    return relax.get_pipeline("zero")(mod)


def simplify(mod: tvm.IRModule, fast_math: bool = False) -> tvm.IRModule:
    """``prepare``'s graph-level half (no legalisation): what a dynamic-shape model keeps, so that its GEMMs are
    still ``R.matmul`` calls when ``build_dynamic`` replaces them."""
    passes = [relax.transform.DecomposeOpsForInference(), relax.transform.CanonicalizeBindings()]
    if fast_math:
        passes += [_FastGelu(), relax.transform.FastMathTransform()]
    return tvm.transform.Sequential(passes)(mod)


@tvm.transform.module_pass(opt_level=0, name="FastGelu")
class _FastGelu:
    """``nn.gelu`` as ``0.5 x (1 + erf(x / sqrt 2))`` in Relax ops, so ``FastMathTransform`` (which rewrites
    ``relax.erf``, not ``relax.nn.gelu``) reaches the erf that legalising GELU would emit."""

    def transform_module(self, mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
        @relax.expr_functor.mutator
        class Rewrite(relax.PyExprMutator):
            def visit_call_(self, call: relax.Call) -> relax.Expr:
                call = super().visit_call_(call)
                if isinstance(call, relax.Call) and getattr(call.op, "name", "") == "relax.nn.gelu":
                    x = call.args[0]
                    dtype = "float32"  # the models adatune tunes are float32 (the matchers check it)
                    half, root = relax.const(0.5, dtype), relax.const(0.7071067811865476, dtype)
                    erf = relax.op.erf(relax.op.multiply(x, root))
                    return relax.op.multiply(relax.op.multiply(x, half), relax.op.add(relax.const(1.0, dtype), erf))
                return call

        rewrite = Rewrite(mod)
        for gv, func in mod.functions_items():
            if isinstance(func, relax.Function):
                rewrite.builder_.update_func(gv, rewrite.visit_expr(func))
        return rewrite.builder_.get()


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
    """A ``torch.nn.Module`` (in eval mode) traced by ``torch.export`` with ``example_inputs`` (their shapes are
    the model's); ``fast_math``: approximate erf/exp/softmax/tanh; ``conv_layout``: ``"NCHW"``, a blocked
    ``"NCHW<b>c"`` for the convolutions (see ``prepare``) or ``"auto"`` (blocks of the host's SIMD width);
    ``winograd``: 3x3 stride-1 convolutions as Winograd (NCHW only; True, or (smallest map in pixels, tile)
    pairs; see ``prepare``).

    ``dynamic`` (input name -> {axis: (lo, hi)}, e.g. ``{"x": {1: (1, 128)}}``) makes those axes symbolic (a
    ``torch.export.Dim`` per distinct range) and returns a ``DynamicModel``: tune its GEMMs with
    ``tune_dynamic`` and compile it once for the whole range with ``build_dynamic``."""
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
        from ._dynamic_import import import_dynamic  # it builds on this module: imported late

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


def torch_reference(module: Any) -> Any:
    """numpy in, numpy out: the module's own outputs (a list), computed without gradients."""
    import torch

    def reference(*arrays: np.ndarray) -> list[np.ndarray]:
        with torch.no_grad():
            out = module(*[torch.from_numpy(np.ascontiguousarray(a)) for a in arrays])
        outs = out if isinstance(out, (list, tuple)) else [out]
        return [o.detach().numpy() for o in outs]

    return reference


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
    """``resnet18`` or ``bert-base`` (see ``adatune.models._zoo``), imported through torch.export."""
    from ._zoo import builtin_model

    module, example = builtin_model(name, seed)
    return from_torch(module, example, name=name, fast_math=fast_math, conv_layout=conv_layout, winograd=winograd)
