"""Shared fixtures: a small matmul template, its task, and a replay table over its whole space."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest
import tvm
from tvm import te

import adatune
from adatune.measure import MeasureErrorNo, MeasureResult, ReplayRunner

if "test/matmul" not in adatune.task.registered_templates():

    @adatune.template("test/matmul", reference=lambda a, b: a @ b)
    def matmul(N: int, L: int, M: int, dtype: str):
        A = te.placeholder((N, L), dtype, name="A")
        B = te.placeholder((L, M), dtype, name="B")
        k = te.reduce_axis((0, L), name="k")
        C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
        sch = tvm.s_tir.Schedule(te.create_prim_func([A, B, C]))
        cfg = adatune.get_config()
        i, j, kk = sch.get_loops(sch.get_sblock("C"))
        cfg.define_split("tile_i", N, num_outputs=2)
        cfg.define_split("tile_j", sch.get(j), num_outputs=2)
        cfg.define_split("tile_k", L, num_outputs=2, max_factor=16)
        cfg.define_knob("vec", [0, 1])
        io, ii = cfg["tile_i"].apply(sch, i)
        jo, ji = cfg["tile_j"].apply(sch, j)
        ko, ki = cfg["tile_k"].apply(sch, kk)
        sch.reorder(io, jo, ko, ki, ii, ji)
        if cfg["vec"].val:
            sch.vectorize(ji)
        return sch, [A, B, C]


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
            table[(matmul_task.workload_key, i)] = MeasureResult((), MeasureErrorNo.RUNTIME_DEVICE, 0.2, time.time(),
                                                                 "recorded failure")
        else:
            c = synthetic_cost(matmul_task, i)
            table[(matmul_task.workload_key, i)] = MeasureResult((c, c), MeasureErrorNo.NO_ERROR, 0.3, time.time(),
                                                                 build_time=0.1, run_time=0.2, runs=10)
    return table


@pytest.fixture()
def replay_option(replay_table: dict) -> adatune.measure.MeasureOption:
    return adatune.measure_option(runner=ReplayRunner(replay_table))
