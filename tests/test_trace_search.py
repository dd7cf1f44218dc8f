"""Trace search: trace spaces as tasks (probabilistic templates, TVM's rule design spaces) and TraceSearchTuner."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import te

import adatune
import adatune.cli
import adatune.trace
from adatune.measure import MeasureErrorNo, MeasureInput, MeasureResult
from adatune.records import load_from_file
from adatune.trace import TraceCandidate, TraceTask
from adatune.tuners._trace import TraceSearchTuner


@adatune.trace.probabilistic_template("test-trace-matmul")
def sampled_matmul(n: int):
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, b, c]))
    i, j, kk = sch.get_loops(sch.get_sblock("C"))
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
    sch.reorder(i0, j0, kk, i1, j1)
    sch.parallel(sch.fuse(i0, j0))
    sch.vectorize(j1)
    unroll = sch.sample_categorical([0, 16, 64], [1 / 3] * 3)
    sch.annotate(sch.get_sblock("root"), "meta_schedule.unroll_explicit", unroll)
    return sch, [a, b, c]


@adatune.trace.probabilistic_template("test-trace-gpu-add")
def sampled_gpu_add(n: int):
    """Threads per block are a sampled tile up to n: most draws exceed the GPU's 1024-thread limit."""
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] + 1.0, name="B")
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, b]))
    (i,) = sch.get_loops(sch.get_sblock("B"))
    outer, inner = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=n))
    sch.bind(outer, "blockIdx.x")
    sch.bind(inner, "threadIdx.x")
    return sch, [a, b]


def _softmax_numpy(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@adatune.trace.workload("test-softmax", reference=_softmax_numpy)
def softmax(m: int, n: int):
    """Plain TE softmax (no topi): max, exp, sum, divide."""
    a = te.placeholder((m, n), name="A")
    k = te.reduce_axis((0, n), name="k")
    mx = te.compute((m,), lambda i: te.max(a[i, k], axis=k), name="mx")
    e = te.compute((m, n), lambda i, j: te.exp(a[i, j] - mx[i]), name="e")
    k2 = te.reduce_axis((0, n), name="k2")
    s = te.compute((m,), lambda i: te.sum(e[i, k2], axis=k2), name="s")
    out = te.compute((m, n), lambda i, j: e[i, j] / s[i], name="out")
    return te.create_prim_func([a, out])


@pytest.fixture(scope="module")
def matmul_task() -> TraceTask:
    return adatune.task.create("trace/test-trace-matmul", (64,), adatune.target.host())


@pytest.fixture(scope="module")
def softmax_task() -> TraceTask:
    return adatune.task.create("trace/rules/test-softmax", (128, 256), adatune.target.host())


def _run(mod: tvm.IRModule, inputs: list[np.ndarray], out_shape: tuple[int, ...]) -> np.ndarray:
    lib = tvm.tirx.build(mod, adatune.target.host())
    args = [tvm.runtime.tensor(x) for x in inputs] + [tvm.runtime.tensor(np.zeros(out_shape, "float32"))]
    lib["main"](*args)
    return args[-1].numpy()


def test_template_space_replays_round_trips_and_mutates(matmul_task):
    space = matmul_task.space
    assert isinstance(matmul_task, adatune.task.TuningTask) and space.kind == "trace"
    assert space.size == 5 * 5 * 3  # inner tiles of 64 up to 16: 1, 2, 4, 8, 16; three unroll depths
    assert [s.is_output for s in matmul_task.arg_specs] == [False, False, True]
    rng = np.random.default_rng(0)
    cands = space.random_candidates(rng, 12)
    assert len({c.key for c in cands}) == 12
    for c in cands:
        data = json.loads(json.dumps(c.to_json()))
        assert data["kind"] == "trace" and data["space"] == 0 and len(data["decisions"]) == 3
        back = matmul_task.candidate_from_json(data)
        assert back.key == c.key and back.decisions == c.decisions
        assert tvm_ffi.structural_equal(matmul_task.scheduled_module(back), c.mod)
    mutants = space.mutate(cands, rng)
    assert sum(m.key != c.key for m, c in zip(mutants, cands)) >= 10
    for m in mutants:  # every mutant is itself a valid, replayable candidate
        assert matmul_task.candidate_from_json(m.to_json()).key == m.key
    feats = space.featurize(cands + mutants)
    assert feats.shape[0] == 24 and feats.dtype == np.float32 and np.isfinite(feats).all()
    assert len({feats[i].tobytes() for i in range(12)}) > 1
    rest = space.random_candidates(rng, 200, exclude={c.key for c in cands})
    assert 0 < len(rest) <= space.size - 12 and not {c.key for c in rest} & {c.key for c in cands}


def test_trace_candidates_compute_the_right_thing(matmul_task):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 64), dtype=np.float32), rng.standard_normal((64, 64), dtype=np.float32)
    for c in matmul_task.space.random_candidates(rng, 3):
        np.testing.assert_allclose(_run(c.mod, [a, b], (64, 64)), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "data, why",
    [
        ({"kind": "trace", "space": 0, "decisions": [[3, 8], [8, 8], 1]}, "does not replay as recorded"),
        ({"kind": "trace", "space": 0, "decisions": [[8, 8], [8, 8], 7]}, "does not replay"),
        ({"kind": "trace", "space": 0, "decisions": [[8, 8], [8, 8]]}, "samples 3 decisions"),
        ({"kind": "trace", "space": 2, "decisions": [[8, 8], [8, 8], 1]}, "design space index"),
        ({"kind": "knob", "index": 3}, "not a trace candidate"),
    ],
)
def test_invalid_traces_are_rejected_with_a_reason(matmul_task, data, why):
    with pytest.raises(ValueError, match=why):
        matmul_task.candidate_from_json(data)


def test_gpu_verification_rejects_programs_before_any_build(tmp_path):
    with pytest.raises(ValueError, match="max_threads_per_block"):
        adatune.task.create("trace/test-trace-gpu-add", (8192,), adatune.target.cuda("sm_80"))
    target = tvm.target.Target("nvidia/nvidia-a100", host=adatune.target.host())
    task = adatune.task.create("trace/test-trace-gpu-add", (8192,), target)
    assert any(type(p).__name__ == "VerifyGPUCode" for p in task.space.postprocs)
    cands = task.space.random_candidates(np.random.default_rng(0), 12)
    assert cands and all(c.decisions[0][1] <= 1024 for c in cands)
    assert task.space.rejected > 0  # draws with more than 1024 threads never became candidates
    with pytest.raises(ValueError, match="VerifyGPUCode"):
        task.candidate_from_json({"kind": "trace", "space": 0, "decisions": [[2, 4096]]})
    ok = task.candidate_from_json({"kind": "trace", "space": 0, "decisions": [[8, 1024]]})
    assert ok.decisions == [[8, 1024]]
    # a record of a rejected program is skipped on resume, never measured
    bad = {
        "v": 2,
        "target": adatune.target.to_json(task.target),
        "task": [task.name, list(task.args)],
        "kind": "trace",
        "key": "bad",
        "config": {"kind": "trace", "space": 0, "decisions": [[1, 8192]]},
        "result": MeasureResult((1e-5,), MeasureErrorNo.NO_ERROR, 0.1, time.time()).to_json(),
    }
    (tmp_path / "bad.jsonl").write_text(json.dumps(bad) + "\n")
    assert TraceSearchTuner(task, seed=0).load_history(load_from_file(str(tmp_path / "bad.jsonl"))) == 0


def test_softmax_without_template_tunes_and_matches_numpy(softmax_task, checked_option):
    assert softmax_task.name == "trace/rules/test-softmax" and len(softmax_task.space.design_spaces) > 1
    tuner = TraceSearchTuner(softmax_task, plan_size=3, population_size=12, genetic_num_iters=1, seed=0)
    tuner.tune(n_trial=6, measure_option=checked_option, batch_size=3)
    assert len(tuner.trials) == 6 and len({t.key for t in tuner.trials}) == 6
    assert all(t.error_no == MeasureErrorNo.NO_ERROR for t in tuner.trials)
    assert tuner.eps_history  # the second plan was model-guided
    best = tuner.best_config
    assert isinstance(best, TraceCandidate)
    x = np.random.default_rng(2).standard_normal((128, 256), dtype=np.float32)
    np.testing.assert_allclose(
        _run(softmax_task.scheduled_module(best), [x], (128, 256)), _softmax_numpy(x), rtol=1e-5, atol=1e-6
    )
    same = TraceTask.from_module(softmax(128, 256), adatune.target.host())
    assert same.name.startswith("trace/rules/ir-")
    assert adatune.task.create(same.name, (), adatune.target.host()) is same


def test_a_rule_space_holds_the_generic_program_first_and_round_trips(softmax_task, matmul_task):
    """On a CPU a rule-made space holds the shape-generic program as one more candidate of no decisions: random
    candidates give it first (so a search measures it in its first plan), a record of it decodes to it, it has no
    mutation, its features mark it, and it computes the right thing; a probabilistic template's space and a CUDA
    space hold none."""
    space = softmax_task.space
    generic = space.generic
    assert generic is not None and generic.space == adatune.trace.GENERIC_SPACE and generic.decisions == []
    first = space.random_candidates(np.random.default_rng(0), 4)
    assert first[0] is generic and all(c.space >= 0 for c in first[1:]) and len({c.key for c in first}) == 4
    rest = space.random_candidates(np.random.default_rng(0), 4, exclude={generic.key})
    assert len(rest) == 4 and generic.key not in {c.key for c in rest}
    data = json.loads(json.dumps(generic.to_json()))
    assert data == {"kind": "trace", "space": adatune.trace.GENERIC_SPACE, "decisions": []}
    assert softmax_task.candidate_from_json(data) is generic
    with pytest.raises(ValueError, match="takes no decisions"):
        softmax_task.candidate_from_json({**data, "decisions": [1]})
    assert space.mutate_one(generic, np.random.default_rng(0)) is None
    feats = space.featurize(first)
    assert feats.shape[0] == 4 and feats[0, -1] == 1.0 and not feats[1:, -1].any()
    x = np.random.default_rng(4).standard_normal((128, 256), dtype=np.float32)
    got = _run(softmax_task.scheduled_module(generic), [x], (128, 256))
    np.testing.assert_allclose(got, _softmax_numpy(x), rtol=1e-5, atol=1e-6)
    assert matmul_task.space.generic is None
    with pytest.raises(ValueError, match="no generic program"):
        matmul_task.candidate_from_json(data)
    gpu = tvm.target.Target("nvidia/nvidia-a100", host=adatune.target.host())
    assert TraceTask.from_module(softmax(64, 64), gpu, name="test-softmax-gpu").space.generic is None


def test_a_generic_schedule_that_fails_leaves_the_rule_space_without_it(monkeypatch, caplog):
    """The generic program is an extra: where the shape-generic schedule raises on a function, the task is still
    made, with the rules' design spaces only, and the log says why."""
    import adatune.trace._space as trace_space

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("no schedule for this one")

    monkeypatch.setattr(trace_space, "schedule_generic", broken)
    with caplog.at_level("WARNING", logger="adatune.trace"):
        task = TraceTask.from_module(softmax(32, 48), adatune.target.host(), name="test-softmax-no-generic")
    assert task.space.generic is None and "no schedule for this one" in caplog.text
    cands = task.space.random_candidates(np.random.default_rng(0), 3)
    assert len(cands) == 3 and all(c.space >= 0 for c in cands)


def test_template_tunes_logs_and_resumes_without_remeasuring(matmul_task, tmp_path, checked_option):
    log = str(tmp_path / "trace.jsonl")
    first = TraceSearchTuner(matmul_task, plan_size=4, population_size=16, genetic_num_iters=2, seed=3)
    first.tune(n_trial=8, measure_option=checked_option, batch_size=4, callbacks=[adatune.callback.log_to_file(log)])
    recs = list(load_from_file(log))
    assert len(recs) == 8 and {r.kind for r in recs} == {"trace"}
    assert [r.key for r in recs] == [t.key for t in first.trials]
    for r in recs:  # records recreate the task by name and re-apply to the same program
        cand = r.create_task().candidate_from_json(r.config)
        assert cand.key == r.key
    best = adatune.apply_history_best(log).query(matmul_task.target, matmul_task.workload)
    assert best is not None and best.key == first.best_config.key
    assert tvm_ffi.structural_equal(matmul_task.scheduled_module(best), first.best_config.mod)

    second = TraceSearchTuner(matmul_task, plan_size=4, population_size=16, genetic_num_iters=2, seed=3)
    assert second.load_history(load_from_file(log)) == 8
    second.tune(n_trial=6, measure_option=checked_option, batch_size=3, callbacks=[adatune.callback.log_to_file(log)])
    keys = [r.key for r in load_from_file(log)]
    assert len(keys) == 14 and len(set(keys)) == 14
    assert second.best_flops >= first.best_flops


def test_adatune_best_reads_trace_records(matmul_task, tmp_path, capsys, checked_option):
    log = str(tmp_path / "best.jsonl")
    tuner = TraceSearchTuner(matmul_task, plan_size=4, population_size=16, genetic_num_iters=1, seed=5)
    tuner.tune(n_trial=4, measure_option=checked_option, batch_size=4, callbacks=[adatune.callback.log_to_file(log)])
    assert adatune.cli.main(["best", log]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    recs = list(load_from_file(log))
    best = min((r for r in recs if r.result.ok), key=lambda r: r.cost)
    assert len(recs) == 4 and best.key == tuner.best_config.key
    assert len(out) == 1 and out[0].startswith("trace/test-trace-matmul(64,) on llvm/")
    assert out[0].endswith(f": {best.cost * 1e3:.4f} ms, trace {best.key} (4 records)")


def test_trace_search_is_a_registered_tuner(matmul_task, capsys):
    from adatune.tuners import TUNER_NAMES, create_tuner

    assert "trace" in TUNER_NAMES
    tuner = create_tuner("trace", matmul_task, seed=0, cost_model="rfei", plan_size="4", contextual="false")
    assert isinstance(tuner, TraceSearchTuner) and tuner.plan_size == 4 and not tuner.contextual
    assert isinstance(tuner.cost_model, adatune.cost_models.RFEICostModel) and tuner.eps_greedy == 0.05
    with pytest.raises(ValueError, match="option cost_model=gp: expected one of xgb, xgb-rank, rfei"):
        create_tuner("trace", matmul_task, cost_model="gp")
    assert adatune.cli.main(["tuners"]) == 0
    listing = capsys.readouterr().out
    assert "\n  trace " in listing and "cost_model=xgb|xgb-rank|rfei|rfei-trees (default xgb)" in listing


def _synthetic(task: TraceTask, cands: list) -> list[MeasureResult]:
    """Cost grows with the distance of the tiles from (8, 16): a landscape the model can learn."""
    out = []
    for c in cands:
        (_, ti), (_, tj), u = c.decisions
        cost = 1e-5 * (1 + abs(np.log2(ti) - 3) + abs(np.log2(tj) - 4) + 0.1 * u)
        out.append(MeasureResult((cost,), MeasureErrorNo.NO_ERROR, 0.01, time.time()))
    return out


@pytest.mark.parametrize("model", ["xgb", "rfei"])
def test_search_is_deterministic_never_repeats_and_learns(matmul_task, model):
    runs = []
    for _ in range(2):
        tuner = TraceSearchTuner(
            matmul_task, cost_model=model, plan_size=8, population_size=24, genetic_num_iters=2, n_trees=16, seed=11
        )
        while len(tuner.trials) < 40:
            batch = tuner.next_batch(8)
            assert batch and all(c.key not in tuner.visited for c in batch)
            tuner.update([MeasureInput(matmul_task, c) for c in batch], _synthetic(matmul_task, batch))
        runs.append([t.key for t in tuner.trials])
        assert len(set(runs[-1])) == len(runs[-1])
        assert len(tuner.eps_history) >= 3 and all(0.0 <= e <= 1.0 for e in tuner.eps_history)
        best = tuner.best_config.decisions
        assert (best[0][1], best[1][1]) == (8, 16)  # the optimum of 75 programs is found within 40 trials
    assert runs[0] == runs[1]


def test_bad_options_are_refused(matmul_task):
    with pytest.raises(ValueError, match="cost_model"):
        TraceSearchTuner(matmul_task, cost_model="gp")
    with pytest.raises(ValueError, match="mutate_prob"):
        TraceSearchTuner(matmul_task, mutate_prob=1.5)
    with pytest.raises(KeyError, match="no probabilistic template"):
        adatune.task.create("trace/nope", (), adatune.target.host())
    with pytest.raises(ValueError, match="already registered"):
        adatune.trace.probabilistic_template("test-trace-matmul")(sampled_matmul)
