"""Measurement: builders, runners, results and ``measure_option``."""

from ._builder import Builder, LocalBuilder, NoBuilder
from ._config import RunnerConfig
from ._option import MeasureOption, measure_option
from ._replay import ReplayRunner
from ._rpc import RPCRunner
from ._runner import WORKER_USES, LocalRunner, Runner
from ._types import BuildResult, MeasureBatch, MeasureErrorNo, MeasureInput, MeasurePoint, MeasureResult

__all__ = [
    "WORKER_USES",
    "Builder",
    "LocalBuilder",
    "NoBuilder",
    "Runner",
    "LocalRunner",
    "ReplayRunner",
    "RPCRunner",
    "RunnerConfig",
    "MeasureOption",
    "measure_option",
    "MeasureBatch",
    "MeasureInput",
    "MeasureResult",
    "MeasureErrorNo",
    "MeasurePoint",
    "BuildResult",
]
