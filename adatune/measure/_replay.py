"""Replay: serve measurements from a recorded table instead of hardware.

Strategies can then be compared over many seeds quickly and deterministically. Each served result keeps
its recorded build and measurement time, and ``done_at`` reports those recorded seconds, so the tuner's
clock advances as it would have on hardware. The table is keyed by (workload key, candidate key).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Sequence

from ._runner import Runner
from ._types import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult

__all__ = ["ReplayRunner"]


class ReplayRunner(Runner):
    """Looks up ``(workload_key, candidate key)`` in recorded results; unknown candidates are errors.

    Keys may be given as ints (knob config indices, as older tables had them); they are compared as strings.
    """

    needs_build = False

    def __init__(self, table: dict[tuple[str, object], MeasureResult]):
        if not table:
            raise ValueError("ReplayRunner needs at least one recorded measurement")
        self.table = {(wk, str(key)): res for (wk, key), res in table.items()}
        self.served = 0

    @classmethod
    def from_records(cls, records: Iterable) -> ReplayRunner:
        """Build the table from ``adatune.records`` entries (the last record of a candidate wins):
        ``ReplayRunner.from_records(adatune.load_from_file(path))``."""
        return cls({(r.workload_key, r.key): r.result for r in records})

    def with_min_converge_coef(self, coef: float | None) -> ReplayRunner:
        """Recorded timings are replayed as they were; the evaluator setting has no effect here."""
        return self

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
            out.append(dataclasses.replace(rec, timestamp=time.time(), extra=dict(rec.extra)))
        return out
