"""Real measurements: correct kernels are timed, every failure kind comes from a real faulty kernel,
and a tuning run carries on past all of them."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from fixture_templates import MODES
from tvm import te

import adatune
from adatune.measure import MeasureErrorNo, MeasureInput
from adatune.measure._expected_outputs import ReferenceData
from adatune.records import load_from_file
from adatune.tuners import GridSearchTuner

EXPECTED = {
    "ok": MeasureErrorNo.NO_ERROR,
    "build_fail": MeasureErrorNo.COMPILE_HOST,
    "crash": MeasureErrorNo.RUNTIME_DEVICE,
    "hang": MeasureErrorNo.RUN_TIMEOUT,
    "wrong": MeasureErrorNo.WRONG_ANSWER,
    "instantiate_fail": MeasureErrorNo.INSTANTIATION_ERROR,
    "slow_build": MeasureErrorNo.BUILD_TIMEOUT,
}


def test_every_error_kind_while_the_run_carries_on(tmp_path):
    task = adatune.task.create("test/faulty", (64,), adatune.target.host())
    option = adatune.measure_option(
        adatune.LocalBuilder(timeout=4), adatune.LocalRunner(timeout=3, check_correctness=True)
    )
    log = str(tmp_path / "faulty.jsonl")
    tuner = GridSearchTuner(task)
    tuner.tune(
        n_trial=len(MODES), measure_option=option, batch_size=len(MODES), callbacks=[adatune.callback.log_to_file(log)]
    )
    option.close()
    records = {r.config_index: r for r in load_from_file(log)}
    assert len(records) == len(MODES)
    for i, mode in enumerate(MODES):
        res = records[i].result
        assert res.error_no == EXPECTED[mode], (mode, res.error_no, res.error_msg[:300])
        assert (res.error_msg == "") == (mode == "ok")
        assert res.all_cost > 0
    assert "differs from the reference" in records[MODES.index("wrong")].result.error_msg
    assert tuner.best_config.index == MODES.index("ok")


if "test/double_numpy_says_triple" not in adatune.task.registered_templates():

    @adatune.template("test/double_numpy_says_triple", reference=lambda a: a * 3.0)
    def double(n: int):
        """Doubles its input; its numpy reference disagrees, and check_correctness must not read it."""
        adatune.get_config().define_knob("unused", [0, 1])
        A = te.placeholder((n,), "float32", name="A")
        B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
        return tvm.s_tir.Schedule(te.create_prim_func([A, B])), [A, B]


def test_check_correctness_compares_with_a_plain_host_build_as_autotvm_does(checked_option):
    """AutoTVM's contract: the reference is the task built plainly for the host and run on the same random
    inputs as each candidate; a wrong candidate is a WRONG_ANSWER, and a template's numpy reference plays no part."""
    faulty = adatune.task.create("test/faulty", (64,), adatune.target.host())
    refs = ReferenceData()
    with np.load(refs.path(faulty)) as data:
        np.testing.assert_allclose(data["out1"], data["in0"] * 2.0, rtol=1e-6)  # the default ("ok") computation
    refs.close()
    double = adatune.task.create("test/double_numpy_says_triple", (64,), adatune.target.host())
    inputs = [MeasureInput(faulty, faulty.config_space.get(MODES.index(m))) for m in ("ok", "wrong")]
    res = checked_option.measure([*inputs, MeasureInput(double, double.config_space.get(0))])
    assert [r.error_no for r in res] == [MeasureErrorNo.NO_ERROR, MeasureErrorNo.WRONG_ANSWER, MeasureErrorNo.NO_ERROR]
    assert "output 1 differs from the reference (max abs error 1" in res[1].error_msg


if "test/records_its_target" not in adatune.task.registered_templates():
    SEEN_KEYS: list[tuple[str, ...]] = []

    @adatune.template("test/records_its_target")
    def records_its_target(n: int):
        """A copy that notes the keys of the target it runs under."""
        SEEN_KEYS.append(tuple(str(k) for k in tvm.target.Target.current().keys))
        adatune.get_config().define_knob("unused", [0, 1])
        A = te.placeholder((n,), "float32", name="A")
        B = te.compute((n,), lambda i: A[i], name="B")
        return tvm.s_tir.Schedule(te.create_prim_func([A, B])), [A, B]


def test_a_template_runs_under_its_tasks_target_and_its_reference_under_the_hosts():
    """AutoTVM's contract: ``Target.current()`` inside a template is the task's target when the space is collected
    and when a candidate is instantiated; the correctness reference is the template instantiated for the host."""
    SEEN_KEYS.clear()
    task = adatune.task.create("test/records_its_target", (8,), {"kind": "llvm", "device": "bad_device"})
    task.instantiate(1)
    assert isinstance(task, adatune.task.Task)
    task.reference_module()
    assert [("bad_device" in keys) for keys in SEEN_KEYS] == [True, True, False]


def test_worker_recovers_after_crash(checked_option):
    task = adatune.task.create("test/faulty", (64,), adatune.target.host())
    order = [MODES.index("crash"), MODES.index("ok")]
    res = checked_option.measure([MeasureInput(task, task.config_space.get(i)) for i in order])
    assert res[0].error_no == MeasureErrorNo.RUNTIME_DEVICE
    assert res[1].error_no == MeasureErrorNo.NO_ERROR and len(res[1].costs) == 3


def test_the_runner_worker_is_replaced_every_worker_uses_candidates(monkeypatch):
    """Loaded kernel libraries stay mapped in the worker, so it is recycled before a long sweep exhausts memory."""
    import os

    from adatune.measure import _runner

    monkeypatch.setattr(_runner, "WORKER_USES", 2)
    runner = adatune.LocalRunner(timeout=60)
    try:
        pids = [runner.pool.submit(os.getpid).result() for _ in range(5)]
    finally:
        runner.close()
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]
    assert os.getpid() not in pids


def test_correct_kernels_are_timed_and_checked(matmul_task):
    option = adatune.measure_option(
        adatune.LocalBuilder(), adatune.LocalRunner(number=4, repeat=2, check_correctness=True)
    )
    idx = [0, len(matmul_task.config_space) - 1, 77 % len(matmul_task.config_space)]
    res = option.measure([MeasureInput(matmul_task, matmul_task.config_space.get(i)) for i in idx])
    option.close()
    for r in res:
        assert r.error_no == MeasureErrorNo.NO_ERROR, r.error_msg
        assert len(r.costs) == 2 and all(c > 0 for c in r.costs)
        assert r.runs == 8 and r.build_time > 0 and r.run_time > 0
        assert r.flops(matmul_task.flop) > 0


def test_cuda_without_device_reports_clearly(matmul_task):
    import shutil

    import tvm

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    if tvm.cuda(0).exist:
        pytest.skip("a GPU is present: this checks the no-device message")
    task = adatune.task.create("test/gpu_copy", (256,), adatune.target.cuda("sm_80"))
    option = adatune.measure_option(adatune.LocalBuilder(timeout=60), adatune.LocalRunner())
    res = option.measure([MeasureInput(task, task.config_space.get(1))])[0]
    option.close()
    assert res.error_no == MeasureErrorNo.RUNTIME_DEVICE
    assert "no CUDA device" in res.error_msg


def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="timeout"):
        adatune.LocalRunner(timeout=0)
    with pytest.raises(ValueError, match="number must be an integer"):
        adatune.LocalRunner(number=0)
    with pytest.raises(ValueError, match="min_converge_coef"):
        adatune.LocalRunner(min_converge_coef=-1)
    with pytest.raises(ValueError, match="n_parallel"):
        adatune.LocalBuilder(n_parallel=0)
