"""Aligned kernel versions are deployed only where the tuner timed them faster than their kernels: the decision
(``kept_versions``), where it lives (the dispatcher's ``aligned``, saved with it) and what a module then runs."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import numpy as np
import pytest

import adatune
from adatune.dietcode import (
    DietCodeTuner,
    DynamicKernel,
    DynamicWorkload,
    MicroKernel,
    ShapeDispatcher,
    aligned_name,
    aligned_versions,
)
from adatune.dietcode._range_task import RangeTask
from adatune.dietcode._select import kept_versions
from adatune.measure import LocalBuilder, LocalRunner, MeasureBatch, MeasureInput, measure_option
from adatune.target import cpu_info

HOST = adatune.target.host()
W = cpu_info(HOST).lanes("float32")
RANGE = (1, 4 * W)
NN = DynamicWorkload("v_nn", "bmm_nn", (3, 2 * W), RANGE)
SMALL = MicroKernel.from_key(f"cpu:6x{W}x8/3x{W}")  # aligned at multiples of 8 (its kt)
LARGE = MicroKernel.from_key(f"cpu:8x{2 * W}x4/4x{W}")  # aligned at multiples of 4


def _dispatcher() -> ShapeDispatcher:
    ts = list(range(RANGE[0], RANGE[1] + 1))
    return ShapeDispatcher.fit(ts, [SMALL.key if t <= 2 * W else LARGE.key for t in ts], RANGE)


def test_a_version_is_kept_only_where_it_ran_faster() -> None:
    inf = np.inf
    kernel = np.array([[2.0, 4.0], [2.0, 4.0], [2.0, inf], [inf, inf], [1.0, 1.0], [1.0, 1.0]])
    version = np.array([[1.0, 3.0], [3.0, 5.0], [2.5, 1.0], [1.0, inf], [inf, inf], [1.0, 1.0]])
    kept, ratios = kept_versions([8, 8, 4, 4, 4, 0], kernel, version)
    # faster; slower; slower where both ran (T 2 alone is not compared); only the version ran; the version
    # failed; no version at all
    assert kept == [8, 0, 0, 4, 0, 0]
    np.testing.assert_allclose(ratios[:3], [np.sqrt(0.5 * 0.75), np.sqrt(1.5 * 1.25), 1.25])
    assert np.isnan(ratios[3]) and np.isnan(ratios[4])
    with pytest.raises(ValueError, match="matrices"):
        kept_versions([8], kernel, version)


def test_the_decision_travels_with_the_dispatcher_and_is_checked() -> None:
    disp = _dispatcher()
    assert disp.aligned is None and "aligned" not in disp.to_json()  # undecided: the kernels' default versions
    kernels = [{SMALL.key: SMALL, LARGE.key: LARGE}[label] for label in disp.labels]
    default = aligned_versions(NN, kernels)
    assert sorted(default) == [4, 8]
    chosen = disp.with_aligned([default[0], 0])
    again = ShapeDispatcher.from_json(json.loads(json.dumps(chosen.to_json())))
    assert again.aligned == [default[0], 0] and again.labels == disp.labels
    assert aligned_versions(NN, kernels, again.aligned) == [default[0], 0]
    with pytest.raises(ValueError, match="one non-negative integer unit per label"):
        disp.with_aligned([4])
    with pytest.raises(ValueError, match="0 or its alignment"):
        aligned_versions(NN, kernels, [3, 0])
    with pytest.raises(ValueError, match="multiples"):
        RangeTask(NN, [4, 6], HOST, align=4)


def test_a_module_runs_only_the_kept_versions(tmp_path: os.PathLike) -> None:
    disp = _dispatcher()
    kernels = [{SMALL.key: SMALL, LARGE.key: LARGE}[label] for label in disp.labels]
    large = disp.labels.index(LARGE.key)
    kept = [4 if i == large else 0 for i in range(2)]  # the large kernel's version kept, the small one's dropped
    dk = DynamicKernel(NN, kernels, disp.with_aligned(kept), HOST)
    assert dk.aligns == kept
    rng = np.random.default_rng(3)
    for t in range(RANGE[0], RANGE[1] + 1):
        i = dk.index(t)
        want = aligned_name(dk.names[i], 4) if i == large and t % 4 == 0 else dk.names[i]
        assert dk.function_name(t) == want, t
        a, b = NN.random_inputs(t, rng)
        np.testing.assert_allclose(dk(t, a, b), NN.reference(a, b), rtol=1e-3, atol=1e-3, err_msg=f"T={t}")
    manifest = json.load(open(dk.export(os.path.join(str(tmp_path), "out")), encoding="utf-8"))
    assert manifest["aligned"] == kept and manifest["dispatcher"]["aligned"] == kept


class _ScaledVersions:
    """The real builder and runner (every candidate built, checked and run), with the timings replaced: 1 ms for a
    kernel, its factor in ms for its aligned version. A stand-in for a version that runs faster or slower than its
    kernel, so the decision is tested without depending on a timing."""

    def __init__(self, factor: dict[str, float]):
        self.option = measure_option(LocalBuilder(), LocalRunner(number=1, repeat=1, min_repeat_ms=1, timeout=60))
        self.factor = factor

    def measure(self, inputs: Sequence[MeasureInput]) -> MeasureBatch:
        batch = self.option.measure(inputs)
        for inp, res in zip(inputs, batch.results):
            seconds = 1e-3 * (self.factor[inp.config.key] if getattr(inp.task, "align", 1) > 1 else 1.0)
            for p in res.extra.get("points", []) if res.ok else []:
                p["costs"] = [seconds] * len(p["costs"])
        return batch

    def close(self) -> None:
        self.option.close()


def test_the_tuner_keeps_the_faster_version_and_logs_both_timings(tmp_path: os.PathLike) -> None:
    from adatune.dietcode._tune import DietCodeResult

    log = str(tmp_path / "versions.jsonl")
    tuner = DietCodeTuner(NN, HOST, n_shapes=2, rounds=1, kernels_per_round=2, seed=0)
    disp = _dispatcher()
    kernels = [{SMALL.key: SMALL, LARGE.key: LARGE}[label] for label in disp.labels]
    result = DietCodeResult(NN, HOST, kernels, disp, tuner.model, [], [], 0.0)
    option = _ScaledVersions({SMALL.key: 100.0, LARGE.key: 0.01})
    try:
        result = tuner._versions_checked(result, option, [adatune.callback.log_to_file(log)])  # type: ignore[arg-type]
    finally:
        option.close()
    units = dict(zip(disp.labels, aligned_versions(NN, kernels)))
    records = [json.loads(line) for line in open(log, encoding="utf-8")]
    assert [r["result"]["error_no"] for r in records] == [0] * 4, [r["result"].get("error_msg") for r in records]
    assert result.dispatcher.aligned == [0 if label == SMALL.key else units[label] for label in disp.labels]
    info = result.versions["kernels"]
    assert info[SMALL.key]["kept"] is False and info[SMALL.key]["ratio"] == pytest.approx(100.0)
    assert info[LARGE.key]["kept"] is True and info[LARGE.key]["ratio"] == pytest.approx(0.01)
    for key, label in ((SMALL.key, SMALL), (LARGE.key, LARGE)):  # timed at aligned T the kernel serves
        assert 1 <= len(info[key]["ts"]) <= 3
        assert all(t % units[key] == 0 and result.dispatcher(t) == label.key for t in info[key]["ts"])
    assert sorted((r["key"], len(r["task"][1])) for r in records) == sorted(
        [(SMALL.key, 2), (SMALL.key, 3), (LARGE.key, 2), (LARGE.key, 3)]
    )  # each kernel once as itself and once as its version (the task's alignment its third argument)
    aligned_task = next(r["task"] for r in records if len(r["task"][1]) == 3)
    again = adatune.task.create(*aligned_task, target=HOST)  # a version's record recreates its aligned task
    assert isinstance(again, RangeTask) and again.align == aligned_task[1][2] > 1
