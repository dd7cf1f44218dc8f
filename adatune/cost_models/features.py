"""Feature vectors of candidates for cost models.

``knob``: the space's own features (``task.space.featurize``, by table lookup, so simulated annealing scores tens of
thousands of configs per second). ``itervar``: AutoTVM's itervar features adapted to TIR (per loop its log extent,
kind, depth and log iterations beneath, plus cache buffer sizes). It applies the candidate, so rows are cached per
candidate key, process-wide per (task, target) for the last few tasks: every tuner of a study on one task (seeds,
schemes) shares them. A candidate that cannot be applied gets a row of NaN (missing, for the tree models), with a
warning from each extractor that meets it, counted in its ``failures``.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..task import TuningTask

__all__ = ["FeatureExtractor", "FEATURE_TYPES"]

logger = logging.getLogger("adatune.cost_models.features")

FEATURE_TYPES = ("knob", "itervar")
_MAX_LOOPS = 24
_PER_LOOP = 8  # log extent, 5 kinds, depth, log inner iterations
_MAX_ALLOCS = 4
_CACHED_TASKS = 8
# (workload key, target) -> candidate key -> (row, failure message or "")
_ITERVAR_ROWS: OrderedDict[tuple[str, str], dict[str, tuple[np.ndarray, str]]] = OrderedDict()


def _task_rows(task: TuningTask) -> dict[str, tuple[np.ndarray, str]]:
    """This task's shared itervar rows (least recently used tasks dropped)."""
    ident = (str(task.workload_key), str(task.target))
    rows = _ITERVAR_ROWS.pop(ident, None)
    _ITERVAR_ROWS[ident] = rows if rows is not None else {}
    while len(_ITERVAR_ROWS) > _CACHED_TASKS:
        _ITERVAR_ROWS.popitem(last=False)
    return _ITERVAR_ROWS[ident]


class FeatureExtractor:
    """Maps candidates of one task (or knob config indices) to a fixed-width feature matrix."""

    def __init__(self, task: TuningTask, feature_type: str = "knob"):
        if feature_type not in FEATURE_TYPES:
            raise ValueError(f"unknown feature_type {feature_type!r}: use one of {FEATURE_TYPES}")
        self.task = task
        self.feature_type = feature_type
        self._rows = _task_rows(task) if feature_type == "itervar" else {}
        self.failures: dict[str, str] = {}

    def candidates(self, xs: Sequence[Any]) -> list[Any]:
        """Candidates from candidates or knob config indices."""
        space = self.task.space
        return [space.get(int(x)) if isinstance(x, (int, np.integer)) else x for x in xs]  # type: ignore[attr-defined]

    def __call__(self, xs: Sequence[Any]) -> np.ndarray:
        cands = self.candidates(list(xs) if not isinstance(xs, np.ndarray) else xs.tolist())
        if self.feature_type == "knob":
            return np.asarray(self.task.space.featurize(cands), dtype=np.float32)
        rows = []
        for c in cands:
            key = str(c.key)
            if key not in self._rows:
                self._rows[key] = self._itervar(c)
            row, failure = self._rows[key]
            if failure and key not in self.failures:
                self.failures[key] = failure
                logger.warning(
                    "itervar features of candidate %s: applying it failed (%s); its features are marked missing",
                    key,
                    failure.splitlines()[0][:200],
                )
            rows.append(row)
        return np.stack(rows) if rows else np.zeros((0, _MAX_LOOPS * _PER_LOOP + _MAX_ALLOCS), np.float32)

    def _itervar(self, cand: Any) -> tuple[np.ndarray, str]:
        import tvm

        feat = np.zeros(_MAX_LOOPS * _PER_LOOP + _MAX_ALLOCS, dtype=np.float32)
        try:
            mod = self.task.scheduled_module(cand)
        except Exception as err:  # noqa: BLE001 - reported, and marked missing for the model
            return np.full_like(feat, np.nan), f"{type(err).__name__}: {err}"
        func = mod["main"]
        loops: list[tuple[int, int, int]] = []  # (extent, kind, depth)
        allocs: list[int] = []

        def visit(stmt: object, depth: int) -> None:
            if isinstance(stmt, tvm.tirx.For):
                ext = int(stmt.extent) if isinstance(stmt.extent, tvm.tirx.IntImm) else 1
                loops.append((ext, int(stmt.kind), depth))
                visit(stmt.body, depth + 1)
            elif isinstance(stmt, tvm.tirx.SeqStmt):
                for s in stmt.seq:
                    visit(s, depth)
            elif hasattr(stmt, "block") and hasattr(stmt, "iter_values"):  # SBlockRealize
                blk = stmt.block
                for buf in getattr(blk, "alloc_buffers", []):
                    allocs.append(math.prod(int(s) for s in buf.shape if isinstance(s, tvm.tirx.IntImm)))
                if blk.init is not None:
                    visit(blk.init, depth)
                visit(blk.body, depth)
            elif hasattr(stmt, "body"):
                visit(stmt.body, depth)

        visit(func.body, 0)
        for n, (ext, kind, depth) in enumerate(loops[:_MAX_LOOPS]):
            inner = math.prod(e for e, _, d in loops[n + 1 :] if d > depth) if n + 1 < len(loops) else 1
            base = n * _PER_LOOP
            feat[base] = math.log2(ext + 1)
            feat[base + 1 + min(kind, 4)] = 1.0
            feat[base + 6] = depth
            feat[base + 7] = math.log2(inner + 1)
        for n, size in enumerate(sorted(allocs, reverse=True)[:_MAX_ALLOCS]):
            feat[_MAX_LOOPS * _PER_LOOP + n] = math.log2(size + 1)
        return feat, ""
