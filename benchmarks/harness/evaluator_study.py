"""The evaluator study on real measurement: AdaTune's adaptive evaluator (AE) against the deterministic one
(DE) with the same run cap, and a fixed 30-run control arm, on the same configs.

Per arm: mean runs per candidate, spread of the runs, measurement seconds per candidate; then each arm's
chosen best is re-measured by DE, alternating with DE's own pick (DE's timing of its pick is its luckiest
draw), and AE's pick counts as good when it is within 2% of DE's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

import adatune
from adatune.measure import MeasureInput, MeasureOption
from adatune.records import load_from_file
from adatune.task import TuningTask
from adatune.workloads import get as get_workload

from .._common import load_sentence

__all__ = ["evaluator_study", "evaluator_summary"]

logger = logging.getLogger("benchmarks.harness")


def _pick_configs(task: TuningTask, n_random: int, n_top: int, sweep: str | None, seed: int) -> list[Any]:
    """``n_top`` of the sweep's fastest configs (where a sweep of this workload is given) plus random ones:
    the best must be chosen among near-equals, where evaluator noise decides."""
    chosen: dict[str, Any] = {}
    if sweep and n_top > 0:
        recs = [r for r in load_from_file(sweep) if r.workload_key == task.workload_key and r.result.ok]
        recs.sort(key=lambda r: -r.result.flops(task.flop))
        for r in recs[:n_top]:
            c = task.candidate_from_json(r.config)
            chosen[str(c.key)] = c
    for c in task.space.random_candidates(np.random.default_rng(seed), n_random, exclude=set(chosen)):
        chosen[str(c.key)] = c
    return list(chosen.values())


def _arm_stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if r["gflops"] > 0]
    runs = np.asarray([r["runs"] for r in ok], dtype=np.float64)
    return {
        "n_valid": len(ok),
        "mean_runs": float(runs.mean()) if len(ok) else float("nan"),
        "std_runs": float(runs.std()) if len(ok) else float("nan"),
        "min_runs": int(runs.min()) if len(ok) else 0,
        "max_runs": int(runs.max()) if len(ok) else 0,
        "mean_run_seconds": float(np.mean([r["run_time"] for r in ok])) if ok else float("nan"),
        "mean_cv": float(np.mean(cvs)) if (cvs := [r["cv"] for r in ok if r["cv"] is not None]) else float("nan"),
    }


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
) -> list[dict[str, Any]]:
    """AE and DE (both capped at ``number * repeat`` runs) and a fixed 30-run arm on the same configs."""
    out = []
    for wl in workloads:
        task = get_workload(wl).create_task(adatune.target.host())
        builder = adatune.LocalBuilder(n_parallel=2)
        de_runner = adatune.LocalRunner(number=number, repeat=repeat, timeout=timeout, micro_batch=micro_batch)
        arms = {
            "DE": adatune.measure_option(builder, de_runner),
            "AE": adatune.measure_option(builder, de_runner, min_converge_coef=min_converge_coef),
            "fixed-30": adatune.measure_option(builder, adatune.LocalRunner(number=10, repeat=3, timeout=timeout)),
        }
        try:
            cands = {str(c.key): c for c in _pick_configs(task, n_random, n_top, sweeps.get(wl), seed)}
            keys = list(cands)
            rows: dict[str, list[dict[str, Any]]] = {a: [] for a in arms}
            names = list(arms)
            for k, lo in enumerate(range(0, len(keys), 8)):
                inputs = [MeasureInput(task, cands[key]) for key in keys[lo : lo + 8]]
                for arm in names[k % 3 :] + names[: k % 3]:  # rotate which arm measures first
                    for inp, res in zip(inputs, arms[arm].measure(inputs)):
                        rows[arm].append(
                            {
                                "key": str(inp.config.key),
                                "gflops": res.flops(task.flop) / 1e9,
                                "runs": res.runs,
                                "cv": res.cv,
                                "run_time": res.run_time,
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
            for opt in arms.values():
                opt.close()
        result: dict[str, Any] = {
            "workload": wl,
            "task": repr(task),
            "settings": {
                "cap_runs": number * repeat,
                "min_converge_coef": min_converge_coef,
                "micro_batch": micro_batch,
                "confirm_repeats": confirm_repeats,
                "n_configs": len(keys),
                "n_top_from_sweep": n_top if wl in sweeps else 0,
            },
            "arms": {a: _arm_stats(rs) for a, rs in rows.items()},
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
    lines = [
        "# Evaluator study: adaptive (AE) vs deterministic (DE) vs a fixed 30-run control",
        "",
        f"Host: {host.get('cpu_model')} ({host.get('mcpu')}, {host.get('isa')}, {host.get('cores')} cores). "
        + load_sentence(meta, host.get("cores")),
        f"Command: `{meta['command']}`",
        "AE and DE have the same cap of runs; AE stops a candidate once the CV of its micro-batch throughputs "
        "falls under min_converge_coef. Each arm's pick (fastest by its own timing) is re-measured by DE, "
        "alternating with DE's pick; ratio = pick's median GFLOPS / DE pick's median GFLOPS.",
        "",
        "| workload | arm | configs | mean runs | std runs | min-max runs | mean run s | mean CV | pick ratio "
        "| within 2% |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in studies:
        for arm, st in s["arms"].items():
            ratio = s["pick_ratio_vs_de"].get(arm)
            rtxt = f"{ratio:.3f}" if ratio is not None else "n/a"
            within = s["within_2pct"].get(arm, "n/a")
            lines.append(
                f"| {s['workload']} | {arm} | {st['n_valid']} | {st['mean_runs']:.1f} | {st['std_runs']:.1f} | "
                f"{st['min_runs']}-{st['max_runs']} | {st['mean_run_seconds']:.3f} | {st['mean_cv']:.3f} | {rtxt} | "
                f"{within} |"
            )
    return "\n".join(lines) + "\n"
