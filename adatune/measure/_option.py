"""``measure_option``: a builder and a runner combined into one thing a tuner calls."""
from __future__ import annotations

import time
from typing import Sequence

from ._builder import Builder, LocalBuilder, NoBuilder
from ._runner import LocalRunner, Runner
from ._types import MeasureInput, MeasureResult

__all__ = ["MeasureOption", "measure_option"]


class MeasureOption:
    """Builds then runs a batch; ``last_batch_seconds`` is the batch's wall-clock (recorded time when replaying)."""

    def __init__(self, builder: Builder, runner: Runner):
        self.builder = builder
        self.runner = runner
        self.last_batch_seconds = 0.0

    def measure(self, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        t0 = time.perf_counter()
        builds = self.builder.build(inputs)
        results = self.runner.run(inputs, builds)
        wall = time.perf_counter() - t0
        self.last_batch_seconds = sum(r.all_cost for r in results) if self.runner.simulated else wall
        return results

    def close(self) -> None:
        self.builder.close()
        self.runner.close()


def measure_option(builder: Builder | None = None, runner: Runner | None = None,
                   min_converge_coef: float | None = None) -> MeasureOption:
    """Combine a builder and a runner (defaults: ``LocalBuilder()``, ``LocalRunner()``).

    ``min_converge_coef`` switches the runner to AdaTune's adaptive evaluator: a candidate's measurement
    stops once the coefficient of variation of its micro-batch throughputs falls under this value.
    """
    runner = runner if runner is not None else LocalRunner()
    if builder is None:
        builder = LocalBuilder() if runner.needs_build else NoBuilder()
    if min_converge_coef is not None:
        runner.set_min_converge_coef(float(min_converge_coef))
    return MeasureOption(builder, runner)
