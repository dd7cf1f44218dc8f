"""``TraceSearchTuner``: MetaSchedule's evolutionary search (Shao et al., NeurIPS 2022) as an adatune tuner.

Every plan of ``plan_size`` candidates is chosen the way MetaSchedule's ``EvolutionarySearch`` chooses one:
an initial population of the best measured candidates (``init_measured_ratio``) and fresh random samples,
``genetic_num_iters`` rounds in which parents are drawn in proportion to the cost model's score and mutated
with probability ``mutate_prob`` (duplicates dropped by key), then the best-scored unmeasured candidates seen,
with a share of the unevolved random samples mixed in (epsilon-greedy). Before the first fit the plan is random.

The cost model sees the space's feature matrices (``space.featurize``): XGBoost (AutoTVM's) or AdaTune's random
forest with expected improvement. With RFEI and ``contextual=True`` the random share of each plan is AdaTune's
eps_t, the model's mean uncertainty over unmeasured samples relative to the best throughput, instead of a fixed
epsilon. The search uses only the ``CandidateSpace`` protocol, so it runs on knob spaces too, but it is made for
trace spaces (``adatune.trace``), whose mutations are TVM's mutators. It is registered as tuner ``"trace"``
(``create_tuner("trace", task)``, ``adatune tune --tuner trace``) with its options in ``_registry``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..cost_models import CostModel, RFEICostModel, XGBoostCostModel
from ..measure import MeasureInput, MeasureResult
from ..optimizers.contextual import exploration_rate
from ..task import TuningTask
from ._base import Tuner

__all__ = ["TraceSearchTuner"]

logger = logging.getLogger("adatune.tuner")

COST_MODELS = ("xgb", "rfei")
_POOL = 256  # random unmeasured candidates kept for RFEI's calibration and eps_t


class TraceSearchTuner(Tuner):
    """Evolutionary search with a cost model over ``task.space`` (see the module docstring).

    ``cost_model``: ``"xgb"``, ``"rfei"`` or a ``CostModel`` that fits and predicts on feature matrices.
    ``eps_greedy``: the fixed random share of a plan (default 0.05; 0 with RFEI and ``contextual``).
    """

    def __init__(
        self,
        task: TuningTask,
        cost_model: str | CostModel = "xgb",
        plan_size: int = 64,
        population_size: int = 128,
        init_measured_ratio: float = 0.2,
        genetic_num_iters: int = 3,
        mutate_prob: float = 0.85,
        eps_greedy: float | None = None,
        contextual: bool = True,
        n_context: int = 64,
        n_trees: int = 100,
        uncertainty: str = "forestci",
        num_threads: int | None = None,
        seed: int | None = None,
    ):
        super().__init__(task, seed)
        for name, value, low in (
            ("plan_size", plan_size, 1),
            ("population_size", population_size, 2),
            ("genetic_num_iters", genetic_num_iters, 0),
            ("n_context", n_context, 1),
        ):
            if int(value) < low:
                raise ValueError(f"{name} must be at least {low}, got {value}")
        for share, ratio in (
            ("init_measured_ratio", init_measured_ratio),
            ("mutate_prob", mutate_prob),
            ("eps_greedy", 0.0 if eps_greedy is None else eps_greedy),
        ):
            if not 0.0 <= float(ratio) <= 1.0:
                raise ValueError(f"{share} must be in [0, 1], got {ratio}")
        self.plan_size = int(plan_size)
        self.population_size = int(population_size)
        self.init_measured_ratio = float(init_measured_ratio)
        self.genetic_num_iters = int(genetic_num_iters)
        self.mutate_prob = float(mutate_prob)
        self.n_context = int(n_context)
        self.cost_model = self._make_model(cost_model, n_trees, uncertainty, num_threads, seed)
        self.contextual = bool(contextual) and hasattr(self.cost_model, "predict_mean_std")
        self.eps_greedy = float(eps_greedy) if eps_greedy is not None else (0.0 if self.contextual else 0.05)
        self.eps_history: list[float] = []  # the random share of every model-guided plan
        self.plan: list[Any] = []
        self.plan_pt = 0
        self._cands: list[Any] = []  # everything measured (or loaded), in order
        self._ys: list[float] = []
        self._fit_n = 0
        self._pool: list[Any] = []  # random unmeasured samples, newest first

    def _make_model(
        self, cost_model: str | CostModel, n_trees: int, uncertainty: str, num_threads: int | None, seed: int | None
    ) -> CostModel:
        if isinstance(cost_model, CostModel):
            return cost_model
        if cost_model == "xgb":
            return XGBoostCostModel(None, num_threads=num_threads, seed=seed)
        if cost_model == "rfei":
            return RFEICostModel(
                None,
                n_trees=n_trees,
                uncertainty=uncertainty,
                num_threads=num_threads,
                seed=seed,
                reference=self._reference_features,
            )
        raise ValueError(f"unknown cost_model {cost_model!r}: use one of {COST_MODELS} or a CostModel instance")

    # -- choosing ---------------------------------------------------------------------------------
    def next_batch(self, batch_size: int) -> list[Any]:
        out: list[Any] = []
        taken: set[str] = set()
        fresh_plan_added = True  # a plan that adds nothing new means the space has no more to give this batch
        while len(out) < batch_size:
            if self.plan_pt >= len(self.plan):
                if not fresh_plan_added:
                    break
                self.plan, self.plan_pt = self._new_plan(), 0
                fresh_plan_added = False
                if not self.plan:
                    break
            cand = self.plan[self.plan_pt]
            self.plan_pt += 1
            if cand.key not in self.visited and cand.key not in taken:
                taken.add(cand.key)
                out.append(cand)
                fresh_plan_added = True
        return out

    def _new_plan(self) -> list[Any]:
        refit = len(self._ys) > self._fit_n and max(self._ys, default=0.0) > 0
        if self._fit_n == 0 and not refit:  # nothing to learn from yet: a random plan
            return self.space.random_candidates(self.streams.plan, self.plan_size, exclude=self.visited)
        randoms = self.space.random_candidates(self.streams.search, self.population_size, exclude=self.visited)
        self._pool = (randoms + [c for c in self._pool if c.key not in self.visited])[:_POOL]
        if refit:  # after the random draws, so RFEI's calibration sample is fresh
            self._fit_n = len(self._ys)
            self.cost_model.fit(self.space.featurize(self._cands), self._ys, self.plan_size)
        scored = self._evolve(randoms)
        eps = self._exploration_rate()
        self.eps_history.append(eps)
        best = [c for _, c in sorted(scored.values(), key=lambda sc: -sc[0])]
        plan: list[Any] = []
        keys: set[str] = set()
        i_best = i_rand = 0
        rng = self.streams.explore
        while len(plan) < self.plan_size and (i_best < len(best) or i_rand < len(randoms)):
            if (rng.random() < eps and i_rand < len(randoms)) or i_best >= len(best):
                cand, i_rand = randoms[i_rand], i_rand + 1
            else:
                cand, i_best = best[i_best], i_best + 1
            if cand.key not in keys:
                keys.add(cand.key)
                plan.append(cand)
        logger.info(
            "trace search plan %d: eps=%.3f, %d candidates (%d scored)",
            len(self.eps_history),
            eps,
            len(plan),
            len(scored),
        )
        return plan

    def _evolve(self, randoms: list[Any]) -> dict[str, tuple[float, Any]]:
        """Evolve the population; returns every unmeasured candidate seen, by key, with its score."""
        measured = [i for i in np.argsort(-np.asarray(self._ys), kind="stable") if self._ys[i] > 0]
        n_best = round(self.init_measured_ratio * self.population_size)
        population = [self._cands[i] for i in measured[:n_best]] + randoms[: self.population_size - n_best]
        scored: dict[str, tuple[float, Any]] = {}
        rng = self.streams.search
        for it in range(self.genetic_num_iters + 1):
            if not population:
                break
            scores = np.maximum(
                np.nan_to_num(np.asarray(self.cost_model.predict(self.space.featurize(population)), dtype=np.float64)),
                0.0,
            )
            for cand, score in zip(population, scores):
                if cand.key not in self.visited:
                    scored[cand.key] = (float(score), cand)
            if it == self.genetic_num_iters:
                break
            probs = scores / scores.sum() if scores.sum() > 0 else np.full(len(scores), 1.0 / len(scores))
            parents = [population[i] for i in rng.choice(len(population), size=self.population_size, p=probs)]
            mutate = rng.random(len(parents)) < self.mutate_prob
            children = iter(self.space.mutate([p for p, m in zip(parents, mutate) if m], rng))
            seen: set[str] = set()
            population = []
            for parent, m in zip(parents, mutate):
                child = next(children) if m else parent
                if child.key not in seen:
                    seen.add(child.key)
                    population.append(child)
        return scored

    def _exploration_rate(self) -> float:
        """AdaTune's eps_t from the model's uncertainty on unmeasured samples, else the fixed eps_greedy."""
        if not self.contextual:
            return self.eps_greedy
        context = [c for c in self._pool if c.key not in self.visited][: self.n_context]
        if not context:
            return 0.0
        _, sigma = self.cost_model.predict_mean_std(self.space.featurize(context))  # type: ignore[attr-defined]
        return exploration_rate(sigma, float(self.cost_model.best_flops))  # type: ignore[attr-defined]

    def _reference_features(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """RFEI's calibration sample: features of random unmeasured candidates drawn during the search."""
        pool = [c for c in self._pool if c.key not in self.visited]
        if len(pool) > n:
            pool = [pool[i] for i in rng.choice(len(pool), size=n, replace=False)]
        return self.space.featurize(pool)

    # -- learning ---------------------------------------------------------------------------------
    def learn(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        for inp, res in zip(inputs, results):
            self._cands.append(inp.config)
            self._ys.append(res.flops(self.task.flop))
