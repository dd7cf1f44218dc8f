"""adatune's plug-ins inside TVM's own meta_schedule: each is really called by ``ms.tune_tir``, the tuned
schedule computes a matmul correctly, crashing and hanging kernels come back as errors while measuring goes on,
FastBuilder's artifacts run correctly, and the cost model survives save/load. One small ``tune_tir`` run (64x64
matmul, 16 trials) is shared by the tests that need it."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import te
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.arg_info import ArgInfo
from tvm.s_tir.meta_schedule.builder import BuilderInput, PyBuilder
from tvm.s_tir.meta_schedule.runner import RunnerInput
from tvm.script import tirx as T

from adatune.measure import MeasureErrorNo
from adatune.meta_schedule import (
    AdaptiveRunner,
    ContextualEvolutionarySearch,
    FastBuilder,
    RFEICostModel,
    aggregate_store_features,
    error_kind,
)
from adatune.target import host

N = 64
TRIALS, PER_ITER = 16, 8


def matmul(n: int = N) -> tvm.tirx.PrimFunc:
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def tiled_matmul(tile: int) -> tvm.IRModule:
    sch = tvm.s_tir.Schedule(matmul())
    i, j, _ = sch.get_loops(sch.get_sblock("C"))
    i0, _ = sch.split(i, [None, tile])
    _, j1 = sch.split(j, [None, 16])
    sch.parallel(i0)
    sch.vectorize(j1)
    return sch.mod


@T.prim_func
def abort_kernel(a: T.Buffer((16,), "float32"), b: T.Buffer((16,), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    for i in range(16):
        T.evaluate(T.call_extern("int32", "abort"))
        b[i] = a[i]


@T.prim_func
def endless_kernel(a: T.Buffer((16,), "float32"), b: T.Buffer((16,), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    for _i, _j, k in T.grid(100000, 100000, 16):  # 1.6e11 dependent multiply-adds: minutes
        b[k] = b[k] * a[k] + T.float32(1)


@T.prim_func
def abort_matmul(a: T.Buffer((N, N), "float32"), b: T.Buffer((N, N), "float32"), c: T.Buffer((N, N), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    for i in range(N):
        T.evaluate(T.call_extern("int32", "abort"))
        c[i, 0] = a[i, 0] * b[0, i]


@T.prim_func
def endless_matmul(a: T.Buffer((N, N), "float32"), b: T.Buffer((N, N), "float32"), c: T.Buffer((N, N), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    for _i, _j, k in T.grid(100000, 100000, N):
        c[0, k] = c[0, k] * a[0, k] + b[0, k]


@derived_object
class SabotagingBuilder(PyBuilder):
    """Builds the first candidates it is given as ``bad`` kernels instead (a crash and a hang inside tuning)."""

    def __init__(self, inner: FastBuilder, bad: list[tvm.IRModule]):
        super().__init__()
        self.inner, self.bad = inner, list(bad)

    def build(self, build_inputs: list[BuilderInput]) -> list:
        swapped = [BuilderInput(self.bad.pop(0), bi.target) if self.bad else bi for bi in build_inputs]
        return self.inner.build(swapped)


def run_matmul(lib: tvm.runtime.Module) -> None:
    """Run a built matmul on random inputs and compare with numpy."""
    rng = np.random.default_rng(0)
    a, b = rng.random((N, N), dtype=np.float32), rng.random((N, N), dtype=np.float32)
    dev = tvm.cpu()
    c = tvm.runtime.tensor(np.zeros((N, N), "float32"), dev)
    lib(tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def target() -> tvm.target.Target:
    return host()


@pytest.fixture(scope="module")
def builder():
    """One warm build pool for the whole file (each worker process costs seconds to start)."""
    pool = FastBuilder(max_workers=2)
    yield pool
    pool.shutdown()


@pytest.fixture(scope="module")
def runner():
    pool = AdaptiveRunner(min_converge_coef=0.1, number=10, repeat=4, micro_batch=5, timeout_sec=10)
    yield pool
    pool.shutdown()


@pytest.fixture(scope="module")
def tuned(target, tmp_path_factory, builder, runner):
    """One tune_tir run with all four plug-ins (runs first: the builder's and runner's counters start at 0)."""
    assert builder.n_calls == 0 and runner.n_calls == 0
    cost_model = RFEICostModel(n_trees=50, seed=1)
    strategy = ContextualEvolutionarySearch(population_size=24, genetic_num_iters=1, seed=0)
    work_dir = str(tmp_path_factory.mktemp("ms_tune"))
    db = ms.tune_tir(
        matmul(),
        target,
        work_dir,
        max_trials_global=TRIALS,
        num_trials_per_iter=PER_ITER,
        builder=builder,
        runner=runner,
        cost_model=cost_model,
        strategy=strategy,
        seed=0,
    )
    return {
        "db": db,
        "builder": builder,
        "runner": runner,
        "cost_model": cost_model,
        "strategy": strategy,
        "counts": (builder.n_calls, builder.n_built, builder.n_failed, runner.n_calls, list(runner.log)),
    }


def test_every_plugin_is_called_inside_tune_tir(tuned):
    model, strategy = tuned["cost_model"], tuned["strategy"]
    build_calls, built, failed, run_calls, log = tuned["counts"]
    assert build_calls == TRIALS // PER_ITER and built + failed == TRIALS
    assert run_calls >= 1 and len(log) == built
    assert model.n_updates == TRIALS // PER_ITER and len(model.costs) == TRIALS and model.n_predicts >= 2
    # the strategy's clone ran (history is shared with clones): one entry per iteration, eps from uncertainty
    assert [h["n"] for h in strategy.history] == [PER_ITER] * (TRIALS // PER_ITER)
    assert all(h["eps_source"] == "uncertainty" for h in strategy.history)
    first, second = strategy.history
    # nothing measured yet: eps_t = 1, every pick random, though 8 trials/iter gives the stock search 0 random
    assert first["eps"] == 1.0 and first["n_random"] == PER_ITER
    assert 0.0 <= second["eps"] <= 1.0 and second["n_model"] + second["n_random"] == PER_ITER


def test_adaptive_runner_results_reach_the_database(tuned):
    runner, db, log = tuned["runner"], tuned["db"], tuned["counts"][4]
    ok = [entry for entry in log if entry["error"] is None]
    assert ok, log
    cap = runner.config.cap_runs
    for entry in ok:
        assert sum(entry["batch_runs"]) == entry["runs"] <= cap
        assert len(entry["costs"]) == len(entry["batch_runs"]) and min(entry["costs"]) > 0
        assert entry["runs"] == cap or entry["cv"] < runner.config.min_converge_coef
    recorded = sorted(len(rec.run_secs) for rec in db.get_all_tuning_records() if rec.run_secs)
    assert recorded == sorted(len(entry["costs"]) for entry in ok)


def test_no_candidate_is_measured_twice(tuned, target):
    records = tuned["db"].get_all_tuning_records()
    assert len(records) == TRIALS
    keys = set()
    for rec in records:
        sch = tvm.s_tir.Schedule(matmul())
        rec.trace.apply_to_schedule(sch, remove_postproc=False)
        keys.add(tvm_ffi.structural_hash(sch.mod))
    assert len(keys) == TRIALS


def test_best_schedule_matches_numpy(tuned, target):
    sch = tuned["db"].query_schedule(tvm.IRModule({"main": matmul()}), target, workload_name="main")
    assert sch is not None
    run_matmul(tvm.tirx.build(sch.mod, target))


def test_cost_model_save_load(tuned, target, tmp_path):
    model = tuned["cost_model"]
    context = ms.TuneContext(mod=tvm.IRModule({"main": matmul()}), target=target)
    records = tuned["db"].get_all_tuning_records()
    cands = [rec.as_measure_candidate() for rec in records]
    costs = [float(np.mean([float(s) for s in rec.run_secs])) if rec.run_secs else np.inf for rec in records]
    costs = [c if c < 1e9 else np.inf for c in costs]  # failed runs: no run_secs, or meta_schedule's 1e10
    path = str(tmp_path / "rfei.npz")
    model.save(path)
    loaded = RFEICostModel(n_trees=50, seed=1)
    loaded.load(path)
    np.testing.assert_array_equal(loaded.costs, model.costs)
    assert loaded.workloads == model.workloads
    mean, std = loaded.predict_mean_std(context, cands)
    np.testing.assert_allclose(mean, model.predict_mean_std(context, cands)[0])
    assert mean.shape == (TRIALS,) and np.all(std >= 0) and loaded.best_throughput(context) == 1.0
    # the best measured candidate (the database's order is not the model's) is predicted near the top
    np.testing.assert_allclose(sorted(costs), sorted(model.costs.tolist()), rtol=1e-6)
    assert mean[int(np.argmin(costs))] > np.median(mean)
    with pytest.raises(FileNotFoundError, match="no such file"):
        loaded.load(str(tmp_path / "missing.npz"))
    (tmp_path / "junk.npz").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not a file RFEICostModel.save wrote"):
        loaded.load(str(tmp_path / "junk.npz"))


def test_runner_survives_crashing_and_hanging_kernels(target, builder, runner, tuned):
    mods = [tiled_matmul(8), tvm.IRModule({"main": abort_kernel}), tvm.IRModule({"main": endless_kernel})]
    built = builder.build([BuilderInput(m, target) for m in mods])
    assert [b.error_msg for b in built] == [None, None, None]
    inputs = [RunnerInput(b.artifact_path, "cpu", ArgInfo.from_entry_func(m)) for b, m in zip(built, mods)]
    before = len(runner.log)
    results = [f.result() for f in runner.run(inputs + inputs[:1])]
    assert [error_kind(r.error_msg) for r in results] == [
        MeasureErrorNo.NO_ERROR,
        MeasureErrorNo.RUNTIME_DEVICE,
        MeasureErrorNo.RUN_TIMEOUT,
        MeasureErrorNo.NO_ERROR,
    ]
    assert "worker process died" in results[1].error_msg
    for r in (results[0], results[3]):  # measured before the crash, and by a fresh worker after the hang
        assert r.run_secs is not None and all(float(s) > 0 for s in r.run_secs)
    assert [e["error"] for e in runner.log[before:]] == [None, "RUNTIME_DEVICE", "RUN_TIMEOUT", None]


def test_tune_tir_goes_on_after_a_crashing_and_a_hanging_candidate(target, builder, runner, tuned, tmp_path):
    """Inside ms.tune_tir the first two candidates crash and hang the measuring worker: both come back as errors
    (not an exception), the worker is replaced, and every later candidate of both iterations is measured."""
    ms_logger = logging.getLogger("tvm.s_tir.meta_schedule")
    for handler in [h for h in ms_logger.handlers if h.get_name() is None]:
        ms_logger.removeHandler(handler)  # pytest's capture handlers: tune_tir's logging setup fails on unnamed ones
    before, calls = len(runner.log), runner.n_calls
    bad = [tvm.IRModule({"main": abort_matmul}), tvm.IRModule({"main": endless_matmul})]
    db = ms.tune_tir(
        matmul(),
        target,
        str(tmp_path),
        max_trials_global=8,
        num_trials_per_iter=4,
        builder=SabotagingBuilder(builder, bad),
        runner=runner,
        seed=0,
    )
    errors = [e["error"] for e in runner.log[before:]]
    assert runner.n_calls == calls + 2 and errors == ["RUNTIME_DEVICE", "RUN_TIMEOUT"] + [None] * 6
    records = db.get_all_tuning_records()
    measured = [r for r in records if r.run_secs and all(0 < float(s) < 1e9 for s in r.run_secs)]
    assert len(records) == 8 and len(measured) == 6
    sch = db.query_schedule(tvm.IRModule({"main": matmul()}), target, workload_name="main")
    run_matmul(tvm.tirx.build(sch.mod, target))


def test_fast_builder_artifacts_run_correctly_and_errors_are_results(target, builder, tuned):
    mods = [tiled_matmul(4), tiled_matmul(16)]
    broken = tvm.IRModule(
        {"main": tvm.tirx.PrimFunc([], tvm.tirx.Evaluate(tvm.tirx.call_extern("int32", "adatune_no_such_symbol")))}
    )
    failed_before = builder.n_failed
    results = builder.build([BuilderInput(m, target) for m in mods] + [BuilderInput(broken, target)])
    for res in results[:2]:
        assert res.error_msg is None and res.artifact_path.endswith("tvm_tmp_mod.tar")
        run_matmul(tvm.runtime.load_module(res.artifact_path))
    assert results[2].artifact_path is None and error_kind(results[2].error_msg) == MeasureErrorNo.COMPILE_HOST
    assert builder.n_failed == failed_before + 1
    again = builder.build([BuilderInput(mods[0], target)])  # the pool keeps working after a failure
    run_matmul(tvm.runtime.load_module(again[0].artifact_path))
    impatient = FastBuilder(max_workers=1, timeout_sec=0.001)
    try:
        res = impatient.build([BuilderInput(tiled_matmul(8), target)])[0]
        assert res.artifact_path is None and error_kind(res.error_msg) == MeasureErrorNo.BUILD_TIMEOUT
    finally:
        impatient.shutdown()


def test_aggregate_store_features():
    per_store = np.arange(12, dtype=np.float32).reshape(2, 6)
    row = aggregate_store_features(per_store, 6)
    np.testing.assert_array_equal(row, np.concatenate([per_store.sum(0), per_store.mean(0), per_store.max(0)]))
    np.testing.assert_array_equal(aggregate_store_features(np.zeros((0, 6)), 6), np.zeros(18))


def test_clone_keeps_settings_and_shares_history():
    strategy = ContextualEvolutionarySearch(population_size=10, eps_greedy=0.2, seed=3)
    clone = strategy._inst.clone()  # the Python method: strategy.clone() goes through C++ and returns a bare handle
    assert clone.params == strategy.params and clone is not strategy
    clone.history.append({"eps": 0.5})
    assert strategy.history == [{"eps": 0.5}]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: AdaptiveRunner(min_converge_coef=-1.0), "min_converge_coef"),
        (lambda: AdaptiveRunner(number=1, repeat=2, min_micro_batches=3), "cannot hold more than"),
        (lambda: AdaptiveRunner(timeout_sec=0), "timeout_sec"),
        (lambda: FastBuilder(timeout_sec=-1), "timeout_sec"),
        (lambda: FastBuilder(max_workers=0), "max_workers"),
        (lambda: RFEICostModel(predict="median"), "predict must be one of"),
        (lambda: RFEICostModel(n_trees=1), "n_trees"),
        (lambda: ContextualEvolutionarySearch(eps_greedy=1.5), "eps_greedy"),
        (lambda: ContextualEvolutionarySearch(population_size=1), "population_size"),
    ],
)
def test_bad_arguments_are_rejected_with_a_clear_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def _split_follows_the_rule(eps: float, n: int, n_model: int, n_random: int) -> bool:
    """``eps * n`` rounded down or up; more random picks only when the search found too few candidates."""
    return n_model + n_random == n and (n_random in (math.floor(eps * n), math.ceil(eps * n)) or n_model < n - eps * n)


def test_trace_search_and_tune_tir_split_plans_by_one_rule(tuned, target):
    """The same seed through TraceSearchTuner and through ms.tune_tir with the plug-ins: both plan with the one
    ExplorationPolicy and every plan's model/random split is eps_t * n rounded stochastically."""
    from adatune.measure import MeasureInput, MeasureResult
    from adatune.search.optimizers import ExplorationPolicy
    from adatune.trace import TraceTask
    from adatune.tuners import TraceSearchTuner

    strategy = tuned["strategy"]
    assert all(_split_follows_the_rule(h["eps"], h["n"], h["n_model"], h["n_random"]) for h in strategy.history)
    task = TraceTask.from_module(matmul(), target)
    tuner = TraceSearchTuner(
        task, cost_model="rfei", plan_size=PER_ITER, population_size=24, genetic_num_iters=1, n_trees=50, seed=0
    )
    assert isinstance(tuner.exploration, ExplorationPolicy) and tuner.exploration.contextual
    while len(tuner.trials) < 3 * PER_ITER:
        batch = tuner.next_batch(PER_ITER)
        costs = [1e-5 * (1 + int(c.key[:4], 16) / 65535) for c in batch]  # a fixed cost per program
        results = [MeasureResult((c,), MeasureErrorNo.NO_ERROR, 0.01, 0.0) for c in costs]
        tuner.update([MeasureInput(task, c) for c in batch], results)
    policy = tuner.exploration
    assert len(policy.history) >= 2
    for eps, (n_model, n_random) in zip(policy.history, policy.splits):
        assert _split_follows_the_rule(eps, PER_ITER, n_model, n_random)


def test_a_tune_tir_database_reads_back_as_trace_history(tuned, target):
    """Every record ``tune_tir`` wrote is a measured candidate of one trace task (TVM's own design spaces), each the
    program its trace gives; a trace search takes them as history, so it measures none of them again."""
    from adatune.meta_schedule import import_database
    from adatune.tuners import TraceSearchTuner

    records = tuned["db"].get_all_tuning_records()
    pairs = import_database(tuned["db"])
    assert len(pairs) == len(records) == TRIALS
    (task,) = {inp.task for inp, _ in pairs}
    for (inp, res), rec in zip(pairs, records):
        replayed = tvm.s_tir.Schedule(rec.workload.mod)  # as MetaSchedule applies its record
        rec.trace.apply_to_schedule(replayed, remove_postproc=False)
        assert tvm_ffi.structural_equal(inp.config.mod["main"].body, replayed.mod["main"].body)
        valid = rec.run_secs is not None and all(0 < float(s) < 1e9 for s in rec.run_secs)
        assert res.ok == valid and (not valid or res.costs == tuple(float(s) for s in rec.run_secs))
    tuner = TraceSearchTuner(task, plan_size=PER_ITER, population_size=24, genetic_num_iters=1, seed=0)
    assert tuner.load_history(pairs) == len({inp.config.key for inp, _ in pairs})
    assert not {c.key for c in tuner.next_batch(PER_ITER)} & {inp.config.key for inp, _ in pairs}
    with pytest.raises(TypeError, match="meta_schedule Database"):
        import_database("not a database")
