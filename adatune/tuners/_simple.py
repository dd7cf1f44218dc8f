"""Tuners without a model: uniform random sampling and grid search."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..options import Option
from ..space import ConfigSpace
from ..space._candidate import DiscreteSpace
from ..task import TuningTask
from ._base import Tuner

__all__ = ["RandomTuner", "GridSearchTuner"]


def _index_range(task: TuningTask, range_idx: tuple[int, int] | None) -> tuple[int, int] | None:
    """AutoTVM's ``range_idx``: an inclusive range of knob config indices (knob spaces only)."""
    if range_idx is None:
        return None
    lo, hi = int(range_idx[0]), int(range_idx[1])
    if not 0 <= lo <= hi < _range_length(task):
        raise ValueError(f"range_idx {range_idx} is outside [0, {_range_length(task) - 1}]")
    return lo, hi


def _range_length(task: TuningTask) -> int:
    """Number of mixed-radix indices of a discrete space, valid or not (AutoTVM's ``range_length``)."""
    if not isinstance(task.space, DiscreteSpace):
        raise ValueError(
            "index ranges need a discrete space (knob configs, digit vectors); this task's candidates have none"
        )
    return math.prod(task.space.dims)


def _digits(space: DiscreteSpace, indices: np.ndarray) -> np.ndarray:
    """Mixed-radix digits of ``indices``, the first dimension least significant (AutoTVM's order)."""
    left = np.asarray(indices, dtype=np.int64).copy()
    out = np.empty((len(left), len(space.dims)), dtype=np.int64)
    for k, r in enumerate(space.dims):
        out[:, k] = left % r
        left //= r
    return out


def _count_valid(space: DiscreteSpace, begin: int, end: int) -> int:
    """Valid candidates with an index in ``[begin, end)`` (AutoTVM's ``subrange_length``)."""
    if isinstance(space, ConfigSpace):
        return space.subrange_length(begin, end)
    if begin == 0 and end == math.prod(space.dims):
        return space.size
    chunks = range(begin, end, 1 << 16)
    return sum(int(space.valid_digits(_digits(space, np.arange(c, min(c + (1 << 16), end)))).sum()) for c in chunks)


class _IndexRange:
    """AutoTVM's index-based tuner attributes: ``begin_idx``, ``end_idx`` (exclusive), ``range_length`` and
    ``visited_max`` (how many valid candidates the range holds)."""

    def _set_range(self, task: TuningTask, lo: int, hi: int) -> None:
        self.begin_idx, self.end_idx = lo, hi + 1
        self.range_length = self.end_idx - self.begin_idx
        self.visited_max = _count_valid(task.space, self.begin_idx, self.end_idx)  # type: ignore[arg-type]


RANGE_IDX = Option.declare(
    "range_idx", tuple, "only knob configs with an index in [first, last] (AutoTVM's)", item_type=int, length=2
)


class RandomTuner(Tuner, _IndexRange):
    """Measures valid candidates drawn uniformly at random, never the same one twice (optionally only knob
    configs with an index in ``range_idx``, inclusive)."""

    OPTIONS = (RANGE_IDX,)

    def __init__(self, task: TuningTask, range_idx: tuple[int, int] | None = None, seed: int | None = None):
        super().__init__(task, seed)
        self.range = _index_range(task, range_idx)
        if self.range is not None or isinstance(task.space, DiscreteSpace):
            self._set_range(task, *(self.range or (0, _range_length(task) - 1)))

    def _taken_in_range(self) -> set[int]:
        return {k for k in self.visited if isinstance(k, int) and self.begin_idx <= k < self.end_idx}

    def next_batch(self, batch_size: int) -> list[Any]:
        if self.range is None:
            return self.space.random_candidates(self.rng, batch_size, exclude=self.visited)
        space: Any = self.space
        out: list[Any] = []
        if not isinstance(space, ConfigSpace):
            return out
        taken = self._taken_in_range()
        while len(out) < batch_size and len(taken) < self.visited_max:
            idx = space.get_rand_index(self.begin_idx, self.end_idx, to_exclude=taken, rng=self.rng)
            taken.add(idx)
            out.append(space.get(idx))
        return out

    def has_next(self) -> bool:
        if self.range is None:
            return super().has_next()
        return len(self._taken_in_range()) < self.visited_max


class GridSearchTuner(Tuner, _IndexRange):
    """Measures a discrete space in mixed-radix index order (within ``range_idx``), skipping invalid and
    measured candidates; for knob configs that is AutoTVM's config index order. ``index`` is the next index
    to measure (the first valid one at or after it, for knob configs)."""

    OPTIONS = (RANGE_IDX,)

    def __init__(self, task: TuningTask, range_idx: tuple[int, int] | None = None, seed: int | None = None):
        super().__init__(task, seed)
        self.range = _index_range(task, range_idx) or (0, _range_length(task) - 1)
        self._set_range(task, *self.range)
        self.index = self._valid_from(self.begin_idx)

    def _valid_from(self, i: int) -> int:
        """The first valid knob config index at or after ``i`` in the range (``end_idx`` when none is left)."""
        space = self.space
        if isinstance(space, ConfigSpace) and i < self.end_idx and not space.is_index_valid(i):
            found = space.get_next_index(i, start=self.begin_idx, end=self.end_idx)
            return self.end_idx if found is None else found
        return i

    def next_batch(self, batch_size: int) -> list[Any]:
        space: Any = self.space
        out: list[Any] = []
        while len(out) < batch_size and self.index < self.end_idx:
            i = self.index
            self.index = self._valid_from(i + 1)
            if isinstance(space, ConfigSpace):
                if str(i) not in self.visited:
                    out.append(space.get(i))
                continue
            digits = _digits(space, np.asarray([i]))
            if space.valid_digits(digits)[0]:
                cand = space.from_digits(digits)[0]
                if cand.key not in self.visited:
                    out.append(cand)
        return out

    def has_next(self) -> bool:
        return self.index < self.end_idx and super().has_next()
