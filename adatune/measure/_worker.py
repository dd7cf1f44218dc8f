"""Functions that run inside the builder and runner worker processes.

They take and return only plain data (paths, JSON, lists) so a crash or hang costs only the worker.
Failures are returned as ``(error_kind, message)`` rather than raised, so the parent can classify them.
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from typing import Any

import numpy as np

__all__ = ["warm_up", "build_candidate", "run_candidate", "gpu_limit_violation", "thread_extents"]

_REF_CACHE: dict[str, dict[str, np.ndarray]] = {}


def warm_up() -> None:
    """Pool initializer: pay ``import tvm`` once per worker, not per candidate."""
    import tvm  # noqa: F401


def build_candidate(mod: Any, target_json: dict, host_json: dict | None, out_dir: str) -> dict:
    """Compile a scheduled IRModule and export a shared library; returns a dict with the path or error."""
    import tvm

    t0 = time.perf_counter()
    if target_json.get("kind") == "cuda":
        _enable_nvcc()
    try:
        target = tvm.target.Target(target_json, host=host_json) if host_json else tvm.target.Target(target_json)
        lib = tvm.tirx.build(mod, target)
    except Exception as err:  # noqa: BLE001 - every compiler failure is a result, not a crash
        text = f"{type(err).__name__}: {err}"
        kind = "compile_device" if target_json.get("kind") == "cuda" and _is_device_error(text) else "compile_host"
        return {"error": kind, "msg": text[-4000:], "time": time.perf_counter() - t0}
    try:
        fd, path = tempfile.mkstemp(suffix=".so", dir=out_dir)
        os.close(fd)
        lib.export_library(path)
        with open(path, "rb") as f:
            artifact = f.read()
        os.remove(path)
    except Exception as err:  # noqa: BLE001
        return {
            "error": "compile_host",
            "msg": f"export/link failed: {type(err).__name__}: {err}"[-4000:],
            "time": time.perf_counter() - t0,
        }
    return {"artifact": artifact, "time": time.perf_counter() - t0}


def gpu_limit_violation(mod: Any, limits: dict) -> str:
    """Empty when every GPU function of ``mod`` respects ``limits``, else which limit it breaks and why.

    ``verify_gpu_code`` on a naively lowered function passes everything: its thread variables keep their
    loop names and the shared buffers are allocated outside the kernel. Meta-schedule's ``VerifyGPUCode``
    postproc lowers the way ``tvm.build`` does (buffer allocations planned into the kernel, thread bindings
    unified) before verifying, so it is what rejects here, on the scheduled TIR, before any nvcc run.
    Per-axis thread limits (``max_thread_x/y/z``) are read from the loops' thread bindings."""
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


def thread_extents(mod: Any) -> dict[str, int]:
    """Largest extent bound to each thread tag (``blockIdx.x``, ``threadIdx.y``, ``vthread.x``...) in the
    scheduled ``main`` of ``mod``: the kernel's launch grid and block for single-kernel functions."""
    import tvm

    sch = tvm.s_tir.Schedule(mod)
    found: dict[str, int] = {}
    stack = [sch.get_sblock("root")]
    while stack:
        block = stack.pop()
        for loop in sch.get_loops(block):
            stmt = sch.get(loop)
            if stmt.thread_binding is not None:
                tag = str(stmt.thread_binding.thread_tag)
                found[tag] = max(found.get(tag, 1), int(stmt.extent))
        stack.extend(sch.get_child_blocks(block))
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
    """Compile CUDA at build time. TVM 0.27 only compiles device code when ``tvm.support.nvcc`` has
    registered its callback; otherwise the library keeps CUDA source and errors surface at load time.
    NVRTC needs the cuda-bindings package, so nvcc (present on every machine here) is the default."""
    if "TVM_CUDA_COMPILE_MODE" not in os.environ:
        try:
            import cuda.bindings  # noqa: F401
        except ImportError:
            os.environ["TVM_CUDA_COMPILE_MODE"] = "nvcc"
    import tvm.support.nvcc  # noqa: F401 - registers tvm_callback_cuda_compile


def _is_device_error(text: str) -> bool:
    low = text.lower()
    return any(k in low for k in ("nvcc", "cuda", "ptx", "thread", "shared memory", "gpu", "nvrtc"))


def make_arguments(arg_specs: list, ref: dict, dev: Any) -> tuple[list, list[int]]:
    """Tensors on ``dev`` for a kernel's arguments (the reference's inputs where it has them, else seeded random
    ones; zeroed outputs) and the positions of the outputs."""
    import tvm

    args, outputs = [], []
    rng = np.random.default_rng(0)
    for i, (shape, dtype, is_output) in enumerate(arg_specs):
        if is_output:
            arr = np.zeros(shape, dtype=dtype)
            outputs.append(i)
        elif f"in{i}" in ref:
            arr = ref[f"in{i}"]
        else:
            arr = rng.uniform(-1, 1, size=shape).astype(dtype)
        args.append(tvm.runtime.tensor(arr, dev))
    return args, outputs


def output_mismatch(args: list, ref: dict, outputs: list[int], rtol: float, atol: float, where: str = "") -> str:
    """Why the computed outputs differ from the reference ("" when they all match), for a WRONG_ANSWER."""
    for i in outputs:
        got, want = args[i].numpy(), ref[f"out{i}"]
        if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol):
            diff = float(np.max(np.abs(got.astype(np.float64) - want))) if got.shape == want.shape else -1.0
            return f"output {i} differs from the reference{where} (max abs error {diff:.3g}, rtol={rtol}, atol={atol})"
    return ""


def _load_reference(ref_path: str) -> dict[str, np.ndarray]:
    if ref_path not in _REF_CACHE:
        with np.load(ref_path) as data:
            _REF_CACHE[ref_path] = {k: data[k] for k in data.files}
    return _REF_CACHE[ref_path]


def run_candidate(
    artifact: bytes,
    suffix: str,
    device_type: str,
    arg_specs: list,
    ref_path: str | None,
    check_correctness: bool,
    eval_cfg: Any,
    rtol: float,
    atol: float,
) -> dict:
    """Load, optionally check against the reference, and time one candidate."""
    import tvm

    from ..evaluator import evaluate, time_fn_for

    t0 = time.perf_counter()
    if device_type != "cpu" and not tvm.runtime.enabled(device_type):
        return {
            "error": "runtime_device",
            "msg": f"no {device_type.upper()} device: this TVM runtime was built without {device_type.upper()} "
            "support (the PyPI wheel is CPU-only), so the kernel was compiled but cannot run here",
        }
    dev = tvm.runtime.device(device_type, 0)
    if not dev.exist:
        return {
            "error": "runtime_device",
            "msg": f"no {device_type.upper()} device on this machine: the kernel was built but cannot run here",
        }
    fd, lib_path = tempfile.mkstemp(suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(artifact)
        module = tvm.runtime.load_module(lib_path)
    except Exception as err:  # noqa: BLE001
        return {"error": "compile_host", "msg": f"loading the library failed: {err}"[-4000:]}
    finally:
        os.remove(lib_path)
    ref = _load_reference(ref_path) if ref_path else {}
    args, outputs = make_arguments(arg_specs, ref, dev)
    try:
        if check_correctness and ref:
            module[module.entry_name](*args)
            dev.sync()
            mismatch = output_mismatch(args, ref, outputs, rtol, atol)
            if mismatch:
                return {"error": "wrong_answer", "msg": mismatch}
        # time_evaluator synchronises the device around each repeat; the CPU cache flush has no GPU meaning
        flush = eval_cfg.enable_cpu_cache_flush and device_type == "cpu"
        outcome = evaluate(time_fn_for(module, dev, args, flush), eval_cfg)
    except Exception as err:  # noqa: BLE001
        return {"error": "runtime_device", "msg": f"{type(err).__name__}: {err}\n{traceback.format_exc()}"[-4000:]}
    return {"costs": outcome.costs, "runs": outcome.runs, "cv": outcome.cv, "time": time.perf_counter() - t0}
