"""``conv2d_nchw.cuda``: AutoTVM's direct CUDA conv2d template on TIR.

Output axes split 4-way (``blockIdx``, ``vthread``, ``threadIdx``, inner: ``tile_f``, ``tile_y``, ``tile_x``), the
reduction 2-way (``tile_rc``, ``tile_ry``, ``tile_rx``); padded input and kernel tiles are fetched into shared memory
cooperatively, outputs accumulate in registers; ``auto_unroll_max_step`` and ``unroll_explicit`` as in AutoTVM.
Configs a GPU cannot launch are filtered out; ``space="autotvm"`` keeps them, as AutoTVM does (they fail and are
recorded with their error kind).
"""

from __future__ import annotations

import tvm

from ..task import template
from . import _cuda
from ._spaces import start_schedule
from .conv2d import conv2d_compute, conv2d_flop, conv2d_reference

__all__ = ["conv2d_cuda"]


def _define_knobs(
    cfg,
    CO: int,
    OH: int,
    OW: int,
    CI: int,
    KH: int,
    KW: int,
    stride: int,  # noqa: ANN001
    nbytes: int,
) -> None:
    cfg.define_split("tile_f", CO, num_outputs=4)
    cfg.define_split("tile_y", OH, num_outputs=4)
    cfg.define_split("tile_x", OW, num_outputs=4)
    cfg.define_split("tile_rc", CI, num_outputs=2)
    cfg.define_split("tile_ry", KH, num_outputs=2)
    cfg.define_split("tile_rx", KW, num_outputs=2)
    _cuda.define_unroll(cfg)
    min_threads = min(_cuda.MIN_THREADS, CO * OH * OW)

    def launchable(c) -> bool:  # noqa: ANN001
        f, y, x = c["tile_f"].size, c["tile_y"].size, c["tile_x"].size
        rc, ry, rx = c["tile_rc"].size[-1], c["tile_ry"].size[-1], c["tile_rx"].size[-1]
        threads = f[2] * y[2] * x[2]
        block_y, block_x = y[1] * y[2] * y[3], x[1] * x[2] * x[3]
        data = rc * ((block_y - 1) * stride + ry) * ((block_x - 1) * stride + rx)
        weight = f[1] * f[2] * f[3] * rc * ry * rx
        acc = f[1] * f[3] * y[1] * y[3] * x[1] * x[3]
        # written with & so the space evaluates it on arrays of configs at once (space._filter)
        return (
            (min_threads <= threads)
            & (threads <= _cuda.MAX_THREADS)
            & ((data + weight) * nbytes <= _cuda.SHARED_BYTES)
            & (acc <= _cuda.MAX_ACCUMULATORS)
        )

    cfg.multi_filter(launchable)


@template("conv2d_nchw.cuda", reference=conv2d_reference)
def conv2d_cuda(
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
    sch, cfg = start_schedule(tensors, conv2d_flop(N, CI, H, W, CO, KH, KW, stride, pad), space)
    _define_knobs(cfg, CO, OH, OW, CI, KH, KW, stride, tvm.DataType(dtype).bits // 8)

    conv = sch.get_sblock("conv2d_nchw")
    n, f, y, x, rc, ry, rx = sch.get_loops(conv)
    bf, vf, tf, fi = cfg["tile_f"].apply(sch, f)
    by, vy, ty, yi = cfg["tile_y"].apply(sch, y)
    bx, vx, tx, xi = cfg["tile_x"].apply(sch, x)
    rco, rci = cfg["tile_rc"].apply(sch, rc)
    ryo, ryi = cfg["tile_ry"].apply(sch, ry)
    rxo, rxi = cfg["tile_rx"].apply(sch, rx)
    sch.reorder(n, bf, by, bx, vf, vy, vx, tf, ty, tx, rco, ryo, rxo, rci, ryi, rxi, fi, yi, xi)
    sch.bind(sch.fuse(n, bf), "blockIdx.z")
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    for loop, tag in (
        (vf, "vthread.z"),
        (vy, "vthread.y"),
        (vx, "vthread.x"),
        (tf, "threadIdx.z"),
        (ty, "threadIdx.y"),
        (tx, "threadIdx.x"),
    ):
        sch.bind(loop, tag)

    acc = sch.cache_write(conv, 0, "local")
    sch.reverse_compute_at(acc, tx)
    threads = [cfg["tile_f"].size[2], cfg["tile_y"].size[2], cfg["tile_x"].size[2]]
    for idx in (0, 1):  # padded data, kernel
        shared = sch.cache_read(conv, idx, "shared")
        sch.compute_at(shared, rxo)
        _cuda.cooperative_fetch(sch, shared, rxo, threads)
    if pad:
        sch.compute_inline(sch.get_sblock("pad_temp"))
    sch.decompose_reduction(conv, rco)
    _cuda.apply_unroll(sch, cfg)
    return sch, tensors
