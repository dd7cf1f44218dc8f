"""JSON-lines tuning records: one line per measured candidate, appended as soon as it is measured.

Format version 2 (one line)::

    {"v": 2, "target": {...}, "task": [name, args], "kind": "knob", "key": "123",
     "config": <candidate.to_json()>, "result": {...}, "workload": {...}}

``kind`` and ``config`` are whatever the candidate's kind writes and ``key`` is its stable identity, so records of
every kind are read, resumed from and applied alike. Version-1 lines (knob configs only) still load. As in AutoTVM,
``for inp, res in load_from_file(log)`` unpacks a record into a ``MeasureInput`` and its ``MeasureResult``.

Logs stand alone: the first record of each workload in a file also carries ``"workload"``
(``TuningTask.workload_json()``): the modules to import and, for a program no name recreates, the IRModule itself
(as MetaSchedule's database stores it). Reading it registers the workload for every record of that workload.
"""

from __future__ import annotations

import base64
import importlib
import io
import json
import math
import os
import pickle
import statistics
import sys
import warnings
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from .. import target as _target
from ..measure import MeasureInput, MeasureResult
from ..task import TuningTask, restore, workload_key

__all__ = [
    "FORMAT_VERSION",
    "Record",
    "encode",
    "decode",
    "load_from_file",
    "load_from_buffer",
    "save_to_file",
    "best_records",
    "CONFIRM",
    "CACHED",
    "group_by_workload",
    "measure_str_key",
    "as_records",
    "read_log",
    "append_records",
]

FORMAT_VERSION = 2
_READABLE = (1, 2)
_TASKS: dict[tuple[str, str], TuningTask] = {}
_STORED: dict[str, dict] = {}  # workload key -> its stored form, from every log line read in this process


def _legacy_target(recorded: dict) -> Any:
    """A recorded target this TVM does not accept: without its host where earlier adatune CUDA logs stored it as a
    list of keys (the device is what the record is about); else the host CPU (an unknown CPU name, say)."""
    if isinstance(recorded.get("host"), list):
        try:
            return _target.create({k: v for k, v in recorded.items() if k != "host"})
        except ValueError:
            pass
    return _target.host()


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
    workload: dict | None = field(default=None, repr=False, compare=False)  # the task's stored form, if on this line
    _input: MeasureInput | None = field(default=None, repr=False, compare=False)

    @property
    def workload_key(self) -> str:
        return workload_key(self.task_name, self.args)

    @property
    def mean_cost(self) -> float:
        return self.result.mean_cost

    @property
    def cost(self) -> float:
        """Median seconds per run, what adatune ranks records by (``MeasureResult.cost``)."""
        return self.result.cost

    @property
    def config_index(self) -> int:
        """A knob config's index (AutoTVM's records are knob configs); -1 for other kinds."""
        return int(self.config.get("index", -1)) if self.kind == "knob" else -1

    @property
    def config_entity(self) -> dict:
        return dict(self.config.get("entity", {})) if self.kind == "knob" else {}

    def to_json(self) -> dict:
        """The line this record was read from (``"workload"`` left out: a file stores it once per workload)."""
        return {
            "v": self.version, "target": self.target, "task": [self.task_name, self.args], "kind": self.kind,
            "key": self.key, "config": self.config, "result": self.result.to_json(),
        }  # fmt: skip

    def create_task(self) -> TuningTask:
        """The task this record measured, on its target (else the host CPU), created once per workload and target."""
        cache_key = (self.workload_key, json.dumps(self.target, sort_keys=True))
        if cache_key not in _TASKS:
            try:
                tgt = _target.create(self.target)
            except ValueError:
                tgt = _legacy_target(self.target)
            stored = self.workload or _STORED.get(self.workload_key, {})
            _TASKS[cache_key] = _restore_task(self.task_name, self.args, tgt, stored)
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


def _restore_task(name: str, args: list, tgt: Any, stored: dict) -> TuningTask:
    """The task of a record; when its kind or template is not registered yet, the modules its log names are
    imported first (a DietCode task's kind, the module defining a user's template), then it is tried again."""
    try:
        return restore(name, args, tgt, stored)
    except KeyError as err:
        missing = [m for m in stored.get("imports", []) if m not in sys.modules]
        if not missing:
            raise KeyError(_unregistered(name, stored, err)) from None
    for module in missing:
        # The log names these modules as data, as pickle names a class's module: importing them by name adds no
        # static dependency of this layer on a higher one (import-linter checks static imports only).
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise KeyError(
                f"cannot recreate task {name!r}: importing {module!r}, the module its log names, failed ({err}); "
                "put that module on sys.path"
            ) from None
    return _restore_task(name, args, tgt, stored)


def _unregistered(name: str, stored: dict, err: KeyError) -> str:
    why = err.args[0] if err.args else str(err)
    if stored.get("script"):
        how = (
            f"it was defined in the script {stored['script']}, which a fresh process cannot import: define it in a "
            "module, import that module before reading the log (importing it registers it), and tune again"
        )
    elif stored.get("imports"):
        how = f"importing {', '.join(stored['imports'])} did not register it"
    else:
        how = "import the module that defines its template or task kind (adatune.models, adatune.dietcode) first"
    return f"cannot recreate task {name!r} of this record ({why}); {how}"


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
    result = MeasureResult.from_json(d["result"])
    stored = d.get("workload") if isinstance(d.get("workload"), dict) else None
    rec = Record(d["target"], name, list(args), kind, key, cfg, result, int(d["v"]), stored)
    if stored is not None:
        _STORED[rec.workload_key] = stored
    return rec


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


_FILES: dict[str, tuple[int, int, set[str]]] = {}  # log path -> (inode, bytes read, workload keys it stores)
_STREAMS: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


def _stored_in_file(path: str | os.PathLike) -> set[str]:
    """Workloads whose stored form the log at ``path`` holds; reads only what was appended since last asked."""
    real = os.path.realpath(path)
    try:
        st: os.stat_result | None = os.stat(real)
    except OSError:
        st = None
    inode, offset, keys = _FILES.get(real, (-1, 0, set()))
    if st is None or st.st_ino != inode or st.st_size < offset:  # new, replaced or truncated: read from the top
        inode, offset, keys = (st.st_ino if st else -1), 0, set()
    if st is not None and st.st_size > offset:
        with open(real, "rb") as f:
            f.seek(offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        for raw in data[:end].splitlines():
            if b'"workload"' in raw:
                try:
                    d = json.loads(raw)
                    if isinstance(d.get("workload"), dict):
                        keys.add(workload_key(*d["task"]))
                except (ValueError, KeyError, TypeError):
                    pass
        offset += end
    _FILES[real] = (inode, offset, keys)
    return keys


def _stored_in_stream(stream: Any) -> set[str]:
    try:
        return _STREAMS.setdefault(stream, set())
    except TypeError:  # no weak references to it: store the workload on every line
        return set()


def save_to_file(dest: str | os.PathLike | IO[str], pairs: Iterable[tuple[MeasureInput, MeasureResult]]) -> None:
    """Append records to a path (then fsync, so a run killed right after loses nothing it measured) or write
    them to an open text file (flushed); the first record of a workload in that file stores its task."""
    stored = _stored_in_stream(dest) if hasattr(dest, "write") else _stored_in_file(dest)  # type: ignore[arg-type]
    out = []
    for inp, res in pairs:
        line = _line(inp, res)
        if inp.task.workload_key not in stored and hasattr(inp.task, "workload_json"):
            line["workload"] = inp.task.workload_json()
            if getattr(inp.task, "uses", None):
                line["workload"] = {**line["workload"], "uses": dict(inp.task.uses)}
            stored.add(inp.task.workload_key)
        out.append(json.dumps(line, separators=(",", ":")) + "\n")
    lines = "".join(out)
    if hasattr(dest, "write"):
        dest.write(lines)  # type: ignore[union-attr]
        dest.flush()  # type: ignore[union-attr]
        return
    _append(dest, lines)  # type: ignore[arg-type]


def append_records(path: str | os.PathLike, records: Iterable[Record]) -> None:
    """Append records as they were read (another log's, a cache's) to the log at ``path``, each workload's
    stored form on its first line there, as ``save_to_file`` writes measured pairs."""
    stored = _stored_in_file(path)
    out = []
    for rec in records:
        line, workload = rec.to_json(), rec.workload or _STORED.get(rec.workload_key)
        if rec.workload_key not in stored and workload:
            line["workload"] = workload
            stored.add(rec.workload_key)
        out.append(json.dumps(line, separators=(",", ":")) + "\n")
    _append(path, "".join(out))


def _append(path: str | os.PathLike, lines: str) -> None:
    """Append and fsync, so that a run killed right after loses nothing it measured."""
    with open(path, "a", encoding="utf-8") as f:
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
            rec = _from_dict(_line(item[0], item[1]))
            rec._input = item[0]  # its task is at hand: nothing to recreate
            yield rec
        elif isinstance(item, Iterable) and not isinstance(item, (MeasureInput, dict)):
            yield from as_records(item)
        else:
            raise TypeError(f"expected records, (MeasureInput, MeasureResult) pairs or log paths, got {item!r}")


#: ``MeasureResult.extra`` key of a confirmation reading (``Tuner.confirm``): ``{"session": t, "round": r}``
CONFIRM = "confirm"
#: ``MeasureResult.extra`` key of a record a ``TuningCache`` gave a model's log (its value: the cache's directory); it
#: counts against no budget of that log
CACHED = "cached"


def read_log(log: str | os.PathLike | Iterable[Any]) -> list[Record]:
    """A tuning log's records, from its path (``ValueError`` naming a path that does not exist) or from records,
    ``(inp, res)`` pairs or paths given directly (``as_records``)."""
    if isinstance(log, (str, os.PathLike)):
        if not os.path.isfile(log):
            raise ValueError(f"tuning log {os.fspath(log)!r} does not exist")
        return list(load_from_file(log))
    return list(as_records(log))


def best_records(records: Iterable[Record], target: object | None = None) -> dict[str, Record]:
    """Fastest valid record per workload (optionally only those for ``target``). Where a log holds confirmation
    readings (``Tuner.confirm``), the latest decides: the lowest median, returned as its reading nearest that median.
    A later record takes over only if it beats the winner's own tuning reading."""
    tgt = _target.to_json(_target.create(target)) if target is not None else None  # type: ignore[arg-type]
    valid: dict[str, list[Record]] = {}
    for r in records:
        if not r.result.ok or not math.isfinite(r.cost):
            continue
        if tgt is not None and not _target.same_target(r.target, tgt):
            continue
        valid.setdefault(r.workload_key, []).append(r)
    return {key: _best_of(recs) for key, recs in valid.items()}


def pick_best(records: Iterable[Record], target: object | None = None) -> dict[str, Record]:
    """Deprecated name of ``best_records``: AutoTVM's ``record.pick_best(in_file, out_file)`` is another function."""
    warnings.warn(
        "adatune.records.pick_best(records, target) is renamed best_records; "
        "adatune.record.pick_best(in_file, out_file) is AutoTVM's function that writes a file",
        DeprecationWarning,
        stacklevel=2,
    )
    return best_records(records, target)


def _best_of(recs: list[Record]) -> Record:
    marked = [r for r in recs if CONFIRM in r.result.extra]
    plain = [r for r in recs if CONFIRM not in r.result.extra]
    if not marked:
        return min(plain, key=lambda r: r.cost)
    session = max(float(r.result.extra[CONFIRM]["session"]) for r in marked)
    readings: dict[str, list[Record]] = {}
    for r in marked:
        if float(r.result.extra[CONFIRM]["session"]) == session:
            readings.setdefault(r.key, []).append(r)
    medians = {k: statistics.median(r.cost for r in rs) for k, rs in readings.items()}
    key = min(medians, key=lambda k: medians[k])
    winner = min(readings[key], key=lambda r: abs(r.cost - medians[key]))
    own = min((r.cost for r in plain if r.key == key), default=medians[key])
    newer = [r for r in plain if r.result.timestamp > session and r.cost < own]
    return min(newer, key=lambda r: r.cost) if newer else winner


def group_by_workload(records: Iterable[Record]) -> dict[str, list[Record]]:
    """Records per workload key, in log order (one log may hold several tasks)."""
    out: dict[str, list[Record]] = {}
    for r in records:
        out.setdefault(r.workload_key, []).append(r)
    return out
