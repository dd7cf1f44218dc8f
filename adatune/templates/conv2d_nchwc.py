"""Channel-blocked conv2d (NCHW[x]c): compute, numpy reference, and the x86 template. Data
``[N, CI // ic_bn, H, W, ic_bn]``, kernel ``OIHW{ic_bn}i{oc_bn}o``, output ``[N, CO // oc_bn, OH, OW, oc_bn]``: the
layout TVM's x86 schedules and oneDNN keep activations in, so a model converted to it (``conv_layout="auto"``) packs
each kernel once at build and hands blocked activations from one convolution to the next.

``conv2d_NCHWc.x86``: a register tile of ``y2 x x2`` pixels times ``f2`` channel blocks (``oc_bn`` lanes,
vectorised), the ``ic_bn`` lanes the innermost, contiguous reduction loop. Knobs as ``conv2d``'s (``tile_f`` over
channel blocks, ``tile_rc`` over input channel blocks), filtered the same way, without ``pack_kernel``."""

from __future__ import annotations

from typing import Any

import numpy as np
import tvm
from tvm import te

from .. import target as _target
from ..codegen import x86 as _x86
from ..target import CpuInfo
from ..task import template
from ._spaces import start_schedule
from .conv2d import _divisors, conv2d_flop, conv2d_reference

__all__ = [
    "conv2d_nchwc",
    "conv2d_nchwc_compute",
    "conv2d_nchwc_reference",
    "conv2d_nchwc_x86",
    "pack_nchwc",
    "unpack_nchwc",
]

BLOCK = "conv2d_NCHWc"


def conv2d_nchwc(
    data: te.Tensor,
    kernel: te.Tensor,
    stride: int | tuple[int, int],
    pad: int | tuple[int, int, int, int],
) -> te.Tensor:
    """The convolution of blocked tensors (the data's shape gives ``ic_bn``, the kernel's ``oc_bn``); a zero
    padding stage ``pad_temp`` first when any side is padded. ``stride`` is one int or ``(h, w)``; ``pad`` one
    int or ``(top, left, bottom, right)`` (a model's legalisation passes its own; the template's are square)."""
    N, CIb, H, W, ic_bn = (int(s) for s in data.shape)
    COb, CIb_k, KH, KW, ic_k, oc_bn = (int(s) for s in kernel.shape)
    if (CIb_k, ic_k) != (CIb, ic_bn):
        raise ValueError(f"blocked conv2d: kernel {tuple(kernel.shape)} does not match data {tuple(data.shape)}")
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    top, left, bottom, right = (pad,) * 4 if isinstance(pad, int) else pad
    OH, OW = (H + top + bottom - KH) // sh + 1, (W + left + right - KW) // sw + 1
    if OH < 1 or OW < 1 or min(sh, sw) < 1 or min(top, left, bottom, right) < 0:
        raise ValueError(f"conv2d kernel {KH}x{KW}, stride {(sh, sw)}, padding {pad} do not fit the {H}x{W} input")
    src = data
    if top or left or bottom or right:
        zero = tvm.tirx.const(0, data.dtype)
        src = te.compute(
            (N, CIb, H + top + bottom, W + left + right, ic_bn),
            lambda n, c, y, x, i: te.if_then_else(
                te.all(y >= top, y < H + top, x >= left, x < W + left), data[n, c, y - top, x - left, i], zero
            ),
            name="pad_temp",
        )
    rco = te.reduce_axis((0, CIb), name="rco")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    rci = te.reduce_axis((0, ic_bn), name="rci")
    return te.compute(
        (N, COb, OH, OW, oc_bn),
        lambda n, fo, y, x, fi: te.sum(
            src[n, rco, y * sh + ry, x * sw + rx, rci] * kernel[fo, rco, ry, rx, rci, fi],
            axis=[rco, ry, rx, rci],
        ),
        name=BLOCK,
    )


def _check(CI: int, CO: int, ic_bn: int, oc_bn: int) -> None:
    if ic_bn < 1 or oc_bn < 1 or CI % ic_bn or CO % oc_bn:
        raise ValueError(f"channel blocks ic_bn={ic_bn}, oc_bn={oc_bn} must divide CI={CI} and CO={CO}")


def conv2d_nchwc_compute(
    N: int,
    CI: int,
    H: int,
    W: int,
    CO: int,
    KH: int,
    KW: int,
    stride: int,
    pad: int,
    ic_bn: int,
    oc_bn: int,
    dtype: str = "float32",
) -> list[te.Tensor]:
    """Placeholders of the blocked shapes and the convolution: ``[data, kernel, conv2d_NCHWc]``."""
    if stride < 1 or pad < 0 or min(N, CI, H, W, CO, KH, KW) < 1:
        raise ValueError(f"invalid conv2d arguments {(N, CI, H, W, CO, KH, KW, stride, pad)}")
    _check(CI, CO, ic_bn, oc_bn)
    data = te.placeholder((N, CI // ic_bn, H, W, ic_bn), dtype, name="data")
    kernel = te.placeholder((CO // oc_bn, CI // ic_bn, KH, KW, ic_bn, oc_bn), dtype, name="kernel")
    return [data, kernel, conv2d_nchwc(data, kernel, stride, pad)]


def pack_nchwc(x: np.ndarray, bn: int) -> np.ndarray:
    """``[N, C, H, W]`` -> ``[N, C // bn, H, W, bn]``."""
    N, C, H, W = x.shape
    return np.ascontiguousarray(x.reshape(N, C // bn, bn, H, W).transpose(0, 1, 3, 4, 2))


def unpack_nchwc(x: np.ndarray) -> np.ndarray:
    """``[N, Cb, H, W, bn]`` -> ``[N, Cb * bn, H, W]``."""
    N, Cb, H, W, bn = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(N, Cb * bn, H, W))


def conv2d_nchwc_reference(data: np.ndarray, kernel: np.ndarray, args: tuple) -> np.ndarray:
    """Unblock, convolve with the NCHW reference, block the output again."""
    COb, CIb, KH, KW, ic_bn, oc_bn = kernel.shape
    oihw = kernel.transpose(0, 5, 1, 4, 2, 3).reshape(COb * oc_bn, CIb * ic_bn, KH, KW)
    return pack_nchwc(conv2d_reference(unpack_nchwc(data), np.ascontiguousarray(oihw), args), oc_bn)


def _define_knobs(cfg: Any, args: tuple[int, ...], info: CpuInfo, dtype: str) -> None:
    """Register tiles of ``pixels x channel vectors`` (``_x86.register_tiles``), then one filter on the tile,
    the cache tile's L2 working set and the parallel loop, as the NCHW template does."""
    N, CIb, ic_bn, COb, oc_bn, OH, OW, KH, KW, stride = args
    lanes, nbytes = info.lanes(dtype), tvm.DataType(dtype).bits // 8
    block_vecs = -(-oc_bn // lanes)
    fs = [f for f in _divisors(COb, COb) if f * block_vecs <= info.vector_registers // 4] or [1]
    ys, xs = _divisors(OH, 4), _divisors(OW, 32)
    tiles = _x86.register_tiles({y * x for y in ys for x in xs}, {f * block_vecs for f in fs}, info)
    f_ok = {f for f in fs if any(v == f * block_vecs for _, v in tiles)}
    y_ok = {y for y in ys if any((y * x, v) in tiles for x in xs for _, v in tiles)}
    x_ok = {x for x in xs if any((y * x, v) in tiles for y in ys for _, v in tiles)}
    cfg.define_split("tile_f", COb, num_outputs=3, filter=lambda e: e.size[-1] in f_ok)
    cfg.define_split("tile_y", OH, num_outputs=3, filter=lambda e: e.size[-1] in y_ok)
    cfg.define_split("tile_x", OW, num_outputs=3, filter=lambda e: e.size[-1] in x_ok)
    cfg.define_split("tile_rc", CIb, num_outputs=2)
    cfg.define_reorder("reorder_inner", 3, policy="all")
    cfg.define_knob("tile_order", ["fyx", "yxf"])
    cfg.define_knob("unroll_kw", [0, 1])
    _x86.define_unroll(cfg)
    limit = N * COb * OH * OW
    splittable = any(
        _x86.parallel_ok(N * f0 * y0 * x0, info.cores, limit)
        for f2 in f_ok
        for f0 in _divisors(COb // f2, COb)
        for y0 in _divisors(OH, OH)
        for x0 in _divisors(OW, OW)
    )

    def keep(c: Any) -> bool:
        f, y, x = c["tile_f"].size, c["tile_y"].size, c["tile_x"].size
        kernel = f[1] * f[2] * oc_bn * CIb * ic_bn * KH * KW
        patch = CIb * ic_bn * ((y[1] * y[2] - 1) * stride + KH) * ((x[1] * x[2] - 1) * stride + KW)
        return (
            (y[2] * x[2], f[2] * block_vecs) in tiles
            and (_x86.parallel_ok(N * f[0] * y[0] * x[0], info.cores, limit) or not splittable)
            and ((kernel + patch) * nbytes <= info.l2_bytes or f[1] * y[1] * x[1] == 1)
        )

    cfg.multi_filter(keep)


@template(f"{BLOCK}.x86", reference=conv2d_nchwc_reference)
def conv2d_nchwc_x86(
    N: int,
    CI: int,
    H: int,
    W: int,
    CO: int,
    KH: int,
    KW: int,
    stride: int,
    pad: int,
    ic_bn: int,
    oc_bn: int,
    dtype: str = "float32",
    space: str = "full",
):
    tensors = conv2d_nchwc_compute(N, CI, H, W, CO, KH, KW, stride, pad, ic_bn, oc_bn, dtype)
    OH, OW = (int(s) for s in tensors[-1].shape[2:4])
    sch, cfg = start_schedule(tensors, conv2d_flop(N, CI, H, W, CO, KH, KW, stride, pad), space)
    info = _target.cpu_info(_target.current())
    _define_knobs(cfg, (N, CI // ic_bn, ic_bn, CO // oc_bn, oc_bn, OH, OW, KH, KW, stride), info, dtype)

    conv = sch.get_sblock(BLOCK)
    n, f, y, x, fi, rco, ry, rx, rci = sch.get_loops(conv)
    f0, f1, f2 = cfg["tile_f"].apply(sch, f)
    y0, y1, y2 = cfg["tile_y"].apply(sch, y)
    x0, x1, x2 = cfg["tile_x"].apply(sch, x)
    rc0, rc1 = cfg["tile_rc"].apply(sch, rco)
    tiles = [f1, y1, x1] if cfg["tile_order"].val == "fyx" else [y1, x1, f1]
    inner = [[rc1, ry, rx][p] for p in cfg["reorder_inner"].perm]
    sch.reorder(n, f0, y0, x0, *tiles, rc0, *inner, rci, y2, x2, f2, fi)

    acc = sch.cache_write(conv, 0, _x86.ACCUMULATOR_SCOPE)  # the accumulator tile, in registers
    sch.reverse_compute_at(acc, tiles[-1])
    sch.parallel(sch.fuse(n, f0, y0, x0))
    sch.unroll(y2)
    sch.unroll(x2)
    sch.unroll(f2)
    if cfg["unroll_kw"].val:
        sch.unroll(rx)
    sch.vectorize(fi)
    sch.vectorize(sch.get_loops(acc)[-1])
    sch.decompose_reduction(conv, rc0)
    if pad:
        pad_loops = sch.get_loops(sch.get_sblock("pad_temp"))
        sch.parallel(sch.fuse(pad_loops[0], pad_loops[1]))
        sch.vectorize(pad_loops[-1])
    _x86.apply_unroll(sch, cfg)
    return sch, tensors
