"""Batched matrix multiplication: ``C[b, i, j] = sum_k A[b, i, k] * B'[b, k, j]``.

``transpose_b="NN"`` takes ``B[b, k, j]`` (BERT's ``attn @ V``), ``"NT"`` ``B[b, j, k]`` (``Q @ K^T``). Both reuse
the dense kernels with the batch loop fused outermost: ``batch_matmul.x86`` packs B to ``[b, j // nr, k, j % nr]``
from either layout (so NT costs no strided gathers); ``batch_matmul.cuda`` binds the batch to ``blockIdx.z``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tvm
from tvm import te

from .. import target as _target
from ..task import template
from . import _gemm
from ._spaces import start_schedule
from .dense import define_gemm_cuda, schedule_gemm_cuda

__all__ = ["batch_matmul_compute", "batch_matmul_x86", "batch_matmul_cuda", "batch_matmul_reference"]

_LAYOUTS = ("NN", "NT")


def batch_matmul_compute(
    B: int, M: int, N: int, K: int, transpose_b: str = "NN", dtype: str = "float32"
) -> list[te.Tensor]:
    if transpose_b not in _LAYOUTS:
        raise ValueError(f"transpose_b must be 'NN' or 'NT', got {transpose_b!r}")
    a = te.placeholder((B, M, K), dtype, name="A")
    k = te.reduce_axis((0, K), name="k")
    if transpose_b == "NN":
        b = te.placeholder((B, K, N), dtype, name="B")
        c = te.compute((B, M, N), lambda z, i, j: te.sum(a[z, i, k] * b[z, k, j], axis=k), name="C")
    else:
        b = te.placeholder((B, N, K), dtype, name="B")
        c = te.compute((B, M, N), lambda z, i, j: te.sum(a[z, i, k] * b[z, j, k], axis=k), name="C")
    return [a, b, c]


def batch_matmul_reference(a: np.ndarray, b: np.ndarray, args: tuple) -> np.ndarray:
    """``a @ b`` or ``a @ b^T`` as the task's ``transpose_b`` says (square shapes cannot tell)."""
    transpose_b = args[4] if len(args) > 4 else "NN"
    return np.matmul(a, b.transpose(0, 2, 1) if transpose_b == "NT" else b)


def _flop(B: int, M: int, N: int, K: int) -> float:
    return 2.0 * B * M * N * K


@template("batch_matmul.x86", reference=batch_matmul_reference)
def batch_matmul_x86(
    B: int, M: int, N: int, K: int, transpose_b: str = "NN", dtype: str = "float32", space: str = "full"
):
    tensors = batch_matmul_compute(B, M, N, K, transpose_b, dtype)
    sch, cfg = start_schedule(tensors, _flop(B, M, N, K), space)
    block = sch.get_sblock("C")
    z, i, j, k = sch.get_loops(block)
    nn = transpose_b == "NN"

    def pack(nr: int) -> Callable[..., tuple]:
        """B's layout (``[b, k, j]`` or ``[b, j, k]``) to the packed ``[b, j // nr, k, j % nr]``."""
        return lambda zz, p, q: (zz, (q if nn else p) // nr, p if nn else q, (q if nn else p) % nr)

    _gemm.schedule_gemm(sch, cfg, block, [z], i, j, k, pack, _target.cpu_info(_target.current()), dtype)
    return sch, tensors


@template("batch_matmul.cuda", reference=batch_matmul_reference)
def batch_matmul_cuda(
    B: int, M: int, N: int, K: int, transpose_b: str = "NN", dtype: str = "float32", space: str = "full"
):
    tensors = batch_matmul_compute(B, M, N, K, transpose_b, dtype)
    sch, cfg = start_schedule(tensors, _flop(B, M, N, K), space)
    define_gemm_cuda(cfg, M, N, K, tvm.DataType(dtype).bits // 8)
    block = sch.get_sblock("C")
    z, i, j, k = sch.get_loops(block)
    schedule_gemm_cuda(sch, cfg, block, [z], i, j, k)
    return sch, tensors
