"""One DietCode tuning run for a whole range of T.

Rounds: sample shapes over the range; measure a batch of micro-kernels on all sampled shapes (each kernel is
compiled once, symbolic in T, and run at every sampled T after a numpy check); fit the joint cost model;
propose the next batch from the model (each sampled shape's predicted best unmeasured kernel, plus random
exploration). At the end the model predicts every measured kernel at every T of the range, a greedy cover
picks a few kernels, each T votes for its predicted best among them and a decision tree learns the votes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm

from .. import target as _target
from ..dispatch._dietcode import ShapeDispatcher
from ..measure import MeasureErrorNo, MeasureInput, MeasureResult
from ..records import save_to_file
from ..target import one_blas_thread
from ._cost import MicroKernelCostModel, sample_shapes, select_kernels
from ._schedule import schedule_microkernel
from ._space import MicroKernel, MicroKernelSpace, device_of
from ._task import MicroKernelTask, static_k
from ._workloads import DynamicWorkload

__all__ = ["Measurement", "DietCodeResult", "DietCodeTuner", "measure_kernel"]


@dataclass(frozen=True)
class Measurement:
    """Seconds of one micro-kernel at one T (``error`` says why there is no timing)."""

    kernel: MicroKernel
    t: int
    seconds: float
    error: str = ""


@dataclass
class DietCodeResult:
    """What a tuning run leaves: the chosen kernels, their dispatcher, the model and every measurement."""

    workload: DynamicWorkload
    target: tvm.target.Target
    kernels: list[MicroKernel]
    dispatcher: ShapeDispatcher
    model: MicroKernelCostModel
    measurements: list[Measurement]
    shapes: list[int]
    tuning_seconds: float
    predicted: dict[int, float] = field(default_factory=dict)  # T -> predicted seconds of its chosen kernel

    def kernel_for(self, t: int) -> MicroKernel:
        return self.kernels[self.dispatcher.index(t)]

    @property
    def choice(self) -> tuple[list[MicroKernel], ShapeDispatcher]:
        """(kernels, dispatcher): what a program on several DietCode GEMMs (``BertEncoder``) takes per GEMM."""
        return self.kernels, self.dispatcher

    def build(self, directory: str | None = None) -> Any:
        from ._kernel import DynamicKernel

        return DynamicKernel(self.workload, self.kernels, self.dispatcher, self.target, directory)


def _device(target: tvm.target.Target) -> Any:
    dev = device_of(target)
    if not dev.exist:
        raise RuntimeError(f"no {target.kind.name} device on this machine to measure micro-kernels on")
    return dev


Case = tuple[np.ndarray, np.ndarray, np.ndarray]  # A, B and numpy's A @ B at one T


def make_cases(wl: DynamicWorkload, ts: list[int], rng: np.random.Generator) -> dict[int, Case]:
    """Random inputs and numpy's reference output at every T of ``ts``, computed once for a whole tuning run
    (on one BLAS thread: its workers would otherwise spin on the cores the kernels are timed on)."""
    cases = {}
    for t in ts:
        a, b = wl.random_inputs(t, rng)
        with one_blas_thread():
            cases[t] = (a, b, wl.reference(a, b))
    return cases


def measure_kernel(
    wl: DynamicWorkload,
    mk: MicroKernel,
    ts: list[int],
    target: tvm.target.Target,
    rng: np.random.Generator,
    number: int = 1,
    repeat: int = 3,
    min_repeat_ms: int = 10,
    cases: dict[int, Case] | None = None,
) -> tuple[list[Measurement], list[MeasureResult]]:
    """Compile ``mk`` once and time it at every T of ``ts`` (each run checked against numpy first); ``cases``
    from ``make_cases`` reuses inputs and references across kernels, else they are drawn from ``rng``."""
    dev = _device(target)
    t0 = time.time()
    try:
        with target:
            lib = tvm.compile(schedule_microkernel(wl, mk).mod, target=target)
    except Exception as err:  # noqa: BLE001 - a kernel that does not compile is a measured failure
        msg = f"{type(err).__name__}: {str(err).splitlines()[-1] if str(err) else ''}"
        res = MeasureResult((), MeasureErrorNo.COMPILE_HOST, time.time() - t0, time.time(), msg)
        return [Measurement(mk, t, float("inf"), msg) for t in ts], [res] * len(ts)
    build_time = time.time() - t0
    out, results = [], []
    for t in ts:
        start = time.time()
        a, b, ref = cases[t] if cases is not None and t in cases else make_cases(wl, [t], rng)[t]
        args = [
            tvm.runtime.tensor(a, dev),
            tvm.runtime.tensor(b, dev),
            tvm.runtime.tensor(np.zeros(ref.shape, wl.dtype), dev),
        ]
        lib["main"](*args, t)
        if not np.allclose(args[2].numpy(), ref, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(ref).max()))):
            msg = f"wrong answer at T={t}"
            out.append(Measurement(mk, t, float("inf"), msg))
            results.append(
                MeasureResult(
                    (), MeasureErrorNo.WRONG_ANSWER, time.time() - start, time.time(), msg, build_time=build_time
                )
            )
            continue
        # a fresh evaluator per T: TVM's keeps the number of runs it grew to reach min_repeat_ms, so one reused
        # from a small T ran a large T thousands of times per repeat (seconds per measurement)
        evaluator = lib.mod.time_evaluator("main", dev, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)
        costs = tuple(float(c) for c in evaluator(*args, t).results)
        out.append(Measurement(mk, t, float(np.median(costs))))
        results.append(
            MeasureResult(
                costs,
                MeasureErrorNo.NO_ERROR,
                time.time() - start + build_time / len(ts),
                time.time(),
                build_time=build_time,
                run_time=time.time() - start,
                runs=number * repeat,
            )
        )
    return out, results


class DietCodeTuner:
    """Tune one dynamic workload for its whole T range (see the module docstring)."""

    def __init__(
        self,
        workload: DynamicWorkload,
        target: _target.TargetLike | None = None,
        n_shapes: int = 8,
        rounds: int = 3,
        kernels_per_round: int = 8,
        max_kernels: int = 4,
        explore: float = 0.25,
        seed: int = 0,
        log_file: str | None = None,
        number: int = 1,
        repeat: int = 3,
        min_repeat_ms: int = 10,
    ):
        if rounds < 1 or kernels_per_round < 1 or max_kernels < 1:
            raise ValueError("rounds, kernels_per_round and max_kernels must be at least 1")
        self.workload = workload
        self.target = _target.create(target) if target is not None else _target.host()
        self.space = MicroKernelSpace(self.target, workload.dtype, static_k(workload))
        self.n_shapes, self.rounds, self.per_round = n_shapes, rounds, kernels_per_round
        self.max_kernels, self.explore = max_kernels, explore
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.log_file = log_file
        self.timing = {"number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms}
        self.measurements: list[Measurement] = []
        self.model = MicroKernelCostModel(self.space, workload, seed)
        self._tasks: dict[int, MicroKernelTask] = {}

    def _log(self, measured: list[Measurement], results: list[MeasureResult]) -> None:
        if not self.log_file:
            return
        pairs = []
        for m, res in zip(measured, results):
            task = self._tasks.setdefault(m.t, MicroKernelTask(self.workload, m.t, self.target, self.space))
            pairs.append((MeasureInput(task, m.kernel), res))
        save_to_file(self.log_file, pairs)

    def _valid(self) -> list[Measurement]:
        return [m for m in self.measurements if np.isfinite(m.seconds)]

    def _fit(self) -> bool:
        ok = self._valid()
        if not ok:
            return False
        self.model.fit([m.kernel for m in ok], [m.t for m in ok], [m.seconds for m in ok])
        return True

    def _propose(self, shapes: list[int], measured: set[str]) -> list[MicroKernel]:
        pool = [k for k in self.space.kernels if k.key not in measured]
        if not pool:
            return []
        n_random = max(1, int(round(self.explore * self.per_round)))
        picks: dict[str, MicroKernel] = {}
        if self._valid():
            pred = self.model.predict(pool, shapes) / np.asarray([self.workload.flop(t) for t in shapes])
            for col in range(pred.shape[1]):  # each shape's predicted best first, then the best on average
                for row in np.argsort(pred[:, col])[:2]:
                    picks.setdefault(pool[int(row)].key, pool[int(row)])
            for row in np.argsort(np.log(pred).mean(axis=1)):
                picks.setdefault(pool[int(row)].key, pool[int(row)])
                if len(picks) >= self.per_round:
                    break
        chosen = list(picks.values())[: self.per_round - n_random] if picks else []
        rest = self.space.random_candidates(
            self.rng, self.per_round - len(chosen), exclude=measured | {k.key for k in chosen}
        )
        return chosen + rest

    def tune(self, callback: Callable[[int, list[Measurement]], None] | None = None) -> DietCodeResult:
        """Run all rounds; ``callback(round, measurements)`` after each (for progress bars)."""
        start = time.time()
        shapes = sample_shapes(self.workload.t_range, self.n_shapes, self.rng)
        measured: set[str] = set()
        cases = make_cases(self.workload, shapes, self.rng)  # the same checks for every kernel, computed once
        for rnd in range(self.rounds):
            batch = self._propose(shapes, measured)
            if not batch:
                break
            for mk in batch:
                got, results = measure_kernel(
                    self.workload, mk, shapes, self.target, self.rng, cases=cases, **self.timing
                )
                measured.add(mk.key)
                self.measurements.extend(got)
                self._log(got, results)
            self._fit()
            if callback is not None:
                callback(rnd, self.measurements)
        if not self._valid():
            raise RuntimeError(f"no micro-kernel of {self.workload} compiled and ran correctly")
        return self._finish(shapes, time.time() - start)

    def _finish(self, shapes: list[int], seconds: float) -> DietCodeResult:
        valid = {m.kernel.key: m.kernel for m in self._valid()}
        failed = {m.kernel.key for m in self.measurements if not np.isfinite(m.seconds)}
        candidates = [k for key, k in valid.items() if key not in failed]  # wrong anywhere: never deployed
        lo, hi = self.workload.t_range
        ts = list(range(lo, hi + 1))
        pred = self.model.predict(candidates, ts)
        chosen = [candidates[i] for i in select_kernels(pred, self.max_kernels)]
        sub = self.model.predict(chosen, ts)
        votes = [chosen[int(i)].key for i in np.argmin(sub, axis=0)]
        dispatcher = ShapeDispatcher.fit(ts, votes, (lo, hi), random_state=self.seed)
        kernels = [next(k for k in chosen if k.key == label) for label in dispatcher.labels]
        predicted = {t: float(sub[:, i].min()) for i, t in enumerate(ts)}
        return DietCodeResult(
            self.workload,
            self.target,
            kernels,
            dispatcher,
            self.model,
            list(self.measurements),
            shapes,
            seconds,
            predicted,
        )
