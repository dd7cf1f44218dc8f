"""bmm_nt kernels whose last columns run as a one-vector tail (``MicroKernel.tail``, ``adatune.dietcode._tail``)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import tvm

import adatune
from adatune.dietcode import DynamicWorkload, MicroKernel, MicroKernelSpace
from adatune.dietcode._cost import f_pad
from adatune.dietcode._schedule import alignment, microkernel_func, schedule_microkernel

HOST = adatune.target.host()
LANES = adatune.target.cpu_info(adatune.target.create(HOST)).lanes("float32")
SCORES = DynamicWorkload("t_scores", "bmm_nt", (2, 16), (1, 64))


def _run(lib: tvm.runtime.Module, wl: DynamicWorkload, t: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    a, b = wl.random_inputs(t, rng)
    c = tvm.runtime.tensor(np.full(wl.shapes(t)[2], np.nan, np.float32))
    lib["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c, t)
    return c.numpy(), wl.reference(a, b)


@pytest.mark.parametrize(
    "mk",
    [
        MicroKernel("cpu", 6, 4 * LANES, 4, 3, 2 * LANES, tail=LANES),
        MicroKernel("cpu", 8, 3 * LANES, 2, 2, 3 * LANES, pack="column", unroll=64, tail=LANES),
    ],
    ids=lambda mk: mk.key,
)
def test_a_tail_kernel_matches_numpy_at_every_kind_of_t(mk: MicroKernel) -> None:
    """Below one register tile (no kernel columns: the tail alone), at and around its multiples, and a tail of
    several vectors: every output element written, none wrong (the output starts as NaN)."""
    lib = tvm.compile(tvm.IRModule({"main": microkernel_func(SCORES, mk)}), target=HOST)
    rng = np.random.default_rng(0)
    nr = mk.nr
    for t in sorted({1, LANES - 1, LANES + 1, nr - 1, nr, nr + 1, 2 * nr - 1, 2 * nr + LANES + 1, 61}):
        got, want = _run(lib, SCORES, t, rng)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{mk} at T={t}")


def test_a_tail_kernel_computes_its_columns_to_a_vector_not_to_its_register_tile() -> None:
    """At T = 2 nr + 1 a two-vector tile pads to 3 nr columns; with a tail it computes 2 nr + one vector (its tail
    tile one vector of the target's lanes), and ``f_pad`` (what the cost model sees) counts that."""
    plain = MicroKernel("cpu", 6, 2 * LANES, 4, 3, 2 * LANES)
    tailed = dataclasses.replace(plain, tail=LANES)
    t = 2 * plain.nr + 1
    cols = {plain.key: 3 * plain.nr, tailed.key: 2 * plain.nr + LANES}
    rows = 3 * -(-t // 3)
    for mk in (plain, tailed):
        assert f_pad(SCORES, mk, t) == pytest.approx(rows * cols[mk.key] / (t * t))
    text = microkernel_func(SCORES, tailed).script()
    widths = {int(x) for x in re.findall(r"T\.vectorized\((?:T\.int\d+\()?(\d+)", text)}
    assert LANES in widths and all(tailed.nr % w == 0 and w & (w - 1) == 0 for w in widths)
    tail_loop = text[text.index('sblock("Ct_update")') - 400 : text.index('sblock("Ct_update")')]
    assert f"T.vectorized({LANES})" in tail_loop  # the tail: one vector of the target's lanes
    assert 'sblock("C_out")' in text


def test_a_tail_kernels_aligned_version_is_its_plain_tiles_and_stays_exact() -> None:
    """Where T is a multiple of the register tile nothing is left for a tail: the aligned version (what a module
    runs there) is the twin's, unpadded, and correct."""
    tailed = MicroKernel("cpu", 6, 2 * LANES, 4, 3, 2 * LANES, tail=LANES)
    u = alignment(SCORES, tailed)
    assert u == 2 * LANES
    twin = dataclasses.replace(tailed, tail=0)
    assert schedule_microkernel(SCORES, tailed, u).mod.script() == schedule_microkernel(SCORES, twin, u).mod.script()
    lib = tvm.compile(tvm.IRModule({"main": microkernel_func(SCORES, tailed, align=u)}), target=HOST)
    rng = np.random.default_rng(1)
    for t in (u, 2 * u):
        got, want = _run(lib, SCORES, t, rng)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_tail_keys_round_trip_and_bad_tails_are_named() -> None:
    mk = MicroKernel("cpu", 12, 96, 4, 6, 16, pack="column", unroll=64, tail=8)
    assert mk.key == "cpu:12x96x4/6x16/column/unroll64/tail8"
    assert MicroKernel.from_key(mk.key) == mk
    space = MicroKernelSpace(adatune.target.create(HOST), kind="bmm_nt")
    tailed = next(k for k in space.kernels if k.tail)
    assert space.decode(tailed.to_json()) == tailed
    with pytest.raises(ValueError, match="x86 option"):
        MicroKernel("cuda", 32, 32, 8, 2, 2, tail=8)
    with pytest.raises(ValueError, match="vector's lanes"):
        MicroKernel("cpu", 12, 96, 4, 6, 16, tail=-8)
    dense = DynamicWorkload("t_dense", "dense", (16, 32), (1, 64))
    with pytest.raises(ValueError, match="only x86 bmm_nt"):
        schedule_microkernel(dense, MicroKernel("cpu", 6, 32, 4, 3, 2 * LANES, tail=LANES))
    with pytest.raises(ValueError, match="several whole vectors"):
        schedule_microkernel(SCORES, MicroKernel("cpu", 6, 16, 4, 3, 16, tail=16 if LANES != 16 else 32))
    with pytest.raises(ValueError, match="no crop to place"):
        schedule_microkernel(SCORES, MicroKernel("cpu", 6, 32, 4, 3, 2 * LANES, crop="tile", tail=LANES))


def test_the_bmm_nt_space_holds_a_tail_twin_of_each_multi_vector_kernel_that_crops_once() -> None:
    """Each T's vote decides between a kernel and its tail twin, so the space holds both; one-vector and narrower
    tiles (nothing to cut) and per-tile crops (no crop with a tail) have no twin; other kinds have none at all."""
    tgt = adatune.target.create(HOST)
    space = MicroKernelSpace(tgt, kind="bmm_nt")
    keys = {k.key for k in space.kernels}
    tails = [k for k in space.kernels if k.tail]
    assert tails and all(k.tail == LANES and k.nr > LANES and not k.crop for k in tails)
    assert all(dataclasses.replace(k, tail=0).key in keys for k in tails)
    wanted = [k for k in space.kernels if not k.tail and k.nr > LANES and k.nr % LANES == 0 and not k.crop]
    assert len(tails) == len(wanted)
    assert not any(k.tail for k in MicroKernelSpace(tgt, kind="dense").kernels)
    rng = np.random.default_rng(2)
    assert any(n.tail for n in space.mutate([wanted[0]] * 200, rng))  # the tail is one field a mutation flips


def test_a_tail_kernel_compiled_for_one_t_is_exact_from_one_register_tile_and_named_below() -> None:
    """Bound to one T (``MicroKernelTask``) a tail kernel builds and is exact at and above one register tile; below
    it, where its own loops are empty and TVM would fold a division by zero, the error says so."""
    from adatune.dietcode import MicroKernelTask

    mk = MicroKernel("cpu", 6, 2 * LANES, 4, 3, 2 * LANES, tail=LANES)
    rng = np.random.default_rng(3)
    for t in (mk.nr, mk.nr + 1, 2 * mk.nr + LANES - 1):
        lib = tvm.compile(MicroKernelTask(SCORES, t, HOST).scheduled_module(mk), target=HOST)
        a, b = SCORES.random_inputs(t, rng)
        c = tvm.runtime.tensor(np.full(SCORES.shapes(t)[2], np.nan, np.float32))
        lib["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
        np.testing.assert_allclose(c.numpy(), SCORES.reference(a, b), rtol=1e-4, atol=1e-4, err_msg=f"T={t}")
    with pytest.raises(ValueError, match="runs only its column tail"):
        MicroKernelTask(SCORES, mk.nr - 1, HOST).scheduled_module(mk)
