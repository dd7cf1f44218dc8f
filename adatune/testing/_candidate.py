"""The candidate-kind contract: a new kind of candidate goes through every tuner, cost model, records, resume,
dispatch and a real build with no change to library code. ``cost(candidate) -> seconds`` stands in for hardware
(a learnable surface, so cost models can be checked to learn it).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ..cost_models import create_cost_model
from ..dispatch import apply_history_best
from ..measure import LocalBuilder, LocalRunner, MeasureErrorNo, MeasureInput
from ..measure import measure_option as _measure_option
from ..records import load_from_file, save_to_file
from ..space import CandidateSpace
from ..task import TuningTask
from ..tuners import Tuner, create_tuner, get_tuner_spec, tuner_specs
from ..tuners.callback import log_to_file
from ._fixtures import CostFunctionRunner

__all__ = [
    "check_candidate_space",
    "check_tunes_and_resumes",
    "check_cost_models_learn",
    "check_records_dispatch_and_build",
    "check_candidate_kind",
]

CostFunction = Callable[[Any], float]


def check_candidate_space(space: CandidateSpace, n: int = 16) -> None:
    """Sampling is seeded and distinct, ``exclude`` is honoured, keys survive JSON, mutation stays in the space
    and features are one finite row per candidate."""
    size = space.size
    assert isinstance(size, int) and size > 0, f"space.size must be a positive int, got {size!r}"
    n = min(n, size)
    cands = space.random_candidates(np.random.default_rng(0), n)
    keys = [c.key for c in cands]
    assert 0 < len(cands) <= n, f"random_candidates(rng, {n}) returned {len(cands)} of a space of {size}"
    n = len(cands)  # a size may be an upper bound (CandidateSpace.size)
    assert all(isinstance(k, str) for k in keys), f"candidate keys must be str, got {[type(k) for k in keys]}"
    assert len(set(keys)) == n, f"random_candidates returned duplicates: {keys}"
    again = [c.key for c in space.random_candidates(np.random.default_rng(0), n)]
    assert again == keys, "random_candidates with the same seed returned other candidates"
    for c in cands:
        data = c.to_json()
        assert isinstance(data, dict), f"to_json() must be a dict, got {data!r}"
        assert data.get("kind", "knob") == space.kind, f"to_json() names kind {data.get('kind')!r}, not {space.kind!r}"
        assert space.decode(data).key == c.key, f"decode(to_json()) changed the key of {c.key}"
    if size > n:
        rest = space.random_candidates(np.random.default_rng(1), n, exclude=set(keys))
        assert not {c.key for c in rest} & set(keys), "random_candidates returned excluded keys"
    mutated = space.mutate(cands, np.random.default_rng(2))
    assert len(mutated) == n, f"mutate of {n} candidates returned {len(mutated)}"
    for c in mutated:
        assert space.decode(c.to_json()).key == c.key, f"a mutated candidate {c.key} is not in the space"
    feats = np.asarray(space.featurize(cands), dtype=float)
    assert feats.ndim == 2 and feats.shape[0] == n, f"featurize of {n} candidates has shape {feats.shape}"
    assert np.isfinite(feats).all(), "featurize returned non-finite values"
    part = np.asarray(space.featurize(cands[: max(n // 2, 1)]), dtype=float)
    np.testing.assert_array_equal(part, feats[: len(part)], err_msg="a candidate's features depend on its batch")


def _registered_tuner(name: str) -> Callable[[TuningTask, int], Tuner]:
    """A registered tuner with small plans (8 trials) where it plans, so a short run refits its model."""
    small = {"plan_size": 8} if any(o.name == "plan_size" for o in get_tuner_spec(name).options) else {}
    return lambda task, seed: create_tuner(name, task, seed=seed, **small)


def check_tunes_and_resumes(
    task: TuningTask, cost: CostFunction, tuner: str | Callable[[TuningTask, int], Tuner], n_trial: int = 32
) -> None:
    """``tuner`` (a registered name or ``factory(task, seed)``) tunes the kind, logs records of its kind and
    key, and a fresh tuner resumes from the log without measuring anything twice."""
    factory = _registered_tuner(tuner) if isinstance(tuner, str) else tuner
    option = _measure_option(runner=CostFunctionRunner(cost))
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "kind.jsonl")
        first = factory(task, 0)
        first.tune(n_trial=n_trial, measure_option=option, batch_size=8, callbacks=[log_to_file(log)])
        keys = [t.key for t in first.trials]
        assert len(keys) == len(set(keys)) == n_trial, f"{n_trial} trials asked, {len(set(keys))} distinct measured"
        recs = list(load_from_file(log))
        kinds = {r.kind for r in recs}
        assert kinds == {task.space.kind}, f"records of kinds {kinds}, not {task.space.kind!r}"
        assert sorted(r.key for r in recs) == sorted(keys), "the log's keys are not the measured candidates'"
        best = max(task.flop / cost(task.space.decode(r.config)) for r in recs)
        assert math.isclose(first.best_flops, best, rel_tol=1e-6), f"best_flops {first.best_flops:.4g} != {best:.4g}"
        again = factory(task, 1)
        loaded = again.load_history(load_from_file(log))
        assert loaded == n_trial, f"load_history read {loaded} of {n_trial} records"
        again.tune(n_trial=8, measure_option=option, batch_size=8)
        repeated = {t.key for t in again.trials[n_trial:]} & set(keys)
        assert not repeated, f"a resumed tuner measured again: {sorted(repeated)}"


def check_cost_models_learn(
    task: TuningTask, cost: CostFunction, models: Iterable[str] = ("xgb", "rfei"), n: int = 256
) -> None:
    """Cost models made without the task learn ``1/cost`` from the space's features alone (correlation > 0.5
    on held-out candidates; RFEI's predicted mean, since it scores by expected improvement)."""
    space = task.space
    cands = space.random_candidates(np.random.default_rng(0), min(n, space.size))
    x = np.asarray(space.featurize(cands), dtype=np.float32)
    y = np.asarray([1.0 / cost(c) for c in cands])
    for name in models:
        model = create_cost_model(name, seed=0)
        model.fit(x[::2], y[::2].tolist(), 16)
        pred = model.predict_mean_std(x[1::2])[0] if hasattr(model, "predict_mean_std") else model.predict(x[1::2])
        corr = np.corrcoef(np.asarray(pred, dtype=float), y[1::2])[0, 1]
        assert corr > 0.5, f"cost model {name!r} predicts held-out throughput with correlation {corr:.2f}"


def check_records_dispatch_and_build(task: TuningTask, candidates: Sequence[Any] | None = None) -> None:
    """Candidates really build and run correct (``check_correctness``) on this machine; their records
    unpack as AutoTVM's ``(inp, res)`` and ``apply_history_best`` answers the fastest."""
    cands = list(candidates) if candidates is not None else task.space.random_candidates(np.random.default_rng(0), 2)
    option = _measure_option(LocalBuilder(n_parallel=1), LocalRunner(number=2, repeat=2, check_correctness=True))
    try:
        inputs = [MeasureInput(task, c) for c in cands]
        batch = option.measure(inputs)
    finally:
        option.close()
    errors = [(c.key, r.error_no.name, r.error_msg[:200]) for c, r in zip(cands, batch) if not r.ok]
    assert not errors, f"candidates failed to build, run or match the reference: {errors}"
    assert all(r.error_no == MeasureErrorNo.NO_ERROR for r in batch)
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "kind.jsonl")
        save_to_file(log, zip(inputs, batch.results))
        best = min(zip(inputs, batch.results), key=lambda p: p[1].cost)[0].config
        got = apply_history_best(log).query(task.target, task.workload)
        assert type(got) is type(best) and got.key == best.key, f"apply_history_best answered {got!r}, not {best!r}"
        for inp, res in load_from_file(log):  # AutoTVM's unpacking works for any kind
            assert type(inp.config) is type(best) and res.ok, f"a record read back as {inp.config!r}, {res!r}"


def check_candidate_kind(
    task: TuningTask,
    cost: CostFunction,
    tuners: Iterable[str | Callable[[TuningTask, int], Tuner]] | None = None,
    models: Iterable[str] = ("xgb", "rfei"),
    build: bool = True,
) -> None:
    """Every check above: the space, each tuner (default: every registered one), the cost models and, with
    ``build``, a real build and run on this machine."""
    check_candidate_space(task.space)
    for tuner in tuners if tuners is not None else [s.name for s in tuner_specs()]:
        try:
            check_tunes_and_resumes(task, cost, tuner)
        except AssertionError as err:
            raise AssertionError(f"tuner {tuner!r} on the new kind: {err}") from err
    check_cost_models_learn(task, cost, models)
    if build:
        check_records_dispatch_and_build(task)
