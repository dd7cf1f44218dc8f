"""Running the ReLeASE comparison: tuning under a clock budget on hardware, and in trials on replay."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

import adatune
from adatune.measure import LocalBuilder, LocalRunner, MeasureInput, MeasureOption, ReplayRunner
from adatune.optimizers import ModelOptimizer, ScoreFn
from adatune.tuners import ModelBasedTuner, ReleaseTuner, XGBTuner

from .._common import load_sweeps
from . import SCHEMES, Scheme

__all__ = ["RunConfig", "StepRecorder", "make_tuner", "tune_for", "run_hardware", "run_replay"]

logger = logging.getLogger("benchmarks.release")


@dataclass
class RunConfig:
    """Everything a run needs besides the workload (the CLI flags)."""

    budget: float = 200.0
    max_trials: int | None = None
    seeds: Sequence[int] = (0, 1, 2, 3, 4)
    schemes: Sequence[str] = tuple(SCHEMES)
    plan_size: int = 64
    batch_size: int = 8
    num_threads: int | None = None
    number: int = 5
    repeat: int = 3
    timeout: float = 10.0
    n_parallel: int = 2
    replay_seeds: Sequence[int] = tuple(range(15))
    replay_trials: int = 512
    records_dir: str | None = None


class StepRecorder(ModelOptimizer):
    """Wraps a tuner's model optimizer to record, per tuning iteration, its search steps and seconds."""

    def __init__(self, inner: ModelOptimizer):
        self.inner = inner
        self.calls: list[dict] = []

    def find_maximums(self, score: ScoreFn, num: int, exclusive: Collection[int]) -> list[int]:
        t0 = time.perf_counter()
        out = self.inner.find_maximums(score, num, exclusive)
        self.calls.append(
            {
                "steps": int(getattr(self.inner, "last_steps", 0)),
                "seconds": time.perf_counter() - t0,
                "candidates": len(out),
            }
        )
        return out


def make_tuner(scheme: Scheme, task: adatune.task.Task, cfg: RunConfig, seed: int) -> ModelBasedTuner:
    sampler = "adaptive" if scheme.adaptive else None
    if scheme.search == "sa":
        tuner: ModelBasedTuner = XGBTuner(
            task, plan_size=cfg.plan_size, num_threads=cfg.num_threads, sampler=sampler, seed=seed
        )
    else:
        tuner = ReleaseTuner(task, plan_size=cfg.plan_size, num_threads=cfg.num_threads, sampler=sampler, seed=seed)
    tuner.model_optimizer = StepRecorder(tuner.model_optimizer)
    return tuner


def tune_for(
    tuner: ModelBasedTuner,
    option: MeasureOption,
    budget: float | None,
    max_trials: int | None,
    batch_size: int,
    log: str | None = None,
) -> dict:
    """Tune until the tuner's clock passes ``budget`` seconds or ``max_trials`` trials; returns the curves."""
    callbacks = [adatune.callback.log_to_file(log)] if log else []
    t0 = time.perf_counter()
    tuner.tune(
        n_trial=max_trials if max_trials is not None else 10**9,
        measure_option=option,
        batch_size=batch_size,
        time_budget=budget,
        callbacks=callbacks,
    )
    trials = [
        {
            "trial": t.trial,
            "index": t.index,
            "gflops": t.flops / 1e9,
            "best_gflops": t.best_flops / 1e9,
            "clock": t.clock,
            "error_no": t.error_no,
        }
        for t in tuner.trials
    ]
    rounds = [{"n": r.n, "search_time": r.search_time, "measure_time": r.measure_time} for r in tuner.rounds]
    recorder = tuner.model_optimizer
    sampler = tuner.sampler
    return {
        "trials": trials,
        "rounds": rounds,
        "iterations": list(recorder.calls) if isinstance(recorder, StepRecorder) else [],
        "sampled": list(getattr(sampler, "history", [])),
        "final_best_gflops": tuner.best_flops / 1e9,
        "clock": tuner.clock,
        "refits": tuner.train_ct,
        "best_index": tuner.best_config.index if tuner.best_config is not None else None,
        "search_time": sum(r.search_time for r in tuner.rounds),
        "measure_time": sum(r.measure_time for r in tuner.rounds),
        "wall": time.perf_counter() - t0,
    }


def run_hardware(task: adatune.task.Task, cfg: RunConfig, name: str) -> dict:
    """Every seed x scheme under the same clock budget. Schemes are interleaved within a seed, in an order
    that rotates with the seed, so drift of the machine over the run hits all schemes alike."""
    builder = LocalBuilder(n_parallel=cfg.n_parallel)
    option = adatune.measure_option(builder, LocalRunner(number=cfg.number, repeat=cfg.repeat, timeout=cfg.timeout))
    log = None
    if cfg.records_dir:  # every measurement, replayable later
        os.makedirs(cfg.records_dir, exist_ok=True)
        log = os.path.join(cfg.records_dir, f"{name}.jsonl")
    try:
        warm = [
            MeasureInput(task, task.config_space.get(i)) for i in task.config_space.sample(np.random.default_rng(0), 2)
        ]
        option.measure(warm)  # workers pay `import tvm` here, not inside the first scheme's budget
        runs = []
        names = list(cfg.schemes)
        for k, seed in enumerate(cfg.seeds):
            for scheme in names[k % len(names) :] + names[: k % len(names)]:
                tuner = make_tuner(SCHEMES[scheme], task, cfg, seed)
                out = tune_for(tuner, option, cfg.budget, cfg.max_trials, cfg.batch_size, log)
                runs.append({"scheme": scheme, "seed": seed, **out})
                print(
                    f"  {scheme:8s} seed {seed}: {len(out['trials'])} trials, best {out['final_best_gflops']:.2f} "
                    f"GFLOPS, {out['refits']} refits, search {out['search_time']:.1f} s, "
                    f"measure {out['measure_time']:.1f} s",
                    flush=True,
                )
    finally:
        option.close()
    return {
        "task": repr(task),
        "workload_key": task.workload_key,
        "flop": task.flop,
        "space": len(task.config_space),
        "runs": runs,
    }


def run_replay(log_path: str, cfg: RunConfig) -> list[dict]:
    """All schemes in trials on a recorded sweep, one entry per workload in the log. Configs the sweep did
    not record come back as errors (0 GFLOPS), as ``ReplayRunner`` serves them."""
    out = []
    for sweep in load_sweeps(log_path, cfg.replay_trials):
        task, table, optimum, max_trials = sweep.task, sweep.table, sweep.optimum_gflops, sweep.max_trials
        key, n_records = task.workload_key, len(table)
        print(
            f"  replay {task}: {len(table)} recorded configs, {len(cfg.replay_seeds)} seeds, {max_trials} trials",
            flush=True,
        )
        runs = []
        for seed in cfg.replay_seeds:
            for name in cfg.schemes:
                option = adatune.measure_option(runner=ReplayRunner(table))
                res = tune_for(make_tuner(SCHEMES[name], task, cfg, seed), option, None, max_trials, cfg.batch_size)
                runs.append({"scheme": name, "seed": seed, **res})
            logger.info("replay %s seed %d done", task.name, seed)
        out.append(
            {
                "log": log_path,
                "task": repr(task),
                "workload_key": key,
                "n_records": n_records,
                "recorded": len(table),
                "space": len(task.config_space),
                "optimum_gflops": optimum,
                "max_trials": max_trials,
                "runs": runs,
            }
        )
    return out
