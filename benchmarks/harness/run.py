"""Running schemes x workloads x seeds through ``Tuner.tune``, on the replay runner or on this CPU.

A run's curve is the library's own trial log (``tuner.trials``: clock stamped per candidate), plus what each measurement
cost (runs, CV, run time). Real-measurement runs end with a common high-repeat re-measurement of every run's incumbents,
so no scheme wins by a lucky timing (the winner's curse) and time-to-target is computed on the common numbers.
"""

from __future__ import annotations

import glob
import logging
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import adatune
from adatune.measure import MeasureInput, MeasureOption, MeasureResult, ReplayRunner
from adatune.records import group_by_workload
from adatune.task import TuningTask
from adatune.templates.workloads import get as get_workload
from adatune.tuners import Tuner

from .._common import load_records
from .schemes import SCHEMES, make_tuner

__all__ = [
    "host_record",
    "RunSpec",
    "run_scheme",
    "replay_study",
    "restrict_to_table",
    "hardware_study",
    "incumbent_values",
    "load_sweep_tasks",
    "study_task",
]

logger = logging.getLogger("benchmarks.harness")


def host_record() -> dict[str, Any]:
    """The machine every result was measured on: CPU model and ISA (``adatune.target.describe_host``)."""
    info: dict[str, Any] = {"platform": platform.platform(), "python": platform.python_version()}
    try:
        info.update(adatune.target.describe_host())
    except Exception as err:  # noqa: BLE001 - a host description must never stop a benchmark
        info["describe_host_error"] = f"{type(err).__name__}: {err}"
    info["cpu_model"] = info.get("model") or platform.processor()
    info["target"] = str(adatune.target.host())
    return info


@dataclass
class RunSpec:
    """Budget and settings shared by every run of a study."""

    n_trial: int = 256
    time_budget: float | None = None
    plan_size: int = 32
    batch_size: int = 8
    num_threads: int | None = 1
    min_converge_coef: float = 0.1  # the adaptive evaluator's, for AE schemes (replayed or live)


def _result_row(res: MeasureResult) -> dict[str, Any]:
    return {"runs": res.runs, "cv": res.cv, "run_time": res.run_time, "all_cost": res.all_cost}


def run_scheme(
    scheme: str,
    task: TuningTask,
    seed: int,
    option: MeasureOption,
    spec: RunSpec,
    seen: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One tuning run through the library loop; returns its trial curve and per-measurement costs
    (``seen``, if given, collects the measured candidates by key)."""
    measured: list[dict[str, Any]] = []
    steps_before = [0]  # the optimizer's steps when the last batch was learned: what proposed the next one

    def keep(t: Tuner, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        # search steps spent before this batch was measured (ReLeASE's count: an SA step moves every chain, a PPO
        # step every walker); callbacks run after the batch is learned, which may already have searched the next plan
        measured.extend({**_result_row(r), "search_steps": steps_before[0]} for r in results)
        steps_before[0] = sum(getattr(getattr(t, "model_optimizer", None), "steps_history", []))
        if seen is not None:
            seen.update((str(i.config.key), i.config) for i in inputs)

    tuner = make_tuner(scheme, task, seed, spec.plan_size, spec.num_threads)
    t0 = time.perf_counter()
    tuner.tune(spec.n_trial, option, batch_size=spec.batch_size, time_budget=spec.time_budget, callbacks=[keep])
    trials = [
        {
            "trial": t.trial,
            "key": t.key,
            "gflops": t.flops / 1e9,
            "best_gflops": t.best_flops / 1e9,
            "clock": t.clock,
            "error_no": t.error_no,
            **m,
        }
        for t, m in zip(tuner.trials, measured)
    ]
    refits = int(getattr(tuner, "train_ct", 0))
    return {
        "scheme": scheme,
        "seed": seed,
        "trials": trials,
        "clock": tuner.clock,
        "wall": time.perf_counter() - t0,
        "refits": refits,
        "search_time": sum(r.search_time for r in tuner.rounds),
        "measure_time": sum(r.measure_time for r in tuner.rounds),
        "best_gflops": tuner.best_flops / 1e9,
        "best_key": str(tuner.best_config.key) if tuner.best_config is not None else None,
        # each model-guided plan's exploration rate and (model, random) picks: what contextual exploration did
        "exploration": [list(s) for s in getattr(getattr(tuner, "exploration", None), "splits", [])],
        "eps": list(getattr(getattr(tuner, "exploration", None), "history", [])),
        # RFEI: the factor its sigma was multiplied by after every fit (1 at every fit without ``recalibrate``)
        "sigma_factors": list(getattr(getattr(tuner, "cost_model", None), "sigma_factors", [])),
        # RFEI: per refit, how its last forest did on the configs measured since (held-out z-scores)
        "held_out": list(getattr(getattr(tuner, "cost_model", None), "held_out", [])),
    }


def restrict_to_table(task: TuningTask, table: dict) -> int:
    """Filter a knob space to the configs a partial sweep recorded, so replay searches only what was measured; returns
    the restricted size. The filter compares each knob's entity text, checked first to tell a knob's entities apart."""
    space: Any = task.space
    if not hasattr(space, "restrict") or not hasattr(space, "space_map"):
        raise TypeError(f"{task.name}: only knob spaces can be restricted to a partial sweep")
    names = list(space.space_map)
    for n in names:
        texts = [str(e) for e in space.space_map[n].entities]
        if len(set(texts)) != len(texts):
            raise ValueError(f"knob {n!r} of {task.name} has entities with equal text; cannot restrict by text")
    wk = task.workload_key
    keys = {str(k) for (w, k) in table if w == wk}
    signatures = {tuple(str(space.get(int(k))[n]) for n in names) for k in keys}

    def recorded(cfg: Any) -> bool:
        return tuple(str(cfg[n]) for n in names) in signatures

    space.restrict(recorded)  # not multi_filter: an unpruned (space="autotvm") space ignores the template's filters
    size = int(space.size)
    if size != len(signatures):
        raise ValueError(f"{task.name}: restricting to the sweep's {len(signatures)} configs left {size}")
    return size


def load_sweep_tasks(patterns: Sequence[str]) -> list[tuple[str, TuningTask, dict]]:
    """(log path, task, replay table) for every workload in the sweep logs the globs match (.jsonl or .jsonl.gz)."""
    out = []
    paths = sorted({p for pat in patterns for p in glob.glob(pat)})
    if not paths:
        raise FileNotFoundError(f"no sweep log matches {list(patterns)}")
    for path in paths:
        for recs in group_by_workload(load_records(path)).values():
            out.append((path, recs[0].create_task(), ReplayRunner.from_records(recs).table))
    return out


def incumbent_values(runs: Sequence[dict[str, Any]], table: dict, task: TuningTask) -> dict[str, float]:
    """Key -> the sweep's GFLOPS for every incumbent of ``runs`` (a config that raised its run's own best): the replay's
    common evaluator. An adaptive-evaluator run reads each candidate from its first micro-batches, so its own
    best-so-far mixes the search with that reading's noise (a lucky reading of a mediocre config can reach the target,
    an unlucky one of the optimum not); valued at the table, as hardware studies value incumbents at their common
    re-measurement, its curve follows what it found. A deterministic run reads the table itself (curve unchanged)."""
    out: dict[str, float] = {}
    for run in runs:
        own = 0.0
        for t in run["trials"]:
            if t["gflops"] > own:
                own = t["gflops"]
                rec = table.get((task.workload_key, str(t["key"])))
                out[str(t["key"])] = rec.flops(task.flop) / 1e9 if rec is not None and rec.ok else 0.0
    return out


def study_task(workload: str, space: str = "knob") -> TuningTask:
    """The workload's knob task, or (``space="trace"``) the trace task over the same operator and shape."""
    knob = get_workload(workload).create_task(adatune.target.host())
    if space == "knob":
        return knob
    if space == "trace":
        return adatune.task.create(adatune.trace.RULES_PREFIX + knob.name, knob.args, knob.target)
    raise ValueError(f"space must be 'knob' or 'trace', got {space!r}")


def replay_study(
    patterns: Sequence[str],
    schemes: Sequence[str],
    seeds: Sequence[int],
    spec: RunSpec,
    on_seed: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every scheme x seed on every sweep; the table's best is the optimum. Adaptive-evaluator schemes are served each
    candidate's micro-batches cut where the evaluator stops (``ReplayRunner`` with ``min_converge_coef``). ``on_seed``
    gets the studies so far after every seed (so a run cut off keeps its finished seeds)."""
    studies: list[dict[str, Any]] = []
    for path, task, table in load_sweep_tasks(patterns):
        flops = [r.flops(task.flop) / 1e9 for r in table.values()]
        space = task.space.size
        restricted = None
        if len(table) < space:
            restricted = restrict_to_table(task, table)
            logger.warning(
                "%s: the sweep holds %d of %d candidates; replay searches those %d", path, len(table), space, restricted
            )
        runs: list[dict[str, Any]] = []
        common: dict[str, float] = {}
        studies.append(
            {
                "mode": "replay",
                "log": path,
                "task": repr(task),
                "workload_key": task.workload_key,
                "space": space,
                "searched_space": restricted if restricted is not None else space,
                "n_records": len(table),
                "optimum_gflops": max(flops, default=0.0),
                "n_valid": sum(f > 0 for f in flops),
                "runs": runs,
                "common_gflops": common,
            }
        )
        for seed in seeds:
            for name in schemes:
                coef = spec.min_converge_coef if SCHEMES[name].adaptive_evaluator else None
                # AE schemes replay the evaluator on the recorded micro-batches (meaningful when the sweep
                # was timed with number = the micro-batch and enough repeats for it to stop early)
                option = adatune.measure_option(runner=ReplayRunner(table), min_converge_coef=coef)
                runs.append(run_scheme(name, task, seed, option, spec))
            common.update(incumbent_values(runs[-len(schemes) :], table, task))  # this seed's runs only
            logger.info("replay %s seed %d done", task.name, seed)
            if on_seed is not None:
                on_seed(studies)
    return studies


def _options(evaluator: dict[str, Any], timeout: float, n_parallel: int) -> dict:
    """The deterministic, adaptive and common evaluators of a study from its runner settings (``number``,
    ``repeat``, ``min_converge_coef``, ``common_repeat`` and optionally ``micro_batch``/``min_micro_batches``)."""
    settings = dict(evaluator)
    coef, common_repeat = settings.pop("min_converge_coef"), settings.pop("common_repeat")
    builder = adatune.LocalBuilder(n_parallel=n_parallel)
    runner = adatune.LocalRunner(**settings, timeout=timeout)
    common = {"number": settings["number"], "repeat": common_repeat}
    return {
        "DE": adatune.measure_option(builder, runner),
        "AE": adatune.measure_option(builder, runner, min_converge_coef=coef),
        "common": adatune.measure_option(builder, adatune.LocalRunner(**common, timeout=timeout)),
    }


def remeasure(task: TuningTask, keys: Sequence[str], option: MeasureOption, candidates: dict[str, Any]) -> dict:
    """GFLOPS of each key by one common evaluator (a batch at a time)."""
    out: dict[str, float] = {}
    keys = list(dict.fromkeys(keys))
    for lo in range(0, len(keys), 8):
        inputs = [MeasureInput(task, candidates[k]) for k in keys[lo : lo + 8]]
        for inp, res in zip(inputs, option.measure(inputs)):
            out[str(inp.config.key)] = res.flops(task.flop) / 1e9
    return out


def hardware_study(
    workloads: Sequence[str],
    schemes: Sequence[str],
    seeds: Sequence[int],
    spec: RunSpec,
    evaluator: dict[str, Any] | None = None,
    timeout: float = 10.0,
    n_parallel: int = 2,
    space: str = "knob",
    on_run: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every seed x scheme under the same budget (schemes interleaved, order rotating with the seed, so drift hits all
    alike), then the common re-measurement of every best-so-far config. ``space="trace"`` tunes each workload's trace
    task. ``evaluator``: the runner settings (``_options``). ``on_run`` gets the studies so far after every run, the
    current workload's marked ``"partial"`` (not re-measured yet), so a killed study keeps its finished runs."""
    evaluator = evaluator or {"number": 10, "repeat": 10, "min_converge_coef": 0.1, "common_repeat": 30}
    studies: list[dict[str, Any]] = []
    for wl in workloads:
        task = study_task(wl, space)
        opts = _options(evaluator, timeout, n_parallel)
        try:
            warm = [MeasureInput(task, c) for c in task.space.random_candidates(np.random.default_rng(0), 2)]
            for opt in opts.values():
                opt.measure(warm)  # workers pay `import tvm` here, not inside a scheme's budget
            runs: list[dict[str, Any]] = []
            cands: dict[str, Any] = {}
            names = list(schemes)
            for k, seed in enumerate(seeds):
                for name in names[k % len(names) :] + names[: k % len(names)]:
                    option = opts["AE" if SCHEMES[name].adaptive_evaluator else "DE"]
                    run = run_scheme(name, task, seed, option, spec, cands)
                    runs.append(run)
                    if on_run is not None:
                        on_run([*studies, _study_record(wl, task, evaluator, spec, runs, None)])
                    logger.info(
                        "%s seed %d %s: %d trials, best %.2f GFLOPS",
                        wl,
                        seed,
                        name,
                        len(run["trials"]),
                        run["best_gflops"],
                    )
            incumbents = []
            for run in runs:
                best = 0.0
                for t in run["trials"]:
                    if t["gflops"] > best:
                        best = t["gflops"]
                        incumbents.append(t["key"])
            common = remeasure(task, incumbents, opts["common"], cands)
        finally:
            for opt in opts.values():
                opt.close()
        studies.append(_study_record(wl, task, evaluator, spec, runs, common))
    return studies


def _study_record(
    wl: str,
    task: TuningTask,
    evaluator: dict[str, Any],
    spec: RunSpec,
    runs: list[dict[str, Any]],
    common: dict[str, float] | None,
) -> dict[str, Any]:
    """One workload's hardware study as results.json keeps it; ``common=None``: runs so far, not re-measured."""
    record: dict[str, Any] = {
        "mode": "hardware",
        "workload": wl,
        "task": repr(task),
        "workload_key": task.workload_key,
        "space": task.space.size,
        "common_gflops": common if common is not None else {},
        "evaluator": evaluator,
        "common_evaluator": {"number": evaluator["number"], "repeat": evaluator["common_repeat"]},
        "time_budget": spec.time_budget,  # the report compares runs within it (stats.within_budget)
        "runs": list(runs),
    }
    if common is None:
        record["partial"] = True
    return record
