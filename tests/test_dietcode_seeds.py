"""Combining DietCode benchmark runs over seeds: each goal's geometric mean, its interval and the gates."""

from __future__ import annotations

import json
import math
import os

import pytest

from benchmarks.dietcode.seeds import combine, main


def _run(speed: float, vs_ps: float, below: list[int], passed: bool) -> dict:
    goal = {"workload": "scores", "speed_vs_torch_geomean": speed, "speed_vs_torch_worst": 0.8,
            "t_below_0_9": below, "vs_per_shape_at_tuned_t": vs_ps, "tuning_time_share": 0.05}  # fmt: skip
    return {"goals": [goal], "meta": {"noise_gate": {"scores": {"passed": passed, "drift": 1.0}}}}


def test_each_goal_is_a_geomean_over_the_runs_with_its_interval() -> None:
    out = combine([_run(1.2, 0.9, [1], True), _run(1.0, 1.1, [], False), _run(1.1, 1.0, [2, 3], True)])["scores"]
    speed = out["speed_vs_torch_geomean"]
    assert speed["geomean"] == pytest.approx((1.2 * 1.0 * 1.1) ** (1 / 3))
    lo, hi = speed["ci95"]
    assert lo < speed["geomean"] < hi and speed["per_run"] == [1.2, 1.0, 1.1]
    assert out["vs_per_shape_at_tuned_t"]["geomean"] == pytest.approx((0.9 * 1.1 * 1.0) ** (1 / 3))
    assert out["t_below_0_9"] == [1, 0, 2] and out["gates"] == [True, False, True]


def test_a_run_without_the_per_shape_arm_is_left_out_of_that_goal_only() -> None:
    runs = [_run(1.2, 0.9, [], True), _run(1.0, 1.1, [], True)]
    runs[1]["goals"][0].pop("vs_per_shape_at_tuned_t")
    out = combine(runs)["scores"]
    assert out["vs_per_shape_at_tuned_t"]["per_run"] == [0.9]
    assert math.isnan(out["vs_per_shape_at_tuned_t"]["ci95"][0])  # one value: no interval
    assert out["speed_vs_torch_geomean"]["per_run"] == [1.2, 1.0]


def test_the_command_reads_run_folders_and_their_gates(tmp_path: os.PathLike) -> None:
    dirs = []
    for i, (speed, passed) in enumerate([(1.2, True), (1.0, False)]):
        d = os.path.join(tmp_path, f"run{i}")
        os.makedirs(d)
        with open(os.path.join(d, "results.json"), "w") as f:
            json.dump(_run(speed, 1.0, [], passed), f)
        dirs.append(d)
    out = os.path.join(tmp_path, "out")
    assert main(["--runs", *dirs, "--out", out]) == 0
    with open(os.path.join(out, "seeds.json")) as f:
        assert json.load(f)["workloads"]["scores"]["gates"] == [True, False]
    with open(os.path.join(out, "summary.md")) as f:
        assert "1 of 2" in f.read()
