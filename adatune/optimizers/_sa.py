"""Parallel simulated annealing over config indices (AutoTVM's ``SimulatedAnnealingOptimizer``)."""
from __future__ import annotations

import heapq
import logging
from typing import Collection

import numpy as np

from ..space import ConfigSpace
from ._base import ModelOptimizer, ScoreFn

__all__ = ["SimulatedAnnealingOptimizer", "random_walk_batch"]

logger = logging.getLogger("adatune.optimizer")


def random_walk_batch(space: ConfigSpace, points: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One random-walk step for every point: one random knob moves to another value (filters respected)."""
    dims = np.asarray(space.dims, dtype=np.int64)
    movable = np.flatnonzero(dims > 1)
    if len(movable) == 0:
        return points.copy()
    scale = np.concatenate([[1], np.cumprod(dims)[:-1]]).astype(np.int64)
    out = points.copy()
    pending = np.arange(len(points))
    for _ in range(20 if space.has_filters else 1):  # re-draw the steps that leave the filtered space
        knob = movable[rng.integers(len(movable), size=len(pending))]
        r = dims[knob]
        digit = (points[pending] // scale[knob]) % r
        step = rng.integers(1, np.iinfo(np.int64).max, size=len(pending)) % (r - 1) + 1
        cand = points[pending] + ((digit + step) % r - digit) * scale[knob]
        ok = space.are_valid(cand)
        out[pending[ok]] = cand[ok]
        pending = pending[~ok]
        if len(pending) == 0:
            break
    return out


class SimulatedAnnealingOptimizer(ModelOptimizer):
    """``parallel_size`` chains of random walks, accepting worse points with probability
    exp((new - old) / t), t cooling linearly over ``n_iter`` steps; stops after ``early_stop`` steps
    without a new top-``num`` point. With ``persistent`` the chains continue from the last call."""

    def __init__(self, space: ConfigSpace, rng: np.random.Generator, n_iter: int = 500,
                 temp: tuple[float, float] = (1.0, 0.0), persistent: bool = True, parallel_size: int = 128,
                 early_stop: int = 50):
        self.space, self.rng = space, rng
        self.n_iter, self.temp, self.persistent = n_iter, temp, persistent
        self.parallel_size = min(parallel_size, len(space))
        self.early_stop = early_stop
        self.points: np.ndarray | None = None
        self.last_steps = 0

    def find_maximums(self, score: ScoreFn, num: int, exclusive: Collection[int]) -> list[int]:
        if self.persistent and self.points is not None:
            points = self.points
        else:
            points = np.asarray(self.space.sample(self.rng, self.parallel_size), dtype=np.int64)
        scores = np.asarray(score(points), dtype=np.float64)
        heap: list[tuple[float, int]] = [(-np.inf, -1 - i) for i in range(num)]
        in_heap = {p for _, p in heap}

        def offer(vals: np.ndarray, pts: np.ndarray) -> bool:
            changed = False
            for s, p in zip(vals, pts):
                p = int(p)
                if s > heap[0][0] and p not in in_heap and p not in exclusive:
                    _, old = heapq.heapreplace(heap, (float(s), p))
                    in_heap.discard(old)
                    in_heap.add(p)
                    changed = True
            return changed

        offer(scores, points)
        t0, t1 = self.temp
        cool = (t0 - t1) / (self.n_iter + 1)
        t, k, last_modify = t0, 0, 0
        while k < self.n_iter and k < last_modify + self.early_stop:
            new_points = random_walk_batch(self.space, points, self.rng)
            new_scores = np.asarray(score(new_points), dtype=np.float64)
            ac_prob = np.exp(np.minimum((new_scores - scores) / (t + 1e-5), 1))
            accept = self.rng.random(len(ac_prob)) < ac_prob
            points = np.where(accept, new_points, points)
            scores = np.where(accept, new_scores, scores)
            if offer(new_scores, new_points):
                last_modify = k
            k += 1
            t -= cool
        self.last_steps = k
        self.points = points
        best = sorted((h for h in heap if h[1] >= 0), reverse=True)
        logger.debug("SA: %d steps, best score %.4g", k, best[0][0] if best else float("nan"))
        return [p for _, p in best]
