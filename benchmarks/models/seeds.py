"""``python -m benchmarks.models.seeds RUN [RUN ...] --out DIR``: several seeds of ``benchmarks.models`` in one table.

Each run is one seed; its ratios are taken inside that run, where PyTorch, onnxruntime and every checkpoint's model were
timed in turns, so a slow minute of the host hits all engines alike. Per model and arm, over the seeds: the final speed
against onnxruntime and PyTorch (geometric mean with a Student-t 95% interval, ``geomean_interval``) and the tuning time
at which the model first reached each engine's latency (the median, given only when most seeds reached it).

Writes ``seeds.json``, ``seeds.csv``, ``seeds.png`` (re-timed checkpoints against each engine) and ``summary.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from dataclasses import asdict, dataclass
from typing import Any

from .._common import command_line, geomean_interval, pyplot, save_figure, write_csv, write_json, write_summary
from .report import time_to_latency

plt = pyplot()

__all__ = ["SeedSummary", "ratio_interval", "summarize"]

ENGINES = ("onnxruntime", "pytorch")


ratio_interval = geomean_interval  # the name benchmarks.gpu.dietcode_report imports


@dataclass
class SeedSummary:
    """One model and arm over the seeds: speed against each engine and time to reach its latency."""

    model: str
    arm: str
    seeds: list[int]
    latency_ms: list[float]  # the arm's final model, re-timed in turns, per seed
    speedup: dict[str, list[float]]  # engine -> engine latency / arm latency, per seed
    geomean: dict[str, tuple[float, float, float]]  # engine -> (geomean, low, high)
    reached_s: dict[str, list[float | None]]  # engine -> tuning s at the first checkpoint at or below it, per seed
    budget_s: list[float]

    def median_reached(self, engine: str) -> float | None:
        """Median time to reach ``engine`` when most seeds did (one that never did counts as slowest), else None."""
        times = [math.inf if t is None else t for t in self.reached_s[engine]]
        if sum(t < math.inf for t in times) * 2 <= len(times):
            return None
        return statistics.median(times)


def summarize(results: list[dict[str, Any]]) -> list[SeedSummary]:
    """One ``SeedSummary`` per (model, arm) present in the runs; ``results`` are loaded ``results.json`` files."""
    cells: dict[tuple[str, str], SeedSummary] = {}
    for res in results:
        seed = int(res["meta"]["config"]["seed"])
        for m in res["models"]:
            final = m.get("final") or {}
            for arm in m["arms"]:
                own = final.get(arm["arm"])
                if not own:
                    continue  # a run killed before its final comparison has no ratios taken in turns
                cell = cells.setdefault(
                    (m["model"], arm["arm"]),
                    SeedSummary(
                        m["model"], arm["arm"], [], [], {e: [] for e in ENGINES}, {}, {e: [] for e in ENGINES}, []
                    ),
                )
                cell.seeds.append(seed)
                cell.latency_ms.append(own * 1e3)
                cell.budget_s.append(float(arm["tuning_s"]))
                for e in ENGINES:
                    level = final.get(e)
                    cell.speedup[e].append(level / own if level else math.nan)
                    cell.reached_s[e].append(time_to_latency(arm["checkpoints"], level) if level else None)
    for cell in cells.values():
        for e in ENGINES:
            ok = [r for r in cell.speedup[e] if not math.isnan(r)]
            cell.geomean[e] = geomean_interval(ok) if ok else (math.nan, math.nan, math.nan)
    return list(cells.values())


def _plot(out: str, results: list[dict[str, Any]]) -> list[str]:
    figures = []
    for name in sorted({m["model"] for r in results for m in r["models"]}):
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for res in results:
            seed = res["meta"]["config"]["seed"]
            for m in (m for m in res["models"] if m["model"] == name):
                for e, colour in zip(ENGINES, ("C1", "C2")):
                    if m["final"].get(e):
                        ax.axhline(m["final"][e] * 1e3, color=colour, alpha=0.4, linestyle="--")
                for arm in m["arms"]:
                    pts = [(c["tuning_s"] / 60, c["retimed_s"] * 1e3) for c in arm["checkpoints"] if c.get("retimed_s")]
                    if pts:
                        ax.plot(*zip(*pts), "o-", alpha=0.8, label=f"{arm['arm']} seed {seed}")
        ax.plot([], [], "C1--", label="onnxruntime (per seed's run)")
        ax.plot([], [], "C2--", label="PyTorch (per seed's run)")
        ax.set_xlabel("tuning wall-clock (min)")
        ax.set_ylabel("latency re-timed in turns (ms, batch 1)")
        ax.set_title(f"{name}: every seed's checkpoints")
        ax.legend(fontsize=7)
        path = save_figure(fig, out, f"seeds_{name}.png")
        figures.append(os.path.basename(path))
    return figures


def _fmt_min(s: float | None) -> str:
    return "never" if s is None else f"{s / 60:.1f}"


def _markdown(command: str, runs: list[str], results: list[dict[str, Any]], cells: list[SeedSummary]) -> list[str]:
    hosts = sorted(
        {
            f"{r['meta']['host'].get('model')} ({r['meta']['host'].get('mcpu')}, {r['meta']['host'].get('isa')})"
            for r in results
        }
    )
    gates = [f"{run}: {r['meta'].get('noise_sentence', 'no gate recorded')}" for run, r in zip(runs, results)]
    lines = [
        "# Whole models over seeds",
        "",
        f"Command: `{command}`  ",
        f"Host: {'; '.join(hosts)}. Runs: {', '.join(f'`{r}`' for r in runs)}.",
        "",
        "Each seed is one run of `benchmarks.models`; its ratios were taken inside that run (engines and every "
        "checkpoint's model timed in turns). Speed against an engine: engine latency / adatune latency (> 1: adatune "
        "faster), geometric mean over the seeds with a Student-t 95% interval on the log ratios. Time to an engine's "
        "latency: tuning minutes at the first checkpoint whose re-timed latency is at or below that run's engine "
        "(checkpoints are coarse, so this is an upper bound at the checkpoint spacing).",
        "",
        "Noise gates:",
        "",
        *[f"- {g}" for g in gates],
        "",
        "| model | arm | seeds | adatune ms per seed | vs onnxruntime (95% CI) | vs PyTorch (95% CI) "
        "| min to onnxruntime per seed | min to PyTorch per seed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        row = [c.model, c.arm, " ".join(map(str, c.seeds)), ", ".join(f"{v:.2f}" for v in c.latency_ms)]
        for e in ENGINES:
            g, lo, hi = c.geomean[e]
            row.append(f"{g:.2f}x" + ("" if math.isnan(lo) else f" [{lo:.2f}, {hi:.2f}]"))
        for e in ENGINES:
            med = c.median_reached(e)
            per = ", ".join(_fmt_min(t) for t in c.reached_s[e])
            row.append(per + (f" (median {med / 60:.1f})" if med is not None else ""))
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.models.seeds", description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="directories of benchmarks.models runs (one seed each)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    results = []
    for run in args.runs:
        path = os.path.join(run, "results.json")
        if not os.path.exists(path):
            print(f"{run}: no results.json", file=sys.stderr)
            return 2
        with open(path, encoding="utf-8") as f:
            results.append(json.load(f))
    cells = summarize(results)
    if not cells:
        print("no run has a final comparison (killed before it?)", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    command = command_line("benchmarks.models.seeds", argv)
    write_json(
        os.path.join(args.out, "seeds.json"),
        {"command": command, "runs": args.runs, "cells": [asdict(c) for c in cells]},
    )
    rows = [
        {
            "model": c.model,
            "arm": c.arm,
            "seed": s,
            "latency_ms": ms,
            **{f"x_{e}": c.speedup[e][i] for e in ENGINES},
            **{f"reached_{e}_s": c.reached_s[e][i] for e in ENGINES},
        }
        for c in cells
        for i, (s, ms) in enumerate(zip(c.seeds, c.latency_ms))
    ]
    write_csv(os.path.join(args.out, "seeds.csv"), rows)
    figures = _plot(args.out, results)
    lines = _markdown(command, args.runs, results, cells) + [f"![{f}]({f})" for f in figures]
    write_summary(args.out, lines, echo=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
