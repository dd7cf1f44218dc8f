"""Statistics over runs: cost to reach a target, speedups against the baseline with bootstrap confidence intervals
(``scipy.stats.bootstrap``) and a paired rank test (``scipy.stats.wilcoxon``).

A run that never reaches the target within its budget is censored: its cost counts as its budget, making its speedup a
bound in the direction that favours the other scheme. Pairs where neither run reached the target carry no information
and are left out (counted). A live study compares its runs over the same window: ``within_budget`` cuts every run at the
time budget (a tuner checks the budget between batches, so a batch of slow candidates can finish past it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

__all__ = ["best_curve", "cost_to_target", "SpeedupStat", "speedup_stat", "study_target", "within_budget"]


def best_curve(run: dict[str, Any], common: dict[str, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(clock, best GFLOPS) after each trial. With ``common`` (key -> GFLOPS re-measured by one common
    evaluator) the best-so-far follows the run's own incumbents but takes their common timing."""
    clocks = np.asarray([t["clock"] for t in run["trials"]], dtype=np.float64)
    if common is None:
        return clocks, np.asarray([t["best_gflops"] for t in run["trials"]], dtype=np.float64)
    own, best, out = 0.0, 0.0, []
    for t in run["trials"]:
        if t["gflops"] > own:
            own = t["gflops"]
            best = max(best, common.get(t["key"], 0.0))
        out.append(best)
    return clocks, np.asarray(out, dtype=np.float64)


def within_budget(study: dict[str, Any]) -> dict[str, Any]:
    """``study`` with every run cut at its ``time_budget`` (tuner-clock seconds; none: unchanged): trials that
    finished after it are dropped, the run's clock is capped at it, and the common re-measurements keep only
    the incumbents some run found within it, so the target is what the arms could reach in the same window."""
    budget = study.get("time_budget")
    if not budget:
        return study
    runs = []
    for run in study["runs"]:
        trials = [t for t in run["trials"] if t["clock"] <= budget]
        best = max((float(t["gflops"]) for t in trials), default=0.0)
        runs.append(run | {"trials": trials, "clock": min(float(run["clock"]), float(budget)), "best_gflops": best})
    common = study.get("common_gflops")
    if common is not None:
        found = {t["key"] for run in runs for t in run["trials"]}
        common = {k: v for k, v in common.items() if k in found}
    return study | {
        "runs": runs,
        "common_gflops": common,
        "cut_trials": sum(len(a["trials"]) - len(b["trials"]) for a, b in zip(study["runs"], runs)),
    }


def cost_to_target(
    run: dict[str, Any], target: float, common: dict[str, float] | None = None
) -> tuple[int | None, float | None]:
    """(measurements, clock seconds) until the best-so-far first reaches ``target``; None where it never does."""
    clocks, best = best_curve(run, common)
    hit = np.nonzero(best >= target)[0]
    if len(hit) == 0:
        return None, None
    return int(hit[0]) + 1, float(clocks[hit[0]])


def study_target(study: dict[str, Any], fraction: float) -> float:
    """``fraction`` of the sweep's optimum (replay) or of the best re-measured incumbent (hardware)."""
    if study["mode"] == "replay":
        return fraction * float(study["optimum_gflops"])
    return fraction * max(study["common_gflops"].values(), default=0.0)


@dataclass
class SpeedupStat:
    """Median speedup of a scheme over the baseline (baseline cost / scheme cost), its bootstrap 95% CI
    and the Wilcoxon signed-rank p-value of the paired costs; ``verdict`` is what may be claimed."""

    scheme: str
    metric: str
    n_pairs: int
    n_both_missed: int
    scheme_reached: int
    baseline_reached: int
    median: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


MIN_PAIRS = 6  # fewer pairs than this: no verdict (a bootstrap of 3-5 values says little)


def _verdict(lo: float, hi: float, n: int, p: float) -> str:
    """A claim needs the CI to exclude 1 and the rank test to agree (p < 0.05): a percentile bootstrap of
    a median over few seeds can exclude 1 by luck of ties."""
    if n < MIN_PAIRS or not (math.isfinite(lo) and math.isfinite(hi)):
        return "not shown (too few pairs)"
    if lo <= 1.0 <= hi:
        return "not shown (CI includes 1)"
    if not p < 0.05:
        return "not shown (CI excludes 1, rank test p >= 0.05)"
    return "faster (CI > 1, p < 0.05)" if lo > 1.0 else "slower (CI < 1, p < 0.05)"


def speedup_stat(
    scheme: str,
    metric: str,
    base_costs: Sequence[float | None],
    costs: Sequence[float | None],
    base_budgets: Sequence[float],
    budgets: Sequence[float],
    seed: int = 0,
) -> SpeedupStat:
    """Paired speedups (one pair per seed, or per workload x seed when pooled), censored at the budgets."""
    ratios, b_all, s_all = [], [], []
    both_missed = 0
    for bc, sc, bb, sb in zip(base_costs, costs, base_budgets, budgets):
        if bc is None and sc is None:
            both_missed += 1
            continue
        b = float(bb if bc is None else bc)
        s = float(sb if sc is None else sc)
        b, s = max(b, 1e-12), max(s, 1e-12)
        ratios.append(b / s)
        b_all.append(b)
        s_all.append(s)
    n = len(ratios)
    med, lo, hi, p = math.nan, math.nan, math.nan, math.nan
    if n:
        arr = np.asarray(ratios)
        med = float(np.median(arr))
        if n >= 3 and np.ptp(arr) > 0:
            res = stats.bootstrap(
                (arr,), np.median, confidence_level=0.95, n_resamples=9999, method="percentile", random_state=seed
            )
            lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        elif n >= 3:
            lo = hi = med
        diffs = np.log(np.asarray(b_all)) - np.log(np.asarray(s_all))
        if n >= 3 and np.any(diffs != 0):
            p = float(stats.wilcoxon(diffs, zero_method="zsplit").pvalue)
    return SpeedupStat(
        scheme,
        metric,
        n,
        both_missed,
        sum(c is not None for c in costs),
        sum(c is not None for c in base_costs),
        med,
        lo,
        hi,
        p,
        _verdict(lo, hi, n, p),
    )
