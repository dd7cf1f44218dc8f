"""JSON-lines tuning records: one line per measured candidate, appended as soon as it is measured.

A line holds the format version, the target, the task (template name and arguments), the config (index and
entity values, so a record can be checked against a changed template) and the result.
"""
from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator

from . import target as _target
from .measure import MeasureInput, MeasureResult
from .task import workload_key

if TYPE_CHECKING:
    from .task import Task

__all__ = ["FORMAT_VERSION", "Record", "encode", "decode", "load_from_file", "save_to_file", "pick_best",
           "group_by_workload"]

FORMAT_VERSION = 1


@dataclass
class Record:
    """One decoded line."""

    target: dict
    task_name: str
    args: list
    config_index: int
    config_entity: dict
    result: MeasureResult
    version: int = FORMAT_VERSION

    @property
    def workload_key(self) -> str:
        return workload_key(self.task_name, self.args)

    @property
    def mean_cost(self) -> float:
        return self.result.mean_cost

    def create_task(self) -> "Task":
        """The task this record measured, on its recorded target (the host CPU if that target is unknown
        here, e.g. a CPU name this LLVM does not know)."""
        from .task import create

        try:
            target = _target.create(self.target)
        except ValueError:
            target = _target.host()
        return create(self.task_name, self.args, target)


def encode(inp: MeasureInput, result: MeasureResult) -> str:
    cfg = inp.config.to_json()
    line = {"v": FORMAT_VERSION, "target": _target.to_json(inp.task.target),
            "task": [inp.task.name, json.loads(inp.task.workload_key)[1]],
            "config": {"index": cfg["index"], "entity": cfg["entity"]}, "result": result.to_json()}
    return json.dumps(line, separators=(",", ":"))


def decode(line: str) -> Record:
    d = json.loads(line)
    if not isinstance(d, dict) or d.get("v") != FORMAT_VERSION:
        raise ValueError(f"not an adatune v{FORMAT_VERSION} record")
    name, args = d["task"]
    return Record(d["target"], name, list(args), int(d["config"]["index"]), d["config"].get("entity", {}),
                  MeasureResult.from_json(d["result"]), int(d["v"]))


def load_from_file(path: str) -> Iterator[Record]:
    """Records of a log; corrupt or truncated lines (a run killed mid-write) are skipped with a warning."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield decode(line)
            except (ValueError, KeyError, TypeError) as err:
                warnings.warn(f"{path}:{lineno}: skipping a corrupt record ({err})", stacklevel=2)


def save_to_file(path: str, pairs: Iterable[tuple[MeasureInput, MeasureResult]]) -> None:
    """Append records and fsync, so a run killed right after loses nothing it measured."""
    with open(path, "a", encoding="utf-8") as f:
        for inp, res in pairs:
            f.write(encode(inp, res) + "\n")
        f.flush()
        os.fsync(f.fileno())


def pick_best(records: Iterable[Record], target: object | None = None) -> dict[str, Record]:
    """Fastest valid record per workload (optionally only those for ``target``)."""
    tgt = _target.to_json(_target.create(target)) if target is not None else None
    best: dict[str, Record] = {}
    for r in records:
        if not r.result.ok or not math.isfinite(r.mean_cost):
            continue
        if tgt is not None and not _target.same_target(r.target, tgt):
            continue
        cur = best.get(r.workload_key)
        if cur is None or r.mean_cost < cur.mean_cost:
            best[r.workload_key] = r
    return best


def group_by_workload(records: Iterable[Record]) -> dict[str, list[Record]]:
    """Records per workload key, in log order (one log may hold several tasks)."""
    out: dict[str, list[Record]] = {}
    for r in records:
        out.setdefault(r.workload_key, []).append(r)
    return out
