"""AdaTune's adaptive stopping rule on its own (``adatune.measure.evaluator`` documents it): numpy only, so
``adatune/cuda_export/cupy_runner.py`` loads this file by path, from the tree or from its copy in an exported batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

__all__ = [
    "FLOOR_SHARE",
    "TRIM_FROM_BATCHES",
    "adaptive_runs",
    "adaptive_stop_index",
    "converge_cv",
    "micro_batch_size",
    "trimmed",
]

#: from this many micro-batches on, the slowest and the fastest are dropped before the CV is taken
TRIM_FROM_BATCHES = 5
#: most of the cap the adaptive evaluator must spend before it may stop: the AdaTune authors' released code decides
#: from the third micro-batch, 3 x 50 of the paper's 500 runs (the paper names no floor)
FLOOR_SHARE = 0.3


def trimmed(throughputs: Sequence[float] | np.ndarray) -> np.ndarray:
    """The throughputs the CV is taken over: all of them, or without the min and the max from
    ``TRIM_FROM_BATCHES`` batches on (so at least three remain)."""
    values = np.asarray(throughputs, dtype=np.float64)
    if len(values) >= TRIM_FROM_BATCHES:
        values = np.sort(values)[1:-1]
    return values


def converge_cv(batch_seconds: Sequence[float], runs_per_batch: Sequence[int]) -> float:
    """CV of the per-micro-batch throughputs (extremes dropped, see ``trimmed``); ``inf`` while it cannot
    be judged (fewer than two batches, or a batch timed at zero seconds)."""
    secs = np.asarray(batch_seconds, dtype=np.float64)
    runs = np.asarray(runs_per_batch, dtype=np.float64)
    if len(secs) != len(runs):
        raise ValueError(f"{len(secs)} batch times but {len(runs)} run counts")
    if len(secs) < 2 or not np.all(secs > 0):
        return math.inf
    perf = trimmed(runs / secs)
    return float(perf.std() / perf.mean())


def micro_batch_size(micro_batch: int, min_micro_batches: int, cap: int) -> int:
    """``micro_batch``, or less so that ``min_micro_batches`` of them stay within ``FLOOR_SHARE`` of ``cap``."""
    room = int(FLOOR_SHARE * cap) // min_micro_batches
    return max(1, min(micro_batch, room))


def adaptive_runs(
    timed: Callable[[int, int], list[float]],
    cap: int,
    batch: int,
    min_micro_batches: int,
    min_converge_coef: float,
    costs: Sequence[float] = (),
    runs: Sequence[int] = (),
) -> tuple[list[float], list[int], float | None]:
    """Micro-batches of ``batch`` runs until the CV falls under ``min_converge_coef`` or ``cap`` runs are spent.
    ``timed(number, repeat)`` returns mean seconds per run of ``repeat`` micro-batches; ``costs`` and ``runs``: batches
    already timed. Returns every batch's cost and runs, and the last CV (None when it could not be judged)."""
    costs, runs = list(costs), list(runs)
    cv = math.inf
    while sum(runs) < cap:
        remaining = cap - sum(runs)
        n = min(batch, remaining)
        k = 1
        if len(runs) < min_micro_batches and n == batch:
            k = max(1, min(min_micro_batches - len(runs), remaining // batch))
        costs += timed(n, k)
        runs += [n] * k
        if len(runs) >= min_micro_batches:
            cv = converge_cv([c * r for c, r in zip(costs, runs)], runs)
            if cv < min_converge_coef:
                break
    return costs, runs, cv if math.isfinite(cv) else None


def adaptive_stop_index(
    batch_seconds: Sequence[float], runs_per_batch: Sequence[int], min_converge_coef: float, min_micro_batches: int
) -> int | None:
    """Number of micro-batches after which the adaptive evaluator stops on these timings, or None if it
    never does (replays the rule on recorded batches)."""
    for i in range(max(min_micro_batches, 1), len(batch_seconds) + 1):
        if converge_cv(batch_seconds[:i], runs_per_batch[:i]) < min_converge_coef:
            return i
    return None
