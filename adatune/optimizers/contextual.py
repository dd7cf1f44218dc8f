"""AdaTune's contextual simulated annealing as one model optimizer: simulated annealing on the score (expected
improvement) plus the uncertainty-driven random share of ``ExplorationPolicy``.

The tuners split their plans through the policy themselves (``RFEITuner`` passes a contextual one); this class
composes the same two parts for callers who want AdaTune's optimizer alone behind ``find_maximums``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np

from ..space._candidate import CandidateSpace
from ._base import ModelOptimizer, ScoreFn
from ._sa import SimulatedAnnealingOptimizer
from .exploration import ExplorationPolicy, UncertaintyModel

__all__ = ["ContextualSimulatedAnnealing"]


class ContextualSimulatedAnnealing(ModelOptimizer):
    """Simulated annealing plus eps_t random candidates; ``eps_history`` holds eps_t of every call.
    Extra keyword arguments go to the underlying ``SimulatedAnnealingOptimizer``."""

    def __init__(
        self,
        space: CandidateSpace,
        rng: np.random.Generator,
        model: UncertaintyModel,
        featurize: Callable[[Sequence[Any]], np.ndarray],
        n_context: int = 64,
        explore_rng: np.random.Generator | None = None,
        **sa_kwargs: object,
    ):
        self.space = space
        self.explore_rng = explore_rng if explore_rng is not None else rng
        self.policy = ExplorationPolicy(model=model, featurize=featurize, n_context=n_context)
        self.sa = SimulatedAnnealingOptimizer(space, rng, **sa_kwargs)  # type: ignore[arg-type]

    @property
    def eps_history(self) -> list[float]:
        return self.policy.history

    def exploration_rate(self, exclusive: Collection[str]) -> float:
        """eps_t from random candidates whose keys are not in ``exclusive`` (the measured ones)."""
        return self.policy.rate(self.space, self.explore_rng, exclusive)

    def find_maximums(self, score: ScoreFn, num: int, exclusive: Collection[str]) -> list[Any]:
        return self.policy.plan(
            self.space, self.explore_rng, num, exclusive, lambda m: self.sa.find_maximums(score, m, exclusive)
        )

    def trajectory(self) -> list[Any]:
        return self.sa.trajectory()
