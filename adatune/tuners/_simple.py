"""Tuners without a model: uniform random sampling and grid search."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

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


def _digits(space: DiscreteSpace, index: int) -> np.ndarray:
    """Mixed-radix digits of ``index``, the first dimension least significant (AutoTVM's order)."""
    out = np.empty((1, len(space.dims)), dtype=np.int64)
    for k, r in enumerate(space.dims):
        out[0, k] = index % r
        index //= r
    return out


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
        taken = {int(k) for k in self.visited if k.lstrip("-").isdigit()}
        tries = 0
        while len(out) < batch_size and tries < 100 * batch_size + 1000:
            tries += 1
            idx = int(self.rng.integers(lo, hi + 1))
            if idx not in taken and isinstance(space, ConfigSpace) and space.is_index_valid(idx):
                taken.add(idx)
                out.append(space.get(idx))
        return out


class GridSearchTuner(Tuner):
    """Measures a discrete space in mixed-radix index order (within ``range_idx``), skipping invalid and
    measured candidates; for knob configs that is AutoTVM's config index order."""

    def __init__(self, task: TuningTask, range_idx: tuple[int, int] | None = None, seed: int | None = None):
        super().__init__(task, seed)
        self.range = _index_range(task, range_idx) or (0, _range_length(task) - 1)
        self._next = self.range[0]

    def next_batch(self, batch_size: int) -> list[Any]:
        space: Any = self.space
        out: list[Any] = []
        while len(out) < batch_size and self._next <= self.range[1]:
            i = self._next
            self._next += 1
            if isinstance(space, ConfigSpace):
                if str(i) not in self.visited and space.is_index_valid(i):
                    out.append(space.get(i))
                continue
            digits = _digits(space, i)
            if space.valid_digits(digits)[0]:
                cand = space.from_digits(digits)[0]
                if cand.key not in self.visited:
                    out.append(cand)
        return out

    def has_next(self) -> bool:
        return self._next <= self.range[1] and super().has_next()
