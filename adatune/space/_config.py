"""Config spaces and config entities (AutoTVM's knob model, as a candidate space of kind ``"knob"``).

``ConfigSpace`` collects knobs while a template runs once; a ``ConfigEntity`` replays it with chosen values.
Indexing is AutoTVM's mixed radix (the first knob is the least significant digit). As in AutoTVM v0.18,
``range_length`` counts every index, ``len(space)`` only those passing ``multi_filter``, and ``get`` refuses a
filtered index.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ._candidate import DiscreteSpace
from ._filter import ValidIndexSet
from ._knobs import (
    AnnotateEntity,
    AnnotateSpace,
    KnobSpace,
    OtherOptionEntity,
    OtherOptionSpace,
    ReorderEntity,
    ReorderSpace,
    SplitEntity,
    SplitSpace,
    VirtualAxis,
    _factors,
    extent_of,
)

__all__ = ["ConfigSpace", "ConfigEntity", "FallbackConfigEntity", "FallbackConfig", "InstantiationError"]

_LIST_LIMIT = 1 << 24  # valid_indices() lists at most this many indices
_RNG = np.random.default_rng()  # AutoTVM-style calls without an rng draw from here


class InstantiationError(ValueError):
    """A template rejected its config (``cfg.raise_error``); the measurement reports an instantiation error."""


def _loop_count(loops_or_n: Any) -> int:
    return int(loops_or_n) if isinstance(loops_or_n, int) else len(list(loops_or_n))


class _ConfigBase:
    """What templates see through ``adatune.get_config()``: ``define_*`` calls, ``cfg[name]``, ``cfg.axis``."""

    is_fallback = False
    flop: float = 0.0
    code_hash: str | None = None
    errors: Sequence[str] = ()
    axis = staticmethod(VirtualAxis)
    reduce_axis = staticmethod(VirtualAxis)

    pruned = True

    def prune(self, on: bool) -> None:
        """``prune(False)``: AutoTVM's unpruned space; later splits' ``filter=`` and ``multi_filter`` calls are
        ignored, keeping every factorisation and combination (the large spaces that search methods differ on)."""
        self.pruned = bool(on)

    def add_flop(self, flop: Any) -> None:
        """Let a template state its FLOP count (otherwise TVM's TIR estimate is used)."""
        self.flop = self.flop + float(getattr(flop, "value", flop))

    def define_split(
        self,
        name: str,
        axis: Any,
        policy: str = "factors",
        *,
        sch: Any = None,
        num_outputs: int = 2,
        max_factor: int | None = None,
        filter: Callable | None = None,
        candidate: Sequence | None = None,
        no_tail: bool | None = None,
    ) -> None:
        self._define(
            name,
            lambda: SplitSpace(
                extent_of(axis, sch),
                num_outputs=num_outputs,
                policy=policy,
                max_factor=max_factor,
                filter=filter if self.pruned else None,
                candidate=candidate,
                no_tail=no_tail,
            ),
        )

    def define_reorder(
        self,
        name: str,
        loops: Any,
        policy: str = "all",
        candidate: Sequence | None = None,
        interval: tuple[int, int] | None = None,
    ) -> None:
        self._define(
            name, lambda: ReorderSpace(_loop_count(loops), policy=policy, candidate=candidate, interval=interval)
        )

    def define_annotate(self, name: str, loops: Any, policy: Any = "try_unroll") -> None:
        self._define(name, lambda: AnnotateSpace(_loop_count(loops), policy=policy))

    def define_knob(self, name: str, candidate: Sequence[Any]) -> None:
        self._define(name, lambda: OtherOptionSpace(list(candidate)))

    def multi_filter(self, filter: Callable[[Any], Any]) -> None:
        """Keep only configs for which ``filter(cfg)`` is true (``cfg[name]`` gives a knob's entity)."""

    def raise_error(self, msg: str) -> None:
        """A template rejects its config (AutoTVM): replaying a config raises ``InstantiationError``."""
        raise InstantiationError(msg)

    def valid(self) -> bool:
        return not self.errors

    def _define(self, name: str, make: Callable[[], KnobSpace]) -> None:
        raise NotImplementedError

    def __getitem__(self, name: str) -> Any:
        raise NotImplementedError


class ConfigSpace(_ConfigBase, DiscreteSpace):
    """All knobs of a task. Built by running the template once; then indexable like AutoTVM's space."""

    kind = "knob"

    def __init__(self) -> None:
        self.space_map: dict[str, KnobSpace] = {}
        self._entity_map: dict[str, Any] = {}  # what cfg[name] gives while the template runs
        self._filters: list[Callable[[Any], Any]] = []
        self.errors: list[str] = []
        self.flop = 0.0
        self.cost: float | None = None
        self.clear_cache()

    # -- definition (called from templates) -------------------------------------------------------
    def _define(self, name: str, make: Callable[[], KnobSpace]) -> None:
        """Add a knob; defining a name again replaces it (AutoTVM); a fallback keeps knobs it was given."""
        if self.is_fallback and name in self._entity_map:
            return
        knob = make()
        self.space_map[name] = knob
        self._entity_map[name] = knob[0]
        self.clear_cache()

    def multi_filter(self, filter: Callable[[Any], Any]) -> None:
        """Keep only configs for which ``filter(cfg)`` is true; several filters must all hold. A filter that reads
        the config only through ``cfg[name]`` runs once per combination of the knobs it reads, not once per config."""
        if not callable(filter):
            raise TypeError(f"multi_filter needs a callable, got {filter!r}")
        if self.pruned:
            self.restrict(filter)

    def restrict(self, filter: Callable[[Any], Any]) -> None:
        """``multi_filter`` that an unpruned space applies too (to search only the configs a partial sweep recorded)."""
        if not callable(filter):
            raise TypeError(f"restrict needs a callable, got {filter!r}")
        self._filters.append(filter)
        self.clear_cache()

    def raise_error(self, msg: str) -> None:
        """While collecting the space a template's complaint is kept, not raised (AutoTVM)."""
        self.errors.append(str(msg))

    def clear_cache(self) -> None:
        """Forget the dimensions, valid-index table and feature tables (knobs or filters changed)."""
        self._radix = [len(k) for k in self.space_map.values()]
        self._scale = [math.prod(self._radix[:k]) for k in range(len(self._radix))]
        self._valid_set: ValidIndexSet | None = None
        self._valid_list: np.ndarray | None = None
        self._tables: list[np.ndarray] | None = None

    @property
    def has_filters(self) -> bool:
        return bool(self._filters)

    @property
    def _valid(self) -> ValidIndexSet:
        if self._valid_set is None:
            self._valid_set = ValidIndexSet(
                self._radix,
                list(self.space_map),
                [k.entities for k in self.space_map.values()],
                self._filters,
                lambda i: ConfigEntity(self, i),
            )
        return self._valid_set

    def __getitem__(self, name: str) -> Any:
        """While the template runs to collect knobs, every knob takes its first entity."""
        if name not in self._entity_map:
            raise KeyError(f"knob {name!r} is used before it is defined")
        return self._entity_map[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entity_map)

    # -- indexing ---------------------------------------------------------------------------------
    @property
    def range_length(self) -> int:
        """Number of indices, valid or not (the product of the knobs' sizes)."""
        return math.prod(self._radix)

    def __len__(self) -> int:
        """Number of configs that pass every ``multi_filter`` (AutoTVM v0.18)."""
        return self._valid.count

    @property
    def knob_names(self) -> list[str]:
        return list(self.space_map)

    @property
    def dims(self) -> list[int]:
        """Number of entities of each knob, in definition order."""
        return list(self._radix)

    def point2knob(self, index: int) -> list[int]:
        """Mixed-radix digits of ``index``; the first knob is the least significant."""
        if not 0 <= index < self.range_length:
            raise IndexError(f"config index {index} is outside the space of {self.range_length} indices")
        digits = []
        for r in self._radix:
            digits.append(int(index % r))
            index //= r
        return digits

    def knob2point(self, digits: Sequence[int]) -> int:
        if len(digits) != len(self._radix):
            raise ValueError(f"expected {len(self._radix)} knob indices, got {len(digits)}")
        for d, r in zip(digits, self._radix):
            if not 0 <= d < r:
                raise IndexError(f"knob index {d} is outside [0, {r})")
        return sum(int(d) * s for d, s in zip(digits, self._scale))

    def get(self, index: int) -> ConfigEntity:
        """The config at ``index`` of the whole range; ``IndexError`` when out of range or filtered out."""
        index = int(index)
        if not 0 <= index < self.range_length:
            raise IndexError(f"Index out of range: size {self.range_length}, got index {index}")
        if self._filters and not self._valid.is_valid(index):
            raise IndexError(
                f"config index {index} is rejected by the space's multi_filter (check is_index_valid first)"
            )
        return ConfigEntity(self, index)

    def is_index_valid(self, index: int) -> bool:
        """True when ``index`` is in range and the config passes every ``multi_filter``."""
        return self._valid.is_valid(int(index))

    def are_valid(self, indices: np.ndarray) -> np.ndarray:
        """Vectorised ``is_index_valid``."""
        return self._valid.are_valid(np.asarray(indices, dtype=np.int64))

    def valid_indices(self) -> np.ndarray:
        """Every valid index, ascending (listed once and cached)."""
        if self._valid_list is None:
            if len(self) > _LIST_LIMIT:
                raise ValueError(
                    f"{len(self)} valid configs are too many to list; use sample, get_next_index or subrange_length"
                )
            self._valid_list = self._valid.indices_in(0, self.range_length)
        return self._valid_list

    def subrange_length(self, start: int, end: int) -> int:
        """Number of valid indices in ``[start, end)``."""
        if not 0 <= start <= end <= self.range_length:
            raise ValueError(f"subrange [{start}, {end}) is not within [0, {self.range_length}]")
        return self._valid.count_below(end) - self._valid.count_below(start)

    def get_next_index(self, index: int, n: int = 1, start: int | None = None, end: int | None = None) -> int | None:
        """The ``n``-th valid index after ``index`` (before it for negative ``n``) within ``[start, end)``, or None."""
        if n == 0:
            raise ValueError("get_next_index needs a non-zero step n")
        start, end = start or 0, end or self.range_length
        valid = self._valid
        rank = valid.count_below(index + 1) + n - 1 if n > 0 else valid.count_below(index) + n
        if not 0 <= rank < valid.count:
            return None
        found = valid.select(rank)
        return found if start <= found < end else None

    def get_rand_index(
        self,
        start: int | None = None,
        end: int | None = None,
        to_exclude: Iterable[int] | None = None,
        rng: np.random.Generator | None = None,
    ) -> int:
        """A uniformly random valid index in ``[start, end)`` not in ``to_exclude``."""
        start, end = start or 0, end or self.range_length
        if not 0 <= start < end <= self.range_length:
            raise ValueError(f"range [{start}, {end}) is not a non-empty part of [0, {self.range_length})")
        got = self._valid.sample(rng or _RNG, 1, start, end, {int(i) for i in to_exclude or ()})
        if not got:
            raise ValueError(f"no valid config index is left in [{start}, {end}) outside the excluded ones")
        return got[0]

    def sample_ints(self, m: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """``m`` distinct valid indices drawn uniformly (AutoTVM's ``sample_ints``)."""
        if m > len(self):
            raise ValueError(f"cannot draw {m} distinct configs from a space of {len(self)}")
        return np.asarray(self.sample(rng or _RNG, m), dtype=np.int64)

    def sample(self, rng: np.random.Generator, n: int, exclude: Iterable[int] = ()) -> list[int]:
        """Up to ``n`` distinct valid indices, none in ``exclude``, drawn uniformly at random."""
        return self._valid.sample(rng, n, 0, self.range_length, {int(e) for e in exclude})

    def random_walk(self, index: int, rng: np.random.Generator | None = None) -> int:
        """A valid neighbour (``random_walk_batch``); ``index`` itself when no neighbour passes the filters."""
        return int(self.random_walk_batch(np.asarray([index], dtype=np.int64), rng or _RNG)[0])

    def random_walk_batch(self, points: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One random-walk step for every index: one random knob moves to another value (filters respected)."""
        points = np.asarray(points, dtype=np.int64)
        dims = np.asarray(self._radix, dtype=np.int64)
        movable = np.flatnonzero(dims > 1)
        if len(movable) == 0:
            return points.copy()
        scale = np.asarray(self._scale, dtype=np.int64)
        out = points.copy()
        pending = np.arange(len(points))
        for _ in range(8 if self._filters else 1):  # re-draw the steps that leave the filtered space
            knob = movable[rng.integers(len(movable), size=len(pending))]
            r = dims[knob]
            digit = (points[pending] // scale[knob]) % r
            step = rng.integers(1, np.iinfo(np.int64).max, size=len(pending)) % (r - 1) + 1
            cand = points[pending] + ((digit + step) % r - digit) * scale[knob]
            ok = self.are_valid(cand)
            out[pending[ok]] = cand[ok]
            pending = pending[~ok]
            if len(pending) == 0:
                return out
        for i in pending:  # few valid neighbours: list them all and pick one
            near = self._neighbours(int(points[i]))
            near = near[self.are_valid(near)]
            if len(near):
                out[i] = near[rng.integers(len(near))]
        return out

    def _neighbours(self, index: int) -> np.ndarray:
        digits = self.point2knob(index)
        return np.asarray(
            [index + (v - d) * s for d, r, s in zip(digits, self._radix, self._scale) for v in range(r) if v != d],
            dtype=np.int64,
        )

    # -- the candidate protocol (knob configs are candidates of kind "knob") ----------------------
    @property
    def size(self) -> int:
        """Number of configs that pass every filter."""
        return len(self)

    @staticmethod
    def _indices(cands: Sequence[Any]) -> np.ndarray:
        return np.fromiter((c.index for c in cands), dtype=np.int64, count=len(cands))

    def random_candidates(self, rng: np.random.Generator, n: int, exclude: Collection[str] = ()) -> list[ConfigEntity]:
        excluded = {int(k) for k in exclude if str(k).isdigit()}
        return [ConfigEntity(self, i) for i in self.sample(rng, n, exclude=excluded)]

    def mutate(self, candidates: Sequence[Any], rng: np.random.Generator) -> list[ConfigEntity]:
        return [ConfigEntity(self, int(i)) for i in self.random_walk_batch(self._indices(candidates), rng)]

    def _feature_tables(self) -> list[np.ndarray]:
        if self._tables is None:
            self._tables = [
                np.asarray([knob.numeric(i) for i in range(len(knob))], dtype=np.float32)
                for knob in self.space_map.values()
            ]
        return self._tables

    def featurize(self, candidates: Sequence[Any]) -> np.ndarray:
        """AutoTVM's knob features: each knob's entity as numbers (``knob.numeric``), by table lookup."""
        tables = self._feature_tables()
        if not tables:
            return np.zeros((len(candidates), 1), dtype=np.float32)
        d = self.encode(candidates)
        return np.concatenate([t[d[:, k]] for k, t in enumerate(tables)], axis=1)

    def knob_features(self, index: int) -> np.ndarray:
        """Flattened numeric values of each knob's entity for one index (a row of ``featurize``)."""
        return self.featurize([ConfigEntity(self, int(index))])[0]

    def decode(self, data: dict) -> ConfigEntity:
        """The config a record describes: v2 ``{"kind": "knob", "index", "entity"}``, v1 ``{"index", "entity"}``
        or AutoTVM's ``to_json_dict`` form. ``ValueError`` when it does not belong to this space."""
        if not isinstance(data, dict) or "index" not in data:
            raise ValueError(f"a knob config needs an 'index', got {data!r}")
        if data.get("kind", "knob") != "knob":
            raise ValueError(f"a knob config space cannot decode a {data.get('kind')!r} candidate")
        index = int(data["index"])
        if not 0 <= index < self.range_length:
            raise ValueError(
                f"config index {index} is outside this space of {self.range_length} indices (the template changed)"
            )
        cfg = ConfigEntity(self, index)
        entity = data.get("entity")
        if entity:
            given = _entity_json(entity)
            mine = {n: e.to_json() for n, e in cfg._entity_map.items()}
            # a knob the template gained after the record was written reads as its first value (a template adds
            # knobs last, their first value its old behaviour, so old indices stay where they were)
            given |= {n: self.space_map[n][0].to_json() for n in mine if n not in given}
            if given != mine:
                wrong = sorted(set(given) ^ set(mine)) or [n for n in mine if given[n] != mine[n]]
                raise ValueError(
                    f"config {index} does not match this space at knob(s) {', '.join(wrong)}: "
                    f"recorded {[given.get(n) for n in wrong]}, space has {[mine.get(n) for n in wrong]} "
                    f"(the template changed)"
                )
        if self._filters and not self._valid.is_valid(index):
            raise ValueError(f"config {index} is rejected by this space's multi_filter (the template changed)")
        return cfg

    def encode(self, candidates: Sequence[Any]) -> np.ndarray:
        idx = self._indices(candidates)
        out = np.empty((len(idx), len(self._radix)), dtype=np.int64)
        for k, r in enumerate(self._radix):
            out[:, k] = idx % r
            idx = idx // r
        return out

    def _to_indices(self, digits: np.ndarray) -> np.ndarray:
        digits = np.asarray(digits, dtype=np.int64).reshape(-1, len(self._radix))
        dims = np.asarray(self._radix, dtype=np.int64)
        if ((digits < 0) | (digits >= dims[None, :])).any():
            raise ValueError(f"digits outside the knob sizes {self._radix}")
        return (digits * np.asarray(self._scale, dtype=np.int64)[None, :]).sum(axis=1)

    def from_digits(self, digits: np.ndarray) -> list[ConfigEntity]:
        return [ConfigEntity(self, int(i)) for i in self._to_indices(digits)]

    def valid_digits(self, digits: np.ndarray) -> np.ndarray:
        return self.are_valid(self._to_indices(digits))

    def __repr__(self) -> str:
        knobs = "".join(
            f"  {i:2d} {n}: {type(k).__name__}(len={len(k)})\n" for i, (n, k) in enumerate(self.space_map.items())
        )
        return f"ConfigSpace (len={len(self)}, range_length={self.range_length}, space_map=\n{knobs})"


_TAGS = {SplitEntity: "sp", ReorderEntity: "re", AnnotateEntity: "an", OtherOptionEntity: "ot"}
_FROM_TAG: dict[str, Callable[[Any], Any]] = {
    "sp": SplitEntity,
    "re": ReorderEntity,
    "an": AnnotateEntity,
    "ot": OtherOptionEntity,
}


def _entity_json(entity: Any) -> dict[str, Any]:
    """``{name: value}`` from a record's entity: adatune's dict or AutoTVM's ``[[name, tag, value], ...]``."""
    if isinstance(entity, dict):
        return dict(entity)
    try:
        return {str(name): value for name, _tag, value in entity}
    except (TypeError, ValueError):
        raise ValueError(f"cannot read a config entity from {entity!r}") from None


class ConfigEntity(_ConfigBase):
    """One point of a ``ConfigSpace``; ``cfg[name]`` gives that knob's entity (looked up on first use)."""

    def __init__(self, space: ConfigSpace | None, index: int, entity_map: dict[str, Any] | None = None):
        self.space = space
        self.index = index
        self._entities = entity_map

    @property
    def _entity_map(self) -> dict[str, Any]:
        if self._entities is None:
            space = self.space
            assert space is not None  # a detached config always has its entities
            index, ents = self.index, {}
            for name, knob in space.space_map.items():
                ents[name] = knob.entities[index % len(knob)]
                index //= len(knob)
            self._entities = ents
        return self._entities

    @_entity_map.setter
    def _entity_map(self, entities: dict[str, Any]) -> None:  # AutoTVM code assigns it (a config's entities)
        self._entities = dict(entities)

    def _define(self, name: str, make: Callable[[], KnobSpace]) -> None:
        if name not in self._entity_map:
            raise KeyError(
                f"knob {name!r} is not in this task's config space: the template defines "
                f"different knobs than when the task was created"
            )

    def __getitem__(self, name: str) -> Any:
        try:
            return self._entity_map[name]
        except KeyError:
            raise KeyError(f"knob {name!r} is not in this config") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._entity_map)

    @property
    def key(self) -> str:
        return str(self.index)

    def to_json(self) -> dict:
        return {
            "kind": "knob",
            "index": int(self.index),
            "entity": {n: e.to_json() for n, e in self._entity_map.items()},
        }

    def to_json_dict(self) -> dict:
        """AutoTVM's form: ``{"index", "code_hash", "entity": [[name, "sp"|"re"|"an"|"ot", value], ...]}``."""
        return {
            "index": int(self.index),
            "code_hash": self.code_hash,
            "entity": [[n, _TAGS[type(e)], e.to_json()] for n, e in self._entity_map.items()],
        }

    @staticmethod
    def from_json_dict(json_dict: dict, space: ConfigSpace | None = None) -> ConfigEntity:
        """A config from ``to_json_dict``'s form; checked against ``space`` when one is given."""
        if space is not None:
            return space.decode(json_dict)
        entities: dict[str, Any] = {}
        for item in json_dict["entity"]:
            name, tag, value = item
            if tag not in _FROM_TAG:
                raise ValueError(f"unknown knob type {tag!r} for knob {name!r} (expected sp, re, an or ot)")
            entities[str(name)] = _FROM_TAG[tag](value)
        return ConfigEntity(None, int(json_dict["index"]), entities)

    def get_flatten_feature(self) -> np.ndarray:
        """AutoTVM's flat numeric vector: split sizes, permutations, one-hot annotations, option values or indices."""
        fea: list[float] = []
        for name, e in self._entity_map.items():
            if isinstance(e, SplitEntity):
                fea.extend(e.size)
            elif isinstance(e, ReorderEntity):
                fea.extend(e.perm)
            elif isinstance(e, AnnotateEntity):
                for ann in e.anns:
                    fea.extend(float(ann == a) for a in ("none", "vec", "unroll", "parallel"))
            elif isinstance(e.val, (bool, int, float)):
                fea.append(float(e.val))
            else:
                knob = self.space.space_map[name] if self.space is not None else None
                fea.append(float(knob.index(e)) if knob is not None else 0.0)
        return np.asarray(fea, dtype=np.float32)

    def get_other_option(self) -> dict[str, Any]:
        """Values of the knobs defined by ``define_knob``, by knob name."""
        return {n: e.val for n, e in self._entity_map.items() if isinstance(e, OtherOptionEntity)}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfigEntity) or other.index != self.index:
            return False
        if self.space is other.space:
            return True
        if self.space is None or other.space is None:
            return self._entity_map == other._entity_map
        return self.space.dims == other.space.dims and self.space.knob_names == other.space.knob_names

    def __hash__(self) -> int:
        return hash(self.index)

    def __repr__(self) -> str:
        return f"{list(self._entity_map.items())},{self.code_hash},{self.index}"


class FallbackConfigEntity(ConfigSpace):
    """The config of a template called with no applicable record: every knob takes its first entity unless
    set by hand (``cfg[name] = entity``, ``fallback_split``, ``fallback_with_reference_log``)."""

    is_fallback = True

    def __init__(self) -> None:
        super().__init__()
        self.index = -1

    def __setitem__(self, name: str, entity: Any) -> None:
        self._entity_map[name] = entity

    def fallback_split(self, name: str, constraints: Sequence[int]) -> None:
        """Set split ``name`` to the largest factors within ``constraints`` (max tile per output, -1 = any),
        innermost first: ``[-1, 8, 4]`` on 128 gives ``[4, 8, 4]``, on 49 gives ``[7, 7, 1]``."""
        space = self.space_map.get(name)
        if not isinstance(space, SplitSpace):
            raise KeyError(f"fallback_split: {name!r} is not a split knob of this config")
        if len(constraints) != space.num_outputs:
            raise ValueError(
                f"fallback_split: {name!r} has {space.num_outputs} outputs, got {len(constraints)} constraints"
            )
        left, sizes = space.extent, [0] * space.num_outputs
        for i in reversed(range(space.num_outputs)):
            fits = [f for f in _factors(left) if constraints[i] == -1 or f <= constraints[i]]
            if not fits:
                raise RuntimeError(
                    f"cannot find a feasible fallback split for knob {name!r}: no factor of {left} "
                    f"is at most {constraints[i]}"
                )
            sizes[i] = fits[-1]
            left //= fits[-1]
        self._entity_map[name] = SplitEntity(sizes)

    def fallback_with_reference_log(self, ref_log: Iterable[tuple[Any, Any]]) -> None:
        """Mimic the tuned config whose split extents share most factors with this config's (AutoTVM's
        data-driven fallback): its split tiles as constraints, its other knobs copied."""
        splits = [n for n, k in self.space_map.items() if isinstance(k, SplitSpace)]
        mine = {n: set(_factors(self.space_map[n].extent)) for n in splits}  # type: ignore[attr-defined]
        best, best_score = None, 0.0
        for inp, _res in ref_log:
            cfg = inp.config
            score = 0.0
            for n in splits:
                try:
                    theirs = set(_factors(math.prod(abs(s) for s in cfg[n].size)))
                except (KeyError, AttributeError):
                    continue
                score += len(mine[n] & theirs) / len(mine[n])
            if score > best_score:
                best, best_score = cfg, score
        if best is None:
            return
        for n in self.space_map:
            if n in mine:
                self.fallback_split(n, [-1] + list(best[n].size[1:]))
            else:
                try:
                    self._entity_map[n] = best[n]
                except KeyError:
                    continue

    def to_json(self) -> dict:
        return {"index": -1, "entity": {n: e.to_json() for n, e in self._entity_map.items()}}

    def __repr__(self) -> str:
        return f"{list(self._entity_map.items())},{self.code_hash}"


FallbackConfig = FallbackConfigEntity  # the name earlier adatune releases used
