"""The one tuning loop every tuner shares (AutoTVM's ``Tuner.tune``)."""
from __future__ import annotations

import abc
import logging
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from .. import target as _target
from ..callback import Callback
from ..measure import MeasureInput, MeasureOption, MeasureResult
from ..records import Record
from ..space import ConfigEntity
from ..task import Task

__all__ = ["Tuner", "TrialLog", "RoundLog"]

logger = logging.getLogger("adatune.tuner")


@dataclass
class TrialLog:
    """One measured trial: what was measured, how fast, and the tuner's clock when it was known."""

    trial: int
    index: int
    flops: float
    best_flops: float
    clock: float
    error_no: int


@dataclass
class RoundLog:
    """One batch: time spent choosing it (search) and measuring it."""

    n: int
    search_time: float
    measure_time: float


class Tuner(abc.ABC):
    """Chooses configs to measure. Subclasses implement ``next_batch`` and ``update``."""

    def __init__(self, task: Task, seed: int | None = None):
        self.task = task
        self.space = task.config_space
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.visited: set[int] = set()
        self.best_config: ConfigEntity | None = None
        self.best_flops = 0.0
        self.best_result: MeasureResult | None = None
        self.best_iter = 0
        self.trials: list[TrialLog] = []
        self.rounds: list[RoundLog] = []
        self.clock = 0.0  # search + measurement seconds (recorded seconds when replaying)

    # -- the two methods a strategy provides ------------------------------------------------------
    @abc.abstractmethod
    def next_batch(self, batch_size: int) -> list[ConfigEntity]:
        """Up to ``batch_size`` configs never measured before."""

    @abc.abstractmethod
    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        """Learn from measured candidates (called for tuning results and loaded history alike)."""

    def has_next(self) -> bool:
        return len(self.visited) < len(self.space)

    # -- shared machinery -------------------------------------------------------------------------
    def _record(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        for inp, res in zip(inputs, results):
            self.visited.add(inp.config.index)
            flops = res.flops(self.task.flop)
            if flops > self.best_flops:
                self.best_flops, self.best_config, self.best_result = flops, inp.config, res
                self.best_iter = len(self.trials)
            self.trials.append(TrialLog(len(self.trials), inp.config.index, flops, self.best_flops, self.clock,
                                        int(res.error_no)))

    def load_history(self, records: Iterable[Record]) -> int:
        """Feed earlier records of this task and target (a killed run's log) so nothing is measured again.
        Returns how many records were taken."""
        inputs, results = [], []
        tgt = _target.to_json(self.task.target)
        for r in records:
            if r.workload_key != self.task.workload_key or not _target.same_target(r.target, tgt):
                continue
            if not 0 <= r.config_index < len(self.space) or r.config_index in self.visited:
                continue
            cfg = self.space.get(r.config_index)
            if r.config_entity and cfg.to_json()["entity"] != r.config_entity:
                logger.warning("record %d does not match the current template's knobs; skipped", r.config_index)
                continue
            inputs.append(MeasureInput(self.task, cfg))
            results.append(r.result)
        if inputs:
            self._record(inputs, results)
            self.update(inputs, results)
        return len(inputs)

    def tune(self, n_trial: int, measure_option: MeasureOption, early_stopping: int | None = None,
             callbacks: Sequence[Callback] = (), batch_size: int = 8, time_budget: float | None = None) -> None:
        """Measure up to ``n_trial`` new configs, in batches, calling ``callbacks`` after each batch.

        Stops early when the space is exhausted, with ``early_stopping`` when that many trials have
        passed without a better config, or with ``time_budget`` once this call has spent that many
        seconds of the tuner's clock (search plus measurement).
        """
        if n_trial < 0:
            raise ValueError(f"n_trial must be non-negative, got {n_trial}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        done = 0
        start_trials = len(self.trials)
        start_clock = self.clock
        while done < n_trial and self.has_next():
            if time_budget is not None and self.clock - start_clock >= time_budget:
                break
            t0 = time.perf_counter()
            configs = self.next_batch(min(batch_size, n_trial - done))
            search = time.perf_counter() - t0
            configs = [c for c in configs if c.index not in self.visited]
            if not configs:
                break
            inputs = [MeasureInput(self.task, c) for c in configs]
            results = measure_option.measure(inputs)
            measured = measure_option.last_batch_seconds
            t1 = time.perf_counter()
            self.clock += search + measured
            self._record(inputs, results)
            self.update(inputs, results)
            search += time.perf_counter() - t1
            self.clock += time.perf_counter() - t1
            self.rounds.append(RoundLog(len(inputs), search, measured))
            done += len(inputs)
            for cb in callbacks:
                cb(self, inputs, results)
            for inp, res in zip(inputs, results):
                if not res.ok:
                    logger.debug("config %d failed: %s %s", inp.config.index, res.error_no.name,
                                 res.error_msg.splitlines()[0] if res.error_msg else "")
            if early_stopping is not None and len(self.trials) - max(self.best_iter, start_trials) >= early_stopping:
                logger.info("early stopping: no improvement in %d trials", early_stopping)
                break
