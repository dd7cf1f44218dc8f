"""DietCode's CUDA shared-memory layouts without a GPU: a tile whose reduction axis is innermost (A always, B of
bmm NT) stored k-major, optionally with padded rows. Keys and records round-trip, the space offers the layouts
when asked, bad requests are named, and the kernels' source stages the transposed (and padded) tiles and reads a
k-slice at neighbouring words. Their numerics are checked on the GPU by ``benchmarks/gpu/dietcode_runner.py``
against PyTorch."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tvm

import adatune
from adatune.devices import profile
from adatune.dietcode import MicroKernel, MicroKernelSpace
from adatune.dietcode._space import SMEM_LAYOUTS
from adatune.dietcode._workloads import DynamicWorkload
from benchmarks.gpu.dietcode_export import export_workload

CUDA = tvm.target.Target({"kind": "cuda", "arch": "sm_90"})
DENSE = DynamicWorkload("d", "dense", (64, 96), (1, 40))
NT = DynamicWorkload("nt", "bmm_nt", (3, 64), (1, 40))
NN = DynamicWorkload("nn", "bmm_nn", (2, 48), (1, 40))


def test_keys_and_records_round_trip_with_the_layouts() -> None:
    mk = MicroKernel("cuda", 32, 64, 16, 4, 4, split_k=4, interleave=True, smem="kmajor-pad")
    assert mk.key == "cuda:32x64x16/4x4/splitk4/interleave/kmajor-pad"
    assert MicroKernel.from_key(mk.key) == mk
    assert MicroKernel.from_key("cuda:32x64x16/4x4/kmajor").smem == "kmajor"
    assert MicroKernel.from_key("cuda:32x64x16/4x4/splitk2/kmajor") == MicroKernel(
        "cuda", 32, 64, 16, 4, 4, split_k=2, smem="kmajor"
    )
    assert "smem" not in MicroKernel("cuda", 32, 64, 16, 4, 4).to_json()  # old records read alike
    space = MicroKernelSpace(CUDA, static_k=64, device_limits=profile("h200"), kind="bmm_nt", split_k=(1, 2),
                             smem=SMEM_LAYOUTS)  # fmt: skip
    assert space.decode(space.kernels[-1].to_json()) == space.kernels[-1]
    assert space.kernels[-1].smem == "kmajor-pad"
    with pytest.raises(ValueError, match="lays out its shared tiles as one of"):
        MicroKernel("cuda", 32, 64, 16, 4, 4, smem="transposed")


def test_the_space_offers_the_layouts_only_when_asked_and_mutation_moves_along_them() -> None:
    h200 = profile("h200")
    plain = MicroKernelSpace(CUDA, static_k=64, device_limits=h200, kind="bmm_nt", split_k=(1,))
    assert {k.smem for k in plain.kernels} == {""}
    both = MicroKernelSpace(CUDA, static_k=64, device_limits=h200, kind="bmm_nt", split_k=(1,), smem=("", "kmajor"))
    assert both.size == 2 * plain.size and both.kernels[: plain.size] == plain.kernels  # as read first, in order
    rng = np.random.default_rng(0)
    kernels = both.random_candidates(rng, 256)
    fields = ("mt", "nt", "kt", "mr", "nr", "smem")
    moved = set()
    for kernel, mutant in zip(kernels, both.mutate(kernels, rng)):
        changed = [f for f in fields if getattr(kernel, f) != getattr(mutant, f)]
        assert mutant.key in both and len(changed) == 1
        moved |= set(changed)
    assert "smem" in moved
    feats = both.featurize(kernels)
    names = list(both.FEATURE_NAMES)
    assert np.array_equal(feats[:, names.index("smem_kmajor")], [float(k.smem == "kmajor") for k in kernels])
    with pytest.raises(ValueError, match="smem takes shared-memory layouts from"):
        MicroKernelSpace(CUDA, static_k=64, device_limits=h200, kind="dense", smem=("", "rowmajor"))
    with pytest.raises(ValueError, match="CUDA options; an x86 space"):
        MicroKernelSpace(adatune.target.host(), static_k=64, kind="dense", smem=("", "kmajor"))


def _shared(source: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"__shared__ alignas\(\d+\) float (\w+)_shared_ptr\[(\d+)\]", source)}


def _reads(source: str, buffer: str) -> list[str]:
    """The index expressions of the inner product's reads of a shared buffer."""
    return re.findall(rf"\* {buffer}_shared_ptr\[([^\]]+)\]\)", source) + re.findall(
        rf"\({buffer}_shared_ptr\[([^\]]+)\] \*", source
    )


@pytest.mark.parametrize(
    ("wl", "transposed"),
    [(NT, {"A_pad", "B_pad"}), (DENSE, {"A_pad"}), (NN, {"A_pad"})],  # B of dense and bmm NN is k-major already
)
def test_k_major_tiles_put_a_warps_k_slice_on_neighbouring_words(wl: DynamicWorkload, transposed: set[str]) -> None:
    keys = ["cuda:32x64x8/2x4", "cuda:32x64x8/2x4/kmajor", "cuda:32x64x8/2x4/kmajor-pad"]
    data = export_workload(wl, CUDA, "h200", per_module=1, keys=keys, smem=SMEM_LAYOUTS)
    assert all("error" not in k for k in data["kernels"])
    plain, kmajor, padded = (_shared(src) for src in data["modules"])
    rows = {"A": 32, "B": 64}  # the tile's rows of each operand (mt, nt), kt = 8
    for buf, size in plain.items():
        assert kmajor[buf] == size == 8 * rows[buf[0]]  # transposing keeps the tile's size
        if buf in transposed:  # each k-row padded to 4 words past a multiple of 16
            assert padded[buf] == 8 * (rows[buf[0]] + 4)
            step = {"A": "threadIdx.y) * 2)", "B": "threadIdx.x) * 4)"}[buf[0]]  # mr, nr words a thread on
            assert _reads(data["modules"][1], buf) and all(step in r for r in _reads(data["modules"][1], buf))
            as_read = _reads(data["modules"][0], buf)  # B of bmm NT: a thread's next column nr * kt = 32 words
            assert any("threadIdx.x) * 32)" in r for r in as_read) == (buf[0] == "B")  # on, one bank per warp
        else:
            assert padded[buf] == size
