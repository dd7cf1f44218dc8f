"""Reference throughput: PyTorch (oneDNN/MKL) and numpy BLAS on a workload's exact shape, and a tuned
adatune config measured in the same process, so that "x% of PyTorch" compares like with like.

    python -m benchmarks.reference dense-1024 conv2d-resnet18-L6 --log tune.jsonl --rounds 5

Each round times PyTorch, numpy (dense and batch_matmul only) and the best logged config once, one after
another; rounds interleave so that a noisy neighbour on a shared machine hurts every contender alike.
Reported numbers are medians over rounds (each round itself the median of ``repeats`` calls), plus the
best round.

On a machine shared with other jobs, wall-clock timings of multi-threaded kernels mostly measure the
neighbours (an OpenMP barrier waits for a descheduled thread). ``--threads 1 --cpu-time`` compares
single-threaded kernels by the CPU time of the calling thread instead, which a co-runner barely affects.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

from adatune.reference import _numpy_callable, measure_reference, physical_cores, time_callable

__all__ = ["physical_cores", "time_callable", "measure_reference", "measure_config", "best_config_index", "compare"]


def best_config_index(workload: Any, log: str, target: Any = None) -> int:
    """Index of the fastest valid record of the workload's task (for ``target``, default this CPU)."""
    from adatune import load_from_file, workloads
    from adatune.dispatch import ApplyHistoryBest

    w = workloads.get(workload)
    task = w.create_task(target)
    rec = ApplyHistoryBest(list(load_from_file(log))).best_record(task.target, (task.name, *task.args))
    if rec is None:
        raise LookupError(f"no valid record for {w.name} ({task.name}{task.args}) in {log}")
    return rec.config_index


class _Compiled:
    """One config of a workload's task, compiled in this process with its random input tensors."""

    def __init__(self, workload: Any, index: int, target: Any = None):
        import tvm

        from adatune import workloads

        self.workload = workloads.get(workload)
        task = self.workload.create_task(target)
        space: Any = task.space
        self.lib = tvm.tirx.build(task.scheduled_module(space.get(index)), task.target)
        dev = tvm.cpu()
        rng = np.random.default_rng(0)
        self.args = [tvm.runtime.tensor(rng.uniform(-1, 1, s.shape).astype(s.dtype), dev) for s in task.arg_specs]
        self.func = self.lib[self.lib.entry_name]

    def __call__(self) -> None:
        self.func(*self.args)


def measure_config(workload: Any, index: int, repeats: int = 30, target: Any = None) -> float:
    """GFLOPS of config ``index`` of the workload's CPU task, built and timed in this process."""
    comp = _Compiled(workload, index, target)
    return comp.workload.flop / time_callable(comp, repeats) / 1e9


def compare(
    workload: Any,
    index: int | None = None,
    rounds: int = 5,
    repeats: int = 20,
    threads: int | None = None,
    cpu_time: bool = False,
) -> dict[str, dict]:
    """Interleaved rounds of PyTorch, numpy and (when ``index`` is given) adatune's config:
    ``{contender: {"median": GFLOPS, "best": GFLOPS}}``. ``threads`` defaults to the physical cores;
    for adatune it only applies if TVM's thread pool has not started yet (``TVM_NUM_THREADS``).
    ``cpu_time`` times by the calling thread's CPU time and needs ``threads=1``."""
    import os

    import torch
    from threadpoolctl import threadpool_limits

    from adatune import workloads

    threads = threads or physical_cores()
    if cpu_time and threads != 1:
        raise ValueError("CPU-time measurements need threads=1 (other threads' time is not counted)")
    os.environ["TVM_NUM_THREADS"] = str(threads)
    threadpool_limits(threads)  # numpy's BLAS
    torch.set_num_threads(threads)
    clock = time.thread_time if cpu_time else time.perf_counter
    w = workloads.get(workload)
    fns = {"torch": workloads.torch_reference(w)}
    np_fn = _numpy_callable(w)
    if np_fn is not None:
        fns["numpy"] = np_fn
    if index is not None:
        fns["adatune"] = _Compiled(w, index)
    runs: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            runs[name].append(w.flop / time_callable(fn, repeats, clock=clock) / 1e9)
    return {k: {"median": statistics.median(v), "best": max(v)} for k, v in runs.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workloads", nargs="+", help="names from adatune.workloads.list_workloads()")
    parser.add_argument("--log", help="adatune records: measure each workload's best config too")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None, help="default: physical cores")
    parser.add_argument("--cpu-time", action="store_true", help="time by thread CPU time (needs --threads 1)")
    opts = parser.parse_args(argv)
    print(f"{'workload':24s} {'contender':8s} {'median':>8s} {'best':>8s}  GFLOPS  (x of torch)")
    for name in opts.workloads:
        index = best_config_index(name, opts.log) if opts.log else None
        res = compare(name, index, opts.rounds, opts.repeats, opts.threads, opts.cpu_time)
        for who, r in res.items():
            rel = r["median"] / res["torch"]["median"]
            print(f"{name:24s} {who:8s} {r['median']:8.1f} {r['best']:8.1f}  ({rel:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
