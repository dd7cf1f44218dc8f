"""Built-in schedule templates; importing this package registers them with ``adatune.task``.

``dense.x86/cuda`` (``N, L, M, dtype[, space]``), ``batch_matmul.*`` (``B, M, N, K, transpose_b, dtype[, space]``),
``conv2d_nchw.*`` (``N, CI, H, W, CO, KH, KW, stride, pad, dtype[, space]``), ``conv2d_NCHWc.x86`` (also ``ic_bn,
oc_bn``) and ``conv2d_winograd.x86`` (``N, CI, H, W, CO, pad, m, dtype[, space]``); each module's docstring lists
its knobs. ``space`` is ``"full"`` (pruned to what fits the target), ``"autotvm"`` (AutoTVM's unpruned space,
``_spaces``) or, for the x86 conv2d, ``"small"``. ``adatune.templates.workloads`` names the standard shapes.
"""

from . import batch_matmul, conv2d, conv2d_cuda, conv2d_nchwc, conv2d_winograd, dense

__all__ = ["dense", "batch_matmul", "conv2d", "conv2d_cuda", "conv2d_nchwc", "conv2d_winograd"]
