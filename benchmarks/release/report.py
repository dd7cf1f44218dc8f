"""Summaries, tables and plots of the ReLeASE comparison.

"Reaching the baseline" is read off mean curves: for each scheme, the best GFLOPS found so far is averaged
over seeds, per trial (hardware measurements) and on a grid of the tuner's clock; a run that ended earlier
keeps its final best. The target is the baseline's (AutoTVM's) final best averaged over seeds, times
``quality``. A scheme's cost to reach it is the first trial (or clock time) where its mean curve gets
there; the baseline reaches it at its own last improvement. Per-seed counts of runs reaching the target
are reported alongside.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._common import write_csv
from . import BASELINE

__all__ = ["summarise", "write_csv", "write_markdown", "plot_best_vs", "plot_steps"]


def _by_trials(run: dict, n: int) -> np.ndarray:
    best = [t["best_gflops"] for t in run["trials"]]
    if not best:
        return np.zeros(n)
    return np.asarray(best[:n] + [best[-1]] * max(0, n - len(best)))


def _by_clock(run: dict, grid: np.ndarray) -> np.ndarray:
    clocks = np.asarray([t["clock"] for t in run["trials"]])
    best = np.asarray([t["best_gflops"] for t in run["trials"]])
    if len(clocks) == 0:
        return np.zeros(len(grid))
    pos = np.searchsorted(clocks, grid, side="right") - 1
    return np.where(pos >= 0, best[np.maximum(pos, 0)], 0.0)


def _first_reach(curve: np.ndarray, xs: np.ndarray, target: float) -> float:
    hit = np.flatnonzero(curve >= target * (1 - 1e-9))
    return float(xs[hit[0]]) if len(hit) else math.inf


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def summarise(runs: list[dict], quality: float = 1.0, baseline: str = BASELINE) -> dict[str, Any]:
    """Per-scheme curves and costs to reach the baseline's final best (see the module docstring)."""
    schemes = list(dict.fromkeys(r["scheme"] for r in runs))
    n = max((len(r["trials"]) for r in runs), default=0)
    horizon = max((r["clock"] for r in runs), default=0.0)
    trial_x = np.arange(1, n + 1)
    clock_x = np.linspace(0.0, horizon, 400)
    base_runs = [r for r in runs if r["scheme"] == baseline] or runs
    target = quality * _mean([r["final_best_gflops"] for r in base_runs])
    rows: dict[str, dict] = {}
    curves: dict[str, dict] = {}
    for s in schemes:
        rs = [r for r in runs if r["scheme"] == s]
        by_t = np.stack([_by_trials(r, n) for r in rs]) if n else np.zeros((len(rs), 0))
        by_c = np.stack([_by_clock(r, clock_x) for r in rs])
        curves[s] = {"trials": trial_x, "by_trials": by_t, "clock": clock_x, "by_clock": by_c}
        per_seed_trials = [
            _first_reach(_by_trials(r, len(r["trials"])), np.arange(1, len(r["trials"]) + 1), target) for r in rs
        ]
        per_seed_clock = [
            _first_reach(
                np.asarray([t["best_gflops"] for t in r["trials"]]),
                np.asarray([t["clock"] for t in r["trials"]]),
                target,
            )
            for r in rs
        ]
        iters = [c for r in rs for c in r.get("iterations", [])]
        sampled = [x for r in rs for x in r.get("sampled", [])]
        finals = [r["final_best_gflops"] for r in rs]
        rows[s] = {
            "runs": len(rs),
            "final_best_mean": _mean(finals),
            "final_best_std": float(np.std(finals)) if finals else math.nan,
            "trials_mean": _mean([len(r["trials"]) for r in rs]),
            "clock_mean": _mean([r["clock"] for r in rs]),
            "search_time_mean": _mean([r["search_time"] for r in rs]),
            "measure_time_mean": _mean([r["measure_time"] for r in rs]),
            "refits_mean": _mean([r["refits"] for r in rs]),
            "trials_to_target": _first_reach(by_t.mean(axis=0), trial_x, target) if n else math.inf,
            "clock_to_target": _first_reach(by_c.mean(axis=0), clock_x, target),
            "seeds_reaching": int(sum(math.isfinite(x) for x in per_seed_trials)),
            "per_seed_trials_to_target": per_seed_trials,
            "per_seed_clock_to_target": per_seed_clock,
            "steps_per_iter": _mean([c["steps"] for c in iters]),
            "search_s_per_iter": _mean([c["seconds"] for c in iters]),
            "sampled_per_iter": _mean(sampled) if sampled else math.nan,
        }
    base = rows.get(baseline, {})
    for row in rows.values():
        for key in ("trials_to_target", "clock_to_target"):
            b, v = base.get(key, math.nan), row[key]
            row[key.replace("_to_target", "_reduction")] = (
                b / v if math.isfinite(b) and math.isfinite(v) and v > 0 else (0.0 if math.isfinite(b) else math.nan)
            )
    return {"target_gflops": target, "quality": quality, "rows": rows, "curves": curves}


def plot_best_vs(panels: list[tuple[str, dict]], path: str, axis: str) -> None:
    """One panel per workload: mean best GFLOPS (band: min..max over seeds) against ``axis`` ("trials" or
    "clock"), with the baseline's final best as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)
    for ax, (title, summ) in zip(axes.flat, panels):
        for scheme, c in summ["curves"].items():
            xs, ys = (c["trials"], c["by_trials"]) if axis == "trials" else (c["clock"], c["by_clock"])
            if ys.size == 0:
                continue
            (line,) = ax.plot(xs, ys.mean(axis=0), label=scheme, lw=1.5)
            ax.fill_between(xs, ys.min(axis=0), ys.max(axis=0), color=line.get_color(), alpha=0.12, lw=0)
        ax.axhline(summ["target_gflops"], ls="--", lw=1, color="black", label=f"{BASELINE} final best")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("hardware measurements (trials)" if axis == "trials" else "tuner clock (s): search + build + run")
        ax.set_ylabel("best GFLOPS (mean over seeds)")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_steps(panels: list[tuple[str, list[dict]]], path: str) -> None:
    """Search steps per tuning iteration, mean over seeds, per scheme (RL against simulated annealing)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.6), squeeze=False)
    for ax, (title, runs) in zip(axes.flat, panels):
        for scheme in dict.fromkeys(r["scheme"] for r in runs):
            seqs = [[c["steps"] for c in r["iterations"]] for r in runs if r["scheme"] == scheme and r["iterations"]]
            if not seqs:
                continue
            m = max(len(s) for s in seqs)
            mean = [np.mean([s[i] for s in seqs if i < len(s)]) for i in range(m)]
            ax.plot(np.arange(1, m + 1), mean, marker=".", label=scheme)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("tuning iteration (model refit)")
        ax.set_ylabel("search steps")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fmt(x: float, spec: str = ".1f") -> str:
    return (
        "n/a"
        if x is None or (isinstance(x, float) and (math.isnan(x)))
        else ("never" if isinstance(x, float) and math.isinf(x) else format(x, spec))
    )


def _red(x: float) -> str:
    """A reduction factor; 0 means the target was never reached."""
    return "never reached" if x == 0 else _fmt(x, ".2f") + "x"


def _table(title: str, summ: dict, clock_note: str) -> list[str]:
    lines = [
        f"### {title}",
        "",
        f"Target: {BASELINE}'s final best, mean over seeds x {summ['quality']:g} = "
        f"**{summ['target_gflops']:.2f} GFLOPS**.",
        "",
        "| scheme | final best GFLOPS (mean ± std) | trials | measurements to target | reduction | "
        f"{clock_note} to target (s) | reduction | seeds reaching | refits | search s (total) | "
        "measure s (total) | search steps / iter | search s / iter | sampled / iter |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s, r in summ["rows"].items():
        lines.append(
            f"| {s} | {r['final_best_mean']:.2f} ± {r['final_best_std']:.2f} | {r['trials_mean']:.0f} | "
            f"{_fmt(r['trials_to_target'], '.0f')} | {_red(r['trials_reduction'])} | "
            f"{_fmt(r['clock_to_target'])} | {_red(r['clock_reduction'])} | {r['seeds_reaching']}/{r['runs']} | "
            f"{r['refits_mean']:.1f} | {r['search_time_mean']:.1f} | {r['measure_time_mean']:.1f} | "
            f"{_fmt(r['steps_per_iter'], '.0f')} | {_fmt(r['search_s_per_iter'], '.2f')} | "
            f"{_fmt(r['sampled_per_iter'])} |"
        )
    return lines + [""]


def _gmean(values: list[float]) -> float:
    """Geometric mean; 0 when a scheme never reached the target somewhere, nan when undefined."""
    if any(v == 0 for v in values):
        return 0.0
    ok = [v for v in values if v > 0 and math.isfinite(v)]
    return float(np.exp(np.mean(np.log(ok)))) if ok and len(ok) == len(values) else math.nan


def _goals(summs: list[dict]) -> list[str]:
    """The issue's goals: >= 2x fewer measurements and >= 4x less optimization time than the baseline."""
    out = []
    for scheme, paper_meas, paper_time in (("SA+AS", 1.98, 4.0), ("RL+AS", 2.33, 4.45)):
        meas = [s["rows"][scheme]["trials_reduction"] for s in summs if scheme in s["rows"]]
        clock = [s["rows"][scheme]["clock_reduction"] for s in summs if scheme in s["rows"]]
        if not meas:
            continue
        m, c = _gmean(meas), _gmean(clock)
        verdict = lambda v, goal: "n/a" if math.isnan(v) else ("met" if v >= goal else "not met")  # noqa: E731
        out.append(
            f"- **{scheme}**: measurements to reach the baseline: {', '.join(_red(x) for x in meas)}"
            f"; geometric mean {_fmt(m, '.2f')} (goal >= 2x, paper {paper_meas}x): {verdict(m, 2)}. "
            f"Optimization time: {', '.join(_red(x) for x in clock)}; geometric mean "
            f"{_fmt(c, '.2f')} (goal >= 4x, paper {paper_time}x): {verdict(c, 4)}."
        )
    return out


def write_markdown(path: str, meta: dict, hardware: dict, hw_summ: dict, replay: list, replay_summ: list) -> None:
    lines = [
        f"# ReLeASE vs AutoTVM ({meta['date']})",
        "",
        f"Machine: {meta['cpu']}, {meta['cores']} cores; TVM {meta['tvm']}; target {meta['target']}. "
        f"Command: `{meta['command']}`",
        "",
        f"Schemes: AutoTVM = XGBoost + simulated annealing (batches of the top {meta['plan_size']}); "
        "RL = XGBoost + PPO agent; "
        "SA+AS / RL+AS = the same with k-means adaptive sampling (batches of k-means representatives, "
        "the model refit after each). How targets and reductions are computed: see "
        "`benchmarks/release/report.py`. 'never' means the scheme's mean curve did not reach the target "
        "within the budget.",
        "",
    ]
    if hardware:
        lines += [
            "## Hardware (tuner clock budget per run)",
            "",
            f"{len(meta['seeds'])} seeds x {len(meta['schemes'])} schemes per workload, {meta['budget']:.0f} s "
            f"of tuner clock each (search + build + measurement), plan size {meta['plan_size']}, "
            f"batch {meta['batch_size']}, runner number={meta['number']} repeat={meta['repeat']}.",
            "",
        ]
        for wl, summ in hw_summ.items():
            lines += _table(f"{wl}: {hardware[wl]['task']}", summ, "clock")
        lines += ["Goals (hardware):", ""] + _goals(list(hw_summ.values())) + [""]
    if replay:
        lines += ["## Replay (recorded sweep, in trials)", ""]
        for rp, summ in zip(replay, replay_summ):
            lines += [
                f"{rp['log']}: {rp['recorded']} recorded configs of {rp['space']}, optimum "
                f"{rp['optimum_gflops']:.2f} GFLOPS, {rp['max_trials']} trials per run, "
                f"{len(meta['replay_seeds'])} seeds.",
                "",
            ]
            lines += _table(rp["task"], summ, "simulated clock")
        lines += ["Goals (replay; the clock is real search time plus recorded build and run time):", ""]
        lines += _goals(replay_summ) + [""]
    if not hardware and not replay:
        lines += ["Nothing was run (no hardware workloads and no replay logs found)."]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
