"""AdaptiveRunner: meta_schedule's runner with AdaTune's adaptive evaluator, in one isolated, persistent worker.

The stock ``LocalRunner`` always spends ``number * repeat`` runs; this one times with
``adatune.measure.evaluator.evaluate``, so stable kernels cost a few micro-batches. A candidate that crashes the
worker or outruns ``timeout_sec`` comes back as a ``RunnerResult`` error and the worker is replaced.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.runner import (
    PyRunner,
    PyRunnerFuture,
    RunnerFuture,
    RunnerInput,
    RunnerResult,
)
from tvm.support.popen_pool import PopenPoolExecutor

from ..measure import WORKER_USES, MeasureErrorNo
from ..measure.evaluator import EvaluatorConfig
from ._worker import run_artifact, warm_runner

__all__ = ["AdaptiveRunner", "error_kind"]

_PREFIX = "AdaptiveRunner: "


def error_kind(error_msg: str | None) -> MeasureErrorNo:
    """The adatune error kind an ``AdaptiveRunner`` (or ``FastBuilder``) error message names."""
    if not error_msg:
        return MeasureErrorNo.NO_ERROR
    head = error_msg.split(": ", 2)
    if len(head) >= 2 and head[1] in MeasureErrorNo.__members__:
        return MeasureErrorNo[head[1]]
    return MeasureErrorNo.UNKNOWN_ERROR


@derived_object
class _AdaptiveFuture(PyRunnerFuture):
    """Turns the worker's outcome (or its death) into a ``RunnerResult`` and records it in the runner's log."""

    def __init__(self, future: concurrent.futures.Future, timeout_sec: float, log: list[dict[str, Any]]):
        super().__init__()
        self.future, self.timeout_sec, self.log = future, timeout_sec, log
        self.outcome: RunnerResult | None = None

    def done(self) -> bool:
        return bool(self.future.done())

    def result(self) -> RunnerResult:
        if self.outcome is not None:
            return self.outcome
        entry: dict[str, Any]
        try:
            value = self.future.result()
        except TimeoutError:
            entry = {
                "error": MeasureErrorNo.RUN_TIMEOUT.name,
                "msg": f"killed after {self.timeout_sec:g} s; a fresh worker takes the next candidate",
            }
        except ChildProcessError as err:
            entry = {
                "error": MeasureErrorNo.RUNTIME_DEVICE.name,
                "msg": f"the worker process died ({err}); a fresh worker takes the next candidate",
            }
        except Exception as err:  # noqa: BLE001 - the worker's exception, with its traceback text
            entry = {"error": MeasureErrorNo.RUNTIME_DEVICE.name, "msg": f"{type(err).__name__}: {err}"}
        else:
            entry = dict(value)
            entry["error"] = None
        self.log.append(entry)
        if entry["error"] is None:
            self.outcome = RunnerResult([float(c) for c in entry["costs"]], None)
        else:
            self.outcome = RunnerResult(None, f"{_PREFIX}{entry['error']}: {entry['msg']}")
        return self.outcome


@derived_object
class AdaptiveRunner(PyRunner):
    """A ``PyRunner`` timing candidates with AdaTune's adaptive evaluator.

    ``run_secs`` of a result holds one mean time per micro-batch. ``log`` keeps, per candidate, the runs spent,
    the final CV and the micro-batch sizes (or the error), in the order results were read.
    ``min_converge_coef=None`` selects the deterministic evaluator (``number`` runs, ``repeat`` times).
    """

    def __init__(
        self,
        min_converge_coef: float | None = 0.1,
        number: int = 20,
        repeat: int = 5,
        micro_batch: int = 10,
        min_micro_batches: int = 3,
        enable_cpu_cache_flush: bool = False,
        timeout_sec: float = 30.0,
    ):
        super().__init__()
        if not timeout_sec > 0:
            raise ValueError(f"AdaptiveRunner: timeout_sec must be positive, got {timeout_sec!r}")
        self.config = EvaluatorConfig(
            number=number,
            repeat=repeat,
            min_converge_coef=min_converge_coef,
            micro_batch=micro_batch,
            min_micro_batches=min_micro_batches,
            enable_cpu_cache_flush=enable_cpu_cache_flush,
        )
        self.timeout_sec = float(timeout_sec)
        self.pool = PopenPoolExecutor(
            max_workers=1, timeout=self.timeout_sec, initializer=warm_runner, maximum_process_uses=WORKER_USES
        )
        self.log: list[dict[str, Any]] = []
        self.n_calls = 0

    def run(self, runner_inputs: list[RunnerInput]) -> list[RunnerFuture]:
        """Queue every input on the worker; results are read (and logged) through the returned futures."""
        self.n_calls += 1
        futures: list[RunnerFuture] = []
        for ri in runner_inputs:
            args_info = tuple(arg.as_json() for arg in ri.args_info)
            job = self.pool.submit(run_artifact, str(ri.artifact_path), str(ri.device_type), args_info, self.config)
            futures.append(_AdaptiveFuture(job, self.timeout_sec, self.log))
        return futures

    def shutdown(self) -> None:
        """Stop the worker now (it also stops when the runner is garbage-collected)."""
        self.pool.shutdown()
