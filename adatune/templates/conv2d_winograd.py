"""Winograd conv2d F(m x m, 3 x 3) on NCHW data: compute, weight transform, numpy reference, x86 template.

Winograd's minimal filtering computes an ``m x m`` output tile from an ``(m+2) x (m+2)`` input tile with
``(m+2)^2`` products, 4x fewer than direct 3x3 stride-1 convolution at ``m = 4``: on a CPU where direct convolution
already runs at FMA peak, fewer operations is what is left.

Arguments: ``N, CI, H, W, CO, pad, m, dtype="float32", space="full"``. The kernel argument is the *transformed*
weight ``U[alpha, alpha, CI, CO] = G g G^T`` (``alpha = m + 2``; ``winograd_weight_transform``), a constant a model
transforms once at import. Stages: ``data_pad`` and ``data_pack`` (``B^T d B`` per input tile), ``bgemm`` (``alpha^2``
GEMMs scheduled by ``_gemm.schedule_gemm``, with its knobs), ``inverse`` (``A^T M A``) and the NCHW output
``conv2d_winograd`` (where a fused epilogue is inlined). Knobs beyond the GEMM's: ``pack_vec``, ``tile_co``,
``pack_par``. A task's FLOPs are the direct convolution's, so its GFLOPS compare with the direct template's (a model
task counts the Winograd function's own operations instead).
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import numpy as np
import tvm
from tvm import te
from tvm.topi.nn.winograd_util import _cook_toom_convolution, _interpolation_points
from tvm.topi.utils import const_matrix

from .. import target as _target
from ..task import template
from . import _gemm
from ._spaces import start_schedule
from .conv2d import _divisors, conv2d_flop, conv2d_reference

__all__ = [
    "BLOCK",
    "STAGES",
    "WINOGRAD_TILES",
    "conv2d_winograd",
    "conv2d_winograd_compute",
    "conv2d_winograd_reference",
    "conv2d_winograd_x86",
    "winograd_matrices",
    "winograd_weight_transform",
    "winograd_weight_transform_numpy",
]

BLOCK = "conv2d_winograd"
#: the blocks before ``BLOCK``, in order (``adatune.models`` recognises a legalised Winograd function by them)
STAGES = ("data_pad", "input_tile", "data_rows", "data_pack", "bgemm", "inverse_rows", "inverse")
KERNEL = 3
WINOGRAD_TILES = (2, 4, 6)


@functools.cache
def winograd_matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(A, B, G)`` of F(m x m, 3 x 3), float64, shaped alpha x m, alpha x alpha, alpha x 3 (TVM's Cook-Toom)."""
    if m not in WINOGRAD_TILES:
        raise ValueError(f"Winograd tile size m must be one of {WINOGRAD_TILES}, got {m}")
    a, b, g = _cook_toom_convolution(_interpolation_points(m + KERNEL - 2), m, KERNEL)
    return np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(g, np.float64)


def winograd_weight_transform_numpy(kernel: np.ndarray, m: int) -> np.ndarray:
    """``[CO, CI, 3, 3]`` -> ``U[alpha, alpha, CI, CO] = G g G^T`` (in float64, returned in the input dtype)."""
    if kernel.ndim != 4 or kernel.shape[2:] != (KERNEL, KERNEL):
        raise ValueError(f"Winograd takes a [CO, CI, 3, 3] kernel, got shape {kernel.shape}")
    _, _, g = winograd_matrices(m)
    return np.einsum("ek,oikl,nl->enio", g, kernel.astype(np.float64), g).astype(kernel.dtype)


def winograd_weight_transform(kernel: te.Tensor, m: int) -> te.Tensor:
    """The same transform as a TE stage (a model imports it on its constant weight; ``FoldConstant`` runs it)."""
    CO, CI, KH, KW = (int(s) for s in kernel.shape)
    if (KH, KW) != (KERNEL, KERNEL):
        raise ValueError(f"Winograd takes a 3x3 kernel, got {KH}x{KW}")
    _, _, g_np = winograd_matrices(m)
    g = const_matrix(g_np.astype(str(kernel.dtype)), "G")
    alpha = m + KERNEL - 1
    rh, rw = te.reduce_axis((0, KERNEL), name="rh"), te.reduce_axis((0, KERNEL), name="rw")
    return te.compute(
        (alpha, alpha, CI, CO),
        lambda e, n, ci, co: te.sum(kernel[co, ci, rh, rw] * g[e, rh] * g[n, rw], axis=[rh, rw]),
        name="winograd_weight",
    )


def _coef(matrix: np.ndarray, row: int, col: Any, dtype: str) -> Any:
    """``matrix[row, col]`` for a loop variable ``col``: a select over the row's non-zero entries, which folds
    to one constant once the loop over ``col`` is unrolled (a nested select over both indices, as
    ``topi.utils.const_matrix`` builds it, makes every config's build far slower)."""
    value = tvm.tirx.const(0, dtype)
    for j in range(matrix.shape[1]):
        if matrix[row, j] != 0:
            value = tvm.tirx.Select(col == j, tvm.tirx.const(float(matrix[row, j]), dtype), value)
    return value


def _combine(matrix: np.ndarray, col: Any, value: Any, dtype: str) -> Any:
    """``sum_r matrix[r, col] * value(r)``, written out over ``r`` in Python (no reduction loop): rows of zeros
    drop out here, the selects once the loop over ``col`` is unrolled."""
    return functools.reduce(
        operator.add, [_coef(matrix, r, col, dtype) * value(r) for r in range(matrix.shape[0]) if matrix[r].any()]
    )


def conv2d_winograd(data: te.Tensor, weight: te.Tensor, pad: int | tuple[int, int, int, int], m: int) -> te.Tensor:
    """The stride-1 3x3 convolution of NCHW ``data`` with the transformed ``weight`` (``[alpha, alpha, CI,
    CO]``); ``pad`` one int or ``(top, left, bottom, right)``."""
    N, CI, H, W = (int(s) for s in data.shape)
    alpha, alpha2, CI_w, CO = (int(s) for s in weight.shape)
    if alpha != m + KERNEL - 1 or alpha2 != alpha or CI_w != CI:
        raise ValueError(f"Winograd weight {tuple(weight.shape)} does not fit m={m} and {CI} input channels")
    top, left, bottom, right = (pad,) * 4 if isinstance(pad, int) else pad
    OH, OW = H + top + bottom - KERNEL + 1, W + left + right - KERNEL + 1
    if OH < 1 or OW < 1 or min(top, left, bottom, right) < 0:
        raise ValueError(f"a 3x3 kernel with padding {pad} does not fit the {H}x{W} input")
    nH, nW = -(-OH // m), -(-OW // m)
    P = N * nH * nW
    a_np, b_np, _ = winograd_matrices(m)
    dtype = str(data.dtype)
    zero = tvm.tirx.const(0, dtype)

    # the input, zero-padded to whole tiles in one parallel copy, so the tile reads below need no (slow) guard
    PH, PW = nH * m + KERNEL - 1, nW * m + KERNEL - 1
    padded = te.compute(
        (N, CI, PH, PW),
        lambda b, ci, y, x: te.if_then_else(
            te.all(y >= top, y < H + top, x >= left, x < W + left), data[b, ci, y - top, x - left], zero
        ),
        name="data_pad",
    )
    d = te.compute(
        (P, CI, alpha, alpha),
        lambda p, ci, r, c: padded[p // (nH * nW), ci, p % (nH * nW) // nW * m + r, p % nW * m + c],
        name="input_tile",
    )
    # B^T d B in two passes (rows, then columns): 2 * alpha * nnz(B) products per tile instead of nnz(B)^2
    d_rows = te.compute(
        (alpha, alpha, P, CI), lambda e, c, p, ci: _combine(b_np, e, lambda r: d[p, ci, r, c], dtype), name="data_rows"
    )
    V = te.compute(
        (alpha, alpha, P, CI),
        lambda e, n, p, ci: _combine(b_np, n, lambda c: d_rows[e, c, p, ci], dtype),
        name="data_pack",
    )
    rc = te.reduce_axis((0, CI), name="rc")
    M = te.compute(
        (alpha, alpha, P, CO), lambda e, n, p, co: te.sum(V[e, n, p, rc] * weight[e, n, rc, co], axis=rc), name="bgemm"
    )
    m_rows = te.compute(
        (m, alpha, P, CO), lambda vh, c, p, co: _combine(a_np, vh, lambda r: M[r, c, p, co], dtype), name="inverse_rows"
    )
    Y = te.compute(
        (P, CO, m, m),
        lambda p, co, vh, vw: _combine(a_np, vw, lambda c: m_rows[vh, c, p, co], dtype),
        name="inverse",
    )
    return te.compute(
        (N, CO, OH, OW),
        lambda n, co, h, w: Y[n * nH * nW + h // m * nW + w // m, co, h % m, w % m],
        name=BLOCK,
    )


def conv2d_winograd_compute(
    N: int, CI: int, H: int, W: int, CO: int, pad: int, m: int, dtype: str = "float32"
) -> list[te.Tensor]:
    """``[data[N, CI, H, W], U[alpha, alpha, CI, CO], conv2d_winograd[N, CO, OH, OW]]``."""
    if pad < 0 or min(N, CI, H, W, CO) < 1:
        raise ValueError(f"invalid Winograd conv2d arguments {(N, CI, H, W, CO, pad)}")
    winograd_matrices(m)
    alpha = m + KERNEL - 1
    data = te.placeholder((N, CI, H, W), dtype, name="data")
    weight = te.placeholder((alpha, alpha, CI, CO), dtype, name="weight")
    return [data, weight, conv2d_winograd(data, weight, pad, m)]


def conv2d_winograd_reference(data: np.ndarray, weight: np.ndarray, args: tuple) -> np.ndarray:
    """The convolution the transformed weight stands for: ``g`` recovered by least squares from ``U = G g G^T`` (``G``
    has full column rank), then the direct NCHW reference, which does not share the Winograd algebra it checks."""
    pad, m = int(args[5]), int(args[6])
    _, _, g = winograd_matrices(m)
    g_pinv = np.linalg.pinv(g)
    kernel = np.einsum("ke,enio,ln->oikl", g_pinv, weight.astype(np.float64), g_pinv)
    return conv2d_reference(data, kernel.astype(data.dtype), (0, 0, 0, 0, 0, KERNEL, KERNEL, 1, pad))


def _define_knobs(cfg: Any, CI: int, CO: int, lanes: int) -> None:
    cfg.define_knob("pack_vec", [0, 1] if CI % lanes == 0 else [0])
    cfg.define_knob("tile_co", [c for c in _divisors(CO, 4 * lanes) if c % lanes == 0] or _divisors(CO, lanes))
    cfg.define_knob("pack_par", ["p", "p_ci"])


@template(f"{BLOCK}.x86", reference=conv2d_winograd_reference)
def conv2d_winograd_x86(
    N: int, CI: int, H: int, W: int, CO: int, pad: int, m: int, dtype: str = "float32", space: str = "full"
):
    tensors = conv2d_winograd_compute(N, CI, H, W, CO, pad, m, dtype)
    sch, cfg = start_schedule(tensors, conv2d_flop(N, CI, H, W, CO, KERNEL, KERNEL, 1, pad), space)
    info = _target.cpu_info(_target.current())
    lanes = info.lanes(dtype)
    _define_knobs(cfg, CI, CO, lanes)
    schedule_winograd(sch, cfg, m, info, dtype)
    return sch, tensors


def schedule_winograd(sch: Any, cfg: Any, m: int, info: _target.CpuInfo, dtype: str) -> None:
    """The x86 schedule of ``conv2d_winograd``'s stages (knobs defined by the caller, except the GEMM's)."""
    lanes = info.lanes(dtype)
    # the GEMM first: its padding (if any) adds stages around it, found by place in schedule_gemm
    gemm = sch.get_sblock("bgemm")
    e, n, p, co, rc = sch.get_loops(gemm)
    _gemm.schedule_gemm(
        sch, cfg, gemm, [e, n], p, co, rc, lambda nr: lambda a, b, c, o: (a, b, o // nr, c, o % nr), info, dtype
    )

    # the input transform, per tile and chunk of input channels: a copy of the tile from the padded input, then
    # rows and columns of B^T d B, all in buffers the size of one tile (vectorised over the channel chunk)
    pad = sch.get_sblock("data_pad")
    b, c, *_ = sch.get_loops(pad)
    sch.parallel(sch.fuse(b, c))
    pack = sch.get_sblock("data_pack")
    e, n, p, ci = sch.get_loops(pack)
    chunk = lanes if cfg["pack_vec"].val else 1
    ci0, ci1 = sch.split(ci, [None, chunk])
    sch.reorder(p, ci0, e, n, ci1)
    sch.parallel(sch.fuse(p, ci0) if cfg["pack_par"].val == "p_ci" else p)
    anchor = ci0 if cfg["pack_par"].val == "p" else sch.get_loops(pack)[0]
    rows = sch.get_sblock("data_rows")
    sch.compute_at(rows, anchor)
    tile = sch.get_sblock("input_tile")
    sch.compute_at(tile, anchor)
    depth = 2 if cfg["pack_par"].val == "p" else 1
    _unroll_tile(sch, tile, depth, True)
    _unroll_tile(sch, rows, depth, False)
    sch.unroll(e)
    sch.unroll(n)
    if chunk > 1:
        sch.vectorize(ci1)

    out = sch.get_sblock(BLOCK)
    nn, oc, h, w = sch.get_loops(out)
    tco = cfg["tile_co"].val
    oc0, oc1 = sch.split(oc, [None, tco])
    h0, h1 = sch.split(h, [None, m])
    w0, w1 = sch.split(w, [None, m])
    sch.reorder(nn, oc0, h0, w0, oc1, h1, w1)
    sch.parallel(sch.fuse(nn, oc0, h0))
    inverse = sch.get_sblock("inverse")
    sch.compute_at(inverse, w0)
    rows = sch.get_sblock("inverse_rows")
    sch.compute_at(rows, w0)
    _unroll_tile(sch, rows, 2, False)
    _unroll_tile(sch, inverse, 2, True)
    sch.unroll(h1)
    sch.unroll(w1)


def _unroll_tile(sch: Any, block: Any, depth: int, tile_first: bool) -> None:
    """Unroll a transform stage's two tile axes and put its channel axis innermost, vectorised. ``block`` was
    just computed at a loop ``depth`` deep: its own loops follow, in its axes' order, ``(p, channel, a0, a1)``
    when ``tile_first`` else ``(a0, a1, p, channel)``, with ``p`` (one tile) and a one-channel chunk elided."""
    inner = [loop for loop in sch.get_loops(block)[depth:] if int(sch.get(loop).extent) > 1]
    lane = None
    if len(inner) == 3:
        lane = inner.pop(0 if tile_first else 2)
        sch.reorder(*inner, lane)
    for loop in inner:
        sch.unroll(loop)
    if lane is not None:
        sch.vectorize(lane)
