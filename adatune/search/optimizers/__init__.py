"""Model optimizers: search the candidate space for what the cost model scores best, and the one exploration
policy that decides how much of each plan is random."""

from ._base import ModelOptimizer, ScoreFn
from ._sa import TEMP_SCALES, SimulatedAnnealingOptimizer
from .evolution import EvolutionarySearch
from .exploration import ExplorationPolicy, UncertaintyModel, default_eps_greedy, exploration_rate, random_share

__all__ = [
    "ModelOptimizer",
    "ScoreFn",
    "SimulatedAnnealingOptimizer",
    "TEMP_SCALES",
    "EvolutionarySearch",
    "ExplorationPolicy",
    "UncertaintyModel",
    "default_eps_greedy",
    "exploration_rate",
    "random_share",
]
