"""Runners: time built candidates. ``LocalRunner`` runs one candidate at a time in a persistent worker, so timings
do not compete and a crash or hang costs only that worker. Local and RPC runners share ``WorkerRunner``: one
``RunnerConfig``, the reference data, and the results made of the workers' typed outcomes."""

from __future__ import annotations

import abc
import copy
import time
from collections.abc import Sequence
from typing import Any

import tvm
from tvm.support.popen_pool import PopenPoolExecutor

from ..task import TuningTask
from . import _worker
from ._config import RunnerConfig, with_options_signature
from ._expected_outputs import ReferenceData
from ._types import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult, RunOutcome, RunRequest
from .device_limits import DeviceLimits, limits_of_tvm_device
from .evaluator import EvaluatorConfig

__all__ = ["Runner", "WorkerRunner", "LocalRunner", "WORKER_USES"]

#: candidates one runner worker process times before it is replaced: every loaded kernel library stays mapped in the
#: process (up to ~0.5 MB per candidate), so a long sweep would exhaust memory; a fresh worker costs about a second
WORKER_USES = 512


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
        """Seconds from the run phase's start to each result: the phase's wall time split in proportion to run times."""
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


def build_failure(build: BuildResult) -> MeasureResult:
    """The result of a candidate that was never run because its build failed."""
    return RunOutcome(build.error_no, build.error_msg).result(build)


class WorkerRunner(Runner):
    """A runner whose worker processes check and time candidates as its ``RunnerConfig`` (``options``, flat) says."""

    #: True when a candidate's run time is its worker's own (an RPC worker's wait for a server is not counted)
    worker_clock = False

    @with_options_signature
    def __init__(self, **options: Any):
        self.config = RunnerConfig.of(**options)
        self.references = ReferenceData()
        self._pool: PopenPoolExecutor | None = None

    @property
    def eval_config(self) -> EvaluatorConfig:
        return self.config.evaluator

    @property
    def timeout(self) -> float:
        return self.config.timeout

    def with_min_converge_coef(self, coef: float | None) -> WorkerRunner:
        other = copy.copy(self)
        other.config = self.config.with_min_converge_coef(coef)
        other.references, other._pool = ReferenceData(), None
        return other

    def request(self, inp: MeasureInput, build: BuildResult) -> RunRequest:
        """What a worker needs to check and time ``build`` (the reference is computed here, once per task)."""
        task, cfg = inp.task, self.config
        assert build.artifact is not None, "only successful builds are run"
        points = [
            (
                p.scalars,
                [s.to_json() for s in p.arg_specs],
                self.references.path(task, p) if cfg.check_correctness else None,
            )
            for p in getattr(task, "measure_points", ())
        ]
        return RunRequest(
            build.artifact,
            build.suffix,
            _device_type(task),
            [s.to_json() for s in task.arg_specs],
            self.references.path(task) if cfg.check_correctness and not points else None,
            *cfg.tolerances(task),
            points,
            build.calls,
        )

    def collect(self, fut: Any, build: BuildResult, t0: float, late: str = "", died: str = "") -> MeasureResult:
        """A submitted candidate's result: its worker's outcome, else ``late`` (none in time) or ``died`` as error."""
        try:
            out: RunOutcome = fut.result()
        except TimeoutError:
            out = RunOutcome(MeasureErrorNo.RUN_TIMEOUT, late or f"run did not finish within {self.timeout:g} s")
        except ChildProcessError as err:
            died = died or "the kernel crashed its worker process"
            out = RunOutcome(MeasureErrorNo.RUNTIME_DEVICE, f"{died} ({err})")
        except Exception as err:  # noqa: BLE001
            out = RunOutcome(MeasureErrorNo.UNKNOWN_ERROR, f"{type(err).__name__}: {err}")
        wall = time.perf_counter() - t0
        return out.result(build, out.seconds if self.worker_clock and out.seconds else wall)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self.references.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class LocalRunner(WorkerRunner):
    """Measure on this machine, one candidate at a time, in one worker process (options: ``RunnerConfig``)."""

    def device_limits(self, target: object) -> DeviceLimits | None:
        """For CUDA: the named profile's limits if given, else this machine's device's (None: nothing to check)."""
        kind = getattr(getattr(target, "kind", None), "name", None)
        if kind == "cuda" and self.config.profile_limits is not None:
            return self.config.profile_limits
        if kind != "cuda" or not tvm.runtime.enabled("cuda"):
            return None
        dev = tvm.cuda(0)
        return limits_of_tvm_device(dev) if dev.exist else None

    @property
    def pool(self) -> PopenPoolExecutor:
        if self._pool is None:
            self._pool = PopenPoolExecutor(
                max_workers=1,
                timeout=self.timeout,
                initializer=_worker.warm_up,
                maximum_process_uses=WORKER_USES,
            )
        return self._pool

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        results = []
        for k, (inp, build) in enumerate(zip(inputs, builds)):
            if build.error_no != MeasureErrorNo.NO_ERROR:
                results.append(build_failure(build))
                continue
            if k and self.config.cooldown_interval > 0:
                time.sleep(self.config.cooldown_interval)
            req = self.request(inp, build)
            t0 = time.perf_counter()
            results.append(self.collect(self.pool.submit(_worker.run_candidate, req, self.config), build, t0))
        return results
