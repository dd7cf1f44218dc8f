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

__all__ = ["warm_up", "build_candidate", "run_candidate", "gpu_limit_violation"]

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
    """Empty when every GPU function of ``mod`` respects ``limits`` (TVM's ``verify_gpu_code``), else why not.

    Launch limits are checked on the scheduled TIR, before lowering or nvcc, so a config that could never
    launch costs nothing to reject."""
    import tvm
    from tvm.s_tir.analysis import verify_gpu_code

    for gv, func in mod.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue
        try:
            lowered = tvm.transform.Sequential(
                [
                    tvm.s_tir.transform.LowerInitBlock(),
                    tvm.s_tir.transform.ConvertBlocksToOpaque(),
                    tvm.s_tir.transform.CompactBufferAllocation(),
                    tvm.s_tir.transform.LowerOpaqueBlock(),
                    tvm.tirx.transform.FlattenBuffer(),
                ]
            )(tvm.IRModule({"main": func}))
            ok = verify_gpu_code(lowered["main"], limits)
        except Exception as err:  # noqa: BLE001 - a function the analysis cannot read is judged at build time
            return "" if "verify" not in str(err).lower() else f"{gv.name_hint}: {err}"
        if not ok:
            return f"{gv.name_hint} needs more threads or shared memory per block than {limits}"
    return ""


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
    try:
        if check_correctness and ref:
            module[module.entry_name](*args)
            dev.sync()
            for i in outputs:
                got = args[i].numpy()
                want = ref[f"out{i}"]
                if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol):
                    diff = float(np.max(np.abs(got.astype(np.float64) - want))) if got.shape == want.shape else -1.0
                    return {
                        "error": "wrong_answer",
                        "msg": f"output {i} differs from the reference (max abs error {diff:.3g}, "
                        f"rtol={rtol}, atol={atol})",
                    }
        outcome = evaluate(time_fn_for(module, dev, args, eval_cfg.enable_cpu_cache_flush), eval_cfg)
    except Exception as err:  # noqa: BLE001
        return {"error": "runtime_device", "msg": f"{type(err).__name__}: {err}\n{traceback.format_exc()}"[-4000:]}
    return {"costs": outcome.costs, "runs": outcome.runs, "cv": outcome.cv, "time": time.perf_counter() - t0}
