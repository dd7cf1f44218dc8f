"""Feature vectors of configs for cost models.

``knob``: each knob's entity as numbers (log2 split factors, option values), computed from the index
alone by table lookup, so simulated annealing can score tens of thousands of configs per second.
``itervar``: the loop structure of the scheduled TIR (AutoTVM's itervar features adapted to TIR): for each
loop in nest order its log extent, kind (serial/parallel/vectorized/unrolled/thread-bound), depth and
the log of the iterations beneath it, plus the sizes of cache buffers the schedule allocates. It requires
instantiating the template (milliseconds per config), so it is cached per index.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .task import Task

__all__ = ["FeatureExtractor", "FEATURE_TYPES"]

FEATURE_TYPES = ("knob", "itervar")
_MAX_LOOPS = 24
_PER_LOOP = 8  # log extent, 5 kinds, depth, log inner iterations
_MAX_ALLOCS = 4


class FeatureExtractor:
    """Maps config indices of one task to a fixed-width feature matrix."""

    def __init__(self, task: Task, feature_type: str = "knob"):
        if feature_type not in FEATURE_TYPES:
            raise ValueError(f"unknown feature_type {feature_type!r}: use one of {FEATURE_TYPES}")
        self.task = task
        self.feature_type = feature_type
        space = task.config_space
        self._tables = [np.asarray([knob.numeric(i) for i in range(len(knob))], dtype=np.float32)
                        for knob in space.space_map.values()]
        self._radix = np.asarray(space.dims, dtype=np.int64)
        self._cache: dict[int, np.ndarray] = {}

    def digits(self, indices: Sequence[int]) -> np.ndarray:
        """Mixed-radix knob indices (n, n_knobs), first knob least significant."""
        idx = np.asarray(indices, dtype=np.int64).copy()
        out = np.empty((len(idx), len(self._radix)), dtype=np.int64)
        for k, r in enumerate(self._radix):
            out[:, k] = idx % r
            idx //= r
        return out

    def knob_features(self, indices: Sequence[int]) -> np.ndarray:
        if not self._tables:
            return np.zeros((len(indices), 1), dtype=np.float32)
        d = self.digits(indices)
        return np.concatenate([t[d[:, k]] for k, t in enumerate(self._tables)], axis=1)

    def __call__(self, indices: Sequence[int]) -> np.ndarray:
        if self.feature_type == "knob":
            return self.knob_features(indices)
        rows = []
        for i in indices:
            i = int(i)
            if i not in self._cache:
                self._cache[i] = self._itervar(i)
            rows.append(self._cache[i])
        return np.stack(rows) if rows else np.zeros((0, _MAX_LOOPS * _PER_LOOP + _MAX_ALLOCS), np.float32)

    def _itervar(self, index: int) -> np.ndarray:
        import tvm

        feat = np.zeros(_MAX_LOOPS * _PER_LOOP + _MAX_ALLOCS, dtype=np.float32)
        try:
            sch, _ = self.task.instantiate(index)
        except Exception:  # noqa: BLE001 - an invalid config gets the all-zero vector
            return feat
        func = sch.mod["main"]
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
            inner = math.prod(e for e, _, d in loops[n + 1:] if d > depth) if n + 1 < len(loops) else 1
            base = n * _PER_LOOP
            feat[base] = math.log2(ext + 1)
            feat[base + 1 + min(kind, 4)] = 1.0
            feat[base + 6] = depth
            feat[base + 7] = math.log2(inner + 1)
        for n, size in enumerate(sorted(allocs, reverse=True)[:_MAX_ALLOCS]):
            feat[_MAX_LOOPS * _PER_LOOP + n] = math.log2(size + 1)
        return feat
