"""The adaptive evaluator's stopping rules replayed on a sweep that timed every config in micro-batches.

A sweep run with ``--number 50 --repeat 10`` holds, per config, ten micro-batches of 50 runs (the AdaTune paper's
n = 500, B = 50) and its build seconds, so each rule is replayed exactly on the same timings:

- ``fixed``: all n runs, ranked by the median batch (adatune's deterministic evaluator);
- ``per-batch/F``: adatune's rule (the RFC's "CV among the micro-batches"): stop once the CV of the per-batch
  throughputs is under the threshold, from batch F on; the estimate is the median of the batches kept. F = 1 is
  F = 2, since one batch has no CV;
- ``cumulative/F``: the paper's formula (sec. 4.1): the CV of Perf_i = i x GFLOP / Time(i), the running throughput,
  from batch F on; the estimate is the running mean. With F = 1 it stops after one batch (one value has no spread).

Per rule: runs and measurement seconds spent, the tuner clock with builds, and what the rule's estimates do to
ranking: Spearman correlation with ``fixed``, and the fixed-evaluator throughput of the config each rule ranks
first, as a share of the fixed optimum. Ratios carry a bootstrap 95% interval over configs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from adatune.measure.evaluator import adaptive_replay

from .._common import load_records

__all__ = ["RULES", "replay_rule", "evaluator_rules_study", "evaluator_rules_summary"]

RULES = ("fixed", "per-batch/2", "per-batch/3", "cumulative/1", "cumulative/2", "cumulative/3")


def _cumulative_cv(secs: np.ndarray, runs: np.ndarray) -> float:
    perf = np.cumsum(runs) / np.cumsum(secs)
    return float(perf.std() / perf.mean())


def replay_rule(rule: str, costs: Sequence[float], runs: Sequence[int], coef: float) -> tuple[float, int, float]:
    """(seconds per run as the rule reports it, runs spent, seconds they took) from one config's micro-batches."""
    c, r = np.asarray(costs, dtype=np.float64), np.asarray(runs, dtype=np.float64)
    secs = c * r
    if rule == "fixed":
        return float(np.median(c)), int(r.sum()), float(secs.sum())
    kind, floor = rule.split("/")
    if kind == "per-batch":  # the library's own replay of its rule
        kept, kept_runs, _ = adaptive_replay(list(costs), list(runs), coef, int(floor))
        return float(np.median(kept)), sum(kept_runs), float(np.dot(kept, kept_runs))
    stop = next((i for i in range(max(int(floor), 1), len(c) + 1) if _cumulative_cv(secs[:i], r[:i]) < coef), len(c))
    kept_secs = float(secs[:stop].sum())
    return kept_secs / float(r[:stop].sum()), int(r[:stop].sum()), kept_secs


def _ratio_ci(num: np.ndarray, den: np.ndarray, rng: np.random.Generator, n: int = 2000) -> tuple[float, float, float]:
    """sum(num) / sum(den) with a bootstrap 95% interval over configs."""
    idx = rng.integers(0, len(num), size=(n, len(num)))
    boot = num[idx].sum(axis=1) / den[idx].sum(axis=1)
    return float(num.sum() / den.sum()), float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))


def evaluator_rules_study(sweep: str, coef: float = 0.1, min_batches: int = 10, seed: int = 0) -> dict[str, Any]:
    """Every rule over the sweep's configs that kept ``min_batches`` or more micro-batches."""
    last: dict[str, Any] = {}
    for rec in load_records(sweep):
        last[rec.key] = rec
    rows = [r for r in last.values() if r.result.ok and len(r.result.costs) >= min_batches]
    if not rows:
        raise ValueError(f"{sweep}: no config has {min_batches} micro-batches (sweep with --number 50 --repeat 10)")
    build = np.asarray([r.result.build_time for r in rows])
    out: dict[str, Any] = {"sweep": sweep, "configs": len(rows), "coef": coef, "rules": {}}
    est: dict[str, np.ndarray] = {}
    spent: dict[str, np.ndarray] = {}
    took: dict[str, np.ndarray] = {}
    for rule in RULES:
        got = np.asarray([replay_rule(rule, r.result.costs, r.result.batch_runs, coef) for r in rows])
        est[rule], spent[rule], took[rule] = got[:, 0], got[:, 1], got[:, 2]
    optimum = float(est["fixed"].min())
    rng = np.random.default_rng(seed)
    for rule in RULES:
        first = int(np.argmin(est[rule]))
        top10 = set(np.argsort(est[rule])[:10]) & set(np.argsort(est["fixed"])[:10])
        out["rules"][rule] = {
            "runs_mean": float(spent[rule].mean()),
            "at_floor_share": float(np.mean(spent[rule] == spent[rule].min())),
            "measure_less": _ratio_ci(took["fixed"], took[rule], rng),
            "clock_less": _ratio_ci(build + took["fixed"], build + took[rule], rng),
            "spearman": float(stats.spearmanr(est[rule], est["fixed"]).statistic),
            "first_pick_share": optimum / float(est["fixed"][first]),
            "top10_overlap": len(top10),
        }
    out["fixed_measure_seconds"] = float(took["fixed"].sum())
    out["build_seconds"] = float(build.sum())
    return out


def evaluator_rules_summary(meta: dict[str, Any], study: dict[str, Any]) -> list[str]:
    def ci(v: Sequence[float]) -> str:
        return f"{v[0]:.2f}x [{v[1]:.2f}, {v[2]:.2f}]"

    lines = [
        "# The adaptive evaluator's stopping rules, replayed on recorded micro-batches",
        "",
        f"Command: `{meta['command']}`",
        f"Sweep `{study['sweep']}`: {study['configs']} configs with every micro-batch recorded; threshold CV < "
        f"{study['coef']}. 'less' = the fixed evaluator's seconds / the rule's (measurement alone; with builds, the "
        "tuner clock), bootstrap 95% interval over configs. 'first pick' = the fixed optimum's speed / the speed (by "
        "the fixed evaluator) of the config the rule ranks first.",
        "",
        "| rule | runs per config | stopped at its floor | measurement time | tuner clock | Spearman vs fixed "
        "| first pick | top-10 shared |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rule, r in study["rules"].items():
        lines.append(
            f"| {rule} | {r['runs_mean']:.0f} | {r['at_floor_share']:.0%} | {ci(r['measure_less'])} | "
            f"{ci(r['clock_less'])} | {r['spearman']:.3f} | {r['first_pick_share']:.3f} | {r['top10_overlap']}/10 |"
        )
    return lines
