"""Test index based tuners

Ported from apache/tvm v0.18.0 ``tests/python/autotvm/test_autotvm_index_tuner.py`` (Apache-2.0) with adatune's
tuners and ``measure_option`` (no builder: ``DummyRunner`` needs no binary); ``tuner.visited`` yields config
indices as AutoTVM's does, so the range checks are AutoTVM's own.
The ``*_spawn`` variant is not ported (see ``test_autotvm_measure``).
"""

from autotvm_testing import DummyRunner, get_sample_task

import adatune


def test_grid_search_tuner():
    """Test GridSearchTuner"""

    task, _ = get_sample_task()
    measure_option = adatune.measure_option(runner=DummyRunner())

    # When no range index, range_length should be the length of config space
    tuner = adatune.tuners.GridSearchTuner(task)
    assert tuner.begin_idx == 0
    assert tuner.end_idx == 64
    assert tuner.index == 0
    assert tuner.range_length == 64
    assert tuner.visited_max == 64

    # With range index, range_length should be the length of the specified range
    tuner = adatune.tuners.GridSearchTuner(task, range_idx=(8, 15))
    assert tuner.begin_idx == 8
    assert tuner.end_idx == 16
    assert tuner.index == 8
    assert tuner.range_length == 8
    assert tuner.visited_max == 8

    # Tuner should only focus on the specified range
    tuner.tune(n_trial=8, measure_option=measure_option)
    assert len(tuner.visited) == 8
    assert not tuner.has_next()

    # With multi-filter
    task, _ = get_sample_task()
    task.config_space.multi_filter(
        filter=lambda entity: 32 <= (entity["tile_x"].size[1] * entity["tile_y"].size[1]) < 1024
    )

    tuner = adatune.tuners.GridSearchTuner(task)
    assert tuner.begin_idx == 0
    assert tuner.end_idx == 64
    assert tuner.index == 5
    assert tuner.range_length == 64
    assert tuner.visited_max == 34

    # With range index, range_length should be the length of the specified range
    tuner = adatune.tuners.GridSearchTuner(task, range_idx=(8, 15))
    assert tuner.begin_idx == 8
    assert tuner.end_idx == 16
    assert tuner.index == 12
    assert tuner.range_length == 8
    assert tuner.visited_max == 4

    # Tuner should only focus on the specified range
    tuner.tune(n_trial=8, measure_option=measure_option)
    assert len(tuner.visited) == 4
    assert not tuner.has_next()


def test_random_tuner():
    """Test RandomTuner"""

    task, _ = get_sample_task()
    measure_option = adatune.measure_option(runner=DummyRunner())

    tuner = adatune.tuners.RandomTuner(task, range_idx=(8, 15))
    assert tuner.begin_idx == 8
    assert tuner.end_idx == 16
    assert tuner.range_length == 8
    assert tuner.visited_max == 8

    # Tuner should only focus on the specified range and should visit all indices
    tuner.tune(n_trial=8, measure_option=measure_option)
    assert len(tuner.visited) == 8
    assert not tuner.has_next()
    for idx in tuner.visited:
        assert 8 <= idx <= 15

    # With multi-filter
    task, _ = get_sample_task()
    task.config_space.multi_filter(
        filter=lambda entity: 32 <= (entity["tile_x"].size[1] * entity["tile_y"].size[1]) < 1024
    )
    tuner = adatune.tuners.RandomTuner(task, range_idx=(8, 15))
    assert tuner.begin_idx == 8
    assert tuner.end_idx == 16
    assert tuner.range_length == 8
    assert tuner.visited_max == 4

    # Tuner should only focus on the specified range and should visit all indices
    tuner.tune(n_trial=8, measure_option=measure_option)
    assert len(tuner.visited) == 4
    assert not tuner.has_next()
    for idx in tuner.visited:
        assert 8 <= idx <= 15
