"""Parallel simulated annealing over candidates (AutoTVM's ``SimulatedAnnealingOptimizer``).

It walks with the space's own one-step mutation (``space.mutate``), so it searches knob configs, traces and
micro-kernels alike.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Collection
from typing import Any

import numpy as np

from ...space._candidate import CandidateSpace
from ._base import ModelOptimizer, ScoreFn

__all__ = ["SimulatedAnnealingOptimizer"]

logger = logging.getLogger("adatune.optimizer")


class SimulatedAnnealingOptimizer(ModelOptimizer):
    """``parallel_size`` chains of random walks, accepting worse points with probability
    exp((new - old) / t), t cooling linearly over ``n_iter`` steps; stops after ``early_stop`` steps
    without a new top-``num`` point. With ``persistent`` the chains continue from the last call."""

    def __init__(
        self,
        space: CandidateSpace,
        rng: np.random.Generator,
        n_iter: int = 500,
        temp: tuple[float, float] = (1.0, 0.0),
        persistent: bool = True,
        parallel_size: int = 128,
        early_stop: int = 50,
    ):
        self.space, self.rng = space, rng
        self.n_iter, self.temp, self.persistent = n_iter, temp, persistent
        self.parallel_size = max(1, min(parallel_size, space.size))
        self.early_stop = early_stop
        self.points: list[Any] | None = None
        self.last_steps = 0
        self._trajectory: list[Any] = []

    def trajectory(self) -> list[Any]:
        """The chains' points after every step of the last call (their starts included)."""
        return list(self._trajectory)

    def find_maximums(self, score: ScoreFn, num: int, exclusive: Collection[str]) -> list[Any]:
        if self.persistent and self.points is not None:
            points = list(self.points)
        else:
            points = self.space.random_candidates(self.rng, self.parallel_size)
        self._trajectory = list(points)
        if not points:
            return []
        scores = np.asarray(score(points), dtype=np.float64)
        heap: list[tuple[float, int, str]] = [(-np.inf, -1 - i, "") for i in range(num)]
        in_heap: set[str] = set()
        found: dict[str, Any] = {}
        tick = [0]

        def offer(vals: np.ndarray, pts: list[Any]) -> bool:
            changed = False
            for s, p in zip(vals, pts):
                key = str(p.key)
                if s > heap[0][0] and key not in in_heap and key not in exclusive:
                    tick[0] += 1
                    _, _, old = heapq.heapreplace(heap, (float(s), tick[0], key))
                    in_heap.discard(old)
                    in_heap.add(key)
                    found[key] = p
                    changed = True
            return changed

        offer(scores, points)
        t0, t1 = self.temp
        cool = (t0 - t1) / (self.n_iter + 1)
        t, k, last_modify = t0, 0, 0
        while k < self.n_iter and k < last_modify + self.early_stop:
            new_points = self.space.mutate(points, self.rng)
            new_scores = np.asarray(score(new_points), dtype=np.float64)
            ac_prob = np.exp(np.minimum((new_scores - scores) / (t + 1e-5), 1))
            accept = self.rng.random(len(ac_prob)) < ac_prob
            points = [n if a else p for p, n, a in zip(points, new_points, accept)]
            scores = np.where(accept, new_scores, scores)
            self._trajectory.extend(points)
            if offer(new_scores, new_points):
                last_modify = k
            k += 1
            t -= cool
        self.last_steps = k
        self.points = points
        best = sorted((h for h in heap if h[2]), key=lambda h: (-h[0], h[1]))
        logger.debug("SA: %d steps, best score %.4g", k, best[0][0] if best else float("nan"))
        return [found[key] for _, _, key in best]
