"""A dynamic workload over its sampled extents as one task: DietCode's measure input.

Each micro-kernel is compiled once, T its last scalar argument, and the shared runner times that build at every
sampled T (``measure_points``): one ``MeasureInput`` and one record per kernel, each T's timings in
``result.extra["points"]``. Tasks are ``dietcode-range/<kind>``, recreated from their arguments in any process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tvm

from .. import target as _target
from ..measure import MeasurePoint
from ..task import register_task_kind
from ._space import MicroKernelSpace
from ._task import DynamicGemmTask, arg_specs_at
from ._workloads import DynamicWorkload

__all__ = ["RANGE_PREFIX", "RangeTask", "seconds_at"]

RANGE_PREFIX = "dietcode-range/"


def seconds_at(result: Any) -> dict[int, float]:
    """Median seconds at each T of a ``RangeTask`` result (empty for a failed candidate)."""
    points = result.extra.get("points", []) if result.ok else []
    return {int(p["at"][0]): float(np.median(p["costs"])) for p in points}


class RangeTask(DynamicGemmTask):
    """``workload`` at every T of ``ts``; its candidates are the workload's micro-kernels, or with ``align > 1``
    their aligned versions (``schedule_microkernel(wl, mk, align)``; every T must then be a multiple of it), which
    is how the tuner times a version against its kernel before deploying it."""

    def __init__(
        self,
        workload: DynamicWorkload,
        ts: Sequence[int],
        target: _target.TargetLike,
        space: MicroKernelSpace | None = None,
        align: int = 1,
    ):
        lo, hi = workload.t_range
        bad = [t for t in ts if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not lo <= t <= hi]
        if not ts or bad:
            raise ValueError(f"sampled T must be integers in the workload's range [{lo}, {hi}], got {list(ts)!r}")
        if isinstance(align, bool) or not isinstance(align, (int, np.integer)) or align < 1:
            raise ValueError(f"align must be a positive integer, got {align!r}")
        if any(int(t) % align for t in ts):
            raise ValueError(f"an aligned version (align={align}) runs only at multiples of it, got T {list(ts)!r}")
        self.ts = tuple(sorted({int(t) for t in ts}))
        self.align = int(align)
        args: tuple = (workload.to_json(), list(self.ts)) + ((self.align,) if self.align > 1 else ())
        super().__init__(workload, RANGE_PREFIX + workload.kind, args, target, space)
        self.flop = float(sum(workload.flop(t) for t in self.ts))
        self.measure_points = tuple(MeasurePoint((t,), tuple(arg_specs_at(workload, t))) for t in self.ts)
        self.arg_specs = arg_specs_at(workload, self.ts[-1])  # dtypes and roles; shapes differ per point

    def scheduled_module(self, candidate: Any) -> tvm.IRModule:
        return self.kernel_module(candidate, self.align)

    def unscheduled_module(self) -> tvm.IRModule:
        return tvm.IRModule({"main": self.dynamic.prim_func()})


def _factory(name: str, args: Sequence[Any], target: tvm.target.Target) -> RangeTask:
    if len(args) not in (2, 3) or not isinstance(args[1], (list, tuple)):
        raise ValueError(f"{name}: DietCode range task arguments are (workload, [T, ...][, align]), got {args!r}")
    wl = DynamicWorkload.from_json(args[0])
    if RANGE_PREFIX + wl.kind != name:
        raise ValueError(f"task name {name!r} does not match workload kind {wl.kind!r}")
    return RangeTask(wl, [int(t) for t in args[1]], target, align=int(args[2]) if len(args) == 3 else 1)


register_task_kind(RANGE_PREFIX, _factory)
