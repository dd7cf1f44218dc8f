"""Winograd convolutions in a whole model: each eligible 3x3 stride-1 NCHW convolution legalised as
``adatune.templates.conv2d_winograd`` with its constant kernel transformed once, at import.

Eligible: NCHW data, OIHW kernel, groups 1, dilation 1, stride 1, the same padding on every side, a constant
kernel (``FoldConstant`` in ``prepare`` computes ``G g G^T`` once; the deployed model never transforms a
weight), and an output of at least ``WINOGRAD_MIN_PIXELS`` pixels. Below that (ResNet's 7x7 maps) the
transformed kernel, ``(m+2)^2 / 9`` times the original, would be streamed from memory for a few output tiles
(a threshold chosen from those sizes, not tuned). Every other convolution keeps Relax's legalisation.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import relax

from ..templates.conv2d_winograd import BLOCK, conv2d_winograd, winograd_weight_transform

__all__ = ["WINOGRAD_MIN_PIXELS", "WINOGRAD_TILE", "legalize_winograd", "winograd_eligible"]

#: output tile F(m x m, 3 x 3): 4x fewer multiplies than direct at 6x6 input tiles (m = 6 not tried here)
WINOGRAD_TILE = 4
#: smallest output map (pixels) legalised to Winograd: ResNet's 14x14 maps and larger
WINOGRAD_MIN_PIXELS = 196


def winograd_eligible(call: relax.Call, min_pixels: int = WINOGRAD_MIN_PIXELS) -> str | None:
    """None when ``call`` (a ``relax.nn.conv2d``) can run as Winograd; otherwise why not."""
    attrs = call.attrs
    if (str(attrs.data_layout), str(attrs.kernel_layout), str(attrs.out_layout)) != ("NCHW", "OIHW", "NCHW"):
        return "not NCHW/OIHW"
    if int(attrs.groups) != 1 or any(int(d) != 1 for d in attrs.dilation) or any(int(s) != 1 for s in attrs.strides):
        return "grouped, dilated or strided"
    if not isinstance(call.args[1], tvm.ir.expr.Constant):
        return "kernel is not a constant"
    data_ty, kernel_ty, out_ty = call.args[0].ty, call.args[1].ty, call.ty
    dims: list[list[Any]] = []
    for ty in (data_ty, kernel_ty, out_ty):
        values = getattr(getattr(ty, "shape", None), "values", None)
        if values is None:
            return "shape not static"
        dims.append(list(values))
    if not all(isinstance(d, tvm.tirx.IntImm) for ds in dims for d in ds):
        return "shape not static"
    kernel, out = [int(d) for d in dims[1]], [int(d) for d in dims[2]]
    if kernel[2:] != [3, 3]:
        return "kernel is not 3x3"
    if len({int(p) for p in attrs.padding}) != 1:
        return "padding differs between sides"
    if out[2] * out[3] < min_pixels:
        return f"output map {out[2]}x{out[3]} below {min_pixels} pixels"
    if str(data_ty.dtype) != "float32" or (str(attrs.out_dtype) not in ("", "float32")):
        return "not float32"
    return None


def _legalize(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    if winograd_eligible(call) is not None:
        return tvm.ir.Op.get("relax.nn.conv2d").get_attr("FLegalize")(bb, call)
    pad, m = int(call.attrs.padding[0]), WINOGRAD_TILE
    weight = bb.emit(
        bb.call_te(lambda k: winograd_weight_transform(k, m), call.args[1], primfunc_name_hint="winograd_weight")
    )
    return bb.call_te(lambda d, u: conv2d_winograd(d, u, pad, m), call.args[0], weight, primfunc_name_hint=BLOCK)


def legalize_winograd(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` (un-legalised Relax, NCHW) legalised, its eligible convolutions as Winograd."""
    return relax.transform.LegalizeOps(customize_legalize_map={"relax.nn.conv2d": _legalize})(mod)
