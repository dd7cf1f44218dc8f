"""Runners: time built candidates.

``LocalRunner`` runs one candidate at a time in a single persistent worker process, so timings do not
compete with each other and a kernel that crashes or hangs only costs that worker (restarted lazily).
"""

from __future__ import annotations

import abc
import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Sequence

import numpy as np
import tvm
from tvm.support.popen_pool import PopenPoolExecutor

from ..devices import DeviceLimits, limits_of_tvm_device, profile
from ..evaluator import EvaluatorConfig
from ..target import one_blas_thread
from ..task import TuningTask
from . import _worker
from ._types import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult

__all__ = ["Runner", "LocalRunner"]

_KIND = {
    "runtime_device": MeasureErrorNo.RUNTIME_DEVICE,
    "wrong_answer": MeasureErrorNo.WRONG_ANSWER,
    "compile_host": MeasureErrorNo.COMPILE_HOST,
}


class Runner(abc.ABC):
    """Times built candidates; failures come back as ``MeasureResult`` errors, never as exceptions."""

    #: False when the runner needs no compiled artifact (the replay runner)
    needs_build = True

    @abc.abstractmethod
    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]: ...

    def with_min_converge_coef(self, coef: float | None) -> Runner:
        """A copy of this runner that uses the adaptive evaluator (None: fixed number of runs)."""
        raise ValueError(f"{type(self).__name__} does not support the adaptive evaluator")

    def device_limits(self, target: object) -> DeviceLimits | None:
        """Limits of the device candidates for ``target`` run on, for builders to check (None: none to check)."""
        return None

    def done_at(self, results: Sequence[MeasureResult], run_seconds: float) -> list[float]:
        """Seconds after the run phase began at which each result was known: the phase's wall time, shared
        out in proportion to each candidate's own run time."""
        own = [max(r.run_time, 0.0) for r in results]
        total = sum(own)
        out, acc = [], 0.0
        for t in own:
            acc += t / total * run_seconds if total > 0 else run_seconds / max(len(own), 1)
            out.append(acc)
        return out

    def close(self) -> None:
        """Release worker processes and temporary files."""


def _device_type(task: TuningTask) -> str:
    return "cuda" if task.target_kind == "cuda" else "cpu"


class LocalRunner(Runner):
    """Measure on this machine.

    ``number`` runs are averaged per repeat, ``repeat`` values are reported; ``min_repeat_ms`` raises
    ``number`` for very fast kernels; ``cooldown_interval`` sleeps between candidates;
    ``enable_cpu_cache_flush`` flushes caches before each run (cold-cache timing);
    ``check_correctness`` compares each candidate's output with the reference before timing it;
    ``min_converge_coef`` enables AdaTune's adaptive evaluator (see ``adatune.evaluator``);
    ``device_profile`` names the GPU whose per-block limits CUDA candidates are checked against before they
    are built (``adatune.devices.PROFILES``: "h100", "a100", ...), for machines without that GPU.
    """

    def __init__(
        self,
        number: int = 5,
        repeat: int = 3,
        min_repeat_ms: float = 0.0,
        timeout: float = 10.0,
        cooldown_interval: float = 0.0,
        enable_cpu_cache_flush: bool = False,
        check_correctness: bool = False,
        min_converge_coef: float | None = None,
        micro_batch: int = 50,
        min_micro_batches: int = 3,
        rtol: float | None = None,
        atol: float | None = None,
        device_profile: str | None = None,
    ):
        if timeout <= 0:
            raise ValueError(f"LocalRunner timeout must be positive, got {timeout}")
        self.eval_config = EvaluatorConfig(
            number, repeat, min_repeat_ms, enable_cpu_cache_flush, min_converge_coef, micro_batch, min_micro_batches
        )
        self.timeout = float(timeout)
        self.cooldown_interval = float(cooldown_interval)
        self.check_correctness = bool(check_correctness)
        self.rtol, self.atol = rtol, atol
        self.profile_limits = profile(device_profile) if device_profile is not None else None
        self._pool: PopenPoolExecutor | None = None
        self._dir = tempfile.mkdtemp(prefix="adatune-ref-")
        self._refs: dict[str, str] = {}

    def with_min_converge_coef(self, coef: float | None) -> LocalRunner:
        other = LocalRunner.__new__(LocalRunner)
        other.__dict__.update(self.__dict__)
        other.eval_config = dataclasses.replace(self.eval_config, min_converge_coef=coef)
        other._pool, other._dir, other._refs = None, tempfile.mkdtemp(prefix="adatune-ref-"), {}
        return other

    def device_limits(self, target: object) -> DeviceLimits | None:
        """For CUDA targets: the named profile's limits when one was given, else the real device's when this
        machine has one (else None: nothing to check)."""
        kind = getattr(getattr(target, "kind", None), "name", None)
        if kind == "cuda" and self.profile_limits is not None:
            return self.profile_limits
        if kind != "cuda" or not tvm.runtime.enabled("cuda"):
            return None
        dev = tvm.cuda(0)
        return limits_of_tvm_device(dev) if dev.exist else None

    @property
    def pool(self) -> PopenPoolExecutor:
        if self._pool is None:
            # the worker's first task also pays `import tvm`; give it that on top of the kernel timeout
            self._pool = PopenPoolExecutor(max_workers=1, timeout=self.timeout, initializer=_worker.warm_up)
        return self._pool

    def tolerances(self, task: TuningTask) -> tuple[float, float]:
        """``(rtol, atol)`` of the correctness check: as given, else by the outputs' precision (a half-precision
        sum of a few hundred products is off by ~1e-2 from the reference, a float32 one by ~1e-5)."""
        dtypes = {s.dtype for s in task.arg_specs if s.is_output}
        low = any(d in ("float16", "bfloat16") for d in dtypes)
        default = 5e-2 if low else 1e-3
        return (self.rtol if self.rtol is not None else default, self.atol if self.atol is not None else default)

    # -- reference data ---------------------------------------------------------------------------
    def reference_path(self, task: TuningTask) -> str:
        """Seeded inputs and expected outputs for ``task``, computed once and shared with the worker."""
        key = task.workload_key
        if key not in self._refs:
            rng = np.random.default_rng(0)
            inputs = [rng.uniform(-1, 1, size=s.shape).astype(s.dtype) for s in task.arg_specs if not s.is_output]
            with one_blas_thread():  # BLAS workers left spinning here would share the cores with the timed worker
                outputs = task.reference_outputs(inputs)
            if outputs is None:
                outputs = _run_unscheduled(task, inputs)
            arrays, it_in, it_out = {}, iter(inputs), iter(outputs)
            for i, spec in enumerate(task.arg_specs):
                arrays[f"out{i}" if spec.is_output else f"in{i}"] = next(it_out) if spec.is_output else next(it_in)
            os.makedirs(self._dir, exist_ok=True)  # close() removes it; the runner may be used again
            fd, path = tempfile.mkstemp(suffix=".npz", dir=self._dir)
            os.close(fd)
            np.savez(path, **arrays)  # type: ignore[arg-type]
            self._refs[key] = path
        return self._refs[key]

    # -- running ----------------------------------------------------------------------------------
    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        results = []
        for k, (inp, build) in enumerate(zip(inputs, builds)):
            if build.error_no != MeasureErrorNo.NO_ERROR:
                results.append(
                    MeasureResult(
                        (), build.error_no, build.time_cost, time.time(), build.error_msg, build_time=build.time_cost
                    )
                )
                continue
            if k and self.cooldown_interval > 0:
                time.sleep(self.cooldown_interval)
            results.append(self._run_one(inp, build))
        return results

    def _run_one(self, inp: MeasureInput, build: BuildResult) -> MeasureResult:
        task = inp.task
        ref = self.reference_path(task) if self.check_correctness else None
        specs = [s.to_json() for s in task.arg_specs]
        t0 = time.perf_counter()
        fut = self.pool.submit(
            _worker.run_candidate,
            build.artifact,
            build.suffix,
            _device_type(task),
            specs,
            ref,
            self.check_correctness,
            self.eval_config,
            *self.tolerances(task),
        )
        err_no, msg, out = MeasureErrorNo.NO_ERROR, "", None
        try:
            out = fut.result()
        except TimeoutError:
            err_no, msg = MeasureErrorNo.RUN_TIMEOUT, f"run did not finish within {self.timeout:g} s"
        except ChildProcessError as err:
            err_no, msg = MeasureErrorNo.RUNTIME_DEVICE, f"the kernel crashed its worker process ({err})"
        except Exception as err:  # noqa: BLE001
            err_no, msg = MeasureErrorNo.UNKNOWN_ERROR, f"{type(err).__name__}: {err}"
        run_time = time.perf_counter() - t0
        if out is not None and "error" in out:
            err_no, msg = _KIND.get(out["error"], MeasureErrorNo.UNKNOWN_ERROR), out["msg"]
        if err_no != MeasureErrorNo.NO_ERROR or out is None:
            return MeasureResult(
                (), err_no, build.time_cost + run_time, time.time(), msg, build_time=build.time_cost, run_time=run_time
            )
        return MeasureResult(
            tuple(out["costs"]),
            MeasureErrorNo.NO_ERROR,
            build.time_cost + run_time,
            time.time(),
            build_time=build.time_cost,
            run_time=run_time,
            runs=int(out["runs"]),
            cv=out["cv"],
        )

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        shutil.rmtree(self._dir, ignore_errors=True)
        self._refs.clear()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _run_unscheduled(task: TuningTask, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Reference outputs from the unscheduled TIR function, compiled for the host CPU."""
    from .. import target as _target

    lib = tvm.tirx.build(task.unscheduled_module(), _target.host())
    dev = tvm.cpu()
    it = iter(inputs)
    args = [tvm.runtime.tensor(np.zeros(s.shape, s.dtype) if s.is_output else next(it), dev) for s in task.arg_specs]
    lib["main"](*args)
    return [a.numpy() for a, s in zip(args, task.arg_specs) if s.is_output]
