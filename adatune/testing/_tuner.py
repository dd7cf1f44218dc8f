"""The tuner contract: every tuner, shipped or yours, passes these on a recorded table (fast, deterministic).

``check_tuner(factory)`` runs them all; ``TUNER_CHECKS`` names each, so a test suite can parametrise over them.
A factory is ``factory(task, seed) -> Tuner``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable

from .. import target as _target
from ..records import load_from_file
from ..task import TuningTask, create
from ..tuners import Tuner
from ..tuners.callback import log_to_file
from ._fixtures import TRIAL_SECONDS, KnobFixture, knob_fixture
from ._templates import EMPTY

__all__ = ["TunerFactory", "TUNER_CHECKS", "check_tuner"]

TunerFactory = Callable[[TuningTask, int], Tuner]


def _indices(tuner: Tuner) -> list[int]:
    return [t.index for t in tuner.trials]


def respects_n_trial_and_never_repeats(factory: TunerFactory, fx: KnobFixture) -> None:
    option = fx.option()
    tuner = factory(fx.task, 0)
    tuner.tune(n_trial=45, measure_option=option, batch_size=8)
    measured = _indices(tuner)
    assert len(measured) == 45, f"asked for 45 trials, measured {len(measured)}"
    assert len(set(measured)) == 45, f"measured a config twice: {sorted(measured)}"
    tuner.tune(n_trial=20, measure_option=option)
    measured = _indices(tuner)
    assert len(measured) == 65 and len(set(measured)) == 65, (
        f"a second tune(20) must measure 20 new configs: {len(measured)} trials, {len(set(measured))} distinct"
    )


def refuses_an_empty_space_by_name(factory: TunerFactory, fx: KnobFixture) -> None:
    """A task whose filters leave no config must not look like a run that found nothing."""
    task = create(EMPTY, (16,), _target.host())
    try:
        factory(task, 0)
    except ValueError as err:
        assert "empty search space" in str(err), f"the error must say 'empty search space', got: {err}"
        return
    raise AssertionError("a tuner made for a task with an empty search space must raise ValueError")


def calls_callbacks_and_writes_records(factory: TunerFactory, fx: KnobFixture) -> None:
    seen: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log.jsonl")
        tuner = factory(fx.task, 1)
        tuner.tune(
            n_trial=20,
            measure_option=fx.option(),
            batch_size=5,
            callbacks=[lambda t, i, r: seen.append(len(r)), log_to_file(log)],
        )
        recorded = [r.config_index for r in load_from_file(log)]
    assert sum(seen) == 20 and len(seen) == 4, f"20 trials in batches of 5: 4 callbacks expected, got {seen}"
    assert recorded == _indices(tuner), "the log must hold every trial, in the order measured"
    assert tuner.best_config is not None and tuner.best_flops > 0, "no best config after 20 trials"


def same_seed_same_trajectory(factory: TunerFactory, fx: KnobFixture) -> None:
    runs = []
    for _ in range(2):
        tuner = factory(fx.task, 7)
        tuner.tune(n_trial=40, measure_option=fx.option())
        runs.append(_indices(tuner))
    assert runs[0] == runs[1], f"two runs with seed 7 differ:\n{runs[0]}\n{runs[1]}"


def stops_when_the_space_is_exhausted(factory: TunerFactory, fx: KnobFixture) -> None:
    tuner = factory(fx.task, 3)
    n = len(fx.task.config_space)
    tuner.tune(n_trial=n + 50, measure_option=fx.option(), batch_size=32)
    measured = _indices(tuner)
    assert len(measured) == n and len(set(measured)) == n, (
        f"a space of {n} configs: measured {len(measured)} trials, {len(set(measured))} distinct"
    )


def resumes_from_history_measuring_nothing_twice(factory: TunerFactory, fx: KnobFixture) -> None:
    option = fx.option()
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log.jsonl")
        first = factory(fx.task, 5)
        first.tune(n_trial=24, measure_option=option, callbacks=[log_to_file(log)])
        second = factory(fx.task, 5)
        loaded = second.load_history(load_from_file(log))
        assert loaded == 24, f"load_history read {loaded} of 24 records"
        second.tune(n_trial=16, measure_option=option, callbacks=[log_to_file(log)])
        indices = [r.config_index for r in load_from_file(log)]
    assert len(indices) == 40 and len(set(indices)) == 40, f"a resumed run measured again: {sorted(indices)}"
    assert second.best_flops >= first.best_flops, "a resumed tuner forgot the best of its history"


def time_budget_stops_on_the_tuner_clock(factory: TunerFactory, fx: KnobFixture) -> None:
    tuner = factory(fx.task, 2)
    tuner.tune(n_trial=1000, measure_option=fx.option(), batch_size=8, time_budget=3.0)
    # each replayed trial costs its recorded TRIAL_SECONDS, so a 3 s budget ends the run after 2 or 3 batches
    n = len(tuner.trials)
    assert 16 <= n <= 24, f"a 3 s budget at {TRIAL_SECONDS} s a trial and batches of 8 ran {n} trials"
    assert tuner.clock >= 3.0, f"the tuner clock reads {tuner.clock} s after the budget ended the run"


def confirms_its_leaders_without_new_trials(factory: TunerFactory, fx: KnobFixture) -> None:
    """``confirm`` re-times the leaders (a replay reads the same again, so the best stays) and adds no trial."""
    seen: list[int] = []
    tuner = factory(fx.task, 4)
    option = fx.option()
    tuner.tune(n_trial=20, measure_option=option, batch_size=5)
    before, trials = tuner.best_config, _indices(tuner)
    best = tuner.confirm(option, top=3, rounds=2, callbacks=[lambda t, i, r: seen.append(len(r))])
    assert seen == [3, 3], f"3 leaders re-timed in 2 rounds: callbacks saw {seen}"
    assert _indices(tuner) == trials, "confirm added or changed trials"
    assert best is tuner.best_config and str(best.key) == str(before.key), "a replay's confirmation moved the best"


TUNER_CHECKS: dict[str, Callable[[TunerFactory, KnobFixture], None]] = {
    f.__name__: f
    for f in (
        respects_n_trial_and_never_repeats,
        refuses_an_empty_space_by_name,
        calls_callbacks_and_writes_records,
        same_seed_same_trajectory,
        stops_when_the_space_is_exhausted,
        resumes_from_history_measuring_nothing_twice,
        time_budget_stops_on_the_tuner_clock,
        confirms_its_leaders_without_new_trials,
    )
}


def check_tuner(factory: TunerFactory, fixture: KnobFixture | None = None) -> None:
    """Run every tuner check on ``fixture`` (default: the built-in matmul task and its synthetic table);
    ``AssertionError`` names the first check that fails."""
    fx = fixture if fixture is not None else knob_fixture()
    for name, check in TUNER_CHECKS.items():
        try:
            check(factory, fx)
        except AssertionError as err:
            raise AssertionError(f"tuner check {name!r} failed: {err}") from err
