"""The one exploration policy: its rounding rule, fixed and contextual rates, and plans it fills."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adatune.search.optimizers import ExplorationPolicy, random_share


@pytest.mark.parametrize("eps, n", [(0.05, 16), (0.3, 10), (0.5, 8), (1.0, 7), (0.0, 9), (0.999, 3)])
def test_random_share_rounds_stochastically_to_eps_times_n(eps, n):
    rng = np.random.default_rng(0)
    draws = np.asarray([random_share(eps, n, rng) for _ in range(4000)])
    assert set(draws) <= {math.floor(eps * n), math.ceil(eps * n)}
    assert draws.mean() == pytest.approx(eps * n, abs=0.05)


def test_fixed_policy_plans_model_picks_first_then_random(matmul_task):
    space = matmul_task.space
    policy = ExplorationPolicy(eps_greedy=0.25)
    rng = np.random.default_rng(1)
    exclude = {str(i) for i in range(0, 50)}
    best = [space.get(i) for i in range(100, 140)]  # what a model optimizer would return, best first
    plan = policy.plan(space, rng, 16, exclude, lambda m: best[:m])
    n_model, n_random = policy.splits[-1]
    assert n_model + n_random == len(plan) == len({c.key for c in plan}) == 16
    assert n_random == 4 and [c.index for c in plan[:n_model]] == list(range(100, 112))
    assert not {str(c.key) for c in plan} & exclude and policy.history == [0.25]


def test_plan_tops_up_with_random_when_the_search_finds_too_few(matmul_task):
    policy = ExplorationPolicy(eps_greedy=0.0)
    plan = policy.plan(matmul_task.space, np.random.default_rng(2), 8, set(), lambda m: [matmul_task.space.get(3)])
    assert len(plan) == 8 and plan[0].index == 3 and policy.splits == [(1, 7)]


def test_contextual_rate_follows_the_models_uncertainty(matmul_task):
    class Model:
        best_flops = 10.0

        def __init__(self, sigma: float):
            self.sigma = sigma

        def predict_mean_std(self, xs):
            return np.zeros(len(xs)), np.full(len(xs), self.sigma)

    space = matmul_task.space
    for sigma, want in ((0.0, 0.0), (2.5, 0.25), (50.0, 1.0)):
        policy = ExplorationPolicy(model=Model(sigma), featurize=space.featurize, n_context=16)
        assert policy.rate(space, np.random.default_rng(0), set()) == pytest.approx(want)
    with pytest.raises(ValueError, match="featurize"):
        ExplorationPolicy(model=Model(1.0))
    with pytest.raises(ValueError, match="eps_greedy"):
        ExplorationPolicy(eps_greedy=1.5)
