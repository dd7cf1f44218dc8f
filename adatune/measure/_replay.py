"""Replay: serve measurements from a recorded table, keyed by (workload key, candidate key), instead of hardware, so
strategies can be compared over many seeds quickly and deterministically; ``done_at`` reports the recorded build and run
seconds, so the tuner's clock advances as on hardware. With ``min_converge_coef`` each candidate is cut where AdaTune's
adaptive evaluator would have stopped on its recorded micro-batches (``adatune.measure.evaluator.adaptive_replay``)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence

from ._runner import Runner
from ._types import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult
from .evaluator import EvaluatorConfig, adaptive_replay

__all__ = ["ReplayRunner"]


class ReplayRunner(Runner):
    """Looks up ``(workload_key, candidate key)`` in recorded results; unknown candidates are errors. Keys may be given
    as ints (knob config indices); they are compared as strings."""

    needs_build = False

    def __init__(
        self,
        table: Mapping[tuple[str, object], MeasureResult],
        min_converge_coef: float | None = None,
        min_micro_batches: int = EvaluatorConfig.min_micro_batches,
    ):
        if not table:
            raise ValueError("ReplayRunner needs at least one recorded measurement")
        # the same checks as on hardware (a cap that leaves room to decide)
        EvaluatorConfig(
            2, 1 + min_micro_batches, min_converge_coef=min_converge_coef, min_micro_batches=min_micro_batches
        )
        self.table: dict[tuple[str, object], MeasureResult] = {(wk, str(key)): res for (wk, key), res in table.items()}
        self.min_converge_coef = min_converge_coef
        self.min_micro_batches = min_micro_batches
        self.served = 0

    @classmethod
    def from_records(cls, records: Iterable) -> ReplayRunner:
        """A runner over ``adatune.records`` entries (e.g. ``load_from_file(path)``); a candidate's last record wins."""
        return cls({(r.workload_key, r.key): r.result for r in records})

    def with_min_converge_coef(self, coef: float | None) -> ReplayRunner:
        """The same table served through the adaptive evaluator with ``coef`` (None: as recorded)."""
        return ReplayRunner(self.table, coef, self.min_micro_batches)

    def _adaptive(self, rec: MeasureResult) -> MeasureResult:
        """``rec`` as the adaptive evaluator would have left it: its first micro-batches, their runs and CV,
        and run seconds less the timed seconds of the batches it did not need."""
        if self.min_converge_coef is None or not rec.ok:
            return rec
        runs = rec.batch_runs
        costs, kept, cv = adaptive_replay(rec.costs, runs, self.min_converge_coef, self.min_micro_batches)
        skipped = sum(c * r for c, r in zip(rec.costs[len(costs) :], runs[len(costs) :]))
        run_time = max(0.0, rec.run_time - skipped)
        return dataclasses.replace(
            rec,
            costs=tuple(costs),
            runs=sum(kept),
            cv=cv,
            run_time=run_time,
            all_cost=rec.build_time + run_time,
            extra={**rec.extra, "batch_runs": kept, "replayed_runs": rec.runs},
        )

    def done_at(self, results: Sequence[MeasureResult], run_seconds: float) -> list[float]:
        """Recorded seconds: each candidate's recorded build and run time, one after another."""
        out, acc = [], 0.0
        for r in results:
            acc += r.all_cost
            out.append(acc)
        return out

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        out = []
        for inp in inputs:
            rec = self.table.get((inp.task.workload_key, inp.config.key))
            if rec is None:
                msg = f"candidate {inp.config.key} is not in the recorded table"
                out.append(MeasureResult((), MeasureErrorNo.UNKNOWN_ERROR, 0.0, time.time(), msg))
                continue
            self.served += 1
            out.append(dataclasses.replace(self._adaptive(rec), timestamp=time.time()))
        return out
