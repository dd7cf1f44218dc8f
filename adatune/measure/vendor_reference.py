"""Reference throughput of the same operator in PyTorch (oneDNN/MKL) and numpy (BLAS), so a tuned
kernel is judged against what users would otherwise run. ``adatune tune --reference`` prints it."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import psutil

__all__ = ["physical_cores", "time_callable", "measure_reference"]


def physical_cores() -> int:
    return psutil.cpu_count(logical=False) or psutil.cpu_count() or 1


def time_callable(
    fn: Callable[[], Any], repeats: int = 30, warmup_s: float = 0.2, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Median seconds per call, after at least 3 calls and ``warmup_s`` of warm-up (thread pools
    spin up, caches and page tables fill, oneDNN builds its kernels on the first call). ``clock`` may
    be ``time.thread_time`` for single-threaded CPU-time measurements."""
    t_end = time.perf_counter() + warmup_s
    for k in range(1_000_000):
        fn()
        if k >= 2 and time.perf_counter() > t_end:
            break
    times = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times)


def _numpy_callable(workload: Any, seed: int = 0) -> Callable[[], Any] | None:
    rng = np.random.default_rng(seed)
    rand = lambda *s: np.asarray(rng.uniform(-1, 1, size=s), dtype="float32")  # noqa: E731
    if workload.op == "dense":
        n, k, m = workload.args[:3]
        a, b = rand(n, k), rand(k, m)
        return lambda: a @ b
    if workload.op == "batch_matmul":
        bsz, m, n, k, layout = workload.args[:5]
        a = rand(bsz, m, k)
        b = rand(bsz, n, k).transpose(0, 2, 1) if layout == "NT" else rand(bsz, k, n)
        return lambda: np.matmul(a, b)
    return None  # numpy has no fast convolution


def measure_reference(workload: Any, repeats: int = 30) -> dict[str, float]:
    """GFLOPS of PyTorch (``torch.set_num_threads(physical cores)``) and, for matrix products, numpy."""
    import torch

    from adatune.templates import workloads

    w = workloads.get(workload)
    torch.set_num_threads(physical_cores())
    out = {"torch": w.flop / time_callable(workloads.torch_reference(w), repeats) / 1e9}
    np_fn = _numpy_callable(w)
    if np_fn is not None:
        out["numpy"] = w.flop / time_callable(np_fn, repeats) / 1e9
    return out
