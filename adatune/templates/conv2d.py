"""NCHW conv2d: compute, numpy reference, and the x86 template (the CUDA one is in ``conv2d_cuda``). The padding is a
separate stage ``pad_temp`` (absent when ``pad == 0``); the convolution block is ``conv2d_nchw``.

``conv2d_nchw.x86`` treats the convolution as a GEMM with output channels as columns: a register tile of ``y2 x x2``
output pixels times ``f2`` channels (whole SIMD vectors), input pixels broadcast, the kernel packed to
``[CO // f2, CI, KH, KW, f2]`` so each tap reads one contiguous vector. Knobs: ``tile_f``, ``tile_y``, ``tile_x``
(3-way) and ``tile_rc`` (2-way), limited by ``adatune.codegen.x86``, the loop order and unrolling, and ``pack_kernel``
(``global``: whole kernel packed up front; ``outer``: each channel block's slice packed inside its thread).
``space="small"`` restricts the knobs to about two thousand configs, few enough to measure exhaustively for replay
experiments, slow register tiles included so tuners have speeds to tell apart. ``space="autotvm"`` keeps the full
space's knobs unpruned (``_spaces``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import tvm
from tvm import te

from .. import target as _target
from ..codegen import x86 as _x86
from ..target import CpuInfo
from ..task import template
from ._spaces import SPACES, start_schedule

__all__ = ["conv2d_compute", "conv2d_flop", "conv2d_reference", "conv2d_x86", "output_size"]

_SPACES = (*SPACES, "small")


def output_size(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def conv2d_flop(N: int, CI: int, H: int, W: int, CO: int, KH: int, KW: int, stride: int, pad: int) -> float:
    return 2.0 * N * CO * output_size(H, KH, stride, pad) * output_size(W, KW, stride, pad) * CI * KH * KW


def conv2d_compute(
    N: int, CI: int, H: int, W: int, CO: int, KH: int, KW: int, stride: int, pad: int, dtype: str = "float32"
) -> list[te.Tensor]:
    """``data[N,CI,H,W]``, ``kernel[CO,CI,KH,KW]`` -> ``conv2d_nchw[N,CO,OH,OW]`` (zero padding ``pad``)."""
    if stride < 1 or pad < 0 or min(N, CI, H, W, CO, KH, KW) < 1:
        raise ValueError(f"invalid conv2d arguments {(N, CI, H, W, CO, KH, KW, stride, pad)}")
    OH, OW = output_size(H, KH, stride, pad), output_size(W, KW, stride, pad)
    if OH < 1 or OW < 1:
        raise ValueError(f"conv2d kernel {KH}x{KW} does not fit the padded {H}x{W} input")
    data = te.placeholder((N, CI, H, W), dtype, name="data")
    kernel = te.placeholder((CO, CI, KH, KW), dtype, name="kernel")
    src = data
    if pad:
        zero = tvm.tirx.const(0, dtype)
        src = te.compute(
            (N, CI, H + 2 * pad, W + 2 * pad),
            lambda n, c, y, x: te.if_then_else(
                te.all(y >= pad, y < H + pad, x >= pad, x < W + pad), data[n, c, y - pad, x - pad], zero
            ),
            name="pad_temp",
        )
    rc = te.reduce_axis((0, CI), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    out = te.compute(
        (N, CO, OH, OW),
        lambda n, f, y, x: te.sum(
            src[n, rc, y * stride + ry, x * stride + rx] * kernel[f, rc, ry, rx], axis=[rc, ry, rx]
        ),
        name="conv2d_nchw",
    )
    return [data, kernel, out]


def conv2d_reference(data: np.ndarray, kernel: np.ndarray, args: tuple) -> np.ndarray:
    """im2col through a strided window view, then one tensordot; ``args``: the template's (for stride and padding)."""
    stride, pad = int(args[7]), int(args[8])
    KH, KW = kernel.shape[2:]
    x = np.pad(data, ((0, 0), (0, 0), (pad, pad), (pad, pad))) if pad else data
    win = np.lib.stride_tricks.sliding_window_view(x, (KH, KW), axis=(2, 3))[:, :, ::stride, ::stride]
    out = np.tensordot(win, kernel, axes=([1, 4, 5], [1, 2, 3]))  # [N, OH, OW, CO]
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2)).astype(data.dtype)


def _divisors(n: int, cap: int) -> list[int]:
    return [d for d in range(1, min(n, cap) + 1) if n % d == 0]


def _define_knobs(cfg: Any, args: tuple[int, ...], info: CpuInfo, dtype: str, small: bool) -> None:
    """Knobs, each pruned to the register tiles worth measuring (``_x86.register_tiles``: output pixels
    broadcast x channel vectors), then a joint filter on the tile, its L2 working set and the parallel loop."""
    N, CI, CO, OH, OW, KH, KW, stride = args
    lanes, nbytes = info.lanes(dtype), tvm.DataType(dtype).bits // 8
    fs = _x86.vector_sizes(CO, lanes, 4 if small else info.vector_registers // 4)
    if small and CO % lanes == 0:
        fs = [f for f in fs if f // lanes in (1, 2, 4)]
    ys, xs = _divisors(OH, 2 if small else 4), _divisors(OW, 16 if small else 32)
    vecs = lambda f: -(-f // lanes)
    if small:  # replay experiments need a spread of speeds: every tile that fits the registers
        tiles = {(y * x, vecs(f)) for y in ys for x in xs for f in fs if _x86.fits_registers(y * x, vecs(f), info)}
    else:
        tiles = _x86.register_tiles({y * x for y in ys for x in xs}, {vecs(f) for f in fs}, info)
    f_ok = {f for f in fs if any(v == vecs(f) for _, v in tiles)}
    y_ok = {y for y in ys if any((y * x, v) in tiles for x in xs for _, v in tiles)}
    x_ok = {x for x in xs if any((y * x, v) in tiles for y in ys for _, v in tiles)}
    if small:  # no middle tiles, few candidates: an exhaustively measurable space
        cfg.define_split("tile_f", CO, num_outputs=3, filter=lambda e: e.size[1] == 1 and e.size[2] in f_ok)
        cfg.define_split("tile_y", OH, num_outputs=3, filter=lambda e: e.size[1] == 1 and e.size[2] in y_ok)
        cfg.define_split("tile_x", OW, num_outputs=3, filter=lambda e: e.size[1] == 1 and e.size[2] in x_ok)
        rcs = [f for f in (4, 8, 16, 32) if CI % f == 0] or [CI]
        cfg.define_split("tile_rc", CI, num_outputs=2, policy="candidate", candidate=[[CI // f, f] for f in rcs])
        cfg.define_reorder("reorder_inner", 3, policy="candidate", candidate=[[0, 1, 2], [1, 2, 0]])
        cfg.define_knob("tile_order", ["fyx"])
        cfg.define_knob("pack_kernel", ["global", "outer"])
        cfg.define_knob("unroll_kw", [0, 1])
        cfg.define_knob("auto_unroll_max_step", [0, 64])
    else:
        cfg.define_split("tile_f", CO, num_outputs=3, filter=lambda e: e.size[-1] in f_ok)
        cfg.define_split("tile_y", OH, num_outputs=3, filter=lambda e: e.size[-1] in y_ok)
        cfg.define_split("tile_x", OW, num_outputs=3, filter=lambda e: e.size[-1] in x_ok)
        cfg.define_split("tile_rc", CI, num_outputs=2, max_factor=64)
        cfg.define_reorder("reorder_inner", 3, policy="all")
        cfg.define_knob("tile_order", ["fyx", "yxf"])
        cfg.define_knob("pack_kernel", ["global", "outer"])
        cfg.define_knob("unroll_kw", [0, 1])
        _x86.define_unroll(cfg)
    f0_max = CO // (lanes if CO % lanes == 0 else 1)
    # an output too small to split evenly over the cores (4x4x32 on 16 cores) keeps its serial configs
    splittable = any(
        _x86.parallel_ok(N * f0 * y0 * x0, info.cores, N * f0_max * OH * OW)
        for f2 in f_ok
        for y2 in y_ok
        for x2 in x_ok
        if (y2 * x2, vecs(f2)) in tiles
        for f0 in _divisors(CO // f2, CO)
        for y0 in _divisors(OH // y2, OH)
        for x0 in _divisors(OW // x2, OW)
    )

    def keep(c: Any) -> bool:
        f, y, x = c["tile_f"].size, c["tile_y"].size, c["tile_x"].size
        if c["pack_kernel"].val == "outer":  # parallel over channel blocks only
            par, limit = N * f[0], N * f0_max
        else:
            par, limit = N * f[0] * y[0] * x[0], N * f0_max * OH * OW
        # one cache tile reads its kernel slice and input patch; keep them in L2 (or use the smallest tile)
        kernel = f[1] * f[2] * CI * KH * KW
        patch = CI * ((y[1] * y[2] - 1) * stride + KH) * ((x[1] * x[2] - 1) * stride + KW)
        return (
            (y[2] * x[2], vecs(f[2])) in tiles
            and (_x86.parallel_ok(par, info.cores, limit) or not splittable)
            and ((kernel + patch) * nbytes <= info.l2_bytes or f[1] * y[1] * x[1] == 1)
        )

    cfg.multi_filter(keep)


def _loops_under(sch, block, loop) -> list:
    loops = list(sch.get_loops(block))
    at = sch.get_sref(loop)
    return loops[next(i for i, lp in enumerate(loops) if sch.get_sref(lp).same_as(at)) + 1 :]


def _pack_in_write_order(sch, loops: list, f_extent: int, nr: int):
    """Make the packing copy walk its destination ``[f // nr, c, h, w, f % nr]`` contiguously, reading ``nr`` kernel
    rows at once instead of scattering every element to another cache line. ``loops`` are the copy's loops, channel loop
    first (unit loops are absent after compute_at). Returns the outermost copy loop (None for a one-element copy)."""
    if not loops:
        return None
    first = loops[0]
    if nr > 1 and int(sch.get(first).extent) == f_extent and len(loops) > 1:
        fo, fi = sch.split(first, [None, nr])
        sch.reorder(fo, *loops[1:], fi)
        return fo
    return first


@template("conv2d_nchw.x86", reference=conv2d_reference)
def conv2d_x86(
    N: int,
    CI: int,
    H: int,
    W: int,
    CO: int,
    KH: int,
    KW: int,
    stride: int,
    pad: int,
    dtype: str = "float32",
    space: str = "full",
):
    tensors = conv2d_compute(N, CI, H, W, CO, KH, KW, stride, pad, dtype)
    OH, OW = (int(s) for s in tensors[-1].shape[2:])
    sch, cfg = start_schedule(tensors, conv2d_flop(N, CI, H, W, CO, KH, KW, stride, pad), space, _SPACES)
    info = _target.cpu_info(_target.current())
    _define_knobs(cfg, (N, CI, CO, OH, OW, KH, KW, stride), info, dtype, space == "small")

    conv = sch.get_sblock("conv2d_nchw")
    n, f, y, x, rc, ry, rx = sch.get_loops(conv)
    f0, f1, f2 = cfg["tile_f"].apply(sch, f)
    y0, y1, y2 = cfg["tile_y"].apply(sch, y)
    x0, x1, x2 = cfg["tile_x"].apply(sch, x)
    rc0, rc1 = cfg["tile_rc"].apply(sch, rc)
    tiles = [f1, y1, x1] if cfg["tile_order"].val == "fyx" else [y1, x1, f1]
    inner = cfg["reorder_inner"].perm
    sch.reorder(n, f0, y0, x0, *tiles, rc0, *[[rc1, ry, rx][p] for p in inner], y2, x2, f2)

    # accumulator tile in registers, stored pixel-major so the vectorised channel axis is contiguous
    acc = sch.cache_write(conv, 0, _x86.ACCUMULATOR_SCOPE)
    sch.reverse_compute_at(acc, tiles[-1])
    sch.transform_layout(conv, ("write", 0), lambda a, b, c, d: (a, c, d, b))
    nr = cfg["tile_f"].size[-1]
    packed = sch.cache_read(conv, 1, "global")
    sch.transform_layout(conv, ("read", 1), lambda a, b, c, d: (a // nr, b, c, d, a % nr))
    if cfg["pack_kernel"].val == "outer":  # threads own channel blocks; each packs its slice once
        outer = sch.fuse(n, f0)
        sch.compute_at(packed, outer)
        _pack_in_write_order(sch, _loops_under(sch, packed, outer), cfg["tile_f"].size[1] * nr, nr)
    else:
        outer = sch.fuse(n, f0, y0, x0)
        sch.parallel(_pack_in_write_order(sch, sch.get_loops(packed), CO, nr))  # 4 loops, never None
        _x86.mark_weight_pack(sch, packed)  # a model packs its constant kernel once, at build time
    sch.parallel(outer)

    sch.unroll(y2)
    sch.unroll(x2)
    if cfg["unroll_kw"].val:
        sch.unroll(rx)
    if nr > 1:
        _x86.vectorize_columns(sch, f2, nr)  # before decompose_reduction, or TIR rejects it
    _x86.vectorize_columns(sch, sch.get_loops(acc)[-1], nr)
    sch.decompose_reduction(conv, rc0)
    if pad:
        pad_loops = sch.get_loops(sch.get_sblock("pad_temp"))
        sch.parallel(sch.fuse(pad_loops[0], pad_loops[1]))
    _x86.apply_unroll(sch, cfg)
    return sch, tensors
