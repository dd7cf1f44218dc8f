"""Test flop calculation

Ported from apache/tvm v0.18.0 ``tests/python/autotvm/test_autotvm_flop_calculator.py`` (Apache-2.0). AutoTVM
counted a TE schedule's FLOPs with ``compute_flop(s)``; adatune counts them when a task is created (the
template's ``cfg.add_flop``, else TVM's TIR estimate), so each computation here is a template and the
assertions read ``task.flop``. ``test_move`` is not ported: AutoTVM raises ``RuntimeError`` for a computation
without arithmetic, while an adatune task gets ``flop == 0``.
"""

import numpy as np
import tvm
from tvm import te

import adatune


def random_dtypes():
    """Return pair of (input, accumulator) dtypes"""
    candidates = [("float32", "float32"), ("float16", "float32"), ("int8", "int32")]
    return candidates[np.random.choice(len(candidates))]


def _conv(N, H, W, CO, CI, KH, KW, input_dtype, acc_dtype):
    D = te.placeholder((N, CI, H, W), dtype=input_dtype)
    K = te.placeholder((CO, CI, KH, KW), dtype=input_dtype)

    KH = min(H, KH)
    KW = min(W, KW)

    ci = te.reduce_axis((0, CI))
    kh = te.reduce_axis((0, KH))
    kw = te.reduce_axis((0, KW))

    OH = (H - KH) + 1
    OW = (W - KW) + 1

    C = te.compute(
        (N, CO, OH, OW),
        lambda n, co, h, w: te.sum(
            D[n][ci][h][w].astype(acc_dtype) * K[co][ci][h][w].astype(acc_dtype),
            axis=[ci, kh, kw],
        ),
    )
    return [D, K, C]


def _pack_gemm(N, L, M, input_dtype, acc_dtype):
    A = te.placeholder((N, L), dtype=input_dtype)
    B = te.placeholder((M, L), dtype=input_dtype)
    k = te.reduce_axis((0, L))

    bn = 4
    idxd = tvm.tirx.indexdiv
    idxm = tvm.tirx.indexmod

    A_pack = te.compute((N // bn, L, bn), lambda i, j, k: A[i * bn + k][j])
    B_pack = te.compute((M // bn, L, bn), lambda i, j, k: B[i * bn + k][j])
    C_pack = te.compute(
        (N // bn, M // bn, bn, bn),
        lambda i, j, ii, jj: te.sum(A_pack[i, k, ii].astype(acc_dtype) * B_pack[j, k, jj].astype(acc_dtype), axis=[k]),
    )
    C = te.compute((N, M), lambda i, j: C_pack[idxd(i, bn)][idxd(j, bn)][idxm(i, bn)][idxm(j, bn)])
    return [A, B, C]


def _outer_dot(N, M, input_dtype, acc_dtype):
    A = te.placeholder((N,), dtype=input_dtype)
    B = te.placeholder((M,), dtype=input_dtype)

    C = te.compute((N, M), lambda i, j: A[i].astype(acc_dtype) * B[j].astype(acc_dtype))
    return [A, B, C]


def _max_pool(N, H, W, CO, CI, KH, KW, input_dtype):
    D = te.placeholder((N, CI, H, W), dtype=input_dtype)

    KH = min(H, KH)
    KW = min(W, KW)

    kh = te.reduce_axis((0, KH))
    kw = te.reduce_axis((0, KW))

    OH = (H - KH) + 1
    OW = (W - KW) + 1

    C = te.compute((N, CO, OH, OW), lambda n, co, h, w: tvm.te.max(D[n][co][h + kh][w + kw], axis=[kh, kw]))
    return [D, C]


def _average_pool(N, H, W, CO, CI, KH, KW, input_dtype, acc_dtype):
    D = te.placeholder((N, CI, H, W), dtype=input_dtype)

    KH = min(H, KH)
    KW = min(W, KW)

    kh = te.reduce_axis((0, KH))
    kw = te.reduce_axis((0, KW))

    OH = (H - KH) + 1
    OW = (W - KW) + 1

    C = te.compute(
        (N, CO, OH, OW),
        lambda n, co, h, w: te.sum(te.div(D[n][co][h + kh][w + kw].astype(acc_dtype), (KW * KH)), axis=[kh, kw]),
    )
    return [D, C]


_COMPUTES = {
    "conv": _conv,
    "pack_gemm": _pack_gemm,
    "outer_dot": _outer_dot,
    "max_pool": _max_pool,
    "average_pool": _average_pool,
}

if "testing/flop" not in adatune.task.registered_templates():

    @adatune.template("testing/flop")
    def flop_template(kind, *args):
        """The computation unscheduled: only its FLOP count matters here."""
        tensors = _COMPUTES[kind](*args)
        return tvm.s_tir.Schedule(te.create_prim_func(tensors)), tensors


def compute_flop(kind, *args):
    return adatune.task.create("testing/flop", (kind, *args), "llvm").flop


def test_conv():
    for _i in range(5):
        N, H, W, CO, CI, KH, KW = [np.random.randint(10, 32) for _ in range(7)]
        (input_dtype, acc_dtype) = random_dtypes()
        flop = compute_flop("conv", N, H, W, CO, CI, KH, KW, input_dtype, acc_dtype)

        KH = min(H, KH)
        KW = min(W, KW)
        OH = (H - KH) + 1
        OW = (W - KW) + 1

        assert flop == 2 * N * CO * OH * OW * CI * KH * KW


def test_pack_gemm():
    for _i in range(5):
        N, L, M = [np.random.randint(10, 128) * 4 for _ in range(3)]
        (input_dtype, acc_dtype) = random_dtypes()
        assert compute_flop("pack_gemm", N, L, M, input_dtype, acc_dtype) == 2 * N * L * M


def test_outer_dot():
    for _i in range(5):
        N, M = [np.random.randint(10, 128) * 4 for _ in range(2)]
        (input_dtype, acc_dtype) = random_dtypes()
        assert compute_flop("outer_dot", N, M, input_dtype, acc_dtype) == N * M


def test_max_pool():
    for _i in range(5):
        N, H, W, CO, CI, KH, KW = [np.random.randint(10, 32) for _ in range(7)]
        (input_dtype, _) = random_dtypes()
        flop = compute_flop("max_pool", N, H, W, CO, CI, KH, KW, input_dtype)

        KH = min(H, KH)
        KW = min(W, KW)
        OH = (H - KH) + 1
        OW = (W - KW) + 1

        assert flop == N * CO * OH * OW * KH * KW


def test_average_pool():
    for _i in range(5):
        N, H, W, CO, CI, KH, KW = [np.random.randint(10, 32) for _ in range(7)]
        (input_dtype, acc_dtype) = random_dtypes()
        flop = compute_flop("average_pool", N, H, W, CO, CI, KH, KW, input_dtype, acc_dtype)

        KH = min(H, KH)
        KW = min(W, KW)
        OH = (H - KH) + 1
        OW = (W - KW) + 1

        assert flop == 2 * N * CO * OH * OW * KH * KW
