"""AdaTune's contextual simulated annealing: explore as much as the cost model is unsure.

AutoTVM spends a fixed 5% of every plan on random configs. AdaTune (NeurIPS 2020, sec. 4.2) instead sets the
exploration rate from the model's own uncertainty after each refit: draw K configs that were never measured,

    eps_t = mean(sigma(x_k)) / f(x+), clamped to [0, 1],

and fill the next plan of b configs with (1 - eps_t) * b of simulated annealing's best expected-improvement
candidates and eps_t * b random unmeasured configs. Early on, when the forest knows little, plans are mostly
random; as it learns, they become mostly exploitation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol

import numpy as np

from ..space._candidate import CandidateSpace
from ._base import ModelOptimizer, ScoreFn
from ._sa import SimulatedAnnealingOptimizer

__all__ = ["ContextualSimulatedAnnealing", "UncertaintyModel", "exploration_rate"]

logger = logging.getLogger("adatune.optimizer")


class UncertaintyModel(Protocol):
    """What the optimizer needs from the cost model (``RFEICostModel`` provides it)."""

    best_flops: float

    def predict_mean_std(self, xs: Any) -> tuple[np.ndarray, np.ndarray]: ...


def exploration_rate(sigma: np.ndarray, best_flops: float) -> float:
    """eps_t = mean sigma / best measured throughput, clamped to [0, 1] (1 when nothing is known yet)."""
    sigma = np.asarray(sigma, dtype=np.float64)
    if not best_flops > 0 or len(sigma) == 0:
        return 1.0
    eps = float(np.mean(sigma)) / float(best_flops)
    return float(np.clip(eps, 0.0, 1.0)) if np.isfinite(eps) else 1.0


class ContextualSimulatedAnnealing(ModelOptimizer):
    """Simulated annealing on the score (expected improvement) plus an uncertainty-driven random share.

    ``eps_history`` holds eps_t of every call (one per refit); each is also logged at INFO level.
    Extra keyword arguments go to the underlying ``SimulatedAnnealingOptimizer``.
    """

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
        if n_context < 1:
            raise ValueError(f"n_context must be at least 1, got {n_context}")
        self.space, self.rng, self.model, self.featurize = space, rng, model, featurize
        self.explore_rng = explore_rng if explore_rng is not None else rng
        self.n_context = int(n_context)
        self.sa = SimulatedAnnealingOptimizer(space, rng, **sa_kwargs)  # type: ignore[arg-type]
        self.eps_history: list[float] = []

    @property
    def eps(self) -> float | None:
        """The latest exploration rate."""
        return self.eps_history[-1] if self.eps_history else None

    def exploration_rate(self, exclusive: Collection[str]) -> float:
        """eps_t from K random candidates whose keys are not in ``exclusive`` (the measured ones)."""
        context = self.space.random_candidates(self.explore_rng, self.n_context, exclude=exclusive)
        if not context:
            return 0.0
        _, sigma = self.model.predict_mean_std(self.featurize(context))
        return exploration_rate(sigma, self.model.best_flops)

    def find_maximums(self, score: ScoreFn, num: int, exclusive: Collection[str]) -> list[Any]:
        eps = self.exploration_rate(exclusive)
        self.eps_history.append(eps)
        n_random = int(round(eps * num))
        picked = self.sa.find_maximums(score, num - n_random, exclusive) if num - n_random > 0 else []
        # random share, topped up if annealing found fewer distinct candidates than asked
        taken = set(exclusive)
        taken.update(str(p.key) for p in picked)
        randoms = self.space.random_candidates(self.explore_rng, num - len(picked), exclude=taken)
        logger.info(
            "contextual SA round %d: eps_t=%.3f -> %d annealing + %d random of %d",
            len(self.eps_history),
            eps,
            len(picked),
            len(randoms),
            num,
        )
        return picked + randoms
