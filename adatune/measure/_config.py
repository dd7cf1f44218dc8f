"""``RunnerConfig``: what a runner does with each built candidate, declared once for local and RPC runners."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .device_limits import DeviceLimits, profile
from .evaluator import EvaluatorConfig

if TYPE_CHECKING:
    from ..task import TuningTask

__all__ = ["RunnerConfig", "with_options_signature"]

_TIMING = {f.name for f in dataclasses.fields(EvaluatorConfig)}


@dataclass(frozen=True)
class RunnerConfig:
    """How every candidate is checked and timed, wherever it runs.

    ``evaluator``: the timing options (``EVALUATOR_OPTIONS``); ``timeout``: one candidate's run (over RPC, its
    session); ``cooldown_interval`` rests the device between candidates; ``check_correctness`` compares outputs with
    the reference (``rtol``/``atol`` by precision when None); ``device_profile`` names the GPU whose limits CUDA
    candidates are checked against before building (``device_limits.PROFILES``), for machines without it.
    """

    evaluator: EvaluatorConfig = field(default_factory=EvaluatorConfig)
    timeout: float = 10.0
    cooldown_interval: float = 0.0
    check_correctness: bool = False
    rtol: float | None = None
    atol: float | None = None
    device_profile: str | None = None

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"runner timeout must be positive, got {self.timeout}")
        if self.device_profile is not None:
            profile(self.device_profile)  # an unknown name fails now, not at the first CUDA candidate

    @classmethod
    def of(cls, **options: Any) -> RunnerConfig:
        """From flat keyword options, as runners take them: the evaluator's and this class's fields."""
        timing = {k: options.pop(k) for k in list(options) if k in _TIMING}
        return cls(EvaluatorConfig(**timing), **options)

    def with_min_converge_coef(self, coef: float | None) -> RunnerConfig:
        return dataclasses.replace(self, evaluator=dataclasses.replace(self.evaluator, min_converge_coef=coef))

    @property
    def profile_limits(self) -> DeviceLimits | None:
        return profile(self.device_profile) if self.device_profile is not None else None

    def tolerances(self, task: TuningTask) -> tuple[float, float]:
        """``(rtol, atol)`` of the correctness check: as given, else by the outputs' precision (a half-precision
        sum of a few hundred products is off by ~1e-2 from the reference, a float32 one by ~1e-5)."""
        low = any(s.dtype in ("float16", "bfloat16") for s in task.arg_specs if s.is_output)
        default = 5e-2 if low else 1e-3
        return (self.rtol if self.rtol is not None else default, self.atol if self.atol is not None else default)


def with_options_signature(init: Any) -> Any:
    """``init`` (a runner's ``__init__(self, ..., **options)``) showing the options it forwards to
    ``RunnerConfig.of`` as keyword parameters with their defaults, so ``help()``, IDEs and ``inspect`` see
    them while they are declared once, in ``EvaluatorConfig`` and ``RunnerConfig``."""
    own = [p for p in inspect.signature(init).parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD]
    fields = [*dataclasses.fields(EvaluatorConfig), *dataclasses.fields(RunnerConfig)[1:]]
    options = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
        for f in fields
        if f.name not in {p.name for p in own}
    ]
    init.__signature__ = inspect.Signature([*own, *options])
    return init
