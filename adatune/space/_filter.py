"""Which config indices pass a space's ``multi_filter``s, counted and ranked without listing them. While enumerating, a
filter sees a view that records which knobs it reads; a deterministic filter reading knobs ``S`` is a boolean table over
``S``'s product, not the whole space. Its partial sums give ``count_below`` and ``select`` in O(sum of dims), so
``len``, ``get_next_index`` and uniform sampling are exact and cheap on very large filtered spaces."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["ValidIndexSet", "FilterNeedsEntity"]

logger = logging.getLogger("adatune.space")

_CHUNK = 1 << 16
_LARGE = 1 << 22  # tables above this many filter calls are logged (they take seconds)


class FilterNeedsEntity(Exception):
    """A filter used more than knob look-ups; it is evaluated on real config entities instead."""


class _KnobView(Mapping):
    """``name -> entity`` for one row of digits, recording which knob positions were read."""

    def __init__(self, names: Sequence[str], entities: Sequence[Sequence[Any]]):
        self._pos = {n: k for k, n in enumerate(names)}
        self._names = list(names)
        self._entities = entities
        self.row: list[int] = [0] * len(names)
        self.read: set[int] = set()

    def __getitem__(self, name: str) -> Any:
        k = self._pos.get(name)
        if k is None:
            raise KeyError(
                f"multi_filter reads knob {name!r}, which this space does not define (knobs: {', '.join(self._names)})"
            )
        self.read.add(k)
        return self._entities[k][self.row[k]]

    def __iter__(self) -> Iterator[str]:
        self.read.update(range(len(self._names)))
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __getattr__(self, attr: str) -> Any:
        raise FilterNeedsEntity(attr)


class _ArrayEntity:
    """One knob's entities for many rows at once: ``.size`` is a list of int arrays (one per split factor),
    ``.val`` an array; what a filter computes from them with ``&``, ``*`` and comparisons is then a row mask."""

    def __init__(self, entities: Sequence[Any], digits: np.ndarray):
        self._entities, self._digits = entities, digits

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        values = [getattr(e, attr) for e in self._entities]
        if all(isinstance(v, (list, tuple)) for v in values):
            table = np.asarray(values)  # equal-length factor lists -> (entities, factors); else an object array
            if table.ndim != 2:
                raise FilterNeedsEntity(attr)
            return [table[self._digits, j] for j in range(table.shape[1])]
        return np.asarray(values)[self._digits]


class _ArrayView(Mapping):
    """``name -> _ArrayEntity`` over a block of digit rows (see ``ValidIndexSet._table_by_arrays``)."""

    def __init__(self, names: Sequence[str], entities: Sequence[Sequence[Any]], rows: np.ndarray):
        self._pos = {n: k for k, n in enumerate(names)}
        self._names, self._entities, self._rows = list(names), entities, rows
        self.read: set[int] = set()

    def __getitem__(self, name: str) -> Any:
        k = self._pos[name]
        self.read.add(k)
        return _ArrayEntity(self._entities[k], self._rows[:, k])

    def __iter__(self) -> Iterator[str]:
        self.read.update(range(len(self._names)))
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class ValidIndexSet:
    """The valid indices of a mixed-radix space (knob 0 least significant) under AND-ed filters."""

    def __init__(
        self,
        dims: Sequence[int],
        names: Sequence[str],
        entities: Sequence[Sequence[Any]],
        filters: Sequence[Callable[[Any], Any]],
        make_entity: Callable[[int], Any],
    ):
        self.dims = [int(d) for d in dims]
        self.range_length = math.prod(self.dims)
        self._scale = [math.prod(self.dims[:k]) for k in range(len(self.dims))]
        if not filters:
            self.knobs: list[int] = []
            self.mask = np.ones((), dtype=bool)
        else:
            try:
                self.knobs, self.mask = self._table_by_reads(names, entities, filters)
            except FilterNeedsEntity:
                self.knobs = list(range(len(self.dims)))
                self.mask = self._table_by_entities(filters, make_entity)
        self._prepare()

    # -- building the table ------------------------------------------------------------------------
    def _rows(self, knobs: list[int], start: int, stop: int) -> np.ndarray:
        """Full digit rows for table entries [start, stop): knobs outside ``knobs`` stay at digit 0."""
        sub = np.arange(start, stop, dtype=np.int64)
        rows = np.zeros((stop - start, len(self.dims)), dtype=np.int64)
        for k in knobs:
            rows[:, k] = sub % self.dims[k]
            sub //= self.dims[k]
        return rows

    def _table_by_reads(
        self, names: Sequence[str], entities: Sequence[Sequence[Any]], filters: Sequence[Callable[[Any], Any]]
    ) -> tuple[list[int], np.ndarray]:
        view = _KnobView(names, entities)

        def passes(row: list[int]) -> bool:
            view.row = row
            return all(bool(f(view)) for f in filters)

        passes([0] * len(self.dims))
        probe = np.random.default_rng(0)
        for _ in range(32):  # find the knobs the filters read before sizing the table
            passes([int(probe.integers(d)) for d in self.dims])
        while True:
            knobs = sorted(view.read)
            n = math.prod(self.dims[k] for k in knobs)
            if n > _CHUNK:  # a large table: one array evaluation per block of rows instead of a call per row
                mask = self._table_by_arrays(knobs, names, entities, filters, passes)
                if mask is not None:
                    return knobs, mask
            if n > _LARGE:
                logger.info("multi_filter reads %d knobs: evaluating it on %d combinations", len(knobs), n)
            mask = np.empty(n, dtype=bool)
            restart = False
            for start in range(0, n, _CHUNK):
                stop = min(n, start + _CHUNK)
                for i, row in enumerate(self._rows(knobs, start, stop).tolist(), start):
                    mask[i] = passes(row)
                    if len(view.read) != len(knobs):
                        restart = True  # a knob read only for some values of others: widen the table
                        break
                if restart:
                    break
            if not restart:
                return knobs, mask

    def _table_by_arrays(
        self,
        knobs: list[int],
        names: Sequence[str],
        entities: Sequence[Sequence[Any]],
        filters: Sequence[Callable[[Any], Any]],
        passes: Callable[[list[int]], bool],
    ) -> np.ndarray | None:
        """The table from filters evaluated on blocks of rows (``&`` and single comparisons work on arrays); None when a
        filter does not (``and``, ``if``, ``in`` raise) or disagrees with its per-row answer on sampled rows."""
        n = math.prod(self.dims[k] for k in knobs)
        mask = np.empty(n, dtype=bool)
        for start in range(0, n, _CHUNK * 16):
            stop = min(n, start + _CHUNK * 16)
            view = _ArrayView(names, entities, self._rows(knobs, start, stop))
            try:
                block = np.ones(stop - start, dtype=bool)
                for f in filters:
                    out = np.asarray(f(view))
                    # one answer for a whole block: the filter did not compute on the arrays (``str(cfg[name])``
                    # in a set), and a sample of rows that all fail would not tell
                    if out.shape != (stop - start,) or out.dtype != bool:
                        return None
                    block &= out
            except Exception:  # noqa: BLE001 - any failure means "not array-safe": use the per-row path
                return None
            if not view.read <= set(knobs):
                return None
            mask[start:stop] = block
        for i in np.random.default_rng(1).integers(0, n, size=min(n, 256)).tolist():
            if passes(self._rows(knobs, i, i + 1)[0].tolist()) != bool(mask[i]):
                logger.warning("a multi_filter gives different answers on arrays and on rows; using rows")
                return None
        return mask

    def _table_by_entities(
        self, filters: Sequence[Callable[[Any], Any]], make_entity: Callable[[int], Any]
    ) -> np.ndarray:
        if self.range_length > _LARGE:
            logger.info("multi_filter needs whole configs: evaluating it on all %d", self.range_length)
        mask = np.empty(self.range_length, dtype=bool)
        for i in range(self.range_length):
            cfg = make_entity(i)
            mask[i] = all(bool(f(cfg)) for f in filters)
        return mask

    def _prepare(self) -> None:
        """Partial sums: ``partial[j]`` counts valid table entries with the j most significant knobs fixed."""
        shape = [self.dims[k] for k in reversed(self.knobs)]
        table = self.mask.reshape(shape).astype(np.int64)
        partial = [table]
        for _ in self.knobs:
            partial.append(partial[-1].sum(axis=-1))
        self._partial = partial[::-1]
        in_table = set(self.knobs)
        self._free_below = [
            math.prod(d for i, d in enumerate(self.dims[:k]) if i not in in_table) for k in range(len(self.dims) + 1)
        ]
        self.count = int(self._partial[0]) * self._free_below[len(self.dims)]

    # -- queries -----------------------------------------------------------------------------------
    def digits(self, index: int) -> list[int]:
        out = []
        for d in self.dims:
            out.append(index % d)
            index //= d
        return out

    def is_valid(self, index: int) -> bool:
        if not 0 <= index < self.range_length:
            return False
        sub, scale = 0, 1
        for k in self.knobs:
            sub += (index // self._scale[k]) % self.dims[k] * scale
            scale *= self.dims[k]
        return bool(self.mask.reshape(-1)[sub])

    def are_valid(self, indices: np.ndarray) -> np.ndarray:
        idx = np.asarray(indices, dtype=np.int64)
        inside = (idx >= 0) & (idx < self.range_length)
        if not self.knobs:
            return inside
        safe = np.where(inside, idx, 0)
        sub = np.zeros(len(safe), dtype=np.int64)
        scale = 1
        for k in self.knobs:
            sub += (safe // self._scale[k]) % self.dims[k] * scale
            scale *= self.dims[k]
        return inside & self.mask.reshape(-1)[sub]

    def count_below(self, n: int) -> int:
        """Number of valid indices in ``[0, n)``."""
        if n <= 0:
            return 0
        if n >= self.range_length:
            return self.count
        in_table = set(self.knobs)
        digits = self.digits(n)
        total, fixed = 0, list[int]()
        for k in reversed(range(len(self.dims))):
            if k in in_table:
                row = self._partial[len(fixed) + 1][tuple(fixed)]
                total += int(row[: digits[k]].sum()) * self._free_below[k]
                fixed.append(digits[k])
            else:
                total += digits[k] * int(self._partial[len(fixed)][tuple(fixed)]) * self._free_below[k]
        return total

    def select(self, rank: int) -> int:
        """The valid index with ``rank`` valid indices below it."""
        if not 0 <= rank < self.count:
            raise IndexError(f"rank {rank} is outside the {self.count} valid configs")
        in_table = set(self.knobs)
        digits = [0] * len(self.dims)
        fixed: list[int] = []
        for k in reversed(range(len(self.dims))):
            free = self._free_below[k]
            if k in in_table:
                cum = np.cumsum(self._partial[len(fixed) + 1][tuple(fixed)])
                d = int(np.searchsorted(cum, rank // free, side="right"))
                rank -= (int(cum[d - 1]) if d else 0) * free
                fixed.append(d)
            else:
                block = int(self._partial[len(fixed)][tuple(fixed)]) * free
                d, rank = divmod(rank, block)
            digits[k] = d
        return sum(d * s for d, s in zip(digits, self._scale))

    def indices_in(self, lo: int, hi: int) -> np.ndarray:
        """Every valid index in ``[lo, hi)``, ascending (scanned in vectorised chunks)."""
        parts = []
        for start in range(lo, hi, _CHUNK * 16):
            chunk = np.arange(start, min(hi, start + _CHUNK * 16), dtype=np.int64)
            parts.append(chunk[self.are_valid(chunk)])
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def sample(self, rng: np.random.Generator, n: int, lo: int, hi: int, exclude: set[int]) -> list[int]:
        """Up to ``n`` distinct valid indices in ``[lo, hi)`` not in ``exclude``, uniformly at random."""
        base, top = self.count_below(lo), self.count_below(hi)
        taken = {e for e in exclude if lo <= e < hi and self.is_valid(e)}
        free = top - base - len(taken)
        n = min(n, free)
        if n <= 0:
            return []
        if free <= 4 * n + 64:  # dense: list what is left and draw from it
            pool = (
                self.indices_in(lo, hi)
                if hi - lo <= (1 << 24)
                else np.array([self.select(r) for r in range(base, top)], dtype=np.int64)
            )
            if taken:
                pool = pool[~np.isin(pool, np.fromiter(taken, np.int64, len(taken)))]
            return [int(pool[i]) for i in rng.choice(len(pool), size=n, replace=False)]
        out: list[int] = []
        seen = set(taken)
        while len(out) < n:
            i = self.select(int(rng.integers(base, top)))
            if i not in seen:
                seen.add(i)
                out.append(i)
        return out
