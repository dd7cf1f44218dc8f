"""DietCode's CUDA-only micro-kernel options without a GPU: split-K (the reduction in parts, summed by a second
kernel) and interleaved threads (a thread's outputs a thread-tile apart). Keys and records round-trip, the space
offers them where they apply, bad requests are named, and the exporter hands the GPU runner every launch of a
kernel with its grid per T and the workspace between them (nvcc builds them where installed). Their numerics are
checked on the GPU by the standalone runner's plan mode (``cupy_runner.py plan``) against PyTorch."""

from __future__ import annotations

import math
import os
import shutil
import subprocess

import numpy as np
import pytest
import tvm

import adatune
from adatune.dietcode import MicroKernel, MicroKernelSpace
from adatune.dietcode._cost import num_tiles
from adatune.dietcode._schedule import schedule_microkernel, split_k_error
from adatune.dietcode._space import DEFAULT_SPLIT_K
from adatune.dietcode._workloads import DynamicWorkload
from adatune.measure._worker import thread_bindings
from adatune.measure.device_limits import profile
from benchmarks.gpu.dietcode_export import export_workload, kernel_grid, kernel_launches, workspace_bytes

CUDA = tvm.target.Target({"kind": "cuda", "arch": "sm_90"})
DENSE = DynamicWorkload("d", "dense", (64, 96), (1, 40))
NT = DynamicWorkload("nt", "bmm_nt", (3, 64), (1, 40))
NN = DynamicWorkload("nn", "bmm_nn", (2, 48), (1, 40))


def test_keys_and_records_round_trip_with_the_cuda_options() -> None:
    mk = MicroKernel("cuda", 32, 64, 16, 4, 4, split_k=4, interleave=True)
    assert mk.key == "cuda:32x64x16/4x4/splitk4/interleave"
    assert MicroKernel.from_key(mk.key) == mk
    assert MicroKernel.from_key("cuda:32x64x16/4x4/splitk2").split_k == 2
    assert MicroKernel.from_key("cuda:32x64x16/4x4/interleave").interleave
    plain = MicroKernel("cuda", 32, 64, 16, 4, 4)
    assert "split_k" not in plain.to_json() and "interleave" not in plain.to_json()  # old records read alike
    space = MicroKernelSpace(CUDA, static_k=64, device_limits=profile("h200"), kind="dense", split_k=(1, 4),
                             interleave=(False, True))  # fmt: skip
    assert space.decode(space.kernels[-1].to_json()) == space.kernels[-1]
    with pytest.raises(ValueError, match="splits its reduction into one of"):
        MicroKernel("cuda", 32, 64, 16, 4, 4, split_k=3)
    with pytest.raises(ValueError, match="splits its reduction into one of"):
        MicroKernel("cuda", 32, 64, 16, 4, 4, split_k=64)
    with pytest.raises(ValueError, match="not a micro-kernel key"):
        MicroKernel.from_key("cuda:32x64x16/4x4/splitkx")


def test_the_space_offers_splits_of_whole_steps_and_interleaving_only_when_asked() -> None:
    h200 = profile("h200")
    base = MicroKernelSpace(CUDA, static_k=1024, device_limits=h200, kind="dense")  # default: every split
    assert {k.split_k for k in base.kernels} == set(DEFAULT_SPLIT_K) and not any(k.interleave for k in base.kernels)
    assert all(1024 % (k.split_k * k.kt) == 0 for k in base.kernels)
    unsplit = MicroKernelSpace(CUDA, static_k=1024, device_limits=h200, kind="dense", split_k=(1,))
    assert base.kernels[: unsplit.size] == unsplit.kernels  # the unsplit kernels first, in their order
    nn = MicroKernelSpace(CUDA, static_k=64, device_limits=h200, kind="bmm_nn")  # a reduction over T never splits
    assert {k.split_k for k in nn.kernels} == {1}
    space = MicroKernelSpace(CUDA, static_k=64, device_limits=h200, kind="dense", split_k=(1, 2, 8),
                             interleave=(False, True))  # fmt: skip
    assert {k.split_k for k in space.kernels} == {1, 2, 8}
    assert all(64 % (k.split_k * k.kt) == 0 for k in space.kernels)  # each part whole kt-steps
    assert len([k for k in space.kernels if k.interleave]) == space.size // 2
    rng = np.random.default_rng(0)
    kernels = space.random_candidates(rng, 256)
    moved = set()
    for kernel, mutant in zip(kernels, space.mutate(kernels, rng)):  # one field at a time, the new ones too
        changed = [
            f
            for f in ("mt", "nt", "kt", "mr", "nr", "split_k", "interleave")
            if getattr(kernel, f) != getattr(mutant, f)
        ]
        assert mutant.key in space and len(changed) == 1
        moved |= set(changed)
    assert {"split_k", "interleave"} <= moved
    feats = space.featurize(kernels)
    assert feats.shape == (256, len(space.FEATURE_NAMES))
    names = list(space.FEATURE_NAMES)
    assert np.array_equal(feats[:, names.index("log2_split_k")], [np.log2(k.split_k) for k in kernels])
    with pytest.raises(ValueError, match="fixed reduction depth"):
        MicroKernelSpace(CUDA, static_k=64, device_limits=h200, kind="bmm_nn", split_k=(1, 2))
    with pytest.raises(ValueError, match="split_k takes parts from"):
        MicroKernelSpace(CUDA, static_k=64, device_limits=h200, kind="dense", split_k=(1, 3))
    host = adatune.target.host()
    with pytest.raises(ValueError, match="CUDA options; an x86 space"):
        MicroKernelSpace(host, static_k=64, kind="dense", split_k=(1, 2))
    with pytest.raises(ValueError, match="CUDA options; an x86 space"):
        MicroKernelSpace(host, static_k=64, kind="dense", interleave=(False, True))


def test_split_k_and_interleaving_are_refused_where_they_cannot_apply() -> None:
    assert "reduces over T" in split_k_error(NN, MicroKernel.from_key("cuda:16x32x8/2x2/splitk2"))
    assert "whole 16-steps" in split_k_error(DENSE, MicroKernel.from_key("cuda:16x32x16/2x2/splitk8"))
    assert split_k_error(DENSE, MicroKernel.from_key("cuda:16x32x8/2x2/splitk8")) == ""
    with pytest.raises(ValueError, match="reduces over T"):
        schedule_microkernel(NN, MicroKernel.from_key("cuda:16x32x8/2x2/splitk2"))
    with pytest.raises(ValueError, match="split-K is a CUDA option"):
        schedule_microkernel(DENSE, MicroKernel("cpu", 8, 16, 4, 4, 16, split_k=2))
    with pytest.raises(ValueError, match="interleaved threads are a CUDA option"):
        schedule_microkernel(DENSE, MicroKernel("cpu", 8, 16, 4, 4, 16, interleave=True))


@pytest.mark.parametrize(("wl", "parts"), [(DENSE, 4), (NT, 2)], ids=["dense", "nt"])
def test_a_split_k_kernel_is_its_parts_then_their_sum_with_a_grid_per_t(wl: DynamicWorkload, parts: int) -> None:
    mk = MicroKernel("cuda", 8, 32, 8, 2, 2, split_k=parts)
    sch = schedule_microkernel(wl, mk)
    ts = [1, 7, 8, 33, 40]
    (grid1, block1), (grid2, block2) = kernel_launches(sch, ts)
    assert block1 == [mk.nt // mk.nr, mk.mt // mk.mr, 1] and block2 == [128, 1, 1]
    for t, g1, g2 in zip(ts, grid1, grid2):
        batch, rows, cols, _ = wl.gemm_extents(t)
        tiles = batch * math.ceil(rows / mk.mt) * math.ceil(cols / mk.nt)
        assert g1 == parts * tiles == num_tiles(wl, mk, t)  # each output tile once per part, as f_occ counts
        padded = batch * math.ceil(rows / mk.mt) * mk.mt * math.ceil(cols / mk.nt) * mk.nt
        assert g2 == math.ceil(padded / 128)  # one thread per padded output
    (nbytes,) = workspace_bytes(sch, 40).values()
    _, rows, cols, _ = wl.gemm_extents(40)
    assert nbytes == 4 * parts * wl.gemm_extents(40)[0] * math.ceil(rows / 8) * 8 * math.ceil(cols / 32) * 32
    with pytest.raises(ValueError, match="launches 2 kernels"):
        kernel_grid(sch, ts)


def test_interleaved_threads_are_virtual_threads_inside_the_same_launch() -> None:
    mk = MicroKernel("cuda", 16, 32, 8, 2, 4, interleave=True)
    sch = schedule_microkernel(DENSE, mk)
    tags = {tag for tag, _ in thread_bindings(sch.mod)}
    assert {"vthread.x", "vthread.y"} <= tags
    grid, block = kernel_grid(sch, [1, 16, 17])
    assert block == [mk.nt // mk.nr, mk.mt // mk.mr, 1] and grid == [3, 3, 6]  # as the blocked kernel's


def test_the_exporter_hands_each_launch_and_its_workspace_to_the_runner(tmp_path: os.PathLike) -> None:
    keys = ["cuda:8x32x8/2x2", "cuda:8x32x8/2x2/splitk4", "cuda:8x32x8/2x2/splitk2/interleave"]
    data = export_workload(DENSE, CUDA, "h200", per_module=8, keys=keys, split_k=(1, 2, 4), interleave=(False, True))
    plain, split, both = data["kernels"]
    assert [len(k["launches"]) for k in data["kernels"]] == [1, 2, 2]
    assert plain["workspace"] == 0 and split["workspace"] > 0
    part, total = split["launches"]
    assert part["params"] == ["A_ptr", "B_ptr", "C_pad_rf_ptr", "T"] and total["params"][0] == "C_ptr"
    assert (part["name"], total["name"]) == (split["name"], split["name"] + "_1")
    src = data["modules"][0]
    assert "main_kernel" not in src
    for k in data["kernels"]:
        for launch in k["launches"]:
            assert src.count(f" {launch['name']}(") == 2  # declared and defined
    assert both["launches"][0]["grid"] == [2 * g for g in plain["grid"]]
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    path = os.path.join(tmp_path, "m.cu")
    with open(path, "w") as f:
        f.write(src)
    subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-o", path + ".cubin", path], check=True, capture_output=True)
