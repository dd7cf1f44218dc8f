"""DietCode: one tuning run per dynamic GEMM, checked where it can go wrong.

Small workloads over T in [1, 40] are tuned for real on this CPU (a few kernels, few shapes), then every
selected kernel is checked against numpy at every T, the compiled C dispatcher against the Python tree, the
tree against the cost model's votes, the cost-model arithmetic on hand examples, bad extents, the records a
run writes, the CUDA micro-kernels through nvcc (sm_80) and a BERT encoder layer on DietCode kernels.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest
import tvm

import adatune
from adatune.codegen.x86 import ACCUMULATOR_SCOPE
from adatune.dietcode import (
    SM80_LIMITS,
    CompiledDispatcher,
    DietCodeResult,
    DietCodeTuner,
    DynamicKernel,
    DynamicWorkload,
    MicroKernel,
    MicroKernelSpace,
    RangeTask,
    ShapeDispatcher,
    aligned_name,
    bert_workloads,
    f_occ,
    f_pad,
    fit_occupancy_k,
    microkernel_func,
    num_tiles,
    sample_shapes,
    schedule_microkernel,
    select_kernels,
    validate_range,
)
from adatune.dietcode._range_task import seconds_at
from adatune.dietcode._schedule import padding_units, split_k_error
from adatune.dietcode._select import calibrated_costs
from adatune.dietcode._space import weight_panel
from adatune.dietcode._task import static_k
from adatune.records import load_from_file

T_RANGE = (1, 40)
HOST = adatune.target.host()
PANEL = weight_panel(HOST, "float32", 576)  # one SIMD vector (8 or 16 fp32 lanes): 576 is a multiple of both
WORKLOADS = {
    "dense": DynamicWorkload("t_dense", "dense", (24, 40), T_RANGE),
    "dense_packed": DynamicWorkload("t_dense_packed", "dense", (24, 576), T_RANGE, b_panel=PANEL),
    "bmm_nt": DynamicWorkload("t_scores", "bmm_nt", (2, 16), T_RANGE),
    "bmm_nn": DynamicWorkload("t_context", "bmm_nn", (2, 16), T_RANGE),
}
ROW_MAJOR_B = [k for k, wl in WORKLOADS.items() if not wl.b_panel]  # what CUDA micro-kernels read


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    return bool(np.allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max()))))


@pytest.fixture(scope="module")
def tuned(
    tmp_path_factory: pytest.TempPathFactory, dietcode_option: adatune.measure.MeasureOption
) -> dict[str, tuple[DietCodeResult, str]]:
    """A real (small) tuning run per GEMM kind, with its record log."""
    out = {}
    for kind, wl in WORKLOADS.items():
        log = str(tmp_path_factory.mktemp("dietcode") / f"{kind}.jsonl")
        tuner = DietCodeTuner(
            wl, HOST, n_shapes=4, rounds=1, kernels_per_round=3, max_kernels=3, seed=1,
            number=1, repeat=1, min_repeat_ms=1, population=24, generations=1,
        )  # fmt: skip  # a small search: what is tested is the deployed kernels, not how they were found
        tuner.tune(measure_option=dietcode_option, callbacks=[adatune.callback.log_to_file(log)])
        out[kind] = (tuner.result(), log)
    return out


@pytest.fixture(scope="module")
def deployed(tuned: dict[str, tuple[DietCodeResult, str]]) -> dict[str, DynamicKernel]:
    return {kind: res.build() for kind, (res, _) in tuned.items()}


# ---------------------------------------------------------------------- correctness of the kernels
@pytest.mark.parametrize("kind", list(WORKLOADS))
def test_every_selected_kernel_is_correct_for_every_t(kind: str, deployed: dict[str, DynamicKernel]) -> None:
    dk = deployed[kind]
    wl = dk.workload
    rng = np.random.default_rng(7)
    dev = tvm.cpu(0)
    for t in range(T_RANGE[0], T_RANGE[1] + 1):
        a, b = wl.random_inputs(t, rng)
        want = wl.reference(a, b)
        assert _close(dk(t, a, b), want), f"dispatched kernel wrong at T={t}"
        # every selected kernel, not only the dispatched one, and its aligned version where it serves T
        versions = list(dk.names) + [aligned_name(n, u) for n, u in zip(dk.names, dk.aligns) if u and t % u == 0]
        for name in versions:
            c = tvm.runtime.tensor(np.full(want.shape, np.nan, np.float32), dev)
            dk.lib[name](tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c, t)
            assert _close(c.numpy(), want), f"{name} wrong at T={t}"


@pytest.mark.parametrize("kind", list(WORKLOADS))
def test_extreme_tiles_pad_locally_and_stay_correct(kind: str) -> None:
    """The smallest and largest tiles of the space (tiles far above and far below T) on odd extents."""
    wl = WORKLOADS[kind]
    space = MicroKernelSpace(HOST, "float32", static_k(wl), kind=wl.kind)
    by_size = sorted(space.kernels, key=lambda k: (k.mt * k.nt, k.kt, k.pack))
    picks = [by_size[0], by_size[-1], max(space.kernels, key=lambda k: k.kt)]
    column = [k for k in by_size if k.pack]  # bmm_nt: B packed inside each column tile
    assert bool(column) == (kind == "bmm_nt")
    assert (by_size[0].nr == 1) == (kind == "bmm_nt")  # bmm_nt's columns are T: tiles narrower than a vector
    picks += [column[0], column[-1]] if column else []
    one_vector = [k for k in by_size if k.nr == adatune.target.vector_lanes(HOST)]  # bmm_nt: T padded to one vector
    assert bool(one_vector) == (kind == "bmm_nt")
    picks += [one_vector[0], max(one_vector, key=lambda k: k.mr)] if one_vector else []
    crop_tile = [k for k in by_size if k.crop]  # bmm_nt: the output cropped inside each tile, not once per call
    assert bool(crop_tile) == (kind == "bmm_nt")
    picks += [crop_tile[0], crop_tile[-1], next(k for k in crop_tile if k.pack)] if crop_tile else []
    unrolled = [k for k in by_size if k.unroll]  # bmm_nt: TVM's auto-unroll on the whole kernel
    assert bool(unrolled) == (kind == "bmm_nt")
    picks += [unrolled[0], next(k for k in unrolled if k.pack and k.crop)] if unrolled else []
    names = [f"k{i}" for i in range(len(picks))]
    lib = tvm.compile(tvm.IRModule({n: microkernel_func(wl, k, n) for n, k in zip(names, picks)}), target=HOST)
    text = microkernel_func(wl, picks[1]).script()
    # padding is there, as copies (the accumulators in their own buffer), not predicates in the loops
    assert "A_pad" in text and f"C_pad_{ACCUMULATOR_SCOPE}" in text
    rng = np.random.default_rng(3)
    dev = tvm.cpu(0)
    for t in (1, 2, 3, 7, 13, 31, 40, 53):
        a, b = wl.random_inputs(t, rng)
        want = wl.reference(a, b)
        for name, mk in zip(names, picks):
            c = tvm.runtime.tensor(np.full(want.shape, np.nan, np.float32), dev)
            lib[name](tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c, t)
            assert _close(c.numpy(), want), f"{mk} wrong at T={t}"


@pytest.mark.parametrize("kind", list(WORKLOADS))
def test_t_axes_pad_to_the_register_tile_behind_guards_outside_the_vector_loops(kind: str) -> None:
    """A T axis is padded to the register tile, not the whole tile (a 24-row tile at T = 25 computes 30 rows, not
    48); the part-full last tile skips whole register tiles, so no guard sits on the unrolled rows or the vector
    lanes; ``f_pad`` counts exactly the work the schedule pads to."""
    wl = WORKLOADS[kind]
    space = MicroKernelSpace(HOST, "float32", static_k(wl), kind=wl.kind)
    mk = max((k for k in space.kernels if k.mt > k.mr and k.nt > k.nr), key=lambda k: (k.mt * k.nt, k.kt))
    rows, cols, red = padding_units(wl, mk)
    assert rows == mk.mr and red == mk.kt and cols == (mk.nr if wl.kind == "bmm_nt" else mk.nt)
    assert padding_units(wl, dataclasses.replace(mk, device="cuda")) == (mk.mt, mk.nt, mk.kt)
    sch = schedule_microkernel(wl, mk)
    loops = sch.get_loops(sch.get_sblock("C_update"))
    realize = sch.get(loops[-1]).body
    guarded = {v.name for v in tvm.tirx.analysis.undefined_vars(realize.predicate)}
    inner = {sch.get(loop).loop_var.name for loop in loops[-2:]}  # the register tile's rows and lanes
    assert guarded and not guarded & inner, realize.predicate
    func = sch.mod["main"]
    for t in (mk.mt + 1, 2 * mk.mt - 1):
        fixed = tvm.s_tir.Schedule(func.specialize({func.params[3]: t}))
        shapes = {b.name: [int(x) for x in b.shape] for b in fixed.get(fixed.get_sblock("root")).alloc_buffers}
        padded_rows = math.ceil(t / mk.mr) * mk.mr
        assert shapes["A_pad"][0 if wl.kind == "dense" else 1] == padded_rows
        _, m, n, k = wl.gemm_extents(t)
        want = padded_rows * math.ceil(n / cols) * cols * math.ceil(k / red) * red / (m * n * k)
        assert f_pad(wl, mk, t) == pytest.approx(want)
        if wl.kind == "bmm_nt":
            assert shapes["C_pad"][1:] == [padded_rows, math.ceil(t / mk.nr) * mk.nr]
    assert f_pad(wl, mk, mk.mt + 1) < f_pad(wl, dataclasses.replace(mk, device="cuda"), mk.mt + 1)


@pytest.mark.parametrize("kind", list(WORKLOADS))
def test_padded_copies_are_placed_where_they_are_made_once(kind: str) -> None:
    """A dense GEMM's padded A is a parallel loop of its own before the GEMM (in every tile it was made again per
    column tile); the bmm kernels keep it in the tile; where only rows are padded the accumulators write C
    directly, with no cropping copy; bmm_nt crops its padded output once per call, or in each tile where its kernel
    says so; a placement the kernel cannot take is a clear error."""
    wl = WORKLOADS[kind]
    space = MicroKernelSpace(HOST, "float32", static_k(wl), kind=wl.kind)
    mk = max((k for k in space.kernels if not k.pack and not k.crop), key=lambda k: (k.mt * k.nt, k.kt))
    sch = schedule_microkernel(wl, mk)
    blocks = {sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))}
    once = wl.kind == "dense"
    assert "A_pad" in blocks
    a_loops = sch.get_loops(sch.get_sblock("A_pad"))
    gemm_loops = {sch.get(loop) for loop in sch.get_loops(sch.get_sblock("C_update"))}
    assert any(sch.get(loop) in gemm_loops for loop in a_loops) != once
    if once:
        assert sch.get(a_loops[0]).kind == tvm.tirx.ForKind.PARALLEL
    columns_padded = wl.kind == "bmm_nt" or wl.dims[1] % mk.nt != 0  # bmm_nt: T is also the column extent
    assert ("C_pad" in blocks) == columns_padded  # the cropping copy (the accumulators' block is C_pad_<scope>)
    if wl.kind == "bmm_nt":  # its T x T output is cropped once per call, rows in parallel, outside the tiles
        crop_loops = sch.get_loops(sch.get_sblock("C_pad"))
        assert not any(sch.get(loop) in gemm_loops for loop in crop_loops)
        assert sch.get(crop_loops[0]).kind == tvm.tirx.ForKind.PARALLEL
        in_tile = schedule_microkernel(wl, dataclasses.replace(mk, crop="tile"))
        tile_loops = {in_tile.get(loop) for loop in in_tile.get_loops(in_tile.get_sblock("C_update"))}
        assert any(in_tile.get(loop) in tile_loops for loop in in_tile.get_loops(in_tile.get_sblock("C_pad")))
    else:
        with pytest.raises(ValueError, match="only bmm_nt kernels do"):
            schedule_microkernel(wl, dataclasses.replace(mk, crop="tile"))


def test_a_neighbour_differs_from_its_kernel_in_exactly_one_field() -> None:
    """The evolutionary search's mutation, on the largest space (bmm_nt: one-vector, sub-vector, packed and
    cropped kernels)."""
    space = MicroKernelSpace(HOST, "float32", 64, kind="bmm_nt")
    fields = [f.name for f in dataclasses.fields(MicroKernel) if f.name != "device"]  # every field, unroll too
    rng = np.random.default_rng(0)
    kernels = space.random_candidates(rng, 64)
    for kernel, mutant in zip(kernels, space.mutate(kernels, rng)):
        assert mutant.key in space
        assert sum(getattr(kernel, f) != getattr(mutant, f) for f in fields) == 1, (kernel, mutant)


def test_microkernel_keys_round_trip_and_bad_keys_are_named() -> None:
    space = MicroKernelSpace(HOST, "float32", 16, kind="bmm_nt")  # column-packed and sub-vector kernels too
    for mk in space.kernels:
        assert MicroKernel.from_key(mk.key) == mk
    options = {(k.pack, k.crop, k.unroll) for k in space.kernels}
    assert options == {(p, c, u) for p in ("", "column") for c in ("", "tile") for u in (0, 64)}
    assert MicroKernel.from_key("cpu:8x8x1/8x4/column/crop-tile") == MicroKernel("cpu", 8, 8, 1, 8, 4, "column", "tile")
    assert MicroKernel.from_key("cpu:8x8x1/8x4/crop-tile/unroll64") == MicroKernel("cpu", 8, 8, 1, 8, 4, "", "tile", 64)
    assert space.decode(MicroKernel("cpu", 8, 8, 1, 8, 4, crop="tile").to_json()).crop == "tile"
    assert space.decode(MicroKernel("cpu", 8, 8, 1, 8, 4, unroll=64).to_json()).unroll == 64
    assert "unroll" not in MicroKernel("cpu", 8, 8, 1, 8, 4).to_json()  # records written before the field read alike
    for bad in (
        "cpu:64x96/8x32",
        "cpu",
        "cpu:8x8x1/8x8/column/x",
        "cpu:axbxc/1x1",
        "cpu:8x8x1/8x4/crop-tile/column",
        "cpu:8x8x1/8x4/unroll64/column",
        "cpu:8x8x1/8x4/unrollx",
    ):
        with pytest.raises(ValueError, match="not a micro-kernel key"):
            MicroKernel.from_key(bad)
    with pytest.raises(ValueError, match="crops with crop=''"):
        MicroKernel("cpu", 8, 8, 1, 8, 4, crop="somewhere")
    with pytest.raises(ValueError, match="unrolls with a step in"):
        MicroKernel.from_key("cpu:8x8x1/8x4/unroll32")
    # the field reaches the program: TVM's unroll pragma on the kernel's root, and only there
    nt = DynamicWorkload("nt", "bmm_nt", (2, 16), (1, 8))
    assert (
        "pragma_auto_unroll_max_step" in microkernel_func(nt, MicroKernel.from_key("cpu:8x8x1/8x4/unroll64")).script()
    )
    assert "pragma_auto_unroll_max_step" not in microkernel_func(nt, MicroKernel.from_key("cpu:8x8x1/8x4")).script()
    with pytest.raises(ValueError, match="x86 options"):  # CUDA kernels unroll as their schedule says
        schedule_microkernel(nt, MicroKernel.from_key("cuda:8x8x1/8x4/unroll64"))
    # a one-column register tile has nothing to pack per column tile (such kernels failed to build in TVM 0.27)
    assert not [k for k in space.kernels if k.pack and k.nr == 1]
    wl = DynamicWorkload("one_column", "bmm_nt", (2, 16), (1, 8))
    with pytest.raises(ValueError, match="one column wide"):
        schedule_microkernel(wl, MicroKernel.from_key("cpu:4x2x8/2x1/column"))


# ---------------------------------------------------------------------- dispatch
@pytest.mark.parametrize("kind", list(WORKLOADS))
def test_c_dispatcher_agrees_with_python_tree(kind: str, deployed: dict[str, DynamicKernel]) -> None:
    dk = deployed[kind]
    py = dk.dispatcher.to_python()
    for t in range(1, 3 * T_RANGE[1]):
        assert dk.c_dispatcher.raw(t) == py(t) == dk.dispatcher.index(t, warn=False)
    assert dk.c_dispatcher.raw(0) == -1 and dk.c_dispatcher.raw(-5) == -1


def test_tree_reproduces_votes_on_many_labels(tmp_path: os.PathLike) -> None:
    """Votes with many bands and single-T islands: the exported tree (Python and C) must hit every one."""
    ts = list(range(1, 129))
    votes = [f"k{(t // 9) % 5}" if t % 17 else "island" for t in ts]
    disp = ShapeDispatcher.fit(ts, votes, (1, 128))
    comp = CompiledDispatcher(disp, "many_labels", str(tmp_path))
    py = disp.to_python()
    for t, v in zip(ts, votes):
        assert disp(t) == v
        assert disp.labels[py(t)] == v
        assert comp(t) == v
    assert "if (t <=" in open(comp.source_path).read()
    assert ShapeDispatcher.from_json(disp.to_json()).to_c_source() == disp.to_c_source()
    with pytest.raises(ValueError, match="conflicting votes"):
        ShapeDispatcher.fit([3, 3], ["a", "b"])


@pytest.mark.parametrize("kind", list(WORKLOADS))
def test_dispatched_kernel_is_the_best_by_timing_where_timed_and_by_calibrated_prediction_elsewhere(
    kind: str, tuned: dict[str, tuple[DietCodeResult, str]]
) -> None:
    res, _ = tuned[kind]
    ts = list(range(T_RANGE[0], T_RANGE[1] + 1))
    pred = res.model.predict(res.kernels, ts)
    timed = {(m.kernel.key, m.t): m.seconds for m in res.measurements if np.isfinite(m.seconds)}
    matrix = np.array([[timed.get((k.key, t), np.nan) for t in ts] for k in res.kernels])
    anchored = calibrated_costs(pred, matrix, ts)  # the default vote; each kernel's row depends on it alone
    for col, t in enumerate(ts):
        costs = anchored[:, col]
        assert all(costs[i] == timed[(k.key, t)] for i, k in enumerate(res.kernels) if (k.key, t) in timed)
        # every deployed kernel was timed at every sampled T, and nowhere else
        assert (t in res.shapes) == all((k.key, t) in timed for k in res.kernels)
        chosen = res.dispatcher.index(t)
        assert res.kernels[chosen].key == res.dispatcher(t)
        assert math.isclose(costs[chosen], costs.min(), rel_tol=1e-9), f"T={t} not its vote"
        assert math.isclose(res.predicted[t], costs.min(), rel_tol=1e-9)
    assert 1 <= len(res.kernels) <= 3
    assert all(k.key in {m.kernel.key for m in res.measurements if np.isfinite(m.seconds)} for k in res.kernels)


# ---------------------------------------------------------------------- cost model arithmetic
def test_f_pad_and_tiles_on_hand_examples() -> None:
    dense = DynamicWorkload("d", "dense", (32, 48))
    mk = MicroKernel("cpu", 8, 16, 4, 4, 8)
    assert f_pad(dense, mk, 16) == 1.0  # 16 x 48 x 32: every axis divides
    assert f_pad(dense, mk, 10) == pytest.approx(12 / 10)  # rows 10 -> 12: the register tile (4 rows), not the tile
    assert num_tiles(dense, mk, 10) == 2 * 3
    assert num_tiles(dense, mk, 1) == 1 * 3
    odd = MicroKernel("cpu", 8, 32, 5, 4, 8)
    assert f_pad(dense, odd, 8) == pytest.approx((64 / 48) * (35 / 32))  # columns 48 -> 64, k 32 -> 35
    nn = DynamicWorkload("c", "bmm_nn", (12, 64))
    assert f_pad(nn, MicroKernel("cpu", 8, 64, 8, 4, 16), 5) == pytest.approx((8 / 5) * (8 / 5))  # rows, k = T
    assert num_tiles(nn, MicroKernel("cpu", 8, 64, 8, 4, 16), 17) == 12 * 3
    nt = DynamicWorkload("s", "bmm_nt", (12, 64))
    assert f_pad(nt, MicroKernel("cpu", 4, 8, 4, 4, 8), 6) == pytest.approx((8 / 6) * (8 / 6))
    assert num_tiles(nt, MicroKernel("cpu", 4, 8, 4, 4, 8), 6) == 12 * 2 * 1


def test_f_occ_on_hand_examples() -> None:
    assert f_occ(1.5, 1.0) == pytest.approx(4 / 3)  # 3 tiles on 2 cores: the 2nd wave leaves one core idle
    assert f_occ(1.5, 0.0) == pytest.approx(1.0)  # idleness fully hidden
    assert f_occ(1.5, 0.5) == pytest.approx(1 / (0.5 + 0.5 * 0.75))
    assert f_occ(4.0, 0.7) == pytest.approx(1.0)  # whole waves
    assert f_occ(0.25, 1.0) == pytest.approx(4.0)  # one tile on four cores
    np.testing.assert_allclose(f_occ(np.array([0.5, 2.0, 2.5]), 1.0), [2.0, 1.0, 3 / 2.5])
    with pytest.raises(ValueError, match="positive"):
        f_occ(0.0, 0.5)


def test_fit_occupancy_k_recovers_k() -> None:
    rng = np.random.default_rng(0)
    groups, xs, costs = [], [], []
    for g, level in enumerate((1.0, 2.5, 0.4)):
        for x in (0.3, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.6, 3.3):
            groups.append(f"k{g}")
            xs.append(x)
            costs.append(level * float(f_occ(x, 0.6)) * math.exp(rng.normal(0, 0.002)))
    assert fit_occupancy_k(groups, xs, costs) == pytest.approx(0.6, abs=0.02)
    assert fit_occupancy_k(["a", "b"], [0.5, 1.5], [1.0, 2.0]) == 1.0  # one point per kernel: not identifiable


def test_select_kernels_covers_every_shape() -> None:
    costs = np.array([[1.0, 5.0, 5.0], [5.0, 1.0, 5.0], [2.0, 2.0, 2.0], [5.0, 5.0, 1.0], [3.0, 3.0, 3.0]])
    assert select_kernels(costs, 1) == [2]  # the best single kernel over all shapes first
    assert select_kernels(costs, 2) == [2, 0]  # then the one that lowers the summed relative cost most
    assert select_kernels(costs, 5) == [2, 0, 1, 3]  # the 3.0 kernel improves no shape: never picked
    assert select_kernels(costs[:, :1], 5) == [0]  # one shape: its best kernel covers it
    assert sample_shapes((1, 128), 8, np.random.default_rng(0))[::7] == [1, 128]
    assert sample_shapes((3, 6), 8, np.random.default_rng(0)) == [3, 4, 5, 6]


# ---------------------------------------------------------------------- bad extents
def test_out_of_range_warns_and_stays_correct(deployed: dict[str, DynamicKernel]) -> None:
    dk = deployed["bmm_nn"]
    wl = dk.workload
    a, b = wl.random_inputs(57, np.random.default_rng(1))
    with pytest.warns(RuntimeWarning, match="outside the tuned range"):
        got = dk(57, a, b)
    assert _close(got, wl.reference(a, b))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dk(np.int64(12), *wl.random_inputs(12, np.random.default_rng(2)))  # numpy ints are integers


@pytest.mark.parametrize("bad", [2.5, 0, -3, True, "7", None])
def test_bad_extent_is_a_value_error(bad: object, deployed: dict[str, DynamicKernel]) -> None:
    dk = deployed["dense"]
    a, b = dk.workload.random_inputs(4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="T must be a positive integer"):
        dk(bad, a, b)
    with pytest.raises(ValueError, match="T must be a positive integer"):
        dk.dispatcher.index(bad)


def test_bad_ranges_and_shapes(deployed: dict[str, DynamicKernel]) -> None:
    for bad in [(0, 5), (9, 3), (1.0, 5), (1,), "1-5", (True, 4)]:
        with pytest.raises(ValueError, match="T range"):
            validate_range(bad)
    with pytest.raises(ValueError, match="unknown GEMM kind"):
        DynamicWorkload("x", "conv", (3, 4))
    with pytest.raises(ValueError, match="T range"):
        bert_workloads((4, 2))
    dk = deployed["dense"]
    a, b = dk.workload.random_inputs(5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="takes inputs of shapes"):
        dk(6, a, b)


def test_packed_weights_round_trip_and_bad_panels_are_named(deployed: dict[str, DynamicKernel]) -> None:
    assert PANEL > 0 and PANEL % adatune.target.cpu_info(HOST).lanes("float32") == 0
    wl = WORKLOADS["dense_packed"]
    w = np.random.default_rng(0).standard_normal((24, 576)).astype(np.float32)
    packed = wl.pack_b(w)
    assert packed.shape == wl.shapes(3)[1] == (576 // PANEL, 24, PANEL)
    assert np.array_equal(packed[1, 5, :], w[5, PANEL : 2 * PANEL])  # panel 1 holds columns W..2W-1, K-major
    assert np.array_equal(wl.unpack_b(packed), w)
    a = np.random.default_rng(1).standard_normal((9, 24)).astype(np.float32)
    dk = deployed["dense_packed"]
    assert _close(dk(9, a, w), a @ w) and _close(dk(9, a, packed), a @ w)  # [K, N] is packed on the way in
    with pytest.raises(ValueError, match="packs a \\[24, 576\\] weight"):
        wl.pack_b(w[:, :40])
    with pytest.raises(ValueError, match="b_panel=7 packs a dense weight"):
        DynamicWorkload("x", "dense", (24, 40), b_panel=7)
    with pytest.raises(ValueError, match="b_panel=8 packs a dense weight"):
        DynamicWorkload("x", "bmm_nt", (2, 16), b_panel=8)
    with pytest.raises(ValueError, match="b_panel must be"):
        DynamicWorkload("x", "dense", (24, 40), b_panel=-8)
    assert DynamicWorkload.from_json(wl.to_json()) == wl
    old_record = ["t_dense", "dense", [24, 40], [1, 40], "float32"]  # written before weights were packed
    assert DynamicWorkload.from_json(old_record) == WORKLOADS["dense"]
    assert PANEL == adatune.target.vector_lanes(HOST)
    assert weight_panel(HOST, "float32", 36) == 0  # no vector width divides 36 columns: B stays [K, N]
    assert weight_panel(CUDA_SM80, "float32", 576) == 0


def test_register_tiles_wider_than_a_panel_read_one_vector_from_each() -> None:
    """A weight is packed in one-vector panels; a register tile of several vectors reads one contiguous vector
    from each of its panels per k step (no vector wider than a panel, so no gather) and stays correct."""
    wl = WORKLOADS["dense_packed"]
    space = MicroKernelSpace(HOST, "float32", static_k(wl), kind=wl.kind)
    wide = max(space.kernels, key=lambda k: (k.nr, k.mr))
    assert wide.nr > PANEL and wide.nr % PANEL == 0
    text = microkernel_func(wl, wide).script()
    lanes = {int(x) for x in re.findall(r"T\.vectorized\((?:T\.int\d+\()?(\d+)", text)}
    assert lanes == {PANEL}
    lib = tvm.compile(tvm.IRModule({"main": microkernel_func(wl, wide)}), target=HOST)
    rng = np.random.default_rng(5)
    for t in (1, 5, 17, 40):
        a, b = wl.random_inputs(t, rng)
        c = tvm.runtime.tensor(np.zeros(wl.shapes(t)[2], np.float32))
        lib["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c, t)
        assert _close(c.numpy(), wl.reference(a, b)), f"{wide} at T={t}"
    with pytest.raises(ValueError, match="neither tile"):
        schedule_microkernel(dataclasses.replace(wl, b_panel=3 * PANEL), wide)


@pytest.mark.parametrize(
    "wl",
    [
        WORKLOADS["bmm_nt"],
        DynamicWorkload("t_context96", "bmm_nn", (2, 96), T_RANGE),  # 96: a multiple of 3 vectors of 8 or 16 lanes
        DynamicWorkload("t_dense96", "dense", (24, 96), T_RANGE),
    ],
    ids=lambda wl: wl.kind,
)
def test_three_vector_register_tiles_run_as_power_of_two_vectors(wl: DynamicWorkload) -> None:
    """A register tile three vectors wide on an unpacked B is vectorised one power-of-two vector at a time (LLVM
    widens a ``<24 x float>`` loop, which ran 2.1-3.2x slower) and stays correct at T that pad it and T that do not."""
    kind = wl.kind
    lanes = adatune.target.cpu_info(adatune.target.create(HOST)).lanes("float32")
    mk = MicroKernel("cpu", 4, 3 * lanes, 4, 4, 3 * lanes)
    text = microkernel_func(wl, mk).script()
    assert {int(x) for x in re.findall(r"T\.vectorized\((?:T\.int\d+\()?(\d+)", text)} == {lanes}
    lib = tvm.compile(tvm.IRModule({"main": microkernel_func(wl, mk)}), target=HOST)
    rng = np.random.default_rng(6)
    for t in (1, 7, 3 * lanes, 40):
        a, b = wl.random_inputs(t, rng)
        c = tvm.runtime.tensor(np.zeros(wl.shapes(t)[2], np.float32))
        lib["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c, t)
        assert _close(c.numpy(), wl.reference(a, b)), f"{mk} on {kind} at T={t}"


# ---------------------------------------------------------------------- records
@pytest.mark.parametrize("kind", list(WORKLOADS))
def test_records_round_trip(kind: str, tuned: dict[str, tuple[DietCodeResult, str]]) -> None:
    """One record per micro-kernel (one build timed at every sampled T), each T's timings in the record; then, for
    each deployed kernel with an aligned version that serves a T, the kernel and that version timed there."""
    res, log = tuned[kind]
    recs = list(load_from_file(log))
    rounds = len(res.measurements) // len(res.shapes)
    recs, versions = recs[:rounds], recs[rounds:]
    assert len(recs) * len(res.shapes) == len(res.measurements)
    timed = {key: v for key, v in res.versions.get("kernels", {}).items() if v["ts"]}
    assert len(versions) == 2 * len(timed) and (kind != "dense" or not versions)  # dense GEMMs have no versions
    for generic, aligned in zip(versions[::2], versions[1::2]):
        key = generic.input.config.key
        assert aligned.input.config.key == key and generic.input.task.align == 1
        assert aligned.input.task.align == timed[key]["align"] and list(aligned.input.task.ts) == timed[key]["ts"]
    by_pair = {(m.kernel.key, m.t): m for m in res.measurements}
    for rec in recs:
        inp, result = rec
        assert rec.kind == "microkernel" and rec.task_name == "dietcode-range/" + res.workload.kind
        assert isinstance(inp.task, RangeTask) and isinstance(inp.config, MicroKernel)
        assert inp.task.dynamic == res.workload and list(inp.task.ts) == sorted(res.shapes)
        seconds = seconds_at(result)
        for t in res.shapes:
            m = by_pair[(inp.config.key, t)]
            assert m.kernel == inp.config
            if np.isfinite(m.seconds):
                assert result.error_no == 0 and seconds[t] == pytest.approx(m.seconds)
    task = recs[0].input.task
    with pytest.raises(ValueError, match="not a micro-kernel record"):
        task.space.decode({"kind": "knob", "index": 3})
    with pytest.raises(ValueError, match="not in this cpu space"):
        task.space.decode({**recs[0].config, "mt": 10**6})


def test_record_task_module_is_the_shape_generic_kernel(tuned: dict[str, tuple[DietCodeResult, str]]) -> None:
    """What the standard builder compiles from a record: the shape-generic kernel, T its last argument."""
    res, log = tuned["bmm_nt"]
    rec = next(iter(load_from_file(log)))
    task, mk = rec.input.task, rec.input.config
    main = tvm.compile(task.scheduled_module(mk), target=HOST)["main"]
    dev = tvm.cpu(0)
    for point in task.measure_points:  # one build, called at every sampled T as the runner does
        (t,) = point.scalars
        a, b = res.workload.random_inputs(t, np.random.default_rng(5))
        c = tvm.runtime.tensor(np.zeros(point.arg_specs[2].shape, np.float32), dev)
        main(tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c, t)
        assert _close(c.numpy(), res.workload.reference(a, b))


# ---------------------------------------------------------------------- CUDA
CUDA_SM80 = tvm.target.Target({"kind": "cuda", "arch": "sm_80"}, host="llvm")


def _cuda_picks(wl: DynamicWorkload) -> list[MicroKernel]:
    """Three kernels of the sm_80 space, small to large; where the reduction is fixed, the middle one split-K
    (its parts and their sum: two kernels and a workspace in the module)."""
    space = MicroKernelSpace(CUDA_SM80, "float32", 64)
    assert space.cores == SM80_LIMITS.multi_processor_count == 108 and space.device_limits == SM80_LIMITS
    for k in space.kernels:
        assert k.threads % 32 == 0 and k.threads <= 1024 and (k.mt + k.nt) * k.kt * 4 <= 48 << 10
    by_size = sorted(space.kernels, key=lambda k: (k.mt * k.nt, k.kt))
    middle = by_size[len(by_size) // 2]
    split = dataclasses.replace(middle, split_k=2)
    return [by_size[0], middle if split_k_error(wl, split) else split, by_size[-1]]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("kind", ROW_MAJOR_B)
def test_cuda_microkernels_compile_with_nvcc_for_sm80(kind: str, tmp_path: os.PathLike) -> None:
    wl = DynamicWorkload(f"cuda_{kind}", kind, (4, 64) if kind != "dense" else (768, 2304), (1, 128))
    picks = _cuda_picks(wl)
    mod = tvm.IRModule({f"mk{i}": microkernel_func(wl, k, f"mk{i}") for i, k in enumerate(picks)})
    with CUDA_SM80:
        lib = tvm.tirx.build(mod, target=CUDA_SM80)
    src = lib.imports[0].inspect_source()
    for i in range(len(picks)):
        assert f"mk{i}_kernel" in src
    assert "__shared__" in src
    if kind != "bmm_nn":  # the split-K pick: its parts, then their sum
        assert picks[1].split_k == 2 and "mk1_kernel_1" in src
    cu = os.path.join(str(tmp_path), f"{kind}.cu")
    with open(cu, "w") as f:
        f.write(src)
    out = os.path.join(str(tmp_path), f"{kind}.cubin")
    proc = subprocess.run(
        ["nvcc", "-arch=sm_80", "-cubin", "-std=c++17", "-o", out, cu], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert os.path.getsize(out) > 0


@pytest.mark.gpu
@pytest.mark.skipif(not tvm.cuda(0).exist, reason="no CUDA device")
@pytest.mark.parametrize("kind", ROW_MAJOR_B)
def test_cuda_microkernels_run_correctly(kind: str) -> None:
    wl = WORKLOADS[kind]
    picks = _cuda_picks(wl)
    cuda = tvm.target.Target("cuda", host="llvm")
    disp = ShapeDispatcher.fit(list(range(1, 41)), [picks[min(t // 14, 2)].key for t in range(1, 41)], T_RANGE)
    by_key = {k.key: k for k in picks}
    dk = DynamicKernel(wl, [by_key[label] for label in disp.labels], disp, cuda)
    rng = np.random.default_rng(0)
    for t in (1, 5, 17, 33, 40):
        a, b = wl.random_inputs(t, rng)
        assert _close(dk(t, a, b), wl.reference(a, b)), f"T={t}"


def test_every_t_is_timed_by_its_own_evaluator(monkeypatch: pytest.MonkeyPatch) -> None:
    """TVM's time evaluator keeps the number of runs it grew to for min_repeat_ms; one evaluator reused from a
    small T to a large one ran the large T thousands of times (seconds per measurement, most of a tuning run).
    The shared evaluator grows the number itself, per point, from a first call at that point."""
    from adatune.measure import BuildResult, LocalRunner, MeasureInput
    from adatune.measure._worker import check_and_time

    made: list[tuple[int, int]] = []
    original = tvm.runtime.Module.time_evaluator

    def counting(self: tvm.runtime.Module, *args: object, **kwargs: object) -> object:
        made.append((int(kwargs.get("number", 1)), int(kwargs.get("min_repeat_ms", 0))))  # type: ignore[call-overload]
        return original(self, *args, **kwargs)

    monkeypatch.setattr(tvm.runtime.Module, "time_evaluator", counting)
    wl = WORKLOADS["dense"]
    task = RangeTask(wl, [40, 1, 17], HOST)
    mk = task.space.kernels[0]
    runner = LocalRunner(number=1, repeat=1, min_repeat_ms=10, check_correctness=True)
    try:
        req = runner.request(MeasureInput(task, mk), BuildResult(b"built in this process"))
        lib = tvm.tirx.build(task.scheduled_module(mk), HOST)  # as the builder's worker does
        out = check_and_time(lib, tvm.cpu(0), req, runner.config)
    finally:
        runner.close()
    # per T: the untimed warm-up (TVM grows its runs to warmup_ms in an evaluator of its own, dropped after it), a
    # first call of `number` runs, then the number that lasts 10 ms at that T; no timed call leaves TVM to grow
    # (and keep) a number itself, and every timed run is counted at its point
    warm = (1, math.ceil(runner.config.evaluator.warmup_ms))
    assert out.error_no == 0 and len(made) == 9 and made[::3] == [warm] * 3 and made[1::3] == [(1, 0)] * 3
    timed = [ms for _, ms in made[1::3] + made[2::3]]
    assert timed == [0] * 6 and [p["runs"] for p in out.extra["points"]] == [1 + n for n, _ in made[2::3]]
    assert [p["at"] for p in out.extra["points"]] == [[1], [17], [40]] and len(out.costs) == 1


def test_cuda_space_takes_the_devices_profile_not_a_copy() -> None:
    """A CUDA space's limits and SM count come from adatune.measure.device_limits: the live GPU, else the target's
    arch."""
    from adatune.measure.device_limits import PROFILES, profile

    if tvm.cuda(0).exist:
        pytest.skip("a live GPU's own limits win over the arch profile")
    for arch, name in (("sm_80", "a100"), ("sm_90", "h100"), ("sm_75", "t4")):
        space = MicroKernelSpace(tvm.target.Target({"kind": "cuda", "arch": arch}, host="llvm"), "float32", 64)
        assert space.device_limits == PROFILES[name] and space.cores == PROFILES[name].multi_processor_count
    small = dataclasses.replace(profile("a100"), max_threads_per_block=128, multi_processor_count=7)
    space = MicroKernelSpace(CUDA_SM80, "float32", 64, device_limits=small)
    assert space.cores == 7 and all(k.threads <= 128 for k in space.kernels)
    with pytest.raises(ValueError, match="names no known architecture"):
        MicroKernelSpace(tvm.target.Target({"kind": "cuda", "arch": "sm_52"}, host="llvm"), "float32", 64)


def test_dietcode_tunes_on_the_shared_loop_over_rpc_with_the_adaptive_evaluator(tmp_path: os.PathLike) -> None:
    """DietCode's micro-kernels go through the shared builder and runner like any candidate: here an RPC
    server with AdaTune's adaptive evaluator, one measure input per kernel, every T checked and timed there."""
    from adatune.measure import LocalBuilder, RPCRunner, measure_option
    from adatune.measure.rpc_fleet import LoopbackFleet
    from adatune.tuners import Tuner

    wl = WORKLOADS["bmm_nn"]
    with LoopbackFleet(n_servers=1) as fleet:
        runner = RPCRunner(fleet.key, fleet.host, fleet.port, number=2, repeat=6, timeout=60, check_correctness=True)
        option = measure_option(LocalBuilder(n_parallel=1), runner, min_converge_coef=0.1)
        tuner = DietCodeTuner(wl, HOST, n_shapes=2, rounds=2, kernels_per_round=2, max_kernels=2, seed=3,
                              population=16, generations=1)  # fmt: skip  # the search is not what is tested
        try:
            tuner.tune(measure_option=option)
        finally:
            option.close()
    res = tuner.result()
    assert isinstance(tuner, Tuner) and len(tuner.trials) == 4 and len(tuner.rounds) == 2
    assert all(t.error_no == 0 for t in tuner.trials), [t.error_no for t in tuner.trials]
    ok = [m for m in res.measurements if np.isfinite(m.seconds)]
    assert len(ok) == 4 * len(res.shapes)
    assert res.build()(5, *wl.random_inputs(5, np.random.default_rng(0))).shape == wl.shapes(5)[2]


# ---------------------------------------------------------------------- the tuner's contract and the deployed kernel
def test_the_result_comes_from_a_method_and_log_file_still_logs_with_a_warning(
    tmp_path: os.PathLike, dietcode_option: adatune.measure.MeasureOption
) -> None:
    """``tune()`` follows the shared Tuner signature (returns None); ``result()`` gives what it chose, and the old
    ``log_file=`` keeps writing the log, with a DeprecationWarning naming ``log_to_file``."""
    wl = WORKLOADS["dense"]
    small = dict(n_shapes=2, rounds=1, kernels_per_round=1, seed=0, number=1, repeat=1, min_repeat_ms=1)
    with pytest.raises(RuntimeError, match="finished tune"):
        DietCodeTuner(wl, HOST, **small).result()  # type: ignore[arg-type]
    log = os.path.join(str(tmp_path), "old.jsonl")
    with pytest.warns(DeprecationWarning, match="log_to_file"):
        tuner = DietCodeTuner(wl, HOST, log_file=log, check_versions=False, **small)  # type: ignore[arg-type]
    assert tuner.tune(measure_option=dietcode_option) is None  # type: ignore[func-returns-value]
    res = tuner.result()
    assert isinstance(res, DietCodeResult) and res.kernels
    assert [r.input.config.key for r in load_from_file(log)] == [t.key for t in tuner.trials]


def test_a_built_kernel_runs_on_every_usable_core_in_a_fresh_process() -> None:
    """TVM alone starts hardware_concurrency() / 2 threads; what ``result.build()`` returns sizes the pool first, as
    ``adatune.models.CompiledModel`` does, so a user timing it gets every usable core."""
    code = (
        "import json, numpy as np, tvm, adatune\n"
        "from adatune.dietcode import DynamicKernel, DynamicWorkload, MicroKernelSpace, ShapeDispatcher\n"
        "host, usable = adatune.target.host(), adatune.target._usable_cores()  # before TVM pins any thread\n"
        "wl = DynamicWorkload('d', 'dense', (8, 16), (1, 8))\n"
        "mk = MicroKernelSpace(host, 'float32', 8).kernels[0]\n"
        "dk = DynamicKernel(wl, [mk], ShapeDispatcher.fit([1, 8], [mk.key] * 2, (1, 8)), host)\n"
        "out = dk(3, *wl.random_inputs(3, np.random.default_rng(0)))\n"
        "print(json.dumps([tvm.runtime.num_threads(), usable, out.shape[0]]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    threads, usable, rows = json.loads(out.stdout.strip().splitlines()[-1])
    assert rows == 3 and threads == usable == int(HOST.attrs["num-cores"])
