"""f_MK's inputs: the features of a micro-kernel's program, as TVM extracts them, or hand-made ones.

The program is the workload scheduled with the kernel at the smallest T one tile covers without padding
(``unit_extent``): one row of tiles, what every T runs repeatedly. TVM's ``PerStoreFeature`` rows are pooled by
``aggregate_store_features`` as trace search does, and cached per kernel. ``HandFeatures`` (tile arithmetic) is the
baseline, ``DietCodeTuner(features="hand")``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.arg_info import ArgInfo

from ..codegen.tensor_intrinsics import import_tensor_intrinsics
from ..trace._features import StoreFeatures
from ._schedule import schedule_microkernel
from ._space import MicroKernel, MicroKernelSpace
from ._workloads import DynamicWorkload

__all__ = ["FEATURE_KINDS", "KernelFeatures", "HandFeatures", "ProgramFeatures", "kernel_features", "unit_extent"]

FEATURE_KINDS = ("program", "hand")


class KernelFeatures(Protocol):
    """Shape-free rows describing micro-kernels (one row per kernel)."""

    def __call__(self, kernels: Sequence[MicroKernel]) -> np.ndarray: ...


def unit_extent(wl: DynamicWorkload, mk: MicroKernel) -> int:
    """The least T whose GEMM the kernel tiles exactly: one row tile (and, where T is also the reduction, whole
    ``kt`` steps)."""
    if wl.kind == "bmm_nn":
        return math.lcm(mk.mt, mk.kt)
    return mk.mt


class HandFeatures:
    """The space's own hand-made tile features (``MicroKernelSpace.featurize``)."""

    def __init__(self, space: MicroKernelSpace):
        self.space = space

    def __call__(self, kernels: Sequence[MicroKernel]) -> np.ndarray:
        return np.asarray(self.space.featurize(kernels), dtype=np.float64)


class ProgramFeatures:
    """Pooled ``PerStoreFeature`` rows of each kernel's program at its unit extent (see the module docstring)."""

    def __init__(self, workload: DynamicWorkload, target: tvm.target.Target):
        self.workload = workload
        self.target = target
        self._extract = StoreFeatures()
        import_tensor_intrinsics()
        self._context = ms.TuneContext(
            mod=tvm.IRModule({"main": workload.prim_func()}), target=target, task_name="main", num_threads=1
        )
        self._rows: dict[str, np.ndarray] = {}

    @property
    def width(self) -> int:
        return self._extract.width

    def _row(self, mk: MicroKernel) -> np.ndarray:
        func = schedule_microkernel(self.workload, mk).mod["main"]
        func = func.specialize({func.params[3]: unit_extent(self.workload, mk)})
        candidate = ms.MeasureCandidate(tvm.s_tir.Schedule(tvm.IRModule({"main": func})), ArgInfo.from_prim_func(func))
        return self._extract(self._context, [candidate])[0]

    def __call__(self, kernels: Sequence[MicroKernel]) -> np.ndarray:
        for mk in kernels:
            if mk.key not in self._rows:
                self._rows[mk.key] = self._row(mk)
        if not kernels:
            return np.zeros((0, self.width))
        return np.stack([self._rows[mk.key] for mk in kernels])


def kernel_features(kind: str, space: MicroKernelSpace, workload: DynamicWorkload) -> KernelFeatures:
    """The extractor named ``kind`` (one of ``FEATURE_KINDS``)."""
    if kind == "program":
        return ProgramFeatures(workload, space.target)
    if kind == "hand":
        return HandFeatures(space)
    raise ValueError(f"unknown micro-kernel features {kind!r}; use one of {FEATURE_KINDS}")
