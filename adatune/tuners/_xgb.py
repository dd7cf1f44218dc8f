"""``XGBTuner``: AutoTVM's default model-based tuner, the baseline every new method is measured against."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..cost_models import XGBoostCostModel
from ..options import Option
from ..search.optimizers import SimulatedAnnealingOptimizer
from ..search.optimizers.exploration import EPS_GREEDY, default_eps_greedy
from ..task import TuningTask
from ._base import model_seed
from ._model_based import DIVERSITY_FILTER_RATIO, PLAN_SIZE, SAMPLER, ModelBasedTuner, Sampler

__all__ = ["XGBTuner"]


class XGBTuner(ModelBasedTuner):
    """XGBoost cost model + parallel simulated annealing (n_iter=500, parallel_size=128, early_stop=50,
    persistent), plan_size=64, epsilon-greedy 0.05. ``sampler="adaptive"`` uses ReLeASE's k-means sampling, whose
    centroids are the whole plan unless ``eps_greedy`` is given. AutoTVM as the 2020 papers ran it:
    ``loss_type="rank", feature_type="itervar"``."""

    OPTIONS = (
        PLAN_SIZE,
        *XGBoostCostModel.OPTIONS,
        Option.declare("optimizer", str, "model optimizer: parallel simulated annealing", choices=("sa",)),
        DIVERSITY_FILTER_RATIO,
        SAMPLER,
        EPS_GREEDY,
    )

    def __init__(
        self,
        task: TuningTask,
        plan_size: int = 64,
        feature_type: str = "knob",
        loss_type: str = "reg",
        num_threads: int | None = None,
        optimizer: str = "sa",
        diversity_filter_ratio: float | None = None,
        sampler: Sampler | str | None = None,
        eps_greedy: float | None = None,
        seed: int | None = None,
    ):
        cost_model = XGBoostCostModel(task, feature_type, loss_type, num_threads, model_seed(seed))
        super().__init__(
            task,
            cost_model,
            None,
            plan_size=plan_size,
            eps_greedy=default_eps_greedy(eps_greedy, sampler is not None),
            diversity_filter_ratio=diversity_filter_ratio,
            sampler=None,
            seed=seed,
        )
        self.model_optimizer = SimulatedAnnealingOptimizer(self.space, self.streams.search)
        self.sampler = make_sampler(sampler, task, self.streams.sampler)

    def load_history(self, records: Iterable[Any], min_seed_records: int = 500) -> int:
        """Take earlier records of this task (nothing is measured again); as AutoTVM's, with at least
        ``min_seed_records`` records of the task's template on its target, this workload's and others' (another
        model's layers in a tuning cache), also fit a base model that this tuner's model builds on and that, before
        the first fit, picks the first plan instead of random candidates. Returns how many records of this task
        were taken."""
        from ..records import as_records

        recs = list(as_records(records))
        n = super().load_history(recs, min_seed_records=1)
        model: Any = self.cost_model
        base = XGBoostCostModel(self.task, model.feature_type, model.loss_type, seed=model.params["seed"])
        if not base.fit_template_log(recs, self.plan_size, min_seed_records):
            return n
        model.load_basemodel(base)
        if self.train_ct == 0 and self.model_optimizer is not None:
            self.plan = self.model_optimizer.find_maximums(
                lambda cands: base.predict(self.featurize(cands)), self.plan_size, self.visited
            )
            self.plan_pt = 0
        return n


def make_sampler(sampler: Sampler | str | None, task: TuningTask, rng: np.random.Generator) -> Sampler | None:
    """A sampler by name ("adaptive": ReLeASE's k-means sampling), or the given one, or None."""
    if sampler is None or not isinstance(sampler, str):
        return sampler
    if sampler == "adaptive":
        from ..search.samplers import AdaptiveSampler

        return AdaptiveSampler(task.space, rng=rng)
    raise ValueError(f"unknown sampler {sampler!r}: use None or 'adaptive'")
