"""The adaptive evaluator on scripted, deterministic timings: it stops early on a steady kernel, runs to the
cap on a noisy one, drops the extreme micro-batches, may stop after 30% of the cap (3 micro-batches of the paper's
n, as its authors' code), works with ``min_repeat_ms`` counting every run, and replays exactly on recorded
micro-batches. No kernel runs here and no assertion depends on a timing.
"""

from __future__ import annotations

import dataclasses
import inspect
import statistics

import numpy as np
import pytest

import adatune
from adatune.measure.evaluator import (
    ADATUNE_PAPER,
    EVALUATOR_OPTIONS,
    FLOOR_SHARE,
    TRIM_FROM_BATCHES,
    WARMUP_MS,
    EvalOutcome,
    EvaluatorConfig,
    adaptive_replay,
    adaptive_stop_index,
    converge_cv,
    evaluate,
    options_markdown,
    trimmed,
)


class FakeKernel:
    """``time_fn`` of a kernel whose single runs take ``mean`` seconds with relative spread ``cv`` (seeded,
    normal, kept positive); each repeat reports the mean of its ``number`` runs, as TVM's time_evaluator does.
    ``script``, when given, is cycled through instead: one per-run time per repeat. The evaluator's warm-up is
    its only call with ``min_repeat_ms > 0``: it goes to ``warmups`` (with the number of timed calls before it),
    not to ``calls`` or ``runs``, and reads the steady mean (its result must be dropped)."""

    def __init__(self, mean: float = 1e-3, cv: float = 0.0, seed: int = 0, script: list[float] | None = None):
        self.mean, self.cv, self.script = mean, cv, script
        self.rng = np.random.default_rng(seed)
        self.calls: list[tuple[int, int, float]] = []
        self.warmups: list[tuple[int, float]] = []
        self.runs = 0
        self._next = 0

    def __call__(self, number: int, repeat: int, min_repeat_ms: float) -> list[float]:
        if min_repeat_ms > 0:
            assert (number, repeat) == (1, 1), "a warm-up is one untimed repeat"
            self.warmups.append((len(self.calls), min_repeat_ms))
            return [1e3 * self.mean]  # a value no estimate may contain
        self.calls.append((number, repeat, min_repeat_ms))
        self.runs += number * repeat
        out = []
        for _ in range(repeat):
            if self.script is not None:
                out.append(self.script[self._next % len(self.script)])
                self._next += 1
            else:
                runs = self.rng.normal(self.mean, self.cv * self.mean, size=number)
                out.append(float(np.mean(np.maximum(runs, 0.05 * self.mean))))
        return out


ADAPTIVE_DEFAULT = EvaluatorConfig(min_converge_coef=0.1)  # the default runner's number=5, repeat=3


# -- options declared once --------------------------------------------------------------------------------
def test_options_are_declared_once_and_match_config_and_runner():
    names = [o.name for o in EVALUATOR_OPTIONS]
    assert names == [f.name for f in dataclasses.fields(EvaluatorConfig)]
    assert {o.name: o.default for o in EVALUATOR_OPTIONS} == dataclasses.asdict(EvaluatorConfig())
    runner_params = inspect.signature(adatune.LocalRunner.__init__).parameters
    for opt in EVALUATOR_OPTIONS:  # the runner's keyword defaults must not drift from the declaration
        assert runner_params[opt.name].default == opt.default, opt.name
    table = options_markdown()
    assert all(f"`{n}`" in table for n in names) and len(table.splitlines()) == len(names) + 2


# -- the CV rule on hand-computed numbers -----------------------------------------------------------------
def test_cv_is_over_per_batch_throughputs_without_trimming_below_five_batches():
    secs, runs = [1.0, 2.0, 4.0, 1.0], [2, 2, 2, 2]
    perf = [2.0, 1.0, 0.5, 2.0]  # runs / seconds of each batch, not the running mean
    want = statistics.pstdev(perf) / statistics.fmean(perf)
    assert converge_cv(secs, runs) == pytest.approx(want, rel=1e-12)


def test_min_and_max_batch_are_dropped_from_five_batches_on():
    secs, runs = [1.0, 2.0, 4.0, 1.0, 0.8], [1, 1, 1, 1, 1]
    # throughputs 1, 0.5, 0.25, 1, 1.25: the slowest (0.25) and the fastest (1.25) go, 0.5, 1, 1 remain
    kept = [0.5, 1.0, 1.0]
    assert sorted(trimmed([1 / s for s in secs])) == pytest.approx(kept)
    assert converge_cv(secs, runs) == pytest.approx(statistics.pstdev(kept) / statistics.fmean(kept), rel=1e-12)
    assert converge_cv(secs, runs) == pytest.approx(0.28284271247461906, rel=1e-12)
    assert TRIM_FROM_BATCHES == 5 and len(trimmed([1.0, 2.0, 3.0, 4.0])) == 4


def test_one_outlier_batch_stops_the_rule_only_until_it_can_be_dropped():
    # four equal batches and one preempted one: untrimmed, 4 batches are steady; the 5th is an outlier that
    # the trimmed CV ignores, so the rule stops at once instead of running on
    secs = [0.01, 0.01, 0.05, 0.01, 0.01, 0.01]
    assert adaptive_stop_index(secs, [10] * 6, 0.1, 3) == 5
    assert converge_cv(secs[:3], [10] * 3) > 0.1 and converge_cv(secs[:4], [10] * 4) > 0.1
    assert converge_cv(secs[:5], [10] * 5) == pytest.approx(0.0, abs=1e-12)


def test_cv_cannot_be_judged_with_one_batch_or_a_zero_time():
    assert converge_cv([0.5], [50]) == float("inf")
    assert converge_cv([0.5, 0.0, 0.5], [50] * 3) == float("inf")
    with pytest.raises(ValueError, match="2 batch times but 3 run counts"):
        converge_cv([0.5, 0.5], [1, 1, 1])


# -- the micro-batch fits the cap -------------------------------------------------------------------------
def test_micro_batch_shrinks_so_the_floor_is_at_most_30_percent_of_the_cap():
    assert ADAPTIVE_DEFAULT.cap_runs == 15 and ADAPTIVE_DEFAULT.micro_batch == 50 and FLOOR_SHARE == 0.3
    assert ADAPTIVE_DEFAULT.adaptive_micro_batch == 1  # 3 micro-batches of 1 run: 3 of 15 runs
    assert EvaluatorConfig(number=100, repeat=10, min_converge_coef=0.1).adaptive_micro_batch == 50  # fits as is
    assert EvaluatorConfig(number=7, repeat=11, min_converge_coef=0.1).adaptive_micro_batch == 23 // 3
    assert EvaluatorConfig(number=2, repeat=2, min_converge_coef=0.1).adaptive_micro_batch == 1
    for kw in ({}, {"number": 100, "repeat": 10}, {"number": 7, "repeat": 11}, ADATUNE_PAPER):
        cfg = EvaluatorConfig(**{"min_converge_coef": 0.1, **kw})
        assert cfg.adaptive_micro_batch * cfg.min_micro_batches <= FLOOR_SHARE * cfg.cap_runs, kw


def test_the_paper_preset_is_n500_b50_and_may_stop_after_150_runs():
    paper = EvaluatorConfig.adatune_paper()
    assert (paper.cap_runs, paper.adaptive_micro_batch, paper.min_converge_coef) == (500, 50, 0.1)
    kernel = FakeKernel(cv=0.01, seed=2)
    out = evaluate(kernel, paper)
    assert out.runs == kernel.runs == 150 and out.batch_runs == [50, 50, 50] and kernel.calls == [(50, 3, 0.0)]
    assert EvaluatorConfig.adatune_paper(0.05).min_converge_coef == 0.05
    runner = adatune.LocalRunner(**ADATUNE_PAPER)
    try:
        assert runner.eval_config == paper
    finally:
        runner.close()


def test_a_cap_too_small_for_min_micro_batches_is_rejected():
    with pytest.raises(ValueError, match=r"cap number \* repeat = 1 \* 3 = 3 runs .* min_micro_batches=3"):
        EvaluatorConfig(number=1, repeat=3, min_converge_coef=0.1)
    with pytest.raises(ValueError, match="min_micro_batches=8"):
        EvaluatorConfig(min_converge_coef=0.1, min_micro_batches=8, micro_batch=1, number=2, repeat=4)
    EvaluatorConfig(number=1, repeat=3)  # the deterministic evaluator has nothing to decide: fine
    with pytest.raises(ValueError, match="cap number"):
        adatune.LocalRunner(number=1, repeat=2, min_converge_coef=0.1)
    runner = adatune.LocalRunner(number=1, repeat=2)
    try:
        with pytest.raises(ValueError, match="cap number"):
            adatune.measure_option(adatune.measure.NoBuilder(), runner, min_converge_coef=0.1)
    finally:
        runner.close()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"number": 0}, "number must be an integer >= 1"),
        ({"repeat": True}, "repeat must be an integer >= 1"),
        ({"micro_batch": 0}, "micro_batch must be an integer >= 1"),
        ({"min_repeat_ms": -1.0}, "min_repeat_ms must be a finite number >= 0"),
        ({"min_converge_coef": 0.0}, "min_converge_coef must be a positive finite number"),
        ({"min_converge_coef": float("nan")}, "min_converge_coef must be a positive finite number"),
    ],
)
def test_bad_options_name_the_problem(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EvaluatorConfig(**kwargs)


def test_default_runner_with_min_converge_coef_is_valid_and_adaptive():
    plain, adaptive = adatune.LocalRunner(), adatune.LocalRunner(min_converge_coef=0.1)
    try:
        assert plain.eval_config.min_converge_coef is None
        assert adaptive.eval_config == dataclasses.replace(plain.eval_config, min_converge_coef=0.1)
        assert adaptive.eval_config != plain.eval_config
        assert adaptive.eval_config.adaptive_micro_batch == 1 < adaptive.eval_config.cap_runs
        via_option = adatune.measure_option(adatune.measure.NoBuilder(), plain, min_converge_coef=0.1)
        assert via_option.runner.eval_config == adaptive.eval_config
    finally:
        plain.close()
        adaptive.close()


# -- evaluate with the default runner's cap ---------------------------------------------------------------
def test_steady_kernel_stops_early_under_the_default_cap():
    kernel = FakeKernel(cv=0.0)
    out = evaluate(kernel, ADAPTIVE_DEFAULT)
    assert out.runs == 3 == ADAPTIVE_DEFAULT.min_micro_batches and kernel.runs == 3  # 3 micro-batches of 1 run
    assert kernel.calls == [(1, 3, 0.0)]  # the minimum three micro-batches in one time_evaluator call
    assert out.batch_runs == [1, 1, 1] and out.cv == pytest.approx(0.0, abs=1e-12)
    assert out.throughputs == pytest.approx([1e3] * 3)


def test_noisy_kernel_runs_to_the_default_cap():
    kernel = FakeKernel(script=[1.3e-3, 0.7e-3])  # alternating: per-batch CV about 0.3, extremes or not
    out = evaluate(kernel, ADAPTIVE_DEFAULT)
    assert out.runs == kernel.runs == 15
    assert kernel.calls == [(1, 3, 0.0)] + [(1, 1, 0.0)] * 12
    assert out.batch_runs == [1] * 15 and len(out.costs) == 15
    assert out.cv is not None and out.cv >= 0.1


def test_noisy_kernel_runs_to_a_large_cap_and_steady_one_stops_at_the_minimum():
    cfg = EvaluatorConfig(number=100, repeat=10, min_converge_coef=0.1)
    noisy = FakeKernel(script=[1e-5, 1e-1])
    out = evaluate(noisy, cfg)
    assert out.runs == 1000 and len(out.costs) == 20 and noisy.calls[0] == (50, 3, 0.0)
    steady = FakeKernel(cv=0.01, seed=3)
    assert evaluate(steady, cfg).runs == 150


def test_runs_spent_under_the_default_cap_depend_on_the_noise():
    seeds = range(40)
    spent = {cv: [evaluate(FakeKernel(cv=cv, seed=s), ADAPTIVE_DEFAULT).runs for s in seeds] for cv in (0.02, 0.2, 0.6)}
    assert set(spent[0.02]) == {3}  # a steady kernel always stops at the minimum
    assert statistics.fmean(spent[0.02]) < statistics.fmean(spent[0.2]) < statistics.fmean(spent[0.6])
    assert spent[0.6].count(15) > len(seeds) // 2  # a very noisy one mostly spends the whole cap
    assert len(set(spent[0.2])) > 2  # in between, the run count varies with what the batches show


def test_two_kernels_of_different_noise_get_different_run_counts():
    quiet, loud = FakeKernel(cv=0.02, seed=7), FakeKernel(cv=0.5, seed=7)
    quiet_out, loud_out = evaluate(quiet, ADAPTIVE_DEFAULT), evaluate(loud, ADAPTIVE_DEFAULT)
    assert quiet_out.runs == 3 and loud_out.runs > quiet_out.runs
    assert loud_out.runs == sum(loud_out.batch_runs) == loud.runs


def test_deterministic_evaluator_without_min_repeat_ms_is_one_call():
    kernel = FakeKernel(cv=0.1, seed=1)
    out = evaluate(kernel, EvaluatorConfig(number=7, repeat=11))
    assert kernel.calls == [(7, 11, 0.0)] and out.runs == 77 and out.cv is None
    assert len(out.costs) == 11 and out.batch_runs == [7] * 11


def test_min_repeat_ms_grows_number_and_every_run_is_counted():
    # 0.1 ms a run: a repeat of 2 ms needs 20 runs; the first call of `number` runs tells so
    kernel = FakeKernel(mean=1e-4, cv=0.0)
    out = evaluate(kernel, EvaluatorConfig(number=7, repeat=11, min_repeat_ms=2.0))
    assert kernel.calls == [(7, 1, 0.0), (20, 11, 0.0)]
    assert out.runs == kernel.runs == 7 + 20 * 11 and out.batch_runs == [20] * 11
    # the adaptive evaluator: the cap is the grown 20 x 3 = 60 runs, micro-batches of 60 * 0.3 // 3 = 6 runs,
    # and the first call is its first micro-batch
    kernel = FakeKernel(mean=1e-4, cv=0.0)
    out = evaluate(kernel, EvaluatorConfig(number=5, repeat=3, min_repeat_ms=2.0, min_converge_coef=0.1))
    assert kernel.calls == [(5, 1, 0.0), (6, 2, 0.0)]
    assert out.runs == kernel.runs == 17 and out.batch_runs == [5, 6, 6] and out.cv == pytest.approx(0.0, abs=1e-9)
    noisy = FakeKernel(mean=1e-4, script=[1.3e-4, 0.7e-4])
    out = evaluate(noisy, EvaluatorConfig(number=5, repeat=3, min_repeat_ms=2.0, min_converge_coef=0.1))
    assert out.runs == noisy.runs <= 5 + 60 and sum(out.batch_runs) == out.runs


def test_replaying_recorded_micro_batches_is_the_evaluator_exactly():
    cfg = EvaluatorConfig(number=10, repeat=20, micro_batch=10, min_converge_coef=0.05)
    for cv, seed in ((0.01, 0), (0.1, 1), (0.3, 2)):
        live = evaluate(FakeKernel(cv=cv, seed=seed), cfg)
        recorded = evaluate(FakeKernel(cv=cv, seed=seed), EvaluatorConfig(number=10, repeat=20))  # a full sweep
        costs, runs, got_cv = adaptive_replay(recorded.costs, recorded.batch_runs, 0.05, cfg.min_micro_batches)
        assert (costs, runs) == (live.costs, live.batch_runs) and got_cv == live.cv, cv
    with pytest.raises(ValueError, match="3 recorded costs but 2 run counts"):
        adaptive_replay([1.0, 1.0, 1.0], [1, 1], 0.1, 2)


def test_every_evaluator_warms_the_kernel_up_once_untimed_before_timing_it():
    assert EvaluatorConfig().warmup_ms == WARMUP_MS > 0
    for cfg in (
        EvaluatorConfig(number=7, repeat=11),
        EvaluatorConfig(number=7, repeat=11, min_repeat_ms=2.0),
        ADAPTIVE_DEFAULT,
        EvaluatorConfig(**ADATUNE_PAPER),
        EvaluatorConfig(warmup_ms=3.5, min_converge_coef=0.1),
    ):
        kernel = FakeKernel(mean=1e-4, cv=0.05, seed=3)
        out = evaluate(kernel, cfg)
        assert kernel.warmups == [(0, cfg.warmup_ms)], cfg  # once, before the first timed call
        assert out.runs == kernel.runs  # its runs are not counted
        assert max(out.costs) < 10 * kernel.mean  # nor is its time part of any estimate
    cold = FakeKernel(mean=1e-4, cv=0.05, seed=3)
    assert (
        evaluate(cold, EvaluatorConfig(warmup_ms=0)).costs
        == evaluate(FakeKernel(mean=1e-4, cv=0.05, seed=3), EvaluatorConfig()).costs
    )
    assert cold.warmups == []  # warmup_ms=0: none
    for bad in (-1.0, float("nan"), True):
        with pytest.raises(ValueError, match="warmup_ms must be a finite number >= 0"):
            EvaluatorConfig(warmup_ms=bad)


def test_a_time_fn_that_returns_the_wrong_count_is_an_error():
    with pytest.raises(RuntimeError, match="returned 1 times for repeat=3"):
        evaluate(lambda n, r, ms: [1e-3], ADAPTIVE_DEFAULT)


def test_outcome_throughputs():
    assert EvalOutcome([0.5, 0.25], 4, None, [2, 2]).throughputs == [2.0, 4.0]


def test_a_replay_runner_serves_through_the_adaptive_evaluator(matmul_task):
    """``measure_option(..., min_converge_coef=...)`` on a ReplayRunner cuts each recorded candidate where the
    evaluator would have stopped: fewer runs, the first costs, run seconds less the skipped batches."""
    from adatune.measure import MeasureErrorNo, MeasureInput, MeasureResult, ReplayRunner

    steady = [1e-3, 1.001e-3, 0.999e-3, 1e-3, 1e-3, 1e-3]
    noisy = [1e-3, 3e-3, 1e-3, 3e-3, 1e-3, 3e-3]
    cands = matmul_task.space.random_candidates(np.random.default_rng(0), 2, exclude=set())
    table = {
        (matmul_task.workload_key, c.key): MeasureResult(
            tuple(costs), MeasureErrorNo.NO_ERROR, 1.0 + 0.6, 0.0, build_time=1.0, run_time=0.6, runs=60
        )
        for c, costs in zip(cands, (steady, noisy))
    }
    plain = adatune.measure_option(runner=ReplayRunner(table))
    adaptive = adatune.measure_option(runner=ReplayRunner(table), min_converge_coef=0.1)
    inputs = [MeasureInput(matmul_task, c) for c in cands]
    as_recorded = plain.measure(inputs).results
    cut = adaptive.measure(inputs).results
    assert [r.runs for r in as_recorded] == [60, 60] and as_recorded[0].costs == tuple(steady)
    assert cut[0].runs == 30 and cut[0].costs == tuple(steady[:3]) and cut[0].cv is not None
    assert cut[0].run_time == pytest.approx(0.6 - 10 * sum(steady[3:]))
    assert cut[0].all_cost == pytest.approx(1.0 + cut[0].run_time) and cut[0].extra["replayed_runs"] == 60
    assert cut[1].runs == 60 and cut[1].costs == tuple(noisy)  # never converged: the whole cap
