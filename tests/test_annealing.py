"""The annealer anneals on any score scale: with ``temp_scale="spread"`` the walk does not depend on the scale of the
scores, accepts worse moves often at the start and is greedy at the end; AutoTVM's absolute rule on EI's scale
(about 1e-5) is a random walk, which is the defect the spread unit fixes."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from adatune.search.optimizers import SimulatedAnnealingOptimizer
from adatune.search.optimizers._sa import score_spread
from adatune.space import CandidateSpace

N = 400
LANDSCAPE = np.random.default_rng(7).normal(size=N)  # a rugged 1-D ring: many worse neighbours everywhere


@dataclass(frozen=True)
class Point:
    i: int

    @property
    def key(self) -> str:
        return str(self.i)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "ring", "i": self.i}


class Ring(CandidateSpace):
    """Points 0..N-1 on a ring; a move is one step left or right. Records every proposal it makes."""

    kind = "ring"

    def __init__(self) -> None:
        self.proposals: list[list[Point]] = []

    @property
    def size(self) -> int:
        return N

    def random_candidates(self, rng: np.random.Generator, n: int, exclude: Collection[str] = ()) -> list[Any]:
        free = [i for i in range(N) if str(i) not in exclude]
        return [Point(int(i)) for i in rng.choice(free, size=min(n, len(free)), replace=False)]

    def mutate(self, candidates: Sequence[Any], rng: np.random.Generator) -> list[Any]:
        out = [Point(int((c.i + rng.choice((-1, 1))) % N)) for c in candidates]
        self.proposals.append(out)
        return out

    def featurize(self, candidates: Sequence[Any]) -> np.ndarray:
        return np.asarray([[c.i] for c in candidates], dtype=np.float32)

    def decode(self, data: dict[str, Any]) -> Any:
        return Point(int(data["i"]))


def walk(scale: float, temp_scale: str, n_iter: int = 200, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """The keys the chains visited, and per step the share of worse proposals that were accepted (NaN: none)."""
    space = Ring()
    sa = SimulatedAnnealingOptimizer(
        space, np.random.default_rng(seed), n_iter=n_iter, parallel_size=64, early_stop=10 * n_iter,
        temp_scale=temp_scale,
    )  # fmt: skip
    sa.find_maximums(lambda pts: scale * LANDSCAPE[[p.i for p in pts]], 8, set())
    traj = sa.trajectory()
    chains = 64
    shares = []
    for k, proposed in enumerate(space.proposals):
        before, after = traj[k * chains : (k + 1) * chains], traj[(k + 1) * chains : (k + 2) * chains]
        worse = [(a, p) for b, a, p in zip(before, after, proposed) if LANDSCAPE[p.i] < LANDSCAPE[b.i]]
        shares.append(np.mean([a == p for a, p in worse]) if worse else np.nan)
    return [p.key for p in traj], np.asarray(shares)


def test_the_spread_unit_takes_the_same_walk_on_any_score_scale() -> None:
    keys = [walk(scale, "spread")[0] for scale in (1e-5, 1e-2, 1e3)]
    assert keys[0] == keys[1] == keys[2]


def test_the_spread_unit_explores_at_the_start_and_is_greedy_at_the_end() -> None:
    _, shares = walk(1e-5, "spread")
    early, late = np.nanmean(shares[:20]), np.nanmean(shares[-10:])
    assert early > 0.2, f"only {early:.2f} of worse moves accepted in the first 20 steps"
    assert late < 0.05 and late < early / 5, f"{late:.2f} of worse moves still accepted in the last 10 steps"


def test_the_absolute_rule_on_a_tiny_scale_is_a_random_walk() -> None:
    """The defect the spread unit fixes: AutoTVM's t (1 -> 0) against EI-sized score differences."""
    _, shares = walk(1e-5, "absolute")
    assert np.nanmean(shares[-10:]) > 0.9


def test_the_absolute_rule_on_its_own_scale_still_anneals() -> None:
    _, shares = walk(1.0, "absolute")
    assert np.nanmean(shares[:20]) > 0.2 and np.nanmean(shares[-10:]) < 0.05


def test_score_spread_falls_back_to_one_where_the_scores_give_no_spread() -> None:
    assert score_spread(np.array([2.0, 4.0])) == pytest.approx(1.0)
    assert score_spread(np.array([1e-4, 3e-4, np.nan, -np.inf])) == pytest.approx(1e-4)
    for flat in (np.array([]), np.array([5.0]), np.array([3.0, 3.0, 3.0]), np.array([np.nan, np.inf])):
        assert score_spread(flat) == 1.0


def test_an_unknown_temperature_scale_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="temp_scale"):
        SimulatedAnnealingOptimizer(Ring(), np.random.default_rng(0), temp_scale="rank")


def test_every_call_counts_its_steps() -> None:
    """ReLeASE counts search cost in steps: each call's are kept, as the PPO agent keeps its own."""
    sa = SimulatedAnnealingOptimizer(Ring(), np.random.default_rng(0), n_iter=30, parallel_size=8, early_stop=5)
    for _ in range(3):
        sa.find_maximums(lambda pts: LANDSCAPE[[p.i for p in pts]], 4, set())
    assert len(sa.steps_history) == 3 and sa.steps_history[-1] == sa.last_steps
    assert all(5 <= s <= 30 for s in sa.steps_history)
