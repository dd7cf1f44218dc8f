"""One tuning budget over all tasks of a model: round-robin or Ansor's gradient-based task scheduler.

Each round gives one task ``round_trials`` trials with its own tuner. All records go to one log, and a killed run
resumes from it: every tuner first loads its task's records, and trials in the log count against the budget. A
``TuningCache`` (``tune_model``'s ``cache``) adds records measured by earlier runs, counting against no budget.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from .. import target as _target
from ..callback import log_to_file
from ..measure import LocalBuilder, LocalRunner, MeasureOption, measure_option
from ..records import CACHED, CONFIRM, Record, append_records, best_records, load_from_file
from ..records.cache import TuningCache
from ..tuners import Tuner, create_tuner
from ._extract import ModelTask, extract_tasks
from ._frontend import Model

__all__ = ["STRATEGIES", "TuneSummary", "model_runner", "tune_model"]

STRATEGIES = ("round-robin", "gradient")


@dataclass
class TuneSummary:
    """Per task: trials and best seconds (None: nothing valid yet); the estimated model latency."""

    tasks: list[ModelTask]
    trials: list[int]
    best_seconds: list[float | None]
    history: list[tuple[float, int, float | None]] = field(default_factory=list)  # (elapsed s, trials, est. s)

    @property
    def estimated_latency(self) -> float | None:
        """Sum of weight x best time over tasks (None until every task has a valid measurement)."""
        if any(b is None for b in self.best_seconds):
            return None
        return float(sum(t.weight * float(b or 0.0) for t, b in zip(self.tasks, self.best_seconds)))


def _best_seconds(tuner: Tuner) -> float | None:
    res = tuner.best_result
    return float(res.cost) if res is not None and tuner.best_flops > 0 else None


def _logged_best(records: list[Record], task: ModelTask, target: Any) -> float | None:
    """A task's best seconds in the log, for a task no tuner was made for (yet)."""
    best = best_records((r for r in records if r.task_name == task.task_name), target)
    return min((r.cost for r in best.values()), default=None)


def _from_cache(
    store: TuningCache, tasks: Sequence[ModelTask], target: Any, previous: list[Record], log: str | os.PathLike
) -> list[Record]:
    """The cache's records of the tasks the log has none of, appended to the log marked ``CACHED``."""
    in_log = {r.task_name for r in previous}
    names = {n for t in tasks for n in (t.task_name, t.trace_task_name) if n not in in_log}
    mark = {CACHED: os.fspath(store.directory)}
    copied = [
        dataclasses.replace(r, result=dataclasses.replace(r.result, extra={**r.result.extra, **mark}))
        for r in store.of(names, target)
    ]
    if copied:
        append_records(log, copied)
    return copied


class _Gradient:
    """Ansor's task scheduler (Zheng et al. 2020, sec. 6): pick the task whose next trials are expected to cut
    the weighted latency most, from its recent improvement (backward) and an optimistic guess (forward)."""

    def __init__(
        self,
        tasks: list[ModelTask],
        alpha: float = 0.2,
        beta: float = 2.0,
        window: int = 3,
        eps: float = 0.05,
        seed: int = 0,
    ):
        self.tasks, self.alpha, self.beta, self.window, self.eps = tasks, alpha, beta, window, eps
        self.rng = np.random.default_rng(seed)
        self.history: list[list[float]] = [[] for _ in tasks]  # best seconds after each round of the task

    def pick(self, best: list[float | None], rounds: list[int], live: list[bool]) -> int:
        cand = [i for i, ok in enumerate(live) if ok]
        fresh = [i for i in cand if best[i] is None]
        if fresh:
            return min(fresh, key=lambda i: rounds[i])
        if self.rng.random() < self.eps:
            return int(self.rng.choice(cand))
        grads = []
        for i in cand:
            b = best[i]
            assert b is not None
            h = self.history[i]
            backward = (h[-1] - h[-1 - self.window]) / self.window if len(h) > self.window else 0.0
            kind = self.tasks[i].kind
            peers = [j for j in cand if self.tasks[j].kind == kind and best[j]]
            best_flops = max(self.tasks[j].flop / best[j] for j in peers)  # type: ignore[operator]
            forward_next = min(b - b / max(rounds[i], 1), self.beta * self.tasks[i].flop / best_flops)
            grads.append(self.tasks[i].weight * (self.alpha * backward + (1 - self.alpha) * (forward_next - b)))
        if max(grads) == min(grads):
            return int(self.rng.choice(cand))
        return cand[int(np.argmin(grads))]


def model_runner(runs: int = 6) -> LocalRunner:
    """The default runner of a model's tasks: ``runs`` runs, each a repeat of its own with the caches flushed before
    it (weights and output cold, the input hot), as inside a model, where a kernel's weights are untouched since the
    last inference; timed hot, the tasks' best times undercut the model's latency and favour hot-cache configs."""
    return LocalRunner(number=1, repeat=runs, enable_cpu_cache_flush=True, check_correctness=True)


def tune_model(
    model: Model,
    log: str | os.PathLike,
    n_trial: int | None = None,
    time_budget: float | None = None,
    strategy: str = "gradient",
    tuner: str = "xgb",
    tuner_options: dict[str, Any] | None = None,
    trace_cost_model: str = "xgb",
    option: MeasureOption | None = None,
    round_trials: int = 8,
    target: _target.TargetLike | None = None,
    tasks: Sequence[ModelTask] | None = None,
    seed: int = 0,
    progress: bool = True,
    confirm: int = 0,
    cache: TuningCache | str | os.PathLike | None = None,
    transfer: bool = False,
) -> TuneSummary:
    """Tune every task of ``model`` within ``n_trial`` trials in all (log included) and/or ``time_budget`` seconds of
    this call, appending every record to ``log``. ``option`` defaults to ``LocalBuilder()`` and ``model_runner()``
    (cold-cache timing, as the model runs its kernels). ``confirm`` > 0: after the budget, each task's ``confirm``
    fastest candidates are re-timed in turns and the fastest by median kept (``Tuner.confirm``; logged too, outside
    ``time_budget``). ``cache`` (a ``TuningCache`` or its directory): its records of the model's workloads on
    ``target`` are copied into ``log`` first; a task it holds at least its share of trials of (``n_trial / len(tasks)``,
    else ``round_trials``) is not measured again; this call's records go to the cache too. ``transfer`` (with a
    cache): each XGB tuner also learns from the cache's records of other workloads of its template (AutoTVM's
    transfer learning, ``XGBTuner.load_history``)."""
    if confirm < 0:
        raise ValueError(f"confirm must be >= 0 (0: off), got {confirm}")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}: choose from {', '.join(STRATEGIES)}")
    if transfer and cache is None:
        raise ValueError("transfer learns from a tuning cache's records of other workloads: give cache= too")
    if n_trial is None and time_budget is None:
        raise ValueError("give a budget: n_trial and/or time_budget")
    if (n_trial is not None and n_trial < 1) or (time_budget is not None and time_budget <= 0) or round_trials < 1:
        raise ValueError(
            f"budgets must be positive (n_trial={n_trial}, time_budget={time_budget}, round_trials={round_trials})"
        )
    tgt = _target.create(target) if target is not None else _target.host()
    tasks = list(tasks) if tasks is not None else extract_tasks(model, tgt)
    previous = list(load_from_file(log)) if os.path.isfile(log) else []
    store = cache if isinstance(cache, TuningCache) or cache is None else TuningCache(cache)
    if store is not None:
        previous += _from_cache(store, tasks, tgt, previous, log)
    cached = [sum(r.task_name == t.task_name and CACHED in r.result.extra for r in previous) for t in tasks]
    share = math.ceil(n_trial / max(len(tasks), 1)) if n_trial is not None else round_trials
    frozen = {i for i, n in enumerate(cached) if store is not None and n >= share}
    option = option or measure_option(LocalBuilder(), model_runner())
    names = {t.task_name for t in tasks}
    others = [r for r in store.records() if r.task_name not in names] if transfer and store else []

    def make_tuner(i: int) -> Tuner:
        t = tasks[i]
        if t.kind == "trace":
            tn = create_tuner("trace", t.task, seed=seed + i, cost_model=trace_cost_model)
        else:
            tn = create_tuner(tuner, t.task, seed=seed + i, **(tuner_options or {}))
        # a task's own records; with transfer, every record (XGB learns from the other workloads of its template)
        own = [r for r in previous if r.workload_key == tn.task.workload_key]
        tn.load_history([*previous, *others] if transfer else own)
        return tn

    # trace tuners are made when first picked: their first design space imports TVM's tensor intrinsics
    tuners: list[Tuner | None] = [
        None if t.kind == "trace" or i in frozen else make_tuner(i) for i, t in enumerate(tasks)
    ]
    logged = [
        sum(r.task_name == t.task_name and not {CONFIRM, CACHED} & r.result.extra.keys() for r in previous)
        for t in tasks
    ]
    summary = TuneSummary(
        tasks,
        [len(tn.trials) - c if tn is not None else n for tn, n, c in zip(tuners, logged, cached)],
        [_best_seconds(tn) if tn is not None else _logged_best(previous, t, tgt) for tn, t in zip(tuners, tasks)],
    )
    rounds = [0] * len(tasks)
    scheduler = _Gradient(tasks, seed=seed) if strategy == "gradient" else None
    callbacks = [log_to_file(log)]
    if store is not None:
        store.directory.mkdir(parents=True, exist_ok=True)
        callbacks.append(log_to_file(store.path))
    start, turn = time.perf_counter(), 0
    bar = tqdm(
        total=n_trial,
        initial=min(sum(summary.trials), n_trial or 0),
        unit="trial",
        desc=f"tune {model.name}",
        disable=not progress,
        dynamic_ncols=True,
    )
    try:
        while True:
            done = sum(summary.trials)
            if n_trial is not None and done >= n_trial:
                break
            if time_budget is not None and time.perf_counter() - start >= time_budget:
                break
            live = [i not in frozen and (tn is None or tn.has_next()) for i, tn in enumerate(tuners)]
            if not any(live):
                break
            if scheduler is not None:
                i = scheduler.pick(summary.best_seconds, rounds, live)
            else:
                i = next(k % len(tasks) for k in range(turn, turn + len(tasks)) if live[k % len(tasks)])
                turn = i + 1
            budget = round_trials if n_trial is None else min(round_trials, n_trial - done)
            tn = tuners[i]
            if tn is None:
                tn = tuners[i] = make_tuner(i)
                summary.trials[i] = len(tn.trials) - cached[i]
            before = len(tn.trials)
            tn.tune(budget, option, callbacks=callbacks, batch_size=budget)
            rounds[i] += 1
            new = len(tn.trials) - before
            if new == 0:  # space exhausted or nothing new to propose
                tn.has_next = lambda: False  # type: ignore[method-assign]
            summary.trials[i] += new
            summary.best_seconds[i] = _best_seconds(tn)
            if scheduler is not None and summary.best_seconds[i] is not None:
                scheduler.history[i].append(summary.best_seconds[i])  # type: ignore[arg-type]
            est = summary.estimated_latency
            summary.history.append((time.perf_counter() - start, sum(summary.trials), est))
            tuned = sum(b is not None for b in summary.best_seconds)
            bar.update(new)
            bar.set_postfix_str(
                f"est {est * 1e3:.2f} ms" if est is not None else f"est n/a ({tuned}/{len(tasks)} tasks timed)"
            )
    finally:
        bar.close()
    for i, tn in enumerate(tuners):  # after the budget: each task's leaders re-timed in turns (Tuner.confirm)
        if confirm > 0 and tn is not None and tn.best_config is not None:
            tn.confirm(option, top=confirm, callbacks=callbacks)
            summary.best_seconds[i] = _best_seconds(tn)
    return summary
