"""What goes into a measurement and what comes out of it."""

from __future__ import annotations

import enum
import math
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..task import TuningTask

__all__ = [
    "CallPlan",
    "MeasureErrorNo",
    "MeasureInput",
    "MeasureResult",
    "BuildResult",
    "MeasureBatch",
    "RunRequest",
    "RunOutcome",
    "MeasurePoint",
]


class MeasureErrorNo(enum.IntEnum):
    """Why a candidate has no valid timing (AutoTVM's numbering)."""

    NO_ERROR = 0
    INSTANTIATION_ERROR = 1  # the template raised for this config
    COMPILE_HOST = 2  # lowering / LLVM codegen / linking failed
    COMPILE_DEVICE = 3  # device codegen (CUDA, nvcc) failed
    RUNTIME_DEVICE = 4  # the kernel crashed, or no device to run on
    WRONG_ANSWER = 5  # output differs from the reference
    BUILD_TIMEOUT = 6
    RUN_TIMEOUT = 7
    UNKNOWN_ERROR = 8


class MeasureInput:
    """One candidate of a task: ``MeasureInput(task, config)``, or AutoTVM's ``MeasureInput(target, task, config)``;
    ``config`` is any candidate of the task's space (a knob config, a trace, a micro-kernel)."""

    __slots__ = ("task", "config")

    def __init__(self, *args: Any, task: Any = None, config: Any = None):
        if len(args) == 3:  # AutoTVM order; the task carries the target
            _, task, config = args
        elif len(args) == 2:
            task, config = args
        elif len(args) == 1:
            task, config = args[0], config
        elif args:
            raise TypeError(f"MeasureInput takes (task, config) or (target, task, config), got {len(args)} arguments")
        if task is None or config is None:
            raise TypeError("MeasureInput needs a task and a config")
        self.task: TuningTask = task
        self.config: Any = config

    @property
    def target(self) -> Any:
        return self.task.target

    def __iter__(self) -> Iterator[Any]:  # AutoTVM's namedtuple unpacking: target, task, config
        return iter((self.target, self.task, self.config))

    def __getitem__(self, k: int) -> Any:
        return (self.target, self.task, self.config)[k]

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, MeasureInput)
            and other.task.workload_key == self.task.workload_key
            and other.config.key == self.config.key
        )

    def __hash__(self) -> int:
        return hash((self.task.workload_key, self.config.key))

    def __repr__(self) -> str:
        return f"MeasureInput({self.task.name}, {self.config!r})"


@dataclass(frozen=True)
class CallPlan:
    """How a runner calls a split kernel, as plain data (it travels to worker processes and RPC servers). Argument
    references index the task's own arguments (``arg_specs`` order, outputs included) followed by ``temps``, the
    packed buffers the ``setup`` calls fill once, before correctness is checked and the ``timed`` call is timed."""

    temps: tuple[tuple[tuple[int, ...], str], ...]
    setup: tuple[tuple[str, tuple[int, ...]], ...]
    timed: tuple[str, tuple[int, ...]]


@dataclass
class BuildResult:
    """A built artifact (the shared library's bytes, so it can travel to another machine) or why there is none."""

    artifact: bytes | None
    error_no: MeasureErrorNo = MeasureErrorNo.NO_ERROR
    error_msg: str = ""
    time_cost: float = 0.0
    suffix: str = ".so"
    #: how to call a kernel whose constant weights are packed before timing (``_prepack``); None: one call
    calls: CallPlan | None = None


@dataclass
class MeasureResult:
    """Timings of one candidate: ``costs`` in seconds per run (one per repeat or micro-batch), ``all_cost`` the
    wall-clock it cost the tuner, ``runs`` the kernel runs timed, ``cv`` the adaptive evaluator's final CV."""

    costs: tuple[float, ...]
    error_no: MeasureErrorNo
    all_cost: float
    timestamp: float
    error_msg: str = ""
    build_time: float = 0.0
    run_time: float = 0.0
    runs: int = 0
    cv: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error_no == MeasureErrorNo.NO_ERROR and len(self.costs) > 0

    @property
    def mean_cost(self) -> float:
        """Mean seconds per run over the repeats (AutoTVM's statistic; ``cost`` is the one adatune ranks by)."""
        return sum(self.costs) / len(self.costs) if self.ok else math.inf

    @property
    def cost(self) -> float:
        """Seconds per run: the median of the repeats (or micro-batches). On a shared machine one preempted
        repeat moves the mean by its whole excess and can reorder near-equal configs; the median ignores it."""
        return statistics.median(self.costs) if self.ok else math.inf

    @property
    def batch_runs(self) -> list[int]:
        """Runs behind each cost (the adaptive evaluator's micro-batches differ; a uniform split otherwise)."""
        recorded = self.extra.get("batch_runs")
        if recorded is not None and len(recorded) == len(self.costs):
            return [int(r) for r in recorded]
        return [max(1, self.runs // max(1, len(self.costs)))] * len(self.costs)

    def flops(self, task_flop: float) -> float:
        """Throughput in FLOP/s from the median cost (0 for a failed candidate)."""
        return task_flop / self.cost if self.ok and self.cost > 0 else 0.0

    def to_json(self) -> dict:
        out = {
            "costs": list(self.costs),
            "error_no": int(self.error_no),
            "all_cost": self.all_cost,
            "timestamp": self.timestamp,
            "build_time": self.build_time,
            "run_time": self.run_time,
            "runs": self.runs,
        }
        if self.error_msg:
            out["error_msg"] = self.error_msg[-2000:]
        if self.cv is not None:
            out["cv"] = self.cv
        if self.extra:
            out["extra"] = self.extra
        return out

    @classmethod
    def from_json(cls, d: dict) -> MeasureResult:
        return cls(
            costs=tuple(float(c) for c in d["costs"]),
            error_no=MeasureErrorNo(int(d["error_no"])),
            all_cost=float(d["all_cost"]),
            timestamp=float(d["timestamp"]),
            error_msg=d.get("error_msg", ""),
            build_time=float(d.get("build_time", 0.0)),
            run_time=float(d.get("run_time", 0.0)),
            runs=int(d.get("runs", 0)),
            cv=d.get("cv"),
            extra=d.get("extra", {}),
        )


@dataclass
class MeasureBatch:
    """What one ``measure`` call returns: per candidate a result (or its error kind), and the batch's seconds.
    ``done_at[k]`` is when candidate ``k``'s result was known, in seconds after the batch began, so a tuner's clock
    can be stamped per candidate (recorded seconds when the runner replays a recorded table)."""

    results: list[MeasureResult]
    build_seconds: float
    run_seconds: float
    done_at: list[float]

    @property
    def seconds(self) -> float:
        return self.build_seconds + self.run_seconds

    def __iter__(self) -> Iterator[MeasureResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, k: int) -> MeasureResult:
        return self.results[k]


@dataclass(frozen=True)
class MeasurePoint:
    """One call of a shape-generic kernel: the trailing scalar arguments (e.g. a dynamic extent T) and the
    argument shapes at them. A task with ``measure_points`` has each candidate built once and checked and
    timed at every point, as one measure input (DietCode's micro-kernels over their sampled T)."""

    scalars: tuple[int, ...]
    arg_specs: tuple[Any, ...]  # adatune.task.ArgSpec at these scalars


@dataclass
class RunRequest:
    """One built candidate as a runner's worker needs it: plain data, so that a crash or hang costs only the
    worker. ``ref_path`` holds the reference inputs and outputs when correctness is checked; ``points`` (for a
    shape-generic kernel) holds ``(scalars, arg_specs, ref_path)`` per call, each checked and timed alone."""

    artifact: bytes
    suffix: str
    device_type: str
    arg_specs: list
    ref_path: str | None
    rtol: float
    atol: float
    points: list[tuple[tuple[int, ...], list, str | None]] = field(default_factory=list)
    calls: CallPlan | None = None


@dataclass
class RunOutcome:
    """What a runner's worker returns for one candidate: its timings, or its error kind and why. ``seconds`` is the
    worker's own time (over RPC: from holding a server to the result); ``extra`` goes into the result as it is."""

    error_no: MeasureErrorNo = MeasureErrorNo.NO_ERROR
    error_msg: str = ""
    costs: tuple[float, ...] = ()
    runs: int = 0
    cv: float | None = None
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    def result(self, build: BuildResult, run_time: float = 0.0) -> MeasureResult:
        """The candidate's ``MeasureResult``: ``run_time`` is its run seconds as the runner saw them."""
        return MeasureResult(
            self.costs,
            self.error_no,
            build.time_cost + run_time,
            time.time(),
            self.error_msg[-4000:],
            build_time=build.time_cost,
            run_time=run_time,
            runs=self.runs,
            cv=self.cv,
            extra=self.extra,
        )
