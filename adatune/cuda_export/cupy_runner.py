"""The standalone GPU runner: adatune's candidate batches and DietCode plans, on a machine without TVM or adatune.
``copy_runner`` puts this file, and the one rule file it loads, into an exported folder; run it there::

    python cupy_runner.py BATCH_DIR --out results.jsonl [--min-converge-coef 0.1] [--number 5 --repeat 3]
    python cupy_runner.py plan BATCH --out OUT_DIR [--budget 480]

**A candidate batch** (``python -m adatune.cuda_export export``; numpy and CuPy): each candidate runs in its own
child process, so a crash costs only that child (recorded with its error kind), and a hang is killed after
``--timeout``. Each is compiled (NVRTC), checked against the exported reference outputs, then timed as a CUDA graph
by the evaluator's rule, loaded from ``adatune/measure/micro_batches.py`` so that it exists once. Results are
adatune records that ``tuner.load_history`` resumes from.

**A DietCode plan** (``benchmarks.gpu.dietcode_export``; numpy, CuPy, PyTorch and nvcc): phase 1 times every kernel
of the space at the T values the tuning seeds sample (so a tuner can be replayed on real timings), phase 2 the best
``--top`` and the ``--p2-keys`` kernels at every T of the range. Each (kernel, T) is checked against PyTorch's
float32 product (TF32 off, rtol = atol = 1e-3), then timed as a CUDA graph replayed ``--repeat`` times, cuBLAS
beside it. A workload runs in its own process, so a kernel that kills it is recorded as a crash. Results:
``results.npz`` and ``meta.json``.

This file must not import adatune or TVM: its error numbers are ``MeasureErrorNo``'s, kept identical by the tests."""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import math
import multiprocessing
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import numpy as np

# adatune.measure.MeasureErrorNo (NOT_MEASURED: a plan's cell not timed yet)
NOT_MEASURED, NO_ERROR, INSTANTIATION_ERROR, COMPILE_HOST, COMPILE_DEVICE, RUNTIME_DEVICE = -1, 0, 1, 2, 3, 4
WRONG_ANSWER, BUILD_TIMEOUT, RUN_TIMEOUT, UNKNOWN_ERROR = 5, 6, 7, 8

#: the adaptive evaluator's rule, loaded by path: beside this file in an exported folder, else from adatune's tree
RULE_FILE = "micro_batches.py"


def _load_rule() -> Any:
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, RULE_FILE), os.path.join(here, os.pardir, "measure", RULE_FILE)):
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("adatune_micro_batches", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise ImportError(f"{RULE_FILE} (adatune's adaptive stopping rule) is neither beside {__file__} nor in its tree")


_rule = _load_rule()
TRIM_FROM_BATCHES: int = _rule.TRIM_FROM_BATCHES
FLOOR_SHARE: float = _rule.FLOOR_SHARE

TimeFn = Callable[[int, int, float], list[float]]
_PARAMS_RE = r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\(\d+\)\s+)?{name}\s*\(([^)]*)\)'


def copy_runner(directory: str) -> str:
    """This runner and its rule file (all a GPU machine needs), copied to ``directory``; returns the runner's path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "cupy_runner.py")
    shutil.copyfile(os.path.abspath(__file__), path)
    shutil.copyfile(_rule.__file__, os.path.join(directory, RULE_FILE))
    return path


# ---------------------------------------------------------------------- timing a candidate (adatune's rule)
@dataclass(frozen=True)
class EvalSettings:
    """The evaluator options that matter on a GPU (no CPU cache flush, no ``min_repeat_ms``); ``warmup_ms``:
    untimed launches for at least this long before timing, as ``adatune.measure.evaluator`` does."""

    number: int = 5
    repeat: int = 3
    min_converge_coef: float | None = None
    micro_batch: int = 50
    min_micro_batches: int = 3
    warmup_ms: float = 10.0

    def __post_init__(self) -> None:
        for name in ("number", "repeat", "micro_batch", "min_micro_batches"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"evaluator option {name} must be an integer >= 1, got {getattr(self, name)!r}")
        if self.min_converge_coef is not None:
            if not (math.isfinite(self.min_converge_coef) and self.min_converge_coef > 0):
                raise ValueError(f"min_converge_coef must be a positive finite number, got {self.min_converge_coef}")
            if self.cap_runs <= self.min_micro_batches:
                raise ValueError(
                    f"adaptive evaluator: number * repeat = {self.cap_runs} runs cannot hold more than "
                    f"min_micro_batches={self.min_micro_batches} micro-batches"
                )

    @property
    def cap_runs(self) -> int:
        return self.number * self.repeat

    @property
    def adaptive_micro_batch(self) -> int:
        return int(_rule.micro_batch_size(self.micro_batch, self.min_micro_batches, self.cap_runs))


def evaluate(time_fn: TimeFn, cfg: EvalSettings) -> tuple[list[float], int, float | None, list[int]]:
    """``(costs, runs, cv, batch_runs)`` as ``adatune.measure.evaluator.evaluate`` decides them (no min_repeat_ms)."""
    if cfg.warmup_ms > 0:  # untimed: ``time_fn``'s only call with a positive third argument
        time_fn(1, 1, cfg.warmup_ms)
    if cfg.min_converge_coef is None:
        fixed = _call(time_fn, cfg.number, cfg.repeat)
        return fixed, cfg.cap_runs, None, [cfg.number] * len(fixed)
    costs, runs, cv = _rule.adaptive_runs(
        lambda n, k: _call(time_fn, n, k), cfg.cap_runs, cfg.adaptive_micro_batch, cfg.min_micro_batches,
        cfg.min_converge_coef,
    )  # fmt: skip
    return costs, int(sum(runs)), cv, runs


def _call(time_fn: TimeFn, number: int, repeat: int) -> list[float]:
    costs = [float(c) for c in time_fn(number, repeat, 0.0)]
    if len(costs) != repeat:
        raise RuntimeError(f"time_fn returned {len(costs)} times for repeat={repeat}")
    return costs


def time_op(fn: Callable[[], Any], number: int, repeat: int, torch: Any) -> float:
    """Median seconds per call: ``number`` calls captured once in a CUDA graph, the graph replayed ``repeat``
    times between CUDA events (as the CuPy runner times candidates: Python's launch path left out)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm-up on a side stream, as graph capture asks (library handles, workspaces)
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(number):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3 / number)
    return statistics.median(times)


# ---------------------------------------------------------------------- launching
class CupyLauncher:
    """Compiles, launches and times kernels with CuPy (NVRTC) on one device."""

    def __init__(self, device: int = 0):
        import cupy

        self.cp = cupy
        cupy.cuda.Device(device).use()
        self.device_name = str(cupy.cuda.runtime.getDeviceProperties(device)["name"].decode())
        self.timing = ""

    def compile(self, source: str, name: str) -> Any:
        return self.cp.RawModule(code=source, options=("-std=c++17",)).get_function(name)

    def to_device(self, array: np.ndarray) -> Any:
        return self.cp.asarray(array)

    def to_host(self, handle: Any) -> np.ndarray:
        return self.cp.asnumpy(handle)

    def launch(self, kernel: Any, grid: Sequence[int], block: Sequence[int], args: list, shared_mem: int) -> None:
        kernel(tuple(grid), tuple(block), tuple(args), shared_mem=shared_mem)

    def synchronize(self) -> None:
        self.cp.cuda.Device().synchronize()

    def time(self, kernel: Any, grid: Any, block: Any, args: list, shared_mem: int, number: int, repeat: int) -> list:
        """``repeat`` mean seconds per launch of ``number`` launches after one untimed one, with CUDA events. The
        launches are replayed as one captured CUDA graph (launched from Python one at a time, a few-microsecond
        kernel measures the launch path); where capture fails they are timed as they are (``timing`` says which)."""
        cp = self.cp
        stream = cp.cuda.Stream(non_blocking=True)
        graph = None
        try:
            with stream:
                self.launch(kernel, grid, block, args, shared_mem)
                stream.begin_capture()
                try:
                    for _ in range(number):
                        self.launch(kernel, grid, block, args, shared_mem)
                finally:
                    graph = stream.end_capture()
            graph.upload(stream)
            graph.launch(stream)  # untimed replay
            self.timing = "cuda-graph"
        except Exception:  # noqa: BLE001 - no graph: time the launches themselves
            graph, self.timing = None, "launches"
        stream.synchronize()
        out = []
        for _ in range(repeat):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record(stream)
            if graph is not None:
                graph.launch(stream)
            else:
                with stream:
                    for _ in range(number):
                        self.launch(kernel, grid, block, args, shared_mem)
            stop.record(stream)
            stop.synchronize()
            out.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / number)
        return out


def kernel_parameters(source: str, name: str) -> list[str]:
    """Parameter names of kernel ``name`` in ``source`` (what the manifest's argument order refers to)."""
    match = re.search(_PARAMS_RE.format(name=re.escape(name)), source)
    if match is None:
        raise ValueError(f"kernel {name!r} is not defined in the source")
    return [p.strip().split()[-1].lstrip("*") for p in match.group(1).split(",") if p.strip()]


def classify(phase: str, text: str) -> int:
    """Error kind of a failure in ``phase`` ("compile" or "run") with message ``text``."""
    if phase == "compile":
        return COMPILE_DEVICE
    low = text.lower()
    cuda_words = ("cuda", "illegal", "misaligned", "launch", "out of resources", "too many resources", "nvrtc")
    return RUNTIME_DEVICE if any(w in low for w in cuda_words) else UNKNOWN_ERROR


# ---------------------------------------------------------------------- one candidate, in a child process
def _measure(launcher_factory: Callable[[int], Any], job: dict, settings: EvalSettings, conn: Any = None) -> dict:
    """Compile, then (once ``conn`` says "go": the GPU is this child's alone) check and time one candidate; without
    ``conn`` the GPU phase follows the compile at once (one candidate at a time, in process)."""
    phase = "start"
    try:
        launcher = launcher_factory(job["device"])
        phase, t0 = "compile", time.perf_counter()
        kernel = launcher.compile(job["source"], job["launch"]["name"])
        compile_s = time.perf_counter() - t0
        if conn is not None:  # compiled beside other children; the GPU is handed out one child at a time
            conn.send({"ready": True})
            conn.recv()
        phase = "run"
        launch = job["launch"]
        with np.load(job["reference"]) as ref:
            specs = job["specs"]
            host = [np.zeros(sh, dt) if is_out else ref[f"in{i}"] for i, (sh, dt, is_out) in enumerate(specs)]
            expected = {i: ref[f"out{i}"] for i, (_, _, is_out) in enumerate(job["specs"]) if is_out}
        handles = [launcher.to_device(a) for a in host]
        args = [handles[i] for i in launch["arg_order"]]
        grid, block, smem = launch["grid"], launch["block"], int(launch["dynamic_shared_memory"])
        t1 = time.perf_counter()
        launcher.launch(kernel, grid, block, args, smem)
        launcher.synchronize()
        for i, want in expected.items():
            got = launcher.to_host(handles[i])
            if got.shape != want.shape or not np.allclose(got, want, rtol=job["rtol"], atol=job["atol"]):
                diff = float(np.max(np.abs(got.astype(np.float64) - want))) if got.shape == want.shape else -1.0
                return {
                    "error_no": WRONG_ANSWER,
                    "msg": f"output {i} differs from the reference (max abs error {diff:.3g}, "
                    f"rtol={job['rtol']}, atol={job['atol']})",
                    "build_time": compile_s,
                }

        def time_fn(number: int, repeat: int, warm_ms: float) -> list[float]:
            if warm_ms > 0:  # the evaluator's warm-up: untimed launches, one at a time, for warm_ms
                end = time.perf_counter() + warm_ms / 1e3
                while True:
                    launcher.launch(kernel, grid, block, args, smem)
                    launcher.synchronize()
                    if time.perf_counter() >= end:
                        return [0.0] * repeat
            return launcher.time(kernel, grid, block, args, smem, number, repeat)

        costs, runs, cv, _ = evaluate(time_fn, settings)
        launcher.synchronize()
        return {
            "costs": costs,
            "runs": runs,
            "cv": cv,
            "build_time": compile_s,
            "run_time": time.perf_counter() - t1,
            "device": getattr(launcher, "device_name", ""),
            "timing": getattr(launcher, "timing", ""),
        }
    except Exception as err:  # noqa: BLE001 - every failure is a result
        text = f"{type(err).__name__}: {err}\n{traceback.format_exc()}"[-2000:]
        return {"error_no": classify(phase, text), "msg": f"{phase}: {text}"}


def _child(conn: Any, launcher_factory: Callable[[int], Any], job: dict, settings: EvalSettings) -> None:
    conn.send(_measure(launcher_factory, job, settings, conn))
    conn.close()


def _died(proc: Any, phase: str) -> dict:
    proc.join()
    return {"error_no": RUNTIME_DEVICE, "msg": f"{phase}: the kernel crashed its process (exit code {proc.exitcode})"}


def measure_isolated(
    launcher_factory: Callable[[int], Any],
    job: dict,
    settings: EvalSettings,
    timeout: float,
    start_method: str,
    gpu: threading.Lock | None = None,
) -> dict:
    """``_measure`` in a fresh child process: a crash or hang is a result, not the batch's end. The child compiles alone
    and touches the GPU only while holding ``gpu``, which this parent takes and gives back, so a child dying on the GPU
    cannot keep it and no candidate is timed on a shared device; ``timeout`` bounds each phase."""
    t0 = time.perf_counter()
    out = _supervise(launcher_factory, job, settings, timeout, start_method, gpu or threading.Lock())
    out["wall"] = time.perf_counter() - t0
    return out


def _supervise(
    launcher_factory: Callable[[int], Any],
    job: dict,
    settings: EvalSettings,
    timeout: float,
    start_method: str,
    gpu: threading.Lock,
) -> dict:
    ctx: Any = multiprocessing.get_context(start_method)
    parent, child = ctx.Pipe(duplex=True)
    proc = ctx.Process(target=_child, args=(child, launcher_factory, job, settings), daemon=True)
    proc.start()
    child.close()
    held = False
    try:
        if not parent.poll(timeout):
            if proc.is_alive():
                return {"error_no": BUILD_TIMEOUT, "msg": f"compile did not finish within {timeout:g} s"}
            return _died(proc, "compile")
        first = parent.recv()
        if "ready" not in first:  # compile failed: its error is the result
            return first
        gpu.acquire()
        held = True
        parent.send("go")
        if parent.poll(timeout):
            return dict(parent.recv())
        if proc.is_alive():
            return {"error_no": RUN_TIMEOUT, "msg": f"run did not finish within {timeout:g} s"}
        return _died(proc, "run")
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return _died(proc, "run" if held else "compile")
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        if held:
            gpu.release()
        parent.close()


# ---------------------------------------------------------------------- a batch
def load_manifest(batch_dir: str) -> dict:
    """The batch's manifest, checked for what this runner needs."""
    path = os.path.join(batch_dir, "manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    if manifest.get("format") != "adatune-cuda-batch" or manifest.get("version") != 1:
        raise ValueError(f"{path} is not an adatune CUDA batch manifest (format/version)")
    for key in ("arg_specs", "reference", "candidates", "rtol", "atol"):
        if key not in manifest:
            raise ValueError(f"{path} lacks {key!r}")
    for cand in manifest["candidates"]:
        if "record" not in cand or ("error" not in cand and ("source" not in cand or "launch" not in cand)):
            raise ValueError(f"{path}: candidate {cand.get('key')!r} lacks its record, source or launch")
    return manifest


def _record(cand: dict, out: dict, runner: str) -> dict:
    ok = out.get("error_no", NO_ERROR) == NO_ERROR and "costs" in out
    build, run = float(out.get("build_time", 0.0)), float(out.get("run_time", 0.0))
    result: dict[str, Any] = {
        "costs": list(out["costs"]) if ok else [],
        "error_no": NO_ERROR if ok else int(out["error_no"]),
        "all_cost": float(out.get("wall", build + run)),
        "timestamp": time.time(),
        "build_time": build,
        "run_time": run,
        "runs": int(out.get("runs", 0)) if ok else 0,
        "extra": {"runner": runner, **{k: out[k] for k in ("device", "timing") if out.get(k)}},
    }
    if not ok:
        result["error_msg"] = str(out.get("msg", ""))[-2000:]
    if ok and out.get("cv") is not None:
        result["cv"] = float(out["cv"])
    return {**cand["record"], "result": result}


def run_batch(
    batch_dir: str,
    out_path: str,
    settings: EvalSettings | None = None,
    timeout: float = 30.0,
    device: int = 0,
    launcher_factory: Callable[[int], Any] = CupyLauncher,
    start_method: str = "spawn",
    log: Callable[[str], None] = print,
    jobs: int = 1,
) -> list[dict]:
    """Measure every candidate, appending its record to ``out_path`` as it finishes; returns the records in manifest
    order. ``jobs`` children compile at once (NVRTC and start-up dominate); the GPU times one at a time."""
    if int(jobs) < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    manifest = load_manifest(batch_dir)
    settings = settings or EvalSettings()
    reference = os.path.join(batch_dir, manifest["reference"])
    if not os.path.exists(reference):
        raise ValueError(f"{batch_dir}: the manifest's reference {manifest['reference']!r} is not there")
    gpu = threading.Lock()
    cands = manifest["candidates"]

    def one(cand: dict) -> dict:
        if "error" in cand:  # rejected at export (device limits, no source): recorded, never run
            return {"error_no": int(cand["error"]["error_no"]), "msg": cand["error"]["msg"]}
        with open(os.path.join(batch_dir, cand["source"])) as f:
            source = f.read()
        job = {
            "source": source,
            "launch": cand["launch"],
            "specs": manifest["arg_specs"],
            "reference": reference,
            "rtol": manifest["rtol"],
            "atol": manifest["atol"],
            "device": device,
        }
        return measure_isolated(launcher_factory, job, settings, timeout, start_method, gpu)

    lines: dict[int, dict] = {}
    with ThreadPoolExecutor(max_workers=int(jobs)) as pool:
        futures = {pool.submit(one, cand): k for k, cand in enumerate(cands)}
        for done in as_completed(futures):
            k = futures[done]
            line = _record(cands[k], done.result(), "cupy_runner")
            with open(out_path, "a") as f:  # appended at once: a killed run keeps what it measured
                f.write(json.dumps(line, separators=(",", ":")) + "\n")
            res = line["result"]
            shown = f"{min(res['costs']) * 1e6:.2f} us" if res["costs"] else f"error {res['error_no']}"
            log(f"[{len(lines) + 1}/{len(cands)}] {cands[k]['key']}: {shown}")
            lines[k] = line
    return [lines[k] for k in range(len(cands))]


def batch_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="cupy_runner.py", description="Measure a candidate batch (see the module docstring)"
    )
    p.add_argument("batch", help="folder written by `python -m adatune.cuda_export export`")
    p.add_argument("--out", required=True, help="JSON-lines records to append to")
    p.add_argument("--number", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--min-converge-coef", type=float, default=None, help="AdaTune's adaptive evaluator")
    p.add_argument("--micro-batch", type=int, default=50)
    p.add_argument("--min-micro-batches", type=int, default=3)
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per candidate (compile + check + timing)")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1, help="candidates compiled at once (the GPU times one at a time)")
    args = p.parse_args(argv)
    settings = EvalSettings(args.number, args.repeat, args.min_converge_coef, args.micro_batch, args.min_micro_batches)
    try:
        import cupy  # noqa: F401 - checked here so a missing CuPy is one message, not one error per candidate
    except ImportError as err:
        print(f"error: this runner needs CuPy (pip install cupy-cuda12x or cupy-cuda13x): {err}", file=sys.stderr)
        return 2
    load_manifest(args.batch)
    lines = run_batch(args.batch, args.out, settings, args.timeout, args.device, jobs=args.jobs)
    ok = sum(1 for line in lines if line["result"]["costs"])
    print(f"{ok}/{len(lines)} candidates measured; records appended to {args.out}")
    return 0


# ---------------------------------------------------------------------- a DietCode plan
def log_line(msg: str) -> None:
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
class GemmBench:
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
    bench: GemmBench,
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
            log_line(f"deadline: stopped before T={t}")
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
                log_line(f"  {k['key']} T={t}: {type(e).__name__}: {str(e)[:200]}")
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
    bench = GemmBench(data["workload"], args)
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
    log_line(f"{name}: {n} kernels, {len(fns)} loaded, {budget:.0f} s")
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
    log_line(
        f"{name}: done; phase 1 {int((p1_e != NOT_MEASURED).sum())} cells, phase 2 {len(p2_k)} kernels x "
        f"{int((p2_e != NOT_MEASURED).any(axis=0).sum()) if len(p2_k) else 0} T"
    )


def _p2_keys(args: argparse.Namespace, name: str) -> set[str]:
    """The keys ``--p2-keys`` (JSON ``{workload: [key, ...]}``) asks phase 2 to time at every T."""
    if not getattr(args, "p2_keys", ""):
        return set()
    with open(args.p2_keys) as f:
        return set(json.load(f).get(name, []))


def _workload_child(batch: str, name: str, cubins: dict[int, str], args: argparse.Namespace, start: float) -> None:
    try:
        run_workload(batch, name, cubins, args, start)
    except Exception:  # noqa: BLE001 - logged; the parent decides
        log_line(f"{name}: child failed\n{traceback.format_exc()}")
        sys.exit(3)


def plan_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="cupy_runner.py plan", description="Time a DietCode plan (see the module docstring)"
    )
    p.add_argument("batch", help="folder written by benchmarks.gpu.dietcode_export")
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
    log_line(f"nvcc: {sum(len(m) for m in cubins.values())} modules in {time.time() - t0:.0f} s; failed {bad}")
    for n, m in cubins.items():
        for i, v in m.items():
            if v.startswith("error"):
                log_line(f"  {n} module {i}: {v[:400]}")
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
            proc = ctx.Process(target=_workload_child, args=(args.batch, name, cubins[name], args, start))
            proc.start()
            proc.join()
            if proc.exitcode == 0:
                break
            prog = os.path.join(args.work, f"{name}.progress")
            if proc.exitcode == 3 or not os.path.exists(prog) or crashes >= 5:
                log_line(f"{name}: gave up (exit {proc.exitcode}, {crashes} crashes)")
                break
            with open(prog) as f:
                cell = f.read().split()
            with open(prog + ".phase") as f:
                phase = f.read().strip()
            with open(os.path.join(args.work, f"{name}.crashed"), "a") as f:
                f.write(f"crash {phase} {cell[0]} {cell[1]}\n")
            crashes += 1
            log_line(f"{name}: child died (exit {proc.exitcode}) at phase {phase} cell {cell}; resuming")
        env["workloads"][name] = {"crashes": crashes, "exit": proc.exitcode}
        merge(args, names, env)
    merge(args, names, env)
    log_line(f"all done in {time.time() - t0:.0f} s")
    return 0


def merge_on_term(args: argparse.Namespace, names: list[str], env: dict) -> Any:
    """A SIGTERM handler (``timeout``, a lease ending) that merges the workloads' scratch files (every finished T)
    into ``--out`` before the process exits: a cut run keeps what it measured."""

    def handler(signum: int, frame: Any) -> None:
        log_line(f"signal {signum}: merging what was measured, then stopping")
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


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["plan"]:
        return plan_main(args[1:])
    return batch_main(args)


if __name__ == "__main__":
    sys.exit(main())
