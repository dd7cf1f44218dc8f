"""A dynamic workload at one extent T as an adatune task (``dietcode/<kind>``, args the workload's JSON and T): the
shape-generic kernel specialised to T, so the standard builder and runner can measure it and records recreate it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tvm

from .. import target as _target
from ..measure.device_limits import DeviceLimits
from ..task import ArgSpec, TuningTask, register_task_kind, workload_key
from ._schedule import schedule_microkernel
from ._space import MicroKernel, MicroKernelSpace
from ._workloads import DynamicWorkload

__all__ = ["PREFIX", "DynamicGemmTask", "MicroKernelTask", "arg_specs_at", "microkernel_space", "static_k"]

PREFIX = "dietcode/"


def static_k(wl: DynamicWorkload) -> int:
    """The reduction depth the space sizes panels for (the range's top when the reduction is T)."""
    _, _, _, k = wl.gemm_extents(wl.t_range[1])
    return k


def microkernel_space(
    wl: DynamicWorkload,
    target: _target.TargetLike,
    split_k: Sequence[int] | None = None,
    device_limits: DeviceLimits | None = None,
    interleave: Sequence[bool] = (False,),
    smem: Sequence[str] | None = None,
) -> MicroKernelSpace:
    """The micro-kernel space of ``wl`` on ``target``, sized for its reduction; ``split_k`` (CUDA; None: the
    space's default) applies where the reduction is fixed, and a reduction over T (bmm NN) takes none."""
    parts = (1,) if split_k is not None and wl.dynamic_axes()[2] else split_k
    smem = smem if wl.kind == "bmm_nt" else ("",)  # B is k-major as read elsewhere (None: the space's default)
    return MicroKernelSpace(
        _target.create(target),
        wl.dtype,
        static_k(wl),
        device_limits,
        wl.kind,
        split_k=parts,
        interleave=interleave,
        smem=smem,
    )


def arg_specs_at(wl: DynamicWorkload, t: int) -> list[ArgSpec]:
    """The kernel's tensor arguments (A, B, C) at extent ``t``."""
    a, b, c = wl.shapes(t)
    return [ArgSpec(a, wl.dtype, False), ArgSpec(b, wl.dtype, False), ArgSpec(c, wl.dtype, True)]


class DynamicGemmTask(TuningTask):
    """What DietCode's tasks share: a dynamic workload, its target and its micro-kernel space, and a
    candidate's kernel over the symbolic T (the per-T task specialises it, the range task keeps it)."""

    def __init__(
        self,
        workload: DynamicWorkload,
        name: str,
        args: tuple,
        target: _target.TargetLike,
        space: MicroKernelSpace | None,
    ):
        self.dynamic = workload
        self.name, self.args = name, args
        self.target = _target.create(target)
        self.workload_key = workload_key(self.name, self.args)
        self._space = space or microkernel_space(workload, self.target)

    @property
    def space(self) -> MicroKernelSpace:
        return self._space

    def kernel_module(self, candidate: Any, align: int = 1) -> tvm.IRModule:
        """The candidate's micro-kernel for every T (T is the PrimFunc's fourth parameter), or for every multiple
        of ``align``."""
        if not isinstance(candidate, MicroKernel):
            raise TypeError(f"a DietCode task takes MicroKernel candidates, got {type(candidate).__name__}")
        return schedule_microkernel(self.dynamic, candidate, align).mod


class MicroKernelTask(DynamicGemmTask):
    """``workload`` at ``T = t``; its candidates are the workload's micro-kernels."""

    def __init__(
        self, workload: DynamicWorkload, t: int, target: _target.TargetLike, space: MicroKernelSpace | None = None
    ):
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1:
            raise ValueError(f"T must be a positive integer, got {t!r}")
        self.t = int(t)
        super().__init__(workload, PREFIX + workload.kind, (workload.to_json(), self.t), target, space)
        self.flop = workload.flop(self.t)
        self.arg_specs = arg_specs_at(workload, self.t)

    def scheduled_module(self, candidate: Any) -> tvm.IRModule:
        func = self.kernel_module(candidate)["main"]
        return tvm.IRModule({"main": func.specialize({func.params[3]: self.t})})

    def unscheduled_module(self) -> tvm.IRModule:
        func = self.dynamic.prim_func()
        return tvm.IRModule({"main": func.specialize({func.params[3]: self.t})})

    def reference_outputs(self, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
        return [self.dynamic.reference(inputs[0], inputs[1])]


def _factory(name: str, args: Sequence[Any], target: tvm.target.Target) -> MicroKernelTask:
    if len(args) != 2:
        raise ValueError(f"{name}: DietCode task arguments are (workload, T), got {args!r}")
    wl = DynamicWorkload.from_json(args[0])
    if PREFIX + wl.kind != name:
        raise ValueError(f"task name {name!r} does not match workload kind {wl.kind!r}")
    return MicroKernelTask(wl, int(args[1]), target)


register_task_kind(PREFIX, _factory)
