"""Shared fixtures: a small matmul template, its task, and a replay table over its whole space (adatune.testing's
synthetic table, so the suite and the shipped conformance checks measure on the same surface)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import fixture_templates  # noqa: E402,F401  (registers test/matmul and test/faulty)
import pytest
import sklearn.cluster  # noqa: F401  (loads scikit-learn's OpenMP runtime, so the limit below reaches it)
from threadpoolctl import threadpool_limits

import adatune
from adatune.measure import ReplayRunner
from adatune.testing import KnobFixture, synthetic_cost, synthetic_replay_table

__all__ = ["synthetic_cost"]

# OpenMP on one thread in the test processes: make test runs two of them on two cores, and scikit-learn's k-means
# (the adaptive sampler's) then spins its OpenMP threads against the other process's, each small fit many times
# slower. Kernels run in runner workers (their own processes) and PyTorch sets its own thread count where it times.
threadpool_limits(1, user_api="openmp")
# Kernels run on one TVM thread here for the same reason: on two busy cores a parallel loop waits for its second
# pool thread at every barrier. The tests of how adatune sizes TVM's pool run without the variable (they strip it).
os.environ.setdefault("TVM_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def matmul_task() -> adatune.task.Task:
    return adatune.task.create("test/matmul", (32, 32, 32, "float32"), adatune.target.host())


@pytest.fixture(scope="session")
def replay_table(matmul_task: adatune.task.Task) -> dict:
    return synthetic_replay_table(matmul_task)


@pytest.fixture(scope="session")
def knob_fixture(matmul_task: adatune.task.Task, replay_table: dict) -> KnobFixture:
    """The conformance suites' fixture on the suite's own test/matmul task."""
    return KnobFixture(matmul_task, replay_table)


@pytest.fixture()
def replay_option(replay_table: dict) -> adatune.measure.MeasureOption:
    return adatune.measure_option(runner=ReplayRunner(replay_table))


@pytest.fixture(scope="session")
def shared_builder() -> Iterator[adatune.LocalBuilder]:
    """One warm build pool per test process for every shared option below: each worker pays ``import tvm`` (seconds
    of CPU) once, not once per option or test."""
    builder = adatune.LocalBuilder(timeout=60)
    yield builder
    builder.close()


@pytest.fixture(scope="session")
def checked_option(shared_builder: adatune.LocalBuilder) -> Iterator[adatune.measure.MeasureOption]:
    """A real builder and a correctness-checking runner shared by the tests that measure a few kernels and need no
    runner settings of their own."""
    option = adatune.measure_option(
        shared_builder, adatune.LocalRunner(number=2, repeat=3, timeout=60, check_correctness=True)
    )
    yield option
    option.runner.close()


@pytest.fixture(scope="session")
def dietcode_option(shared_builder: adatune.LocalBuilder) -> Iterator[adatune.measure.MeasureOption]:
    """A correctness-checking runner for the DietCode tuning runs whose timings nothing asserts (one run per kernel):
    each tuner would otherwise start, warm and close worker pools of its own."""
    option = adatune.measure_option(
        shared_builder, adatune.LocalRunner(number=1, repeat=1, min_repeat_ms=1, timeout=60, check_correctness=True)
    )
    yield option
    option.runner.close()


@pytest.fixture(scope="session")
def model_option(shared_builder: adatune.LocalBuilder) -> Iterator[adatune.measure.MeasureOption]:
    """What ``tune_model`` measures with by default (a ``LocalBuilder``, ``model_runner()``), started once per test
    process for the tests that tune a small model briefly."""
    from adatune.models import model_runner

    option = adatune.measure_option(shared_builder, model_runner())
    yield option
    option.runner.close()


@pytest.fixture
def tune_knob_tasks_briefly(model_option: adatune.measure.MeasureOption) -> Callable[..., None]:
    """Two round-robin trials per knob task of a model, into ``log`` (a trace task's first design space takes
    minutes, so trace tasks are left out): what the model tests build from."""

    def tune(model: Any, tasks: Sequence[Any], log: Any) -> None:
        from adatune.models import tune_model

        knob = [t for t in tasks if t.kind != "trace"]
        tune_model(
            model, log, n_trial=len(knob) * 2, strategy="round-robin", round_trials=2, tasks=knob,
            progress=False, option=model_option,
        )  # fmt: skip

    return tune
