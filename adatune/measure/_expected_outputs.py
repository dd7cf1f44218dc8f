"""Reference data for ``check_correctness``, computed as AutoTVM computes it: the task's unscheduled reference
program (``reference_module``), built for the host once per task and run on seeded inputs; inputs and outputs go
to an ``.npz`` file the workers (local or RPC) read.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
import tvm

from .. import target as _target
from ..task import TuningTask
from ._types import MeasurePoint

__all__ = ["ReferenceData"]


class ReferenceData:
    """Per task, a file of seeded inputs and the outputs of a plain host build of the task on them."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="adatune-ref-")
        self._paths: dict[str, str] = {}

    def path(self, task: TuningTask, point: MeasurePoint | None = None) -> str:
        """The task's reference file (at ``point`` of a shape-generic task), computed on first use."""
        key = task.workload_key + (repr(point.scalars) if point is not None else "")
        specs = list(point.arg_specs) if point is not None else task.arg_specs
        if key not in self._paths:
            rng = np.random.default_rng(0)
            inputs = [rng.uniform(-1, 1, size=s.shape).astype(s.dtype) for s in specs if not s.is_output]
            outputs = plain_host_outputs(task, inputs, point)
            arrays, it_in, it_out = {}, iter(inputs), iter(outputs)
            for i, spec in enumerate(specs):
                arrays[f"out{i}" if spec.is_output else f"in{i}"] = next(it_out) if spec.is_output else next(it_in)
            os.makedirs(self._dir, exist_ok=True)  # close() removes it; the runner may be used again
            fd, path = tempfile.mkstemp(suffix=".npz", dir=self._dir)
            os.close(fd)
            np.savez(path, **arrays)  # type: ignore[arg-type]
            self._paths[key] = path
        return self._paths[key]

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)
        self._paths.clear()


def plain_host_outputs(
    task: TuningTask, inputs: list[np.ndarray], point: MeasurePoint | None = None
) -> list[np.ndarray]:
    """The task's outputs on ``inputs`` (at ``point``'s scalars) from its reference program built for the host
    CPU (any ``target`` attribute of its functions dropped, so a CUDA task's program builds for the host too)."""
    _target.size_tvm_thread_pool()  # this run may start TVM's pool in the caller's process: size it as adatune does
    mod = task.reference_module()
    funcs = {gv: f.without_attr("target") if isinstance(f, tvm.tirx.PrimFunc) else f for gv, f in mod.functions.items()}
    lib = tvm.tirx.build(tvm.IRModule(funcs), _target.host())
    dev = tvm.cpu()
    it = iter(inputs)
    specs = list(point.arg_specs) if point is not None else task.arg_specs
    args = [tvm.runtime.tensor(np.zeros(s.shape, s.dtype) if s.is_output else next(it), dev) for s in specs]
    lib["main"](*args, *(point.scalars if point is not None else ()))
    return [a.numpy() for a, s in zip(args, specs) if s.is_output]
