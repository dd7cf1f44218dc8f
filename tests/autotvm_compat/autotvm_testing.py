"""adatune's ``tvm.testing.autotvm``: the sample task, records and dummy runner AutoTVM's own tests use.

Ported from apache/tvm v0.18.0 ``python/tvm/testing/autotvm.py`` (Apache-2.0), ``bad_matmul`` from an earlier
release of it. What TVM 0.27 forces: the templates schedule ``te.create_prim_func`` with ``tvm.s_tir.Schedule``
instead of a TE schedule, and are registered with ``@adatune.template``; the runner subclasses adatune's
``Runner`` and needs no build.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import tvm
from tvm import te

import adatune
from adatune.measure import BuildResult, MeasureInput, MeasureResult, Runner


class DummyRunner(Runner):
    """Reports a random cost for every candidate (AutoTVM's ``DummyRunner``): tuners run without timing.

    AutoTVM's tests paired it with ``LocalBuilder`` and threw the binaries away; here it needs no build, so
    ``measure_option(runner=DummyRunner())`` skips compiling (on a loaded 2-core machine a batch of real builds
    costs tens of seconds; the real builder is tested in ``tests/test_measure.py``).
    """

    needs_build = False

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        return [MeasureResult((np.random.random(),), 0, 0.2, time.time()) for _ in range(len(inputs))]


if "testing/matmul" not in adatune.task.registered_templates():

    @adatune.template("testing/matmul")
    def matmul(N: int, L: int, M: int, dtype: str):
        A = te.placeholder((N, L), name="A", dtype=dtype)
        B = te.placeholder((L, M), name="B", dtype=dtype)

        k = te.reduce_axis((0, L), name="k")
        C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
        sch = tvm.s_tir.Schedule(te.create_prim_func([A, B, C]))

        # schedule
        y, x, kk = sch.get_loops(sch.get_sblock("C"))

        ##### define space begin #####
        cfg = adatune.get_config()
        cfg.define_split("tile_y", sch.get(y), num_outputs=2)
        cfg.define_split("tile_x", sch.get(x), num_outputs=2)
        ##### define space end #####

        # schedule according to config
        yo, yi = cfg["tile_y"].apply(sch, y)
        # Make sure configurations have a varied number of loops. Splitting adds new loops, so conditionally
        # splitting makes the number of loops depend on the tile size.
        if cfg["tile_x"].size[-1] > 1:
            xo, xi = cfg["tile_x"].apply(sch, x)
            sch.reorder(yo, xo, kk, yi, xi)
        else:
            sch.reorder(yo, kk, yi, x)

        return sch, [A, B, C]


if "testing/bad_matmul" not in adatune.task.registered_templates():

    @adatune.template("testing/bad_matmul")
    def bad_matmul(N: int, L: int, M: int, dtype: str):
        if "bad_device" in tvm.target.Target.current().keys:
            A = te.placeholder((N, L), name="A", dtype=dtype)
            B = te.placeholder((L, M), name="B", dtype=dtype)

            k = te.reduce_axis((0, L - 1), name="k")
            C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
            sch = tvm.s_tir.Schedule(te.create_prim_func([A, B, C]))

            # schedule
            y, x, _ = sch.get_loops(sch.get_sblock("C"))
            cfg = adatune.get_config()
            cfg.define_split("tile_y", sch.get(y), num_outputs=2)
            cfg.define_split("tile_x", sch.get(x), num_outputs=2)
            return sch, [A, B, C]

        return adatune.task.registered_templates()["testing/matmul"].func(N, L, M, dtype)


def get_sample_task(n: int = 128) -> tuple[adatune.task.TuningTask, tvm.target.Target]:
    """return a sample task for testing"""
    target = tvm.target.Target("llvm")
    task = adatune.task.create("testing/matmul", args=(n, n, n, "float32"), target=target)
    return task, target


def get_sample_records(n: int) -> list[tuple[MeasureInput, MeasureResult]]:
    """get sample records for testing"""
    tsk, target = get_sample_task()

    inps, ress = [], []
    for i in range(n):
        inps.append(MeasureInput(target, tsk, tsk.config_space.get(i % len(tsk.config_space))))
        ress.append(MeasureResult((i + 1,), 0, i, time.time()))
    return list(zip(inps, ress))
