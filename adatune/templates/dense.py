"""Dense (matrix multiplication) templates: ``C[N, M] = A[N, L] @ B[L, M]``.

Both operands are row-major, the weight already ``[L, M]``, so ``numpy`` and ``torch.matmul`` compute exactly the
same thing; ``batch_matmul`` covers ``X W^T`` (``transpose_b="NT"``).

- ``dense.x86``: packed, register-blocked GEMM (``_gemm.schedule_gemm``). Knobs: ``tile_y``, ``tile_x`` (3-way),
  ``tile_k`` (2-way, inner factor unrolled), ``order``, ``pack_b`` (once, or per parallel tile),
  ``auto_unroll_max_step``, and for K >= 1024 ``k_block`` (GotoBLAS's kc, so tall cache tiles fit L2); limited by
  ``adatune.codegen.x86``.
- ``dense.cuda``: AutoTVM-style shared-memory tiling. Knobs: ``tile_y``/``tile_x`` (4-way: blockIdx, vthread,
  threadIdx, inner), ``tile_k``, ``auto_unroll_max_step``, ``unroll_explicit``; filtered to what a GPU launches.
"""

from __future__ import annotations

import tvm
from tvm import te

from .. import target as _target
from ..task import template
from . import _cuda, _gemm
from ._spaces import start_schedule

__all__ = ["dense_compute", "dense_x86", "dense_cuda", "dense_reference"]


def dense_compute(N: int, L: int, M: int, dtype: str = "float32") -> list[te.Tensor]:
    A = te.placeholder((N, L), dtype, name="A")
    B = te.placeholder((L, M), dtype, name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


def dense_reference(a, b):  # noqa: ANN001, ANN201 - numpy arrays in, numpy array out
    return a @ b


@template("dense.x86", reference=dense_reference)
def dense_x86(N: int, L: int, M: int, dtype: str = "float32", space: str = "full"):
    """Packed GEMM: B is repacked to ``[M // nr, L, nr]`` so the micro-kernel streams it contiguously."""
    tensors = dense_compute(N, L, M, dtype)
    sch, cfg = start_schedule(tensors, 2.0 * N * L * M, space)
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    _gemm.schedule_gemm(
        sch,
        cfg,
        block,
        [],
        i,
        j,
        k,
        lambda nr: lambda kk, jj: (jj // nr, kk, jj % nr),
        _target.cpu_info(_target.current()),
        dtype,
    )
    return sch, tensors


def define_gemm_cuda(cfg, y_extent: int, x_extent: int, k_extent: int, bytes_per_elem: int) -> None:  # noqa: ANN001
    """Knobs and launch-limit filters shared by ``dense.cuda`` and ``batch_matmul.cuda``."""
    cfg.define_split("tile_y", y_extent, num_outputs=4)
    cfg.define_split("tile_x", x_extent, num_outputs=4)
    cfg.define_split("tile_k", k_extent, num_outputs=2)
    _cuda.define_unroll(cfg)
    min_threads = min(_cuda.MIN_THREADS, y_extent * x_extent)

    def launchable(c) -> bool:  # noqa: ANN001
        y, x, kk = c["tile_y"].size, c["tile_x"].size, c["tile_k"].size[-1]
        threads = y[2] * x[2]
        shared = kk * (y[1] * y[2] * y[3] + x[1] * x[2] * x[3]) * bytes_per_elem
        acc = y[1] * y[3] * x[1] * x[3]
        # written with & so the space evaluates it on arrays of configs at once (space._filter)
        return (
            (min_threads <= threads)
            & (threads <= _cuda.MAX_THREADS)
            & (shared <= _cuda.SHARED_BYTES)
            & (acc <= _cuda.MAX_ACCUMULATORS)
        )

    cfg.multi_filter(launchable)


def schedule_gemm_cuda(sch, cfg, block, batch: list, i, j, k) -> None:  # noqa: ANN001
    """Tile ``C[.., i, j]`` over blocks/vthreads/threads, stage A and B tiles in shared memory once per
    ``tile_k`` step (fetched cooperatively by all threads), accumulate in registers."""
    by, vy, ty, yi = cfg["tile_y"].apply(sch, i)
    bx, vx, tx, xi = cfg["tile_x"].apply(sch, j)
    ko, ki = cfg["tile_k"].apply(sch, k)
    sch.reorder(*batch, by, bx, vy, vx, ty, tx, ko, ki, yi, xi)
    if batch:
        sch.bind(sch.fuse(*batch), "blockIdx.z")
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(vy, "vthread.y")
    sch.bind(vx, "vthread.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    acc = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(acc, tx)
    threads = [cfg["tile_y"].size[2], cfg["tile_x"].size[2]]
    for idx in (0, 1):
        shared = sch.cache_read(block, idx, "shared")
        sch.compute_at(shared, ko)
        _cuda.cooperative_fetch(sch, shared, ko, threads)
    sch.decompose_reduction(block, ko)
    _cuda.apply_unroll(sch, cfg)


@template("dense.cuda", reference=dense_reference)
def dense_cuda(N: int, L: int, M: int, dtype: str = "float32", space: str = "full"):
    tensors = dense_compute(N, L, M, dtype)
    sch, cfg = start_schedule(tensors, 2.0 * N * L * M, space)
    define_gemm_cuda(cfg, N, M, L, tvm.DataType(dtype).bits // 8)
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    schedule_gemm_cuda(sch, cfg, block, [], i, j, k)
    return sch, tensors
