"""One DietCode tuning run for a whole range of T.

Rounds on the shared tuning loop (``Tuner.tune``): sample shapes; measure a batch of micro-kernels (each compiled
once, symbolic in T, timed at every sampled T); fit the joint cost model; propose the next batch (``_search``) plus
the exploration policy's random share. At the end every T votes for its best kernel and the smallest decision tree
within ``dispatch_tolerance`` compresses the votes (``_select``). Votes read measured seconds where timed (the model
never overrules a timing), and ``dispatch_costs`` elsewhere; ``verify=True`` re-times the deployed kernels at every T.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm

from .. import target as _target
from ..measure import LocalBuilder, LocalRunner, MeasureBatch, MeasureInput, MeasureOption, MeasureResult
from ..measure import measure_option as adatune_measure_option
from ..options import Option
from ..search.optimizers import ExplorationPolicy
from ..tuners import Tuner
from ..tuners.callback import Callback, log_to_file
from ._cost import MicroKernelCostModel, sample_shapes
from ._dispatch import ShapeDispatcher
from ._program import FEATURE_KINDS
from ._range_task import RangeTask, seconds_at
from ._schedule import aligned_versions
from ._search import SEARCHES, propose_kernels
from ._select import Compression, calibrated_costs, compress_votes, kept_versions, verified_labels
from ._space import MicroKernel
from ._task import microkernel_space
from ._workloads import DynamicWorkload

__all__ = ["DISPATCH_COSTS", "Measurement", "DietCodeResult", "DietCodeTuner"]

#: what each T votes on when the dispatcher is chosen (see the module docstring)
DISPATCH_COSTS = ("measured", "calibrated", "predicted")


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
    predicted: dict[int, float] = field(default_factory=dict)  # T -> seconds its chosen kernel was voted on
    # (measured at a sampled T unless dispatch_costs="predicted", else the model's, calibrated or not)
    compression: Compression | None = None  # the votes over all kernels and the trees tried on them
    verification: dict[str, Any] = field(default_factory=dict)  # what ``verify`` timed and changed (empty: off)
    versions: dict[str, Any] = field(default_factory=dict)  # each aligned version's timing against its kernel

    def kernel_for(self, t: int) -> MicroKernel:
        return self.kernels[self.dispatcher.index(t)]

    def build(self, directory: str | None = None) -> Any:
        from ._kernel import DynamicKernel

        return DynamicKernel(self.workload, self.kernels, self.dispatcher, self.target, directory)


#: ``DietCodeTuner``'s rounds when none are given: a CUDA space is several times an x86 one (split-K, shared-memory
#: layouts) and its kernels cost far less to time, so it gets more rounds
CPU_ROUNDS = 3
CUDA_ROUNDS = 12

#: at most how many aligned T a kernel and its aligned version are both timed at before the version is deployed
VERSION_CHECK_TS = 3


class DietCodeTuner(Tuner):
    """Tune one dynamic workload for its whole T range (see the module docstring).

    Each round proposes ``kernels_per_round`` kernels by ``search`` on the model, with a share ``explore`` of random
    ones (all random before the first fit). ``max_kernels=None`` deploys as many as ``dispatch_tolerance`` needs. A
    ``log_to_file`` callback gets one record per kernel, each T's timings in ``extra["points"]`` (``log_file=`` is its
    deprecated spelling)."""

    OPTIONS = (
        Option.declare("n_shapes", int, "T values sampled over the range", minimum=1),
        Option.declare(
            "rounds",
            int,
            "proposal rounds, the model refit after each (none: CPU_ROUNDS on x86, CUDA_ROUNDS on CUDA)",
            minimum=1,
        ),
        Option.declare("kernels_per_round", int, "micro-kernels measured per round", minimum=1),
        Option.declare("max_kernels", int, "most micro-kernels deployed (none: as the tolerance needs)", minimum=1),
        Option.declare("explore", float, "share of each round measured at random", minimum=0.0, maximum=1.0),
        Option.declare("search", str, "how the model's picks are found", choices=SEARCHES),
        Option.declare("features", str, "f_MK's inputs: the program's or 12 tile features", choices=FEATURE_KINDS),
        Option.declare(
            "dispatch_tolerance",
            float,
            "mean predicted slowdown the dispatcher may cost to deploy fewer kernels",
            minimum=0.0,
        ),
        Option.declare(
            "dispatch_costs",
            str,
            "what the T vote on: measured seconds where timed (model elsewhere), the same with the model anchored to "
            "each kernel's timings at the neighbouring T (calibrated), or the model everywhere",
            choices=DISPATCH_COSTS,
        ),
        Option.declare(
            "split_k",
            tuple,
            "CUDA: the parts a kernel may split its reduction into (none: DEFAULT_SPLIT_K where it is fixed)",
            item_type=int,
        ),
        Option.declare(
            "smem",
            tuple,
            "CUDA bmm_nt: the layouts of B's shared tile the space offers (SMEM_LAYOUTS; none: DEFAULT_SMEM)",
            item_type=str,
        ),
        Option.declare(
            "verify",
            bool,
            "time the deployed kernels at every T of the range through the runner and give each T the fastest of them",
        ),
        Option.declare(
            "check_versions",
            bool,
            "time each deployed kernel's aligned version against the kernel at the aligned T it serves and deploy the "
            "version only where it ran faster",
        ),
        Option.declare("population", int, "evolutionary search population", minimum=2),
        Option.declare("generations", int, "evolutionary search generations per round", minimum=0),
    )

    def __init__(
        self,
        workload: DynamicWorkload,
        target: _target.TargetLike | None = None,
        n_shapes: int = 8,
        rounds: int | None = None,
        kernels_per_round: int = 8,
        max_kernels: int | None = None,
        explore: float = 0.25,
        seed: int = 0,
        log_file: str | None = None,
        number: int = 1,
        repeat: int = 3,
        min_repeat_ms: int = 10,
        search: str = "evolutionary",
        features: str = "program",
        dispatch_tolerance: float = 0.01,
        population: int = 128,
        generations: int = 4,
        dispatch_costs: str = "calibrated",
        split_k: tuple[int, ...] | None = None,
        smem: tuple[str, ...] | None = None,
        verify: bool = False,
        check_versions: bool = True,
    ):
        self.workload = workload
        self.target = _target.create(target) if target is not None else _target.host()
        self.shapes = sample_shapes(workload.t_range, n_shapes, np.random.default_rng(seed))
        space = microkernel_space(workload, self.target, split_k, smem=smem)  # None: the space's defaults
        task = RangeTask(workload, self.shapes, self.target, space)
        super().__init__(task, seed)
        if rounds is None:
            rounds = CUDA_ROUNDS if self.target.kind.name == "cuda" else CPU_ROUNDS
        self.n_rounds, self.per_round, self.max_kernels = rounds, kernels_per_round, max_kernels
        self.kernels: list[MicroKernel] = task.space.kernels
        self.micro_space = task.space  # what ``verify``'s task over the whole range measures in
        self.exploration = ExplorationPolicy(eps_greedy=explore)
        if log_file is not None:
            warnings.warn(
                "DietCodeTuner(log_file=...) is deprecated: pass callbacks=[adatune.callback.log_to_file(path)] "
                "to tune()",
                DeprecationWarning,
                stacklevel=2,
            )
        self.log_file = log_file
        self.timing = {"number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms}
        self.model = MicroKernelCostModel(task.space, workload, seed, features)
        self.search, self.population, self.generations = search, population, generations
        self.dispatch_tolerance, self.dispatch_costs = dispatch_tolerance, dispatch_costs
        self.verify, self.check_versions = verify, check_versions
        self.measurements: list[Measurement] = []
        self._result: DietCodeResult | None = None
        self.plan: list[MicroKernel] = []
        self._fitted = False

    # -- the strategy: rounds of model picks plus exploration -------------------------------------------
    def next_batch(self, batch_size: int) -> list[MicroKernel]:
        if not self.plan:
            self._fitted = self._fit()
            explore = self.streams.explore
            self.plan = self.exploration.plan(self.space, explore, self.per_round, self.visited, self._model_picks)
        batch, self.plan = self.plan[:batch_size], self.plan[batch_size:]
        return batch

    def _model_picks(self, n: int) -> list[MicroKernel]:
        """The model's picks (``_search.propose_kernels``), seeded by the measured kernels best on average."""
        if not self._fitted:
            return []
        return propose_kernels(
            self.model,
            self.model.space,
            self.shapes,
            self._measured_best_first(),
            n,
            self.visited,
            self.streams.plan,
            self.search,
            self.population,
            self.generations,
        )

    def _measured_best_first(self) -> list[MicroKernel]:
        """Correct kernels by their geometric-mean measured seconds per FLOP over the sampled shapes."""
        per: dict[str, list[float]] = {}
        kernel: dict[str, MicroKernel] = {}
        for m in self._valid():
            per.setdefault(m.kernel.key, []).append(float(np.log(m.seconds / self.workload.flop(m.t))))
            kernel[m.kernel.key] = m.kernel
        return [kernel[key] for key in sorted(per, key=lambda key: float(np.mean(per[key])))]

    def learn(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        for inp, res in zip(inputs, results):
            seconds = seconds_at(res)
            why = "" if seconds else f"{res.error_no.name}: {res.error_msg.splitlines()[0] if res.error_msg else ''}"
            for t in self.shapes:
                self.measurements.append(Measurement(inp.config, t, seconds.get(t, float("inf")), why))

    def _valid(self) -> list[Measurement]:
        return [m for m in self.measurements if np.isfinite(m.seconds)]

    def _fit(self) -> bool:
        ok = self._valid()
        if ok:
            self.model.fit([m.kernel for m in ok], [m.t for m in ok], [m.seconds for m in ok])
        return bool(ok)

    # -- the one tuning loop, then the dispatcher -----------------------------------------------------
    def tune(
        self,
        n_trial: int | None = None,
        measure_option: MeasureOption | None = None,
        early_stopping: int | None = None,
        callbacks: Sequence[Callback] = (),
        batch_size: int | None = None,
        time_budget: float | None = None,
        target_flops: float | None = None,
    ) -> None:
        """``Tuner.tune`` over ``rounds * kernels_per_round`` kernels (or ``n_trial``), a round per batch, then the
        dispatcher; ``tuner.result()`` returns what it chose. ``callbacks`` see every measured batch, the
        aligned versions' and ``verify``'s timings too (``log_to_file`` keeps them all). Without a
        ``measure_option`` the kernels are built and timed here (``number``/``repeat``/``min_repeat_ms``)."""
        start = time.time()
        own = measure_option is None
        option = measure_option or adatune_measure_option(
            LocalBuilder(), LocalRunner(**self.timing, timeout=60, check_correctness=True)
        )
        every = [*callbacks, *([log_to_file(self.log_file)] if self.log_file else [])]
        try:
            super().tune(
                self.n_rounds * self.per_round if n_trial is None else n_trial,
                option,
                early_stopping,
                every,
                batch_size or self.per_round,
                time_budget,
                target_flops,
            )
            if not self._valid():
                raise RuntimeError(f"no micro-kernel of {self.workload} compiled and ran correctly")
            self._fit()
            result = self._finish(self.shapes, 0.0)
            if self.check_versions:
                result = self._versions_checked(result, option, every)
            if self.verify:
                result = self._verified(result, option, every)
        finally:
            if own:
                option.close()
        result.tuning_seconds = time.time() - start
        self._result = result

    def result(self) -> DietCodeResult:
        """What the last ``tune`` chose: the kernels, their dispatcher, the model and every measurement."""
        if self._result is None:
            raise RuntimeError("DietCodeTuner.result() needs a finished tune() first")
        return self._result

    def _measured_batch(
        self, option: MeasureOption, inputs: list[MeasureInput], callbacks: Sequence[Callback]
    ) -> MeasureBatch:
        """One batch outside the rounds (aligned versions, ``verify``), passed to ``callbacks`` like a round."""
        batch = option.measure(inputs)
        for cb in callbacks:
            cb(self, inputs, batch.results)
        return batch

    def _versions_checked(
        self, result: DietCodeResult, option: MeasureOption, callbacks: Sequence[Callback]
    ) -> DietCodeResult:
        """``check_versions``: each deployed kernel with an aligned version timed as itself and as that version at
        up to ``VERSION_CHECK_TS`` of the aligned T it serves (logged like the rounds); the dispatcher's ``aligned``
        keeps the versions that ran faster (``kept_versions``); one serving no T of the range is dropped untimed."""
        lo, hi = self.workload.t_range
        units = aligned_versions(self.workload, result.kernels)
        if not any(units):
            return result
        ts_of: dict[int, list[int]] = {}
        for i, u in enumerate(units):
            served = [t for t in range(lo, hi + 1) if u and t % u == 0 and result.dispatcher.index(t, False) == i]
            if served:
                picks = np.linspace(0, len(served) - 1, min(VERSION_CHECK_TS, len(served)))
                ts_of[i] = sorted({served[int(round(x))] for x in picks})
        inputs, rows = [], []
        for i, ts in ts_of.items():
            k = result.kernels[i]
            inputs.append(MeasureInput(RangeTask(self.workload, ts, self.target, self.micro_space), k))
            inputs.append(MeasureInput(RangeTask(self.workload, ts, self.target, self.micro_space, units[i]), k))
            rows.append(i)
        batch = self._measured_batch(option, inputs, callbacks)
        width = max((len(ts) for ts in ts_of.values()), default=1)
        kernel = np.full((len(units), width), np.inf)
        version = np.full((len(units), width), np.inf)
        for n, i in enumerate(rows):
            at_kernel, at_version = seconds_at(batch.results[2 * n]), seconds_at(batch.results[2 * n + 1])
            for j, t in enumerate(ts_of[i]):
                kernel[i, j], version[i, j] = at_kernel.get(t, np.inf), at_version.get(t, np.inf)
        kept, ratios = kept_versions(units, kernel, version)
        result.dispatcher = result.dispatcher.with_aligned(kept)
        result.versions = {
            "kernels": {
                k.key: {"align": u, "ts": ts_of.get(i, []), "ratio": None if np.isnan(r) else r, "kept": bool(kk)}
                for i, (k, u, r, kk) in enumerate(zip(result.kernels, units, ratios, kept))
                if u
            },
            "seconds": batch.build_seconds + batch.run_seconds,
        }
        return result

    def _verified(self, result: DietCodeResult, option: MeasureOption, callbacks: Sequence[Callback]) -> DietCodeResult:
        """``verify``: the deployed kernels timed at every T of the range (one ``RangeTask`` through the same builder
        and runner, logged like the rounds), each T given the fastest of them (``verified_labels``), the dispatcher
        fitted again on those choices. A kernel that fails here gives up every T to the kernels timed there."""
        lo, hi = self.workload.t_range
        ts = list(range(lo, hi + 1))
        task = RangeTask(self.workload, ts, self.target, self.micro_space)
        inputs = [MeasureInput(task, k) for k in result.kernels]
        batch = self._measured_batch(option, inputs, callbacks)
        timed = np.array([[seconds_at(res).get(t, np.inf) for t in ts] for res in batch.results])
        row = {k.key: i for i, k in enumerate(result.kernels)}
        before = [row[result.kernel_for(t).key] for t in ts]
        aligns = aligned_versions(self.workload, result.kernels, result.dispatcher.aligned)
        aligned = np.array([[bool(u) and t % u == 0 for t in ts] for u in aligns])
        labels, changed = verified_labels(before, timed, aligned)
        dispatcher = ShapeDispatcher.fit(ts, [result.kernels[i].key for i in labels], (lo, hi),
                                         random_state=int(self.seed or 0))  # fmt: skip
        if result.dispatcher.aligned is not None:  # the versions' timing stands for the kernels kept
            unit = {k.key: u for k, u in zip(result.kernels, aligns)}
            dispatcher = dispatcher.with_aligned([unit[label] for label in dispatcher.labels])
        kernels = [next(k for k in result.kernels if k.key == label) for label in dispatcher.labels]
        predicted = dict(result.predicted)
        for j, (t, i) in enumerate(zip(ts, labels)):
            if np.isfinite(timed[i, j]) and not aligned[i, j]:
                predicted[t] = float(timed[i, j])
        result.kernels, result.dispatcher, result.predicted = kernels, dispatcher, predicted
        result.verification = {
            "t_changed": changed,
            "kernels_timed": len(inputs),
            "kernels_kept": len(kernels),
            "seconds": batch.build_seconds + batch.run_seconds,
        }
        return result

    def _measured_matrix(self, kernels: Sequence[MicroKernel], ts: Sequence[int]) -> np.ndarray:
        """Median measured seconds of each kernel at each T (NaN where it was not timed)."""
        row = {k.key: i for i, k in enumerate(kernels)}
        col = {t: j for j, t in enumerate(ts)}
        cells: dict[tuple[int, int], list[float]] = {}
        for m in self._valid():
            if m.kernel.key in row and m.t in col:
                cells.setdefault((row[m.kernel.key], col[m.t]), []).append(m.seconds)
        out = np.full((len(kernels), len(ts)), np.nan)
        for (i, j), secs in cells.items():
            out[i, j] = float(np.median(secs))
        return out

    def _finish(self, shapes: list[int], seconds: float) -> DietCodeResult:
        valid = {m.kernel.key: m.kernel for m in self._valid()}
        failed = {m.kernel.key for m in self.measurements if not np.isfinite(m.seconds)}
        candidates = [k for key, k in valid.items() if key not in failed]  # wrong anywhere: never deployed
        lo, hi = self.workload.t_range
        ts = list(range(lo, hi + 1))
        costs = self.model.predict(candidates, ts)
        if self.dispatch_costs == "measured":
            timed = self._measured_matrix(candidates, ts)
            costs = np.where(np.isfinite(timed), timed, costs)
        elif self.dispatch_costs == "calibrated":
            costs = calibrated_costs(costs, self._measured_matrix(candidates, ts), ts)
        comp = compress_votes(costs, ts, self.dispatch_tolerance, self.max_kernels, int(self.seed or 0))
        votes = [candidates[i].key for i in comp.labels]
        dispatcher = ShapeDispatcher.fit(ts, votes, (lo, hi), random_state=int(self.seed or 0))
        kernels = [next(k for k in candidates if k.key == label) for label in dispatcher.labels]
        predicted = {t: float(costs[i, j]) for j, (t, i) in enumerate(zip(ts, comp.labels))}
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
            comp,
        )
