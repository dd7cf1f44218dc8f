"""The gap probe's whole-model accounting: per round, end to end over the estimate from that round's isolated
timings, computed from scripted timings (nothing timed)."""

from __future__ import annotations

import math

import pytest

from benchmarks.models.gap_probe import _round_ratio, _whole_model


def _task(hot: list[float], cold: list[float], own: list[float]) -> dict[str, list[float]]:
    return {"alone, hot": hot, "alone, cold": cold, "model's own, hot": own}


def test_each_round_is_compared_with_its_own_isolated_timings():
    # two rounds, the host twice as slow in the second: every timing doubles, so every round's ratio is the same
    tasks = {
        "dense": (12, _task([1e-3, 2e-3], [1.2e-3, 2.4e-3], [1.1e-3, 2.2e-3])),
        "softmax": (2, _task([5e-4, 1e-3], [5e-4, 1e-3], [5e-4, 1e-3])),
    }
    whole = {"end_to_end_s": [0.0143, 0.0286], "rest_s": [1e-3, 2e-3]}
    got = _whole_model(whole, tasks)
    assert got["estimate_hot_s"] == pytest.approx([12e-3 + 1e-3 + 1e-3, 24e-3 + 2e-3 + 2e-3])
    assert got["end_to_end_over_hot"] == pytest.approx(0.0143 / 0.014)
    assert got["end_to_end_over_hot_range"] == pytest.approx([0.0143 / 0.014] * 2)
    assert got["estimate_cold_s"] == pytest.approx([12 * 1.2e-3 + 1e-3 + 1e-3, 12 * 2.4e-3 + 2e-3 + 2e-3])
    assert got["end_to_end_over_own_hot"] == pytest.approx(0.0143 / (12 * 1.1e-3 + 1e-3 + 1e-3))


def test_a_task_that_failed_in_a_round_is_left_out_of_that_round_only():
    tasks = {
        "a": (1, _task([1.0, math.nan], [1.0, 1.0], [1.0, 1.0])),
        "b": (1, _task([2.0, 2.0], [2.0, 2.0], [2.0, 2.0])),
    }
    got = _whole_model({"end_to_end_s": [3.0, 3.0], "rest_s": [0.0, 0.0]}, tasks)
    assert got["estimate_hot_s"] == [3.0, 2.0]
    assert got["end_to_end_over_hot_range"] == pytest.approx([1.0, 1.5])


def test_round_ratio_pairs_readings_of_the_same_round():
    times = {"in model": [2.0, 4.0, math.nan], "alone": [1.0, 4.0, 1.0]}
    assert _round_ratio(times, "in model", "alone") == pytest.approx(1.5)  # rounds 0 and 1; round 2 failed
    assert math.isnan(_round_ratio({"x": [math.nan], "y": [1.0]}, "x", "y"))
