"""The adaptive evaluator on scripted, deterministic timings: it stops early on a steady kernel, runs to the
cap on a noisy one, drops the extreme micro-batches, and with the default runner's cap (5 x 3 = 15 runs) the
number of runs it spends depends on the noise. No kernel runs here and no assertion depends on a timing.
"""

from __future__ import annotations

import dataclasses
import inspect
import statistics

import numpy as np
import pytest

import adatune
from adatune.evaluator import (
    EVALUATOR_OPTIONS,
    EXTRA_BATCHES,
    TRIM_FROM_BATCHES,
    EvalOutcome,
    EvaluatorConfig,
    adaptive_stop_index,
    converge_cv,
    evaluate,
    options_markdown,
    trimmed,
)


class FakeKernel:
    """``time_fn`` of a kernel whose single runs take ``mean`` seconds with relative spread ``cv`` (seeded,
    normal, kept positive); each repeat reports the mean of its ``number`` runs, as TVM's time_evaluator does.
    ``script``, when given, is cycled through instead: one per-run time per repeat."""

    def __init__(self, mean: float = 1e-3, cv: float = 0.0, seed: int = 0, script: list[float] | None = None):
        self.mean, self.cv, self.script = mean, cv, script
        self.rng = np.random.default_rng(seed)
        self.calls: list[tuple[int, int, float]] = []
        self.runs = 0
        self._next = 0

    def __call__(self, number: int, repeat: int, min_repeat_ms: float) -> list[float]:
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
def test_micro_batch_shrinks_to_leave_room_for_a_decision():
    assert ADAPTIVE_DEFAULT.cap_runs == 15 and ADAPTIVE_DEFAULT.micro_batch == 50
    assert ADAPTIVE_DEFAULT.adaptive_micro_batch == 15 // (3 + EXTRA_BATCHES) == 2
    assert EvaluatorConfig(number=100, repeat=10, min_converge_coef=0.1).adaptive_micro_batch == 50  # fits as is
    assert EvaluatorConfig(number=7, repeat=11, min_converge_coef=0.1).adaptive_micro_batch == 77 // 6
    assert EvaluatorConfig(number=2, repeat=2, min_converge_coef=0.1).adaptive_micro_batch == 1


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
        ({"min_converge_coef": 0.1, "min_repeat_ms": 5.0}, "min_repeat_ms=5 cannot be used with the adaptive"),
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
        assert adaptive.eval_config.adaptive_micro_batch == 2 < adaptive.eval_config.cap_runs
        via_option = adatune.measure_option(adatune.measure.NoBuilder(), plain, min_converge_coef=0.1)
        assert via_option.runner.eval_config == adaptive.eval_config
    finally:
        plain.close()
        adaptive.close()


# -- evaluate with the default runner's cap ---------------------------------------------------------------
def test_steady_kernel_stops_early_under_the_default_cap():
    kernel = FakeKernel(cv=0.0)
    out = evaluate(kernel, ADAPTIVE_DEFAULT)
    assert out.runs == 6 < ADAPTIVE_DEFAULT.cap_runs == kernel.runs + 9
    assert kernel.calls == [(2, 3, 0.0)]  # the minimum three micro-batches in one time_evaluator call
    assert out.batch_runs == [2, 2, 2] and out.cv == pytest.approx(0.0, abs=1e-12)
    assert out.throughputs == pytest.approx([1e3] * 3)


def test_noisy_kernel_runs_to_the_default_cap_with_a_trimmed_last_batch():
    kernel = FakeKernel(script=[1.3e-3, 0.7e-3])  # alternating: per-batch CV about 0.3, extremes or not
    out = evaluate(kernel, ADAPTIVE_DEFAULT)
    assert out.runs == kernel.runs == 15
    assert kernel.calls == [(2, 3, 0.0)] + [(2, 1, 0.0)] * 4 + [(1, 1, 0.0)]
    assert out.batch_runs == [2] * 7 + [1] and len(out.costs) == 8
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
    assert set(spent[0.02]) == {6}  # a steady kernel always stops at the minimum
    assert statistics.fmean(spent[0.02]) < statistics.fmean(spent[0.2]) < statistics.fmean(spent[0.6])
    assert spent[0.6].count(15) > len(seeds) // 2  # a very noisy one mostly spends the whole cap
    assert len(set(spent[0.2])) > 2  # in between, the run count varies with what the batches show


def test_two_kernels_of_different_noise_get_different_run_counts():
    quiet, loud = FakeKernel(cv=0.02, seed=7), FakeKernel(cv=0.3, seed=7)
    quiet_out, loud_out = evaluate(quiet, ADAPTIVE_DEFAULT), evaluate(loud, ADAPTIVE_DEFAULT)
    assert quiet_out.runs == 6 and loud_out.runs > quiet_out.runs
    assert loud_out.runs == sum(loud_out.batch_runs) == loud.runs


def test_deterministic_evaluator_is_unchanged():
    kernel = FakeKernel(cv=0.1, seed=1)
    out = evaluate(kernel, EvaluatorConfig(number=7, repeat=11, min_repeat_ms=2.0))
    assert kernel.calls == [(7, 11, 2.0)] and out.runs == 77 and out.cv is None
    assert len(out.costs) == 11 and out.batch_runs == [7] * 11


def test_a_time_fn_that_returns_the_wrong_count_is_an_error():
    with pytest.raises(RuntimeError, match="returned 1 times for repeat=3"):
        evaluate(lambda n, r, ms: [1e-3], ADAPTIVE_DEFAULT)


def test_outcome_throughputs():
    assert EvalOutcome([0.5, 0.25], 4, None, [2, 2]).throughputs == [2.0, 4.0]
