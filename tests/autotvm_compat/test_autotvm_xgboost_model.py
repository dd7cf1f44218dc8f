"""Ported from apache/tvm v0.18.0 ``tests/python/autotvm/test_autotvm_xgboost_model.py`` (Apache-2.0) with
adatune's ``XGBoostCostModel`` and ``XGBTuner``; ``test_update`` reads ``x in tuner.visited`` for the measured
configs ``tuner.xs`` (adatune keeps candidates there, AutoTVM kept their indices). ``test_fit_spawn`` is
not ported (see ``test_autotvm_measure``).
"""

import numpy as np
from autotvm_testing import get_sample_records, get_sample_task

import adatune
from adatune.cost_models import XGBoostCostModel


def test_fit():
    task, target = get_sample_task()
    records = get_sample_records(n=500)

    base_model = XGBoostCostModel(task, feature_type="itervar", loss_type="reg")
    base_model.fit_log(records, plan_size=32)

    upper_model = XGBoostCostModel(task, feature_type="itervar", loss_type="reg")
    upper_model.load_basemodel(base_model)

    xs = np.arange(10)
    ys = np.arange(10)

    upper_model.fit(xs, ys, plan_size=32)

    # feature lengths are not guaranteed to always be the same
    upper_model.predict(np.ones(12))
    upper_model.predict(np.ones(8))


def test_tuner():
    task, target = get_sample_task()
    records = get_sample_records(n=10)

    tuner = adatune.tuners.XGBTuner(task)
    tuner.load_history(records, min_seed_records=10)
    # Confirm that loading history successfully loaded a
    # base_model.
    assert tuner.cost_model.base_model is not None

    tuner = adatune.tuners.XGBTuner(task)
    tuner.load_history(records, min_seed_records=11)
    # Confirm that loading history did not load base_model
    # when not enough records according to `min_seed_records`
    # are provided
    assert tuner.cost_model.base_model is None


def test_update():
    task, target = get_sample_task()
    tuner = adatune.tuners.XGBTuner(task)
    n_records = 5
    records = get_sample_records(n=n_records)
    tuner.update([inp for inp, _ in records], [res for _, res in records])
    assert len(tuner.xs) == n_records
    assert len(tuner.ys) == n_records
    assert len(tuner.visited) == n_records
    assert all(x in tuner.visited for x in tuner.xs)
