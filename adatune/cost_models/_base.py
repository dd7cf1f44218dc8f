"""The cost-model interface (AutoTVM's ``CostModel``): learn from measured configs, score unmeasured ones."""
from __future__ import annotations

import abc
from typing import Iterable, Sequence

import numpy as np

__all__ = ["CostModel"]


class CostModel(abc.ABC):
    """Scores config indices of one task; higher scores mean faster configs."""

    @abc.abstractmethod
    def fit(self, xs: Sequence[int], ys: Sequence[float], plan_size: int) -> None:
        """Train on measured config indices ``xs`` and their throughputs ``ys`` (0 for failures)."""

    @abc.abstractmethod
    def predict(self, xs: Sequence[int]) -> np.ndarray:
        """Scores for config indices (the quantity the optimizer maximises)."""

    def fit_log(self, records: Iterable, plan_size: int) -> None:
        """Warm start from earlier records of the same task (default: ignore them)."""
