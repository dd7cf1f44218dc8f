"""ContextualEvolutionarySearch: meta_schedule's search strategy slot filled with adatune's own search.

meta_schedule's ``EvolutionarySearch`` takes its random share as ``int(n * 0.05)``, so with fewer than 20 trials
per iteration it never explores. This searches the design spaces as an ``adatune.trace.TraceSpace`` with
``adatune.search.optimizers.EvolutionarySearch``, split by the one ``ExplorationPolicy`` (AdaTune's eps_t when the
cost model has ``predict_mean_std``); no candidate (by structural hash) is measured twice.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate, PySearchStrategy

from ..search.optimizers import EvolutionarySearch, ExplorationPolicy
from ..trace import TraceSpace
from ._cost_model import python_cost_model

__all__ = ["ContextualEvolutionarySearch", "EvolutionParams"]

logger = logging.getLogger("adatune.meta_schedule")


class _ContextModel:
    """An RFEICostModel plug-in seen as ``ExplorationPolicy``'s uncertainty model, in one tune context."""

    def __init__(self, model: Any, space: TraceSpace):
        self.model, self.space = model, space

    @property
    def best_flops(self) -> float:
        return float(self.model.best_throughput(self.space.context))

    def predict_mean_std(self, cands: Any) -> tuple[np.ndarray, np.ndarray]:
        mean, std = self.model.predict_mean_std(self.space.context, [self.space.measure_candidate(c) for c in cands])
        return np.asarray(mean), np.asarray(std)


@dataclass(frozen=True)
class EvolutionParams:
    """The search's settings (meta_schedule's EvolutionarySearch names), checked on creation."""

    population_size: int = 64
    init_measured_ratio: float = 0.2
    genetic_num_iters: int = 2
    genetic_mutate_prob: float = 0.85
    max_fail_count: int = 5
    n_context: int = 32
    eps_greedy: float = 0.05
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.population_size < 2:
            raise ValueError(f"population_size must be at least 2, got {self.population_size}")
        for name in ("init_measured_ratio", "genetic_mutate_prob", "eps_greedy"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.genetic_num_iters < 0:
            raise ValueError(f"genetic_num_iters must be >= 0, got {self.genetic_num_iters}")
        for name in ("max_fail_count", "n_context"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")


@derived_object
class ContextualEvolutionarySearch(PySearchStrategy):
    """Evolutionary search whose random share is AdaTune's eps_t (see the module docstring).

    ``history`` (shared with the clones ``tune_tir`` makes) gets one entry per iteration: the exploration rate
    and where it came from, how many picks came from the model and how many were random, the population size.
    """

    def __init__(
        self,
        population_size: int = 64,
        init_measured_ratio: float = 0.2,
        genetic_num_iters: int = 2,
        genetic_mutate_prob: float = 0.85,
        max_fail_count: int = 5,
        n_context: int = 32,
        eps_greedy: float = 0.05,
        seed: int | None = None,
        history: list[dict[str, Any]] | None = None,
    ):
        super().__init__()
        self.params = EvolutionParams(
            int(population_size),
            float(init_measured_ratio),
            int(genetic_num_iters),
            float(genetic_mutate_prob),
            int(max_fail_count),
            int(n_context),
            float(eps_greedy),
            seed,
        )
        self.history: list[dict[str, Any]] = history if history is not None else []
        self.context: Any = None
        self.rng = np.random.default_rng(seed)

    # -- meta_schedule hooks --------------------------------------------------------------------
    def _initialize_with_tune_context(self, context: Any) -> None:
        self.context = context
        seed = self.params.seed
        if seed is None and int(context.rand_state) >= 0:
            seed = int(context.rand_state)
        self.rng = np.random.default_rng(seed)

    def pre_tuning(
        self,
        max_trials: int,
        num_trials_per_iter: int,
        design_spaces: list,
        database: Any = None,
        cost_model: Any = None,
    ) -> None:
        if self.context is None:
            raise RuntimeError("ContextualEvolutionarySearch: pre_tuning before the tune context was attached")
        p = self.params
        self.max_trials, self.per_iter, self.trials = int(max_trials), int(num_trials_per_iter), 0
        self.space = TraceSpace.of_context(
            self.context, [sch.trace.simplified(remove_postproc=True) for sch in design_spaces], p.max_fail_count
        )
        self.database, self.cost_model = database, cost_model
        self.measured: set[str] = {c.key for c in self._database_best(1 << 20)}  # stored ones are measured
        self.evolution = EvolutionarySearch(
            self.space,
            self.rng,
            population_size=p.population_size,
            init_measured_ratio=p.init_measured_ratio,
            genetic_num_iters=p.genetic_num_iters,
            mutate_prob=p.genetic_mutate_prob,
            seeds=self._database_best,
        )
        model = python_cost_model(cost_model)
        self.policy = (
            ExplorationPolicy(model=_ContextModel(model, self.space), featurize=list, n_context=p.n_context)
            if model is not None
            else ExplorationPolicy(p.eps_greedy)
        )

    def post_tuning(self) -> None:
        self.space = self.evolution = self.database = self.cost_model = None  # type: ignore[assignment]

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        if self.trials >= self.max_trials or self.space is None:
            return None
        n = min(self.per_iter, self.max_trials - self.trials)
        picks = self.policy.plan(
            self.space,
            self.rng,
            n,
            self.measured,
            lambda m: self.evolution.find_maximums(self._score, m, self.measured),
        )
        n_model, n_random = self.policy.splits[-1]
        self.history.append(
            {
                "workload": self.context.task_name,
                "eps": self.policy.history[-1],
                "eps_source": "uncertainty" if self.policy.contextual else "eps_greedy",
                "n": n,
                "n_model": n_model,
                "n_random": n_random,
                "population": self.evolution.population_size,
            }
        )
        if not picks:
            return None
        self.measured.update(c.key for c in picks)
        return [self.space.measure_candidate(c) for c in picks]

    def notify_runner_results(self, measure_candidates: list, results: list) -> None:
        self.trials += len(results)

    def clone(self) -> ContextualEvolutionarySearch:
        return ContextualEvolutionarySearch(**dataclasses.asdict(self.params), history=self.history)

    def _database_best(self, n: int) -> list[Any]:
        """Up to ``n`` of the database's records of this workload, best first, as candidates."""
        if self.database is None or not self.database.has_workload(self.context.mod):
            return []
        out = []
        for record in self.database.get_top_k(self.database.commit_workload(self.context.mod), n):
            try:
                out.append(self.space.candidate_from_trace(record.trace))
            except ValueError:  # a record of another design-space generator: not a seed for this one
                continue
        return out

    def _score(self, cands: Sequence[Any]) -> np.ndarray:
        if self.cost_model is None or not cands:
            return np.zeros(len(cands))
        scores = self.cost_model.predict(self.context, [self.space.measure_candidate(c) for c in cands])
        return np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
