"""JSON-lines tuning records: one line per measured candidate, appended as soon as it is measured.

Format version 2 (one line)::

    {"v": 2, "target": {...}, "task": [name, args], "kind": "knob", "key": "123",
     "config": <candidate.to_json()>, "result": {...}}

``kind`` and ``config`` are whatever the candidate's kind writes (a knob config's index and entities, a trace's
decisions, a micro-kernel's tiles), and ``key`` is its stable identity, so records of every kind of candidate are
read, resumed from and applied alike. Version-1 lines (``{"v": 1, ..., "config": {"index", "entity"}}``, knob
configs only) still load. As in AutoTVM, ``for inp, res in load_from_file(log)`` works: a record unpacks into a
``MeasureInput`` (its task recreated once per workload) and its ``MeasureResult``.
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
import pickle
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from . import target as _target
from .measure import MeasureInput, MeasureResult
from .task import TuningTask, create, workload_key

__all__ = [
    "FORMAT_VERSION",
    "Record",
    "encode",
    "decode",
    "load_from_file",
    "load_from_buffer",
    "save_to_file",
    "pick_best",
    "group_by_workload",
    "measure_str_key",
    "as_records",
]

FORMAT_VERSION = 2
_READABLE = (1, 2)
_TASKS: dict[tuple[str, str], TuningTask] = {}


@dataclass
class Record:
    """One decoded line; unpacks as ``inp, res`` (AutoTVM's record pair)."""

    target: dict
    task_name: str
    args: list
    kind: str
    key: str
    config: dict
    result: MeasureResult
    version: int = FORMAT_VERSION
    _input: MeasureInput | None = field(default=None, repr=False, compare=False)

    @property
    def workload_key(self) -> str:
        return workload_key(self.task_name, self.args)

    @property
    def mean_cost(self) -> float:
        return self.result.mean_cost

    @property
    def config_index(self) -> int:
        """A knob config's index (AutoTVM's records are knob configs); -1 for other kinds."""
        return int(self.config.get("index", -1)) if self.kind == "knob" else -1

    @property
    def config_entity(self) -> dict:
        return dict(self.config.get("entity", {})) if self.kind == "knob" else {}

    def create_task(self) -> TuningTask:
        """The task this record measured, on its recorded target (the host CPU if that target is unknown
        here, e.g. a CPU name this LLVM does not know); created once per workload and target."""
        cache_key = (self.workload_key, json.dumps(self.target, sort_keys=True))
        if cache_key not in _TASKS:
            try:
                tgt = _target.create(self.target)
            except ValueError:
                tgt = _target.host()
            _TASKS[cache_key] = create(self.task_name, self.args, tgt)
        return _TASKS[cache_key]

    @property
    def input(self) -> MeasureInput:
        """The measured input, with its task recreated (needs the template or task kind registered)."""
        if self._input is None:
            task = self.create_task()
            self._input = MeasureInput(task, task.candidate_from_json(self.config))
        return self._input

    def __iter__(self) -> Iterator[Any]:
        return iter((self.input, self.result))

    def __getitem__(self, k: int) -> Any:
        """``rec[0]`` the input, ``rec[1]`` the result (AutoTVM's records are ``(inp, res)`` tuples)."""
        if k in (1, -1):
            return self.result
        if k in (0, -2):
            return self.input
        raise IndexError(f"a record is a pair (input, result); index {k} is out of range")


def _line(inp: MeasureInput, result: MeasureResult) -> dict:
    cand = inp.config
    data = cand.to_json()
    return {
        "v": FORMAT_VERSION,
        "target": _target.to_json(inp.task.target),
        "task": [inp.task.name, json.loads(inp.task.workload_key)[1]],
        "kind": data.get("kind", "knob"),
        "key": str(cand.key),
        "config": data,
        "result": result.to_json(),
    }


def encode(inp: MeasureInput, result: MeasureResult, protocol: str = "json") -> str:
    """One record as a line: ``protocol="json"`` (the log format) or ``"pickle"`` (base64, AutoTVM's other)."""
    line = _line(inp, result)
    if protocol == "json":
        return json.dumps(line, separators=(",", ":"))
    if protocol == "pickle":
        return base64.b64encode(pickle.dumps(line)).decode()
    raise ValueError(f"unknown record protocol {protocol!r}: use 'json' or 'pickle'")


def _from_dict(d: Any) -> Record:
    if not isinstance(d, dict) or d.get("v") not in _READABLE:
        raise ValueError(f"not an adatune record (format versions {_READABLE})")
    name, args = d["task"]
    cfg = dict(d["config"])
    if d["v"] == 1:  # knob configs only: {"index", "entity"}
        cfg.setdefault("kind", "knob")
        kind, key = "knob", str(int(cfg["index"]))
    else:
        kind, key = str(d["kind"]), str(d["key"])
    return Record(d["target"], name, list(args), kind, key, cfg, MeasureResult.from_json(d["result"]), int(d["v"]))


def decode(line: str, protocol: str = "json") -> Record:
    """A line back into a ``Record`` (which unpacks as ``inp, res``)."""
    if protocol == "json":
        return _from_dict(json.loads(line))
    if protocol == "pickle":
        return _from_dict(pickle.loads(base64.b64decode(line.strip())))
    raise ValueError(f"unknown record protocol {protocol!r}: use 'json' or 'pickle'")


def measure_str_key(inp: MeasureInput, include_config: bool = True) -> str:
    """A string naming the target, workload and (optionally) candidate of an input (AutoTVM's key)."""
    tgt = json.dumps(_target.to_json(inp.task.target), sort_keys=True)
    parts = [tgt, inp.task.workload_key]
    if include_config:
        parts.append(f"{inp.config.to_json().get('kind', 'knob')}:{inp.config.key}")
    return " ".join(parts)


def load_from_file(path: str | bytes | os.PathLike) -> Iterator[Record]:
    """Records of a log; corrupt or truncated lines (a run killed mid-write) are skipped with a warning."""
    with open(path, encoding="utf-8") as f:
        yield from load_from_buffer(f, name=os.fsdecode(path))


def load_from_buffer(f: IO[str] | io.TextIOBase, name: str = "<buffer>") -> Iterator[Record]:
    """Records of an open text log (AutoTVM's ``load_from_buffer``), corrupt lines skipped with a warning."""
    for lineno, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            yield decode(line)
        except (ValueError, KeyError, TypeError) as err:
            warnings.warn(f"{name}:{lineno}: skipping a corrupt record ({err})", stacklevel=3)


def save_to_file(dest: str | os.PathLike | IO[str], pairs: Iterable[tuple[MeasureInput, MeasureResult]]) -> None:
    """Append records to a path (then fsync, so a run killed right after loses nothing it measured) or write
    them to an open text file (flushed)."""
    lines = "".join(encode(inp, res) + "\n" for inp, res in pairs)
    if hasattr(dest, "write"):
        dest.write(lines)  # type: ignore[union-attr]
        dest.flush()  # type: ignore[union-attr]
        return
    with open(dest, "a", encoding="utf-8") as f:  # type: ignore[arg-type]
        f.write(lines)
        f.flush()
        os.fsync(f.fileno())


def as_records(items: Iterable[Any]) -> Iterator[Record]:
    """Records from records, ``(inp, res)`` pairs, log paths, open text logs, or (nested) iterables mixing
    them (AutoTVM's inputs: ``zip([zip(inputs, results), ...])`` works too)."""
    for item in items:
        if isinstance(item, Record):
            yield item
        elif isinstance(item, (str, bytes, os.PathLike)):
            yield from load_from_file(item)
        elif isinstance(item, io.TextIOBase):
            yield from load_from_buffer(item)
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], MeasureInput):
            yield _from_dict(_line(item[0], item[1]))
        elif isinstance(item, Iterable) and not isinstance(item, (MeasureInput, dict)):
            yield from as_records(item)
        else:
            raise TypeError(f"expected records, (MeasureInput, MeasureResult) pairs or log paths, got {item!r}")


def pick_best(records: Iterable[Record], target: object | None = None) -> dict[str, Record]:
    """Fastest valid record per workload (optionally only those for ``target``)."""
    tgt = _target.to_json(_target.create(target)) if target is not None else None  # type: ignore[arg-type]
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
