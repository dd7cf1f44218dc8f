"""What a T the tuner did not sample votes on: predictions anchored to each kernel's timings (hand examples)."""

from __future__ import annotations

import numpy as np
import pytest

from adatune.dietcode import DietCodeTuner
from adatune.dietcode._select import calibrated_costs
from adatune.dietcode._tune import DISPATCH_COSTS


def test_calibration_interpolates_each_kernels_error_between_its_timings() -> None:
    ts = [1, 2, 3, 4]
    pred = np.array([[1.0, 1.0, 1.0, 1.0], [2.5, 2.5, 2.5, 2.5], [1.0, 2.0, 3.0, 4.0]])
    timed = np.array([[2.0, np.nan, np.nan, 4.0], [np.nan] * 4, [np.nan, 1.0, np.nan, np.nan]])
    got = calibrated_costs(pred, timed, ts)
    # kernel 0: measured 2x the model at T=1 and 4x at T=4; in between the ratio moves geometrically
    np.testing.assert_allclose(got[0], [2.0, 2 ** (4 / 3), 2 ** (5 / 3), 4.0])
    np.testing.assert_allclose(got[1], pred[1])  # never timed: the model's own prediction
    np.testing.assert_allclose(got[2], [0.5, 1.0, 1.5, 2.0])  # one timing: its ratio (0.5) everywhere
    votes = got.argmin(axis=0)
    assert list(votes) == [2, 2, 2, 2]  # the model alone would vote kernel 0 at T = 2, 3 (pred 1.0 < 2.0, 3.0, 2.5)


def test_calibration_keeps_the_timings_and_names_bad_shapes() -> None:
    ts = [5, 9, 20]
    pred = np.array([[3.0, 4.0, 5.0]])
    timed = np.array([[np.nan, 7.0, np.nan]])
    got = calibrated_costs(pred, timed, ts)
    assert got[0, 1] == 7.0
    np.testing.assert_allclose(got[0], pred[0] * 7.0 / 4.0)
    with pytest.raises(ValueError, match="matrices"):
        calibrated_costs(pred, timed[:, :2], ts)


def test_calibrated_is_a_declared_dispatch_cost() -> None:
    assert "calibrated" in DISPATCH_COSTS
    option = next(o for o in DietCodeTuner.OPTIONS if o.name == "dispatch_costs")
    assert "calibrated" in option.choices
