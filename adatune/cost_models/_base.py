"""The cost-model interface (AutoTVM's ``CostModel``): learn from measured candidates, score unmeasured ones. Models
see feature matrices only, so one serves every candidate kind; made with a task, they also featurize candidates.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..options import Configurable, Option
from ..records import as_records
from ..task import TuningTask
from .features import FEATURE_TYPES, FeatureExtractor

__all__ = ["CostModel", "FEATURE_TYPE", "NUM_THREADS"]

FEATURE_TYPE = Option.declare(
    "feature_type", str, "cost-model features: knob values or loop (itervar) features", choices=FEATURE_TYPES
)
NUM_THREADS = Option.declare("num_threads", int, "cost-model threads (none: all cores)", minimum=1)


class CostModel(Configurable, abc.ABC):
    """Scores candidates from their features; higher scores mean faster candidates."""

    features: FeatureExtractor | None = None

    @abc.abstractmethod
    def fit(self, xs: Any, ys: Sequence[float], plan_size: int) -> None:
        """Train on measured candidates' features ``xs`` (n, d) and their throughputs ``ys`` (0 for failures)."""

    @abc.abstractmethod
    def predict(self, xs: Any) -> np.ndarray:
        """Scores for feature rows (the quantity the optimizer maximises)."""

    def fit_log(self, records: Iterable, plan_size: int) -> None:
        """Warm start from earlier records of the same task (default: ignore them)."""

    def _task_history(self, records: Iterable) -> tuple[list[Any], list[float]]:
        """The candidates of this model's task in ``records`` (records or ``(inp, res)`` pairs) and their
        throughputs; records whose candidate no longer decodes (a changed template) are skipped."""
        if self.task is None:
            raise ValueError(f"fit_log needs a model made with its task: {type(self).__name__}(task, ...)")
        cands, ys = [], []
        for r in as_records(records):
            if r.workload_key == self.task.workload_key:
                try:
                    cands.append(self.task.candidate_from_json(r.config))
                except ValueError:
                    continue
                ys.append(r.result.flops(self.task.flop))
        return cands, ys

    # -- features ---------------------------------------------------------------------------------
    def _bind(self, task: TuningTask | None, feature_type: str) -> None:
        self.task = task
        self.features = FeatureExtractor(task, feature_type) if task is not None else None

    def as_features(self, xs: Any) -> np.ndarray:
        """A float feature matrix from a matrix, or from candidates / knob indices when bound to a task."""
        if isinstance(xs, np.ndarray) and xs.ndim == 2 and xs.dtype.kind == "f":
            return xs
        items = list(xs)
        if not items:
            return np.zeros((0, 1), dtype=np.float32)
        if self.features is None:
            arr = np.asarray(items, dtype=np.float32)
            if arr.ndim != 2:
                raise ValueError("this cost model has no task: give it a 2-D feature matrix")
            return arr
        return self.features(items)
