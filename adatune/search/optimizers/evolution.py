"""MetaSchedule's evolutionary search (Shao et al., NeurIPS 2022) as a model optimizer over any candidate space.

A population of the best measured candidates (``init_measured_ratio``) and random samples evolves for
``genetic_num_iters`` generations: parents drawn in proportion to their score, each mutated with probability
``mutate_prob`` by the space's own mutation, duplicates dropped by key. It returns the best-scored unmeasured
candidates seen. ``TraceSearchTuner`` and ``ContextualEvolutionarySearch`` search with it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from ...options import Option
from ...space._candidate import CandidateSpace
from ._base import ModelOptimizer, ScoreFn

__all__ = ["EvolutionarySearch"]


class EvolutionarySearch(ModelOptimizer):
    """``seeds(n)`` returns up to ``n`` measured candidates, best first (none by default).

    ``randoms`` keeps the last call's random samples (unmeasured when drawn): a pool that callers use for
    RFEI's calibration sample without replaying more programs.
    """

    OPTIONS = (
        Option.declare("population_size", int, "evolutionary population", minimum=2),
        Option.declare(
            "init_measured_ratio",
            float,
            "share of the population seeded with the best measured",
            minimum=0.0,
            maximum=1.0,
        ),
        Option.declare("genetic_num_iters", int, "rounds of selection and mutation per plan", minimum=0),
        Option.declare("mutate_prob", float, "probability that a selected parent is mutated", minimum=0.0, maximum=1.0),
    )

    def __init__(
        self,
        space: CandidateSpace,
        rng: np.random.Generator,
        population_size: int = 128,
        init_measured_ratio: float = 0.2,
        genetic_num_iters: int = 3,
        mutate_prob: float = 0.85,
        seeds: Callable[[int], list[Any]] | None = None,
    ):
        self.space, self.rng = space, rng
        self.population_size = int(population_size)
        self.init_measured_ratio = float(init_measured_ratio)
        self.genetic_num_iters = int(genetic_num_iters)
        self.mutate_prob = float(mutate_prob)
        self.seeds = seeds or (lambda n: [])
        self.randoms: list[Any] = []

    def find_maximums(self, score: ScoreFn, num: int, exclusive: Collection[str]) -> list[Any]:
        n_best = round(self.init_measured_ratio * self.population_size)
        population = list(self.seeds(n_best))[:n_best]
        self.randoms = self.space.random_candidates(self.rng, self.population_size - len(population), exclude=exclusive)
        population += self.randoms
        scored: dict[str, tuple[float, Any]] = {}
        for generation in range(self.genetic_num_iters + 1):
            if not population:
                break
            scores = np.maximum(np.nan_to_num(np.asarray(score(population), dtype=np.float64)), 0.0)
            for cand, value in zip(population, scores):
                if str(cand.key) not in exclusive:
                    scored[str(cand.key)] = (float(value), cand)
            if generation == self.genetic_num_iters:
                break
            total = scores.sum()
            probs = scores / total if total > 0 else np.full(len(scores), 1.0 / len(scores))
            parents = [population[i] for i in self.rng.choice(len(population), size=self.population_size, p=probs)]
            mutate = self.rng.random(len(parents)) < self.mutate_prob
            children = iter(self.space.mutate([p for p, m in zip(parents, mutate) if m], self.rng))
            seen: set[str] = set()
            population = []
            for parent, m in zip(parents, mutate):
                child = next(children) if m else parent
                if str(child.key) not in seen:
                    seen.add(str(child.key))
                    population.append(child)
        ranked = sorted(scored.values(), key=lambda sc: -sc[0])
        return [cand for _, cand in ranked[:num]]
