"""``Tuner.confirm``: the top candidates re-timed in turns, the best chosen by the median of those readings, and
every reader of a log (``best_records``, ``apply_history_best``, ``record.pick_best``) choosing by them alike.

A scripted runner stands in for the machine: its first candidate reads lucky once (0.5 ms, then 2.0), so
tuning keeps it, as a noisy host's single readings do; the confirmation must find the steady 0.9 ms one."""

from __future__ import annotations

import io
import time
from collections.abc import Sequence

import numpy as np
import pytest

import adatune
from adatune.measure import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult, Runner
from adatune.records import CONFIRM, best_records, load_from_file, save_to_file
from adatune.tuners import RandomTuner


class LuckyFirstRunner(Runner):
    """The first key it sees reads 0.5 ms once and 2.0 ms after; the second 0.9 ms always; the others
    1.0 ms + 0.01 ms per key seen before them. ``calls`` keeps the keys of every ``run`` call, in order."""

    needs_build = False

    def __init__(self) -> None:
        self.order: list[str] = []
        self.seen: dict[str, int] = {}
        self.calls: list[list[str]] = []

    def cost(self, key: str) -> float:
        if key not in self.order:
            self.order.append(key)
        rank, times = self.order.index(key), self.seen.get(key, 0)
        self.seen[key] = times + 1
        if rank == 0:
            return 0.5e-3 if times == 0 else 2.0e-3
        return 0.9e-3 if rank == 1 else 1.0e-3 + 1e-5 * rank

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        self.calls.append([str(inp.config.key) for inp in inputs])
        out = []
        for inp in inputs:
            c = self.cost(str(inp.config.key))
            out.append(MeasureResult((c, c, c), MeasureErrorNo.NO_ERROR, c, time.time(), runs=3))
        return out


@pytest.fixture
def tuned(tmp_path):
    task = adatune.task.create("dense.x86", (64, 64, 64, "float32"), adatune.target.host())
    runner = LuckyFirstRunner()
    option = adatune.measure_option(runner=runner)
    log = str(tmp_path / "log.jsonl")
    tuner = RandomTuner(task, seed=0)
    tuner.tune(8, option, batch_size=4, callbacks=[adatune.callback.log_to_file(log)])
    return tuner, option, runner, log


def test_confirm_re_times_the_leaders_in_turns_and_keeps_the_fastest_by_median(tuned):
    tuner, option, runner, log = tuned
    lucky, steady, third = runner.order[:3]
    assert str(tuner.best_config.key) == lucky  # tuning kept the lucky reading
    calls_before = len(runner.calls)
    best = tuner.confirm(option, top=3, rounds=3, callbacks=[adatune.callback.log_to_file(log)])
    assert str(best.key) == steady and str(tuner.best_config.key) == steady
    assert tuner.best_flops == pytest.approx(tuner.task.flop / 0.9e-3)
    rounds = runner.calls[calls_before:]
    assert rounds == [[lucky, steady, third], [third, steady, lucky], [lucky, steady, third]]  # in turns, reversed
    assert len(tuner.trials) == 8 and len(tuner.visited) == 8  # re-timings are not trials
    marked = [r for r in load_from_file(log) if CONFIRM in r.result.extra]
    assert len(marked) == 9 and {r.result.extra[CONFIRM]["round"] for r in marked} == {0, 1, 2}


def test_every_reader_of_the_log_picks_the_confirmed_candidate(tuned, tmp_path):
    tuner, option, runner, log = tuned
    lucky, steady = runner.order[:2]
    assert best_records(load_from_file(log))[tuner.task.workload_key].key == lucky  # before: the lucky reading
    tuner.confirm(option, top=3, rounds=3, callbacks=[adatune.callback.log_to_file(log)])
    picked = best_records(load_from_file(log))[tuner.task.workload_key]
    assert picked.key == steady and CONFIRM in picked.result.extra and picked.cost == pytest.approx(0.9e-3)
    best = adatune.apply_history_best(log).best_record(tuner.task.target, tuner.task.workload)
    assert best is not None and best.key == steady
    out = io.StringIO()
    adatune.record.pick_best(log, out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and adatune.records.decode(lines[0]).key == steady


def test_a_later_reading_takes_over_only_against_the_winners_own_tuning_reading(tuned):
    tuner, option, runner, log = tuned
    steady = runner.order[1]
    tuner.confirm(option, top=3, rounds=3, callbacks=[adatune.callback.log_to_file(log)])
    fresh = tuner.space.random_candidates(np.random.default_rng(1), 1, exclude=set(map(str, tuner.visited)))[0]
    inp = MeasureInput(tuner.task, fresh)
    for cost, want in ((0.95e-3, steady), (0.7e-3, str(fresh.key))):  # steady's own tuning reading was 0.9 ms
        save_to_file(log, [(inp, MeasureResult((cost,), MeasureErrorNo.NO_ERROR, cost, time.time() + 1, runs=1))])
        assert best_records(load_from_file(log))[tuner.task.workload_key].key == want, cost


def test_confirm_refuses_nonsense_and_leaves_a_lone_candidate_alone(tuned):
    tuner, option, runner, _ = tuned
    for kw in ({"top": 0}, {"rounds": 0}):
        with pytest.raises(ValueError, match="confirm needs top >= 1 and rounds >= 1"):
            tuner.confirm(option, **kw)
    calls = len(runner.calls)
    assert tuner.confirm(option, top=1) is tuner.best_config and len(runner.calls) == calls


def test_a_resumed_run_takes_no_re_timing_as_a_trial(tuned):
    tuner, option, runner, log = tuned
    tuner.confirm(option, top=3, rounds=3, callbacks=[adatune.callback.log_to_file(log)])
    resumed = RandomTuner(tuner.task, seed=0)
    assert resumed.load_history(load_from_file(log)) == 8  # the 8 trials, not the 9 re-timings
    assert len(resumed.trials) == 8 and resumed.visited == tuner.visited
