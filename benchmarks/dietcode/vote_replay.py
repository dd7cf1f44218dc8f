"""What each T should vote on, replayed from committed DietCode logs (no timing: deterministic, seconds).

A T the tuner did not sample votes on the joint model's prediction (``dispatch_costs="measured"`` reads timings
only where they exist). Hold out each interior sampled T of a log in turn, refit the model on the other T's
timings, and let the held-out T vote among the log's kernels: on the prediction (what ``"measured"`` and
``"predicted"`` do there), on the prediction anchored to each kernel's timings at the neighbouring sampled T
(``"calibrated"``, ``adatune.dietcode._select.calibrated_costs``), or on the kernel fastest at the nearest sampled T.
The regret is the chosen kernel's measured seconds at the held-out T over the best measured there::

    python -m benchmarks.dietcode.vote_replay --logs 'benchmarks/results/dietcode/zen4_*/records_*.jsonl' \\
        --out benchmarks/results/dietcode/vote_replay
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from collections import defaultdict
from typing import Any

import numpy as np
from scipy.stats import gmean

from adatune.dietcode import MicroKernelCostModel
from adatune.dietcode._select import calibrated_costs

from .._common import write_csv, write_summary
from .fmk_features import read_log

METHODS = ("predicted", "calibrated", "nearest")


def replay(path: str, seed: int = 0) -> list[dict[str, Any]]:
    """One row per (log, held-out T): each method's regret there."""
    wl, space, kernels, seconds = read_log(path)
    keys = sorted(kernels)
    ts = sorted({t for _, t in seconds})
    timed = np.array([[seconds.get((k, t), np.nan) for t in ts] for k in keys])
    model = MicroKernelCostModel(space, wl, seed=seed)
    rows = []
    for j in range(1, len(ts) - 1):  # interior T: a held-out end has a neighbour on one side only
        train = [(k, t, s) for (k, t), s in seconds.items() if t != ts[j]]
        model.fit([kernels[k] for k, _, _ in train], [t for _, t, _ in train], [s for _, _, s in train])
        pred = model.predict([kernels[k] for k in keys], ts)
        held = timed.copy()
        held[:, j] = np.nan
        have = np.isfinite(timed[:, j])
        if have.sum() < 2:
            continue
        truth = np.where(have, timed[:, j], np.inf)
        choice = {
            "predicted": pred[:, j],
            "calibrated": calibrated_costs(pred, held, ts)[:, j],
            "nearest": held[:, j - 1] if ts[j] - ts[j - 1] <= ts[j + 1] - ts[j] else held[:, j + 1],
        }
        row = {"log": os.path.relpath(path), "workload": wl.name, "T": ts[j], "kernels": int(have.sum())}
        for name, cost in choice.items():
            pick = int(np.nanargmin(np.where(have, cost, np.nan)))
            row[f"{name}_regret"] = float(truth[pick] / truth.min())
        rows.append(row)
    return rows


def _summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    return {
        m: {
            "geomean_regret": float(gmean([r[f"{m}_regret"] for r in rows])),
            "share_regret_over_1.1": float(np.mean([r[f"{m}_regret"] > 1.1 for r in rows])),
            "worst_regret": max(r[f"{m}_regret"] for r in rows),
        }
        for m in METHODS
    }


def paired_interval(rows: list[dict[str, Any]], draws: int = 5000, seed: int = 0) -> list[float]:
    """Geomean over held-out T of predicted regret / calibrated regret, with a 95% bootstrap interval that
    resamples whole logs (a log's T share one tuning run, so they are not independent)."""
    by_log: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        by_log[r["log"]].append(float(np.log(r["predicted_regret"] / r["calibrated_regret"])))
    logs = sorted(by_log)
    rng = np.random.default_rng(seed)
    boots = [
        float(np.exp(np.mean(np.concatenate([by_log[logs[i]] for i in rng.choice(len(logs), len(logs))]))))
        for _ in range(draws)
    ]
    point = float(np.exp(np.mean([x for v in by_log.values() for x in v])))
    return [point, *(float(q) for q in np.percentile(boots, [2.5, 97.5]))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--logs", nargs="+", required=True, help="DietCode record logs (globs allowed)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    paths = sorted({f for pattern in args.logs for f in glob.glob(pattern)})
    if not paths:
        raise SystemExit(f"no log matches {args.logs}")
    rows = []
    for path in paths:
        rows += replay(path)
        print(f"replayed {path}", flush=True)
    summary = _summary(rows)
    by_gemm: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_gemm[r["workload"]].append(r)
    per_gemm = {w: _summary(rs) for w, rs in sorted(by_gemm.items())}
    ratio = paired_interval(rows)
    wins = {
        "calibrated_better": sum(r["calibrated_regret"] < r["predicted_regret"] for r in rows),
        "calibrated_worse": sum(r["calibrated_regret"] > r["predicted_regret"] for r in rows),
    }
    lines = [
        "# Which costs a T the tuner did not sample should vote on: held-out replay of DietCode logs",
        "",
        f"Command: `python -m benchmarks.dietcode.vote_replay {' '.join(sys.argv[1:] if argv is None else argv)}`  ",
        f"{len(paths)} logs, {len(rows)} held-out interior T (each: the model refit without that T's timings; regret ="
        " the chosen kernel's measured seconds there / the best measured there). No timing in this run.",
        "",
        "| method | geomean regret | share of T with regret > 1.1 | worst regret |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {m} | {v['geomean_regret']:.3f} | {v['share_regret_over_1.1']:.1%} | {v['worst_regret']:.2f} |"
        for m, v in summary.items()
    ]
    lines += [
        "",
        f"calibrated beat predicted at {wins['calibrated_better']} T, lost at {wins['calibrated_worse']}; predicted "
        f"regret / calibrated regret {ratio[0]:.3f}x [{ratio[1]:.3f}, {ratio[2]:.3f}] (geomean over T, 95% bootstrap "
        "interval resampling logs).",
        "",
        "| GEMM | held-out T | predicted (> 1.1) | calibrated (> 1.1) | nearest (> 1.1) |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {w} | {len(by_gemm[w])} | "
        + " | ".join(f"{v[m]['geomean_regret']:.3f} ({v[m]['share_regret_over_1.1']:.0%})" for m in METHODS)
        + " |"
        for w, v in per_gemm.items()
    ]
    lines.append("")
    print("\n".join(lines))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        write_csv(os.path.join(args.out, "vote_replay.csv"), rows)
        with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
            json.dump(
                {"logs": paths, "summary": summary, "per_gemm": per_gemm, "wins": wins, "ratio": ratio, "rows": rows},
                f,
                indent=1,
            )
        write_summary(args.out, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
