"""DietCode as the paper built it: evolutionary search on the joint model, f_MK from the kernel's program, every T
voting over all measured kernels with the deployed count chosen by predicted loss, and a GEMM that is not BERT's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import tvm

import adatune
from adatune.dietcode import (
    DISPATCH_COSTS,
    DietCodeTuner,
    DynamicWorkload,
    HandFeatures,
    MicroKernelCostModel,
    MicroKernelSpace,
    ProgramFeatures,
    compress_votes,
    propose_kernels,
    unit_extent,
)
from adatune.dietcode._select import calibrated_costs
from adatune.dietcode._task import static_k
from adatune.measure import MeasureErrorNo, MeasureResult, ReplayRunner

HOST = adatune.target.host()
CUDA_SM80 = tvm.target.Target({"kind": "cuda", "arch": "sm_80"}, host="llvm")


# ---------------------------------------------------------------------- votes over all kernels, compressed
def _costs(rng: np.random.Generator, kernels: int = 9, shapes: int = 60) -> np.ndarray:
    """Smooth per-kernel cost curves over T plus noise: winners change in bands, as tile padding makes them."""
    ts = np.arange(1, shapes + 1)
    centre = rng.uniform(1, shapes, size=(kernels, 1))
    return 1.0 + 0.02 * (ts - centre) ** 2 / shapes + rng.uniform(0, 0.05, size=(kernels, shapes))


def _revote_loss(costs: np.ndarray, kernels: list[int]) -> float:
    return float(np.mean(costs[kernels].min(axis=0) / costs.min(axis=0)) - 1.0)


def test_every_t_votes_over_all_kernels_and_zero_tolerance_keeps_every_vote() -> None:
    costs = _costs(np.random.default_rng(0))
    ts = list(range(1, costs.shape[1] + 1))
    comp = compress_votes(costs, ts, tolerance=0.0)
    assert comp.votes == [int(i) for i in costs.argmin(axis=0)]
    assert comp.labels == comp.votes and comp.loss == 0.0
    assert set(comp.kernels) == set(comp.votes)


@pytest.mark.parametrize("tolerance", [0.002, 0.01, 0.05])
def test_the_deployed_count_is_the_smallest_tree_within_the_tolerance(tolerance: float) -> None:
    costs = _costs(np.random.default_rng(1))
    ts = list(range(1, costs.shape[1] + 1))
    comp = compress_votes(costs, ts, tolerance=tolerance)
    assert comp.loss <= tolerance + 1e-12
    assert comp.loss == pytest.approx(_revote_loss(costs, comp.kernels))
    for col, label in enumerate(comp.labels):  # each T takes its predicted best among the deployed kernels
        assert costs[label, col] == costs[comp.kernels, col].min()
    *before, last = comp.tried
    assert all(loss > tolerance for _, _, loss in before) and last[2] <= tolerance
    assert [leaves for leaves, _, _ in comp.tried] == list(range(1, len(comp.tried) + 1))


def test_a_loose_tolerance_deploys_the_best_single_kernel_and_a_cap_is_honoured() -> None:
    costs = _costs(np.random.default_rng(2))
    ts = list(range(1, costs.shape[1] + 1))
    one = compress_votes(costs, ts, tolerance=10.0)
    assert one.kernels == [int(np.argmin(costs.sum(axis=1)))]
    exact = compress_votes(costs, ts, tolerance=0.0)
    capped = compress_votes(costs, ts, tolerance=0.0, max_kernels=2)
    assert len(exact.kernels) > 2 >= len(capped.kernels)
    best_pair = min(_revote_loss(costs, list(p)) for p in itertools.combinations(range(len(costs)), 2))
    assert capped.loss >= best_pair - 1e-12  # no two kernels beat the best pair, so neither can the tree's


def test_votes_keep_the_callers_order_of_t() -> None:
    costs = _costs(np.random.default_rng(3), shapes=20)
    ts = list(range(1, 21))
    perm = np.random.default_rng(4).permutation(20)
    comp = compress_votes(costs, ts, 0.01)
    shuffled = compress_votes(costs[:, perm], [ts[i] for i in perm], 0.01)
    assert shuffled.labels == [comp.labels[i] for i in perm]


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(costs=np.ones((0, 3))), "matrix"),
        (dict(costs=np.array([[1.0, np.nan, 1.0]])), "finite and positive"),
        (dict(tolerance=-0.1), "tolerance"),
        (dict(max_kernels=0), "max_kernels"),
    ],
)
def test_bad_selection_inputs_are_named(bad: dict, match: str) -> None:
    kw = dict(costs=np.ones((2, 3)), ts=[1, 2, 3], tolerance=0.01, max_kernels=None) | bad
    with pytest.raises(ValueError, match=match):
        compress_votes(**kw)


# ---------------------------------------------------------------------- f_MK's features
@pytest.mark.parametrize("target", [HOST, CUDA_SM80], ids=["x86", "cuda"])
def test_program_features_describe_each_kernel_at_its_unit_extent(target: tvm.target.Target) -> None:
    wl = DynamicWorkload("feat_nn", "bmm_nn", (2, 16), (1, 64))
    space = MicroKernelSpace(target, wl.dtype, static_k(wl))
    kernels = space.kernels[:: max(1, space.size // 12)][:12]
    feats = ProgramFeatures(wl, space.target)
    rows = feats(kernels)
    assert rows.shape == (len(kernels), feats.width) and np.all(np.isfinite(rows))
    assert len({r.tobytes() for r in rows}) == len(kernels)  # no two kernels look the same to f_MK
    np.testing.assert_array_equal(feats(kernels[::-1]), rows[::-1])  # cached by kernel, order kept
    for k in kernels:
        unit = unit_extent(wl, k)
        assert unit % k.mt == 0 and unit % k.kt == 0  # bmm_nn reduces over T too: whole kt steps
    assert HandFeatures(space)(kernels).shape == (len(kernels), len(space.FEATURE_NAMES))


def _synthetic_model(wl: DynamicWorkload, features: str) -> tuple[MicroKernelCostModel, list, list[int]]:
    """A model fitted on made-up timings that favour mid-sized tiles: no machine timing in a unit test."""
    space = MicroKernelSpace(HOST, wl.dtype, static_k(wl))
    rng = np.random.default_rng(5)
    measured = [space.kernels[int(i)] for i in rng.choice(space.size, size=24, replace=False)]
    shapes = [1, 9, 17, 32]

    def seconds(k: object, t: int) -> float:
        return wl.flop(t) * 1e-10 * (1 + abs(np.log2(k.mt / 16)) + abs(np.log2(k.nt / 32)) + 0.1 * k.kt)  # type: ignore[attr-defined]

    rows = [(k, t, seconds(k, t)) for k in measured for t in shapes]
    model = MicroKernelCostModel(space, wl, seed=0, features=features)
    model.fit([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    return model, measured, shapes


@pytest.mark.parametrize("features", ["program", "hand"])
def test_evolutionary_search_proposes_unmeasured_kernels_the_model_ranks_high(features: str) -> None:
    wl = DynamicWorkload("es_dense", "dense", (40, 96), (1, 32))
    model, measured, shapes = _synthetic_model(wl, features)
    seen = {k.key for k in measured}
    picks = propose_kernels(model, model.space, shapes, measured, 8, seen, np.random.default_rng(0))
    again = propose_kernels(model, model.space, shapes, measured, 8, seen, np.random.default_rng(0))
    assert [k.key for k in picks] == [k.key for k in again]  # one seed, one proposal
    assert len(picks) == 8 and len({k.key for k in picks}) == 8 and not seen & {k.key for k in picks}
    every = propose_kernels(model, model.space, shapes, measured, 8, seen, np.random.default_rng(0), "exhaustive")
    per_flop = model.predict(model.space.kernels, shapes) / np.asarray([wl.flop(t) for t in shapes])
    unmeasured = [i for i, k in enumerate(model.space.kernels) if k.key not in seen]
    best = per_flop[unmeasured].min(axis=0)
    index = {k.key: i for i, k in enumerate(model.space.kernels)}
    others = [propose_kernels(model, model.space, shapes, measured, 8, seen, np.random.default_rng(s)) for s in (1, 2)]
    # each shape's pick is within 10% of the best unmeasured prediction, on every seed (fitness: the best T's
    # quality), with f_MK on the program's features, the shipped model (1.00-1.08x over ten seeds on the AVX-512
    # space of 1924 kernels). The hand-feature forest is the baseline: piecewise constant over the tile grid, its
    # plateaus leave mutation blind, and the evolutionary picks came 1.00-1.35x off there (ten seeds, same space),
    # so for it only the exhaustive search is held to the bound.
    searched = (picks, *others) if features == "program" else ()
    for chosen in (*searched, every):
        got = per_flop[[index[k.key] for k in chosen]].min(axis=0)
        assert np.all(got <= 1.1 * best), np.round(got / best, 3)
    assert np.allclose(per_flop[[index[k.key] for k in every]].min(axis=0), best)
    with pytest.raises(ValueError, match="unknown micro-kernel search"):
        propose_kernels(model, model.space, shapes, measured, 8, seen, np.random.default_rng(0), "annealing")


# ---------------------------------------------------------------------- a dynamic GEMM that is not BERT's
@pytest.mark.parametrize(
    "wl",
    [
        DynamicWorkload("odd_dense", "dense", (100, 72), (3, 50)),
        DynamicWorkload("odd_scores", "bmm_nt", (3, 20), (5, 30)),
        DynamicWorkload("odd_context", "bmm_nn", (3, 20), (5, 30)),
    ],
    ids=lambda wl: wl.name,
)
def test_any_dynamic_gemm_tunes_once_and_is_correct_over_its_range(
    wl: DynamicWorkload, dietcode_option: adatune.measure.MeasureOption
) -> None:
    tuner = DietCodeTuner(
        wl, HOST, n_shapes=3, rounds=2, kernels_per_round=3, seed=2, number=1, repeat=1, min_repeat_ms=1,
        population=16, generations=1,
    )  # fmt: skip
    tuner.tune(measure_option=dietcode_option)
    res = tuner.result()
    lo, hi = wl.t_range
    assert res.compression is not None and res.compression.ts == list(range(lo, hi + 1))
    measured = {m.kernel.key for m in res.measurements}
    assert {k.key for k in res.kernels} <= measured and len(measured) == 6
    dk = res.build()
    rng = np.random.default_rng(0)
    for t in sorted({lo, lo + 1, (lo + hi) // 2, hi - 1, hi}):
        a, b = wl.random_inputs(t, rng)
        np.testing.assert_allclose(dk(t, a, b), wl.reference(a, b), rtol=1e-4, atol=1e-4)


def test_bad_tuner_options_are_named() -> None:
    wl = DynamicWorkload("opt", "dense", (16, 32), (1, 8))
    for kw, match in (
        (dict(search="annealing"), "search"),
        (dict(features="ast"), "features"),
        (dict(max_kernels=0), "max_kernels"),
        (dict(dispatch_tolerance=-1.0), "dispatch_tolerance"),
        (dict(dispatch_costs="guessed"), "dispatch_costs"),
    ):
        with pytest.raises(ValueError, match=match):
            DietCodeTuner(wl, HOST, **kw)


# ---------------------------------------------------------------------- votes read the timings where there are any
def _random_table(tuner: DietCodeTuner, rng: np.random.Generator) -> dict:
    """Every kernel of the space timed at the sampled T with costs the model cannot learn (independent noise)."""
    table = {}
    for k in tuner.kernels:
        points = [{"at": [t], "costs": [float(rng.uniform(1e-4, 1e-3))] * 3} for t in tuner.shapes]
        total = float(sum(sum(p["costs"]) for p in points))
        table[(tuner.task.workload_key, k.key)] = MeasureResult(
            tuple(p["costs"][0] for p in points), MeasureErrorNo.NO_ERROR, total, 0.0, run_time=total,
            runs=3 * len(points), extra={"points": points},
        )  # fmt: skip
    return table


def test_sampled_t_vote_on_their_measured_seconds_and_the_rest_on_the_model() -> None:
    wl = DynamicWorkload("vote_dense", "dense", (40, 96), (1, 16))
    picks = {}
    for costs in DISPATCH_COSTS:
        tuner = DietCodeTuner(
            wl, HOST, n_shapes=4, rounds=2, kernels_per_round=6, seed=3, dispatch_tolerance=0.0,
            dispatch_costs=costs, population=16, generations=1,
        )  # fmt: skip
        table = _random_table(tuner, np.random.default_rng(7))
        tuner.tune(measure_option=adatune.measure_option(runner=ReplayRunner(table)))
        res = tuner.result()
        measured = list({m.kernel.key: m.kernel for m in res.measurements}.values())
        seconds = {(m.kernel.key, m.t): m.seconds for m in res.measurements}
        ts = list(range(1, 17))
        predicted = res.model.predict(measured, ts)
        timed = np.array([[seconds.get((k.key, t), np.nan) for t in ts] for k in measured])
        anchored = calibrated_costs(predicted, timed, ts)
        for j, t in enumerate(ts):
            got = res.kernel_for(t).key
            if costs != "predicted" and t in res.shapes:
                assert got == min(measured, key=lambda k: seconds[(k.key, t)]).key
                assert res.predicted[t] == pytest.approx(seconds[(got, t)])
            elif costs == "calibrated":  # between timings: the model anchored to each kernel's timings
                assert got == measured[int(np.argmin(anchored[:, j]))].key
            else:  # zero tolerance: every T keeps its own vote on the model
                assert got == measured[int(np.argmin(predicted[:, j]))].key
        picks[costs] = [res.kernel_for(t).key for t in res.shapes]
    assert picks["measured"] != picks["predicted"]  # the model misses noise it cannot learn: the votes differ
