"""One model, every engine: untuned TVM, PyTorch eager, onnxruntime, and adatune tuned by each arm under the
same wall-clock budget, with the measured latency at checkpoints along the way."""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import tvm
from tvm import relax

import adatune
import adatune.models as am

from .._common import settled
from ..noise_gate import interleaved

__all__ = ["ARMS", "DEFAULT_ARMS", "Arm", "ArmRun", "ModelRun", "checkpoint_name", "run_model"]


class Arm(NamedTuple):
    """How an arm tunes a model: ``templates=False`` sends every task to trace search (knob templates unused)."""

    tuner: str  # of knob tasks
    trace_cost_model: str  # of trace tasks
    coef: float | None  # the adaptive evaluator's min_converge_coef; None: the deterministic evaluator
    templates: bool = True


ARMS: dict[str, Arm] = {
    "xgb": Arm("xgb", "xgb", None),
    "rfei-ae": Arm("rfei", "rfei", 0.1),
    "trace": Arm("xgb", "xgb", None, templates=False),
}
DEFAULT_ARMS = ["xgb", "rfei-ae"]


@dataclass
class ArmRun:
    """One arm's tuning of one model: checkpoints (tuning s, trials, estimated s, measured s), per-task rows."""

    arm: str
    log: str
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    estimated_curve: list[tuple[float, int, float | None]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    tuning_s: float = 0.0
    build_s: float = 0.0


@dataclass
class ModelRun:
    model: str
    n_tasks: int
    extract_s: float
    baselines: dict[str, float | None]  # engine -> median s (untuned TVM, pytorch, onnxruntime)
    arms: list[ArmRun]
    final: dict[str, float | None] = field(default_factory=dict)  # all engines again, in turns: median of rounds
    final_rounds: dict[str, list[float]] = field(default_factory=dict)  # engine -> each round's median s
    # arm -> where the compiled model's time goes (am.kernel_breakdown) beside the sum of its tasks' bests
    breakdown: dict[str, dict[str, Any]] = field(default_factory=dict)


def _option(coef: float | None, number: int, repeat: int, timeout: float, cold: bool = False) -> adatune.MeasureOption:
    """The runner of a tuning arm. ``cold``: caches flushed before every run (weights and output cold, the input
    hot, as inside a model); TVM flushes once per repeat, so every run is a repeat
    of one (``number * repeat`` runs in all, as without it)."""
    if cold:
        runner = adatune.LocalRunner(
            number=1,
            repeat=number * repeat,
            timeout=timeout,
            micro_batch=1,
            check_correctness=True,
            enable_cpu_cache_flush=True,
        )
        return adatune.measure_option(adatune.LocalBuilder(n_parallel=2), runner, min_converge_coef=coef)
    runner = adatune.LocalRunner(number=number, repeat=repeat, timeout=timeout, micro_batch=10, check_correctness=True)
    return adatune.measure_option(adatune.LocalBuilder(n_parallel=2), runner, min_converge_coef=coef)


def _untuned_latency(model: am.Model, repeats: int) -> tuple[float, float]:
    """TVM's own pipeline with no schedule at all (what a user gets without tuning): (median s, build s)."""
    t0 = time.perf_counter()
    exe = tvm.compile(model.mod, target=adatune.target.host())
    build_s = time.perf_counter() - t0
    vm = relax.VirtualMachine(exe, tvm.cpu())
    args = [tvm.runtime.tensor(a, tvm.cpu()) for a in model.random_inputs(0)]
    vm["main"](*args)  # one warm-up call: untuned BERT-base takes tens of seconds per inference
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        vm["main"](*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times), build_s


def _compiled(model: am.Model, log: str, tasks: list[am.ModelTask]) -> tuple[am.CompiledModel, float]:
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a task still untuned at an early checkpoint gets its fallback
        compiled = am.build(model, log, tasks=tasks)
    return compiled, time.perf_counter() - t0


def _task_rows(summary: am.TuneSummary) -> list[dict[str, Any]]:
    return [
        {
            "task": t.task_name,
            "kind": t.kind,
            "weight": t.weight,
            "gflop": t.flop / 1e9,
            "trials": n,
            "best_ms": None if b is None else b * 1e3,
            "weighted_ms": None if b is None else b * t.weight * 1e3,
            "functions": " ".join(t.global_vars),  # the model's functions this task schedules
        }
        for t, n, b in zip(summary.tasks, summary.trials, summary.best_seconds)
    ]


def run_arm(
    model: am.Model,
    tasks: list[am.ModelTask],
    arm: str,
    budget_s: float,
    checkpoints: int,
    out: str,
    repeats: int,
    number: int,
    repeat: int,
    seed: int,
    cold: bool = False,
    confirm: int = 0,
    tuning_cache: str | None = None,
    transfer: bool = False,
) -> tuple[ArmRun, list[am.CompiledModel]]:
    """Tune in ``checkpoints`` slices of the budget, compiling and timing the model after each; returns the run
    and the model compiled at each checkpoint (all timed again in the final comparison, not rebuilt).
    ``confirm`` > 0: each slice ends with every task's ``confirm`` leaders re-timed (``tune_model(confirm=...)``),
    so a checkpoint deploys, and its estimate sums, medians of re-timings rather than single lucky readings.
    ``tuning_cache``: the arm tunes with a fresh copy of it (``transfer`` as ``tune_model``'s)."""
    tuner, trace_model, coef, _templates = ARMS[arm]
    log = os.path.join(out, f"records_{model.name}_{arm}.jsonl")
    if os.path.exists(log):
        os.remove(log)
    cache = None
    if tuning_cache:  # a copy per arm: every arm starts from the same cache
        cache = shutil.copytree(tuning_cache, os.path.join(out, f"cache_{model.name}_{arm}"), dirs_exist_ok=True)
    run = ArmRun(arm, log)
    option = _option(coef, number, repeat, timeout=10.0, cold=cold)
    inputs = model.random_inputs(0)
    compiled: list[am.CompiledModel] = []
    for k in range(checkpoints):
        t0 = time.perf_counter()
        summary = am.tune_model(
            model,
            log,
            time_budget=budget_s / checkpoints,
            tuner=tuner,
            trace_cost_model=trace_model,
            option=option,
            tasks=tasks,
            seed=seed,
            progress=False,
            confirm=confirm,
            cache=cache,
            transfer=transfer,
        )
        offset = run.tuning_s
        run.tuning_s += time.perf_counter() - t0
        run.estimated_curve += [(offset + s, n, est) for s, n, est in summary.history]
        built, build_s = _compiled(model, log, tasks)
        compiled.append(built)
        run.build_s += build_s
        latency = am.compiled_latency(built, inputs, repeats)
        run.checkpoints.append(
            {
                "tuning_s": run.tuning_s,
                "trials": sum(summary.trials),
                "estimated_s": summary.estimated_latency,
                "measured_s": latency,
                "tasks_with_record": sum(v == "record" for v in built.applied.values()),
            }
        )
        print(
            f"{model.name:>9} {arm:>8} checkpoint {k + 1}/{checkpoints}: {run.tuning_s:7.1f} s tuning, "
            f"{sum(summary.trials):5d} trials, measured {latency * 1e3:8.2f} ms",
            flush=True,
        )
        run.tasks = _task_rows(summary)
    return run, compiled


def run_model(
    name: str,
    arms: list[str],
    budget_s: float,
    checkpoints: int,
    out: str,
    repeats: int,
    untuned_repeats: int,
    number: int,
    repeat: int,
    seed: int,
    rounds: int = 5,
    on_progress: Any = None,
    fast_math: bool = False,
    conv_layout: str = "NCHW",
    cold: bool = False,
    winograd: bool = False,
    confirm: int = 0,
    tuning_cache: str | None = None,
    transfer: bool = False,
) -> ModelRun:
    t0 = time.perf_counter()
    model = am.load_builtin(name, fast_math=fast_math, conv_layout=conv_layout, winograd=winograd)
    tasks = am.extract_tasks(model)
    extract_s = time.perf_counter() - t0
    print(f"{name}: {len(tasks)} tasks extracted in {extract_s:.1f} s", flush=True)
    untuned, untuned_build = _untuned_latency(model, untuned_repeats)
    inputs = model.random_inputs(0)
    baselines: dict[str, float | None] = {"untuned-tvm": untuned}
    for fw in am.FRAMEWORKS:
        baselines[fw] = am.framework_latency(model, fw, inputs, repeats)
    print(
        f"{name}: untuned TVM {untuned * 1e3:.1f} ms (built in {untuned_build:.0f} s), "
        + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in baselines.items() if k != "untuned-tvm" and v),
        flush=True,
    )
    result = ModelRun(name, len(tasks), extract_s, baselines, [])
    compiled: dict[str, list[am.CompiledModel]] = {}
    trace_only: list[am.ModelTask] | None = None
    for arm in arms:
        if not ARMS[arm].templates and trace_only is None:
            trace_only = am.extract_tasks(model, templates=False)
        arm_tasks = tasks if ARMS[arm].templates else trace_only
        assert arm_tasks is not None
        arm_run, compiled[arm] = run_arm(
            model, arm_tasks, arm, budget_s, checkpoints, out, repeats, number, repeat, seed, cold, confirm,
            tuning_cache, transfer,
        )  # fmt: skip
        result.arms.append(arm_run)
        if on_progress is not None:
            on_progress(result)

    # the final comparison: every engine again, in turns (each round times every engine once, the order reversed
    # every other round, a pause after each), so load that comes and goes hits all engines alike
    def framework_timer(fw: str) -> Callable[[], float]:
        return lambda: settled(am.framework_latency(model, fw, inputs, repeats) or math.nan)

    def model_timer(built: am.CompiledModel) -> Callable[[], float]:
        return lambda: settled(am.compiled_latency(built, inputs, repeats))

    timers = {fw: framework_timer(fw) for fw in am.FRAMEWORKS if result.baselines.get(fw) is not None}
    for arm, models in compiled.items():  # every checkpoint's model: when did the arm reach each engine
        for k, built in enumerate(models):
            timers[arm if k == len(models) - 1 else checkpoint_name(arm, k)] = model_timer(built)
    result.final_rounds = interleaved(timers, rounds)
    result.final = {name: statistics.median(times) for name, times in result.final_rounds.items()}
    for arm_run in result.arms:
        for k, cp in enumerate(arm_run.checkpoints):
            name = arm_run.arm if k == len(arm_run.checkpoints) - 1 else checkpoint_name(arm_run.arm, k)
            cp["retimed_s"] = result.final.get(name)
    for arm_run in result.arms:
        last = compiled[arm_run.arm][-1] if compiled.get(arm_run.arm) else None
        if last is not None:
            result.breakdown[arm_run.arm] = _breakdown(last, inputs, arm_run, repeats)
    return result


def checkpoint_name(arm: str, k: int) -> str:
    """The final comparison's name of ``arm``'s model at checkpoint ``k`` (0-based; the last is the arm's name)."""
    return f"{arm}@{k + 1}"


def _breakdown(compiled: am.CompiledModel, inputs: list[Any], arm: ArmRun, repeats: int) -> dict[str, Any]:
    """The compiled model's time per VM call, and per task: its share inside the model against its isolated
    best x weight, so the gap between the estimate and the measured latency is located, not guessed."""
    report = am.kernel_breakdown(compiled, inputs, repeats=max(3, repeats // 3))
    inside = {c.symbol: c for c in report.calls}
    per_task = []
    for t in arm.tasks:
        calls = [inside[g] for g in str(t.get("functions", "")).split() if g in inside]
        in_model = sum(c.seconds for c in calls)
        per_task.append({**t, "in_model_ms": in_model * 1e3 if calls else None})
    return {
        "end_to_end_s": report.end_to_end,
        "kernels_s": report.kernels,
        "builtins_s": report.builtins,
        "outside_s": report.outside,
        "sum_of_task_bests_s": sum(t["weighted_ms"] for t in arm.tasks if t["weighted_ms"] is not None) / 1e3,
        "calls": [dataclasses.asdict(c) for c in report.calls],
        "tasks": per_task,
    }
