"""``RFEITuner``: AdaTune's tuner, a random-forest expected-improvement model searched by contextual simulated
annealing.
"""

from __future__ import annotations

from ..cost_models import RFEICostModel
from ..options import Option
from ..search.optimizers import ExplorationPolicy, SimulatedAnnealingOptimizer
from ..search.optimizers.exploration import EPS_GREEDY, N_CONTEXT
from ..task import TuningTask
from ._base import model_seed
from ._model_based import PLAN_SIZE, ModelBasedTuner

CONTEXTUAL = Option.declare("contextual", bool, "random share eps_t from the model's uncertainty (AdaTune)")

__all__ = ["CONTEXTUAL", "RFEITuner"]


class RFEITuner(ModelBasedTuner):
    """Random forest (``n_trees``) with forestci or per-tree uncertainty; simulated annealing maximises expected
    improvement. ``contextual=True`` (AdaTune): each plan's random share is eps_t, the model's mean uncertainty over
    ``n_context`` unmeasured configs; ``False``: AutoTVM's fixed ``eps_greedy``, the paper's "RFEI+SA" ablation arm.
    """

    OPTIONS = (
        PLAN_SIZE,
        RFEICostModel.option("n_trees"),
        RFEICostModel.option("uncertainty"),
        CONTEXTUAL,
        N_CONTEXT,
        RFEICostModel.option("feature_type"),
        RFEICostModel.option("calibrate"),
        RFEICostModel.option("acquisition"),
        RFEICostModel.option("recalibrate"),
        EPS_GREEDY,
        RFEICostModel.option("num_threads"),
    )

    def __init__(
        self,
        task: TuningTask,
        plan_size: int = 64,
        n_trees: int = 100,
        uncertainty: str = "forestci",
        contextual: bool = True,
        n_context: int = 64,
        feature_type: str = "knob",
        calibrate: bool = True,
        acquisition: str = "ei",
        recalibrate: bool = False,
        eps_greedy: float | None = None,
        num_threads: int | None = None,
        seed: int | None = None,
    ):
        if contextual and eps_greedy:
            raise ValueError("eps_greedy is the fixed random share without contextual exploration: pass one of them")
        cost_model = RFEICostModel(
            task,
            n_trees=n_trees,
            uncertainty=uncertainty,
            feature_type=feature_type,
            calibrate=calibrate,
            num_threads=num_threads,
            seed=model_seed(seed),
            acquisition=acquisition,
            recalibrate=recalibrate,
        )
        exploration = (
            ExplorationPolicy(model=cost_model, featurize=cost_model.features, n_context=n_context)
            if contextual
            else ExplorationPolicy(0.05 if eps_greedy is None else eps_greedy)
        )
        super().__init__(task, cost_model, None, plan_size=plan_size, seed=seed, exploration=exploration)
        self.contextual = contextual
        # t in units of the chains' score spread: EI over the best throughput is ~1e-5..1e-2, on which AutoTVM's
        # absolute rule accepts every move (a random walk); the papers state no temperature (see optimizers/_sa.py)
        self.model_optimizer = SimulatedAnnealingOptimizer(self.space, self.streams.search, temp_scale="spread")

    @property
    def eps_history(self) -> list[float]:
        """eps_t of every refit so far (empty without contextual exploration)."""
        return list(self.exploration.history) if self.contextual else []
