"""Builders: turn measure inputs into shared libraries, returned as bytes so they can travel to another machine.

``LocalBuilder`` keeps a warm pool of workers (TVM 0.27's starts fresh processes per call and pays TVM's imports
each time); candidates are applied in the parent and only the scheduled IRModule travels. A CUDA candidate that
breaks the runner's device limits is rejected before it is compiled.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import shutil
import tempfile
import time
from collections.abc import Sequence

from tvm.support.popen_pool import PopenPoolExecutor

from . import _worker
from ._prepack import split_constant_packing
from ._types import BuildResult, CallPlan, MeasureErrorNo, MeasureInput
from .device_limits import DeviceLimits

__all__ = ["Builder", "LocalBuilder", "NoBuilder"]

logger = logging.getLogger("adatune.measure")
_SPLIT_FAILED: set[str] = set()  # tasks already warned about


class Builder(abc.ABC):
    """Builds a batch of candidates; failures come back as ``BuildResult`` errors, never as exceptions."""

    @abc.abstractmethod
    def build(self, inputs: Sequence[MeasureInput], device_limits: DeviceLimits | None = None) -> list[BuildResult]:
        """One result per input, in order; ``device_limits`` come from the runner (None: no device checks)."""

    def close(self) -> None:
        """Release worker processes and temporary files."""


class NoBuilder(Builder):
    """For runners that need no artifact (the replay runner)."""

    def build(self, inputs: Sequence[MeasureInput], device_limits: DeviceLimits | None = None) -> list[BuildResult]:
        return [BuildResult(None) for _ in inputs]


def _instantiate(inp: MeasureInput) -> tuple[object | None, CallPlan | None, str]:
    """The scheduled module to build; on a CPU, a constant operand's packing split out so that it runs once,
    before timing, as in a model build (``_prepack``)."""
    task = inp.task
    try:
        mod = task.scheduled_module(inp.config)
    except Exception as err:  # noqa: BLE001 - a bad config is a result
        return None, None, f"{type(err).__name__}: {err}"
    constant = getattr(task, "constant_args", ())
    if not constant or task.target.kind.name != "llvm" or getattr(task, "measure_points", ()):
        return mod, None, ""
    try:
        split, plan = split_constant_packing(mod, task.arg_specs, constant)
    except Exception as err:  # noqa: BLE001 - a split TVM refuses: measure the kernel whole
        if task.name not in _SPLIT_FAILED:
            _SPLIT_FAILED.add(task.name)
            logger.warning("%s: timed with its weight packing (the split failed: %s)", task.name, err)
        return mod, None, ""
    return split, plan, ""


class LocalBuilder(Builder):
    """Compile candidates in ``n_parallel`` warm worker processes, each build limited to ``timeout`` s."""

    def __init__(self, timeout: float = 30.0, n_parallel: int = 2, maximum_process_uses: int = 500):
        if timeout <= 0 or n_parallel < 1:
            raise ValueError(f"LocalBuilder needs timeout > 0 and n_parallel >= 1 (got {timeout}, {n_parallel})")
        self.timeout = float(timeout)
        self.n_parallel = int(n_parallel)
        self._maximum_process_uses = maximum_process_uses
        self._pool: PopenPoolExecutor | None = None
        self._dir = tempfile.mkdtemp(prefix="adatune-build-")

    @property
    def pool(self) -> PopenPoolExecutor:
        if self._pool is None:
            self._pool = PopenPoolExecutor(
                max_workers=self.n_parallel,
                timeout=self.timeout,
                initializer=_worker.warm_up,
                maximum_process_uses=self._maximum_process_uses,
            )
        return self._pool

    def build(self, inputs: Sequence[MeasureInput], device_limits: DeviceLimits | None = None) -> list[BuildResult]:
        results: list[BuildResult | None] = [None] * len(inputs)
        jobs = []
        for i, inp in enumerate(inputs):
            t0 = time.perf_counter()
            mod, plan, err = _instantiate(inp)
            inst_time = time.perf_counter() - t0
            if mod is None:
                results[i] = BuildResult(None, MeasureErrorNo.INSTANTIATION_ERROR, err, inst_time)
                continue
            target = inp.task.target
            if device_limits is not None and target.kind.name == "cuda":
                broken = _worker.gpu_limit_violation(mod, device_limits.verify_gpu_code_kwargs())
                if broken:
                    results[i] = BuildResult(
                        None,
                        MeasureErrorNo.INSTANTIATION_ERROR,
                        f"breaks the limits of {device_limits.name}: {broken}",
                        time.perf_counter() - t0,
                    )
                    continue
            host = target.host.export() if target.host is not None else None
            tjson = dict(target.export())
            tjson.pop("host", None)
            jobs.append((i, inst_time, plan, self.pool.submit(_worker.build_candidate, mod, tjson, host, self._dir)))
        for i, inst_time, plan, fut in jobs:
            results[i] = dataclasses.replace(self._collect(fut, inst_time), calls=plan)
        return [r for r in results if r is not None]

    def _collect(self, fut: object, inst_time: float) -> BuildResult:
        """A candidate's build time is its own instantiation plus compile time, not its wait in the queue."""
        try:
            out: BuildResult = fut.result()  # type: ignore[attr-defined]
        except TimeoutError:
            msg = f"build did not finish within {self.timeout:g} s"
            return BuildResult(None, MeasureErrorNo.BUILD_TIMEOUT, msg, inst_time + self.timeout)
        except ChildProcessError as err:
            return BuildResult(None, MeasureErrorNo.COMPILE_HOST, f"build worker crashed: {err}", inst_time)
        except Exception as err:  # noqa: BLE001
            return BuildResult(None, MeasureErrorNo.UNKNOWN_ERROR, f"{type(err).__name__}: {err}", inst_time)
        return dataclasses.replace(out, time_cost=inst_time + out.time_cost)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        shutil.rmtree(self._dir, ignore_errors=True)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
