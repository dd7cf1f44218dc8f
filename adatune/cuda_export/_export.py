"""A batch of CUDA candidates written out for a GPU machine without TVM: a ``.cu`` file per candidate, inputs and
reference outputs, a ``manifest.json`` (how to launch each kernel, which record each result completes) and a copy
of ``cupy_runner.py``. Candidates that break the device's limits or cannot be exported stay in the manifest with
their error, so the tuner never proposes them again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import target as _target
from ..measure import MeasureErrorNo
from ..measure._worker import gpu_limit_violation
from ..measure.device_limits import DeviceLimits
from ..task import TuningTask
from . import cupy_runner
from ._kernel import export_candidate

__all__ = ["export_batch", "logged_keys", "select_candidates", "record_stub", "tolerances", "write_reference"]


def record_stub(task: TuningTask, candidate: Any) -> dict:
    """The version-2 record of ``candidate`` without its result (``adatune.records`` writes the same keys)."""
    data = candidate.to_json()
    return {
        "v": 2,
        "target": _target.to_json(task.target),
        "task": [task.name, json.loads(task.workload_key)[1]],
        "kind": data.get("kind", "knob"),
        "key": str(candidate.key),
        "config": data,
    }


def tolerances(task: TuningTask) -> tuple[float, float]:
    """``(rtol, atol)`` of the correctness check, by the outputs' precision as ``LocalRunner`` picks them."""
    low = any(s.dtype in ("float16", "bfloat16") for s in task.arg_specs if s.is_output)
    return (5e-2, 5e-2) if low else (1e-3, 1e-3)


def logged_keys(task: TuningTask, log_path: str | os.PathLike | None) -> set[str]:
    """Keys of ``task``'s candidates already in a records log (version 1 or 2; other tasks' lines skipped)."""
    keys: set[str] = set()
    if log_path is None or not os.path.exists(log_path):
        return keys
    args = json.loads(task.workload_key)[1]
    with open(log_path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                name, largs = d["task"]
                key = str(d["key"]) if d.get("v") == 2 else str(int(d["config"]["index"]))
            except (ValueError, KeyError, TypeError) as err:
                raise ValueError(f"{log_path}:{n} is not an adatune record: {err}") from None
            if name == task.name and json.loads(json.dumps(largs)) == args:
                keys.add(key)
    return keys


def select_candidates(task: TuningTask, n: int, seed: int = 0, exclude: set[str] | None = None) -> list[Any]:
    """``n`` random candidates of the task's space not in ``exclude`` (fewer when the space runs out)."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return list(task.space.random_candidates(np.random.default_rng(seed), n, exclude or set()))


def _reference(task: TuningTask) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)  # the seeded inputs LocalRunner checks with
    inputs = [rng.uniform(-1, 1, size=s.shape).astype(s.dtype) for s in task.arg_specs if not s.is_output]
    outputs = task.reference_outputs(inputs)
    if outputs is None:
        raise ValueError(f"task {task.name} has no numpy reference: its results could not be checked on the GPU")
    arrays, it_in, it_out = {}, iter(inputs), iter(outputs)
    for i, spec in enumerate(task.arg_specs):
        arrays[f"out{i}" if spec.is_output else f"in{i}"] = next(it_out) if spec.is_output else next(it_in)
    return arrays


def write_reference(task: TuningTask, path: str | os.PathLike) -> None:
    """Write the task's seeded inputs and numpy reference outputs to ``path`` (an ``.npz``), for batches that
    share one (``export_batch(..., reference=...)``): a 1024^3 GEMM's arrays are 12 MB a copy."""
    np.savez(os.fspath(path), **_reference(task))  # type: ignore[arg-type]


def export_batch(
    task: TuningTask,
    candidates: Sequence[Any],
    out_dir: str | os.PathLike,
    device_limits: DeviceLimits | None = None,
    reference: str | None = None,
) -> dict:
    """Write the batch into ``out_dir`` (created; an existing manifest there is an error) and return the
    manifest. ``reference``: a path relative to ``out_dir`` of a file ``write_reference`` wrote for this task,
    shared instead of a copy of its own."""
    out = os.fspath(out_dir)
    if os.path.exists(os.path.join(out, "manifest.json")):
        raise FileExistsError(f"{out} already holds a batch (manifest.json): choose a new folder")
    if not candidates:
        raise ValueError("no candidates to export")
    os.makedirs(os.path.join(out, "kernels"), exist_ok=True)
    if reference is not None and not os.path.exists(os.path.join(out, reference)):
        raise ValueError(f"reference {reference!r} is not there relative to {out}: write it with write_reference")
    if reference is None:
        reference = "reference.npz"
        write_reference(task, os.path.join(out, reference))
    rtol, atol = tolerances(task)
    entries = []
    for cand in candidates:
        entry: dict[str, Any] = {"key": str(cand.key), "record": record_stub(task, cand)}
        try:
            mod = task.scheduled_module(cand)
            broken = gpu_limit_violation(mod, device_limits.verify_gpu_code_kwargs()) if device_limits else ""
            if broken:
                msg = f"breaks the limits of {device_limits.name}: {broken}"  # type: ignore[union-attr]
                entry["error"] = {"error_no": int(MeasureErrorNo.INSTANTIATION_ERROR), "msg": msg}
            else:
                source, launch = export_candidate(task, cand)
                path = os.path.join("kernels", f"{cand.key}.cu")
                with open(os.path.join(out, path), "w") as f:
                    f.write(source)
                entry["source"], entry["launch"] = path, launch.to_json()
        except Exception as err:  # noqa: BLE001 - a candidate that cannot be exported is recorded as such
            msg = f"{type(err).__name__}: {err}"
            entry["error"] = {"error_no": int(MeasureErrorNo.INSTANTIATION_ERROR), "msg": msg}
        entries.append(entry)
    manifest = {
        "format": "adatune-cuda-batch",
        "version": 1,
        "task": [task.name, json.loads(task.workload_key)[1]],
        "target": _target.to_json(task.target),
        "flop": task.flop,
        "arg_specs": [s.to_json() for s in task.arg_specs],
        "reference": reference,
        "rtol": rtol,
        "atol": atol,
        "device_limits": device_limits.to_json() if device_limits else None,
        "candidates": entries,
    }
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    cupy_runner.copy_runner(out)
    return manifest
