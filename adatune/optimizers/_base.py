"""The model-optimizer interface (AutoTVM's ``ModelOptimizer``): find configs the cost model scores best."""
from __future__ import annotations

import abc
from typing import Callable, Collection, Sequence

import numpy as np

__all__ = ["ModelOptimizer", "ScoreFn"]

ScoreFn = Callable[[Sequence[int]], np.ndarray]


class ModelOptimizer(abc.ABC):
    @abc.abstractmethod
    def find_maximums(self, score: ScoreFn, num: int, exclusive: Collection[int]) -> list[int]:
        """Up to ``num`` distinct config indices not in ``exclusive`` with the highest ``score``, best first."""
