"""A model imported into Relax, and the graph passes every import shares: ``prepare`` is the front half of TVM's
static-shape tuning pipeline (``DecomposeOpsForInference``, so a BatchNorm fuses into its convolution, then the ``zero``
pipeline); ``simplify`` is the graph-level half a dynamic model keeps."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import relax

from ._layout import convert_conv_layout
from ._winograd import legalize_winograd, winograd_tiles

__all__ = ["InputSpec", "Model", "prepare", "simplify", "torch_reference"]


@dataclass(frozen=True)
class InputSpec:
    """Name, static shape and dtype of one model input."""

    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass
class Model:
    """A model imported into Relax and fused (``mod["main"]`` calls one PrimFunc per operator); ``reference`` computes
    the framework's outputs for checking, ``source`` (torch module or ONNX model) lets ``latency_table`` time it."""

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
    """BN to element-wise ops, legalise, fold constants, fuse: one PrimFunc per task. ``fast_math`` first makes erf,
    exp, softmax and tanh TVM's vectorisable approximations (exact erf is a scalar libm call per element);
    ``conv_layout`` ``"NCHW<b>c"`` blocks activations and kernels (``_layout``); ``winograd`` runs big enough 3x3
    stride-1 NCHW convolutions as Winograd (True: the default table, or one's own), kernels transformed here."""
    tiles = winograd_tiles(winograd)
    if tiles and conv_layout != "NCHW":
        raise ValueError(f"winograd convolutions take NCHW activations, got conv_layout={conv_layout!r}")
    mod = simplify(mod, fast_math)
    mod = legalize_winograd(mod, tiles) if tiles else convert_conv_layout(mod, conv_layout)
    return relax.get_pipeline("zero")(mod)


def simplify(mod: tvm.IRModule, fast_math: bool = False) -> tvm.IRModule:
    """``prepare``'s graph half (no legalising): a dynamic model's GEMMs stay ``R.matmul`` for ``build_dynamic``."""
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


def torch_reference(module: Any) -> Any:
    """numpy in, numpy out: the module's own outputs (a list), computed without gradients."""
    import torch

    def reference(*arrays: np.ndarray) -> list[np.ndarray]:
        with torch.no_grad():
            out = module(*[torch.from_numpy(np.ascontiguousarray(a)) for a in arrays])
        outs = out if isinstance(out, (list, tuple)) else [out]
        return [o.detach().numpy() for o in outs]

    return reference
