"""Config spaces and config entities.

``ConfigSpace`` collects knobs while a template runs once; ``ConfigEntity`` is one point of the space and
replays the same template with chosen values. Indexing is AutoTVM's mixed radix: the first knob defined is
the least significant digit, so ``index = sum(k_i * prod(len(knob_j) for j < i))``.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ._candidate import DiscreteSpace
from ._knobs import (AnnotateSpace, KnobSpace, OtherOptionSpace, ReorderSpace, SplitSpace,
                     extent_of)

__all__ = ["ConfigSpace", "ConfigEntity", "FallbackConfig"]


def _loop_count(loops_or_n: Any) -> int:
    return int(loops_or_n) if isinstance(loops_or_n, int) else len(list(loops_or_n))


class _ConfigBase:
    """What templates see through ``adatune.get_config()``: ``define_*`` calls and ``cfg[name]``."""

    is_fallback = False

    def __init__(self) -> None:
        self.flop: float = 0.0

    def add_flop(self, flop: float) -> None:
        """Let a template state its FLOP count (otherwise TVM's TIR estimate is used)."""
        self.flop += float(flop)

    # The define_* methods are overridden by ConfigSpace; a ConfigEntity only checks the knob exists.
    def define_split(self, name: str, axis: Any, *, sch: Any = None, policy: str = "factors",
                     num_outputs: int = 2, max_factor: int | None = None,
                     filter: Callable | None = None, candidate: Sequence | None = None) -> None:
        self._check_defined(name)

    def define_reorder(self, name: str, loops: Any, policy: str = "all",
                       candidate: Sequence | None = None) -> None:
        self._check_defined(name)

    def define_annotate(self, name: str, loops: Any, policy: Any = "try_unroll") -> None:
        self._check_defined(name)

    def define_knob(self, name: str, candidates: Sequence[Any]) -> None:
        self._check_defined(name)

    def multi_filter(self, filter: Callable[["ConfigEntity"], bool]) -> None:
        """Restrict the space to configs for which ``filter(config)`` is true."""

    def _check_defined(self, name: str) -> None:
        raise NotImplementedError

    def __getitem__(self, name: str) -> Any:
        raise NotImplementedError


class ConfigSpace(_ConfigBase, DiscreteSpace):
    """All knobs of a task. Built by running the template once; then indexable like a sequence."""

    def __init__(self) -> None:
        super().__init__()
        self.space_map: dict[str, KnobSpace] = {}
        self._filters: list[Callable[[ConfigEntity], bool]] = []
        self._radix: list[int] = []
        self._valid: np.ndarray | None = None  # cached valid indices of a small filtered space
        self._tables: list[np.ndarray] | None = None  # knob feature tables, built on first featurize

    # -- definition (called from templates) -------------------------------------------------------
    def _add(self, name: str, knob: KnobSpace) -> None:
        if name in self.space_map:
            raise ValueError(f"knob {name!r} is defined twice in this template")
        self.space_map[name] = knob
        self._radix = [len(k) for k in self.space_map.values()]
        self._valid = None

    def define_split(self, name: str, axis: Any, *, sch: Any = None, policy: str = "factors",
                     num_outputs: int = 2, max_factor: int | None = None,
                     filter: Callable | None = None, candidate: Sequence | None = None) -> None:
        self._add(name, SplitSpace(extent_of(axis, sch), num_outputs=num_outputs, policy=policy,
                                   max_factor=max_factor, filter=filter, candidate=candidate))

    def define_reorder(self, name: str, loops: Any, policy: str = "all",
                       candidate: Sequence | None = None) -> None:
        self._add(name, ReorderSpace(_loop_count(loops), policy=policy, candidate=candidate))

    def define_annotate(self, name: str, loops: Any, policy: Any = "try_unroll") -> None:
        self._add(name, AnnotateSpace(_loop_count(loops), policy=policy))

    def define_knob(self, name: str, candidates: Sequence[Any]) -> None:
        self._add(name, OtherOptionSpace(list(candidates)))

    def multi_filter(self, filter: Callable[["ConfigEntity"], bool]) -> None:
        self._filters.append(filter)
        self._valid = None

    @property
    def has_filters(self) -> bool:
        return bool(self._filters)

    def _check_defined(self, name: str) -> None:  # pragma: no cover - ConfigSpace defines instead
        pass

    def __getitem__(self, name: str) -> Any:
        """While the template runs to collect knobs, every knob takes its first entity."""
        if name not in self.space_map:
            raise KeyError(f"knob {name!r} is used before it is defined")
        return self.space_map[name][0]

    # -- indexing ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return math.prod(self._radix) if self._radix else 1

    @property
    def knob_names(self) -> list[str]:
        return list(self.space_map)

    @property
    def dims(self) -> list[int]:
        """Number of entities of each knob, in definition order."""
        return list(self._radix)

    def point2knob(self, index: int) -> list[int]:
        """Mixed-radix digits of ``index``; the first knob is the least significant."""
        if not 0 <= index < len(self):
            raise IndexError(f"config index {index} is outside the space of {len(self)} configs")
        digits = []
        for r in self._radix:
            digits.append(index % r)
            index //= r
        return digits

    def knob2point(self, digits: Sequence[int]) -> int:
        if len(digits) != len(self._radix):
            raise ValueError(f"expected {len(self._radix)} knob indices, got {len(digits)}")
        index, scale = 0, 1
        for d, r in zip(digits, self._radix):
            if not 0 <= d < r:
                raise IndexError(f"knob index {d} is outside [0, {r})")
            index += int(d) * scale
            scale *= r
        return index

    def get(self, index: int) -> "ConfigEntity":
        return ConfigEntity(self, int(index))

    def is_index_valid(self, index: int) -> bool:
        """True when the config passes every ``multi_filter``."""
        if not self._filters:
            return True
        cfg = self.get(index)
        return all(f(cfg) for f in self._filters)

    def valid_indices(self) -> np.ndarray:
        """Every index that passes the filters, sorted (enumerated once and cached: small spaces only)."""
        if not self._filters:
            return np.arange(len(self), dtype=np.int64)
        if self._valid is None:
            self._valid = np.array([i for i in range(len(self)) if self.is_index_valid(i)], dtype=np.int64)
        return self._valid

    def are_valid(self, indices: np.ndarray) -> np.ndarray:
        """Vectorised ``is_index_valid`` (uses the cached valid set on small spaces)."""
        indices = np.asarray(indices, dtype=np.int64)
        if not self._filters:
            return np.ones(len(indices), dtype=bool)
        if len(self) <= 200_000:
            valid = self.valid_indices()
            pos = np.clip(np.searchsorted(valid, indices), 0, max(len(valid) - 1, 0))
            return valid[pos] == indices if len(valid) else np.zeros(len(indices), dtype=bool)
        return np.array([self.is_index_valid(int(i)) for i in indices], dtype=bool)

    def sample(self, rng: np.random.Generator, n: int, exclude: Iterable[int] = ()) -> list[int]:
        """Up to ``n`` distinct valid indices, none in ``exclude``, drawn uniformly at random."""
        excluded = set(int(e) for e in exclude)
        total = len(self)
        if total <= 200_000 and (self._filters or total - len(excluded) <= 4 * n):
            valid = self.valid_indices()
            pool = valid[~np.isin(valid, np.fromiter(excluded, np.int64, len(excluded)))] if excluded else valid
            take = min(n, len(pool))
            return [int(pool[i]) for i in rng.choice(len(pool), size=take, replace=False)] if take else []
        out: list[int] = []
        seen = set(excluded)
        tries = 0
        while len(out) < n and tries < 50 * n + 1000:
            tries += 1
            i = int(rng.integers(total))
            if i in seen:
                continue
            seen.add(i)
            if self.is_index_valid(i):
                out.append(i)
        return out

    def random_walk(self, index: int, rng: np.random.Generator, max_tries: int = 100) -> int:
        """A valid neighbour: one randomly chosen knob moved to another of its values."""
        digits = self.point2knob(index)
        movable = [k for k, r in enumerate(self._radix) if r > 1]
        if not movable:
            return index
        for _ in range(max_tries):
            new = list(digits)
            k = movable[int(rng.integers(len(movable)))]
            step = int(rng.integers(1, self._radix[k]))
            new[k] = (new[k] + step) % self._radix[k]
            cand = self.knob2point(new)
            if self.is_index_valid(cand):
                return cand
        return index

    # -- the candidate protocol (knob configs are candidates of kind "knob") ----------------------
    kind = "knob"

    @property
    def size(self) -> int:
        """Number of configs that pass every filter."""
        return len(self.valid_indices()) if self._filters and len(self) <= 200_000 else len(self)

    @staticmethod
    def _indices(cands: Sequence[Any]) -> np.ndarray:
        return np.fromiter((c.index for c in cands), dtype=np.int64, count=len(cands))

    def random_candidates(self, rng: np.random.Generator, n: int, exclude: Any = ()) -> list["ConfigEntity"]:
        excluded = {int(k) for k in exclude}
        return [ConfigEntity(self, i) for i in self.sample(rng, n, exclude=excluded)]

    def mutate(self, candidates: Sequence[Any], rng: np.random.Generator) -> list["ConfigEntity"]:
        return [ConfigEntity(self, int(i)) for i in self.random_walk_batch(self._indices(candidates), rng)]

    def random_walk_batch(self, points: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One random-walk step for every index: one random knob moves to another value (filters respected)."""
        dims = np.asarray(self.dims, dtype=np.int64)
        movable = np.flatnonzero(dims > 1)
        if len(movable) == 0:
            return points.copy()
        scale = np.concatenate([[1], np.cumprod(dims)[:-1]]).astype(np.int64)
        out = points.copy()
        pending = np.arange(len(points))
        for _ in range(20 if self.has_filters else 1):  # re-draw the steps that leave the filtered space
            knob = movable[rng.integers(len(movable), size=len(pending))]
            r = dims[knob]
            digit = (points[pending] // scale[knob]) % r
            step = rng.integers(1, np.iinfo(np.int64).max, size=len(pending)) % (r - 1) + 1
            cand = points[pending] + ((digit + step) % r - digit) * scale[knob]
            ok = self.are_valid(cand)
            out[pending[ok]] = cand[ok]
            pending = pending[~ok]
            if len(pending) == 0:
                break
        return out

    def _feature_tables(self) -> list[np.ndarray]:
        tables = self._tables
        if tables is None or len(tables) != len(self.space_map):
            tables = [np.asarray([knob.numeric(i) for i in range(len(knob))], dtype=np.float32)
                      for knob in self.space_map.values()]
            self._tables = tables
        return tables

    def featurize(self, candidates: Sequence[Any]) -> np.ndarray:
        """AutoTVM's knob features: each knob's entity as numbers, by table lookup."""
        tables = self._feature_tables()
        if not tables:
            return np.zeros((len(candidates), 1), dtype=np.float32)
        d = self.encode(candidates)
        return np.concatenate([t[d[:, k]] for k, t in enumerate(tables)], axis=1)

    def decode(self, data: dict) -> "ConfigEntity":
        """The config a record describes (v1 ``{"index", "entity"}`` or v2 with ``"kind": "knob"``)."""
        if data.get("kind", "knob") != "knob":
            raise ValueError(f"a knob config space cannot decode a {data.get('kind')!r} candidate")
        index = int(data["index"])
        if not 0 <= index < len(self):
            raise ValueError(f"config index {index} is outside this space of {len(self)} configs")
        cfg = ConfigEntity(self, index)
        entity = data.get("entity")
        if entity and cfg.to_json()["entity"] != entity:
            raise ValueError(f"config {index}'s knob values differ from the template's (the template changed)")
        return cfg

    def encode(self, candidates: Sequence[Any]) -> np.ndarray:
        idx = self._indices(candidates)
        out = np.empty((len(idx), len(self._radix)), dtype=np.int64)
        for k, r in enumerate(self._radix):
            out[:, k] = idx % r
            idx = idx // r
        return out

    def _to_indices(self, digits: np.ndarray) -> np.ndarray:
        dims = np.asarray(self._radix, dtype=np.int64)
        scale = np.concatenate([[1], np.cumprod(dims)[:-1]]).astype(np.int64)
        return (np.asarray(digits, dtype=np.int64) * scale[None, :]).sum(axis=1)

    def from_digits(self, digits: np.ndarray) -> list["ConfigEntity"]:
        return [ConfigEntity(self, int(i)) for i in self._to_indices(digits)]

    def valid_digits(self, digits: np.ndarray) -> np.ndarray:
        return self.are_valid(self._to_indices(digits))

    # -- features ---------------------------------------------------------------------------------
    def knob_features(self, index: int) -> np.ndarray:
        """Flattened numeric values of each knob's entity (AutoTVM's "knob" features)."""
        feats: list[float] = []
        for knob, d in zip(self.space_map.values(), self.point2knob(index)):
            feats.extend(knob.numeric(d))
        return np.asarray(feats, dtype=np.float32)

    def __repr__(self) -> str:
        knobs = ", ".join(f"{n}:{type(k).__name__}({len(k)})" for n, k in self.space_map.items())
        return f"ConfigSpace(len={len(self)}, {knobs})"


class ConfigEntity(_ConfigBase):
    """One point of a ``ConfigSpace``; ``cfg[name]`` gives that knob's entity."""

    def __init__(self, space: ConfigSpace, index: int):
        super().__init__()
        self.space = space
        self.index = int(index)
        digits = space.point2knob(self.index)
        self._entity_map = {name: knob[d] for (name, knob), d in zip(space.space_map.items(), digits)}

    def _check_defined(self, name: str) -> None:
        if name not in self._entity_map:
            raise KeyError(f"knob {name!r} is not in this task's config space: the template defines "
                           f"different knobs than when the task was created")

    def __getitem__(self, name: str) -> Any:
        try:
            return self._entity_map[name]
        except KeyError:
            raise KeyError(f"knob {name!r} is not in this config") from None

    @property
    def key(self) -> str:
        return str(self.index)

    def to_json(self) -> dict:
        return {"kind": "knob", "index": self.index,
                "entity": {n: e.to_json() for n, e in self._entity_map.items()}}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConfigEntity) and other.index == self.index

    def __hash__(self) -> int:
        return hash(self.index)

    def __repr__(self) -> str:
        return f"ConfigEntity(index={self.index}, {self._entity_map})"


class FallbackConfig(ConfigSpace):
    """Used when no record applies: knobs are defined on the fly and each takes its first entity
    (no split, no annotation, first candidate)."""

    is_fallback = True

    def __init__(self) -> None:
        super().__init__()
        self.index = -1

    def to_json(self) -> dict:
        return {"index": -1, "entity": {n: k[0].to_json() for n, k in self.space_map.items()}}
