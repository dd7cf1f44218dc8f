"""The one report every harness study writes: results.json, runs.csv, stats.csv, summary.md and PNG plots.

Speedups are against the baseline scheme, per workload and pooled over workloads, in measurements and in
tuner-clock seconds and search steps to reach the target; a claim is made only where the bootstrap 95% CI excludes 1.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._common import load_sentence, pyplot, save_figure, sweep_stem, write_csv, write_json
from .stats import best_curve, cost_to_target, speedup_stat, study_target, within_budget

__all__ = ["write_report", "study_stats"]

_METRICS = ("measurements", "seconds", "search steps", "final best", "regret area")


def _name(study: dict[str, Any]) -> str:
    return str(study.get("workload") or os.path.basename(sweep_stem(study.get("log", "?"))))


def _costs(study: dict[str, Any], scheme: str, target: float) -> dict[int, dict[str, Any]]:
    """seed -> cost to target (measurements, seconds) and the run's budget in both."""
    common = study.get("common_gflops")
    ref = study_target(study, 1.0)
    out = {}
    for run in study["runs"]:
        if run["scheme"] != scheme:
            continue
        n, sec = cost_to_target(run, target, common)
        final = float(best_curve(run, common)[1][-1]) if run["trials"] else 0.0
        inv = 1.0 / final if final > 0 else 1e12  # as a cost: the speedup is then scheme final / baseline final
        curve = best_curve(run, common)[1]
        # mean normalised regret over the run's measurements: how far below the reference it stayed, on average
        area = float(np.mean(1.0 - np.minimum(curve, ref) / ref)) if len(curve) and ref > 0 else 1.0
        # search steps before the trial that reached the target (ReLeASE's metric); at least 1 so a search-free
        # scheme (random) divides; runs recorded before steps were kept have none
        trials = run["trials"]
        counted = bool(trials) and "search_steps" in trials[-1]
        steps = max(float(trials[n - 1]["search_steps"]), 1.0) if counted and n is not None else None
        out[run["seed"]] = {
            "measurements": n,
            "seconds": sec,
            **(
                {"search steps": steps, "budget_search steps": max(float(trials[-1]["search_steps"]), 1.0)}
                if counted
                else {}
            ),
            "final best": inv,
            "budget_measurements": float(len(run["trials"])),
            "budget_seconds": float(run["clock"]),
            "budget_final best": inv,
            "regret area": max(area, 1e-9),
            "budget_regret area": max(area, 1e-9),
        }
    return out


def study_stats(
    studies: Sequence[dict[str, Any]], schemes: Sequence[str], baseline: str, fraction: float
) -> list[dict[str, Any]]:
    """One row per (workload or "all", scheme, metric)."""
    rows: list[dict[str, Any]] = []
    pooled: dict[tuple[str, str], list[list[Any]]] = {}
    for study in studies:
        target = study_target(study, fraction)
        base = _costs(study, baseline, target)
        for scheme in schemes:
            if scheme == baseline:
                continue
            mine = _costs(study, scheme, target)
            seeds = sorted(set(base) & set(mine))
            if not seeds:
                continue
            for metric in _METRICS:
                if any(metric not in base[s] or metric not in mine[s] for s in seeds):
                    continue  # search steps: not recorded by older runs
                cols = [
                    [base[s][metric] for s in seeds],
                    [mine[s][metric] for s in seeds],
                    [base[s][f"budget_{metric}"] for s in seeds],
                    [mine[s][f"budget_{metric}"] for s in seeds],
                ]
                st = speedup_stat(scheme, metric, cols[0], cols[1], cols[2], cols[3])
                rows.append({"workload": _name(study), "target_gflops": target, **st.as_row()})
                acc = pooled.setdefault((scheme, metric), [[], [], [], []])
                for a, c in zip(acc, cols):
                    a.extend(c)
    if len(studies) > 1:
        for (scheme, metric), cols in pooled.items():
            st = speedup_stat(scheme, metric, cols[0], cols[1], cols[2], cols[3])
            rows.append({"workload": "all", "target_gflops": float("nan"), **st.as_row()})
    return rows


def _fmt_row(r: dict[str, Any]) -> str:
    reach = f"{r['scheme_reached']}/{r['n_pairs'] + r['n_both_missed']} vs {r['baseline_reached']}"
    if r["n_pairs"] == 0:
        return f"| {r['workload']} | {r['scheme']} | {r['metric']} | {reach} | not reached | | | not shown |"
    ci = f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]" if np.isfinite(r["ci_low"]) else "n/a"
    p = f"{r['p_value']:.3g}" if np.isfinite(r["p_value"]) else "n/a"
    head = f"| {r['workload']} | {r['scheme']} | {r['metric']} | {reach}"
    return f"{head} | {r['median']:.2f}x | {ci} | {p} | {r['verdict']} |"


def _cut_sentence(studies: Sequence[dict[str, Any]]) -> str:
    """Says where runs were cut at their time budget (``within_budget``), and how many trials that dropped."""
    budgets = sorted({float(s["time_budget"]) for s in studies if s.get("time_budget")})
    if not budgets:
        return ""
    cut = sum(int(s.get("cut_trials", 0)) for s in studies)
    return (
        f" Every run is cut at its budget ({', '.join(f'{b:g}' for b in budgets)} s), so all arms are compared "
        f"over the same window: {cut} trial(s) that finished after it (a batch begun before the budget ran out) "
        "are not counted; results.json keeps them."
    )


def _summary(title: str, meta: dict[str, Any], studies: Sequence[dict[str, Any]], rows: list[dict[str, Any]]) -> str:
    host = meta["host"]
    lines = [
        f"# {title}",
        "",
        f"Host: {host.get('cpu_model')} (LLVM mcpu {host.get('mcpu')}, ISA {host.get('isa')},"
        f" {host.get('cores')} cores); target `{host.get('target')}`.",
        load_sentence(meta, host.get("cores")),
        *([meta["noise_sentence"]] if "noise_sentence" in meta else []),
        f"Command: `{meta['command']}`",
        f"Baseline {meta['baseline']}; target = {meta['target_fraction']:.0%} of "
        + ("each sweep's optimum (replay)." if meta["mode"] == "replay" else "the best commonly re-measured config."),
        "Speedup = baseline cost / scheme cost to reach the target (median over seeds, bootstrap 95% CI of the "
        "median, percentile method, 9999 resamples; p: Wilcoxon signed-rank on paired log costs). A run that "
        "misses the target counts its whole budget (a bound); pairs where both missed are dropped. "
        "'reached' = scheme runs that reached / pairs vs baseline runs that reached. A speedup is claimed only "
        'where the CI excludes 1 and the rank test agrees (p < 0.05); otherwise "not shown". '
        '"search steps" = the model optimizer\'s steps before the trial that reached the target (an SA step moves '
        "every chain, a PPO step every walker; ReLeASE's count). "
        "\"final best\" = the scheme's best at the end of its budget / the baseline's, same seed (higher is better). "
        '"regret area" = the baseline\'s mean normalised regret (1 - best so far / reference, averaged over the '
        "run's measurements) / the scheme's: above 1, the scheme stayed closer to the reference all along.",
        (
            "Seconds = the tuner clock: each candidate's recorded build + run seconds from the sweep plus this "
            "run's own search and model-fitting time, measured live on the shared machine (so noisier than "
            "measurements). Partial sweeps are searched as restricted spaces: exactly the recorded configs."
            + (
                " Best-so-far values are each run's incumbents valued at the sweep's table (an adaptive-evaluator "
                "run reads candidates from their first micro-batches; a deterministic run reads the table itself)."
                if any("common_gflops" in s for s in studies)
                else " Best-so-far values are each run's own readings."
            )
            if meta["mode"] == "replay"
            else "Seconds = the tuner clock (search + build + measurement); best-so-far values are the common "
            "high-repeat re-measurements of each run's incumbents." + _cut_sentence(studies)
        ),
        "",
        "## Workloads",
        "",
    ]
    for s in studies:
        runs = s["runs"]
        refits = [r["refits"] for r in runs if r["scheme"] != "Random"]
        extra = (
            f"optimum {s['optimum_gflops']:.2f} GFLOPS, {s['n_records']} recorded of {s['space']} candidates"
            if s["mode"] == "replay"
            else f"best common re-measurement {max(s['common_gflops'].values(), default=0):.2f} GFLOPS"
        )
        lines.append(
            f"- {_name(s)}: {s['task']}; {extra}; {len(runs)} runs, "
            f"{int(np.median([len(r['trials']) for r in runs]))} measurements per run (median), "
            f"model refits per run {min(refits, default=0)}-{max(refits, default=0)}"
        )
    gate_failed = meta.get("noise_gate", {}).get("passed") is False
    lines += [
        "",
        "## Speedups over the baseline",
        "",
        *(
            ["**The noise gate failed: the verdicts below are computed as for any run, but none is claimed.**", ""]
            if gate_failed
            else []
        ),
        "| workload | scheme | metric | reached | median | 95% CI | p | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [_fmt_row(r) for r in rows]
    lines += ["", "## Final best (fraction of the target's reference, median over seeds)", ""]
    lines += ["| workload | scheme | median final best / reference | min | max |", "|---|---|---|---|---|"]
    for s in studies:
        ref = study_target(s, 1.0)
        for scheme in dict.fromkeys(r["scheme"] for r in s["runs"]):
            finals = [best_curve(r, s.get("common_gflops"))[1][-1] / ref for r in s["runs"] if r["scheme"] == scheme]
            if finals and ref > 0:
                lines.append(
                    f"| {_name(s)} | {scheme} | {np.median(finals):.3f} | {min(finals):.3f} | {max(finals):.3f} |"
                )
    return "\n".join(lines + _held_out_lines(studies)) + "\n"


def _held_out_lines(studies: Sequence[dict[str, Any]]) -> list[str]:
    """RFEI runs: how each forest did on the configs measured after it (its picks), per forest, as the median over
    seeds. Throughputs are fractions of the best the forest was fitted on; z = (measured - mean) / sigma with the
    sigma the search used (the jackknife's, times the factor when ``recalibrate`` applied one)."""
    lines: list[str] = []
    for s in studies:
        by_scheme: dict[str, list[dict[str, Any]]] = {}
        for r in s["runs"]:
            if r.get("held_out"):
                by_scheme.setdefault(r["scheme"], []).append(r)
        for scheme, runs in by_scheme.items():
            fits = sorted({int(h["fit"]) for r in runs for h in r["held_out"]})
            for k in fits:
                cells: dict[str, list[float]] = {}
                for r in runs:
                    a = float(((r.get("sigma_factors") or [])[k - 1 : k] or [1.0])[0])  # the factor forest k used
                    for h in (h for h in r["held_out"] if int(h["fit"]) == k):
                        row = {
                            "n": h["n"],
                            "y_median": h["y_median"],
                            "mean_median": h["mean_median"],
                            "std_median": h["std_median"] * a,  # held_out keeps the raw jackknife sigma
                            "z_mean": h["z_mean"] / a,
                            "z_rms": h["z_rms"] / a,
                            "applied": a,
                            "factor": h["factor"],
                        }
                        for key, v in row.items():
                            cells.setdefault(key, []).append(float(v))
                med = {key: float(np.median(v)) for key, v in cells.items()}
                lines.append(
                    f"| {_name(s)} | {scheme} | {k} | {len(cells.get('n', []))} | {med['n']:.0f} | "
                    f"{med['y_median']:.2f} | {med['mean_median']:.2f} | {med['std_median']:.3f} | "
                    f"{med['z_mean']:+.2f} | {med['z_rms']:.2f} | {med['applied']:.2f} | {med['factor']:.2f} |"
                )
    if not lines:
        return []
    head = [
        "",
        "## How each forest did on the configs it picked (held out)",
        "",
        "Per RFEI forest (refit k), the configs measured after it and before the next refit, scored by it: the "
        "median over seeds of their count, their median measured throughput and predicted mean (fractions of the "
        "best the forest was fitted on), their median sigma as the search used it, the mean and RMS of "
        "z = (measured - mean) / sigma, the factor sigma was multiplied by while they were picked (1 without "
        "`recalibrate`) and the held-out factor after them, sqrt(median z^2 / median chi2_1) of the raw "
        "jackknife sigma over every held-out config so far.",
        "",
        "| workload | scheme | forest | seeds | configs | measured | predicted | sigma | z mean | RMS z | sigma x | "
        "held-out factor |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    return head + lines


def _plot(out: str, studies: Sequence[dict[str, Any]], rows: list[dict[str, Any]]) -> list[str]:
    plt = pyplot()

    files = []
    for s in studies:
        ref = study_target(s, 1.0)
        if ref <= 0:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for scheme in dict.fromkeys(r["scheme"] for r in s["runs"]):
            curves = [best_curve(r, s.get("common_gflops")) for r in s["runs"] if r["scheme"] == scheme]
            n = min(len(c[1]) for c in curves)
            if n == 0:
                continue
            by_trial = np.stack([c[1][:n] for c in curves]) / ref
            x = np.arange(1, n + 1)
            axes[0].plot(x, np.median(by_trial, axis=0), label=scheme)
            axes[0].fill_between(x, *np.percentile(by_trial, [25, 75], axis=0), alpha=0.2)
            grid = np.linspace(0, max(c[0][-1] for c in curves), 200)
            by_time = np.stack([np.interp(grid, c[0], c[1], left=0.0) for c in curves]) / ref
            axes[1].plot(grid, np.median(by_time, axis=0), label=scheme)
            axes[1].fill_between(grid, *np.percentile(by_time, [25, 75], axis=0), alpha=0.2)
        axes[0].set(xlabel="measurements", ylabel="best / reference", title=f"{_name(s)}: by measurements")
        axes[1].set(xlabel="tuner clock (s)", ylabel="best / reference", title="by time (median, 25-75% band)")
        axes[0].legend(fontsize=8)
        path = save_figure(fig, out, "curves_" + re.sub(r"[^A-Za-z0-9._-]+", "_", _name(s)) + ".png")  # specs: no ':'
        files.append(path)
    shown = [r for r in rows if r["n_pairs"] > 0 and np.isfinite(r["ci_low"])]
    if shown:
        fig, axes = plt.subplots(1, 2, figsize=(12, 0.3 * len(shown) + 2), sharey=True)
        for ax, metric in zip(axes, ("measurements", "seconds")):
            sel = [r for r in shown if r["metric"] == metric]
            labels = [f"{r['workload']} {r['scheme']}" for r in sel]
            y = np.arange(len(sel))
            med = np.asarray([r["median"] for r in sel])
            err = np.asarray([[r["median"] - r["ci_low"] for r in sel], [r["ci_high"] - r["median"] for r in sel]])
            ax.errorbar(med, y, xerr=err, fmt="o", capsize=3)
            ax.axvline(1.0, color="gray", ls="--")
            ax.set_xscale("log")
            ax.set_yticks(y, labels, fontsize=7)
            ax.set(xlabel=f"speedup in {metric} (median, 95% CI)")
        path = save_figure(fig, out, "speedup_ci.png")
        files.append(path)
    return files


def write_report(out: str, title: str, meta: dict[str, Any], studies: list[dict[str, Any]]) -> dict[str, Any]:
    """Everything to ``out``; returns the statistics rows and the written files."""
    os.makedirs(out, exist_ok=True)
    raw, studies = studies, [within_budget(s) for s in studies]  # results.json keeps every trial
    rows = study_stats(studies, meta["schemes"], meta["baseline"], meta["target_fraction"])
    write_json(os.path.join(out, "results.json"), {"meta": meta, "studies": raw, "stats": rows}, indent=None)
    run_rows = []
    for s in studies:
        target = study_target(s, meta["target_fraction"])
        for r in s["runs"]:
            n, sec = cost_to_target(r, target, s.get("common_gflops"))
            run_rows.append(
                {
                    "workload": _name(s),
                    "scheme": r["scheme"],
                    "seed": r["seed"],
                    "trials": len(r["trials"]),
                    "refits": r["refits"],
                    "clock_s": r["clock"],
                    "search_s": r["search_time"],
                    "best_gflops": r["best_gflops"],
                    "measurements_to_target": "not reached" if n is None else n,
                    "seconds_to_target": "not reached" if sec is None else sec,
                }
            )
    write_csv(os.path.join(out, "runs.csv"), run_rows)
    write_csv(os.path.join(out, "stats.csv"), rows)
    with open(os.path.join(out, "summary.md"), "w", encoding="utf-8") as f:
        f.write(_summary(title, meta, studies, rows))
    return {"stats": rows, "plots": _plot(out, studies, rows)}
