"""One scheduled CUDA candidate as what a machine without TVM needs to launch it: TVM's CUDA C source, the kernel's
name, its grid and block (from the thread bindings), and which task argument each kernel parameter is (TVM names
them ``<buffer>_ptr`` and orders them its own way, so they are mapped back by buffer name).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

import tvm

from ..measure._worker import thread_extents
from ..task import TuningTask

__all__ = ["KernelLaunch", "cuda_source", "kernel_launch", "parse_kernels"]

_KERNEL_RE = re.compile(
    r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\((\d+)\)\s+)?(\w+)\s*\(([^)]*)\)\s*\{', re.S
)


@dataclass(frozen=True)
class KernelLaunch:
    """How to launch one exported kernel: ``arg_order[k]`` is the task argument (index into
    ``task.arg_specs``) passed as the kernel's ``k``-th parameter."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    arg_order: tuple[int, ...]
    dynamic_shared_memory: int
    launch_bounds: int | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def cuda_source(mod: tvm.IRModule, target: tvm.target.Target) -> str:
    """The CUDA C source TVM generates for ``mod`` (no nvcc, no driver, no GPU needed)."""
    with target:
        lib = tvm.tirx.build(mod, target)
    for sub in lib.imports:
        for fmt in ("", "cu"):  # the default format of a CUDA module is its source; "cu" once nvcc compiled it
            try:
                src = str(sub.inspect_source(fmt))
            except Exception:  # noqa: BLE001 - a module without that format
                continue
            if "__global__" in src:
                return src
    raise ValueError("TVM produced no CUDA kernel source for this module (is the target CUDA?)")


def parse_kernels(source: str) -> list[tuple[str, int | None, list[str]]]:
    """``(name, launch_bounds, parameter names)`` of every kernel defined in ``source``, in order."""
    out = []
    for bounds, name, params in _KERNEL_RE.findall(source):
        names = [p.strip().split()[-1].lstrip("*") for p in params.split(",") if p.strip()]
        out.append((name, int(bounds) if bounds else None, names))
    return out


def kernel_launch(mod: tvm.IRModule, source: str) -> KernelLaunch:
    """Launch description of the single kernel of ``mod`` (``ValueError`` for what cannot be launched
    without TVM: several kernels, dynamic shared memory, symbolic shapes, an unknown parameter)."""
    kernels = parse_kernels(source)
    if len(kernels) != 1:
        raise ValueError(f"expected one CUDA kernel, the source defines {len(kernels)}: {[k[0] for k in kernels]}")
    if "extern __shared__" in source:
        raise ValueError("the kernel uses dynamic shared memory, whose size is not exported yet")
    name, bounds, params = kernels[0]
    func = mod["main"]
    by_name = {}
    for i, param in enumerate(func.params):
        by_name[f"{param.name}_ptr"] = i
        by_name[str(param.name)] = i
    try:
        order = tuple(by_name[p] for p in params)
    except KeyError as err:
        raise ValueError(
            f"kernel parameter {err.args[0]!r} is none of the PrimFunc's buffers {[str(p.name) for p in func.params]}"
            " (symbolic shapes are not exported)"
        ) from None
    ext = thread_extents(mod)
    grid = (ext.get("blockIdx.x", 1), ext.get("blockIdx.y", 1), ext.get("blockIdx.z", 1))
    block = (ext.get("threadIdx.x", 1), ext.get("threadIdx.y", 1), ext.get("threadIdx.z", 1))
    if bounds is not None and block[0] * block[1] * block[2] != bounds:
        raise ValueError(f"block {block} disagrees with the kernel's __launch_bounds__({bounds})")
    return KernelLaunch(name, grid, block, order, 0, bounds)


def export_candidate(task: TuningTask, candidate: Any) -> tuple[str, KernelLaunch]:
    """Source and launch description of one candidate of a CUDA task."""
    if task.target.kind.name != "cuda":
        raise ValueError(f"task {task.name} targets {task.target.kind.name}, not cuda: nothing to export")
    mod = task.scheduled_module(candidate)
    source = cuda_source(mod, task.target)
    return source, kernel_launch(mod, source)
