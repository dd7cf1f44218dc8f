"""Tables, figures and the summary of a trace-search benchmark run."""

from __future__ import annotations

import math
import os
from collections import defaultdict
from typing import Any

import numpy as np

from .._common import geomean_interval, load_sentence, pyplot, save_figure, write_json
from .run import ArmResult

__all__ = ["summarise", "write_results", "write_markdown", "plot"]


def _time_to_reach(curve: list[tuple[float, float]], goal: float) -> float:
    """Wall seconds until the curve's best latency is at most ``goal`` (inf if never)."""
    return next((t for t, best in curve if best <= goal), math.inf)


def summarise(results: list[ArmResult]) -> list[dict[str, Any]]:
    """Per (workload, arm): means over seeds of the re-timed best, own best, wall to stock's final best
    (same seed, each arm's own measurements), build seconds per candidate and wall seconds."""
    stock = {(r.workload, r.seed): r.own_best for r in results if r.arm == "ms-stock" and not r.error}
    knob = {(r.workload, r.seed): r.best for r in results if r.arm == "knob-xgb" and not r.error}
    groups: dict[tuple[str, str], list[ArmResult]] = defaultdict(list)
    for r in results:
        groups[(r.workload, r.arm)].append(r)
    rows = []
    for (workload, arm), runs in groups.items():
        ok = [r for r in runs if not r.error]
        reach = [_time_to_reach(r.curve, stock[(r.workload, r.seed)]) for r in ok if (r.workload, r.seed) in stock]

        def mean(values: list[float]) -> float:
            finite = [v for v in values if math.isfinite(v)]
            return float(np.mean(finite)) if finite else math.inf

        bests = [r.best * 1e3 for r in ok if math.isfinite(r.best)]
        # the yardstick: the knob template's best (XGB, same trials and seed) over the arm's, per seed
        vs_knob = [
            knob[(r.workload, r.seed)] / r.best
            for r in ok
            if math.isfinite(r.best) and math.isfinite(knob.get((r.workload, r.seed), math.inf))
        ]
        speed, low, high = geomean_interval(vs_knob) if vs_knob else (math.inf, math.nan, math.nan)
        rows.append(
            {
                "workload": workload,
                "arm": arm,
                "best_ms_min": min(bests, default=math.inf),
                "best_ms_max": max(bests, default=math.inf),
                "speed_vs_knob_xgb": speed,
                "speed_vs_knob_xgb_ci95": [low, high],
                "seeds": len(runs),
                "failed": len(runs) - len(ok),
                "trials": mean([float(r.trials) for r in ok]),
                "best_ms": mean([r.best * 1e3 for r in ok]),
                "own_best_ms": mean([r.own_best * 1e3 for r in ok]),
                "all_correct": all(r.correct for r in ok) if ok else False,
                "reached_stock": f"{sum(math.isfinite(t) for t in reach)}/{len(reach)}",
                "time_to_stock_best_s": mean(reach),
                "build_s_per_candidate": mean([r.build_per_candidate for r in ok]),
                "wall_s": mean([r.wall for r in ok]),
                "errors": sorted({r.error for r in runs if r.error}),
            }
        )
    return rows


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def write_results(path: str, meta: dict[str, Any], results: list[ArmResult], rows: list[dict[str, Any]]) -> None:
    write_json(path, _clean({"meta": meta, "summary": rows, "runs": [r.to_json() for r in results]}))


def _fmt(value: Any, digits: int = 3) -> str:
    if isinstance(value, float):
        return "-" if not math.isfinite(value) else f"{value:.{digits}g}"
    return str(value)


def _speed(value: Any, interval: Any = None) -> str:
    """A ratio to the knob template with its interval, or a dash where the workload has no template (not "-x")."""
    text = _fmt(value, 2)
    if text in ("-", "None"):
        return text
    low, high = interval if interval else (None, None)
    if isinstance(low, float) and isinstance(high, float) and math.isfinite(low) and math.isfinite(high):
        return f"{text}x [{low:.2f}, {high:.2f}]"
    return f"{text}x"


def write_markdown(path: str, meta: dict[str, Any], rows: list[dict[str, Any]], figures: list[str]) -> None:
    lines = [
        "# Trace search benchmark",
        "",
        f"Command: `{meta['command']}`",
        "",
        f"Host: {meta['host']}; target `{meta['target']}`; {meta['trials']} trials per arm; seeds "
        f"{meta['seeds']}; started {meta['started']}, took {meta['wall_s']:.0f} s.",
        "",
        load_sentence(meta) + " Arms ran one after another (seed s of every arm before seed s+1, the arm order"
        " rotating), so their wall-clock and own figures carry the machine's drift between them.",
        "",
        *([meta["noise_sentence"], ""] if meta.get("noise_sentence") else []),
        f"- **best ms**: each arm's best program re-timed by one in-process evaluator, every arm's in turns "
        f"({meta.get('retime_rounds', 7)} rounds, the median; runs of at least 50 ms per timing), checked against"
        " the unscheduled program (**ok**); the mean over seeds;",
        "- **speed vs knob-xgb**: the knob template's re-timed best (XGB, same trials and seed) over the arm's,"
        " geometric mean over seeds with its 95% t-interval (below 1: slower than the template);",
        "- **own best ms**: the arm's own measurement of it (its runner and evaluator);",
        "- **to stock best s**: wall seconds until the arm's own best reached stock `ms.tune_tir`'s final own"
        " best, same seed (`-`: never; evaluators differ, so read it with the own-best column);",
        "- **build s/cand**: wall seconds of build calls per candidate, queueing included.",
        "",
    ]
    by_workload: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_workload[row["workload"]].append(row)
    for workload, group in by_workload.items():
        lines += [
            f"## {workload}",
            "",
            "| arm | trials | best ms (min-max) | speed vs knob-xgb | ok | own best ms | to stock best s (reached) "
            "| build s/cand | wall s |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in group:
            lines.append(
                f"| {r['arm']} | {_fmt(r['trials'])} | {_fmt(r['best_ms'])} ({_fmt(r['best_ms_min'])}-"
                f"{_fmt(r['best_ms_max'])}) | {_speed(r['speed_vs_knob_xgb'], r.get('speed_vs_knob_xgb_ci95'))} | "
                f"{'yes' if r['all_correct'] else 'no'} | {_fmt(r['own_best_ms'])} | "
                f"{_fmt(r['time_to_stock_best_s'])} ({r['reached_stock']}) | "
                f"{_fmt(r['build_s_per_candidate'])} | {_fmt(r['wall_s'])} |"
            )
        errors = [f"{r['arm']}: {e}" for r in group for e in r["errors"]]
        lines += [""] + [f"- failed: {e}" for e in errors] + ([""] if errors else [])
    if meta.get("skipped"):
        lines += ["Not run (the `--max-minutes` budget was spent): " + "; ".join(meta["skipped"]) + ".", ""]
    lines += [f"![{os.path.basename(f)}]({os.path.basename(f)})" for f in figures]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def plot(out_dir: str, results: list[ArmResult], rows: list[dict[str, Any]]) -> list[str]:
    """best latency vs wall-clock per workload, and the re-timed best and build time per arm."""
    plt = pyplot()

    workloads = list(dict.fromkeys(r.workload for r in results))
    arms = list(dict.fromkeys(r.arm for r in results))
    colors = {a: plt.get_cmap("tab10")(i) for i, a in enumerate(arms)}
    fig, axes = plt.subplots(1, len(workloads), figsize=(4.5 * len(workloads), 3.8), squeeze=False)
    for ax, workload in zip(axes[0], workloads):
        for r in results:
            pts = [(t, b * 1e3) for t, b in r.curve if math.isfinite(b)]
            if r.workload == workload and pts:
                ax.step(
                    *zip(*pts),
                    where="post",
                    color=colors[r.arm],
                    alpha=0.8,
                    label=r.arm if r.seed == min(x.seed for x in results) else None,
                )
        ax.set(title=workload, xlabel="wall-clock (s)", ylabel="best latency (ms, own)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    curves = save_figure(fig, out_dir, "best_vs_wallclock.png", dpi=120)

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    width = 0.8 / max(len(arms), 1)
    for i, arm in enumerate(arms):
        best = [
            next((r["best_ms"] for r in rows if r["workload"] == w and r["arm"] == arm), math.nan) for w in workloads
        ]
        build = [
            next((r["build_s_per_candidate"] for r in rows if r["workload"] == w and r["arm"] == arm), math.nan)
            for w in workloads
        ]
        xs = np.arange(len(workloads)) + i * width
        ax1.bar(xs, [b if math.isfinite(b) else 0 for b in best], width, color=colors[arm], label=arm)
        ax2.bar(xs, [b if math.isfinite(b) else 0 for b in build], width, color=colors[arm], label=arm)
    for ax, label in ((ax1, "best latency (ms, re-timed)"), (ax2, "build s per candidate")):
        ax.set_xticks(np.arange(len(workloads)) + 0.4 - width / 2, workloads, fontsize=7)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, axis="y")
    ax1.set_yscale("log")
    ax1.legend(fontsize=7)
    bars = save_figure(fig, out_dir, "best_and_build.png", dpi=120)
    return [curves, bars]
