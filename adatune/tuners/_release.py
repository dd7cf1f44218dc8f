"""``ReleaseTuner``: ReLeASE (Ahn et al., 2019; Chameleon, ICLR 2020) on the model-based tuning loop: a PPO agent
replaces simulated annealing, and adaptive sampling measures k-means representatives of its candidates instead of
the top ``plan_size`` (``sampler=None``: RL alone).
"""

from __future__ import annotations

from typing import Any

from ..cost_models import CostModel, XGBoostCostModel
from ..options import Option
from ..search.agents import PPOAgent
from ..search.optimizers.exploration import EPS_GREEDY, default_eps_greedy
from ..task import TuningTask
from ._base import model_seed
from ._model_based import PLAN_SIZE, SAMPLER, ModelBasedTuner, Sampler
from ._xgb import make_sampler

__all__ = ["ReleaseTuner"]


class ReleaseTuner(ModelBasedTuner):
    """PPO agent rewarded by ``cost_model`` (AutoTVM's XGBoost model by default; any ``CostModel``) with
    ``sampler="adaptive"`` (k-means on the agent's candidates) or ``None``. ``agent_options`` override the
    agent's settings (``PPOAgent``'s keyword arguments: paper hyperparameters, walkers, step cap)."""

    OPTIONS = (
        PLAN_SIZE,
        Option.declare("cost_model", object, "a CostModel instance (none: AutoTVM's XGBoost model)"),
        SAMPLER,
        EPS_GREEDY,
        *XGBoostCostModel.OPTIONS,
        Option.declare("agent_options", dict, 'PPOAgent keyword arguments, e.g. {"step_cap": 16}'),
    )

    def __init__(
        self,
        task: TuningTask,
        plan_size: int = 64,
        cost_model: CostModel | None = None,
        sampler: Sampler | str | None = "adaptive",
        eps_greedy: float | None = None,
        feature_type: str = "knob",
        loss_type: str = "reg",
        num_threads: int | None = None,
        agent_options: dict[str, Any] | None = None,
        seed: int | None = None,
    ):
        if cost_model is None:
            cost_model = XGBoostCostModel(task, feature_type, loss_type, num_threads, model_seed(seed))
        eps = default_eps_greedy(eps_greedy, sampler is not None)  # the centroids are the whole plan (Algorithm 2)
        super().__init__(task, cost_model, None, plan_size=plan_size, eps_greedy=eps, sampler=None, seed=seed)
        # the agent draws from its own stream, made after the first plan: every scheme of a seed measures
        # the same first plan whatever the agent consumes
        self.agent = PPOAgent(self.space, rng=self.streams.agent, **(agent_options or {}))  # type: ignore[arg-type]
        self.model_optimizer = self.agent
        self.sampler = make_sampler(sampler, task, self.streams.sampler)
