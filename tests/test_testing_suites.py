"""adatune.testing's suites catch a broken piece and say which check it broke (the shipped pieces pass them in
the conformance tests; here a tuner that ignores its seed and a cost model that ranks backwards fail them)."""

from __future__ import annotations

import numpy as np
import pytest

import adatune.testing
from adatune.cost_models import XGBoostCostModel
from adatune.tuners import RandomTuner


class BackwardsModel(XGBoostCostModel):
    """Learns as XGBoost does, then calls the slowest fastest."""

    def predict(self, xs):
        return -np.asarray(super().predict(xs))


def test_a_tuner_that_ignores_its_seed_fails_by_name():
    with pytest.raises(AssertionError, match="tuner check 'same_seed_same_trajectory' failed: two runs with seed 7"):
        adatune.testing.check_tuner(lambda task, seed: RandomTuner(task))


def test_a_cost_model_that_ranks_backwards_fails_by_name():
    with pytest.raises(AssertionError, match="cost-model check 'ranks_held_out_points' failed: the model's top 10"):
        adatune.testing.check_cost_model(lambda seed, task: BackwardsModel(task, seed=seed))
