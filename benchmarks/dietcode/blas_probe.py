"""``python -m benchmarks.dietcode.blas_probe``: why numpy references run on one BLAS thread in timing processes.

Times one DietCode micro-kernel (QKV, ``cpu:48x64x2/6x16``) at T = 1, 36, 128, 128, five ways in turn: alone;
right after a numpy matmul on numpy's default BLAS threads; after one on a single BLAS thread (threadpoolctl);
again after the default; alone again. A multi-threaded OpenBLAS call leaves its workers spinning after it
returns, so on a small machine the kernel timed next shares the cores with them. Prints median ms per T.
"""

from __future__ import annotations

import numpy as np
import tvm

import adatune
from adatune.dietcode import MicroKernel, bert_workloads, schedule_microkernel
from adatune.target import one_blas_thread, size_tvm_thread_pool


def main() -> None:
    size_tvm_thread_pool()  # kernels timed in this process get every core, as in adatune's workers
    wl = bert_workloads()["qkv"]
    target = adatune.target.host()
    mk = MicroKernel("cpu", 48, 64, 2, 6, 16)
    with target:
        lib = tvm.compile(schedule_microkernel(wl, mk).mod, target=target)
    dev = tvm.cpu(0)

    def run(t: int, with_ref: bool, one_thread: bool) -> float:
        a, b = wl.random_inputs(t, np.random.default_rng(t))
        if with_ref and one_thread:
            with one_blas_thread():
                wl.reference(a, b)
        elif with_ref:
            wl.reference(a, b)
        args = [tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev)]
        args.append(tvm.runtime.tensor(np.zeros(wl.shapes(t)[2], np.float32), dev))
        # a fresh evaluator per call: TVM's keeps the number of runs it grew to at the previous (smaller) T
        timer = lib.mod.time_evaluator("main", dev, number=1, repeat=3, min_repeat_ms=10)
        return float(np.median(timer(*args, t).results)) * 1e3

    modes = [("alone", False, False), ("after numpy", True, False), ("after numpy, 1 BLAS thread", True, True)]
    modes += [("after numpy", True, False), ("alone", False, False)]
    for label, with_ref, one in modes:
        cells = "  ".join(f"T={t}: {run(t, with_ref, one):.3f}" for t in (1, 36, 128, 128))
        print(f"{label:28s} {cells} ms", flush=True)


if __name__ == "__main__":
    main()
