"""``measure_option``: a builder and a runner combined into one thing a tuner calls."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ._builder import Builder, LocalBuilder, NoBuilder
from ._runner import LocalRunner, Runner
from ._types import MeasureBatch, MeasureInput

__all__ = ["MeasureOption", "measure_option"]


class MeasureOption:
    """Builds then runs a batch and returns a ``MeasureBatch`` (results plus the batch's seconds).

    The builder is told the runner's device limits first (AutoTVM's runner-to-builder handshake), so a
    candidate the device could not launch is rejected before it is compiled.
    """

    def __init__(self, builder: Builder, runner: Runner):
        self.builder = builder
        self.runner = runner

    def measure(self, inputs: Sequence[MeasureInput]) -> MeasureBatch:
        if not inputs:
            return MeasureBatch([], 0.0, 0.0, [])
        limits = self.runner.device_limits(inputs[0].task.target)
        t0 = time.perf_counter()
        builds = self.builder.build(inputs, limits)
        t1 = time.perf_counter()
        results = self.runner.run(inputs, builds)
        t2 = time.perf_counter()
        build_s, run_s = t1 - t0, t2 - t1
        done = [build_s + d for d in self.runner.done_at(results, run_s)]
        return MeasureBatch(list(results), build_s, done[-1] - build_s if done else run_s, done)

    def close(self) -> None:
        self.builder.close()
        self.runner.close()


def measure_option(
    builder: Builder | None = None, runner: Runner | None = None, min_converge_coef: float | None = None
) -> MeasureOption:
    """Combine a builder and a runner (defaults: ``LocalBuilder()``, ``LocalRunner()``). ``min_converge_coef``
    switches to AdaTune's adaptive evaluator, measuring with an adaptive copy of the runner passed.
    """
    runner = runner if runner is not None else LocalRunner()
    if builder is None:
        builder = LocalBuilder() if runner.needs_build else NoBuilder()
    if min_converge_coef is not None:
        runner = runner.with_min_converge_coef(float(min_converge_coef))
    return MeasureOption(builder, runner)
