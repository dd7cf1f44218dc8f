"""The one tuning loop every tuner shares (AutoTVM's ``Tuner.tune``), over candidates of any kind."""

from __future__ import annotations

import abc
import dataclasses
import logging
import math
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import target as _target
from ..measure import MeasureBatch, MeasureInput, MeasureOption, MeasureResult
from ..options import Configurable
from ..records import CONFIRM, as_records
from ..task import TuningTask

__all__ = ["Tuner", "Callback", "TrialLog", "RoundLog", "RandomStreams", "VisitedKeys", "model_seed"]

#: what ``Tuner.tune`` calls after every batch, ``f(tuner, inputs, results)``; defined beside the tuner it receives
#: (``tuners.callback`` holds the built-in ones) so the two modules do not import each other
Callback = Callable[["Tuner", Sequence[MeasureInput], Sequence[MeasureResult]], None]

logger = logging.getLogger("adatune.tuner")

STREAMS = ("plan", "explore", "model", "search", "agent", "sampler")


class RandomStreams:
    """Independent random generators per component (``plan``, ``explore``, ``model``, ``search``, ``agent``,
    ``sampler``), spawned from one seed, so every scheme of one seed measures the same initial plan."""

    def __init__(self, seed: int | None):
        children = np.random.SeedSequence(seed).spawn(len(STREAMS))
        self._gens = {name: np.random.default_rng(child) for name, child in zip(STREAMS, children)}
        self.seeds = {name: int(child.generate_state(1)[0]) for name, child in zip(STREAMS, children)}

    def __getattr__(self, name: str) -> np.random.Generator:
        try:
            return self.__dict__["_gens"][name]
        except KeyError:
            raise AttributeError(f"no random stream {name!r}: streams are {', '.join(STREAMS)}") from None


def model_seed(seed: int | None) -> int:
    """The cost model's seed for a tuner of ``seed``: its ``model`` stream's (one derivation for every tuner)."""
    return RandomStreams(seed).seeds["model"]


class VisitedKeys(set):
    """Keys of measured candidates. ``x in visited`` takes a candidate, a key or a knob config index; iterating
    gives knob config indices as ints, as AutoTVM's ``tuner.visited`` does (other kinds' keys as text).
    Set operations (``visited | taken``) work on the stored text keys."""

    def __contains__(self, item: object) -> bool:
        return super().__contains__(str(getattr(item, "key", item)))

    def __iter__(self) -> Iterator[Any]:
        for key in super().__iter__():
            yield int(key) if key.isdigit() else key


@dataclass
class TrialLog:
    """One measured trial: what was measured, how fast, and the tuner's clock when its result was known."""

    trial: int
    key: str
    flops: float
    best_flops: float
    clock: float
    error_no: int

    @property
    def index(self) -> int:
        """The knob config index (knob candidates' keys are their indices)."""
        return int(self.key) if self.key.lstrip("-").isdigit() else -1


@dataclass
class RoundLog:
    """One batch: time spent choosing it (search) and measuring it (build + run)."""

    n: int
    search_time: float
    measure_time: float


class Tuner(Configurable, abc.ABC):
    """Chooses candidates to measure; subclasses implement ``next_batch`` and ``learn``. ``update(inputs, results)``
    records what was measured (visited keys, best, trial log), then calls ``learn``; the tuning loop calls it for
    every batch, and custom loops may call it directly."""

    def __init__(self, task: TuningTask, seed: int | None = None):
        if task.space.size == 0:  # otherwise tune() would end at once and look like a run that found nothing
            raise ValueError(
                f"{task} has an empty search space: no config passes its template's filters for these arguments"
            )
        self.task = task
        self.space = task.space
        self.seed = seed
        self.streams = RandomStreams(seed)
        self.rng = self.streams.plan
        self.visited: VisitedKeys = VisitedKeys()
        self.best_config: Any = None
        self.best_flops = 0.0
        self.best_result: MeasureResult | None = None
        self.best_iter = 0
        self.trials: list[TrialLog] = []
        self.rounds: list[RoundLog] = []
        self.clock = 0.0  # search + measurement seconds (recorded seconds when replaying)
        self._measured: dict[str, tuple[float, Any]] = {}  # key -> (cost, candidate) of valid results, for confirm
        self._stamps: list[float] | None = None

    # -- what a strategy provides -----------------------------------------------------------------
    @abc.abstractmethod
    def next_batch(self, batch_size: int) -> list[Any]:
        """Up to ``batch_size`` candidates never measured before."""

    def learn(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        """Learn from measured candidates (tuning results and loaded history alike). Default: nothing."""

    def has_next(self) -> bool:
        return len(self.visited) < self.space.size

    # -- shared machinery -------------------------------------------------------------------------
    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        """Record measured candidates as visited (and the best so far), then ``learn`` from them."""
        stamps = self._stamps or [self.clock] * len(inputs)
        for inp, res, stamp in zip(inputs, results, stamps):
            self.visited.add(str(inp.config.key))
            flops = res.flops(self.task.flop)
            if res.ok:
                self._measured[str(inp.config.key)] = (res.cost, inp.config)
            if flops > self.best_flops:
                self.best_flops, self.best_config, self.best_result = flops, inp.config, res
                self.best_iter = len(self.trials)
            self.trials.append(
                TrialLog(len(self.trials), str(inp.config.key), flops, self.best_flops, stamp, int(res.error_no))
            )
        self.learn(inputs, results)

    def load_history(self, records: Iterable[Any], min_seed_records: int = 1) -> int:
        """Feed earlier records of this task and target (a killed run's log, records, ``(inp, res)`` pairs)
        so nothing is measured again. Fewer than ``min_seed_records`` matching records are ignored.
        Returns how many records were taken. ``confirm``'s re-timings are not trials and are skipped."""
        inputs, results = [], []
        taken: set[str] = set()
        tgt = _target.to_json(self.task.target)
        for r in as_records(records):
            if r.workload_key != self.task.workload_key or not _target.same_target(r.target, tgt):
                continue
            if r.key in self.visited or r.key in taken or CONFIRM in r.result.extra:
                continue
            taken.add(r.key)
            try:
                cand = self.task.candidate_from_json(r.config)
            except (ValueError, KeyError, IndexError) as err:
                logger.warning("record %s does not fit the task's current space (%s); skipped", r.key, err)
                continue
            inputs.append(MeasureInput(self.task, cand))
            results.append(r.result)
        if len(inputs) < min_seed_records:
            return 0
        if inputs:
            self.update(inputs, results)
        return len(inputs)

    def confirm(
        self, measure_option: MeasureOption, top: int = 4, rounds: int = 3, callbacks: Sequence[Callback] = ()
    ) -> Any:
        """Re-time the ``top`` fastest candidates measured so far in turns; the fastest by the median becomes the best,
        which it returns. The best of many single noisy readings is biased low (the winner's curse). Each of
        ``rounds`` runs every candidate once, the order reversed every other round, so a change of the host's state
        hits all alike. Results go to ``callbacks`` marked ``extra["confirm"]`` (``best_records`` and
        ``apply_history_best`` pick by them); they are not trials, but the tuner's clock advances by their time."""
        if top < 1 or rounds < 1:
            raise ValueError(f"confirm needs top >= 1 and rounds >= 1, got top={top}, rounds={rounds}")
        leaders = sorted(self._measured.values(), key=lambda cc: cc[0])[:top]
        if len(leaders) < 2:  # nothing to choose between
            return self.best_config
        inputs = [MeasureInput(self.task, cand) for _, cand in leaders]
        t0 = time.perf_counter()
        builds = measure_option.builder.build(inputs, measure_option.runner.device_limits(self.task.target))
        session = time.time()
        readings: list[list[MeasureResult]] = [[] for _ in inputs]
        self.clock += time.perf_counter() - t0
        for r in range(rounds):
            order = list(range(len(inputs)))[:: 1 if r % 2 == 0 else -1]
            t0 = time.perf_counter()
            results = measure_option.runner.run([inputs[i] for i in order], [builds[i] for i in order])
            self.clock += time.perf_counter() - t0
            marked = [
                dataclasses.replace(res, extra={**res.extra, CONFIRM: {"session": session, "round": r}})
                for res in results
            ]
            for i, res in zip(order, marked):
                if res.ok:
                    readings[i].append(res)
            for cb in callbacks:
                cb(self, [inputs[i] for i in order], marked)
        medians = [statistics.median(res.cost for res in got) if got else math.inf for got in readings]
        k = int(np.argmin(medians))
        if not math.isfinite(medians[k]):
            logger.warning("confirm: no candidate ran in any round; the best is unchanged")
            return self.best_config
        self.best_config, self.best_flops = inputs[k].config, self.task.flop / medians[k]
        self.best_result = min(readings[k], key=lambda res: abs(res.cost - medians[k]))
        logger.info(
            "confirm: %d candidates re-timed %d times; best %s at %.4g ms (median)",
            len(inputs),
            rounds,
            inputs[k].config.key,
            medians[k] * 1e3,
        )
        return self.best_config

    def tune(
        self,
        n_trial: int,
        measure_option: MeasureOption,
        early_stopping: int | None = None,
        callbacks: Sequence[Callback] = (),
        batch_size: int = 8,
        time_budget: float | None = None,
        target_flops: float | None = None,
    ) -> None:
        """Measure up to ``n_trial`` new candidates in batches, calling ``callbacks`` after each; stop early when the
        space is exhausted, after ``early_stopping`` trials without a better candidate, after ``time_budget`` seconds
        of the tuner's clock, or once a candidate reaches ``target_flops``."""
        if n_trial < 0:
            raise ValueError(f"n_trial must be non-negative, got {n_trial}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if time_budget is not None and time_budget <= 0:
            raise ValueError(f"time_budget must be positive, got {time_budget}")
        done, start_trials, start_clock = 0, len(self.trials), self.clock
        while done < n_trial and self.has_next():
            if time_budget is not None and self.clock - start_clock >= time_budget:
                break
            if target_flops is not None and self.best_flops >= target_flops:
                break
            t0 = time.perf_counter()
            configs = [c for c in self.next_batch(min(batch_size, n_trial - done)) if c.key not in self.visited]
            search = time.perf_counter() - t0
            if not configs:
                break
            inputs = [MeasureInput(self.task, c) for c in configs]
            batch: MeasureBatch = measure_option.measure(inputs)
            self._stamps = [self.clock + search + d for d in batch.done_at]
            self.clock += search + batch.seconds
            t1 = time.perf_counter()
            try:
                self.update(inputs, batch.results)
            finally:
                self._stamps = None
            learn = time.perf_counter() - t1
            self.clock += learn
            self.rounds.append(RoundLog(len(inputs), search + learn, batch.seconds))
            done += len(inputs)
            for cb in callbacks:
                cb(self, inputs, batch.results)
            for inp, res in zip(inputs, batch.results):
                if not res.ok:
                    logger.debug(
                        "candidate %s failed: %s %s",
                        inp.config.key,
                        res.error_no.name,
                        res.error_msg.splitlines()[0] if res.error_msg else "",
                    )
            if early_stopping is not None and len(self.trials) - max(self.best_iter, start_trials) >= early_stopping:
                logger.info("early stopping: no improvement in %d trials", early_stopping)
                break
