"""``XGBTuner``: AutoTVM's default model-based tuner, the baseline every new method is measured against."""
from __future__ import annotations

from ..cost_models import XGBoostCostModel
from ..optimizers import SimulatedAnnealingOptimizer
from ..task import Task
from ._model_based import ModelBasedTuner, Sampler

__all__ = ["XGBTuner"]


class XGBTuner(ModelBasedTuner):
    """XGBoost cost model + parallel simulated annealing (n_iter=500, parallel_size=128, early_stop=50,
    persistent), plan_size=64, epsilon-greedy 0.05. ``sampler="adaptive"`` uses ReLeASE's k-means sampling."""

    def __init__(self, task: Task, plan_size: int = 64, feature_type: str = "knob", loss_type: str = "reg",
                 num_threads: int | None = None, optimizer: str = "sa", diversity_filter_ratio: float | None = None,
                 sampler: Sampler | str | None = None, eps_greedy: float = 0.05, seed: int | None = None):
        cost_model = XGBoostCostModel(task, feature_type=feature_type, loss_type=loss_type,
                                      num_threads=num_threads, seed=seed)
        super().__init__(task, cost_model, None, plan_size=plan_size, eps_greedy=eps_greedy,  # type: ignore[arg-type]
                         diversity_filter_ratio=diversity_filter_ratio, sampler=None, seed=seed)
        if optimizer != "sa":
            raise ValueError(f"unknown optimizer {optimizer!r}: XGBTuner supports 'sa'")
        self.model_optimizer = SimulatedAnnealingOptimizer(self.space, self.rng)
        self.sampler = _make_sampler(sampler, task, self.rng)


def _make_sampler(sampler: Sampler | str | None, task: Task, rng: object) -> Sampler | None:
    if sampler is None or not isinstance(sampler, str):
        return sampler
    if sampler == "adaptive":
        from ..samplers import AdaptiveSampler  # ReLeASE's k-means adaptive sampling

        return AdaptiveSampler(task.config_space, rng=rng)
    raise ValueError(f"unknown sampler {sampler!r}: use None or 'adaptive'")
