"""One conformance suite that every tuner passes, on the replay runner (fast and deterministic)."""

from __future__ import annotations

import pytest
from tuner_factories import TUNER_FACTORIES

import adatune
from adatune.records import load_from_file

NAMES = sorted(TUNER_FACTORIES)


@pytest.mark.parametrize("name", NAMES)
def test_respects_n_trial_and_never_repeats(name, matmul_task, replay_option):
    tuner = TUNER_FACTORIES[name](matmul_task, 0)
    tuner.tune(n_trial=45, measure_option=replay_option, batch_size=8)
    measured = [t.index for t in tuner.trials]
    assert len(measured) == 45
    assert len(set(measured)) == len(measured)
    # a second call measures only new configs
    tuner.tune(n_trial=20, measure_option=replay_option)
    measured = [t.index for t in tuner.trials]
    assert len(measured) == 65 and len(set(measured)) == 65


@pytest.mark.parametrize("name", NAMES)
def test_an_empty_space_is_refused_by_name(name):
    """A task whose filters leave no config must not look like a run that found nothing."""
    task = adatune.task.create("test/empty", (16,), adatune.target.host())
    with pytest.raises(ValueError, match="empty search space"):
        TUNER_FACTORIES[name](task, 0)


@pytest.mark.parametrize("name", NAMES)
def test_calls_callbacks_and_writes_records(name, matmul_task, replay_option, tmp_path):
    seen = []
    log = tmp_path / "log.jsonl"
    tuner = TUNER_FACTORIES[name](matmul_task, 1)
    tuner.tune(
        n_trial=20,
        measure_option=replay_option,
        batch_size=5,
        callbacks=[lambda t, i, r: seen.append(len(r)), adatune.callback.log_to_file(str(log))],
    )
    assert sum(seen) == 20 and len(seen) == 4
    recs = list(load_from_file(str(log)))
    assert [r.config_index for r in recs] == [t.index for t in tuner.trials]
    assert tuner.best_config is not None and tuner.best_flops > 0


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_trajectory(name, matmul_task, replay_table):
    runs = []
    for _ in range(2):
        option = adatune.measure_option(runner=adatune.ReplayRunner(replay_table))
        tuner = TUNER_FACTORIES[name](matmul_task, 7)
        tuner.tune(n_trial=40, measure_option=option)
        runs.append([t.index for t in tuner.trials])
    assert runs[0] == runs[1]


@pytest.mark.parametrize("name", NAMES)
def test_stops_when_space_is_exhausted(name, matmul_task, replay_option):
    tuner = TUNER_FACTORIES[name](matmul_task, 3)
    n = len(matmul_task.config_space)
    tuner.tune(n_trial=n + 50, measure_option=replay_option, batch_size=32)
    assert len(tuner.trials) == n
    assert len({t.index for t in tuner.trials}) == n


@pytest.mark.parametrize("name", NAMES)
def test_resume_from_history_measures_nothing_twice(name, matmul_task, replay_option, tmp_path):
    log = str(tmp_path / "log.jsonl")
    first = TUNER_FACTORIES[name](matmul_task, 5)
    first.tune(n_trial=24, measure_option=replay_option, callbacks=[adatune.callback.log_to_file(log)])
    second = TUNER_FACTORIES[name](matmul_task, 5)
    assert second.load_history(load_from_file(log)) == 24
    second.tune(n_trial=16, measure_option=replay_option, callbacks=[adatune.callback.log_to_file(log)])
    indices = [r.config_index for r in load_from_file(log)]
    assert len(indices) == 40 and len(set(indices)) == 40
    assert second.best_flops >= first.best_flops


@pytest.mark.parametrize("name", NAMES)
def test_time_budget_stops_on_the_tuner_clock(name, matmul_task, replay_option):
    tuner = TUNER_FACTORIES[name](matmul_task, 2)
    tuner.tune(n_trial=1000, measure_option=replay_option, batch_size=8, time_budget=3.0)
    # each replayed trial costs its recorded 0.3 s, so the budget ends the run after 2 or 3 batches
    assert 16 <= len(tuner.trials) <= 24
    assert tuner.clock >= 3.0
