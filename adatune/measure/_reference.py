"""Reference data for ``check_correctness``, computed as AutoTVM computes it.

AutoTVM's runners build the task with its default schedule for the host CPU, run that build on random
inputs and compare every candidate's outputs with it. Here the task's unscheduled program (TVM's default
lowering, whatever the candidate kind) is built for the host once per task, on seeded inputs; the inputs and
its outputs go to an ``.npz`` file that the workers (local or RPC) read.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
import tvm

from .. import target as _target
from ..task import TuningTask

__all__ = ["ReferenceData"]


class ReferenceData:
    """Per task, a file of seeded inputs and the outputs of a plain host build of the task on them."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="adatune-ref-")
        self._paths: dict[str, str] = {}

    def path(self, task: TuningTask) -> str:
        """The task's reference file, computed on first use."""
        key = task.workload_key
        if key not in self._paths:
            rng = np.random.default_rng(0)
            inputs = [rng.uniform(-1, 1, size=s.shape).astype(s.dtype) for s in task.arg_specs if not s.is_output]
            outputs = plain_host_outputs(task, inputs)
            arrays, it_in, it_out = {}, iter(inputs), iter(outputs)
            for i, spec in enumerate(task.arg_specs):
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


def plain_host_outputs(task: TuningTask, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The task's outputs on ``inputs`` from its unscheduled program built for the host CPU (any ``target``
    attribute of its functions dropped, so a CUDA task's program builds for the host too)."""
    mod = task.unscheduled_module()
    funcs = {gv: f.without_attr("target") if isinstance(f, tvm.tirx.PrimFunc) else f for gv, f in mod.functions.items()}
    lib = tvm.tirx.build(tvm.IRModule(funcs), _target.host())
    dev = tvm.cpu()
    it = iter(inputs)
    args = [tvm.runtime.tensor(np.zeros(s.shape, s.dtype) if s.is_output else next(it), dev) for s in task.arg_specs]
    lib["main"](*args)
    return [a.numpy() for a, s in zip(args, task.arg_specs) if s.is_output]
