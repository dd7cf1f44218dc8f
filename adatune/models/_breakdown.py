"""Where a compiled model's time goes: every call the Relax VM makes (fused kernels and builtins), timed one by one.
The instrument adds Python overhead, so the end-to-end latency is timed separately and "outside the kernels" is
that latency less the kernels' sum.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import relax

from .. import target as _target
from ._build import CompiledModel
from ._latency import compiled_latency

__all__ = ["CallTime", "KernelBreakdown", "kernel_breakdown"]

_NO_OP = 0  # tvm.runtime.vm.VMInstrumentReturnKind.NO_OP: run the call as usual


@dataclass
class CallTime:
    """One function the VM calls: how often per inference and its median seconds per inference."""

    symbol: str
    calls: int
    seconds: float


@dataclass
class KernelBreakdown:
    end_to_end: float  # median seconds per inference, uninstrumented
    calls: list[CallTime] = field(default_factory=list)  # slowest first

    @property
    def kernels(self) -> float:
        """Seconds per inference inside the model's own functions (the fused kernels)."""
        return sum(c.seconds for c in self.calls if not c.symbol.startswith("vm.builtin"))

    @property
    def builtins(self) -> float:
        """Seconds per inference in the VM's builtins (allocation, shape and copy helpers)."""
        return sum(c.seconds for c in self.calls if c.symbol.startswith("vm.builtin"))

    @property
    def outside(self) -> float:
        """End-to-end latency not spent in any timed call: dispatch between calls, the instrument's own cost."""
        return self.end_to_end - self.kernels - self.builtins

    def table(self, top: int = 15) -> str:
        rows = [
            f"end to end {self.end_to_end * 1e3:.3f} ms: kernels {self.kernels * 1e3:.3f} ms, VM builtins "
            f"{self.builtins * 1e3:.3f} ms, outside calls {self.outside * 1e3:.3f} ms",
            f"{'calls':>5} {'ms':>9} {'share':>6}  function",
        ]
        for c in self.calls[:top]:
            rows.append(f"{c.calls:>5} {c.seconds * 1e3:>9.3f} {c.seconds / self.end_to_end:>6.1%}  {c.symbol}")
        return "\n".join(rows)


def kernel_breakdown(compiled: CompiledModel, inputs: Sequence[np.ndarray], repeats: int = 10) -> KernelBreakdown:
    """Time every VM call of ``repeats`` inferences (after one warm-up) and the uninstrumented latency."""
    compiled.model.check_inputs(inputs)
    vm = relax.VirtualMachine(compiled.executable, tvm.cpu())  # the compiled model's own VM stays uninstrumented
    args = [tvm.runtime.tensor(a, tvm.cpu()) for a in inputs]
    started: list[float] = []
    run: dict[str, list[float]] = {}
    counts: dict[str, int] = {}

    def instrument(func: Any, symbol: str, before: bool, ret: Any, *call_args: Any) -> int:
        now = time.perf_counter()
        if before:
            started.append(now)
        else:
            # a kernel whose constant weight was packed at build is compiled as "<function>_prepacked"
            run.setdefault(str(symbol).removesuffix("_prepacked"), []).append(now - started.pop())
        return _NO_OP

    vm.set_instrument(instrument)
    with _target.tvm_main_thread():  # placed as ``compiled.main`` runs the uninstrumented latency
        vm["main"](*args)  # warm-up: pools, caches, the first allocation
    per_run: dict[str, list[float]] = {}
    for _ in range(repeats):
        run.clear()
        with _target.tvm_main_thread():
            vm["main"](*args)
        for symbol, times in run.items():
            per_run.setdefault(symbol, []).append(sum(times))
            counts[symbol] = len(times)
    calls = [CallTime(s, counts[s], statistics.median(t)) for s, t in per_run.items()]
    calls.sort(key=lambda c: -c.seconds)
    return KernelBreakdown(compiled_latency(compiled, inputs, max(repeats, 10)), calls)
