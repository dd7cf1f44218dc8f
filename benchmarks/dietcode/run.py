"""The arms of the DietCode benchmark, each giving tuning seconds and a latency for every T of the range.

- ``per-shape``: a static kernel tuned (XGBTuner over the x86 knob template) for each sampled T; any other T
  runs the kernel of the smallest sampled T' >= T on zero-padded inputs.
- ``padded-largest``: the kernel tuned for the range's top (shared with ``per-shape`` if sampled), used for every T.
- ``buckets``: a static kernel tuned for every multiple of ``bucket`` (plus the top); T pads up to its bucket.
- ``torch`` / ``numpy``: the vendor libraries (oneDNN / OpenBLAS) at the exact shape, nothing tuned.
- ``dietcode``: one ``DietCodeTuner`` run for the whole range; every T runs its dispatched micro-kernel.

Padded arms report the kernel time at T' (the pad and crop copies are not counted, which favours them).
Every timed TVM kernel goes through ``time_evaluator``; the vendor calls through ``time_callable``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import tvm
from threadpoolctl import threadpool_limits

import adatune
import adatune.callback
from adatune.dietcode import DietCodeResult, DietCodeTuner, DynamicKernel, DynamicWorkload, weight_panel
from adatune.measure import MeasureErrorNo
from adatune.measure.vendor_reference import physical_cores, time_callable
from adatune.target import one_blas_thread
from adatune.tuners import XGBTuner

__all__ = [
    "ARMS",
    "ArmResult",
    "BenchConfig",
    "DIETCODE_ARMS",
    "DISPATCH_COSTS_OPTION",
    "Retimer",
    "StaticTuner",
    "run_dietcode",
    "serve_dietcode",
    "run_vendor",
    "serve_padded",
]

ARMS = ("per-shape", "padded-largest", "buckets", "torch", "numpy", "dietcode", "dietcode-verified")
#: the arms served by DietCode kernels (``dietcode-verified``: the same run with ``DietCodeTuner(verify=True)``)
DIETCODE_ARMS = ("dietcode", "dietcode-verified")
#: DietCodeTuner's own declaration of ``dispatch_costs`` (default, choices, doc): the benchmarks' flags read it
DISPATCH_COSTS_OPTION = next(o for o in DietCodeTuner.declared_options() if o.name == "dispatch_costs")


@dataclass
class BenchConfig:
    """Budgets and timing settings shared by the arms."""

    t_range: tuple[int, int]
    sampled: list[int]
    bucket: int
    static_trials: int
    dietcode_shapes: int
    dietcode_rounds: int
    dietcode_per_round: int
    dietcode_max_kernels: int | None
    repeat: int
    min_repeat_ms: int
    vendor_repeats: int
    vendor_threads: int
    seed: int
    timeout: float
    n_parallel: int
    static_converge: int | None = None  # per-shape tuning stops after this many trials without improvement
    dietcode_search: str = "evolutionary"
    dietcode_features: str = "program"
    dispatch_tolerance: float = 0.01
    rounds: int = 5  # interleaved timing rounds of every arm at every T
    dispatch_costs: str = DISPATCH_COSTS_OPTION.default  # what the sampled T vote on
    host_state: bool = True  # read the probe around every timing of the interleaved pass (``retime``)
    state_passes: int = 2  # further passes over the T short of fast-state rounds
    dietcode_verify: bool = False  # DietCodeTuner's ``verify``: deployed kernels timed at every T, each T the fastest
    gemms: list[tuple[str, str, int, int]] = field(
        default_factory=list
    )  # ``--gemm``: (name, kind, A, B) besides BERT's


@dataclass
class ArmResult:
    """One arm on one workload: its tuning seconds, the latency (s) of every T, and what served each T."""

    workload: str
    arm: str
    tuning_seconds: float
    latency: dict[int, float]
    served_by: dict[int, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def static_task(wl: DynamicWorkload, t: int, target: tvm.target.Target) -> adatune.task.TuningTask:
    """The workload at a fixed T as a knob-template task (what a static-shape tuner gets)."""
    a, b = wl.dims
    if wl.kind == "dense":
        return adatune.task.create("dense.x86", (t, a, b, wl.dtype), target)
    if wl.kind == "bmm_nt":
        return adatune.task.create("batch_matmul.x86", (a, t, t, b, "NT", wl.dtype), target)
    return adatune.task.create("batch_matmul.x86", (a, t, b, t, "NN", wl.dtype), target)


class StaticTuner:
    """Tunes and times static kernels of one workload, once per T (shared by the arms that pad)."""

    def __init__(self, wl: DynamicWorkload, cfg: BenchConfig, target: tvm.target.Target, log_file: str | None = None):
        self.wl, self.cfg, self.target, self.log_file = wl, cfg, target, log_file
        self.tuning_seconds: dict[int, float] = {}
        self.latency: dict[int, float] = {}
        self.best: dict[int, str] = {}
        self.unavailable: dict[int, str] = {}  # T -> why there is no static kernel at T
        self.trials: dict[int, tuple[int, int]] = {}  # T -> (trials measured, configs in the space)
        self.libs: dict[int, Any] = {}  # T -> the built best kernel of T
        self._option: Any = None
        self.startup_seconds = 0.0

    def _start(self) -> None:
        """Start the builder and runner worker processes (each imports TVM and adatune) before any shape's
        clock runs: every shape is then tuned with warm workers, and the start-up is reported on its own."""
        start = time.perf_counter()
        builder = adatune.LocalBuilder(timeout=self.cfg.timeout, n_parallel=self.cfg.n_parallel)
        runner = adatune.LocalRunner(
            number=1, repeat=3, min_repeat_ms=10, timeout=self.cfg.timeout, check_correctness=True
        )
        for pool, workers in ((builder.pool, self.cfg.n_parallel), (runner.pool, 1)):
            for fut in [pool.submit(time.sleep, 0.2) for _ in range(workers)]:
                fut.result()
        self._option = adatune.measure_option(builder, runner)
        self.startup_seconds = time.perf_counter() - start

    def ensure(self, t: int) -> bool:
        """Tune the static kernel for ``t`` (once), then time its best config; False (the reason kept in
        ``unavailable``) where the template has no config at ``t`` or none measured correct, after up to three more
        rounds of ``static_trials`` (counted as tuning time). Each measurement is logged to ``log_file``."""
        if t in self.latency or t in self.unavailable:
            return t in self.latency
        if self._option is None:
            self._start()
        start = time.perf_counter()
        task = static_task(self.wl, t, self.target)
        if task.space.size == 0:  # the template's filters leave no config at this shape
            self.unavailable[t] = f"{task}: the knob template has no valid config at this shape"
            return False
        tuner = XGBTuner(task, plan_size=min(64, max(8, self.cfg.static_trials // 2)), seed=self.cfg.seed)
        callbacks = [adatune.callback.log_to_file(self.log_file)] if self.log_file else []
        for _ in range(4):
            tuner.tune(
                n_trial=self.cfg.static_trials,
                measure_option=self._option,
                early_stopping=self.cfg.static_converge,
                batch_size=8,
                callbacks=callbacks,
            )
            if tuner.best_config is not None or not tuner.has_next():
                break
        self.tuning_seconds[t] = time.perf_counter() - start
        self.trials[t] = (len(tuner.trials), task.space.size)
        if tuner.best_config is None:
            kinds = sorted({MeasureErrorNo(tr.error_no).name for tr in tuner.trials})
            self.unavailable[t] = f"no correct config in {len(tuner.trials)} trials ({kinds})"
            return False
        self.best[t] = str(tuner.best_config)
        self.libs[t] = tvm.tirx.build(task.scheduled_module(tuner.best_config), self.target)
        self.latency[t] = self.time(t)
        return True

    def time(self, t: int) -> float:
        """Seconds of the static kernel tuned for ``t``, at its shape (timed again on every call)."""
        return _time_tvm(self.libs[t], "main", _tensors(self.wl, t), (), self.cfg)

    def close(self) -> None:
        if self._option is not None:
            self._option.close()
            self._option = None


Retimer = Callable[[int], float]
BLAS_SPIN_S = 0.25  # pause after every numpy timing (see ``run_vendor``)


def serve_padded(tuner: StaticTuner, name: str, kernels_at: list[int], tuned: list[int]) -> tuple[ArmResult, Retimer]:
    """Every T of the range served by the smallest of ``kernels_at`` >= T that has a kernel (a shape the template cannot
    serve is listed in ``extra["unavailable"]``); tuning time of ``tuned``, failed attempts included."""
    lo, hi = tuner.wl.t_range
    kernels_at = [t for t in sorted(kernels_at) if tuner.ensure(t)]
    if not kernels_at or kernels_at[-1] < hi:
        raise RuntimeError(f"no static kernel of {tuner.wl.name} can serve T={hi}: {tuner.unavailable}")
    latency, served = {}, {}
    for t in range(lo, hi + 1):
        tp = next(k for k in kernels_at if k >= t)
        latency[t], served[t] = tuner.latency[tp], f"T'={tp}"
    secs = sum(tuner.tuning_seconds.get(t, 0.0) for t in tuned)
    extra = {
        "kernels_at": kernels_at,
        "unavailable": {t: why for t, why in tuner.unavailable.items() if t in tuned},
        "best_configs": {t: tuner.best[t] for t in kernels_at},
        "tuning_seconds_per_shape": {t: tuner.tuning_seconds[t] for t in kernels_at},
        "trials_per_shape": {t: tuner.trials[t] for t in kernels_at},
        "worker_startup_seconds": tuner.startup_seconds,
    }
    return ArmResult(tuner.wl.name, name, secs, latency, served, extra), lambda t: tuner.time(
        next(k for k in kernels_at if k >= t)
    )


def _tensors(wl: DynamicWorkload, t: int) -> list[Any]:
    rng = np.random.default_rng(t)
    a, b = wl.random_inputs(t, rng)
    dev = tvm.cpu(0)
    return [tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), tvm.runtime.empty(wl.shapes(t)[2], wl.dtype, dev)]


def _time_tvm(lib: Any, name: str, tensors: list[Any], extra_args: tuple, cfg: BenchConfig) -> float:
    mod = lib.mod if hasattr(lib, "mod") else lib
    ev = mod.time_evaluator(name, tvm.cpu(0), number=1, repeat=cfg.repeat, min_repeat_ms=cfg.min_repeat_ms)
    with adatune.target.tvm_main_thread():  # the caller off TVM's worker CPU (vendor threads ran before)
        return float(np.median(ev(*tensors, *extra_args).results))


def run_vendor(wl: DynamicWorkload, library: str, cfg: BenchConfig) -> tuple[ArmResult, Retimer]:
    """torch.matmul (oneDNN) or numpy.matmul (OpenBLAS) at the exact shape of every T, on ``vendor_threads``
    threads (torch's intra-op pool; numpy's BLAS pool through threadpoolctl)."""
    threads = cfg.vendor_threads or physical_cores()
    torch.set_num_threads(threads)
    lo, hi = wl.t_range

    def at(t: int) -> float:
        with threadpool_limits(limits=threads):
            seconds = _time_vendor(wl, library, t, cfg)
        if library == "numpy":  # OpenBLAS's threads busy-wait after a call: let them go idle, or the next TVM
            time.sleep(BLAS_SPIN_S)  # kernel waits for its worker threads
        return seconds

    latency = {t: at(t) for t in range(lo, hi + 1)}
    extra = {"threads": threads}
    served = {t: f"{library} ({threads} threads)" for t in latency}
    return ArmResult(wl.name, library, 0.0, latency, served, extra), at


def _time_vendor(wl: DynamicWorkload, library: str, t: int, cfg: BenchConfig) -> float:
    a, b = wl.random_inputs(t, np.random.default_rng(t))
    if library == "torch":
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        tb = tb.transpose(-1, -2) if wl.kind == "bmm_nt" else tb
        call: Callable[[], Any] = functools.partial(torch.matmul, ta, tb)
    else:
        call = functools.partial(wl.reference, a, b)
    with torch.inference_mode():
        return time_callable(call, repeats=cfg.vendor_repeats, warmup_s=0.05)


def run_dietcode(
    wl: DynamicWorkload, cfg: BenchConfig, target: tvm.target.Target, log_file: str, arm: str = "dietcode"
) -> tuple[ArmResult, Retimer, DietCodeResult]:
    """One DietCode run for the range; every T checked against numpy, then timed through its kernel. A dense
    weight is given pre-packed (``weight_panel``), as a model packs its constant weights once at load. Returns the
    tuner's result too, for arms served by the same kernels (``serve_dietcode``)."""
    if wl.kind == "dense":
        wl = dataclasses.replace(wl, b_panel=weight_panel(target, wl.dtype, wl.dims[1]))
    tuner = DietCodeTuner(
        wl,
        target,
        n_shapes=cfg.dietcode_shapes,
        rounds=cfg.dietcode_rounds,
        kernels_per_round=cfg.dietcode_per_round,
        max_kernels=cfg.dietcode_max_kernels,
        seed=cfg.seed,
        search=cfg.dietcode_search,
        features=cfg.dietcode_features,
        dispatch_tolerance=cfg.dispatch_tolerance,
        dispatch_costs=cfg.dispatch_costs,
        verify=cfg.dietcode_verify or arm == "dietcode-verified",
        repeat=3,
        min_repeat_ms=10,
    )
    start = time.perf_counter()
    tuner.tune(callbacks=[adatune.callback.log_to_file(log_file)])
    res = tuner.result()
    dk = res.build()  # compiling the selected kernels and the C dispatcher is part of the tuning cost
    secs = time.perf_counter() - start
    return (*serve_dietcode(res, dk, secs, arm, cfg), res)


def serve_dietcode(
    res: DietCodeResult, dk: DynamicKernel, secs: float, arm: str, cfg: BenchConfig
) -> tuple[ArmResult, Retimer]:
    """``dk`` (built from ``res``) checked against numpy at every T of the range, then timed there."""
    wl = res.workload
    lo, hi = wl.t_range

    def at(t: int) -> float:
        return _time_tvm(dk.lib, dk.function_name(t), _tensors(wl, t), (t,), cfg)

    latency, served, wrong = {}, {}, []
    for t in range(lo, hi + 1):
        a, b = wl.random_inputs(t, np.random.default_rng(t))
        with one_blas_thread():  # numpy's BLAS workers would spin on the cores the kernel is timed on
            ref = wl.reference(a, b)
        if not np.allclose(dk(t, a, b), ref, rtol=1e-3, atol=1e-3):
            wrong.append(t)
        latency[t] = at(t)
        i = dk.index(t)
        aligned = dk.function_name(t) != dk.names[i]  # the kernel's aligned version serves t
        served[t] = res.kernels[i].key + (f"@align{dk.aligns[i]}" if aligned else "")
    if wrong:
        raise RuntimeError(f"DietCode kernels of {wl.name} wrong at T={wrong}")
    probe = min(max(lo, 64), hi)
    dispatch_s = time_callable(lambda: dk.index(probe), repeats=200, warmup_s=0.01)
    measured = [m for m in res.measurements if math.isfinite(m.seconds)]
    extra = {
        "kernels": [k.key for k in res.kernels],
        "sampled_shapes": res.shapes,
        "measured_kernels": len({m.kernel.key for m in res.measurements}),
        "measurements": len(res.measurements),
        "failed_measurements": len(res.measurements) - len(measured),
        "k_occupancy": res.model.k,
        "tree_leaves": res.dispatcher.n_leaves,
        "votes_distinct": len(set(res.compression.votes)) if res.compression else None,
        "predicted_dispatch_loss": res.compression.loss if res.compression else None,
        "trees_tried": res.compression.tried if res.compression else [],
        "search": cfg.dietcode_search,
        "features": cfg.dietcode_features,
        "dispatch_costs": cfg.dispatch_costs,
        "dispatcher_c": res.dispatcher.to_c_source(f"{wl.name}_dispatch"),
        "dispatch_call_seconds": dispatch_s,
        "predicted": {t: res.predicted[t] for t in latency},
        "search_seconds": res.tuning_seconds,
        "b_panel": wl.b_panel,
        "verification": res.verification,
        "versions": res.versions,
    }
    return ArmResult(wl.name, arm, secs, latency, served, extra), at
