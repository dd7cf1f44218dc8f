"""Aligned kernel versions: a bmm micro-kernel compiled for T a multiple of its padding unit pads nothing on that
axis, is exact at every such T, refuses any other T, and is what a deployed module runs there."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tvm
import tvm_ffi

import adatune
from adatune.dietcode import (
    DynamicKernel,
    DynamicWorkload,
    MicroKernel,
    ShapeDispatcher,
    aligned_name,
    aligned_tile,
    aligned_versions,
    alignment,
    schedule_microkernel,
)
from adatune.target import cpu_info

HOST = adatune.target.host()
W = cpu_info(HOST).lanes("float32")  # one SIMD vector of fp32: 16 on AVX-512, 8 on AVX2
RANGE = (1, 4 * W)
NT = DynamicWorkload("a_nt", "bmm_nt", (3, 24), RANGE)
NN = DynamicWorkload("a_nn", "bmm_nn", (3, 2 * W), RANGE)
CASES = [  # (workload, kernel, its alignment)
    (NT, f"cpu:8x{2 * W}x4/4x{W}", W),
    (NT, f"cpu:10x{W}x2/5x{W}", W),  # 5 rows: the rows stay padded, the columns do not
    (NT, f"cpu:8x{2 * W}x4/4x{W}/column/crop-tile/unroll64", W),
    (NT, f"cpu:4x{4 * W}x1/2x{2 * W}", 2 * W),
    (NT, f"cpu:6x{3 * W}x4/3x{3 * W}/column/unroll64", 3 * W),  # three vectors: the version's column tile is nr
    (NT, f"cpu:6x{6 * W}x4/3x{3 * W}/column/unroll64", 3 * W),  # ... also where the kernel's is two register tiles
    (NN, f"cpu:8x{2 * W}x4/4x{W}", 4),
    (NN, f"cpu:6x{W}x8/3x{W}", 8),
    (NN, f"cpu:6x{2 * W}x1/3x{W}", 3),  # kt = 1: aligned on the rows
]


def _run(lib: tvm.runtime.Module, wl: DynamicWorkload, t: int, rng: np.random.Generator) -> tuple:
    a, b = wl.random_inputs(t, rng)
    dev = tvm.cpu(0)
    c = tvm.runtime.tensor(np.full(wl.shapes(t)[2], np.nan, wl.dtype), dev)
    lib["main"](tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c, t)
    return c.numpy(), wl.reference(a, b)


def _blocks(wl: DynamicWorkload, mk: MicroKernel, align: int) -> set[str]:
    sch = schedule_microkernel(wl, mk, align)
    return {sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))}


@pytest.mark.parametrize("wl, key, align", CASES, ids=[f"{w.kind}-{k}" for w, k, _ in CASES])
def test_aligned_version_is_exact_at_every_multiple_and_refuses_other_t(
    wl: DynamicWorkload, key: str, align: int
) -> None:
    mk = MicroKernel.from_key(key)
    assert alignment(wl, mk) == align
    with HOST:
        lib = tvm.compile(schedule_microkernel(wl, mk, align).mod, target=HOST)
    rng = np.random.default_rng(0)
    for t in range(align, RANGE[1] + 1, align):
        got, want = _run(lib, wl, t, rng)
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3, err_msg=f"{key} aligned to {align}, T={t}")
    with pytest.raises(Exception, match="(?i)shape|mismatch|assert"):  # TVM's shape check, not a wrong answer
        _run(lib, wl, align + 1, rng)


def test_aligned_version_pads_nothing_where_the_units_divide_it() -> None:
    tile = MicroKernel.from_key(f"cpu:8x{2 * W}x4/4x{W}")  # 4 rows divide W: neither T axis is padded
    generic, aligned = _blocks(NT, tile, 1), _blocks(NT, tile, W)
    assert {"A_pad", "B_pad", "C_pad"} <= generic
    assert not {"A_pad", "B_pad", "C_pad"} & aligned
    rows5 = _blocks(NT, MicroKernel.from_key(f"cpu:10x{W}x2/5x{W}"), W)  # rows padded to 5, written straight to C
    assert "A_pad" in rows5 and not {"B_pad", "C_pad"} & rows5
    nn = _blocks(NN, MicroKernel.from_key(f"cpu:8x{2 * W}x4/4x{W}"), 4)  # reduction and rows unpadded
    assert not {"A_pad", "B_pad", "C_pad"} & nn
    rows_only = MicroKernel.from_key(f"cpu:6x{2 * W}x1/3x{W}")  # kt = 1 pads only the rows, which 3 divides
    assert "A_pad" in _blocks(NN, rows_only, 1) and not {"A_pad", "B_pad", "C_pad"} & _blocks(NN, rows_only, 3)


def test_a_three_vector_tile_aligns_with_its_register_tile_as_its_column_tile() -> None:
    wide, two = (
        MicroKernel.from_key(f"cpu:6x{6 * W}x4/3x{3 * W}/column"),
        MicroKernel.from_key(f"cpu:6x{6 * W}x4/3x{W}"),
    )
    assert aligned_tile(NT, wide, 3 * W) == MicroKernel.from_key(f"cpu:6x{3 * W}x4/3x{3 * W}/column")
    assert tvm_ffi.structural_equal(
        schedule_microkernel(NT, wide, 3 * W).mod, schedule_microkernel(NT, aligned_tile(NT, wide, 3 * W), 3 * W).mod
    )
    assert aligned_tile(NT, wide, 1) == wide  # the kernel itself keeps its column tile
    assert aligned_tile(NT, two, W) == two  # a power-of-two register tile keeps its wide column tile
    assert aligned_tile(NN, MicroKernel.from_key(f"cpu:6x{6 * W}x4/3x{3 * W}"), 3) == MicroKernel.from_key(
        f"cpu:6x{6 * W}x4/3x{3 * W}"
    )  # bmm NN: not probed, unchanged


def test_which_kernels_get_a_version_and_bad_alignments_are_named() -> None:
    dense = DynamicWorkload("a_dense", "dense", (24, 2 * W), RANGE)
    mk = MicroKernel.from_key(f"cpu:8x{2 * W}x4/4x{W}")
    assert alignment(dense, mk) == 1  # dense pads only A's rows, once per call: no version
    wide = MicroKernel.from_key(f"cpu:4x{4 * W}x1/2x{4 * W}")
    assert aligned_versions(NT, [mk, wide]) == [W, 4 * W]  # 4W-wide register tiles: T = 4W, the range's top
    short = DynamicWorkload("short", "bmm_nt", (3, 24), (1, 4 * W - 1))
    assert aligned_versions(short, [mk, wide]) == [W, 0]  # a version that would serve no T of the range
    # kt = 1: the reduction is never padded, the rows are: the version aligns the rows' unit
    assert aligned_versions(NN, [MicroKernel.from_key(f"cpu:8x{W}x1/4x{W}")]) == [4]
    assert aligned_versions(NN, [MicroKernel.from_key(f"cpu:8x{W}x1/1x{W}")]) == [0]  # nothing padded at all
    assert aligned_name("scores_mk0", 16) == "scores_mk0_a16"
    with pytest.raises(ValueError, match="align must be a positive int"):
        NT.prim_func(align=0)
    with pytest.raises(ValueError, match="can align only its T axes"):
        NN.prim_func(align=4, axes={1})
    cuda = MicroKernel("cuda", 32, 32, 8, 2, 2)
    assert alignment(NT, cuda) == 1
    with pytest.raises(ValueError, match="x86 only"):
        schedule_microkernel(NT, cuda, 4)


def test_deployed_kernel_runs_the_aligned_version_at_multiples(tmp_path: os.PathLike) -> None:
    small, large = MicroKernel.from_key(f"cpu:10x{W}x2/5x{W}"), MicroKernel.from_key(f"cpu:8x{2 * W}x4/4x{W}")
    ts = list(range(RANGE[0], RANGE[1] + 1))
    disp = ShapeDispatcher.fit(ts, [small.key if t <= 2 * W else large.key for t in ts], RANGE)
    by_key = {small.key: small, large.key: large}
    dk = DynamicKernel(NT, [by_key[label] for label in disp.labels], disp, HOST)
    assert dk.aligns == [W, W]
    rng = np.random.default_rng(1)
    for t in ts:
        i = dk.index(t)
        want_name = aligned_name(dk.names[i], W) if t % W == 0 else dk.names[i]
        assert dk.function_name(t) == want_name, t
        a, b = NT.random_inputs(t, rng)
        np.testing.assert_allclose(dk(t, a, b), NT.reference(a, b), rtol=1e-3, atol=1e-3, err_msg=f"T={t}")
    manifest = json.load(open(dk.export(os.path.join(str(tmp_path), "out")), encoding="utf-8"))
    assert manifest["aligned"] == [W, W]
    lib = tvm.runtime.load_module(os.path.join(str(tmp_path), "out", "kernels.so"))
    got, want = _run_named(lib, aligned_name(dk.names[dk.index(2 * W)], W), 2 * W, rng)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


def _run_named(lib: tvm.runtime.Module, name: str, t: int, rng: np.random.Generator) -> tuple:
    a, b = NT.random_inputs(t, rng)
    dev = tvm.cpu(0)
    c = tvm.runtime.tensor(np.full(NT.shapes(t)[2], np.nan, NT.dtype), dev)
    lib[name](tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c, t)
    return c.numpy(), NT.reference(a, b)
