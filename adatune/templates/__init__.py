"""Built-in schedule templates; importing this package registers them with ``adatune.task``.

=====================  ==========================================================  =================
template               arguments                                                   computes
=====================  ==========================================================  =================
``dense.x86/cuda``     ``N, L, M, dtype[, space]``                                 ``A[N,L] @ B[L,M]``
``batch_matmul.*``     ``B, M, N, K, transpose_b ("NN"|"NT"), dtype[, space]``     ``A[B,M,K] @ B``
``conv2d_nchw.*``      ``N, CI, H, W, CO, KH, KW, stride, pad, dtype[, space]``    NCHW conv2d
``conv2d_NCHWc.x86``   ``N, CI, H, W, CO, KH, KW, stride, pad, ic_bn, oc_bn, ...`` NCHW[x]c conv2d
``conv2d_winograd.x86`` ``N, CI, H, W, CO, pad, m, dtype[, space]``                3x3 stride-1, F(m,3)
=====================  ==========================================================  =================

The knobs of each template are listed in its module's docstring. ``space`` is ``"full"`` (the default:
pruned to what fits the target), ``"autotvm"`` (AutoTVM's unpruned space, see ``_spaces``) or, for the x86
conv2d, ``"small"`` (an exhaustively measurable subset). ``adatune.templates.workloads`` names the
standard shapes (``dense-1024``, ``conv2d-resnet18-L6``, ...).
"""

from . import batch_matmul, conv2d, conv2d_cuda, conv2d_nchwc, conv2d_winograd, dense

__all__ = ["dense", "batch_matmul", "conv2d", "conv2d_cuda", "conv2d_nchwc", "conv2d_winograd"]
