"""Running the ablation: tuning under a wall-clock budget on hardware, the evaluator check, and replay."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import adatune
from adatune.measure import LocalBuilder, LocalRunner, MeasureInput, MeasureOption, ReplayRunner
from adatune.tuners import RFEITuner, Tuner, XGBTuner

from .._common import load_sweeps
from . import SCHEMES, Scheme

__all__ = ["RunConfig", "make_tuner", "tune_for", "run_hardware", "evaluator_check", "run_replay"]

logger = logging.getLogger("benchmarks.ablation")


@dataclass
class RunConfig:
    """Everything a run needs besides the workload (the CLI flags)."""

    budget: float = 300.0
    seeds: Sequence[int] = (0, 1, 2, 3, 4)
    schemes: Sequence[str] = tuple(SCHEMES)
    plan_size: int = 64
    batch_size: int = 8
    n_trees: int = 100
    number: int = 10
    repeat: int = 20
    micro_batch: int = 10
    min_micro_batches: int = 3
    min_converge_coef: float = 0.1
    timeout: float = 10.0
    n_parallel: int = 2
    check_configs: int = 24
    confirm_repeats: int = 5
    num_threads: int | None = None
    replay_seeds: Sequence[int] = tuple(range(15))
    replay_trials: int = 512
    extra: dict = field(default_factory=dict)


def make_tuner(scheme: Scheme, task: adatune.task.Task, cfg: RunConfig, seed: int) -> Tuner:
    if scheme.model == "xgb":
        return XGBTuner(task, plan_size=cfg.plan_size, num_threads=cfg.num_threads, seed=seed)
    return RFEITuner(
        task,
        plan_size=cfg.plan_size,
        n_trees=cfg.n_trees,
        contextual=scheme.contextual,
        num_threads=cfg.num_threads,
        seed=seed,
    )


def _result_row(res: adatune.MeasureResult) -> dict:
    return {
        "runs": res.runs,
        "cv": res.cv,
        "run_time": res.run_time,
        "build_time": res.build_time,
        "all_cost": res.all_cost,
        "error_no": int(res.error_no),
    }


def tune_for(
    tuner: Tuner, option: MeasureOption, budget: float | None, max_trials: int | None, batch_size: int
) -> dict:
    """Tune until the tuner's clock passes ``budget`` seconds or ``max_trials`` trials; returns the curves."""
    measured: list[dict] = []

    def keep(_t: Tuner, _inputs: Sequence[MeasureInput], results: Sequence[adatune.MeasureResult]) -> None:
        measured.extend(_result_row(r) for r in results)

    t0 = time.perf_counter()
    while tuner.has_next():
        if budget is not None and tuner.clock >= budget:
            break
        if max_trials is not None and len(tuner.trials) >= max_trials:
            break
        n = batch_size if max_trials is None else min(batch_size, max_trials - len(tuner.trials))
        before = len(tuner.trials)
        tuner.tune(n_trial=n, measure_option=option, batch_size=n, callbacks=[keep])
        if len(tuner.trials) == before:
            break
    trials = [
        {
            "trial": t.trial,
            "index": t.index,
            "gflops": t.flops / 1e9,
            "best_gflops": t.best_flops / 1e9,
            "clock": t.clock,
            "error_no": t.error_no,
            **m,
        }
        for t, m in zip(tuner.trials, measured)
    ]
    rounds = [{"n": r.n, "search_time": r.search_time, "measure_time": r.measure_time} for r in tuner.rounds]
    return {
        "trials": trials,
        "rounds": rounds,
        "eps": list(getattr(tuner, "eps_history", [])),
        "final_best_gflops": tuner.best_flops / 1e9,
        "clock": tuner.clock,
        "best_index": tuner.best_config.index if tuner.best_config is not None else None,
        "wall": time.perf_counter() - t0,
    }


def _options(cfg: RunConfig) -> tuple[LocalBuilder, MeasureOption, MeasureOption]:
    builder = LocalBuilder(n_parallel=cfg.n_parallel)
    de = LocalRunner(number=cfg.number, repeat=cfg.repeat, timeout=cfg.timeout)
    ae = LocalRunner(
        number=cfg.number,
        repeat=cfg.repeat,
        timeout=cfg.timeout,
        micro_batch=cfg.micro_batch,
        min_micro_batches=cfg.min_micro_batches,
    )
    return (
        builder,
        adatune.measure_option(builder, de),
        adatune.measure_option(builder, ae, min_converge_coef=cfg.min_converge_coef),
    )


def run_hardware(task: adatune.task.Task, cfg: RunConfig) -> dict:
    """Every seed x scheme under the same budget. Schemes are interleaved within a seed (in an order that
    rotates with the seed) so drift of the machine over the hours of a run hits all schemes alike."""
    builder, de, ae = _options(cfg)
    try:
        warm = [
            MeasureInput(task, task.config_space.get(i)) for i in task.config_space.sample(np.random.default_rng(0), 2)
        ]
        de.measure(warm)  # workers pay `import tvm` here, not inside the first scheme's budget
        ae.measure(warm)
        runs = []
        names = list(cfg.schemes)
        for k, seed in enumerate(cfg.seeds):
            order = names[k % len(names) :] + names[: k % len(names)]
            for name in order:
                scheme = SCHEMES[name]
                tuner = make_tuner(scheme, task, cfg, seed)
                out = tune_for(tuner, ae if scheme.adaptive else de, cfg.budget, None, cfg.batch_size)
                runs.append({"scheme": name, "seed": seed, **out})
                logger.info(
                    "%s seed %d %s: %d trials in %.1f s of tuner clock, best %.2f GFLOPS (before the "
                    "last batch ran past the budget: %.2f)",
                    task.name,
                    seed,
                    name,
                    len(out["trials"]),
                    out["clock"],
                    out["final_best_gflops"],
                    max([t["best_gflops"] for t in out["trials"] if t["clock"] <= cfg.budget], default=0.0),
                )
        check = evaluator_check(task, runs, de, ae, cfg) if cfg.check_configs > 0 else None
    finally:
        de.close()
        ae.runner.close()
    return {
        "task": repr(task),
        "workload_key": task.workload_key,
        "flop": task.flop,
        "runs": runs,
        "evaluator_check": check,
    }


def evaluator_check(
    task: adatune.task.Task, runs: list[dict], de: MeasureOption, ae: MeasureOption, cfg: RunConfig
) -> dict:
    """Measure the same configs with both evaluators: half the best configs the DE runs found, half random.
    Reports measurement time per candidate and whether AE's pick is within 2% of DE's (by DE's timing)."""
    found: dict[int, float] = {}
    for r in runs:
        if not SCHEMES[r["scheme"]].adaptive:
            for t in r["trials"]:
                found[t["index"]] = max(found.get(t["index"], 0.0), t["gflops"])
    top = [i for i, _ in sorted(found.items(), key=lambda kv: -kv[1])[: cfg.check_configs // 2]]
    rng = np.random.default_rng(12345)
    rest = task.config_space.sample(rng, cfg.check_configs - len(top), exclude=top)
    indices = top + rest
    rows: dict[str, list[dict]] = {"AE": [], "DE": []}
    for start in range(0, len(indices), cfg.batch_size):
        inputs = [MeasureInput(task, task.config_space.get(i)) for i in indices[start : start + cfg.batch_size]]
        for name, option in (
            (("AE", ae), ("DE", de)) if (start // cfg.batch_size) % 2 == 0 else (("DE", de), ("AE", ae))
        ):
            for inp, res in zip(inputs, option.measure(inputs)):
                rows[name].append({"index": inp.config.index, "gflops": res.flops(task.flop) / 1e9, **_result_row(res)})
    de_by = {r["index"]: r for r in rows["DE"]}
    ae_by = {r["index"]: r for r in rows["AE"]}
    both = [i for i in indices if de_by[i]["gflops"] > 0 and ae_by[i]["gflops"] > 0]
    out: dict[str, Any] = {"configs": indices, "rows": rows, "n_valid": len(both)}
    if both:
        de_pick = max(both, key=lambda i: de_by[i]["gflops"])
        ae_pick = max(both, key=lambda i: ae_by[i]["gflops"])
        # DE's timing of its own pick is its luckiest draw (winner's curse): re-measure both picks with DE,
        # alternating, and compare medians
        again: dict[int, list[float]] = {de_pick: [], ae_pick: []}
        if ae_pick != de_pick:
            for k in range(cfg.confirm_repeats):
                pair = [de_pick, ae_pick] if k % 2 == 0 else [ae_pick, de_pick]
                inputs = [MeasureInput(task, task.config_space.get(i)) for i in pair]
                for inp, res in zip(inputs, de.measure(inputs)):
                    again[inp.config.index].append(res.flops(task.flop) / 1e9)
            ratio = float(np.median(again[ae_pick]) / max(np.median(again[de_pick]), 1e-12))
        else:
            ratio = 1.0
        out.update(
            {
                "de_pick": de_pick,
                "ae_pick": ae_pick,
                "ae_pick_de_gflops": de_by[ae_pick]["gflops"],
                "de_pick_de_gflops": de_by[de_pick]["gflops"],
                "ae_pick_ae_gflops": ae_by[ae_pick]["gflops"],
                "remeasured_gflops": {str(k): v for k, v in again.items()},
                "pick_ratio_same_pass": de_by[ae_pick]["gflops"] / de_by[de_pick]["gflops"],
                "pick_ratio": ratio,
                "within_2pct": bool(ratio >= 0.98),
                "mean_run_time_de": float(np.mean([de_by[i]["run_time"] for i in both])),
                "mean_run_time_ae": float(np.mean([ae_by[i]["run_time"] for i in both])),
                "mean_runs_de": float(np.mean([de_by[i]["runs"] for i in both])),
                "mean_runs_ae": float(np.mean([ae_by[i]["runs"] for i in both])),
                "mean_kernel_time_de": float(
                    np.mean([de_by[i]["runs"] * task.flop / (de_by[i]["gflops"] * 1e9) for i in both])
                ),
                "mean_kernel_time_ae": float(
                    np.mean([ae_by[i]["runs"] * task.flop / (ae_by[i]["gflops"] * 1e9) for i in both])
                ),
            }
        )
    return out


def run_replay(log_path: str, cfg: RunConfig) -> list[dict]:
    """Schemes compared in trials on a recorded sweep (one entry per workload in the log). On replay the
    evaluator makes no difference (recorded timings are served), so RFEI+CSA+AE is not run separately."""
    out = []
    for sweep in load_sweeps(log_path, cfg.replay_trials):
        task, table, optimum, max_trials = sweep.task, sweep.table, sweep.optimum_gflops, sweep.max_trials
        key, n_records = task.workload_key, len(table)
        runs = []
        for seed in cfg.replay_seeds:
            for name in cfg.schemes:
                scheme = SCHEMES[name]
                if scheme.adaptive:
                    continue
                option = adatune.measure_option(runner=ReplayRunner(table))
                res = tune_for(make_tuner(scheme, task, cfg, seed), option, None, max_trials, cfg.batch_size)
                runs.append({"scheme": name, "seed": seed, **res})
            logger.info("replay %s seed %d done", task.name, seed)
        out.append(
            {
                "log": log_path,
                "task": repr(task),
                "workload_key": key,
                "n_records": n_records,
                "space": len(task.config_space),
                "optimum_gflops": optimum,
                "max_trials": max_trials,
                "runs": runs,
            }
        )
    return out
