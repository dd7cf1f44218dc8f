"""Model optimizers: search the config space for what the cost model scores best."""

from ._base import ModelOptimizer, ScoreFn
from ._sa import SimulatedAnnealingOptimizer
from .contextual import ContextualSimulatedAnnealing, exploration_rate

__all__ = [
    "ModelOptimizer",
    "ScoreFn",
    "SimulatedAnnealingOptimizer",
    "ContextualSimulatedAnnealing",
    "exploration_rate",
]
