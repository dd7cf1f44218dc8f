"""How a built kernel is timed: a fixed number of runs, or AdaTune's adaptive evaluator.

The adaptive evaluator (AdaTune, NeurIPS 2020, section 4.3) times micro-batches of ``micro_batch`` runs.
After micro-batch i the running throughput is ``Perf_i = i*B*FLOP / Time(i)`` with ``Time(i)`` the kernel
time accumulated since this candidate's measurement began; once at least ``min_micro_batches`` are in and
``CV = std(Perf_1..i) / mean(Perf_1..i)`` falls under ``min_converge_coef``, further runs would not change
the estimate, so measurement stops. The cap is the deterministic evaluator's ``number * repeat`` runs.

Both evaluators run inside the isolated runner worker.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["EvaluatorConfig", "EvalOutcome", "evaluate", "converge_cv", "adaptive_stop_index"]


@dataclass(frozen=True)
class EvaluatorConfig:
    """Timing options; ``min_converge_coef=None`` selects the deterministic evaluator."""

    number: int = 5
    repeat: int = 3
    min_repeat_ms: float = 0.0
    enable_cpu_cache_flush: bool = False
    min_converge_coef: float | None = None
    micro_batch: int = 50
    min_micro_batches: int = 3

    def __post_init__(self) -> None:
        if self.number < 1 or self.repeat < 1:
            raise ValueError(f"number and repeat must be >= 1, got number={self.number}, repeat={self.repeat}")
        if self.min_converge_coef is not None and not self.min_converge_coef > 0:
            raise ValueError(f"min_converge_coef must be positive, got {self.min_converge_coef}")
        if self.micro_batch < 1 or self.min_micro_batches < 1:
            raise ValueError("micro_batch and min_micro_batches must be >= 1")

    @property
    def cap_runs(self) -> int:
        return self.number * self.repeat


@dataclass
class EvalOutcome:
    costs: list[float]  # seconds per run, one per repeat (deterministic) or micro-batch (adaptive)
    runs: int
    cv: float | None


def converge_cv(batch_seconds: Sequence[float], runs_per_batch: Sequence[int]) -> float:
    """CV of the running throughput after each micro-batch (FLOP cancels out of the ratio)."""
    secs = np.cumsum(np.asarray(batch_seconds, dtype=np.float64))
    runs = np.cumsum(np.asarray(runs_per_batch, dtype=np.float64))
    perf = runs / secs
    if len(perf) < 2 or perf.mean() == 0:
        return float("inf")
    return float(perf.std() / perf.mean())


def adaptive_stop_index(batch_seconds: Sequence[float], runs_per_batch: Sequence[int],
                        min_converge_coef: float, min_micro_batches: int) -> int | None:
    """Number of micro-batches after which the adaptive evaluator stops, or None if it never does."""
    for i in range(min_micro_batches, len(batch_seconds) + 1):
        if converge_cv(batch_seconds[:i], runs_per_batch[:i]) < min_converge_coef:
            return i
    return None


def evaluate(time_fn: Callable[[int, int, float], list[float]], cfg: EvaluatorConfig) -> EvalOutcome:
    """Time a kernel. ``time_fn(number, repeat, min_repeat_ms)`` returns ``repeat`` mean seconds per run
    (TVM's ``time_evaluator``); this function decides how many runs to spend."""
    if cfg.min_converge_coef is None:
        costs = [float(c) for c in time_fn(cfg.number, cfg.repeat, cfg.min_repeat_ms)]
        return EvalOutcome(costs, cfg.number * cfg.repeat, None)
    batch = min(cfg.micro_batch, cfg.cap_runs)
    secs: list[float] = []
    runs: list[int] = []
    cv = float("inf")
    while sum(runs) < cfg.cap_runs:
        n = min(batch, cfg.cap_runs - sum(runs))
        per_run = float(time_fn(n, 1, 0.0)[0])
        secs.append(per_run * n)
        runs.append(n)
        if len(secs) >= cfg.min_micro_batches:
            cv = converge_cv(secs, runs)
            if cv < cfg.min_converge_coef:
                break
    costs = [s / r for s, r in zip(secs, runs)]
    return EvalOutcome(costs, int(sum(runs)), cv if np.isfinite(cv) else None)


def time_fn_for(module: Any, device: Any, args: list, cache_flush: bool) -> Callable[[int, int, float], list[float]]:
    """Adapter from a TVM runtime module to ``time_fn``."""

    def run(number: int, repeat: int, min_repeat_ms: float) -> list[float]:
        ev = module.time_evaluator(module.entry_name, device, number=number, repeat=repeat,
                                   min_repeat_ms=int(min_repeat_ms),
                                   f_preproc="cache_flush_cpu_non_first_arg" if cache_flush else "")
        return list(ev(*args).results)

    return run
