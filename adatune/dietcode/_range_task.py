"""A dynamic workload over its sampled extents as one task: DietCode's measure input.

Each micro-kernel is compiled once, shape-generic (T is the kernel's last, scalar argument), and the shared
runner checks and times that one build at every sampled T (``measure_points``), so a candidate is one
``MeasureInput`` and one record, with each T's timings in ``result.extra["points"]``. Task names are
``dietcode-range/<kind>``; the arguments (the workload's JSON form and the sampled T) recreate the task in any
process (``adatune.task.create``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tvm

from .. import target as _target
from ..measure import MeasurePoint
from ..task import ArgSpec, TuningTask, register_task_kind, workload_key
from ._schedule import schedule_microkernel
from ._space import MicroKernel, MicroKernelSpace
from ._task import static_k
from ._workloads import DynamicWorkload

__all__ = ["RANGE_PREFIX", "RangeTask", "arg_specs_at", "seconds_at"]

RANGE_PREFIX = "dietcode-range/"


def seconds_at(result: Any) -> dict[int, float]:
    """Median seconds at each T of a ``RangeTask`` result (empty for a failed candidate)."""
    points = result.extra.get("points", []) if result.ok else []
    return {int(p["at"][0]): float(np.median(p["costs"])) for p in points}


def arg_specs_at(wl: DynamicWorkload, t: int) -> list[ArgSpec]:
    """The kernel's tensor arguments (A, B, C) at extent ``t``."""
    a, b, c = wl.shapes(t)
    return [ArgSpec(a, wl.dtype, False), ArgSpec(b, wl.dtype, False), ArgSpec(c, wl.dtype, True)]


class RangeTask(TuningTask):
    """``workload`` at every T of ``ts``; its candidates are the workload's micro-kernels."""

    def __init__(
        self,
        workload: DynamicWorkload,
        ts: Sequence[int],
        target: _target.TargetLike,
        space: MicroKernelSpace | None = None,
    ):
        lo, hi = workload.t_range
        bad = [t for t in ts if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not lo <= t <= hi]
        if not ts or bad:
            raise ValueError(f"sampled T must be integers in the workload's range [{lo}, {hi}], got {list(ts)!r}")
        self.dynamic = workload
        self.ts = tuple(sorted({int(t) for t in ts}))
        self.name = RANGE_PREFIX + workload.kind
        self.args = (workload.to_json(), list(self.ts))
        self.target = _target.create(target)
        self.workload_key = workload_key(self.name, self.args)
        self.flop = float(sum(workload.flop(t) for t in self.ts))
        self.measure_points = tuple(MeasurePoint((t,), tuple(arg_specs_at(workload, t))) for t in self.ts)
        self.arg_specs = arg_specs_at(workload, self.ts[-1])  # dtypes and roles; shapes differ per point
        self._space = space or MicroKernelSpace(self.target, workload.dtype, static_k(workload))

    @property
    def space(self) -> MicroKernelSpace:
        return self._space

    def scheduled_module(self, candidate: Any) -> tvm.IRModule:
        if not isinstance(candidate, MicroKernel):
            raise TypeError(f"a DietCode task takes MicroKernel candidates, got {type(candidate).__name__}")
        return schedule_microkernel(self.dynamic, candidate).mod

    def unscheduled_module(self) -> tvm.IRModule:
        return tvm.IRModule({"main": self.dynamic.prim_func()})


def _factory(name: str, args: Sequence[Any], target: tvm.target.Target) -> RangeTask:
    if len(args) != 2 or not isinstance(args[1], (list, tuple)):
        raise ValueError(f"{name}: DietCode range task arguments are (workload, [T, ...]), got {args!r}")
    wl = DynamicWorkload.from_json(args[0])
    if RANGE_PREFIX + wl.kind != name:
        raise ValueError(f"task name {name!r} does not match workload kind {wl.kind!r}")
    return RangeTask(wl, [int(t) for t in args[1]], target)


register_task_kind(RANGE_PREFIX, _factory)
