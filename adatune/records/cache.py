"""A tuning cache across models and runs: the records of every model tuned with it, in one JSON-lines file per user, so
that a second model re-measures no workload the first one tuned. A model's task is named by the structural hash of its
fused function (``FusedKnobTask``, trace tasks), as MetaSchedule's module equality keys its database, so ResNet-34's
convolutions find ResNet-18's records of the same shape and epilogue, whatever the model calls them. The store is
adatune's own log format, not a MetaSchedule database: a database keeps traces and run seconds, where a cache must also
keep knob-template configs (most of a CNN's tasks), failed candidates with their error kinds (a tuner resumed from the
cache does not propose them again), the adaptive evaluator's micro-batches, and each task's stored form, which a fresh
process restores it from. ``adatune.meta_schedule.export_database(cache.path, db)`` writes a cache's best schedules to a
database, as any log."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .. import target as _target
from . import Record, append_records, best_records, load_from_file

__all__ = ["CacheEntry", "TuningCache"]

#: the cache directory when none is given: ``$ADATUNE_CACHE_DIR``, else ``~/.cache/adatune``
ENV_DIR = "ADATUNE_CACHE_DIR"


@dataclass(frozen=True)
class CacheEntry:
    """One workload on one target in a cache: its records, the valid ones, and the fastest (median seconds)."""

    target: str
    task_name: str
    workload_key: str
    records: int
    valid: int
    best_seconds: float | None


class TuningCache:
    """The records in ``directory/records.jsonl`` (``directory``: ``$ADATUNE_CACHE_DIR`` or ``~/.cache/adatune``)."""

    FILE = "records.jsonl"

    def __init__(self, directory: str | os.PathLike | None = None):
        chosen = directory if directory is not None else os.environ.get(ENV_DIR) or Path.home() / ".cache" / "adatune"
        self.directory = Path(chosen).expanduser()
        if self.directory.exists() and not self.directory.is_dir():
            raise ValueError(f"tuning cache {os.fspath(self.directory)!r} is a file, not a directory")

    @property
    def path(self) -> Path:
        return self.directory / self.FILE

    def __repr__(self) -> str:
        return f"TuningCache({os.fspath(self.directory)!r})"

    def records(self) -> list[Record]:
        """Every record in the cache (none while it is empty)."""
        return list(load_from_file(self.path)) if self.path.is_file() else []

    def of(self, task_names: Iterable[str], target: _target.TargetLike) -> list[Record]:
        """The cache's records (failures too) of tasks named ``task_names`` on ``target``."""
        names, tgt = set(task_names), _target.to_json(_target.create(target))
        return [r for r in self.records() if r.task_name in names and _target.same_target(r.target, tgt)]

    def entries(self) -> list[CacheEntry]:
        """One entry per workload and target, by target then task name."""
        out = []
        for (tgt, key), recs in _by_target_and_workload(self.records()).items():
            best = best_records(recs)
            seconds = best[key].cost if key in best else None
            valid = sum(r.result.ok and math.isfinite(r.cost) for r in recs)
            out.append(CacheEntry(tgt, recs[0].task_name, key, len(recs), valid, seconds))
        return sorted(out, key=lambda e: (e.target, e.task_name))

    def prune(self, keep: int = 32) -> tuple[int, int]:
        """Keep the ``keep`` fastest valid records of each workload on each target (failures go: a tuner resumed
        from the cache has faster candidates to steer by). Rewrites the file atomically; returns (before, after)."""
        if keep < 1:
            raise ValueError(f"prune keeps at least one record per workload, got keep={keep}")
        recs = self.records()
        valid = _by_target_and_workload(r for r in recs if r.result.ok and math.isfinite(r.cost))
        kept = [r for group in valid.values() for r in sorted(group, key=lambda r: r.cost)[:keep]]
        tmp = self.path.with_suffix(".jsonl.tmp")
        tmp.unlink(missing_ok=True)
        append_records(tmp, kept)  # creates the file even when nothing is kept
        os.replace(tmp, self.path)
        return len(recs), len(kept)


def _by_target_and_workload(records: Iterable[Record]) -> dict[tuple[str, str], list[Record]]:
    """Records per (target as one comparable JSON line, workload key), in file order."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        groups.setdefault((json.dumps(r.target, sort_keys=True), r.workload_key), []).append(r)
    return groups
