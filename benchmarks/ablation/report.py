"""Turning ablation results into the paper's figures (6 and 9), a CSV and a markdown summary."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from .._common import write_csv
from . import BASELINE, SCHEMES

__all__ = ["best_curve", "summarise", "write_csv", "plot_best_vs", "plot_measure_vs_search", "write_markdown"]

_COLORS = {"XGB+SA+DE": "tab:gray", "RFEI+SA+DE": "tab:blue", "RFEI+CSA+DE": "tab:green", "RFEI+CSA+AE": "tab:red"}
_LO, _HI = 2.5, 97.5  # percentiles across seeds for the shaded interval


def best_curve(trials: list[dict], grid: np.ndarray, x: str) -> np.ndarray:
    """Best GFLOPS known at each grid point of ``x`` ("clock" seconds or "trial" count)."""
    if not trials:
        return np.zeros(len(grid))
    xs = np.asarray([t["clock"] if x == "clock" else t["trial"] + 1 for t in trials], dtype=np.float64)
    best = np.asarray([t["best_gflops"] for t in trials])
    pos = np.searchsorted(xs, grid, side="right") - 1
    return np.where(pos >= 0, best[np.maximum(pos, 0)], 0.0)


def _curves(runs: list[dict], grid: np.ndarray, x: str) -> dict[str, np.ndarray]:
    out: dict[str, list] = defaultdict(list)
    for r in runs:
        out[r["scheme"]].append(best_curve(r["trials"], grid, x))
    return {k: np.asarray(v) for k, v in out.items()}


def _first_reach(grid: np.ndarray, curve: np.ndarray, target: float) -> float:
    hit = np.flatnonzero(curve >= target * (1 - 1e-9))
    return float(grid[hit[0]]) if len(hit) else math.inf


def summarise(runs: list[dict], x: str, horizon: float, n_grid: int = 400) -> dict[str, Any]:
    """Per scheme: median final best, time (or trials) for the median curve to reach the baseline's median
    final best, the speedup over the baseline, and per-seed times to the same target."""
    grid = np.linspace(0.0, horizon, n_grid + 1)[1:] if x == "clock" else np.arange(1, int(horizon) + 1, dtype=float)
    curves = _curves(runs, grid, x)
    if BASELINE not in curves:
        return {"grid": grid, "curves": curves, "target": None, "rows": {}}
    target = float(np.median(curves[BASELINE][:, -1]))
    t_base = _first_reach(grid, np.median(curves[BASELINE], axis=0), target)
    rows = {}
    for name, c in curves.items():
        t = _first_reach(grid, np.median(c, axis=0), target)
        per_seed = [_first_reach(grid, ci, target) for ci in c]
        rows[name] = {
            "final_median": float(np.median(c[:, -1])),
            "reach": t,
            "speedup": t_base / t if math.isfinite(t) and t > 0 else 0.0,
            "seeds_reached": int(sum(math.isfinite(p) for p in per_seed)),
            "n_seeds": len(per_seed),
            "per_seed_median": float(np.median(per_seed)),
        }
    return {"grid": grid, "curves": curves, "target": target, "rows": rows}


def plot_best_vs(panels: list[tuple[str, dict]], path: str, xlabel: str) -> None:
    """Figure 6: best GFLOPS against wall-clock (or trials), median over seeds and a 95% band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(6 * max(len(panels), 1), 4.2), squeeze=False)
    for ax, (title, summ) in zip(axes[0], panels):
        grid = summ["grid"]
        for name in SCHEMES:
            if name not in summ["curves"]:
                continue
            c = summ["curves"][name]
            ax.plot(grid, np.median(c, axis=0), color=_COLORS[name], label=f"{name} (n={len(c)})")
            ax.fill_between(
                grid,
                np.percentile(c, _LO, axis=0),
                np.percentile(c, _HI, axis=0),
                color=_COLORS[name],
                alpha=0.15,
                linewidth=0,
            )
        if summ.get("target"):
            ax.axhline(summ["target"], color="k", linestyle=":", linewidth=0.8, label="baseline final (median)")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("best GFLOPS")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle("median over seeds, shaded: 2.5-97.5 percentile", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _per_iteration(run: dict, plan_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Search and measurement seconds per iteration (one plan of ``plan_size`` trials)."""
    search: dict[int, float] = defaultdict(float)
    measure: dict[int, float] = defaultdict(float)
    done = 0
    for r in run["rounds"]:
        it = done // plan_size
        search[it] += r["search_time"]
        measure[it] += r["measure_time"]
        done += r["n"]
    n = max(search, default=-1) + 1
    return np.asarray([search[i] for i in range(n)]), np.asarray([measure[i] for i in range(n)])


def iteration_times(runs: list[dict], plan_size: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Median over seeds of search and measurement time per iteration, per scheme."""
    out = {}
    by: dict[str, list] = defaultdict(list)
    for r in runs:
        by[r["scheme"]].append(_per_iteration(r, plan_size))
    for name, lst in by.items():
        n = min(len(s) for s, _ in lst)
        out[name] = (np.median([s[:n] for s, _ in lst], axis=0), np.median([m[:n] for _, m in lst], axis=0))
    return out


def plot_measure_vs_search(panels: list[tuple[str, dict]], path: str, plan_size: int) -> None:
    """Figure 9: measurement time and search time per iteration (median over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(6 * max(len(panels), 1), 4.2), squeeze=False)
    for ax, (title, per) in zip(axes[0], panels):
        for name in SCHEMES:
            if name not in per:
                continue
            s, m = per[name]
            it = np.arange(1, len(s) + 1)
            ax.plot(it, m, color=_COLORS[name], marker="o", markersize=3, label=f"{name} measurement")
            ax.plot(it, s, color=_COLORS[name], linestyle="--", marker="x", markersize=3, label=f"{name} search")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(f"iteration ({plan_size} trials)")
        ax.set_ylabel("seconds")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _fmt_t(t: float, unit: str) -> str:
    return "not reached" if not math.isfinite(t) else (f"{t:.0f} {unit}" if t >= 10 else f"{t:.1f} {unit}")


def summary_table(summ: dict, unit: str) -> list[str]:
    lines = [
        f"| scheme | median final best GFLOPS | {unit} to reach baseline's final best (median curve) | "
        f"speedup vs {BASELINE} | seeds reaching it | median per-seed {unit} |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in SCHEMES:
        row = summ["rows"].get(name)
        if row is None:
            continue
        lines.append(
            f"| {name} | {row['final_median']:.2f} | {_fmt_t(row['reach'], unit)} | "
            f"{row['speedup']:.2f}x | {row['seeds_reached']}/{row['n_seeds']} | "
            f"{_fmt_t(row['per_seed_median'], unit)} |"
        )
    return lines


def measurement_table(runs: list[dict]) -> list[str]:
    """Per scheme: mean kernel runs and runner seconds per successfully measured candidate."""
    lines = [
        "| scheme | candidates measured (all seeds) | mean kernel runs / candidate | "
        "mean measurement s / candidate | mean build s / candidate | total search s (median seed) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    by: dict[str, list] = defaultdict(list)
    for r in runs:
        by[r["scheme"]].append(r)
    for name in SCHEMES:
        if name not in by:
            continue
        ok = [t for r in by[name] for t in r["trials"] if t["error_no"] == 0]
        search = np.median([sum(x["search_time"] for x in r["rounds"]) for r in by[name]])
        if not ok:
            lines.append(f"| {name} | 0 | - | - | - | {search:.1f} |")
            continue
        lines.append(
            f"| {name} | {len(ok)} | {np.mean([t['runs'] for t in ok]):.0f} | "
            f"{np.mean([t['run_time'] for t in ok]):.3f} | {np.mean([t['build_time'] for t in ok]):.3f} | "
            f"{search:.1f} |"
        )
    return lines


def write_markdown(path: str, meta: dict, hardware: dict, hw_summ: dict, replay: list, replay_summ: list) -> None:
    L: list[str] = ["# AdaTune ablation (paper sec. 5.3) on this machine", ""]
    L += [
        f"- date: {meta['date']}; machine: {meta['cpu']}, {meta['cores']} cores; TVM {meta['tvm']}",
        f"- target: {meta['target']}; budget per run: {meta['budget']:.0f} s of tuner clock (search + build + "
        f"measurement); seeds: {meta['seeds']}; plan size {meta['plan_size']}, batch {meta['batch_size']}",
        f"- deterministic evaluator (DE): number={meta['number']} x repeat={meta['repeat']} = "
        f"{meta['number'] * meta['repeat']} runs; adaptive evaluator (AE): micro-batches of {meta['micro_batch']}, "
        f"at least {meta['min_micro_batches']}, stop at CV < {meta['min_converge_coef']}, same cap",
        f"- GPU: {meta['gpu_note']}",
        "",
    ]
    L += [
        "Figures: `best_vs_time.png` (paper Fig. 6), `measure_vs_search.png` (Fig. 9)"
        + (", `replay_best_vs_trials.png`" if replay else "")
        + ". Raw data: `results.json`, `trials.csv`.",
        "",
    ]
    goals: list[str] = []
    for wl, data in hardware.items():
        summ = hw_summ[wl]
        L += [f"## {wl}: {data['task']}", ""]
        if summ["target"] is not None:
            L += [f"Baseline ({BASELINE}) median final best: **{summ['target']:.2f} GFLOPS**.", ""]
        L += summary_table(summ, "s") + [""]
        L += ["Measurement cost per candidate in the tuning runs:", ""] + measurement_table(data["runs"]) + [""]
        chk = data.get("evaluator_check")
        if chk and "pick_ratio" in chk:
            red_time = chk["mean_run_time_de"] / chk["mean_run_time_ae"] if chk["mean_run_time_ae"] > 0 else math.inf
            red_kernel = (
                chk["mean_kernel_time_de"] / chk["mean_kernel_time_ae"] if chk["mean_kernel_time_ae"] > 0 else math.inf
            )
            L += [
                f"Evaluator check ({chk['n_valid']} configs measured with both evaluators; half the best configs "
                "the DE runs found, half random):",
                "",
                f"- measurement time per candidate: DE {chk['mean_run_time_de']:.3f} s, AE "
                f"{chk['mean_run_time_ae']:.3f} s (**{red_time:.2f}x** less; kernel time alone {red_kernel:.2f}x; "
                f"runs {chk['mean_runs_de']:.0f} vs {chk['mean_runs_ae']:.0f})",
                f"- best config by DE: #{chk['de_pick']} at {chk['de_pick_de_gflops']:.2f} GFLOPS; best by AE: "
                f"#{chk['ae_pick']} measuring {chk['ae_pick_ae_gflops']:.2f} GFLOPS under AE and "
                f"{chk['ae_pick_de_gflops']:.2f} under DE ({100 * chk['pick_ratio_same_pass']:.1f}% in the same DE "
                f"pass); both picks re-measured with DE (median of {meta['confirm_repeats']}): AE's pick is at "
                f"**{100 * chk['pick_ratio']:.1f}%** of DE's ({'within' if chk['within_2pct'] else 'NOT within'} 2%)",
                "",
            ]
            goals.append(
                f"- {wl}: AE cuts measurement time per candidate {red_time:.2f}x (goal >= 2.5x: "
                f"{'met' if red_time >= 2.5 else 'not met'}); AE's pick within 2% of DE's: "
                f"{'yes' if chk['within_2pct'] else 'no'}"
            )
        row = summ["rows"].get("RFEI+CSA+AE")
        base = summ["rows"].get(BASELINE)
        if row and base and math.isfinite(base["reach"]):
            frac = row["reach"] / base["reach"] if math.isfinite(row["reach"]) else math.inf
            goals.append(
                f"- {wl}: RFEI+CSA+AE reaches the baseline's final best in "
                f"{f'{frac:.2f}' if math.isfinite(frac) else 'never (within budget)'} of the baseline's "
                f"time (goal <= 1/3: {'met' if frac <= 1 / 3 else 'not met'})"
            )
    for rp, summ in zip(replay, replay_summ):
        L += [
            f"## Replay: {rp['task']} ({rp['log']})",
            "",
            f"{rp['n_records']} recorded configs of a space of {rp['space']}; sweep optimum "
            f"{rp['optimum_gflops']:.2f} GFLOPS; {rp['max_trials']} trials per run; "
            f"{len({r['seed'] for r in rp['runs']})} seeds. On replay the evaluator does not matter (recorded "
            "timings are served), so RFEI+CSA+AE equals RFEI+CSA+DE in trials and is not listed.",
            "",
        ]
        L += summary_table(summ, "trials") + [""]
    if not replay:
        L += [
            "## Replay",
            "",
            "No recorded sweep log was found (`--replay-logs`); the comparison in trials was not run.",
            "",
        ]
    L += ["## Goals (issue: measured here, not asserted)", ""] + (goals or ["- no hardware results"]) + [""]
    L += [
        "Notes: time to reach is read off the median-over-seeds curve on a grid of "
        "budget/400; 'speedup' is the baseline's time divided by the scheme's. The interval in the figures is "
        "the 2.5-97.5 percentile across seeds (with 5 seeds: min to max).",
        "",
    ]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(L))
