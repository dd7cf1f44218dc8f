"""Test builder and runner

Ported from apache/tvm v0.18.0 ``tests/python/autotvm/test_autotvm_measure.py`` (Apache-2.0) with adatune's
tuners and ``measure_option``. Not ported: ``GATuner`` (adatune has no genetic-algorithm tuner) and
``test_task_runner_with_ref_input`` (it checks that AutoTVM's ``LocalRunner`` hands ``ref_input`` to its
``executor``; adatune's runner has neither and computes its reference data itself), and the ``*_spawn``
variants of this and the index-tuner and XGBoost tests, which rerun a test in a ``multiprocessing`` spawn
child: adatune's builders and runners are ``PopenPoolExecutor`` workers, not ``multiprocessing`` children, and
each spawn paid a fresh ``import tvm`` (70 s on the loaded shared machine), past this folder's 2-minute budget.
``DummyRunner`` needs no build. ``test_check_correctness`` comes from an earlier release of the same file; its
target ``"llvm -device=bad_device"`` is written as the JSON dict TVM 0.27 takes.
"""

import logging

from autotvm_testing import DummyRunner, get_sample_task

import adatune
from adatune.measure import MeasureErrorNo


def test_task_tuner_without_measurement():
    """test task and tuner without measurement"""
    task, _ = get_sample_task()

    measure_option = adatune.measure_option(runner=DummyRunner())

    logging.info("%s", task.config_space)

    for tuner_class in [
        adatune.tuners.RandomTuner,
        adatune.tuners.GridSearchTuner,
        adatune.tuners.XGBTuner,
    ]:
        tuner = tuner_class(task)
        tuner.tune(n_trial=10, measure_option=measure_option)
        assert tuner.best_flops > 1


def test_check_correctness():
    task, target = get_sample_task()

    measure_option = adatune.measure_option(
        builder=adatune.LocalBuilder(), runner=adatune.LocalRunner(check_correctness=True)
    )

    def _callback_correct(tuner, measure_inputs, measure_results):
        for _, res in zip(measure_inputs, measure_results):
            assert res.error_no == 0

    tuner = adatune.tuners.RandomTuner(task)
    tuner.tune(n_trial=2, measure_option=measure_option, callbacks=[_callback_correct])

    # a bad template
    n = 128
    target = {"kind": "llvm", "device": "bad_device"}
    task = adatune.task.create("testing/bad_matmul", args=(n, n, n, "float32"), target=target)

    def _callback_wrong(tuner, measure_inputs, measure_results):
        for _, res in zip(measure_inputs, measure_results):
            assert res.error_no == MeasureErrorNo.WRONG_ANSWER

    tuner = adatune.tuners.RandomTuner(task)
    tuner.tune(n_trial=2, measure_option=measure_option, callbacks=[_callback_wrong])
