"""The evaluator study on real measurement: AdaTune's adaptive evaluator (AE) against the deterministic one (DE) with
the same run cap, and a fixed 30-run control arm, on the same configs.

Per arm: mean runs per candidate, spread of the runs, seconds per candidate; then each arm's best is re-measured by DE,
in turns with DE's own pick (DE's timing of its pick is its luckiest draw), and AE's pick is good within 2% of DE's.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

import adatune
from adatune.measure import MeasureInput, MeasureOption
from adatune.measure.evaluator import EvaluatorConfig
from adatune.task import TuningTask
from adatune.templates.workloads import get as get_workload

from .._common import load_records, load_sentence

__all__ = ["evaluator_study", "evaluator_summary"]

logger = logging.getLogger("benchmarks.harness")


def _pick_configs(
    task: TuningTask, n_random: int, n_top: int, sweep: str | None, seed: int, screen: MeasureOption
) -> list[Any]:
    """``n_top`` fast configs (the sweep's, else the best of ``4 * n_top`` random ones) and ``n_random`` random ones."""
    rng = np.random.default_rng(seed)
    chosen: dict[str, Any] = {}
    if sweep and n_top > 0:
        recs = [r for r in load_records(sweep) if r.workload_key == task.workload_key and r.result.ok]
        recs.sort(key=lambda r: -r.result.flops(task.flop))
        for r in recs:
            if len(chosen) >= n_top:
                break
            try:
                c = task.candidate_from_json(r.config)
            except (ValueError, KeyError, IndexError):  # swept on another host: not in this space
                continue
            chosen[str(c.key)] = c
    if n_top > 0 and not chosen:
        pool = task.space.random_candidates(rng, 4 * n_top, exclude=set())
        results = screen.measure([MeasureInput(task, c) for c in pool]).results
        ranked = sorted(zip(pool, results), key=lambda p: -p[1].flops(task.flop))
        for c, res in ranked[:n_top]:
            if res.ok:
                chosen[str(c.key)] = c
    for c in task.space.random_candidates(rng, n_random, exclude=set(chosen)):
        chosen[str(c.key)] = c
    return list(chosen.values())


def _arm_stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if r["gflops"] > 0]
    runs = np.asarray([r["runs"] for r in ok], dtype=np.float64)
    cvs = [r["cv"] for r in ok if r["cv"] is not None]
    return {
        "n_valid": len(ok),
        "mean_runs": float(runs.mean()) if len(ok) else float("nan"),
        "std_runs": float(runs.std()) if len(ok) else float("nan"),
        "min_runs": int(runs.min()) if len(ok) else 0,
        "max_runs": int(runs.max()) if len(ok) else 0,
        "mean_run_seconds": float(np.mean([r["run_time"] for r in ok])) if ok else float("nan"),
        "total_run_seconds": float(sum(r["run_time"] for r in rows)),
        "total_seconds": float(sum(r["all_cost"] for r in rows)),
        "mean_cv": float(np.mean(cvs)) if cvs else float("nan"),
    }


def _paired_ratio(base: list[float], other: list[float], seed: int = 0) -> dict[str, float]:
    """Median of per-config ``base / other`` with a bootstrap 95% CI over the configs."""
    ratios = np.asarray([b / o for b, o in zip(base, other) if o > 0 and b > 0], dtype=np.float64)
    if len(ratios) < 3:
        return {"median": float(np.median(ratios)) if len(ratios) else float("nan"), "lo": math.nan, "hi": math.nan}
    ci = stats.bootstrap((ratios,), np.median, confidence_level=0.95, n_resamples=5000, random_state=seed)
    lo, hi = ci.confidence_interval
    return {"median": float(np.median(ratios)), "lo": float(lo), "hi": float(hi), "n": int(len(ratios))}


def _measure_keys(task: TuningTask, cands: dict[str, Any], keys: list[str], option: MeasureOption) -> list[float]:
    inputs = [MeasureInput(task, cands[k]) for k in keys]
    return [res.flops(task.flop) / 1e9 for res in option.measure(inputs)]


def evaluator_study(
    workloads: Sequence[str],
    sweeps: dict[str, str],
    n_random: int = 16,
    n_top: int = 8,
    number: int = 10,
    repeat: int = 10,
    min_converge_coef: float = 0.1,
    micro_batch: int = 10,
    confirm_repeats: int = 5,
    seed: int = 0,
    timeout: float = 10.0,
    min_micro_batches: int = 3,
) -> list[dict[str, Any]]:
    """AE and DE (both capped at ``number * repeat`` runs) and a fixed arm spending AE's floor, same configs."""
    out = []
    for wl in workloads:
        task = get_workload(wl).create_task(adatune.target.host())
        builder = adatune.LocalBuilder(n_parallel=2)
        timing = {"timeout": timeout, "micro_batch": micro_batch, "min_micro_batches": min_micro_batches}
        de_runner = adatune.LocalRunner(number=number, repeat=repeat, **timing)
        floor_batch = EvaluatorConfig(number, repeat, micro_batch=micro_batch, min_micro_batches=min_micro_batches)
        fixed = adatune.LocalRunner(number=floor_batch.adaptive_micro_batch, repeat=min_micro_batches, **timing)
        arms = {
            "DE": adatune.measure_option(builder, de_runner),
            "AE": adatune.measure_option(builder, de_runner, min_converge_coef=min_converge_coef),
            "fixed-floor": adatune.measure_option(builder, fixed),
        }
        screen = adatune.measure_option(builder, adatune.LocalRunner(number=2, repeat=3, timeout=timeout))
        try:
            picked = _pick_configs(task, n_random, n_top, sweeps.get(wl), seed, screen)
            cands = {str(c.key): c for c in picked}
            keys = list(cands)
            rows: dict[str, list[dict[str, Any]]] = {a: [] for a in arms}
            names = list(arms)
            for k, lo in enumerate(range(0, len(keys), 4)):
                inputs = [MeasureInput(task, cands[key]) for key in keys[lo : lo + 4]]
                for arm in names[k % 3 :] + names[: k % 3]:  # rotate which arm measures first
                    for inp, res in zip(inputs, arms[arm].measure(inputs)):
                        rows[arm].append(
                            {
                                "key": str(inp.config.key),
                                "gflops": res.flops(task.flop) / 1e9,
                                "runs": res.runs,
                                "cv": res.cv,
                                "run_time": res.run_time,
                                "all_cost": res.all_cost,
                                "timed_seconds": float(sum(c * r for c, r in zip(res.costs, res.batch_runs))),
                            }
                        )
            by = {a: {r["key"]: r for r in rs} for a, rs in rows.items()}
            valid = [k for k in keys if all(by[a][k]["gflops"] > 0 for a in arms)]
            picks: dict[str, str] = {}
            for a in arms if valid else ():
                picks[a] = max(valid, key=lambda k: by[a][k]["gflops"])  # noqa: B023 - used at once
            confirm: dict[str, list[float]] = {k: [] for k in set(picks.values())}
            if len(confirm) > 1:
                for rep in range(confirm_repeats):
                    order = sorted(confirm) if rep % 2 == 0 else sorted(confirm, reverse=True)
                    for key, g in zip(order, _measure_keys(task, cands, order, arms["DE"])):
                        confirm[key].append(g)
            med = {k: float(np.median(v)) if v else by["DE"][k]["gflops"] for k, v in confirm.items()}
            ratios = {a: med[picks[a]] / med[picks["DE"]] for a in picks}
        finally:
            for opt in (*arms.values(), screen):
                opt.close()
        time_ratio = {
            what: _paired_ratio([by["DE"][k][what] for k in valid], [by["AE"][k][what] for k in valid], seed)
            for what in ("run_time", "timed_seconds", "all_cost")
        }
        result: dict[str, Any] = {
            "workload": wl,
            "task": repr(task),
            "settings": {
                "cap_runs": number * repeat,
                "number": number,
                "repeat": repeat,
                "min_converge_coef": min_converge_coef,
                "micro_batch": micro_batch,
                "min_micro_batches": min_micro_batches,
                "confirm_repeats": confirm_repeats,
                "n_configs": len(keys),
            },
            "arms": {a: _arm_stats(rs) for a, rs in rows.items()},
            "de_over_ae_seconds": time_ratio,
            "picks": picks,
            "pick_ratio_vs_de": ratios,
            "within_2pct": {a: bool(r >= 0.98) for a, r in ratios.items()},
            "confirm_gflops": confirm,
            "rows": rows,
        }
        out.append(result)
        logger.info("evaluator study %s: %s", wl, {a: round(s["mean_runs"], 1) for a, s in result["arms"].items()})
    return out


def evaluator_summary(meta: dict[str, Any], studies: list[dict[str, Any]]) -> str:
    host = meta["host"]
    gate = meta.get("noise_gate", {})
    passed = bool(gate.get("passed"))
    lines = [
        "# Evaluator study: adaptive (AE) vs deterministic (DE) vs a fixed arm spending AE's floor",
        "",
        f"Host: {host.get('cpu_model')} ({host.get('mcpu')}, {host.get('isa')}, {host.get('cores')} cores). "
        + load_sentence(meta, host.get("cores")),
        "",
        meta.get("noise_sentence", "No noise gate was run: no speedup is claimed."),
        "",
        f"Command: `{meta['command']}`",
        "",
        "AE and DE have the same cap of runs; AE stops a candidate once the CV of its micro-batch throughputs "
        "falls under min_converge_coef. Each arm's pick (fastest by its own median timing) is re-measured by DE, "
        "alternating with DE's pick; pick ratio = pick's median GFLOPS / DE pick's median GFLOPS. "
        "Measurement s = the runner's seconds per candidate (load, check, timing); total s includes builds.",
        "",
        "| workload | cap | arm | configs | mean runs | min-max runs | mean measurement s | total s | mean CV "
        "| pick ratio | within 2% |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in studies:
        cap = s["settings"]["cap_runs"]
        for arm, st in s["arms"].items():
            ratio = s["pick_ratio_vs_de"].get(arm)
            rtxt = f"{ratio:.3f}" if ratio is not None else "n/a"
            within = s["within_2pct"].get(arm, "n/a")
            lines.append(
                f"| {s['workload']} | {cap} | {arm} | {st['n_valid']} | {st['mean_runs']:.1f} | "
                f"{st['min_runs']}-{st['max_runs']} | {st['mean_run_seconds']:.3f} | {st['total_seconds']:.1f} | "
                f"{st['mean_cv']:.3f} | {rtxt} | {within} |"
            )
    lines += [
        "",
        "DE's over AE's seconds per candidate, paired per config: median and bootstrap 95% CI over the configs"
        + ("" if passed else " (the noise gate failed: measured, not claimed)")
        + ".",
        "",
        "| workload | measurement s | timed s (runs only) | build + measurement s |",
        "|---|---|---|---|",
    ]
    for s in studies:
        cells = []
        for what in ("run_time", "timed_seconds", "all_cost"):
            r = s.get("de_over_ae_seconds", {}).get(what)
            cells.append(f"{r['median']:.2f}x [{r['lo']:.2f}, {r['hi']:.2f}]" if r else "n/a")
        lines.append(f"| {s['workload']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
