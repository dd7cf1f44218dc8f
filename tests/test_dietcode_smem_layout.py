"""DietCode's CUDA shared-memory layouts without a GPU: bmm NT's B tile, read along its reduction, stored k-major,
optionally with padded rows. Keys and records round-trip, the space offers the layouts when asked and only for
bmm NT, bad requests are named, and the kernels' source stages the transposed (and padded) tile and reads a
k-slice at neighbouring words. Their numerics are checked on the GPU by the standalone runner's plan mode
(``adatune/cuda_export/cupy_runner.py plan``) against PyTorch."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tvm

import adatune
from adatune.dietcode import MicroKernel, MicroKernelSpace
from adatune.dietcode._schedule import schedule_microkernel
from adatune.dietcode._space import DEFAULT_SMEM, SMEM_LAYOUTS
from adatune.dietcode._task import microkernel_space
from adatune.dietcode._workloads import DynamicWorkload
from adatune.measure.device_limits import profile
from benchmarks.gpu.dietcode_export import export_workload
from benchmarks.gpu.dietcode_report import tuners_kernels

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


def test_the_space_offers_the_layouts_for_bmm_nt_only_and_mutation_moves_along_them() -> None:
    h200 = profile("h200")
    plain = MicroKernelSpace(CUDA, static_k=64, device_limits=h200, kind="bmm_nt", split_k=(1,), smem=("",))
    default = MicroKernelSpace(CUDA, static_k=64, device_limits=h200, kind="bmm_nt", split_k=(1,))
    assert {k.smem for k in plain.kernels} == {""} and {k.smem for k in default.kernels} == set(DEFAULT_SMEM)
    assert {k.smem for k in MicroKernelSpace(CUDA, static_k=64, device_limits=h200, kind="dense").kernels} == {""}
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
        MicroKernelSpace(CUDA, static_k=64, device_limits=h200, kind="bmm_nt", smem=("", "rowmajor"))
    with pytest.raises(ValueError, match="apply to bmm_nt only"):
        MicroKernelSpace(CUDA, static_k=64, device_limits=h200, kind="dense", smem=("", "kmajor"))
    with pytest.raises(ValueError, match="k-major as read; smem='kmajor' applies to bmm_nt only"):
        schedule_microkernel(NN, MicroKernel.from_key("cuda:16x32x8/2x2/kmajor"))
    assert {k.smem for k in microkernel_space(DENSE, CUDA, (1,), h200, smem=SMEM_LAYOUTS).kernels} == {""}
    with pytest.raises(ValueError, match="CUDA options; an x86 space"):
        MicroKernelSpace(adatune.target.host(), static_k=64, kind="dense", smem=("", "kmajor"))


def _shared(source: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"__shared__ alignas\(\d+\) float (\w+)_shared_ptr\[(\d+)\]", source)}


def _reads(source: str, buffer: str) -> list[str]:
    """The index expressions of the inner product's reads of a shared buffer."""
    return re.findall(rf"\* {buffer}_shared_ptr\[([^\]]+)\]\)", source) + re.findall(
        rf"\({buffer}_shared_ptr\[([^\]]+)\] \*", source
    )


def test_k_major_b_puts_a_warps_k_slice_on_neighbouring_words() -> None:
    keys = ["cuda:32x64x8/2x4", "cuda:32x64x8/2x4/kmajor", "cuda:32x64x8/2x4/kmajor-pad"]
    data = export_workload(NT, CUDA, "h200", per_module=1, keys=keys, smem=SMEM_LAYOUTS)
    assert all("error" not in k for k in data["kernels"])
    plain, kmajor, padded = (_shared(src) for src in data["modules"])
    assert plain == kmajor == {"A_pad": 8 * 32, "B_pad": 8 * 64}  # kt = 8 by mt = 32, nt = 64: transposing keeps size
    assert padded == {"A_pad": 8 * 32, "B_pad": 8 * (64 + 4)}  # B's k-rows padded to 4 words past a multiple of 16
    as_read, transposed = _reads(data["modules"][0], "B_pad"), _reads(data["modules"][1], "B_pad")
    assert as_read and all("threadIdx.x) * 32)" in r for r in as_read)  # a thread's next column nr * kt words on
    assert transposed and all("threadIdx.x) * 4)" in r for r in transposed)  # nr words on: neighbours
    assert _reads(data["modules"][0], "A_pad") == _reads(data["modules"][1], "A_pad")  # A as it was


def test_the_tuner_replay_drops_the_interleaved_kernels_its_space_never_holds() -> None:
    keys = ["cuda:32x64x8/2x4", "cuda:32x64x8/2x4/interleave/kmajor", "cuda:32x64x8/2x4/kmajor"]
    ts = [1, 2, 3]
    d = {
        "keys": keys,
        "p1": np.arange(18.0).reshape(3, 2, 3),
        "p1_err": np.zeros((3, 2), dtype=np.int8),
        "p1_med": np.arange(6.0).reshape(3, 2),
        "p2_keys": [keys[1], keys[2]],
        "p2": np.ones((2, 3, 3)),
        "p2_err": np.zeros((2, 3), dtype=np.int8),
        "p2_med": np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]),
        "ts": ts,
    }
    out = tuners_kernels(d)
    assert out["keys"] == [keys[0], keys[2]] and out["p2_keys"] == [keys[2]]
    assert np.array_equal(out["p1_med"], [[0.0, 1.0], [4.0, 5.0]]) and out["p1"].shape == (2, 2, 3)
    assert np.array_equal(out["p2_med"], [[2.0, 2.0, 2.0]]) and out["p2_err"].shape == (1, 3)
    as_read = tuners_kernels(d, smem=("",))
    assert as_read["keys"] == [keys[0]] and as_read["p2_keys"] == [] and as_read["p2_med"] is None
