"""AdaTune: the adaptive evaluator, the RFEI cost model, contextual exploration with simulated annealing and RFEITuner.

Real kernels run through LocalRunner where the behaviour depends on real timing; the arithmetic is checked
on synthetic timings. No assertion depends on how fast this machine is.
"""

from __future__ import annotations

import logging
import warnings
from functools import partial

import numpy as np
import pytest
import tvm
from conftest import synthetic_cost
from scipy.stats import norm
from tvm import te
from tvm.script import tirx as T

import adatune
from adatune.cost_models import RFEICostModel, expected_improvement
from adatune.measure import LocalBuilder, LocalRunner, MeasureInput, ReplayRunner
from adatune.records import load_from_file
from adatune.search.optimizers import ExplorationPolicy, SimulatedAnnealingOptimizer, exploration_rate
from adatune.tuners import RFEITuner


# -- a deliberately noisy real kernel ---------------------------------------------------------------------
@T.prim_func
def _noisy_kernel(A: T.Buffer((1,), "uint32"), C: T.Buffer((2,), "uint32")):
    """Each run advances an LCG kept in C[0] and spins 2^(0..16) steps of a second one: run times spread over
    five orders of magnitude, so no number of repetitions makes its throughput estimate converge."""
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    C[0] = C[0] * T.uint32(1103515245) + T.uint32(12345) + A[0] * T.uint32(0)
    for _k in range(T.shift_left(T.uint32(1), (C[0] >> T.uint32(16)) % T.uint32(17))):
        C[1] = C[1] * T.uint32(1664525) + T.uint32(1013904223)


if "test/noisy" not in adatune.task.registered_templates():

    @adatune.template("test/noisy")
    def _noisy(n: int):
        A = te.placeholder((1,), "uint32", name="A")
        C = te.compute((2,), lambda i: A[0], name="C")
        adatune.get_config().add_flop(float(n))
        return tvm.s_tir.Schedule(_noisy_kernel), [A, C]


def _measure(task: adatune.task.Task, index: int, runner: LocalRunner) -> adatune.MeasureResult:
    builder = LocalBuilder(n_parallel=1)
    try:
        inp = MeasureInput(task, task.config_space.get(index))
        return runner.run([inp], builder.build([inp]))[0]
    finally:
        builder.close()
        runner.close()


# -- adaptive evaluator: its rule is tested on scripted timings in test_evaluator.py; here, the wiring ------
def test_measure_option_switches_the_evaluator_and_records_runs_and_cv(matmul_task):
    runner = LocalRunner(number=4, repeat=3, timeout=60)
    assert runner.eval_config.min_converge_coef is None
    option = adatune.measure_option(LocalBuilder(n_parallel=1), runner, min_converge_coef=0.1)
    assert runner.eval_config.min_converge_coef is None  # the runner passed in is left as it is
    assert option.runner.eval_config.min_converge_coef == 0.1
    try:
        res = option.measure([MeasureInput(matmul_task, matmul_task.config_space.get(7))])[0]
    finally:
        option.close()
    assert res.ok and 1 <= res.runs <= 12  # the adaptive evaluator decides, within the 4 x 3 cap
    assert res.cv is not None and res.to_json()["runs"] == res.runs


# -- RFEI cost model --------------------------------------------------------------------------------------
def test_expected_improvement_matches_scipy_including_sigma_zero():
    mu = np.array([0.5, 1.0, 1.3, 0.9, 1.4, 0.2, 2.0])
    sigma = np.array([0.1, 0.2, 0.05, 0.0, 0.0, 1e-300, 0.3])
    best = 1.1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # sigma = 0 must not divide by zero or warn
        with np.errstate(divide="raise", over="raise", invalid="raise"):
            got = expected_improvement(mu, sigma, best)
    want = []
    for m, s in zip(mu, sigma):
        if s == 0:
            want.append(max(0.0, m - best))  # eq. (1) with a certain f(x)
        else:
            z = (m - best) / s
            with np.errstate(over="ignore"):  # the naive reference squares Z = -9e299
                want.append((m - best) * norm.cdf(z) + s * norm.pdf(z))  # eq. (2)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
    assert np.all(np.isfinite(got)) and np.all(got >= 0)
    assert got[3] == 0.0 and got[4] == pytest.approx(0.3)


def _synthetic_flops(task: adatune.task.Task) -> np.ndarray:
    return np.array([task.flop / synthetic_cost(task, i) for i in range(len(task.config_space))])


def test_rfei_predict_is_ei_of_its_mean_and_std(matmul_task):
    y = _synthetic_flops(matmul_task)
    xs = np.random.default_rng(0).choice(len(y), 60, replace=False)
    model = RFEICostModel(matmul_task, n_trees=32, seed=0)
    model.fit(xs, y[xs], 16)
    assert model.uncertainty_used == "forestci"
    assert model.best_flops == pytest.approx(y[xs].max())
    q = np.arange(len(y))
    mu, sd = model.predict_mean_std(q)
    assert np.all(np.isfinite(mu)) and np.all(sd >= 0) and mu.max() <= model.best_flops * (1 + 1e-9)
    ei = model.predict(q)
    want = np.array([expected_improvement(np.array([m]), np.array([s]), model.best_flops)[0] for m, s in zip(mu, sd)])
    np.testing.assert_allclose(ei, want / model.best_flops, rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(model.predict(q[::-1]), ei[::-1])  # cached, batch-independent


def test_rfei_mean_acquisition_is_the_forests_mean_alone(matmul_task):
    """The ablation control: the same forest (same seed) scored by its mean, so EI's part can be isolated."""
    y = _synthetic_flops(matmul_task)
    xs = np.random.default_rng(0).choice(len(y), 60, replace=False)
    ei_model, mean_model = (RFEICostModel(matmul_task, n_trees=32, seed=0, acquisition=a) for a in ("ei", "mean"))
    for m in (ei_model, mean_model):
        m.fit(xs, y[xs], 16)
    q = np.arange(len(y))
    mu, _ = ei_model.predict_mean_std(q)
    np.testing.assert_allclose(mean_model.predict(q), mu / ei_model.best_flops, rtol=1e-9)
    assert not np.allclose(ei_model.predict(q), mean_model.predict(q))
    with pytest.raises(ValueError, match="option acquisition=ucb: expected one of ei, plugin-ei, mean"):
        RFEICostModel(matmul_task, acquisition="ucb")


def test_rfei_plugin_ei_measures_improvement_over_the_forests_best_predicted_mean(matmul_task):
    """Plug-in EI: the incumbent is the forest's best mean over its training configs, below the best measured
    throughput (bootstrap trees that left the best config out predict its neighbours), so EI is larger everywhere
    and the best-predicted configs gain against merely uncertain ones."""
    y = _synthetic_flops(matmul_task)
    xs = np.random.default_rng(0).choice(len(y), 60, replace=False)
    plain, plugin = (RFEICostModel(matmul_task, n_trees=32, seed=0, acquisition=a) for a in ("ei", "plugin-ei"))
    for m in (plain, plugin):
        m.fit(xs, y[xs], 16)
    train_mean, _ = plugin.predict_mean_std(xs)
    assert plugin.best_mean == pytest.approx(train_mean.max(), rel=1e-9)
    assert plugin.best_mean < plugin.best_flops == plain.best_flops
    q = np.arange(len(y))
    mu, sd = plugin.predict_mean_std(q)
    want = expected_improvement(mu / plugin.scale, sd / plugin.scale, plugin.best_mean / plugin.scale)
    np.testing.assert_allclose(plugin.predict(q), want, rtol=1e-9, atol=1e-300)
    assert np.all(plugin.predict(q) >= plain.predict(q)) and np.any(plugin.predict(q) > plain.predict(q))


def test_rfei_recalibrate_scales_sigma_by_the_held_out_z_of_the_next_measurements(matmul_task):
    """``recalibrate``: at a refit, the configs measured since the last fit are scored under the forest that was
    current when they were picked; sigma is then multiplied by sqrt(median(z^2) / median(chi2_1)) of every such z,
    and that factor is kept; the mean and the forest itself are those of the uncalibrated model."""
    from scipy.stats import chi2

    y = _synthetic_flops(matmul_task)
    order = np.random.default_rng(2).permutation(len(y))
    first, second = order[:40], order[:72]
    plain, recal = (RFEICostModel(matmul_task, n_trees=32, seed=0, recalibrate=r) for r in (False, True))
    for m in (plain, recal):
        m.fit(first, y[first], 16)
    assert recal.sigma_factor == 1.0 and recal.sigma_factors == [1.0]  # nothing held out yet
    mu0, sd0 = plain.predict_mean_std(order[40:72])  # the first forest's view of the next 32 configs
    z2 = ((y[order[40:72]] - mu0) / sd0) ** 2
    want = float(np.sqrt(np.median(z2[y[order[40:72]] > 0]) / chi2.median(1)))
    for m in (plain, recal):
        m.fit(second, y[second], 16)
    assert recal.sigma_factor == pytest.approx(want, rel=1e-9) and recal.sigma_factors == [1.0, recal.sigma_factor]
    assert plain.sigma_factor == 1.0 and plain.sigma_factors == [1.0, 1.0]
    (held,) = plain.held_out  # kept without recalibrate too: the record of how the first forest did
    z = (y[order[40:72]] - mu0) / sd0
    assert held["fit"] == 1 and held["n"] == 32 and held["factor"] == pytest.approx(want, rel=1e-9)
    assert held["z_mean"] == pytest.approx(z.mean()) and held["z_rms"] == pytest.approx(np.sqrt(np.mean(z**2)))
    assert recal.held_out == plain.held_out
    q = np.arange(len(y))
    (mu_p, sd_p), (mu_r, sd_r) = plain.predict_mean_std(q), recal.predict_mean_std(q)
    np.testing.assert_allclose(mu_r, mu_p, rtol=1e-12)
    np.testing.assert_allclose(sd_r, sd_p * want, rtol=1e-9)
    want_ei = expected_improvement(mu_p, sd_p * want, plain.best_flops) / plain.scale
    np.testing.assert_allclose(recal.predict(q), want_ei, rtol=1e-9, atol=1e-300)
    with pytest.raises(ValueError, match="recalibrate"):
        RFEICostModel(matmul_task, recalibrate=2)  # type: ignore[arg-type]
    assert RFEICostModel(matmul_task, recalibrate="false").recalibrate is False  # type: ignore[arg-type]


def test_rfei_variance_is_forestci_infinitesimal_jackknife(matmul_task):
    import forestci

    y = _synthetic_flops(matmul_task)
    xs = np.random.default_rng(1).choice(len(y), 80, replace=False)
    model = RFEICostModel(matmul_task, n_trees=48, calibrate=False, seed=3)
    model.fit(xs, y[xs], 16)
    q = np.arange(len(y))
    x_train, x_test = model.features(xs), model.features(q)
    var = forestci.random_forest_error(model.forest, x_train.shape, x_test, calibrate=False)
    mu, sd = model.predict_mean_std(q)
    np.testing.assert_allclose(sd / model.scale, np.sqrt(np.maximum(var, 0)), rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(mu / model.scale, model.forest.predict(x_test), rtol=1e-6)


def test_rfei_falls_back_to_tree_spread_with_a_warning(matmul_task, caplog, monkeypatch):
    import forestci

    def broken(*args, **kwargs):
        raise ValueError("no in-bag samples")

    monkeypatch.setattr(forestci, "calc_inbag", broken)
    y = _synthetic_flops(matmul_task)
    xs = np.arange(0, 300, 5)
    model = RFEICostModel(matmul_task, n_trees=16, seed=0)
    with caplog.at_level(logging.WARNING, logger="adatune.cost_model"):
        model.fit(xs, y[xs], 16)
    assert model.uncertainty_used == "trees"
    assert any("per-tree" in r.message for r in caplog.records)
    _, sd = model.predict_mean_std(np.arange(20))
    preds = np.stack([t.predict(model.features(np.arange(20))) for t in model.forest.estimators_])
    np.testing.assert_allclose(sd / model.scale, preds.std(axis=0), rtol=1e-6)


def test_rfei_with_one_or_two_training_configs_gives_finite_scores(matmul_task, caplog):
    y = _synthetic_flops(matmul_task)
    for xs in ([7], [7, 7], [3, 9]):
        model = RFEICostModel(matmul_task, n_trees=16, seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model.fit(xs, y[xs], 16)
            mu, sd = model.predict_mean_std(np.arange(50))
            ei = model.predict(np.arange(50))
        assert np.all(np.isfinite(mu)) and np.all(np.isfinite(sd)) and np.all(np.isfinite(ei))
    assert any("at least two" in r.message for r in caplog.records)


def test_rfei_fit_log_warm_starts(matmul_task, replay_table, tmp_path):
    log = tmp_path / "warm.jsonl"
    option = adatune.measure_option(runner=ReplayRunner(replay_table))
    RFEITuner(matmul_task, plan_size=8, seed=0).tune(24, option, callbacks=[adatune.callback.log_to_file(str(log))])
    model = RFEICostModel(matmul_task, n_trees=16, seed=0)
    model.fit_log(load_from_file(str(log)), 8)
    assert model.forest is not None and model.x_train_shape[0] == 24
    model.fit([1, 2], [1.0, 2.0], 8)  # later fits keep the warm-start records
    assert model.x_train_shape[0] == 26


# -- contextual exploration ---------------------------------------------------------------------------
def test_exploration_rate_formula():
    assert exploration_rate(np.array([1.0, 3.0]), 10.0) == pytest.approx(0.2)
    assert exploration_rate(np.array([30.0]), 10.0) == 1.0  # clamped
    assert exploration_rate(np.array([0.0]), 10.0) == 0.0
    assert exploration_rate(np.array([1.0]), 0.0) == 1.0  # nothing measured works yet: explore


def _eps_after(task, ys: np.ndarray, n: int, seed: int, uncertainty: str) -> float:
    rng = np.random.default_rng(seed)
    xs = rng.choice(len(ys), n, replace=False)
    model = RFEICostModel(task, n_trees=64, uncertainty=uncertainty, seed=seed)
    model.fit(xs, ys[xs], 16)
    policy = ExplorationPolicy(model=model, featurize=model.features, n_context=64)  # as RFEITuner builds it
    return policy.rate(task.space, rng, {str(int(x)) for x in xs})


@pytest.mark.parametrize("uncertainty", ["forestci", "trees"])
def test_eps_rises_when_uncertain_and_falls_as_the_model_learns(matmul_task, uncertainty):
    smooth = _synthetic_flops(matmul_task)
    noise = np.random.default_rng(42).random(len(smooth)) * smooth.max()  # nothing to learn
    seeds = range(3)
    few = np.median([_eps_after(matmul_task, smooth, 12, s, uncertainty) for s in seeds])
    many = np.median([_eps_after(matmul_task, smooth, 240, s, uncertainty) for s in seeds])
    unlearnable = np.median([_eps_after(matmul_task, noise, 240, s, uncertainty) for s in seeds])
    assert 0 <= many < few <= 1
    assert unlearnable > 2 * many


def test_contextual_plan_mixes_annealing_and_random_by_eps(matmul_task):
    class Fixed:
        best_flops = 10.0

        def __init__(self, sigma: float):
            self.sigma = sigma

        def predict_mean_std(self, xs):
            return np.zeros(len(xs)), np.full(len(xs), self.sigma)

    space = matmul_task.space

    def score(cands):  # annealing should find index 100 and its neighbours
        return -np.abs(np.asarray([c.index for c in cands], dtype=float) - 100.0)

    visited = {str(i) for i in range(0, 360, 3)}
    for sigma, n_random in ((0.0, 0), (2.5, 8), (50.0, 32)):
        # composed as ModelBasedTuner.refit composes them: the policy splits the plan, annealing fills its share
        policy = ExplorationPolicy(model=Fixed(sigma), featurize=space.featurize)
        sa = SimulatedAnnealingOptimizer(space, np.random.default_rng(0))
        picks = policy.plan(
            space, np.random.default_rng(1), 32, visited, partial(sa.find_maximums, score, exclusive=visited)
        )
        plan = [c.index for c in picks]
        assert len(plan) == len(set(plan)) == 32 and not {str(p) for p in plan} & visited
        assert policy.history == [min(sigma / 10.0, 1.0)]
        assert policy.splits == [(32 - n_random, n_random)]
        if n_random < 32:
            assert plan[0] in (100, 101)  # the best annealing candidate leads the plan
        assert all(abs(p - 100) <= 50 for p in plan[: 32 - n_random])


def test_rfei_tuner_logs_eps_every_refit(matmul_task, replay_option, caplog):
    tuner = RFEITuner(matmul_task, plan_size=16, n_trees=32, seed=0)
    with caplog.at_level(logging.INFO, logger="adatune.optimizer"):
        tuner.tune(n_trial=64, measure_option=replay_option, batch_size=16)
    assert len(tuner.eps_history) == tuner.train_ct == 4  # refits after 16, 32, 48 and 64 trials
    assert all(0 <= e <= 1 for e in tuner.eps_history)
    assert sum("eps_t=" in r.message for r in caplog.records) == 4
    assert RFEITuner(matmul_task, contextual=False).eps_history == []


# -- end to end, AutoTVM style, on this machine --------------------------------------------------------
def test_autotvm_style_script_runs_end_to_end_and_writes_records(matmul_task, tmp_path):
    log = str(tmp_path / "matmul.jsonl")
    builder = adatune.LocalBuilder(n_parallel=2)
    runner = adatune.LocalRunner(number=20, repeat=10, timeout=60)
    option = adatune.measure_option(builder, runner, min_converge_coef=0.1)
    tuner = RFEITuner(matmul_task, plan_size=8)
    try:
        tuner.tune(n_trial=24, measure_option=option, batch_size=8, callbacks=[adatune.callback.log_to_file(log)])
    finally:
        option.close()
    records = list(load_from_file(log))
    assert len(records) == 24 and tuner.train_ct >= 2 and len(tuner.eps_history) == tuner.train_ct
    ok = [r for r in records if r.result.ok]
    assert ok and tuner.best_flops > 0
    assert all(1 <= r.result.runs <= 200 for r in ok)  # adaptive: the evaluator decides, cap 20 x 10
    assert all(r.result.cv is not None for r in ok)
    best = adatune.best_records(records)[matmul_task.workload_key]
    assert best.config_index == tuner.best_config.index
