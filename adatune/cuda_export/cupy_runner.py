"""Measure a batch exported by ``python -m adatune.cuda_export export`` on a GPU machine without TVM or adatune.

Needs only numpy and CuPy. Copy this file with the batch folder (the exporter puts a copy in it) and run::

    python cupy_runner.py BATCH_DIR --out results.jsonl [--min-converge-coef 0.1] [--number 5 --repeat 3]

Every candidate runs in its own child process: an illegal address, a failed launch or a crash costs only
that child and is recorded with its error kind; a kernel that hangs is killed after ``--timeout`` seconds.
``--jobs N`` children compile at once, and the GPU is handed to one of them at a time. Each candidate is
compiled (CuPy's NVRTC), launched once and checked against the exported reference outputs, then timed (its
launches captured in a CUDA graph, between CUDA events) by the same evaluator as ``adatune.evaluator``
(deterministic, or AdaTune's adaptive rule when ``--min-converge-coef`` is given). Results are adatune records
(version-2 JSON lines) that ``tuner.load_history`` resumes from.

This file must not import adatune: the evaluator rule and the error numbers are copies, kept identical to
``adatune.evaluator`` and ``adatune.measure.MeasureErrorNo`` by the tests.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import numpy as np

# adatune.measure.MeasureErrorNo
NO_ERROR, INSTANTIATION_ERROR, COMPILE_HOST, COMPILE_DEVICE, RUNTIME_DEVICE = 0, 1, 2, 3, 4
WRONG_ANSWER, BUILD_TIMEOUT, RUN_TIMEOUT, UNKNOWN_ERROR = 5, 6, 7, 8

# adatune.evaluator
TRIM_FROM_BATCHES = 5
FLOOR_SHARE = 0.2

TimeFn = Callable[[int, int, float], list[float]]
_PARAMS_RE = r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\(\d+\)\s+)?{name}\s*\(([^)]*)\)'


# ---------------------------------------------------------------------- evaluator (copy of adatune.evaluator)
@dataclass(frozen=True)
class EvalSettings:
    """The evaluator options that matter on a GPU (no CPU cache flush, no ``min_repeat_ms``); ``warmup_ms``:
    untimed launches for at least this long before timing, as ``adatune.evaluator`` does."""

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
        room = int(FLOOR_SHARE * self.cap_runs) // self.min_micro_batches
        return max(1, min(self.micro_batch, room))


def trimmed(throughputs: Sequence[float] | np.ndarray) -> np.ndarray:
    values = np.asarray(throughputs, dtype=np.float64)
    if len(values) >= TRIM_FROM_BATCHES:
        values = np.sort(values)[1:-1]
    return values


def converge_cv(batch_seconds: Sequence[float], runs_per_batch: Sequence[int]) -> float:
    secs = np.asarray(batch_seconds, dtype=np.float64)
    runs = np.asarray(runs_per_batch, dtype=np.float64)
    if len(secs) != len(runs):
        raise ValueError(f"{len(secs)} batch times but {len(runs)} run counts")
    if len(secs) < 2 or not np.all(secs > 0):
        return math.inf
    perf = trimmed(runs / secs)
    return float(perf.std() / perf.mean())


def evaluate(time_fn: TimeFn, cfg: EvalSettings) -> tuple[list[float], int, float | None, list[int]]:
    """``(costs, runs, cv, batch_runs)`` exactly as ``adatune.evaluator.evaluate`` decides them."""
    if cfg.warmup_ms > 0:  # untimed: ``time_fn``'s only call with a positive third argument
        time_fn(1, 1, cfg.warmup_ms)
    if cfg.min_converge_coef is None:
        fixed = _call(time_fn, cfg.number, cfg.repeat)
        return fixed, cfg.cap_runs, None, [cfg.number] * len(fixed)
    batch, cap = cfg.adaptive_micro_batch, cfg.cap_runs
    costs: list[float] = []
    runs: list[int] = []
    cv = math.inf
    while sum(runs) < cap:
        remaining = cap - sum(runs)
        n = min(batch, remaining)
        k = 1
        if len(runs) < cfg.min_micro_batches and n == batch:
            k = max(1, min(cfg.min_micro_batches - len(runs), remaining // batch))
        costs += _call(time_fn, n, k)
        runs += [n] * k
        if len(runs) >= cfg.min_micro_batches:
            cv = converge_cv([c * r for c, r in zip(costs, runs)], runs)
            if cv < cfg.min_converge_coef:
                break
    return costs, int(sum(runs)), cv if math.isfinite(cv) else None, runs


def _call(time_fn: TimeFn, number: int, repeat: int) -> list[float]:
    costs = [float(c) for c in time_fn(number, repeat, 0.0)]
    if len(costs) != repeat:
        raise RuntimeError(f"time_fn returned {len(costs)} times for repeat={repeat}")
    return costs


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
        """``repeat`` mean seconds per launch of ``number`` back-to-back launches, after one untimed launch
        (what TVM's ``time_evaluator`` does), measured with CUDA events.

        The ``number`` launches are captured once into a CUDA graph and the graph is replayed: a kernel of a
        few microseconds launched from Python one call at a time measures the launch path, not the kernel
        (on an H100, PyTorch's 4 us bmm read 16.5 us launched call by call). Where capture fails, the
        launches are timed as they are (``timing`` says which)."""
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
    """Compile, then (once ``conn`` says "go": the GPU is this child's alone) check and time one candidate.

    Without ``conn`` the GPU phase follows the compile at once (one candidate at a time, in process)."""
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
    """``_measure`` in a fresh child process: a crash or a hang is a result, not the end of the batch.

    The child compiles on its own; it touches the GPU only while holding ``gpu``, which this parent (not the
    child) takes and gives back, so a child that dies on the GPU cannot keep it, and candidates measured
    beside each other never share the device while one of them is timed. ``timeout`` bounds each phase."""
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
    """Measure every candidate of the batch; append one record per candidate to ``out_path`` as it finishes.

    ``jobs`` children compile at once (NVRTC and process start-up are most of a candidate's wall-clock); the
    GPU still runs one candidate at a time. Returns the records in the manifest's order."""
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


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
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


if __name__ == "__main__":
    sys.exit(main())
