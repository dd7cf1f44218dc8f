"""Measure an exported DietCode batch (``benchmarks.gpu.dietcode_export``) on a GPU machine without TVM.

Standalone (numpy, CuPy, PyTorch, nvcc)::

    python benchmarks/gpu/dietcode_runner.py BATCH --out $OUT [--budget 480]

1. nvcc builds every module of the batch (``-cubin -arch=<plan's arch> -O3``, all cores at once).
2. Phase 1, per workload: every kernel of the space at every T the tuning seeds sample (the plan's
   ``phase1_ts``, seed 0's first), so the tuner can be replayed here on real timings.
3. Phase 2, per workload: the kernels among the best ``--top`` at any phase-1 T, and those ``--p2-keys`` names
   (what a tuner replayed beforehand deploys), at every T of the range.

A kernel is one or more launches (a split-K kernel: its parts, then their sum into C), each with its grid per T;
the buffer between them is one workspace sized for the largest kernel. A kernel's time is one call's (all its
launches).

Each (kernel, T): C filled with NaN, one launch, checked against PyTorch's float32 product (TF32 off;
rtol = atol = 1e-3), one launch timed with CUDA events to size the batch, then ``n`` launches captured in a CUDA
graph (n so that a replay lasts ~``--replay-us``) and the graph replayed ``--repeat`` times: seconds per launch
of each replay. PyTorch's cuBLAS call at each T is timed the same way (``torch_reference.time_op``) before and
after that T's kernels. A workload runs in its own process; a kernel that kills it is recorded as a crash and
the workload resumes after it. Results: ``results.npz`` (per workload: ``<w>/p1_seconds [kernel, T, repeat]``,
``<w>/p1_error``, ``<w>/p2_kernels``, ``<w>/p2_seconds [kernel, T, repeat]``, ``<w>/p2_error``,
``<w>/cublas_p1``, ``<w>/cublas_p2 [T, before/after]``), ``meta.json`` and ``log.txt``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

# adatune.measure.MeasureErrorNo (this file must not import adatune)
NOT_MEASURED, NO_ERROR, COMPILE_DEVICE, RUNTIME_DEVICE, WRONG_ANSWER = -1, 0, 3, 4, 5


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------- build (parent, no CUDA context)
def build_modules(batch: str, plan: dict, work: str, jobs: int) -> dict[str, dict[int, str]]:
    """``{workload: {module index: cubin path or "error: ..."}}``."""
    arch = plan["target"].get("arch", "sm_90")
    todo = []
    for name in plan["workloads"]:
        with gzip.open(os.path.join(batch, f"{name}.json.gz"), "rt") as f:
            data = json.load(f)
        for i, src in enumerate(data["modules"]):
            path = os.path.join(work, f"{name}_{i}.cu")
            with open(path, "w") as f:
                f.write(src)
            todo.append((name, i, path))

    def one(item: tuple[str, int, str]) -> tuple[str, int, str]:
        name, i, path = item
        cubin = path[:-3] + ".cubin"
        proc = subprocess.run(
            ["nvcc", "-cubin", f"-arch={arch}", "-O3", "-std=c++17", "-o", cubin, path],
            capture_output=True,
            text=True,
        )
        return name, i, cubin if proc.returncode == 0 else "error: " + (proc.stderr or proc.stdout)[-600:]

    out: dict[str, dict[int, str]] = {n: {} for n in plan["workloads"]}
    with ThreadPoolExecutor(jobs) as pool:
        for name, i, res in pool.map(one, todo):
            out[name][i] = res
    return out


# ---------------------------------------------------------------------- one workload (child process)
class Bench:
    """A workload's arrays, reference and kernels at one T, timed through CuPy and PyTorch."""

    def __init__(self, wl: list, args: argparse.Namespace):
        import cupy as cp
        import torch

        self.cp, self.torch, self.args = cp, torch, args
        torch.backends.cuda.matmul.allow_tf32 = False
        self.kind, (self.d0, self.d1) = wl[1], wl[2]
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.t_lo = 1
        self.ws: Any = None  # the buffer a kernel's launches pass between them (``workspace``)
        self.ws_bytes = 0

    def shapes(self, t: int) -> list[tuple[int, ...]]:
        a, b = self.d0, self.d1
        if self.kind == "dense":
            return [(t, a), (a, b), (t, b)]
        if self.kind == "bmm_nt":
            return [(a, t, b), (a, t, b), (a, t, t)]
        return [(a, t, t), (a, t, b), (a, t, b)]

    def at(self, t: int) -> None:
        torch = self.torch
        gen = torch.Generator(device="cuda").manual_seed(t)
        sa, sb, sc = self.shapes(t)
        self.a = torch.rand(sa, device="cuda", generator=gen) * 2 - 1
        self.b = torch.rand(sb, device="cuda", generator=gen) * 2 - 1
        self.c = torch.empty(sc, device="cuda")
        self.ref = self.op()
        torch.cuda.synchronize()
        cp = self.cp
        self.args_cp = [cp.asarray(self.a), cp.asarray(self.b), cp.asarray(self.c), np.int32(t)]
        self.c_cp, self.ref_cp = self.args_cp[2], cp.asarray(self.ref)

    def op(self) -> Any:
        torch = self.torch
        if self.kind == "dense":
            return torch.matmul(self.a, self.b)
        if self.kind == "bmm_nt":
            return torch.bmm(self.a, self.b.transpose(1, 2))
        return torch.bmm(self.a, self.b)

    def cublas(self) -> float:
        from torch_reference import time_op

        return time_op(self.op, self.args.cublas_number, self.args.repeat, self.torch)

    def workspace(self, nbytes: int) -> None:
        """Room for the buffers a kernel's launches pass between them (split-K's parts), the largest asked for."""
        if nbytes > self.ws_bytes:
            self.ws = self.cp.empty(nbytes // 4 + 1, dtype=np.float32)
            self.ws_bytes = nbytes

    def kernel(self, launches: list[tuple[Any, int, list[int], list[str]]]) -> tuple[int, list[float]]:
        """(error, seconds per call of each replay) of one kernel at the current T: its launches ``(function,
        grid, block, parameter names)`` in order (one, or a split-K kernel's parts and their sum)."""
        cp, s = self.cp, self.stream
        named = {"A_ptr": self.args_cp[0], "B_ptr": self.args_cp[1], "C_ptr": self.args_cp[2], "T": self.args_cp[3]}
        calls = [(fn, grid, block, [named.get(p, self.ws) for p in params])
                 for fn, grid, block, params in launches]  # fmt: skip

        def launch() -> None:
            for fn, grid, block, args in calls:
                fn((grid, 1, 1), tuple(block), args)

        self.c_cp.fill(np.nan)
        cp.cuda.Device().synchronize()
        with s:
            launch()
        s.synchronize()
        if not bool(cp.allclose(self.c_cp, self.ref_cp, rtol=1e-3, atol=1e-3)):
            return WRONG_ANSWER, []
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record(s)
        with s:
            launch()
        stop.record(s)
        stop.synchronize()
        est = max(cp.cuda.get_elapsed_time(start, stop) / 1e3, 1e-7)
        n = int(min(max(round(self.args.replay_us * 1e-6 / est), 2), 64))
        with s:
            s.begin_capture()
            try:
                for _ in range(n):
                    launch()
            finally:
                graph = s.end_capture()
        graph.upload(s)
        graph.launch(s)
        s.synchronize()
        out = []
        for _ in range(self.args.repeat):
            start.record(s)
            graph.launch(s)
            stop.record(s)
            stop.synchronize()
            out.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / n)
        return NO_ERROR, out


def _phase(
    bench: Bench,
    kernels: list[dict],
    fns: dict[tuple[int, int], Any],  # (slot, launch) -> the loaded function
    ts: list[int],
    t_index: dict[int, int],
    seconds: np.ndarray,
    errors: np.ndarray,
    cublas: np.ndarray,
    deadline: float,
    save: Any,
    progress: str,
    skip: set[tuple[int, int]],
) -> None:
    """Time ``kernels`` (rows) at ``ts`` (columns ``t_index``) until ``deadline``; ``skip``: cells that crashed."""
    for t in ts:
        if time.time() > deadline:
            log(f"deadline: stopped before T={t}")
            return
        col = t_index[t]
        bench.at(t)
        cublas[col, 0] = bench.cublas()
        for row, k in enumerate(kernels):
            if errors[row, col] != NOT_MEASURED:
                continue
            if (row, col) in skip or (k["slot"], 0) not in fns:
                errors[row, col] = RUNTIME_DEVICE if (row, col) in skip else COMPILE_DEVICE
                continue
            with open(progress, "w") as f:
                f.write(f"{row} {col}")
            try:
                calls = [(fns[(k["slot"], n)], grid[t - bench.t_lo], block, params)
                         for n, (grid, block, params) in enumerate(_launches(k))]  # fmt: skip
                err, secs = bench.kernel(calls)
            except Exception as e:  # noqa: BLE001 - a launch error that left the context usable
                err, secs = RUNTIME_DEVICE, []
                log(f"  {k['key']} T={t}: {type(e).__name__}: {str(e)[:200]}")
            errors[row, col] = err
            if secs:
                seconds[row, col, : len(secs)] = secs
        cublas[col, 1] = bench.cublas()
        save()


def _launches(k: dict) -> list[tuple[list[int], list[int], list[str]]]:
    """(grid per T, block, parameter names) of each launch of an exported kernel (older batches: one launch)."""
    if "launches" in k:
        return [(c["grid"], c["block"], c["params"]) for c in k["launches"]]
    return [(k["grid"], k["block"], ["A_ptr", "B_ptr", "C_ptr", "T"])]


def run_workload(batch: str, name: str, cubins: dict[int, str], args: argparse.Namespace, start: float) -> None:
    """Phases 1 and 2 of one workload (in a child; resumes from its scratch file after a crash)."""
    import cupy as cp

    with open(os.path.join(batch, "plan.json")) as f:
        plan = json.load(f)
    with gzip.open(os.path.join(batch, f"{name}.json.gz"), "rt") as f:
        data = json.load(f)
    kernels = [k for k in data["kernels"] if "error" not in k]
    for k in kernels:
        k["slot"] = k["index"]
    fns: dict[tuple[int, int], Any] = {}
    modules: dict[int, Any] = {}
    for k in kernels:
        path = cubins.get(k["module"], "error")
        if path.startswith("error"):
            continue
        if k["module"] not in modules:
            modules[k["module"]] = cp.RawModule(path=path)
        names = [c["name"] for c in k["launches"]] if "launches" in k else [k["name"]]
        for n, fn_name in enumerate(names):
            fns[(k["slot"], n)] = modules[k["module"]].get_function(fn_name)
    bench = Bench(data["workload"], args)
    bench.workspace(max([int(k.get("workspace", 0)) for k in kernels] + [4]))
    bench.t_lo = int(data["ts"][0])
    scratch = os.path.join(args.work, f"{name}.npz")
    progress = os.path.join(args.work, f"{name}.progress")
    crashed = os.path.join(args.work, f"{name}.crashed")
    ts1 = list(plan["phase1_ts"])
    order = []
    for seed in sorted(plan["sampled"], key=int):  # seed 0's T first: a cut-short run still replays seed 0
        order += [t for t in plan["sampled"][seed] if t not in order]
    all_ts = list(data["ts"])
    n, r = len(kernels), args.repeat
    state: dict[str, np.ndarray] = {}
    if os.path.exists(scratch):
        with np.load(scratch) as z:
            state = {k: z[k] for k in z.files}
    p1_s = state.get("p1_seconds", np.full((n, len(ts1), r), np.nan))
    p1_e = state.get("p1_error", np.full((n, len(ts1)), NOT_MEASURED, dtype=np.int8))
    cub1 = state.get("cublas_p1", np.full((len(ts1), 2), np.nan))
    p1_skip: set[tuple[int, int]] = set()
    p2_skip: set[tuple[int, int]] = set()
    if os.path.exists(crashed):  # lines "crash PHASE ROW COL" the parent wrote when a kernel killed a child
        with open(crashed) as f:
            for line in f:
                phase, row, col = (int(v) for v in line.split()[1:4])
                (p1_skip if phase == 1 else p2_skip).add((row, col))
    p2_k = state.get("p2_kernels", np.zeros(0, dtype=np.int32))
    p2_s = state.get("p2_seconds", np.zeros((0, len(all_ts), r)))
    p2_e = state.get("p2_error", np.zeros((0, len(all_ts)), dtype=np.int8))
    cub2 = state.get("cublas_p2", np.full((len(all_ts), 2), np.nan))

    def save() -> None:
        tmp = scratch + ".tmp.npz"
        np.savez(
            tmp,
            p1_seconds=p1_s,
            p1_error=p1_e,
            cublas_p1=cub1,
            p2_kernels=p2_k,
            p2_seconds=p2_s,
            p2_error=p2_e,
            cublas_p2=cub2,
            keys=np.array([k["key"] for k in kernels]),
        )
        os.replace(tmp, scratch)

    t1 = {t: i for i, t in enumerate(ts1)}
    child_start = time.time()
    budget = (args.budget - (time.time() - start)) / max(1, args.remaining)
    log(f"{name}: {n} kernels, {len(fns)} loaded, {budget:.0f} s")
    with open(progress + ".phase", "w") as f:
        f.write("1")
    _phase(
        bench, kernels, fns, order, t1, p1_s, p1_e, cub1, time.time() + budget * args.p1_share, save, progress, p1_skip
    )
    # phase 2: the kernels among the best --top at any phase-1 T, at every T of the range
    if not len(p2_k):
        with warnings.catch_warnings():  # kernels wrong or untimed everywhere are all-NaN rows
            warnings.simplefilter("ignore", RuntimeWarning)
            med = np.nanmedian(np.where(p1_e[..., None] == NO_ERROR, p1_s, np.nan), axis=2)
        pick: list[int] = []
        for col in range(len(ts1)):
            good = np.flatnonzero(np.isfinite(med[:, col]))
            pick += [int(i) for i in good[np.argsort(med[good, col])][: args.top] if int(i) not in pick]
        wanted = _p2_keys(args, name)  # and the kernels asked for (e.g. what a replayed tuner deploys)
        pick += [i for i, k in enumerate(kernels) if k["key"] in wanted and i not in pick]
        p2_k = np.array(pick, dtype=np.int32)
        p2_s = np.full((len(pick), len(all_ts), r), np.nan)
        p2_e = np.full((len(pick), len(all_ts)), NOT_MEASURED, dtype=np.int8)
        save()
    with open(progress + ".phase", "w") as f:
        f.write("2")
    sel = [kernels[i] for i in p2_k]
    spread = sorted(all_ts, key=lambda t: int(format(t - 1, "07b")[::-1], 2))  # bit-reversed: a cut leaves gaps
    _phase(
        bench,
        sel,
        fns,
        spread,
        {t: i for i, t in enumerate(all_ts)},
        p2_s,
        p2_e,
        cub2,
        child_start + budget,
        save,
        progress,
        p2_skip,
    )
    log(
        f"{name}: done; phase 1 {int((p1_e != NOT_MEASURED).sum())} cells, phase 2 {len(p2_k)} kernels x "
        f"{int((p2_e != NOT_MEASURED).any(axis=0).sum()) if len(p2_k) else 0} T"
    )


def _p2_keys(args: argparse.Namespace, name: str) -> set[str]:
    """The keys ``--p2-keys`` (JSON ``{workload: [key, ...]}``) asks phase 2 to time at every T."""
    if not getattr(args, "p2_keys", ""):
        return set()
    with open(args.p2_keys) as f:
        return set(json.load(f).get(name, []))


def _child(batch: str, name: str, cubins: dict[int, str], args: argparse.Namespace, start: float) -> None:
    try:
        run_workload(batch, name, cubins, args, start)
    except Exception:  # noqa: BLE001 - logged; the parent decides
        log(f"{name}: child failed\n{traceback.format_exc()}")
        sys.exit(3)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    p.add_argument("batch")
    p.add_argument("--out", required=True)
    p.add_argument("--budget", type=float, default=450.0, help="seconds for everything after the build")
    p.add_argument("--p1-share", type=float, default=0.7, help="share of a workload's seconds for phase 1")
    p.add_argument("--top", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--replay-us", type=float, default=200.0)
    p.add_argument("--cublas-number", type=int, default=20)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 4)
    p.add_argument("--work", default="/tmp/dietcode_gpu")
    p.add_argument("--workloads", default="", help="subset of the plan's workloads (comma separated)")
    p.add_argument("--p2-keys", default="", help="JSON {workload: [kernel key]}: also timed at every T in phase 2")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    with open(os.path.join(args.batch, "plan.json")) as f:
        plan = json.load(f)
    if args.workloads:
        plan["workloads"] = [w for w in args.workloads.split(",") if w in plan["workloads"]]
    t0 = time.time()
    cubins = build_modules(args.batch, plan, args.work, args.jobs)
    bad = {n: sum(v.startswith("error") for v in m.values()) for n, m in cubins.items()}
    log(f"nvcc: {sum(len(m) for m in cubins.values())} modules in {time.time() - t0:.0f} s; failed {bad}")
    for n, m in cubins.items():
        for i, v in m.items():
            if v.startswith("error"):
                log(f"  {n} module {i}: {v[:400]}")
    start = time.time()
    env = {"build_seconds": start - t0, "args": vars(args), "plan": plan, "workloads": {}}
    try:
        env["nvidia_smi"] = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu",
                "--format=csv",
            ],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout
        env["nvcc"] = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.splitlines()[-2:]
    except Exception as err:  # noqa: BLE001 - recorded, not needed
        env["nvidia_smi"] = f"{err}"
    ctx = multiprocessing.get_context("spawn")
    names = list(plan["workloads"])
    signal.signal(signal.SIGTERM, merge_on_term(args, names, env))

    for i, name in enumerate(names):
        args.remaining = len(names) - i
        crashes = 0
        while True:
            proc = ctx.Process(target=_child, args=(args.batch, name, cubins[name], args, start))
            proc.start()
            proc.join()
            if proc.exitcode == 0:
                break
            prog = os.path.join(args.work, f"{name}.progress")
            if proc.exitcode == 3 or not os.path.exists(prog) or crashes >= 5:
                log(f"{name}: gave up (exit {proc.exitcode}, {crashes} crashes)")
                break
            with open(prog) as f:
                cell = f.read().split()
            with open(prog + ".phase") as f:
                phase = f.read().strip()
            with open(os.path.join(args.work, f"{name}.crashed"), "a") as f:
                f.write(f"crash {phase} {cell[0]} {cell[1]}\n")
            crashes += 1
            log(f"{name}: child died (exit {proc.exitcode}) at phase {phase} cell {cell}; resuming")
        env["workloads"][name] = {"crashes": crashes, "exit": proc.exitcode}
        merge(args, names, env)
    merge(args, names, env)
    log(f"all done in {time.time() - t0:.0f} s")
    return 0


def merge_on_term(args: argparse.Namespace, names: list[str], env: dict) -> Any:
    """A SIGTERM handler (``timeout``, a lease ending) that merges what the workloads saved so far (their scratch
    files hold every finished T) into ``--out`` before the process exits: a cut run keeps what it measured."""

    def handler(signum: int, frame: Any) -> None:
        log(f"signal {signum}: merging what was measured, then stopping")
        env["stopped_by_signal"] = signum
        merge(args, names, env)
        sys.exit(128 + signum)

    return handler


def merge(args: argparse.Namespace, names: list[str], env: dict) -> None:
    """Every workload's scratch results into ``results.npz`` and ``meta.json`` under ``--out``."""
    arrays: dict[str, np.ndarray] = {}
    for name in names:
        path = os.path.join(args.work, f"{name}.npz")
        if os.path.exists(path):
            with np.load(path) as z:
                arrays.update({f"{name}/{k}": z[k] for k in z.files})
    os.makedirs(args.out, exist_ok=True)
    np.savez_compressed(os.path.join(args.out, "results.npz"), **arrays)  # type: ignore[arg-type]
    meta = {k: v for k, v in env.items() if k != "args"}
    meta["args"] = {k: v for k, v in vars(args).items() if isinstance(v, (int, float, str))}
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, default=str)


if __name__ == "__main__":
    sys.exit(main())
