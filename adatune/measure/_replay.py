"""Replay: serve measurements from a recorded table instead of hardware.

Strategies can then be compared over many seeds quickly and deterministically. Each served result keeps
its recorded build and measurement time, so the tuner's clock advances as it would have on hardware.
"""
from __future__ import annotations

import time
from typing import Iterable, Sequence

from ._runner import Runner
from ._types import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult

__all__ = ["ReplayRunner"]


class ReplayRunner(Runner):
    """Looks up ``(workload_key, config index)`` in recorded results; unknown configs are errors."""

    simulated = True
    needs_build = False

    def __init__(self, table: dict[tuple[str, int], MeasureResult]):
        if not table:
            raise ValueError("ReplayRunner needs at least one recorded measurement")
        self.table = table
        self.served = 0

    @classmethod
    def from_records(cls, records: Iterable) -> "ReplayRunner":
        """Build the table from ``adatune.records`` entries (the last record of a config wins)."""
        return cls({(r.workload_key, r.config_index): r.result for r in records})

    @classmethod
    def from_file(cls, path: str) -> "ReplayRunner":
        from ..records import load_from_file

        return cls.from_records(load_from_file(path))

    def set_min_converge_coef(self, coef: float | None) -> None:
        """Recorded timings are replayed as they were; the evaluator setting has no effect here."""

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        out = []
        for inp in inputs:
            rec = self.table.get((inp.task.workload_key, inp.config.index))
            if rec is None:
                out.append(MeasureResult((), MeasureErrorNo.UNKNOWN_ERROR, 0.0, time.time(),
                                         f"config {inp.config.index} is not in the recorded table"))
                continue
            self.served += 1
            out.append(MeasureResult(rec.costs, rec.error_no, rec.all_cost, time.time(), rec.error_msg,
                                     rec.build_time, rec.run_time, rec.runs, rec.cv, dict(rec.extra)))
        return out
