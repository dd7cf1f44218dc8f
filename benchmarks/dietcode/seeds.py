"""DietCode's goals over several seeds: runs of ``benchmarks.dietcode`` (one ``--seed`` each) combined.

    python -m benchmarks.dietcode.seeds --runs DIR [DIR ...] --out DIR

Each run's ``results.json`` holds, per workload, DietCode's speed against PyTorch (geometric mean over T and the T below
0.9x), its latency against per-shape tuning's at the T that tuned (``vs_per_shape_at_tuned_t``) and its tuning time as a
share of per-shape's for every T. Here each is a geometric mean over the runs with its 95% Student-t interval
(``geomean_interval``), beside each run's noise gate (``meta.noise_gate``). Writes ``seeds.json`` and ``summary.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import Any

from .._common import geomean_interval, write_json, write_summary

__all__ = ["combine", "main"]

METRICS = ("speed_vs_torch_geomean", "speed_vs_torch_worst", "vs_per_shape_at_tuned_t", "tuning_time_share")


def combine(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{workload: {metric: {"geomean", "ci95", "per_run"}, "t_below_0_9": [...], "gates": [...]}}`` from runs'
    ``results.json`` (each gate: whether the run's noise gate passed for that workload, None if it has none)."""
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        gates = run.get("meta", {}).get("noise_gate", {})
        for goal in run["goals"]:
            w = out.setdefault(goal["workload"], {"per_run": [], "t_below_0_9": [], "gates": []})
            w["per_run"].append({m: goal.get(m) for m in METRICS})
            w["t_below_0_9"].append(len(goal.get("t_below_0_9", [])))
            w["gates"].append(gates.get(goal["workload"], {}).get("passed"))
    for w in out.values():
        for m in METRICS:
            values = [r[m] for r in w["per_run"] if isinstance(r[m], (int, float)) and r[m] > 0]
            if values:
                gm, lo, hi = geomean_interval(values)
                w[m] = {"geomean": gm, "ci95": [lo, hi], "per_run": values}
    return out


def _fmt(entry: dict[str, Any] | None, digits: int = 2) -> str:
    if not entry:
        return "-"
    lo, hi = entry["ci95"]
    per = ", ".join(f"{v:.{digits}f}" for v in entry["per_run"])
    ci = f" [{lo:.{digits}f}, {hi:.{digits}f}]" if not math.isnan(lo) else ""
    return f"{entry['geomean']:.{digits}f}{ci} ({per})"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.dietcode.seeds", description=(__doc__ or "").split("\n")[0])
    p.add_argument("--runs", nargs="+", required=True, help="output folders of benchmarks.dietcode, one per seed")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    runs = []
    for d in args.runs:
        with open(os.path.join(d, "results.json")) as f:
            runs.append(json.load(f))
    combined = combine(runs)
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "seeds.json"), {"runs": list(args.runs), "workloads": combined})
    lines = [
        "# DietCode over seeds",
        "",
        f"Command: `python -m benchmarks.dietcode.seeds --runs {' '.join(args.runs)} --out {args.out}`",
        "",
        "Geometric mean over the runs [95% t interval] (each run's value). `vs per-shape`: DietCode's latency over "
        "per-shape tuning's at the T that tuned (< 1: DietCode faster); `tuning share`: DietCode's tuning time over "
        "per-shape's for every T.",
        "",
        "| workload | speed vs PyTorch | worst T vs PyTorch | T below 0.9x (per run) | vs per-shape | tuning share | "
        "gates passed |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, w in combined.items():
        gates = sum(bool(g) for g in w["gates"])
        lines.append(
            f"| {name} | {_fmt(w.get('speed_vs_torch_geomean'))} | {_fmt(w.get('speed_vs_torch_worst'))} | "
            f"{', '.join(map(str, w['t_below_0_9']))} | {_fmt(w.get('vs_per_shape_at_tuned_t'))} | "
            f"{_fmt(w.get('tuning_time_share'), 3)} | {gates} of {len(w['gates'])} |"
        )
    write_summary(args.out, lines, echo=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
