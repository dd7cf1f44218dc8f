"""``TraceSearchTuner`` (tuner ``"trace"``): MetaSchedule's evolutionary search (Shao et al., NeurIPS 2022) as the
model optimizer of the model-based loop, with XGBoost or RFEI (contextual: AdaTune's eps_t) as its cost model.
It runs on any ``CandidateSpace`` but is made for trace spaces.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..cost_models import COST_MODELS, CostModel, RFEICostModel, create_cost_model
from ..options import Option
from ..search.optimizers import EvolutionarySearch, ExplorationPolicy
from ..search.optimizers.exploration import EPS_GREEDY, N_CONTEXT
from ..task import TuningTask
from ._base import model_seed
from ._model_based import PLAN_SIZE, ModelBasedTuner
from ._rfei import CONTEXTUAL

__all__ = ["TraceSearchTuner"]


class TraceSearchTuner(ModelBasedTuner):
    """Evolutionary search with a cost model over ``task.space`` (see the module docstring). ``cost_model``: a name
    from ``adatune.cost_models.COST_MODELS`` or a ``CostModel``; ``eps_greedy``: the fixed random share of a plan,
    used unless RFEI explores contextually.
    """

    OPTIONS = (
        Option.declare(
            "cost_model",
            str,
            "cost model on the space's features (adatune.cost_models.COST_MODELS)",
            choices=tuple(COST_MODELS),
            objects=True,
        ),
        PLAN_SIZE,
        *EvolutionarySearch.OPTIONS,
        EPS_GREEDY,
        CONTEXTUAL,
        N_CONTEXT,
        RFEICostModel.option("n_trees"),
        RFEICostModel.option("uncertainty"),
        RFEICostModel.option("num_threads"),
    )

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
        model = self._make_model(cost_model, n_trees, uncertainty, num_threads, model_seed(seed))
        self.contextual = bool(contextual) and hasattr(model, "predict_mean_std")
        if self.contextual and eps_greedy:
            raise ValueError("eps_greedy is the fixed random share without contextual exploration: pass one of them")
        exploration = (
            ExplorationPolicy(model=model, featurize=task.space.featurize, n_context=n_context)  # type: ignore[arg-type]
            if self.contextual
            else ExplorationPolicy(0.05 if eps_greedy is None else eps_greedy)
        )
        super().__init__(task, model, None, plan_size=plan_size, seed=seed, exploration=exploration)
        self.model_optimizer = self.evolution = EvolutionarySearch(
            self.space,
            self.streams.search,
            population_size=population_size,
            init_measured_ratio=init_measured_ratio,
            genetic_num_iters=genetic_num_iters,
            mutate_prob=mutate_prob,
            seeds=self._best_measured,
        )

    def _make_model(
        self, cost_model: str | CostModel, n_trees: int, uncertainty: str, num_threads: int | None, seed: int
    ) -> CostModel:
        if isinstance(cost_model, CostModel):
            return cost_model
        if cost_model not in COST_MODELS:
            raise ValueError(
                f"unknown cost_model {cost_model!r}: use one of {', '.join(COST_MODELS)} or a CostModel instance"
            )
        options: dict[str, Any] = {"num_threads": num_threads}
        if cost_model.startswith("rfei"):
            options.update(n_trees=n_trees, reference=self._reference_features)
            if cost_model == "rfei" and uncertainty != "forestci":  # the registry names each uncertainty source
                cost_model = f"rfei-{uncertainty}"
        return create_cost_model(cost_model, None, seed=seed, **options)

    def _best_measured(self, n: int) -> list[Any]:
        """Up to ``n`` measured candidates that ran, fastest first: the evolution's seeds."""
        order = [i for i in np.argsort(-np.asarray(self.ys), kind="stable") if self.ys[i] > 0]
        return [self.xs[i] for i in order[:n]]

    def _reference_features(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """RFEI's calibration sample: random unmeasured candidates the last search drew (no extra replays)."""
        pool = [c for c in self.evolution.randoms if c.key not in self.visited]
        if not pool:
            pool = self.space.random_candidates(rng, n, exclude=self.visited)
        if len(pool) > n:
            pool = [pool[i] for i in rng.choice(len(pool), size=n, replace=False)]
        return self.space.featurize(pool)
