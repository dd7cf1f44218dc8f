"""Dispatch: which config a template gets when it is called directly.

``with apply_history_best(log):`` makes every template call inside the block use the best record for its
workload and the current target (``with target:`` or the host CPU). Records for another target never apply;
an untuned workload gets a fallback config (each knob's first entity) and a one-time warning.
"""
from __future__ import annotations

import warnings
from typing import Any, Iterable, Sequence

from .. import target as _target
from ..records import Record, load_from_file
from ..space import ConfigEntity, FallbackConfig
from ..task import Task, workload_key

__all__ = ["DispatchContext", "ApplyHistoryBest", "apply_history_best", "query_config"]

_STACK: list["DispatchContext"] = []
_WARNED: set[str] = set()


class DispatchContext:
    """Base class: ``query(name, args, target)`` returns a config or None; usable as a context manager."""

    def query(self, name: str, args: Sequence[Any], target: Any) -> ConfigEntity | None:
        raise NotImplementedError

    def __enter__(self) -> "DispatchContext":
        _STACK.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _STACK.remove(self)


class ApplyHistoryBest(DispatchContext):
    """Best valid record per (workload, target) from a log path or an iterable of records."""

    def __init__(self, records: str | Iterable[Record]):
        recs = list(load_from_file(records)) if isinstance(records, str) else list(records)
        self._best: dict[str, list[Record]] = {}
        for r in recs:
            if r.result.ok:
                self._best.setdefault(r.workload_key, []).append(r)
        self._tasks: dict[tuple[str, str], Task] = {}

    def best_record(self, name: str, args: Sequence[Any], target: Any) -> Record | None:
        tgt = _target.to_json(_target.create(target))
        cands = [r for r in self._best.get(workload_key(name, args), []) if _target.same_target(r.target, tgt)]
        return min(cands, key=lambda r: r.mean_cost) if cands else None

    def query(self, name: str, args: Sequence[Any], target: Any) -> ConfigEntity | None:
        rec = self.best_record(name, args, target)
        if rec is None:
            return None
        key = (workload_key(name, args), str(target))
        if key not in self._tasks:
            self._tasks[key] = Task(name, args, target)
        space = self._tasks[key].config_space
        if rec.config_index >= len(space):
            warnings.warn(f"record for {name}{tuple(args)} does not fit the template's current config space",
                          stacklevel=3)
            return None
        return space.get(rec.config_index)


def apply_history_best(records: str | Iterable[Record]) -> ApplyHistoryBest:
    """Context manager applying the best records of a log (a path) or of loaded records."""
    return ApplyHistoryBest(records)


def query_config(name: str, args: Sequence[Any]) -> ConfigEntity | FallbackConfig:
    """Config for a direct template call: innermost context first, else the fallback."""
    tgt = _target.current()
    for ctx in reversed(_STACK):
        cfg = ctx.query(name, args, tgt)
        if cfg is not None:
            return cfg
    key = workload_key(name, args) + "@" + tgt.kind.name
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(f"no tuned record for {name}{tuple(args)} on {tgt.kind.name}: using a fallback config, "
                      "which may be slow", stacklevel=3)
    return FallbackConfig()
