"""Apply-history-best: inside ``with apply_history_best(log):`` every template call uses the best record for its
workload and the current target (records for another target never apply; a workload with none gets a fallback
config and one warning). Records of any candidate kind apply through their task's ``candidate_from_json``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from .. import target as _target
from ..records import Record, as_records, best_records
from ..space import FallbackConfig
from ..task import set_config_resolver, workload_key

__all__ = ["DispatchContext", "ApplyHistoryBest", "apply_history_best", "query_config"]

_STACK: list[DispatchContext] = []
_WARNED: set[str] = set()


class DispatchContext:
    """Base class: ``query(target, workload)`` returns a candidate or None; usable as a context manager.

    ``workload`` is AutoTVM's ``task.workload``: the template name followed by its arguments.
    """

    def query(self, target: Any, workload: Sequence[Any]) -> Any:
        raise NotImplementedError

    def __enter__(self) -> DispatchContext:
        _STACK.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _STACK.remove(self)


class ApplyHistoryBest(DispatchContext):
    """Best valid record per (workload, target) from a log path, an open text log, records, ``(inp, res)``
    pairs, or (nested) iterables of any of these."""

    def __init__(self, records: str | os.PathLike | Iterable[Any]):
        self._best: dict[str, list[Record]] = {}
        for r in as_records([records]):
            if r.result.ok:
                self._best.setdefault(r.workload_key, []).append(r)

    def best_record(self, target: Any, workload: Sequence[Any]) -> Record | None:
        tgt = _target.to_json(_target.create(target))
        name, args = workload[0], list(workload[1:])
        cands = [r for r in self._best.get(workload_key(name, args), []) if _target.same_target(r.target, tgt)]
        return next(iter(best_records(cands).values()), None)  # the one rule, confirmations included

    def query(self, target: Any, workload: Sequence[Any]) -> Any:
        rec = self.best_record(target, workload)
        if rec is None:
            return None
        try:
            return rec.create_task().candidate_from_json(rec.config)
        except ValueError as err:
            warnings.warn(
                f"the best record for {workload[0]}{tuple(workload[1:])} does not fit its task's "
                f"current space ({err}); it is ignored",
                stacklevel=3,
            )
            return None


def apply_history_best(records: str | os.PathLike | Iterable[Any]) -> ApplyHistoryBest:
    """Context manager applying the best records of a log (a path), of several, or of loaded records.

    The kernels built inside it run in this process, so TVM's thread pool is sized as ``CompiledModel`` sizes it
    (``adatune.target.size_tvm_thread_pool``): every core, as when they were measured."""
    _target.size_tvm_thread_pool()
    return ApplyHistoryBest(records)


def query_config(name: str, args: Sequence[Any]) -> Any:
    """Config for a direct template call: innermost context first, else the fallback (one warning per
    workload and target kind)."""
    tgt = _target.current()
    workload = (name, *args)
    for ctx in reversed(_STACK):
        cfg = ctx.query(tgt, workload)
        if cfg is not None:
            return cfg
    key = workload_key(name, args) + "@" + str(tgt.kind.name)
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(
            f"no tuned record for {name}{tuple(args)} on {tgt.kind.name}: using a fallback config, which may be slow",
            stacklevel=3,
        )
    return FallbackConfig()


set_config_resolver(query_config)
