"""Parallel simulated annealing over candidates (AutoTVM's ``SimulatedAnnealingOptimizer``), walking with the space's
own one-step mutation (``space.mutate``), so it searches knob configs, traces and micro-kernels alike.

The temperature. AutoTVM accepts a move with exp((new - old) / t), t cooling from 1 to 0: a rule made for XGBoost scores
on a 0-1 scale (``temp_scale="absolute"``, kept for the AutoTVM baseline). On another scale it is not an anneal: RFEI's
expected improvement divided by the best throughput is about 1e-5 to 1e-2, so (new - old) / t is about 0 for nearly the
whole schedule and every move is accepted (a random walk with a top-k memory), while on a scale of 1e3 no worse move
ever is (a greedy walk). Neither AdaTune paper (NeurIPS 2020, sec. 4; the RFC) states a temperature; ReLeASE names
AutoTVM's annealer. ``temp_scale="spread"`` measures t in units of the standard deviation of the chains' starting scores
in each call, so the same walk is taken on any scale of the same landscape: it accepts worse moves at the start with the
probability AutoTVM's rule has on its own scale, and is greedy at the end."""

from __future__ import annotations

import heapq
import logging
from collections.abc import Collection
from typing import Any

import numpy as np

from ...space._candidate import CandidateSpace
from ._base import ModelOptimizer, ScoreFn

__all__ = ["TEMP_SCALES", "SimulatedAnnealingOptimizer", "score_spread"]

TEMP_SCALES = ("absolute", "spread")


def score_spread(scores: np.ndarray) -> float:
    """The unit of t under ``temp_scale="spread"``: the standard deviation of the finite scores, or 1.0 where they
    give none (fewer than two, all equal, or none finite), so a flat start falls back to AutoTVM's rule."""
    vals = np.asarray(scores, dtype=np.float64)
    vals = vals[np.isfinite(vals)]
    if len(vals) < 2:
        return 1.0
    sd = float(np.std(vals))
    return sd if sd > 0 and np.isfinite(sd) else 1.0


logger = logging.getLogger("adatune.optimizer")


class SimulatedAnnealingOptimizer(ModelOptimizer):
    """``parallel_size`` chains of random walks, accepting worse points with probability
    exp((new - old) / (t * unit)), t cooling linearly over ``n_iter`` steps; stops after ``early_stop`` steps
    without a new top-``num`` point. With ``persistent`` the chains continue from the last call. ``temp_scale``:
    "absolute" (unit 1, AutoTVM's rule) or "spread" (unit: ``score_spread`` of the chains' starting scores)."""

    def __init__(
        self,
        space: CandidateSpace,
        rng: np.random.Generator,
        n_iter: int = 500,
        temp: tuple[float, float] = (1.0, 0.0),
        persistent: bool = True,
        parallel_size: int = 128,
        early_stop: int = 50,
        temp_scale: str = "absolute",
    ):
        if temp_scale not in TEMP_SCALES:
            raise ValueError(f"temp_scale must be one of {TEMP_SCALES}, got {temp_scale!r}")
        self.space, self.rng = space, rng
        self.temp_scale = temp_scale
        self.n_iter, self.temp, self.persistent = n_iter, temp, persistent
        self.parallel_size = max(1, min(parallel_size, space.size))
        self.early_stop = early_stop
        self.points: list[Any] | None = None
        self.last_steps = 0
        self.steps_history: list[int] = []  # steps of every call: ReLeASE counts search cost in them
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
        unit = score_spread(scores) if self.temp_scale == "spread" else 1.0
        t0, t1 = self.temp
        cool = (t0 - t1) / (self.n_iter + 1)
        t, k, last_modify = t0, 0, 0
        while k < self.n_iter and k < last_modify + self.early_stop:
            new_points = self.space.mutate(points, self.rng)
            new_scores = np.asarray(score(new_points), dtype=np.float64)
            ac_prob = np.exp(np.minimum((new_scores - scores) / ((t + 1e-5) * unit), 1))
            accept = self.rng.random(len(ac_prob)) < ac_prob
            points = [n if a else p for p, n, a in zip(points, new_points, accept)]
            scores = np.where(accept, new_scores, scores)
            self._trajectory.extend(points)
            if offer(new_scores, new_points):
                last_modify = k
            k += 1
            t -= cool
        self.last_steps = k
        self.steps_history.append(k)
        self.points = points
        best = sorted((h for h in heap if h[2]), key=lambda h: (-h[0], h[1]))
        logger.debug("SA: %d steps, best score %.4g", k, best[0][0] if best else float("nan"))
        return [found[key] for _, _, key in best]
