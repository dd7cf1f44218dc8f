"""Tuners without a model: uniform random sampling and grid search."""
from __future__ import annotations

from typing import Sequence

from ..measure import MeasureInput, MeasureResult
from ..space import ConfigEntity
from ._base import Tuner

__all__ = ["RandomTuner", "GridSearchTuner"]


class RandomTuner(Tuner):
    """Measures valid configs drawn uniformly at random, never the same one twice."""

    def next_batch(self, batch_size: int) -> list[ConfigEntity]:
        return [self.space.get(i) for i in self.space.sample(self.rng, batch_size, exclude=self.visited)]

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        pass


class GridSearchTuner(Tuner):
    """Measures configs in index order, skipping filtered-out and already measured ones."""

    def __init__(self, task, seed: int | None = None):  # type: ignore[no-untyped-def]
        super().__init__(task, seed)
        self._next = 0

    def next_batch(self, batch_size: int) -> list[ConfigEntity]:
        out: list[ConfigEntity] = []
        while len(out) < batch_size and self._next < len(self.space):
            i = self._next
            self._next += 1
            if i not in self.visited and self.space.is_index_valid(i):
                out.append(self.space.get(i))
        return out

    def has_next(self) -> bool:
        return self._next < len(self.space) and super().has_next()

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        pass
