"""Where the calling thread runs decides whether a TVM kernel gets both cores: the gate's probe and a model
timed with the caller left free, pinned to the CPU TVM's pool worker holds, and kept off it by
``adatune.target.tvm_main_thread``, with onnxruntime as the control.

TVM 0.27 pins each pool worker to one CPU and runs the first share of every parallel loop on the calling thread,
which it leaves free. This benchmark times, in turns every round, the noise gate's two-thread peak-FMA probe and
(with ``--model``) a built model, under three placements of the caller, and onnxruntime's MatMul of the probe's
size on two threads (its threads are not pinned) and two one-thread numpy matmuls pinned one to each CPU at the
same time; then the share of each series' rounds that ran in the fast state (within 10% of the fastest reading of
its kind).

    python -m benchmarks.thread_placement --rounds 40 --out benchmarks/results/thread_placement
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import adatune  # noqa: E402
from adatune.target import tvm_main_thread  # noqa: E402

from ._common import load_now, run_meta, settled, write_summary  # noqa: E402
from .noise_gate import PROBE_GEMM, NoiseGate, Timer, probe_timer  # noqa: E402

PLACEMENTS = ("free", "on_worker_cpu", "tvm_main_thread")
FAST_TOLERANCE = 0.10


@contextlib.contextmanager
def placed(placement: str, worker_cpus: set[int]) -> Iterator[None]:
    """The calling thread as ``placement`` says, inside the block: left to the scheduler (with every allowed CPU),
    pinned to a CPU TVM's worker holds, or kept off the workers' CPUs by ``tvm_main_thread``."""
    before = os.sched_getaffinity(0)
    try:
        if placement == "on_worker_cpu":
            os.sched_setaffinity(0, {min(worker_cpus)})
            yield
        elif placement == "tvm_main_thread":
            with tvm_main_thread():
                yield
        else:
            yield
    finally:
        os.sched_setaffinity(0, before)


def _ort_gemm() -> Timer | None:
    try:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    from adatune.reference import time_callable

    m, k, n = PROBE_GEMM
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["C"])],
        "gemm",
        [
            helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k]),
            helper.make_tensor_value_info("B", TensorProto.FLOAT, [k, n]),
        ],
        [helper.make_tensor_value_info("C", TensorProto.FLOAT, [m, n])],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gemm.onnx")
        onnx.save(proto, path)
        with open(path, "rb") as f:
            blob = f.read()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    session = ort.InferenceSession(blob, opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feed = {"A": rng.uniform(-1, 1, (m, k)).astype("float32"), "B": rng.uniform(-1, 1, (k, n)).astype("float32")}
    return lambda: time_callable(lambda: session.run(None, feed), 20, 0.05)


def _model_timer(run_dir: str) -> Timer:
    """A ``benchmarks.models`` run's tuned model, built from its log; one call: median ms of 10 inferences."""
    import warnings

    import tvm

    import adatune.models as am
    from adatune.reference import time_callable

    from .models.run_ab import log_target, run_config, tuned_model

    name, _, log, config = run_config(run_dir)
    model = tuned_model(name, config, log)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = am.build(model, log, log_target(log))
    args = [tvm.runtime.tensor(a, tvm.cpu()) for a in model.random_inputs(0)]
    vm_main = compiled._vm["main"]  # the VM's function itself: the placement is set around it here
    return lambda: time_callable(lambda: vm_main(*args), 10, 0.1)


def _concurrent_matmuls() -> Timer:
    """Two threads, each pinned to one CPU, each timing one-thread numpy matmuls (384^2) at the same time: the
    slower one's median seconds per matmul. If the two vCPUs shared one core, or one were slow, this would read
    slow too; it does not share data between the CPUs, as TVM's parallel loops do."""
    import threading

    from adatune.target import one_blas_thread

    a = np.random.default_rng(0).uniform(-1, 1, (384, 384)).astype("float32")
    cpus = sorted(os.sched_getaffinity(0))[:2]

    def run() -> float:
        out: dict[int, float] = {}

        def loop(cpu: int) -> None:
            os.sched_setaffinity(0, {cpu})
            times = []
            for _ in range(20):
                t = time.perf_counter()
                a @ a
                times.append(time.perf_counter() - t)
            out[cpu] = statistics.median(times)

        with one_blas_thread():
            threads = [threading.Thread(target=loop, args=(c,)) for c in cpus]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        return max(out.values())

    return run


def measure(rounds: int, model_dir: str | None) -> dict[str, list[float]]:
    adatune.target.size_tvm_thread_pool()
    probe = probe_timer(place_caller=False)  # the placement is this benchmark's variable
    timers: dict[str, tuple[str, Timer]] = {}
    for p in PLACEMENTS:
        timers[f"probe/{p}"] = (p, probe)
    if model_dir:
        model = _model_timer(model_dir)
        for p in PLACEMENTS:
            timers[f"model/{p}"] = (p, model)
    ort_gemm = _ort_gemm()
    for _ in range(5):
        probe()  # the pool starts: its worker is pinned from here on
    workers = adatune.target.cpus_pinned_by_other_threads()  # TVM's pool worker
    if not workers:
        raise RuntimeError("no TVM pool worker is pinned to a CPU here (one thread, or TVM_BIND_THREADS=0)")
    concurrent = _concurrent_matmuls()
    out: dict[str, list[float]] = {k: [] for k in timers}
    out["numpy_1thread_per_cpu_concurrent"] = []
    if ort_gemm is not None:
        out["onnxruntime_gemm"] = []
    names = list(timers)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            placement, timer = timers[name]
            with placed(placement, workers):
                out[name].append(statistics.median(timer() for _ in range(3)))
        out["numpy_1thread_per_cpu_concurrent"].append(concurrent())
        if ort_gemm is not None:
            out["onnxruntime_gemm"].append(settled(ort_gemm()))
    return out


def summarize(times: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """Per series: median, the fastest reading, and the share of rounds within 10% of the fastest reading of its
    kind (probe, model, onnxruntime) over every placement."""
    best = {
        kind: min(min(v) for k, v in times.items() if k.split("/")[0] == kind)
        for kind in {k.split("/")[0] for k in times}
    }
    out = {}
    for k, v in times.items():
        ref = best[k.split("/")[0]]
        out[k] = {
            "median_s": statistics.median(v),
            "min_s": min(v),
            "fast_share": sum(t <= ref * (1 + FAST_TOLERANCE) for t in v) / len(v),
        }
    return out


def _plot(out: str, times: dict[str, list[float]]) -> str:
    kinds = sorted({k.split("/")[0] for k in times})
    fig, axes = plt.subplots(len(kinds), 1, figsize=(8, 2.6 * len(kinds)), sharex=True, squeeze=False)
    for ax, kind in zip(axes[:, 0], kinds):
        for j, (k, v) in enumerate((k, v) for k, v in times.items() if k.split("/")[0] == kind):
            ax.plot(range(len(v)), [t * 1e3 for t in v], ".-", lw=0.6, color=f"C{j}", label=k)
        ax.set_ylabel("ms")
        ax.legend(fontsize=7)
    axes[-1, 0].set_xlabel("round")
    path = os.path.join(out, "thread_placement.png")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.thread_placement", description=__doc__)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--model", help="a benchmarks.models output dir whose tuned model to time as well")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    t0, started, load_before = time.perf_counter(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), load_now()
    gate = NoiseGate()
    gate.probe("before")
    times = measure(args.rounds, args.model)
    gate.probe("after")
    table = summarize(times)
    meta = run_meta("benchmarks.thread_placement", argv, started, t0, load_before) | {
        "host": adatune.target.describe_host(),
        "noise_gate": gate.to_json(),
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "rounds_s": times, "summary": table}, f, indent=1)
    host = meta["host"]
    lines = [
        "# The calling thread's placement and TVM's two-thread kernels",
        "",
        f"Command: `{meta['command']}`; started {started}, wall {meta['wall_s']:.0f} s.  ",
        f"Host: {host['model']} ({host['isa']}, {host['cores']} cores).  ",
        gate.sentence() + " (the gate's own probe runs under `tvm_main_thread`)",
        "",
        f"Every round: each series once (median of 3 calls), in turns; fast = within {FAST_TOLERANCE:.0%} of the "
        "fastest reading of its kind.",
        "",
        "| series | median (ms) | fastest (ms) | rounds in the fast state |",
        "|---|---:|---:|---:|",
    ]
    for k, row in table.items():
        lines.append(f"| {k} | {row['median_s'] * 1e3:.3f} | {row['min_s'] * 1e3:.3f} | {row['fast_share']:.0%} |")
    lines += ["", f"![rounds]({os.path.basename(_plot(args.out, times))})", ""]
    write_summary(args.out, lines, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
