"""AutoTVM's model-based tuning loop: fit a cost model every ``plan_size`` trials, let a model optimizer
propose the next plan and the exploration policy mix in random candidates. Works on any candidate kind."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any, ClassVar, Protocol

import numpy as np

from ..cost_models import CostModel
from ..cost_models.features import FeatureExtractor
from ..measure import MeasureInput, MeasureResult
from ..options import Option
from ..search.optimizers import ExplorationPolicy, ModelOptimizer
from ..search.optimizers.exploration import EPS_GREEDY
from ..task import TuningTask
from ._base import Tuner

__all__ = ["ModelBasedTuner", "Sampler", "submodular_pick", "PLAN_SIZE", "DIVERSITY_FILTER_RATIO", "SAMPLER"]

PLAN_SIZE = Option.declare("plan_size", int, "trials per plan: the cost model is refit after each plan", minimum=1)
DIVERSITY_FILTER_RATIO = Option.declare(
    "diversity_filter_ratio",
    float,
    "ask the optimizer for this many times plan_size candidates, keep a diverse subset",
    minimum=1.0,
)
SAMPLER = Option.declare(
    "sampler",
    str,
    "choose each plan by ReLeASE's k-means adaptive sampling (none: the optimizer's top candidates)",
    choices=("adaptive", None),
    objects=True,
)

logger = logging.getLogger("adatune.tuner")


class Sampler(Protocol):
    """Chooses which configs to measure from the optimizer's trajectory (e.g. ReLeASE's adaptive sampling);
    how many is its own choice (``num`` is the plan's model share, a hint)."""

    def select(self, candidates: Sequence[Any], num: int, visited: Collection[str]) -> list[Any]: ...


def submodular_pick(scores: np.ndarray, knobs: np.ndarray, n_pick: int, knob_weight: float = 1.0) -> list[int]:
    """Greedy pick maximising score plus a bonus for every feature value not yet picked (diversity)."""
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
    """A tuner that alternates measuring a plan and refitting a cost model. The first ``plan_size`` trials are random
    (from the ``plan`` stream, so every scheme of one seed measures the same first plan); after each plan the model is
    refit, the model optimizer proposes candidates and ``exploration`` (the one ``ExplorationPolicy``) mixes in random
    ones. ``diversity_filter_ratio`` keeps a diverse subset of that many times the model's share; ``sampler`` replaces
    that choice (ReLeASE's adaptive sampling). ``feature_type``: "knob" or "itervar"."""

    OPTIONS: ClassVar[tuple[Option, ...]] = (PLAN_SIZE, EPS_GREEDY, DIVERSITY_FILTER_RATIO)

    def __init__(
        self,
        task: TuningTask,
        cost_model: CostModel,
        model_optimizer: ModelOptimizer | None,
        plan_size: int = 64,
        eps_greedy: float = 0.05,
        diversity_filter_ratio: float | None = None,
        sampler: Sampler | None = None,
        seed: int | None = None,
        feature_type: str = "knob",
        exploration: ExplorationPolicy | None = None,
    ):
        super().__init__(task, seed)
        self.cost_model = cost_model
        self.model_optimizer = model_optimizer
        self.plan_size = plan_size
        self.exploration = exploration if exploration is not None else ExplorationPolicy(eps_greedy)
        self.diversity_filter_ratio = diversity_filter_ratio
        self.sampler = sampler
        self.featurize: Callable[[Sequence[Any]], np.ndarray] = (
            cost_model.features if cost_model.features is not None else FeatureExtractor(task, feature_type)
        )
        self.plan: list[Any] = self.space.random_candidates(self.streams.plan, plan_size)
        self.plan_pt = 0
        self.train_ct = 0
        self.xs: list[Any] = []
        self.ys: list[float] = []
        self._fit_n = 0  # len(xs) at the last refit

    @property
    def eps_greedy(self) -> float:
        return self.exploration.eps_greedy

    @property
    def eps_history(self) -> list[float]:
        """The exploration rate of every model-guided plan so far."""
        return list(self.exploration.history)

    def _plan_len(self) -> int:
        """Trials per plan: ``plan_size``, or after the first fit a sampler's batch, all measured before a refit."""
        if self.sampler is not None and self.train_ct > 0 and self.plan:
            return len(self.plan)
        return self.plan_size

    # -- choosing -------------------------------------------------------------------------------
    def next_batch(self, batch_size: int) -> list[Any]:
        out: list[Any] = []
        taken: set[str] = set()
        sampled = self.sampler is not None and self.train_ct > 0
        while len(out) < batch_size and len(self.visited) + len(out) < self.space.size:
            if sampled and out and len(self.xs) + len(out) >= self._fit_n + self._plan_len():
                break  # the sampler's plan is measured: stop so update() refits before the next plan
            while self.plan_pt < len(self.plan) and (
                self.plan[self.plan_pt].key in self.visited or str(self.plan[self.plan_pt].key) in taken
            ):
                self.plan_pt += 1
            if self.plan_pt < len(self.plan):
                cand = self.plan[self.plan_pt]
                self.plan_pt += 1
            else:  # the plan is used up before the next refit: random candidates
                got = self.space.random_candidates(self.streams.explore, 1, exclude=self.visited | taken)
                if not got:
                    break
                cand = got[0]
            out.append(cand)
            taken.add(str(cand.key))
        return out

    # -- learning -------------------------------------------------------------------------------
    def learn(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        for inp, res in zip(inputs, results):
            self.xs.append(inp.config)
            self.ys.append(res.flops(self.task.flop))
        if self.sampler is not None and self.train_ct > 0:
            due = len(self.xs) >= self._fit_n + self._plan_len()
        else:
            due = len(self.xs) >= self.plan_size * (self.train_ct + 1)
        if due and max(self.ys, default=0) > 1e-6:
            self.refit()

    def refit(self) -> None:
        """Fit the model on everything measured and plan the next ``plan_size`` candidates."""
        self._fit_n = len(self.xs)
        self.cost_model.fit(self.featurize(self.xs), self.ys, self.plan_size)
        self.plan = self.exploration.plan(
            self.space,
            self.streams.explore,
            self.plan_size,
            self.visited,
            lambda n: self.propose(self.score, n),
            sized_by_search=self.sampler is not None,
        )
        self.plan_pt = 0
        self.train_ct += 1

    def score(self, cands: Sequence[Any]) -> np.ndarray:
        """What the optimizer maximises (the cost model's prediction; AdaTune's is expected improvement)."""
        return self.cost_model.predict(self.featurize(cands))

    def propose(self, score: Callable[[Sequence[Any]], np.ndarray], num: int) -> list[Any]:
        """The model's share of a plan: the optimizer's best, thinned by the sampler or the diversity filter."""
        if self.model_optimizer is None:
            raise ValueError(f"{type(self).__name__} has no model optimizer")
        if self.sampler is not None:  # it clusters the search's whole trajectory (or, if none is kept, its best)
            cands = self.model_optimizer.find_maximums(score, num * 4, self.visited)
            return self.sampler.select(self.model_optimizer.trajectory() or cands, num, self.visited)
        if self.diversity_filter_ratio:
            cands = self.model_optimizer.find_maximums(score, int(num * self.diversity_filter_ratio), self.visited)
            if not cands:
                return []
            feats = np.nan_to_num(self.featurize(cands))
            pick = submodular_pick(np.zeros(len(cands)), feats, num, knob_weight=1.0)
            return [cands[i] for i in pick]
        return self.model_optimizer.find_maximums(score, num, self.visited)
