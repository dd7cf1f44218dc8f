"""What the conformance suites measure on: a small knob task with a recorded (synthetic) table of timings,
and a runner that times any candidate by a cost function, so the suites are fast and deterministic."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import target as _target
from ..measure import BuildResult, MeasureErrorNo, MeasureInput, MeasureOption, MeasureResult, ReplayRunner
from ..measure import measure_option as _measure_option
from ..task import Task, create
from ._templates import MATMUL

__all__ = ["KnobFixture", "knob_fixture", "synthetic_cost", "synthetic_replay_table", "CostFunctionRunner"]

#: seconds each replayed trial costs the tuner's clock (build plus measurement, as recorded)
TRIAL_SECONDS = 0.3


def synthetic_cost(task: Task, index: int) -> float:
    """A smooth, deterministic cost surface over a knob space (seconds per run)."""
    digits = task.config_space.point2knob(index)
    dims = task.config_space.dims
    x = np.asarray(digits, dtype=float) / np.maximum(np.asarray(dims) - 1, 1)
    return 1e-4 * (1.0 + 3.0 * float(np.sum((x - 0.6) ** 2))) * (1.0 + 0.05 * math.sin(index))


def synthetic_replay_table(task: Task) -> dict[tuple[str, object], MeasureResult]:
    """Every config of a knob task measured by ``synthetic_cost``, one in 17 a recorded failure; each costs
    ``TRIAL_SECONDS`` (0.1 s build, 0.2 s run) so time budgets are checked on the tuner's clock."""
    table: dict[tuple[str, object], MeasureResult] = {}
    for i in range(len(task.config_space)):
        if i % 17 == 5:
            table[(task.workload_key, i)] = MeasureResult(
                (), MeasureErrorNo.RUNTIME_DEVICE, 0.2, time.time(), "recorded failure"
            )
        else:
            c = synthetic_cost(task, i)
            table[(task.workload_key, i)] = MeasureResult(
                (c, c), MeasureErrorNo.NO_ERROR, TRIAL_SECONDS, time.time(), build_time=0.1, run_time=0.2, runs=10
            )
    return table


@dataclass(frozen=True)
class KnobFixture:
    """A knob task and its recorded table; ``option()`` is a fresh replay ``MeasureOption`` over the table."""

    task: Task
    table: dict[tuple[str, object], MeasureResult]

    def option(self) -> MeasureOption:
        return _measure_option(runner=ReplayRunner(self.table))


@functools.cache
def knob_fixture(args: tuple = (32, 32, 32, "float32")) -> KnobFixture:
    """The built-in ``adatune.testing/matmul`` task on the host with its synthetic table (made once)."""
    task = create(MATMUL, args, _target.host())
    assert isinstance(task, Task)
    return KnobFixture(task, synthetic_replay_table(task))


class CostFunctionRunner(ReplayRunner):
    """Serves ``cost(candidate)`` seconds for any candidate of any space (no table to enumerate), each trial
    costing the tuner ``trial_seconds``: a replay runner for spaces too large or too new to record."""

    def __init__(self, cost: Callable[[Any], float], trial_seconds: float = 0.2):
        self.cost = cost
        self.trial_seconds = trial_seconds
        self.table = {}
        self.served = 0

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        self.served += len(inputs)
        half = self.trial_seconds / 2
        return [
            MeasureResult(
                (float(self.cost(inp.config)),),
                MeasureErrorNo.NO_ERROR,
                self.trial_seconds,
                time.time(),
                build_time=half,
                run_time=half,
                runs=1,
            )
            for inp in inputs
        ]
