"""A look at any tuning log: ``report(log)`` gives per task the best-so-far against trials and tuning time, the error
kinds and the best candidate, and for a model log the estimated end-to-end latency over time and where the
remaining time goes. ``LogReport.text()`` is what ``adatune report LOG`` prints, ``LogReport.plot(path)`` the
figure. Tuning time is wall-clock since the log's first record, so it includes builds, fitting and search.
"""

from __future__ import annotations

import csv
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..measure import MeasureErrorNo
from . import CONFIRM, Record, load_from_file

__all__ = ["TaskReport", "LogReport", "report", "weights_from_csv"]


@dataclass
class TaskReport:
    """One workload of a log: its records in log order, reduced to curves and counts."""

    name: str
    args: list
    kind: str
    weight: int | None = None  # calls per model run (model logs)
    flop: float | None = None  # when the task can be recreated here
    elapsed: list[float] = field(default_factory=list)  # seconds since the log's first record, per record
    best_seconds: list[float] = field(default_factory=list)  # best-so-far (inf until the first valid one)
    errors: Counter = field(default_factory=Counter)
    best_key: str = ""

    @property
    def trials(self) -> int:
        return len(self.best_seconds)

    @property
    def best(self) -> float:
        return self.best_seconds[-1] if self.best_seconds else math.inf

    @property
    def label(self) -> str:
        short = self.name if len(self.name) <= 48 else self.name[:45] + "..."
        return f"{short}{tuple(self.args) if len(str(self.args)) <= 40 else ''}"

    def gflops(self, seconds: float) -> float | None:
        return self.flop / seconds / 1e9 if self.flop and math.isfinite(seconds) and seconds > 0 else None


@dataclass
class LogReport:
    path: str
    tasks: list[TaskReport]
    model_latency: list[tuple[float, float]]  # (elapsed s, estimated seconds) once every weighted task is timed

    @property
    def is_model(self) -> bool:
        return any(t.weight for t in self.tasks)

    def remaining(self) -> list[tuple[TaskReport, float, float]]:
        """Weighted tasks by their share of the estimated latency: (task, weighted seconds, share)."""
        weighted = [(t, t.weight * t.best) for t in self.tasks if t.weight and math.isfinite(t.best)]
        total = sum(w for _, w in weighted) or 1.0
        return sorted(((t, w, w / total) for t, w in weighted), key=lambda x: -x[1])

    def text(self) -> str:
        """Per task: trials, best time (and GFLOPS), when it was reached, error kinds; then the model lines."""
        rows = [f"{self.path}: {sum(t.trials for t in self.tasks)} records, {len(self.tasks)} tasks"]
        rows.append(f"{'task':<60} {'trials':>6} {'best ms':>9} {'GFLOPS':>8} {'at trial':>8} {'at s':>7}  errors")
        for t in self.tasks:
            gf = t.gflops(t.best)
            at = next((k for k, b in enumerate(t.best_seconds) if b == t.best), -1)
            errors = ", ".join(f"{k} {n}" for k, n in t.errors.most_common()) or "-"
            rows.append(
                f"{t.label[:60]:<60} {t.trials:>6} {t.best * 1e3 if math.isfinite(t.best) else math.nan:>9.4f} "
                f"{gf if gf is not None else math.nan:>8.1f} {at + 1:>8} "
                f"{t.elapsed[at] if at >= 0 else math.nan:>7.0f}  {errors}"
            )
        if self.is_model:
            if self.model_latency:
                t_end, est = self.model_latency[-1]
                first = self.model_latency[0]
                rows.append(
                    f"estimated model latency: {est * 1e3:.2f} ms at {t_end:.0f} s "
                    f"(first estimate {first[1] * 1e3:.2f} ms at {first[0]:.0f} s, when every task had a timing)"
                )
            else:
                rows.append("estimated model latency: n/a (some weighted task has no valid timing)")
            rows.append("where the time goes (weight x best):")
            for t, w, share in self.remaining()[:10]:
                rows.append(f"  {share:6.1%}  {w * 1e3:8.3f} ms  x{t.weight:<3} {t.label}")
        return "\n".join(rows)

    def plot(self, path: str) -> str:
        """Best-so-far against trials and against time per task; for a model, the estimated latency over
        time and the tasks by weighted latency. Writes ``path`` (PNG) and returns it."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        panels = 4 if self.is_model else 2
        fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.2))
        shown = sorted(self.tasks, key=lambda t: -(t.weight or 1) * (t.best if math.isfinite(t.best) else 0))[:12]
        for t in shown:
            ys = [(t.gflops(b) if t.flop else b * 1e3) if math.isfinite(b) else math.nan for b in t.best_seconds]
            axes[0].plot(range(1, t.trials + 1), ys, label=t.label[:40])
            axes[1].plot(t.elapsed, ys)
        unit = "best GFLOPS" if all(t.flop for t in shown) else "best ms (GFLOPS where known)"
        for ax, xl in zip(axes[:2], ("trials", "tuning time (s)")):
            ax.set_xlabel(xl)
            ax.set_ylabel(unit)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=6)
        axes[0].set_title("best so far, per task")
        if self.is_model:
            if self.model_latency:
                axes[2].plot([t for t, _ in self.model_latency], [y * 1e3 for _, y in self.model_latency])
            axes[2].set_xlabel("tuning time (s)")
            axes[2].set_ylabel("estimated latency (ms)")
            axes[2].set_title("model: sum of weight x best")
            axes[2].grid(alpha=0.3)
            top = self.remaining()[:10][::-1]
            axes[3].barh([t.label[:30] for t, _, _ in top], [w * 1e3 for _, w, _ in top])
            axes[3].set_xlabel("weighted ms")
            axes[3].set_title("where the time goes")
            axes[3].tick_params(axis="y", labelsize=6)
        fig.suptitle(os.path.basename(self.path))
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path


def weights_from_csv(path: str, model: str | None = None) -> dict[str, int]:
    """``task -> weight`` from a task table with ``task`` and ``weight`` columns (as ``adatune model-tasks``
    writes), rows of ``model`` only when the table has a ``model`` column."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    if rows and not {"task", "weight"} <= set(rows[0]):
        raise ValueError(f"{path}: a weights table needs 'task' and 'weight' columns, got {sorted(rows[0])}")
    return {r["task"]: int(r["weight"]) for r in rows if model is None or r.get("model", model) == model}


def _flop(rec: Record) -> float | None:
    try:
        return float(rec.create_task().flop) or None
    except Exception:  # noqa: BLE001 - a task this process cannot recreate is reported without GFLOPS
        return None


def report(
    log: str | os.PathLike,
    weights: Mapping[str, int] | None = None,
    model: str | None = None,
    records: Sequence[Record] | None = None,
) -> LogReport:
    """Read ``log`` into a ``LogReport``. ``weights`` (task name -> calls per model run) make any log a model
    log; otherwise the weights stored with the tasks are used (``model`` picks one when tasks belong to
    several models). ``records``: the log's records when the caller has read them already."""
    path = os.fspath(log)
    records = list(records) if records is not None else list(load_from_file(path))
    if not records:
        raise ValueError(f"{path}: no tuning records in this log")
    start = min(r.result.timestamp for r in records)
    tasks: dict[str, TaskReport] = {}
    for rec in records:
        if CONFIRM in rec.result.extra:  # ``Tuner.confirm``'s re-timings are not trials of the curves
            continue
        t = tasks.get(rec.workload_key)
        if t is None:
            uses = (rec.workload or {}).get("uses") or {}
            weight = (weights or {}).get(rec.task_name)
            if weight is None and uses:
                weight = uses.get(model) if model else (next(iter(uses.values())) if len(uses) == 1 else None)
            t = tasks[rec.workload_key] = TaskReport(rec.task_name, list(rec.args), rec.kind, weight, _flop(rec))
        ok = rec.result.error_no == MeasureErrorNo.NO_ERROR and rec.cost > 0
        if not ok:
            t.errors[MeasureErrorNo(rec.result.error_no).name] += 1
        prev = t.best
        t.best_seconds.append(min(prev, rec.cost) if ok else prev)
        t.elapsed.append(rec.result.timestamp - start)
        if ok and rec.cost < prev:
            t.best_key = rec.key
    return LogReport(path, list(tasks.values()), _model_latency(list(tasks.values())))


def _model_latency(tasks: list[TaskReport]) -> list[tuple[float, float]]:
    """Sum of weight x best-so-far at each record's time, from the time every weighted task has a timing."""
    weighted = [t for t in tasks if t.weight]
    if not weighted:
        return []
    events = sorted((e, i, b) for i, t in enumerate(weighted) for e, b in zip(t.elapsed, t.best_seconds))
    calls = [float(t.weight or 0) for t in weighted]
    best = [math.inf] * len(weighted)
    out: list[tuple[float, float]] = []
    for e, i, b in events:
        best[i] = b
        if all(math.isfinite(x) for x in best):
            out.append((e, sum(w * x for w, x in zip(calls, best))))
    return out
