"""ContextualEvolutionarySearch: meta_schedule's evolutionary search with AdaTune's contextual exploration.

meta_schedule's ``EvolutionarySearch`` measures the cost model's top candidates plus a fixed share
``eps_greedy = 0.05`` of random ones, taken as ``int(n * 0.05)``: with fewer than 20 trials per iteration it
never explores. AdaTune (NeurIPS 2020, sec. 4.2) sets the random share from the model's own uncertainty:
``eps_t = mean sigma(x) / best measured throughput`` over random unmeasured candidates x (mostly random while
the forest knows little, mostly exploitation once it is sure), computed here from the cost model's
``predict_mean_std`` (``adatune.meta_schedule.RFEICostModel`` has it; other models fall back to the fixed
``eps_greedy``). The number of random picks is ``eps_t * n`` rounded stochastically, so small iterations
explore in expectation too.

The search itself follows meta_schedule's: a population of random replays of the design spaces' traces
(plus the database's best records of the workload), evolved for ``genetic_num_iters`` generations by
sampling parents in proportion to their score and mutating their sampled decisions with the context's
mutators; each child is replayed and must pass the context's postprocessors. Candidates are deduplicated
by ``tvm_ffi.structural_hash`` of their scheduled module, and a candidate is never measured twice.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.arg_info import ArgInfo
from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate, PySearchStrategy

from ..optimizers.contextual import exploration_rate
from ._cost_model import python_cost_model

__all__ = ["ContextualEvolutionarySearch", "EvolutionParams"]

logger = logging.getLogger("adatune.meta_schedule")


@dataclass
class _Candidate:
    """A replayed, postprocessed schedule, the trace it came from (without postprocs) and its module hash."""

    sch: Any
    trace: Any
    key: int

    def measure_candidate(self) -> MeasureCandidate:
        return MeasureCandidate(self.sch, ArgInfo.from_entry_func(self.sch.mod, remove_preproc=True))


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
        self.max_trials, self.per_iter = int(max_trials), int(num_trials_per_iter)
        self.spaces = [sch.trace.simplified(remove_postproc=True) for sch in design_spaces]
        self.database, self.cost_model = database, cost_model
        generator = self.context.space_generator
        self.postprocs = list(generator.postprocs or [])
        probs = dict(generator.mutator_probs or {})
        self.mutators = list(probs.keys())
        weights = np.asarray([float(p) for p in probs.values()], dtype=np.float64)
        self.mutator_weights = weights / weights.sum() if len(weights) and weights.sum() > 0 else weights
        self.trials = 0
        self.measured: set[int] = set()
        self.workload = None
        if database is not None and database.has_workload(self.context.mod):
            self.workload = database.commit_workload(self.context.mod)
            for record in database.get_top_k(self.workload, 1 << 20):  # stored candidates are measured already
                cand = self._replay(record.trace, resample=False)
                if cand is not None:
                    self.measured.add(cand.key)

    def post_tuning(self) -> None:
        self.spaces, self.mutators = [], []
        self.database = self.cost_model = None

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        if self.trials >= self.max_trials or not self.spaces:
            return None
        n = min(self.per_iter, self.max_trials - self.trials)
        population, randoms = self._initial_population()
        scored = self._evolve(population)
        eps, source = self._exploration_rate(randoms)
        n_random = min(n, int(np.floor(eps * n + self.rng.random())))  # stochastic rounding: E = eps * n
        ranked = [
            c for c, _ in sorted((v for v in scored.values() if v[0].key not in self.measured), key=lambda v: -v[1])
        ]
        picks = ranked[: n - n_random]
        taken = {c.key for c in picks}
        n_model = len(picks)
        pool = [c for c in randoms if c.key not in taken and c.key not in self.measured]
        picks += [pool[int(i)] for i in self.rng.permutation(len(pool))[: n - len(picks)]]
        taken.update(c.key for c in picks)
        for c in ranked:  # too few random candidates left: fill up with the model's next best
            if len(picks) >= n:
                break
            if c.key not in taken:
                picks.append(c)
                taken.add(c.key)
                n_model += 1
        self.history.append(
            {
                "workload": self.context.task_name,
                "eps": eps,
                "eps_source": source,
                "n": n,
                "n_model": n_model,
                "n_random": len(picks) - n_model,
                "population": len(population),
            }
        )
        logger.info(
            "contextual evolutionary search: eps_t=%.3f (%s) -> %d model + %d random of %d",
            eps,
            source,
            n_model,
            len(picks) - n_model,
            n,
        )
        if not picks:
            return None
        self.measured.update(taken)
        return [c.measure_candidate() for c in picks]

    def notify_runner_results(self, measure_candidates: list, results: list) -> None:
        self.trials += len(results)

    def clone(self) -> ContextualEvolutionarySearch:
        return ContextualEvolutionarySearch(**dataclasses.asdict(self.params), history=self.history)

    # -- search ---------------------------------------------------------------------------------
    def _replay(self, trace: Any, resample: bool) -> _Candidate | None:
        """Apply a trace (fresh decisions when ``resample``) to the workload and run the postprocessors."""
        sch = tvm.s_tir.Schedule(self.context.mod, seed=int(self.rng.integers(1, 2**31 - 1)))
        try:
            decisions = {} if resample else trace.decisions
            tvm.s_tir.Trace(trace.insts, decisions).apply_to_schedule(sch, remove_postproc=True)
            pre_postproc = sch.trace.simplified(remove_postproc=True)
            sch.enter_postproc()
            if not all(pp.apply(sch) for pp in self.postprocs):
                return None
        except tvm.TVMError:  # decisions the schedule rejects: no candidate
            return None
        return _Candidate(sch, pre_postproc, int(tvm_ffi.structural_hash(sch.mod)))

    def _initial_population(self) -> tuple[list[_Candidate], list[_Candidate]]:
        """The database's best records of this workload, then random replays up to the population size; the
        second list holds the random ones that were never measured (the pool random picks come from)."""
        size = self.params.population_size
        population: list[_Candidate] = []
        seen: set[int] = set()
        if self.workload is not None:
            for record in self.database.get_top_k(self.workload, int(size * self.params.init_measured_ratio)):
                cand = self._replay(record.trace, resample=False)
                if cand is not None and cand.key not in seen:
                    population.append(cand)
                    seen.add(cand.key)
        randoms: list[_Candidate] = []
        fails = 0
        while len(population) < size and fails < self.params.max_fail_count * size:
            space = self.spaces[int(self.rng.integers(len(self.spaces)))]
            cand = self._replay(space, resample=True)
            if cand is None or cand.key in seen:
                fails += 1
                continue
            population.append(cand)
            seen.add(cand.key)
            if cand.key not in self.measured:
                randoms.append(cand)
        return population, randoms

    def _score(self, cands: list[_Candidate]) -> np.ndarray:
        if self.cost_model is None or not cands:
            return np.zeros(len(cands))
        scores = np.asarray(
            self.cost_model.predict(self.context, [c.measure_candidate() for c in cands]), dtype=np.float64
        )
        return np.where(np.isfinite(scores), scores, 0.0)

    def _mutate(self, parent: _Candidate) -> _Candidate | None:
        if not len(self.mutators):
            return None
        mutator = self.mutators[int(self.rng.choice(len(self.mutators), p=self.mutator_weights))]
        trace = mutator.apply(parent.trace)
        return None if trace is None else self._replay(trace, resample=False)

    def _evolve(self, population: list[_Candidate]) -> dict[int, tuple[_Candidate, float]]:
        """Every candidate scored on the way, by key; parents are drawn in proportion to their score."""
        scored: dict[int, tuple[_Candidate, float]] = {}
        current = population
        for generation in range(self.params.genetic_num_iters + 1):
            scores = self._score(current)
            for cand, score in zip(current, scores):
                scored[cand.key] = (cand, float(score))
            if generation == self.params.genetic_num_iters or not current:
                break
            weights = np.maximum(scores, 0.0) + 1e-12
            weights = weights / weights.sum()
            children: list[_Candidate] = []
            keys: set[int] = set()
            fails = 0
            while len(children) < len(current) and fails < self.params.max_fail_count * len(current):
                parent = current[int(self.rng.choice(len(current), p=weights))]
                mutate = self.rng.random() < self.params.genetic_mutate_prob
                child = self._mutate(parent) if mutate else parent
                if child is None or child.key in keys:
                    fails += 1
                    continue
                children.append(child)
                keys.add(child.key)
            current = children
        return scored

    def _exploration_rate(self, randoms: list[_Candidate]) -> tuple[float, str]:
        """eps_t from the cost model's uncertainty on random unmeasured candidates, or the fixed eps_greedy."""
        model = python_cost_model(self.cost_model)
        if model is None:
            return self.params.eps_greedy, "eps_greedy"
        unmeasured = [c for c in randoms if c.key not in self.measured]
        if not unmeasured:
            return 0.0, "no unmeasured candidates"
        context = [unmeasured[int(i)] for i in self.rng.permutation(len(unmeasured))[: self.params.n_context]]
        _, sigma = model.predict_mean_std(self.context, [c.measure_candidate() for c in context])
        return exploration_rate(np.asarray(sigma), float(model.best_throughput(self.context))), "uncertainty"
