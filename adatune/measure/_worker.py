"""Functions that run inside the builder and runner worker processes: they take and return plain data
(``RunRequest``, ``BuildResult``, ``RunOutcome``) so a crash or hang costs only the worker, and return a candidate's
failure as its ``MeasureErrorNo`` kind, never raise it."""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from typing import Any

import numpy as np

from .. import target as _target
from ..codegen import vector_math
from ._config import RunnerConfig
from ._types import BuildResult, MeasureErrorNo, RunOutcome, RunRequest

__all__ = [
    "warm_up",
    "build_candidate",
    "prepare_arguments",
    "time_candidate",
    "check_and_time",
    "run_candidate",
    "gpu_limit_violation",
    "thread_bindings",
    "thread_extents",
]

_REF_CACHE: dict[str, dict[str, np.ndarray]] = {}


def warm_up() -> None:
    """Pool initializer (loading it paid ``import tvm`` once per worker): size TVM's thread pool before it
    starts, so kernels are timed on every physical core, as they will run."""
    _target.size_tvm_thread_pool()


def build_candidate(mod: Any, target_json: dict, host_json: dict | None, out_dir: str) -> BuildResult:
    """Compile a scheduled IRModule and export a shared library (its bytes, or why there are none)."""
    import tvm

    t0 = time.perf_counter()
    is_cuda = target_json.get("kind") == "cuda"
    if is_cuda:
        _enable_nvcc()
    stage = ""
    try:
        target = tvm.target.Target(target_json, host=host_json) if host_json else tvm.target.Target(target_json)
        with target:  # passes that read ``Target.current()`` see the task's target, as its template did
            lib = tvm.tirx.build(mod, target, pipeline=vector_math.tir_pipeline(target))
        stage = "export/link failed: "
        fd, path = tempfile.mkstemp(suffix=".so", dir=out_dir)
        os.close(fd)
        lib.export_library(path, options=vector_math.export_options(target))
        with open(path, "rb") as f:
            artifact = f.read()
        os.remove(path)
    except Exception as err:  # noqa: BLE001 - every compiler failure is a result, not a crash
        text = f"{stage}{type(err).__name__}: {err}"[-4000:]
        device = is_cuda and not stage and _is_device_error(text)
        kind = MeasureErrorNo.COMPILE_DEVICE if device else MeasureErrorNo.COMPILE_HOST
        return BuildResult(None, kind, text, time.perf_counter() - t0)
    return BuildResult(artifact, time_cost=time.perf_counter() - t0)


def gpu_limit_violation(mod: Any, limits: dict) -> str:
    """Empty when every GPU function of ``mod`` respects ``limits``, else which limit it breaks and why.
    ``verify_gpu_code`` on a naively lowered function passes everything (thread variables keep loop names, shared
    buffers sit outside the kernel), so Meta-schedule's ``VerifyGPUCode`` postproc, which lowers as ``tvm.build``
    does first, rejects here, before any nvcc run; per-axis thread limits come from the thread bindings."""
    import tvm

    max_threads = int(limits["max_threads_per_block"])
    max_shared = int(limits["max_shared_memory_per_block"])
    for gv, func in mod.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue
        name = gv.name_hint
        one = tvm.IRModule({"main": func})
        extents = thread_extents(one)
        for axis in "xyz":
            extent, cap = extents.get(f"threadIdx.{axis}", 1), int(limits.get(f"max_thread_{axis}", 1 << 30))
            if extent > cap:
                return f"{name}: threadIdx.{axis} extent {extent} exceeds max_thread_{axis}={cap}"
        threads = extents.get("threadIdx.x", 1) * extents.get("threadIdx.y", 1) * extents.get("threadIdx.z", 1)
        if threads > max_threads:
            return f"{name}: {threads} threads per block exceed max_threads_per_block={max_threads}"
        if not _passes_verify_gpu_code(one, max_threads, 1 << 30):
            return f"{name}: more than max_threads_per_block={max_threads} threads per block (VerifyGPUCode)"
        if not _passes_verify_gpu_code(one, 1 << 30, max_shared):
            return f"{name}: more than max_shared_memory_per_block={max_shared} bytes of shared memory per block"
    return ""


def thread_bindings(mod: Any) -> list[tuple[str, Any]]:
    """``(thread tag, extent)`` of every loop bound to a thread (``blockIdx.x``, ``threadIdx.y``, ``vthread.x``...)
    in the scheduled ``main`` of ``mod``; an extent stays symbolic where the PrimFunc's shapes are."""
    import tvm

    sch = tvm.s_tir.Schedule(mod)
    found: list[tuple[str, Any]] = []
    stack = [sch.get_sblock("root")]
    while stack:
        block = stack.pop()
        for loop in sch.get_loops(block):
            stmt = sch.get(loop)
            if stmt.thread_binding is not None:
                found.append((str(stmt.thread_binding.thread_tag), stmt.extent))
        stack.extend(sch.get_child_blocks(block))
    return found


def thread_extents(mod: Any) -> dict[str, int]:
    """Largest extent bound to each thread tag in the scheduled ``main`` of ``mod``: the kernel's launch grid and
    block for single-kernel functions with static shapes."""
    found: dict[str, int] = {}
    for tag, extent in thread_bindings(mod):
        found[tag] = max(found.get(tag, 1), int(extent))
    return found


def _passes_verify_gpu_code(mod: Any, max_threads: int, max_shared: int) -> bool:
    """Meta-schedule's ``VerifyGPUCode`` postproc for a CUDA target carrying these two limits."""
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule import _ffi_api as ms_ffi

    target = tvm.target.Target(
        {
            "kind": "cuda",
            "arch": "sm_80",  # any: only the two limits matter, and without one TVM probes for a GPU
            "max_threads_per_block": max_threads,
            "max_shared_memory_per_block": max_shared,
            "thread_warp_size": 32,
        },
        host="llvm",
    )
    # The context's Python constructor first imports every tensor intrinsic (minutes on a busy machine);
    # the postproc reads only the target from it, so build the bare context object directly.
    context = ms.TuneContext.__new__(ms.TuneContext)
    context.__init_handle_by_constructor__(ms_ffi.TuneContext, mod, target, None, None, "main", 1, -1, None)
    postproc = ms.postproc.VerifyGPUCode()
    postproc._initialize_with_tune_context(context)
    return bool(postproc.apply(tvm.s_tir.Schedule(mod)))


def _enable_nvcc() -> None:
    """Compile CUDA at build time: TVM 0.27 compiles device code only when a ``tvm_callback_cuda_compile`` is
    registered (``tvm.support.nvcc`` registers one that picks NVRTC unless ``TVM_CUDA_COMPILE_MODE`` says otherwise);
    without it the library keeps CUDA source and errors surface at load time. NVRTC needs the cuda-bindings package,
    so where it is missing this registers the callback with nvcc instead of setting the variable (the caller's)."""
    import tvm.support.nvcc as nvcc
    import tvm_ffi

    mode = os.environ.get("TVM_CUDA_COMPILE_MODE")
    if mode is None:
        try:
            import cuda.bindings  # noqa: F401
        except ImportError:
            mode = "nvcc"
    if mode is not None and mode.lower() == "nvcc":
        compile_nvcc = lambda code: nvcc.compile_cuda(code, target_format="fatbin", compiler="nvcc")  # noqa: E731
        tvm_ffi.register_global_func("tvm_callback_cuda_compile", compile_nvcc, override=True)


def _is_device_error(text: str) -> bool:
    low = text.lower()
    return any(k in low for k in ("nvcc", "cuda", "ptx", "thread", "shared memory", "gpu", "nvrtc"))


def _load_reference(ref_path: str | None) -> dict[str, np.ndarray]:
    if not ref_path:
        return {}
    if ref_path not in _REF_CACHE:
        with np.load(ref_path) as data:
            _REF_CACHE[ref_path] = {k: data[k] for k in data.files}
    return _REF_CACHE[ref_path]


def prepare_arguments(
    module: Any,
    dev: Any,
    req: RunRequest,
    check: bool,
    where: str = "",
    point: tuple[tuple[int, ...], list, str | None] | None = None,
) -> tuple[list, str]:
    """Tensors on ``dev`` for the timed call's arguments (the reference's inputs where it has them, else seeded
    random ones; zeroed outputs), then ``point``'s scalars, and, when ``check``, why one run's outputs differ
    from the reference ("" when they match). A split kernel (``req.calls``) gets its packed constants made
    here, once, and the timed call's arguments are those of its compute function."""
    import tvm

    scalars, arg_specs, ref_path = point if point is not None else ((), req.arg_specs, req.ref_path)
    ref = _load_reference(ref_path)
    args: list = []
    outputs = []
    rng = np.random.default_rng(0)
    for i, (shape, dtype, is_output) in enumerate(arg_specs):
        if is_output:
            arr = np.zeros(shape, dtype=dtype)
            outputs.append(i)
        else:
            arr = ref[f"in{i}"] if f"in{i}" in ref else rng.uniform(-1, 1, size=shape).astype(dtype)
        args.append(tvm.runtime.tensor(arr, dev))
    args += [int(s) for s in scalars]
    func, call = module.entry_name, args
    if req.calls is not None:  # constant weights packed once, here, as a model build does (``_prepack``)
        tensors = args + [tvm.runtime.tensor(np.zeros(shape, dtype=dtype), dev) for shape, dtype in req.calls.temps]
        for name, refs in req.calls.setup:
            module[name](*[tensors[r] for r in refs])
        func, call = req.calls.timed[0], [tensors[r] for r in req.calls.timed[1]]
    if not (check and ref):
        return call, ""
    module[func](*call)
    dev.sync()
    for i in outputs:
        got, want = args[i].numpy(), ref[f"out{i}"]
        if got.shape != want.shape or not np.allclose(got, want, rtol=req.rtol, atol=req.atol):
            diff = float(np.max(np.abs(got.astype(np.float64) - want))) if got.shape == want.shape else -1.0
            return args, (
                f"output {i} differs from the reference{where} (max abs error {diff:.3g}, "
                f"rtol={req.rtol}, atol={req.atol})"
            )
    return call, ""


def time_candidate(module: Any, dev: Any, args: list, req: RunRequest, config: RunnerConfig) -> RunOutcome:
    """Time the kernel with the configured evaluator (the CPU cache flush has no meaning on a GPU)."""
    from .evaluator import evaluate, time_fn_for

    flush = config.evaluator.enable_cpu_cache_flush and req.device_type == "cpu"
    func = req.calls.timed[0] if req.calls is not None else None
    outcome = evaluate(time_fn_for(module, dev, args, flush, func), config.evaluator)
    uniform = outcome.runs == sum(outcome.batch_runs) and len(set(outcome.batch_runs)) <= 1
    extra = {} if uniform else {"batch_runs": list(outcome.batch_runs)}  # replays need each batch's runs
    return RunOutcome(costs=tuple(outcome.costs), runs=outcome.runs, cv=outcome.cv, extra=extra)


def check_and_time(
    module: Any, dev: Any, req: RunRequest, config: RunnerConfig, where: str = "", stage_done: Any = None
) -> RunOutcome:
    """Check (when configured) and time a loaded candidate, at each of the request's points if it has them.
    A shape-generic kernel gets a fresh evaluator per point (TVM's keeps the number of runs it grew to for
    ``min_repeat_ms``, so one reused from a small extent would run a large one thousands of times); its costs
    are one value, the sum of the points' medians, and ``extra["points"]`` keeps each point's timings."""
    if not req.points:
        args, mismatch = prepare_arguments(module, dev, req, config.check_correctness, where)
        if stage_done is not None:
            stage_done("prepare")
        if mismatch:
            return RunOutcome(MeasureErrorNo.WRONG_ANSWER, mismatch)
        return time_candidate(module, dev, args, req, config)
    per_point, runs, cvs = [], 0, []
    for point in req.points:
        at = f" at {', '.join(map(str, point[0]))}{where}"
        args, mismatch = prepare_arguments(module, dev, req, config.check_correctness, at, point)
        if mismatch:
            return RunOutcome(MeasureErrorNo.WRONG_ANSWER, mismatch)
        got = time_candidate(module, dev, args, req, config)
        runs += got.runs
        cvs += [got.cv] if got.cv is not None else []
        per_point.append({"at": list(point[0]), "costs": list(got.costs), "runs": got.runs, "cv": got.cv, **got.extra})
    total = float(sum(float(np.median(np.asarray(p["costs"]))) for p in per_point))
    return RunOutcome(costs=(total,), runs=runs, cv=max(cvs) if cvs else None, extra={"points": per_point})


def run_candidate(req: RunRequest, config: RunnerConfig) -> RunOutcome:
    """Load, optionally check against the reference, and time one candidate on this machine."""
    import tvm

    t0 = time.perf_counter()
    device = req.device_type.upper()
    if req.device_type != "cpu" and not tvm.runtime.enabled(req.device_type):
        return RunOutcome(
            MeasureErrorNo.RUNTIME_DEVICE,
            f"no {device} device: this TVM runtime was built without {device} support (the PyPI wheel is "
            "CPU-only), so the kernel was compiled but cannot run here",
        )
    dev = tvm.runtime.device(req.device_type, 0)
    if not dev.exist:
        msg = f"no {device} device on this machine: the kernel was built but cannot run here"
        return RunOutcome(MeasureErrorNo.RUNTIME_DEVICE, msg)
    fd, lib_path = tempfile.mkstemp(suffix=req.suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(req.artifact)
        module = tvm.runtime.load_module(lib_path)
    except Exception as err:  # noqa: BLE001
        return RunOutcome(MeasureErrorNo.COMPILE_HOST, f"loading the library failed: {err}")
    finally:
        os.remove(lib_path)
    try:
        out = check_and_time(module, dev, req, config)
    except Exception as err:  # noqa: BLE001 - the kernel's own failure is a result
        out = RunOutcome(MeasureErrorNo.RUNTIME_DEVICE, f"{type(err).__name__}: {err}\n{traceback.format_exc()}")
    out.seconds = time.perf_counter() - t0
    return out
