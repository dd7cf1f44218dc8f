"""Tuners without a model: uniform random sampling and grid search."""
from __future__ import annotations

from typing import Any


from ..task import TuningTask
from ._base import Tuner

__all__ = ["RandomTuner", "GridSearchTuner"]


def _index_range(task: TuningTask, range_idx: tuple[int, int] | None) -> tuple[int, int] | None:
    """AutoTVM's ``range_idx``: an inclusive range of knob config indices (knob spaces only)."""
    if range_idx is None:
        return None
    space: Any = task.space
    if not hasattr(space, "range_length"):
        raise ValueError("range_idx needs a knob config space (indices); this task's candidates have none")
    lo, hi = int(range_idx[0]), int(range_idx[1])
    if not 0 <= lo <= hi < space.range_length:
        raise ValueError(f"range_idx {range_idx} is outside [0, {space.range_length - 1}]")
    return lo, hi


class RandomTuner(Tuner):
    """Measures valid candidates drawn uniformly at random, never the same one twice (optionally only knob
    configs with an index in ``range_idx``, inclusive)."""

    def __init__(self, task: TuningTask, range_idx: tuple[int, int] | None = None, seed: int | None = None):
        super().__init__(task, seed)
        self.range = _index_range(task, range_idx)

    def next_batch(self, batch_size: int) -> list[Any]:
        if self.range is None:
            return self.space.random_candidates(self.rng, batch_size, exclude=self.visited)
        space: Any = self.space
        lo, hi = self.range
        out: list[Any] = []
        while len(out) < batch_size and self.has_next():
            idx = space.get_rand_index(lo, hi + 1, to_exclude={int(k) for k in self.visited} | {c.index for c in out})
            out.append(space.get(idx))
        return out

    def has_next(self) -> bool:
        if self.range is None:
            return super().has_next()
        lo, hi = self.range
        return len(self.visited) < self.space.subrange_length(lo, hi + 1)  # type: ignore[attr-defined]


class GridSearchTuner(Tuner):
    """Measures knob configs in index order (within ``range_idx``), skipping filtered-out and measured ones."""

    def __init__(self, task: TuningTask, range_idx: tuple[int, int] | None = None, seed: int | None = None):
        super().__init__(task, seed)
        space: Any = self.space
        if not hasattr(space, "range_length"):
            raise ValueError("grid search walks knob config indices; this task's candidates have none")
        self.range = _index_range(task, range_idx) or (0, space.range_length - 1)
        self._next = self.range[0]

    def next_batch(self, batch_size: int) -> list[Any]:
        space: Any = self.space
        out: list[Any] = []
        while len(out) < batch_size and self._next <= self.range[1]:
            i = self._next
            self._next += 1
            if str(i) not in self.visited and space.is_index_valid(i):
                out.append(space.get(i))
        return out

    def has_next(self) -> bool:
        return self._next <= self.range[1] and super().has_next()


