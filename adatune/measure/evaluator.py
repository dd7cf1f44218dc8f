"""How a built kernel is timed: a fixed number of runs, or AdaTune's adaptive evaluator.

Deterministic evaluator: ``number * repeat`` runs, reported as ``repeat`` means of ``number`` runs.

Adaptive evaluator (AdaTune, NeurIPS 2020, section 4.3), on when ``min_converge_coef`` is set: at most the same
``number * repeat`` runs (the cap), in micro-batches of ``micro_batch`` runs, stopping once ``CV = std(P) / mean(P)``
of the per-batch throughputs ``P_i`` falls below ``min_converge_coef``. The CV is taken once ``min_micro_batches``
batches are in, and from ``TRIM_FROM_BATCHES`` batches on without the slowest and the fastest (as AdaTune's released
code does). The floor is at most ``FLOOR_SHARE`` of the cap (``ADATUNE_PAPER``: 3 micro-batches of B=50 runs of
n=500), so the micro-batch shrinks to fit it; a cap that cannot hold ``min_micro_batches`` runs is rejected.

Where this follows its sources and where it leaves them. Section 4.1 of the paper gives n, B, the threshold (10%) and
the CV; it names no floor, and takes the CV over the cumulative throughputs Perf_i = i * GFLOP / Time(i). The RFC
takes it "among the micro-batches" (per batch) and the authors' released code decides from the third batch: so does
this (a cumulative CV shrinks by construction, so every candidate would stop at the floor). Dropping the extremes is the
released code's. The result is the median of the batches' per-run times where the RFC returns their mean: one
preempted batch on a shared host moves a mean, not a median.

``min_repeat_ms`` works with both: ``number`` grows until one repeat lasts that long (as TVM's time evaluator does),
and the cap with it. The kernel first runs untimed for ``warmup_ms``, since a freshly loaded kernel reads slow.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..target import size_tvm_thread_pool, tvm_main_thread
from .micro_batches import (
    FLOOR_SHARE,
    TRIM_FROM_BATCHES,
    adaptive_runs,
    adaptive_stop_index,
    converge_cv,
    micro_batch_size,
    trimmed,
)

__all__ = [
    "ADATUNE_PAPER",
    "EVALUATOR_OPTIONS",
    "FLOOR_SHARE",
    "TRIM_FROM_BATCHES",
    "WARMUP_MS",
    "EvalOutcome",
    "EvaluatorConfig",
    "EvaluatorOption",
    "adaptive_stop_index",
    "adaptive_replay",
    "grown_number",
    "converge_cv",
    "evaluate",
    "options_markdown",
    "time_fn_for",
    "trimmed",
]

#: default warm-up before a kernel is timed, in milliseconds (see the module docstring)
WARMUP_MS = 10.0

TimeFn = Callable[[int, int, float], list[float]]


@dataclass(frozen=True)
class EvaluatorOption:
    """One timing option: what it is called, its type, its default and what it means (for generated docs)."""

    name: str
    type: builtins.type[Any]
    default: Any
    doc: str


EVALUATOR_OPTIONS: tuple[EvaluatorOption, ...] = (
    EvaluatorOption("number", int, 5, "runs averaged into one reported time by the deterministic evaluator"),
    EvaluatorOption(
        "repeat",
        int,
        3,
        "times the deterministic evaluator reports; number * repeat is the cap on runs of both evaluators",
    ),
    EvaluatorOption(
        "min_repeat_ms",
        float,
        0.0,
        "raise number until one repeat lasts this long (estimated from a first call of number runs); "
        "the adaptive evaluator's cap is the grown number * repeat",
    ),
    EvaluatorOption(
        "warmup_ms",
        float,
        WARMUP_MS,
        "run the kernel untimed for at least this long before timing it (a freshly loaded kernel's first runs "
        "read slow); 0: no warm-up beyond time_evaluator's one untimed run",
    ),
    EvaluatorOption("enable_cpu_cache_flush", bool, False, "flush CPU caches before each run (cold-cache timing)"),
    EvaluatorOption(
        "min_converge_coef",
        float,
        None,
        "adaptive evaluator: stop once the CV of the per-micro-batch "
        "throughputs (extremes dropped from 5 batches on) falls under this; none: deterministic",
    ),
    EvaluatorOption(
        "micro_batch",
        int,
        50,
        "adaptive evaluator: runs per micro-batch, shrunk so that min_micro_batches of them are at most 30% of the cap",
    ),
    EvaluatorOption("min_micro_batches", int, 3, "adaptive evaluator: micro-batches timed before it may stop"),
)

_DEFAULTS: dict[str, Any] = {opt.name: opt.default for opt in EVALUATOR_OPTIONS}


@dataclass(frozen=True)
class EvaluatorConfig:
    """Timing options (declared in ``EVALUATOR_OPTIONS``); ``min_converge_coef=None`` selects the
    deterministic evaluator. Checked on creation, so a runner that cannot work fails when it is made."""

    number: int = _DEFAULTS["number"]
    repeat: int = _DEFAULTS["repeat"]
    min_repeat_ms: float = _DEFAULTS["min_repeat_ms"]
    warmup_ms: float = _DEFAULTS["warmup_ms"]
    enable_cpu_cache_flush: bool = _DEFAULTS["enable_cpu_cache_flush"]
    min_converge_coef: float | None = _DEFAULTS["min_converge_coef"]
    micro_batch: int = _DEFAULTS["micro_batch"]
    min_micro_batches: int = _DEFAULTS["min_micro_batches"]

    def __post_init__(self) -> None:
        for name in ("number", "repeat", "micro_batch", "min_micro_batches"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"evaluator option {name} must be an integer >= 1, got {value!r}")
        for name in ("min_repeat_ms", "warmup_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"evaluator option {name} must be a finite number >= 0, got {value!r}")
        coef = self.min_converge_coef
        if coef is None:
            return
        if isinstance(coef, bool) or not isinstance(coef, (int, float)) or not (math.isfinite(coef) and coef > 0):
            raise ValueError(f"min_converge_coef must be a positive finite number or None, got {coef!r}")
        if self.cap_runs <= self.min_micro_batches:
            raise ValueError(
                f"adaptive evaluator: the cap number * repeat = {self.number} * {self.repeat} = {self.cap_runs} "
                f"runs cannot hold more than min_micro_batches={self.min_micro_batches} micro-batches of one run, "
                f"so min_converge_coef would decide nothing; raise number or repeat to at least "
                f"{self.min_micro_batches + 1} runs in all, or lower min_micro_batches"
            )

    @property
    def cap_runs(self) -> int:
        """Most runs either evaluator spends on one candidate (before ``min_repeat_ms`` grows ``number``)."""
        return self.number * self.repeat

    @property
    def adaptive_micro_batch(self) -> int:
        """Runs per micro-batch at this cap (see ``micro_batch_for``)."""
        return self.micro_batch_for(self.cap_runs)

    def micro_batch_for(self, cap: int) -> int:
        """``micro_batch``, or less so that ``min_micro_batches`` of them stay within ``FLOOR_SHARE`` of ``cap``."""
        return micro_batch_size(self.micro_batch, self.min_micro_batches, cap)

    @classmethod
    def adatune_paper(cls, min_converge_coef: float = 0.1) -> EvaluatorConfig:
        """The AdaTune paper's evaluator: at most n=500 runs in micro-batches of B=50, deciding from the 3rd."""
        return cls(**{**ADATUNE_PAPER, "min_converge_coef": min_converge_coef})


#: the AdaTune paper's setting: n = number * repeat = 500 runs, micro-batches of B = 50, first decision after
#: three of them as the authors' code (150 runs, the 30% floor); pass as ``LocalRunner(**ADATUNE_PAPER)``
ADATUNE_PAPER: dict[str, Any] = {
    "number": 50,
    "repeat": 10,
    "micro_batch": 50,
    "min_micro_batches": 3,
    "min_converge_coef": 0.1,
}


@dataclass
class EvalOutcome:
    """What timing one kernel gave: ``costs`` in seconds per run (one per repeat, deterministic; one per
    micro-batch, adaptive), ``runs`` timed in all, ``cv`` the adaptive evaluator's last CV (None when it
    was off or never had two batches), ``batch_runs`` the runs behind each cost."""

    costs: list[float]
    runs: int
    cv: float | None
    batch_runs: list[int] = field(default_factory=list)

    @property
    def throughputs(self) -> list[float]:
        """Runs per second of each micro-batch (or repeat): what the adaptive CV is taken over."""
        return [1.0 / c if c > 0 else math.inf for c in self.costs]


def evaluate(time_fn: TimeFn, cfg: EvaluatorConfig) -> EvalOutcome:
    """Time a kernel. ``time_fn(number, repeat, min_repeat_ms)`` returns ``repeat`` mean seconds per run
    (TVM's ``time_evaluator``); this function decides how many runs to spend and counts every one."""
    if cfg.warmup_ms > 0:  # untimed: a freshly loaded kernel's first runs read slow
        _call(time_fn, 1, 1, cfg.warmup_ms)
    first: list[float] = []
    number = cfg.number
    if cfg.min_repeat_ms > 0:  # one call of `number` runs tells how many make a repeat of min_repeat_ms
        first = _call(time_fn, cfg.number, 1, 0.0)
        number = grown_number(cfg.number, first[0], cfg.min_repeat_ms)
    cap = number * cfg.repeat
    if cfg.min_converge_coef is None:
        costs = _call(time_fn, number, cfg.repeat, 0.0)
        return EvalOutcome(costs, cap + len(first) * cfg.number, None, [number] * len(costs))
    costs, runs, cv = adaptive_runs(
        lambda n, k: _call(time_fn, n, k, 0.0),
        cap,
        cfg.micro_batch_for(cap),
        cfg.min_micro_batches,
        cfg.min_converge_coef,
        first,
        [cfg.number] * len(first),
    )
    return EvalOutcome(costs, int(sum(runs)), cv, runs)


def grown_number(number: int, seconds_per_run: float, min_repeat_ms: float) -> int:
    """``number`` raised until one repeat of it lasts ``min_repeat_ms`` at ``seconds_per_run``."""
    if seconds_per_run <= 0:
        return number
    return max(number, math.ceil(min_repeat_ms / 1e3 / seconds_per_run))


def adaptive_replay(
    costs: Sequence[float], batch_runs: Sequence[int], min_converge_coef: float, min_micro_batches: int
) -> tuple[list[float], list[int], float | None]:
    """What the adaptive evaluator would have kept of recorded micro-batch timings (a sweep timed with
    ``number`` = the micro-batch): the costs and run counts up to its stop, and its CV there (None if it
    could not judge). Replays therefore include the adaptive evaluator exactly, without measuring again."""
    if len(costs) != len(batch_runs):
        raise ValueError(f"{len(costs)} recorded costs but {len(batch_runs)} run counts")
    secs = [c * r for c, r in zip(costs, batch_runs)]
    stop = adaptive_stop_index(secs, batch_runs, min_converge_coef, min_micro_batches) or len(costs)
    cv = converge_cv(secs[:stop], batch_runs[:stop])
    return list(costs[:stop]), list(batch_runs[:stop]), cv if math.isfinite(cv) else None


def _call(time_fn: TimeFn, number: int, repeat: int, min_repeat_ms: float) -> list[float]:
    costs = [float(c) for c in time_fn(number, repeat, min_repeat_ms)]
    if len(costs) != repeat:
        raise RuntimeError(f"time_fn returned {len(costs)} times for repeat={repeat}")
    return costs


def time_fn_for(module: Any, device: Any, args: list, cache_flush: bool, func_name: str | None = None) -> TimeFn:
    """Adapter from a TVM runtime module (its entry function, or ``func_name``) to ``time_fn``; sizes TVM's thread
    pool first (``adatune.target.size_tvm_thread_pool``), so the kernel is timed on every core, as adatune measures."""
    size_tvm_thread_pool()

    def run(number: int, repeat: int, min_repeat_ms: float) -> list[float]:
        ev = module.time_evaluator(
            func_name or module.entry_name,
            device,
            number=number,
            repeat=repeat,
            min_repeat_ms=math.ceil(min_repeat_ms),
            f_preproc="cache_flush_cpu_non_first_arg" if cache_flush else "",
        )
        with tvm_main_thread():  # the caller off TVM's worker CPUs, or a run can read slow at random
            return list(ev(*args).results)

    return run


def options_markdown() -> str:
    """The evaluator options as a Markdown table, generated from ``EVALUATOR_OPTIONS``."""
    rows = ["| option | type | default | meaning |", "|---|---|---|---|"]
    for opt in EVALUATOR_OPTIONS:
        default = (
            "none"
            if opt.default is None
            else str(opt.default).lower()
            if isinstance(opt.default, bool)
            else str(opt.default)
        )
        rows.append(f"| `{opt.name}` | `{opt.type.__name__}` | `{default}` | {opt.doc} |")
    return "\n".join(rows) + "\n"
