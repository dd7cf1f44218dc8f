"""Channel-blocked convolutions in a whole model: ``NCHW[x]c`` activations between operators, kernels blocked once.

``convert_conv_layout(mod, "NCHW8c")`` runs TVM's ``ConvertLayout`` (element-wise operators, pooling and residual
adds follow, so transforms remain only where a layout begins or ends), then legalises the blocked convolutions with
``adatune.templates.conv2d_nchwc`` (Relax has no legalisation for them), so ``conv2d_NCHWc.x86`` recognises them.
``FoldConstant`` in ``prepare`` transforms the kernels once, at import.
"""

from __future__ import annotations

import re
from typing import Any

import tvm
from tvm import relax

from .. import target as _target
from ..templates.conv2d_nchwc import BLOCK, conv2d_nchwc

__all__ = ["convert_conv_layout", "parse_conv_layout", "resolve_conv_layout"]

_LAYOUT = re.compile(r"NCHW(\d+)c")


def parse_conv_layout(layout: str) -> int:
    """The channel block of ``"NCHW<b>c"`` (``b`` >= 1); ValueError naming the layout otherwise."""
    found = _LAYOUT.fullmatch(str(layout))
    if found is None or int(found.group(1)) < 1:
        raise ValueError(f"conv_layout must be 'NCHW' or 'NCHW<b>c' with a channel block b >= 1, got {layout!r}")
    return int(found.group(1))


def resolve_conv_layout(layout: str, target: _target.TargetLike | None = None) -> str:
    """``"auto"``: ``NCHW<lanes>c`` with the CPU target's fp32 SIMD width (8 on AVX2, 16 on AVX-512; the host
    when ``target`` is None): one vector per channel block, so a register tile can hold 2-3 blocks of output
    channels beside 4-6 pixels in 16 ymm registers (16-channel blocks on AVX2 give only even vector counts).
    Anything else is checked and returned."""
    if layout == "auto":
        return f"NCHW{_target.cpu_info(target).lanes('float32')}c"
    if layout != "NCHW":
        parse_conv_layout(layout)
    return layout


def _legalize_conv2d(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    attrs = call.attrs
    data_layout = str(attrs.data_layout)
    if data_layout == "NCHW":
        return tvm.ir.Op.get("relax.nn.conv2d").get_attr("FLegalize")(bb, call)
    parse_conv_layout(data_layout)
    kernel_layout, out_layout = str(attrs.kernel_layout), str(attrs.out_layout)
    if not re.fullmatch(r"OIHW\d+i\d+o", kernel_layout) or out_layout != data_layout:
        raise ValueError(
            f"blocked conv2d takes an OIHW<b>i<b>o kernel and {data_layout} output, got "
            f"{kernel_layout} and {out_layout}"
        )
    if int(attrs.groups) != 1 or any(int(d) != 1 for d in attrs.dilation):
        raise ValueError(
            f"blocked conv2d ({data_layout}) supports groups=1 and dilation 1, got groups="
            f"{int(attrs.groups)}, dilation {[int(d) for d in attrs.dilation]}"
        )
    out_dtype, dtype = str(attrs.out_dtype), str(call.args[0].ty.dtype)
    if out_dtype and out_dtype != dtype:
        raise ValueError(f"blocked conv2d computes in its input's dtype {dtype}, asked for {out_dtype}")
    strides = tuple(int(s) for s in attrs.strides)
    padding = tuple(int(p) for p in attrs.padding)
    return bb.call_te(
        lambda data, kernel: conv2d_nchwc(data, kernel, strides, padding),  # type: ignore[arg-type]
        call.args[0],
        call.args[1],
        primfunc_name_hint=BLOCK,
    )


def convert_conv_layout(mod: tvm.IRModule, layout: str) -> tvm.IRModule:
    """``mod`` (un-legalised Relax) with its convolutions in ``layout`` (``"NCHW<b>c"``) and legalised; other
    operators are left for ``prepare``'s pipeline. ``"NCHW"`` returns ``mod`` unchanged."""
    if layout == "NCHW":
        return mod
    bn = parse_conv_layout(layout)
    desired: dict[str, Any] = {"relax.nn.conv2d": [f"NCHW{bn}c", f"OIHW{bn}i{bn}o"]}
    # the same transform of one tensor feeds a block's two branches (ResNet's shortcut): compute it once
    converted = relax.transform.EliminateCommonSubexpr()(relax.transform.ConvertLayout(desired)(mod))
    legalise = relax.transform.LegalizeOps(customize_legalize_map={"relax.nn.conv2d": _legalize_conv2d})
    return legalise(converted)
