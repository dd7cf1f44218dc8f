"""The deployed dynamic kernel: every selected micro-kernel in one compiled module plus the C dispatcher.

``DynamicKernel(t, a, b)`` asks the C decision tree which micro-kernel serves ``t`` and runs it; every kernel pads
locally, so any positive T is correct (outside the tuned range it warns). ``export(directory)`` writes the kernels'
library, the dispatcher's C source and library and a JSON manifest. It sizes TVM's thread pool to every usable core
(``adatune.target.size_tvm_thread_pool``), as when the kernels were measured.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import numpy as np
import tvm

from .. import target as _target
from ..codegen import vector_math
from ._dispatch import CompiledDispatcher, ShapeDispatcher, check_extent
from ._schedule import aligned_versions, serving_name, versioned_funcs
from ._space import MicroKernel, device_of
from ._workloads import DynamicWorkload

__all__ = ["DynamicKernel", "kernel_name"]


def kernel_name(workload: DynamicWorkload, index: int) -> str:
    return f"{workload.name}_mk{index}"


class DynamicKernel:
    """Selected micro-kernels (``kernels[i]`` serves dispatcher label ``i``) compiled once for all T."""

    def __init__(
        self,
        workload: DynamicWorkload,
        kernels: list[MicroKernel],
        dispatcher: ShapeDispatcher,
        target: _target.TargetLike,
        directory: str | None = None,
    ):
        if [k.key for k in kernels] != list(dispatcher.labels):
            raise ValueError("kernels must follow the dispatcher's labels, in order")
        self.workload = workload
        self.kernels = list(kernels)
        self.dispatcher = dispatcher
        self.target = _target.create(target)
        _target.size_tvm_thread_pool()  # before its kernels first run: TVM sizes its pool once, when it starts
        self.names = [kernel_name(workload, i) for i in range(len(kernels))]
        self.aligns = aligned_versions(workload, self.kernels, dispatcher.aligned)
        mod = tvm.IRModule(versioned_funcs(workload, self.kernels, self.names, self.aligns))
        with self.target:
            self.lib, self.link = vector_math.compile_module(mod, self.target)
        self.directory = directory or tempfile.mkdtemp(prefix=f"dietcode-{workload.name}-")
        self.c_dispatcher = CompiledDispatcher(dispatcher, f"{workload.name}_dispatch", self.directory)
        self.device = device_of(self.target)
        self._funcs: dict[str, Any] = {}

    def index(self, t: Any) -> int:
        """The micro-kernel for ``t``, as the compiled C dispatcher says."""
        return self.c_dispatcher.index(check_extent(t, self.dispatcher.t_range))

    def function_name(self, t: Any) -> str:
        """The module function serving ``t``: its kernel's aligned version where ``t`` is a multiple of its
        alignment, else the kernel."""
        i = self.index(t)
        return serving_name(self.names[i], self.aligns[i], int(t))

    def function(self, t: Any) -> Any:
        """The packed function serving ``t`` (``function_name``); call it as ``f(a, b, c, t)`` on device tensors."""
        name = self.function_name(t)
        if name not in self._funcs:  # a module lookup costs a few microseconds: once per function
            self._funcs[name] = self.lib[name]
        return self._funcs[name]

    def run(self, t: int, a: Any, b: Any, c: Any) -> None:
        """Run on device tensors (no copies): what a model calls between its other operators."""
        self.function(t)(a, b, c, t)

    def __call__(self, t: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """numpy in, numpy out: ``C`` for extent ``t`` (a dense weight may come ``[K, N]``; it is packed here)."""
        t = check_extent(t)
        shapes = self.workload.shapes(t)
        if self.workload.b_panel and tuple(b.shape) == tuple(self.workload.dims):
            b = self.workload.pack_b(b)
        if tuple(a.shape) != shapes[0] or tuple(b.shape) != shapes[1]:
            raise ValueError(
                f"{self.workload.name} at T={t} takes inputs of shapes {shapes[0]} and {shapes[1]}, "
                f"got {a.shape} and {b.shape}"
            )
        fn = self.function(t)
        dev = self.device
        c = tvm.runtime.tensor(np.zeros(shapes[2], self.workload.dtype), dev)
        fn(
            tvm.runtime.tensor(np.ascontiguousarray(a, self.workload.dtype), dev),
            tvm.runtime.tensor(np.ascontiguousarray(b, self.workload.dtype), dev),
            c,
            t,
        )
        return c.numpy()

    def export(self, directory: str) -> str:
        """Write ``kernels.so``, the dispatcher's C source and ``lib*.so``, and ``manifest.json``; returns its path."""
        os.makedirs(directory, exist_ok=True)
        self.lib.export_library(os.path.join(directory, "kernels.so"), options=self.link)
        CompiledDispatcher(self.dispatcher, f"{self.workload.name}_dispatch", directory)
        manifest = {
            "workload": self.workload.to_json(),
            "target": _target.to_json(self.target),
            "functions": self.names,
            # functions[i] + "_a<u>" serves T where T % aligned[i] == 0 (0: no aligned version)
            "aligned": self.aligns,
            "kernels": [k.to_json() for k in self.kernels],
            "dispatcher": self.dispatcher.to_json(),
            "dispatch_symbol": f"{self.workload.name}_dispatch",
        }
        path = os.path.join(directory, "manifest.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1)
        return path
