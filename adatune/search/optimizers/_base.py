"""The model-optimizer interface (AutoTVM's ``ModelOptimizer``): find candidates the cost model scores best."""

from __future__ import annotations

import abc
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np

from ...options import Configurable

__all__ = ["ModelOptimizer", "ScoreFn"]

ScoreFn = Callable[[Sequence[Any]], np.ndarray]


class ModelOptimizer(Configurable, abc.ABC):
    @abc.abstractmethod
    def find_maximums(self, score: ScoreFn, num: int, exclusive: Collection[str]) -> list[Any]:
        """Up to ``num`` distinct candidates whose keys are not in ``exclusive``, highest ``score`` first."""

    def trajectory(self) -> list[Any]:
        """Every candidate the last ``find_maximums`` stood on, repeats kept (what ReLeASE's adaptive sampling
        clusters); empty where an optimizer keeps none, and the sampler then clusters the maxima."""
        return []
