"""CPU targets: ``cpu_info`` reads the ISA from LLVM's features for the target's CPU (never from TVM's
vector width, which says 512 bits for AVX2-only CPUs), caches from the OS for this machine, and the
public target helpers keep working."""

from __future__ import annotations

import json
import os
import threading

import pytest
import tvm

from adatune import target

AVX2 = {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "znver3", "num-cores": 2}
ZEN4 = {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "znver4", "num-cores": 2}
SKX = {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "skylake-avx512", "num-cores": 4}


@pytest.mark.parametrize(
    "spec,isa,bits,regs",
    [
        (AVX2, "avx2", 256, 16),
        (ZEN4, "avx512", 512, 32),
        (SKX, "avx512", 512, 32),
        ({"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "haswell"}, "avx2", 256, 16),
        ({"kind": "llvm", "mtriple": "x86_64-linux-gnu"}, "sse2", 128, 16),  # no mcpu: generic x86-64 code
        ({"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "neoverse-n1"}, "neon", 128, 32),
    ],
)
def test_isa_comes_from_the_cpus_llvm_features(spec: dict, isa: str, bits: int, regs: int) -> None:
    info = target.cpu_info(spec)
    assert (info.isa, info.vector_bits, info.vector_registers) == (isa, bits, regs)
    assert info.fp32_lanes == bits // 32 and info.lanes("float16") == bits // 16 and info.lanes("float64") == bits // 64
    assert info.cores == spec.get("num-cores", info.cores) and info.cores >= 1
    assert 0 < info.l1d_bytes < info.l2_bytes


def test_vector_lanes_is_not_fooled_by_llvm_vector_width() -> None:
    """TVM's llvm_get_vector_width answers 512 for an AVX2 CPU; 16 lanes there made tiles spill."""
    assert target.vector_lanes(target.create(AVX2)) == 8
    assert target.vector_lanes(target.create(ZEN4)) == 16
    assert target.vector_lanes(target.create(ZEN4), "float64") == 8
    assert target.vector_lanes(target.cuda()) == 1


def test_mattr_switches_features_off() -> None:
    no512 = dict(ZEN4, mattr=["-avx512f"])
    assert target.cpu_info(no512).isa == "avx2"
    assert target.cpu_info(dict(AVX2, mattr=["-avx2", "-avx"])).isa == "sse4"


def test_host_reads_caches_and_model_from_the_os() -> None:
    info = target.cpu_info(target.host())
    assert info.from_host and info.mcpu == tvm.target.codegen.llvm_get_system_cpu()
    assert info.isa != "scalar" and info.model
    assert 4 << 10 <= info.l1d_bytes < info.l2_bytes and (info.l3_bytes == 0 or info.l3_bytes >= info.l2_bytes)
    assert target.cpu_info() == info  # None means the host
    other = target.cpu_info(dict(ZEN4) if info.mcpu != "znver4" else dict(SKX))
    assert not other.from_host and other.model == other.mcpu


def test_describe_host_is_json_and_names_what_benchmarks_need() -> None:
    d = target.describe_host()
    for key in (
        "model",
        "mcpu",
        "isa",
        "fp32_lanes",
        "vector_registers",
        "l1d_bytes",
        "l2_bytes",
        "l3_bytes",
        "cores",
        "llvm_version",
    ):
        assert key in d, key
    assert json.loads(json.dumps(d)) == d
    assert d["fp32_lanes"] == d["vector_bits"] // 32


def test_cpu_info_rejects_non_cpu_targets() -> None:
    with pytest.raises(ValueError, match="LLVM CPU target"):
        target.cpu_info(target.cuda())
    with pytest.raises(ValueError, match="kind"):
        target.cpu_info({"mcpu": "znver3"})


def test_public_helpers_still_work() -> None:
    h = target.host()
    assert h.kind.name == "llvm" and int(h.attrs["num-cores"]) >= 1
    assert target.same_target(h, target.to_json(h))
    assert not target.same_target(AVX2, ZEN4)
    assert target.create("llvm").attrs["mcpu"] == h.attrs["mcpu"]
    assert target.current().kind.name == "llvm"
    with target.create(ZEN4):
        assert target.current().attrs["mcpu"] == "znver4"
    with pytest.raises(ValueError):
        target.create("not a target")


def _worker_pool_threads(env: dict[str, str]) -> int:
    """TVM's thread pool size in a LocalRunner worker started by a fresh interpreter under ``env``."""
    import os
    import subprocess
    import sys

    code = (
        "import adatune, tvm; r = adatune.LocalRunner(); "
        "print(r.pool.submit(tvm.runtime.num_threads).result()); r.close()"
    )
    base = {k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def test_measurement_workers_time_kernels_on_every_usable_core_unless_the_user_chose() -> None:
    """TVM alone runs hardware_concurrency() / 2 threads on x86; a measurement worker sizes its pool to the
    physical cores it may use (what PyTorch uses, and what the tuned kernel gets when it is deployed through
    adatune), and leaves a user's TVM_NUM_THREADS alone."""
    assert _worker_pool_threads({}) == target._usable_cores() == int(target.host().attrs["num-cores"])
    assert _worker_pool_threads({"TVM_NUM_THREADS": "1"}) == 1


def test_tvm_thread_env_leaves_a_users_choice_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TVM_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert target.tvm_thread_env() == {"TVM_NUM_THREADS": str(target._usable_cores())}
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert target.tvm_thread_env() == {}


def test_one_blas_thread_limits_numpy_blas_inside_the_block_only() -> None:
    """numpy references computed next to timed kernels must not leave BLAS workers spinning on their cores."""
    import numpy as np
    from threadpoolctl import threadpool_info

    np.ones((64, 64)) @ np.ones((64, 64))  # make sure numpy's BLAS is loaded
    blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
    if not blas:
        pytest.skip("numpy has no BLAS that threadpoolctl can see")
    before = [p["num_threads"] for p in blas]
    with target.one_blas_thread():
        assert all(p["num_threads"] == 1 for p in threadpool_info() if p["user_api"] == "blas")
    assert [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"] == before


needs_two_cpus = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to place threads"
)


@needs_two_cpus
def test_tvm_main_thread_keeps_the_caller_off_cpus_other_threads_are_pinned_to() -> None:
    """A thread pinned to one CPU (as TVM pins its pool workers): inside the block the caller may run on every
    other allowed CPU but not that one, and gets its affinity back after, also when the block raises."""
    allowed = os.sched_getaffinity(0)
    worker_cpu = max(allowed)
    already = target.cpus_pinned_by_other_threads()  # TVM's own worker, if an earlier test started its pool
    pinned, release = threading.Event(), threading.Event()

    def worker() -> None:
        os.sched_setaffinity(0, {worker_cpu})
        pinned.set()
        release.wait(10)

    t = threading.Thread(target=worker)
    t.start()
    try:
        pinned.wait(10)
        free = allowed - {worker_cpu} - already
        with target.tvm_main_thread():
            assert os.sched_getaffinity(0) == (free or allowed)  # no free CPU: the caller is left as it was
        assert os.sched_getaffinity(0) == allowed
        with pytest.raises(RuntimeError), target.tvm_main_thread():
            raise RuntimeError("a failing kernel")
        assert os.sched_getaffinity(0) == allowed
    finally:
        release.set()
        t.join()


@needs_two_cpus
def test_tvm_main_thread_leaves_the_caller_alone_when_every_cpu_is_taken() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    events = [threading.Event() for _ in allowed]
    release = threading.Event()

    def worker(cpu: int, ev: threading.Event) -> None:
        os.sched_setaffinity(0, {cpu})
        ev.set()
        release.wait(10)

    threads = [threading.Thread(target=worker, args=(c, e)) for c, e in zip(allowed, events)]
    for t in threads:
        t.start()
    try:
        for e in events:
            e.wait(10)
        with target.tvm_main_thread():
            assert os.sched_getaffinity(0) == set(allowed)
    finally:
        release.set()
        for t in threads:
            t.join()
