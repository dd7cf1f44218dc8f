"""Proposing micro-kernels from the joint cost model: DietCode's evolutionary search, or every kernel scored.

A kernel's fitness is its best predicted quality over the sampled T (the best measured kernel's predicted cost
over its own), the largest over T, not the mean, since the dispatcher gives every T its own kernel. MetaSchedule's
``EvolutionarySearch`` evolves a population seeded with the best measured kernels, mutating one field at a time;
each sampled T then takes its predicted best and second best, and the rest of the batch goes by mean quality.
``search="exhaustive"`` scores the whole space instead (slow: every kernel's features are extracted).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import numpy as np

from ..search.optimizers import EvolutionarySearch
from ._cost import MicroKernelCostModel
from ._space import MicroKernel, MicroKernelSpace

__all__ = ["SEARCHES", "propose_kernels"]

SEARCHES = ("evolutionary", "exhaustive")


def _per_flop(model: MicroKernelCostModel, kernels: Sequence[MicroKernel], shapes: Sequence[int]) -> np.ndarray:
    return model.predict(kernels, shapes) / np.asarray([model.workload.flop(t) for t in shapes])


def propose_kernels(
    model: MicroKernelCostModel,
    space: MicroKernelSpace,
    shapes: Sequence[int],
    measured: Sequence[MicroKernel],
    n: int,
    exclusive: Collection[str],
    rng: np.random.Generator,
    search: str = "evolutionary",
    population: int = 128,
    generations: int = 4,
) -> list[MicroKernel]:
    """Up to ``n`` unmeasured kernels (keys not in ``exclusive``) for the next round; ``measured`` (best first)
    seed the population and set each shape's reference cost."""
    if search not in SEARCHES:
        raise ValueError(f"unknown micro-kernel search {search!r}; use one of {SEARCHES}")
    if not measured:
        return []
    reference = _per_flop(model, measured, shapes).min(axis=0)

    def fitness(kernels: Sequence[MicroKernel]) -> np.ndarray:
        return np.max(reference / _per_flop(model, kernels, shapes), axis=1)

    if search == "exhaustive":
        pool = [k for k in space.kernels if k.key not in exclusive]
    else:
        seeds: Callable[[int], list[MicroKernel]] = lambda k: list(measured[:k])
        es = EvolutionarySearch(space, rng, population_size=population, genetic_num_iters=generations, seeds=seeds)
        pool = es.find_maximums(fitness, population * (generations + 1), exclusive)
    if not pool:
        return []
    pred = _per_flop(model, pool, shapes)
    picks: dict[str, MicroKernel] = {}
    ranked = np.argsort(pred, axis=0)
    for rank in range(min(2, len(pool))):  # every shape's best before any shape's second best
        for col in range(pred.shape[1]):
            row = int(ranked[rank, col])
            picks.setdefault(pool[row].key, pool[row])
    for row in np.argsort(-np.mean(reference / pred, axis=1)):
        if len(picks) >= n:
            break
        picks.setdefault(pool[int(row)].key, pool[int(row)])
    return list(picks.values())[:n]
