"""AutoTVM's model-based tuning loop: fit a cost model every ``plan_size`` trials, let a model optimizer
propose the next plan, measure it with epsilon-greedy random exploration."""
from __future__ import annotations

import logging
from typing import Callable, Collection, Protocol, Sequence

import numpy as np

from ..cost_models import CostModel
from ..measure import MeasureInput, MeasureResult
from ..optimizers import ModelOptimizer
from ..space import ConfigEntity
from ..task import Task
from ._base import Tuner

__all__ = ["ModelBasedTuner", "Sampler", "submodular_pick"]

logger = logging.getLogger("adatune.tuner")


class Sampler(Protocol):
    """Chooses which of the optimizer's candidates to measure (e.g. ReLeASE's adaptive sampling)."""

    def select(self, candidates: Sequence[int], num: int, visited: Collection[int]) -> list[int]:
        ...


def submodular_pick(scores: np.ndarray, knobs: np.ndarray, n_pick: int, knob_weight: float = 1.0) -> list[int]:
    """Greedy pick maximising score plus a bonus for every knob value not yet picked (diversity)."""
    n, m = knobs.shape
    remain = list(range(n))
    selected: list[set] = [set() for _ in range(m)]
    ret: list[int] = []
    for _ in range(min(n_pick, n)):
        gains = [scores[x] + knob_weight * sum(knobs[x, i] not in selected[i] for i in range(m)) for x in remain]
        best = remain[int(np.argmax(gains))]
        ret.append(best)
        remain.remove(best)
        for i in range(m):
            selected[i].add(knobs[best, i])
    return ret


class ModelBasedTuner(Tuner):
    """A tuner that alternates measuring a plan and refitting a cost model.

    The first ``plan_size`` trials are random; after each ``plan_size`` measurements the model is refit
    and the optimizer proposes the next plan. A share ``eps_greedy`` of each plan is random configs.
    ``diversity_filter_ratio`` asks the optimizer for that many times ``plan_size`` candidates and keeps a
    diverse subset; ``sampler`` replaces that choice with its own (ReLeASE's adaptive sampling).
    """

    def __init__(self, task: Task, cost_model: CostModel, model_optimizer: ModelOptimizer, plan_size: int = 64,
                 eps_greedy: float = 0.05, diversity_filter_ratio: float | None = None,
                 sampler: Sampler | None = None, seed: int | None = None):
        super().__init__(task, seed)
        if plan_size < 1:
            raise ValueError(f"plan_size must be at least 1, got {plan_size}")
        if not 0 <= eps_greedy <= 1:
            raise ValueError(f"eps_greedy must be in [0, 1], got {eps_greedy}")
        if diversity_filter_ratio is not None and diversity_filter_ratio < 1:
            raise ValueError(f"diversity_filter_ratio must be >= 1, got {diversity_filter_ratio}")
        self.cost_model = cost_model
        self.model_optimizer = model_optimizer
        self.plan_size = plan_size
        self.eps_greedy = eps_greedy
        self.diversity_filter_ratio = diversity_filter_ratio
        self.sampler = sampler
        self.plan: list[int] = []
        self.plan_pt = 0
        self.train_ct = 0
        self.xs: list[int] = []
        self.ys: list[float] = []
        self._fit_n = 0  # len(xs) at the last refit

    def _plan_len(self) -> int:
        """Trials one plan covers: ``plan_size``, or after the first fit a sampler's (often shorter) batch,
        so adaptive sampling measures only its picks before the model is refit."""
        if self.sampler is not None and self.train_ct > 0 and self.plan:
            return len(self.plan)
        return self.plan_size

    # -- choosing -------------------------------------------------------------------------------
    def _random_unvisited(self, taken: set[int]) -> int | None:
        got = self.space.sample(self.rng, 1, exclude=self.visited | taken)
        return got[0] if got else None

    def next_batch(self, batch_size: int) -> list[ConfigEntity]:
        out: list[int] = []
        taken: set[int] = set()
        sampled = self.sampler is not None and self.train_ct > 0
        while len(out) < batch_size and len(self.visited) + len(out) < len(self.space):
            if sampled and out and len(self.xs) + len(out) >= self._fit_n + self._plan_len():
                break  # the sampler's plan is measured: stop so update() refits before the next plan
            while self.plan_pt < len(self.plan) and (self.plan[self.plan_pt] in self.visited
                                                     or self.plan[self.plan_pt] in taken):
                self.plan_pt += 1
            if self.plan_pt >= len(self.plan) - int(self.eps_greedy * self._plan_len()):
                idx = self._random_unvisited(taken)
            else:
                idx = self.plan[self.plan_pt]
                self.plan_pt += 1
            if idx is None:
                break
            out.append(idx)
            taken.add(idx)
        return [self.space.get(i) for i in out]

    # -- learning -------------------------------------------------------------------------------
    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        for inp, res in zip(inputs, results):
            self.xs.append(inp.config.index)
            self.ys.append(res.flops(self.task.flop))
        if self.sampler is not None and self.train_ct > 0:
            due = len(self.xs) >= self._fit_n + self._plan_len()
        else:
            due = len(self.xs) >= self.plan_size * (self.train_ct + 1)
        if due and max(self.ys, default=0) > 1e-6:
            self.refit()

    def refit(self) -> None:
        """Fit the model on everything measured and plan the next ``plan_size`` configs."""
        self._fit_n = len(self.xs)
        self.cost_model.fit(self.xs, self.ys, self.plan_size)
        self.plan = self.propose(self.score, self.plan_size)
        self.plan_pt = 0
        self.train_ct += 1

    def score(self, xs: Sequence[int]) -> np.ndarray:
        """What the optimizer maximises (the cost model's prediction; AdaTune overrides with EI)."""
        return self.cost_model.predict(xs)

    def propose(self, score: Callable[[Sequence[int]], np.ndarray], num: int) -> list[int]:
        if self.sampler is not None:
            cands = self.model_optimizer.find_maximums(score, num * 4, self.visited)
            return self.sampler.select(cands, num, self.visited)
        if self.diversity_filter_ratio:
            cands = self.model_optimizer.find_maximums(score, int(num * self.diversity_filter_ratio), self.visited)
            if not cands:
                return []
            knobs = np.asarray([self.space.point2knob(c) for c in cands])
            pick = submodular_pick(np.zeros(len(cands)), knobs, num, knob_weight=1.0)
            return [cands[i] for i in pick]
        return self.model_optimizer.find_maximums(score, num, self.visited)
