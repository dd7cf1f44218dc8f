"""Shared fixtures: a small matmul template, its task, and a replay table over its whole space."""

from __future__ import annotations

import math
import time

import fixture_templates  # noqa: E402,F401  (registers test/matmul and test/faulty)
import numpy as np
import pytest

import adatune
from adatune.measure import MeasureErrorNo, MeasureResult, ReplayRunner


@pytest.fixture(scope="session")
def matmul_task() -> adatune.task.Task:
    return adatune.task.create("test/matmul", (32, 32, 32, "float32"), adatune.target.host())


def synthetic_cost(task: adatune.task.Task, index: int) -> float:
    """A smooth, deterministic cost surface over the space (seconds), with a few failing configs."""
    digits = task.config_space.point2knob(index)
    dims = task.config_space.dims
    x = np.asarray(digits, dtype=float) / np.maximum(np.asarray(dims) - 1, 1)
    return 1e-4 * (1.0 + 3.0 * float(np.sum((x - 0.6) ** 2))) * (1.0 + 0.05 * math.sin(index))


@pytest.fixture(scope="session")
def replay_table(matmul_task: adatune.task.Task) -> dict:
    table = {}
    for i in range(len(matmul_task.config_space)):
        if i % 17 == 5:
            table[(matmul_task.workload_key, i)] = MeasureResult(
                (), MeasureErrorNo.RUNTIME_DEVICE, 0.2, time.time(), "recorded failure"
            )
        else:
            c = synthetic_cost(matmul_task, i)
            table[(matmul_task.workload_key, i)] = MeasureResult(
                (c, c), MeasureErrorNo.NO_ERROR, 0.3, time.time(), build_time=0.1, run_time=0.2, runs=10
            )
    return table


@pytest.fixture()
def replay_option(replay_table: dict) -> adatune.measure.MeasureOption:
    return adatune.measure_option(runner=ReplayRunner(replay_table))
