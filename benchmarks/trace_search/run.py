"""The arms: TVM's own ``ms.tune_tir`` (stock, and with adatune's plug-ins), ``TraceSearchTuner`` and the knob tuners,
each tuning one workload for the same number of trials with the same seed.

Every arm reports a curve of (wall seconds since it started, best latency so far), its build wall seconds per candidate
(queueing included), and its best program, which ``retime`` times again with every arm's in turns.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.builder import PyBuilder
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

import adatune
import adatune.codegen.vector_math
from adatune.measure import Builder, MeasureInput, MeasureResult
from adatune.tuners import RFEITuner, TraceSearchTuner, Tuner, XGBTuner

from .workloads import BenchWorkload

__all__ = ["ARMS", "MS_ARMS", "ArmResult", "RunConfig", "run_arm", "retime"]

# ms arms: stock ``tune_tir``, each adatune plug-in alone in an otherwise stock call, and all four together
PLUGINS = ("builder", "runner", "cost-model", "search")
MS_ARMS: dict[str, frozenset[str]] = {
    "ms-stock": frozenset(),
    **{f"ms+{p}": frozenset({p}) for p in PLUGINS},
    "ms-adatune": frozenset(PLUGINS),
}
# trace-*-vector: TraceSearchTuner in the ``vector`` rule set (adatune.trace.RULE_SETS) of the same program
# trace-*-packed: the same in the ``packed`` rule set (vector rules + the vectorised operand packed into panels)
ARMS = (
    *MS_ARMS,
    "trace-xgb",
    "trace-rfei",
    "trace-xgb-vector",
    "trace-rfei-vector",
    "trace-xgb-packed",
    "trace-rfei-packed",
    "knob-xgb",
    "knob-rfei",
)


@dataclass
class RunConfig:
    trials: int = 32
    per_iter: int = 16  # ms num_trials_per_iter, the trace tuners' plan size and the knob tuners' plan size
    batch: int = 8
    number: int = 5
    repeat: int = 3
    min_converge_coef: float = 0.1
    n_parallel: int = 2
    timeout: float = 30.0
    work_dir: str = "/tmp/adatune-trace-search"


@dataclass
class ArmResult:
    workload: str
    arm: str
    seed: int
    trials: int = 0
    curve: list[tuple[float, float]] = field(default_factory=list)  # (wall s, best latency s so far)
    own_best: float = math.inf  # the arm's own measurement of its best program (s)
    best: float = math.inf  # the best program re-timed by the common evaluator (s)
    correct: bool | None = None
    build_per_candidate: float = math.nan  # wall seconds of build calls per candidate
    wall: float = 0.0
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


# -- TVM meta_schedule arms ----------------------------------------------------------------------------
def build_without_intrinsics(mod: tvm.IRModule, target: tvm.target.Target, _params: Any) -> Any:
    """TVM's default_build minus its ``import tvm.s_tir.tensor_intrin`` (long enough in every fresh build
    process to make the stock LocalBuilder time out); valid because nothing here tensorizes."""
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    return tvm.tirx.build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod), target)


@derived_object
class _TimedBuilder(PyBuilder):
    """Delegates to a meta_schedule builder and adds up the wall time of its build calls."""

    def __init__(self, inner: Any):
        super().__init__()
        self.inner, self.seconds, self.count = inner, 0.0, 0

    def build(self, build_inputs: list) -> list:
        t0 = time.perf_counter()
        out = self.inner.build(build_inputs)
        self.seconds += time.perf_counter() - t0
        self.count += len(build_inputs)
        return out


@derived_object
class _Curve(PyMeasureCallback):
    """Appends (wall seconds, best latency so far) after every measured candidate of a ``tune_tir`` run."""

    def __init__(self, t0: float, curve: list):
        super().__init__()
        self.t0, self.curve, self.best = t0, curve, math.inf

    def apply(
        self, task_scheduler: Any, task_id: int, measure_candidates: Any, builder_results: Any, runner_results: Any
    ) -> None:
        now = time.perf_counter() - self.t0
        for res in runner_results:
            secs = [float(s) for s in (res.run_secs or [])]
            if res.error_msg is None and secs:
                self.best = min(self.best, float(np.mean(secs)))
            self.curve.append((now, self.best))


def _run_ms(
    wl: BenchWorkload, seed: int, cfg: RunConfig, plugins: frozenset[str], out: ArmResult
) -> tvm.IRModule | None:
    """``ms.tune_tir`` with the named adatune plug-ins replacing its builder, runner, cost model or search strategy."""
    from adatune.meta_schedule import AdaptiveRunner, ContextualEvolutionarySearch, FastBuilder, RFEICostModel

    target = wl.trace_task.target
    if "builder" in plugins:
        builder = _TimedBuilder(FastBuilder(max_workers=cfg.n_parallel, timeout_sec=cfg.timeout))
    else:
        stock = ms.builder.LocalBuilder(
            max_workers=cfg.n_parallel, timeout_sec=cfg.timeout, f_build=build_without_intrinsics
        )
        builder = _TimedBuilder(stock)
    runner: Any
    if "runner" in plugins:
        runner = AdaptiveRunner(min_converge_coef=cfg.min_converge_coef, timeout_sec=cfg.timeout)
    else:
        runner = ms.runner.LocalRunner(
            timeout_sec=cfg.timeout,
            evaluator_config=ms.runner.EvaluatorConfig(
                number=cfg.number, repeat=cfg.repeat, min_repeat_ms=0, enable_cpu_cache_flush=False
            ),
        )
    cost_model: Any = RFEICostModel(seed=seed) if "cost-model" in plugins else "xgb"
    strategy: Any = ContextualEvolutionarySearch(seed=seed) if "search" in plugins else "evolutionary"
    work = os.path.join(cfg.work_dir, f"{wl.name}-{out.arm}-{seed}")
    t0 = time.perf_counter()
    callbacks = [*ms.measure_callback.MeasureCallback.create("default"), _Curve(t0, out.curve)]
    db = ms.tune_tir(
        wl.mod,
        target,
        work,
        max_trials_global=cfg.trials,
        num_trials_per_iter=cfg.per_iter,
        builder=builder,
        runner=runner,
        database="memory",
        cost_model=cost_model,
        strategy=strategy,
        measure_callbacks=callbacks,
        seed=seed,
    )
    out.wall = time.perf_counter() - t0
    out.trials = len(out.curve)
    out.own_best = out.curve[-1][1] if out.curve else math.inf
    out.build_per_candidate = builder.seconds / max(builder.count, 1)
    sch = db.query_schedule(wl.mod, target, workload_name="main")
    return None if sch is None else sch.mod


# -- adatune arms --------------------------------------------------------------------------------------
class _TimedAdatuneBuilder(Builder):
    def __init__(self, inner: Builder):
        self.inner, self.seconds, self.count = inner, 0.0, 0

    def build(self, inputs: Any, device_limits: Any = None) -> list:
        t0 = time.perf_counter()
        out = self.inner.build(inputs, device_limits)
        self.seconds += time.perf_counter() - t0
        self.count += len(inputs)
        return out

    def close(self) -> None:
        self.inner.close()


def _tuner(arm: str, wl: BenchWorkload, seed: int, cfg: RunConfig) -> Tuner:
    makers: dict[str, Callable[[], Tuner]] = {
        "trace-xgb": lambda: TraceSearchTuner(wl.trace_task, cost_model="xgb", plan_size=cfg.per_iter, seed=seed),
        "trace-rfei": lambda: TraceSearchTuner(wl.trace_task, cost_model="rfei", plan_size=cfg.per_iter, seed=seed),
        "trace-xgb-vector": lambda: TraceSearchTuner(
            wl.task_in("vector"), cost_model="xgb", plan_size=cfg.per_iter, seed=seed
        ),
        "trace-rfei-vector": lambda: TraceSearchTuner(
            wl.task_in("vector"), cost_model="rfei", plan_size=cfg.per_iter, seed=seed
        ),
        "trace-xgb-packed": lambda: TraceSearchTuner(
            wl.task_in("packed"), cost_model="xgb", plan_size=cfg.per_iter, seed=seed
        ),
        "trace-rfei-packed": lambda: TraceSearchTuner(
            wl.task_in("packed"), cost_model="rfei", plan_size=cfg.per_iter, seed=seed
        ),
        "knob-xgb": lambda: XGBTuner(wl.knob_task, plan_size=cfg.per_iter, seed=seed),  # type: ignore[arg-type]
        "knob-rfei": lambda: RFEITuner(wl.knob_task, plan_size=cfg.per_iter, seed=seed),  # type: ignore[arg-type]
    }
    return makers[arm]()


def _run_adatune(wl: BenchWorkload, seed: int, cfg: RunConfig, out: ArmResult) -> tvm.IRModule | None:
    adaptive = "rfei" in out.arm
    builder = _TimedAdatuneBuilder(adatune.LocalBuilder(timeout=cfg.timeout, n_parallel=cfg.n_parallel))
    runner = adatune.LocalRunner(number=cfg.number, repeat=cfg.repeat, timeout=cfg.timeout)
    option = adatune.measure_option(builder, runner, min_converge_coef=cfg.min_converge_coef if adaptive else None)
    t0 = time.perf_counter()
    tuner = _tuner(out.arm, wl, seed, cfg)
    best = [math.inf]

    def record(_tuner: Tuner, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        now = time.perf_counter() - t0
        for res in results:
            if res.ok:
                best[0] = min(best[0], res.mean_cost)
            out.curve.append((now, best[0]))

    try:
        tuner.tune(n_trial=cfg.trials, measure_option=option, batch_size=cfg.batch, callbacks=[record])
    finally:
        builder.close()
        runner.close()
    out.wall = time.perf_counter() - t0
    out.trials = len(tuner.trials)
    out.own_best = best[0]
    out.build_per_candidate = builder.seconds / max(builder.count, 1)
    if tuner.best_config is None:
        return None
    return tuner.task.scheduled_module(tuner.best_config)


# -- common evaluator ----------------------------------------------------------------------------------
def retime(
    mods: Sequence[tvm.IRModule], wl: BenchWorkload, rounds: int = 7, min_repeat_ms: int = 50
) -> list[tuple[float, bool]]:
    """(median latency in s, output matches the unscheduled program) for every arm's best program, each built once and
    checked, then all timed in ``rounds`` rounds of turns (``noise_gate.interleaved``): the bests were found at
    different minutes of a shared machine, and timing each after its own arm would let the host's drift in."""
    from ..noise_gate import interleaved

    target = wl.trace_task.target
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    specs = wl.trace_task.arg_specs
    inputs = [rng.uniform(-1, 1, s.shape).astype(s.dtype) for s in specs if not s.is_output]

    def run(module: tvm.IRModule) -> tuple[list, Any]:
        lib = tvm.tirx.build(
            module, target, pipeline=adatune.codegen.vector_math.tir_pipeline(target)
        )  # as adatune builds
        it = iter(inputs)
        args = [tvm.runtime.tensor(np.zeros(s.shape, s.dtype) if s.is_output else next(it), dev) for s in specs]
        lib["main"](*args)
        return args, lib

    ref, _ = run(wl.mod)
    correct, timers = [], {}
    for i, mod in enumerate(mods):
        try:
            args, lib = run(mod)
        except Exception:  # noqa: BLE001 - a best program that no longer builds is reported, not fatal
            correct.append(False)
            continue
        outs = [(a, r) for a, r, s in zip(args, ref, specs) if s.is_output]
        correct.append(all(np.allclose(a.numpy(), r.numpy(), rtol=1e-3, atol=1e-3) for a, r in outs))
        timer = lib.time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=min_repeat_ms)
        timers[str(i)] = lambda timer=timer, args=args: float(timer(*args).mean)
    seconds = interleaved(timers, rounds) if timers else {}
    return [(float(np.median(seconds[str(i)])) if str(i) in seconds else math.inf, ok) for i, ok in enumerate(correct)]


def run_arm(arm: str, wl: BenchWorkload, seed: int, cfg: RunConfig) -> tuple[ArmResult, tvm.IRModule | None]:
    """(result, best program) of one arm on a workload and seed; a failure goes in ``error``, not raised."""
    out = ArmResult(wl.name, arm, seed)
    best = None
    try:
        best = _run_ms(wl, seed, cfg, MS_ARMS[arm], out) if arm in MS_ARMS else _run_adatune(wl, seed, cfg, out)
    except Exception as err:  # noqa: BLE001 - one broken arm must not lose the others' results
        out.error = f"{type(err).__name__}: {str(err).strip().splitlines()[-1][:300] if str(err).strip() else ''}"
    return out, best
