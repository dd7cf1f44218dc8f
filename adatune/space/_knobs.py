"""Knobs of a config space and the entities they take (AutoTVM's programming model on TIR schedules).

A knob is a finite, ordered list of entities. A split entity splits one loop into ``num_outputs`` loops;
a reorder entity permutes loops; an annotate entity marks loops unroll/vectorize/parallel; an "other
option" entity is a plain value. Every entity knows how to apply itself to a ``tvm.s_tir.Schedule``.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Sequence

__all__ = [
    "KnobSpace", "SplitSpace", "ReorderSpace", "AnnotateSpace", "OtherOptionSpace",
    "SplitEntity", "ReorderEntity", "AnnotateEntity", "OtherOptionEntity", "extent_of",
]


def extent_of(axis: Any, sch: Any = None) -> int:
    """Integer extent of an int, a loop (For node / LoopRV with its schedule), a Range or an IterVar."""
    if isinstance(axis, (int,)) and not isinstance(axis, bool):
        return int(axis)
    if sch is not None and type(axis).__name__ == "LoopRV":
        axis = sch.get(axis)
    if type(axis).__name__ == "LoopRV":
        raise TypeError("a LoopRV needs its schedule to know its extent: pass sch=... "
                        "or the loop node sch.get(loop)")
    if hasattr(axis, "extent"):  # a For node or a Range
        return int(axis.extent)
    if hasattr(axis, "dom"):  # te.IterVar
        return int(axis.dom.extent)
    if hasattr(axis, "value"):  # IntImm
        return int(axis.value)
    raise TypeError(f"cannot take the extent of {axis!r}: expected an int, a loop or an IterVar")


# ----------------------------------------------------------------------------------------- entities
class SplitEntity:
    """Split factors, outermost first; ``size[0] == -1`` means "whatever is left" (a non-perfect split)."""

    def __init__(self, size: Sequence[int]):
        self.size = tuple(int(s) for s in size)

    def apply(self, sch: Any, loop: Any) -> list:
        """Split ``loop`` of ``sch`` and return the new loops, outermost first."""
        factors = [None if s == -1 else s for s in self.size]
        return list(sch.split(loop, factors))

    def to_json(self) -> list:
        return list(self.size)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SplitEntity) and self.size == other.size

    def __hash__(self) -> int:
        return hash(("split", self.size))

    def __repr__(self) -> str:
        return f"sp{list(self.size)}"


class ReorderEntity:
    """A permutation of loop positions."""

    def __init__(self, perm: Sequence[int]):
        self.perm = tuple(int(p) for p in perm)

    def apply(self, sch: Any, loops: Sequence[Any]) -> list:
        """Reorder ``loops`` (given in their current order) and return them in the new order."""
        ordered = [loops[i] for i in self.perm]
        if list(self.perm) != sorted(self.perm):
            sch.reorder(*ordered)
        return ordered

    def to_json(self) -> list:
        return list(self.perm)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReorderEntity) and self.perm == other.perm

    def __hash__(self) -> int:
        return hash(("re", self.perm))

    def __repr__(self) -> str:
        return f"re{list(self.perm)}"


class AnnotateEntity:
    """One annotation per loop: 'none', 'unroll', 'vec' or 'parallel'."""

    def __init__(self, anns: Sequence[str]):
        self.anns = tuple(str(a) for a in anns)

    def apply(self, sch: Any, loops: Sequence[Any]) -> None:
        for loop, ann in zip(loops, self.anns):
            if ann == "unroll":
                sch.unroll(loop)
            elif ann == "vec":
                sch.vectorize(loop)
            elif ann == "parallel":
                sch.parallel(loop)
            elif ann != "none":
                raise ValueError(f"unknown annotation {ann!r}")

    def to_json(self) -> list:
        return list(self.anns)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnnotateEntity) and self.anns == other.anns

    def __hash__(self) -> int:
        return hash(("an", self.anns))

    def __repr__(self) -> str:
        return f"an{list(self.anns)}"


class OtherOptionEntity:
    """A plain value chosen from a candidate list (``cfg["vec"].val``)."""

    def __init__(self, val: Any):
        self.val = val

    def to_json(self) -> Any:
        return self.val

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OtherOptionEntity) and self.val == other.val

    def __hash__(self) -> int:
        return hash(("ot", repr(self.val)))

    def __repr__(self) -> str:
        return f"ot({self.val!r})"


# ------------------------------------------------------------------------------------------ spaces
class KnobSpace:
    """An ordered list of entities; ``entities[i]`` is the knob's value at index i."""

    kind = "knob"

    def __init__(self, entities: list):
        if not entities:
            raise ValueError(f"{type(self).__name__}: no candidate passes the filter")
        self.entities = entities

    def __len__(self) -> int:
        return len(self.entities)

    def __getitem__(self, i: int) -> Any:
        return self.entities[i]

    def index(self, entity: Any) -> int:
        return self.entities.index(entity)

    def numeric(self, i: int) -> list[float]:
        """Numeric features of entity i for cost models (one or more floats)."""
        return [float(i)]

    def entity_from_json(self, value: Any) -> Any:
        raise NotImplementedError


def _factors(n: int) -> list[int]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _split_sizes(n: int, num_outputs: int, allowed: Callable[[int], list[int]]) -> list[tuple[int, ...]]:
    """All perfect splits of n into num_outputs factors whose inner factors come from ``allowed``."""
    if num_outputs == 1:
        return [(n,)]
    out = []
    for f in allowed(n):
        if n % f:
            continue
        for rest in _split_sizes(n // f, num_outputs - 1, allowed):
            out.append(rest + (f,))
    return out


class SplitSpace(KnobSpace):
    """Ways to split a loop of a given extent (AutoTVM policies ``factors``, ``power2``, ``verbose``,
    ``candidate``). Inner factors are limited by ``max_factor``; ``filter`` drops entities."""

    kind = "split"

    def __init__(self, extent: int, num_outputs: int = 2, policy: str = "factors",
                 max_factor: int | None = None, filter: Callable[[SplitEntity], bool] | None = None,
                 candidate: Sequence[Sequence[int]] | None = None):
        if extent < 1:
            raise ValueError(f"split extent must be positive, got {extent}")
        if num_outputs < 2:
            raise ValueError(f"num_outputs must be at least 2, got {num_outputs}")
        self.extent, self.num_outputs, self.policy = extent, num_outputs, policy
        cap = max_factor if max_factor is not None else extent
        if policy == "factors":
            sizes = _split_sizes(extent, num_outputs, lambda m: [d for d in _factors(m) if d <= cap])
        elif policy in ("power2", "verbose"):
            pow2 = [1 << k for k in range(0, int(math.log2(max(extent, 1))) + 1) if (1 << k) <= cap]
            inner = set(pow2)
            if policy == "verbose":
                inner |= {d for d in _factors(extent) if d <= cap}
            inner_list = sorted(inner)
            sizes = []
            for combo in itertools.product(inner_list, repeat=num_outputs - 1):
                prod = math.prod(combo)
                if prod > extent:
                    continue
                outer = extent // prod if extent % prod == 0 else -1
                sizes.append((outer,) + tuple(combo))
        elif policy == "candidate":
            if not candidate:
                raise ValueError("policy='candidate' needs candidate=[[...], ...]")
            sizes = []
            for c in candidate:
                if len(c) != num_outputs:
                    raise ValueError(f"candidate {list(c)} has {len(c)} factors, expected {num_outputs}")
                sizes.append(tuple(int(x) for x in c))
        else:
            raise ValueError(f"unknown split policy {policy!r}: use factors, power2, verbose or candidate")
        entities = [SplitEntity(s) for s in sizes]
        if filter is not None:
            entities = [e for e in entities if filter(e)]
        super().__init__(entities)

    def numeric(self, i: int) -> list[float]:
        return [math.log2(s) if s > 0 else -1.0 for s in self.entities[i].size]

    def entity_from_json(self, value: Any) -> SplitEntity:
        return SplitEntity(value)


class ReorderSpace(KnobSpace):
    """Permutations of ``n`` loops: ``all``, ``identity``, or an explicit ``candidate`` list."""

    kind = "reorder"

    def __init__(self, n: int, policy: str = "all", candidate: Sequence[Sequence[int]] | None = None):
        if policy == "all":
            perms = list(itertools.permutations(range(n)))
        elif policy == "identity":
            perms = [tuple(range(n))]
        elif policy == "candidate":
            if not candidate:
                raise ValueError("policy='candidate' needs candidate=[[...], ...]")
            perms = [tuple(c) for c in candidate]
            for p in perms:
                if sorted(p) != list(range(n)):
                    raise ValueError(f"candidate {list(p)} is not a permutation of range({n})")
        else:
            raise ValueError(f"unknown reorder policy {policy!r}: use all, identity or candidate")
        super().__init__([ReorderEntity(p) for p in perms])

    def entity_from_json(self, value: Any) -> ReorderEntity:
        return ReorderEntity(value)


class AnnotateSpace(KnobSpace):
    """Annotation choices for ``n`` loops; ``policy`` is a list of allowed annotations per loop set,
    e.g. ``["none", "unroll"]`` applies to every loop, or ``"try_unroll"``/``"try_vec"``/``"try_unroll_vec"``."""

    kind = "annotate"
    _NAMED = {"try_unroll": ["none", "unroll"], "try_vec": ["none", "vec"],
              "try_unroll_vec": ["none", "unroll", "vec"], "try_parallel": ["none", "parallel"]}

    def __init__(self, n: int, policy: str | Sequence[str] = "try_unroll"):
        choices = self._NAMED.get(policy) if isinstance(policy, str) else list(policy)
        if choices is None:
            raise ValueError(f"unknown annotate policy {policy!r}: use {sorted(self._NAMED)} or a list")
        super().__init__([AnnotateEntity(c) for c in itertools.product(choices, repeat=n)])

    def entity_from_json(self, value: Any) -> AnnotateEntity:
        return AnnotateEntity(value)


class OtherOptionSpace(KnobSpace):
    """A plain list of candidate values."""

    kind = "other"

    def __init__(self, candidates: Sequence[Any]):
        super().__init__([OtherOptionEntity(v) for v in candidates])

    def numeric(self, i: int) -> list[float]:
        v = self.entities[i].val
        if isinstance(v, (bool, int, float)):
            return [float(v)]
        return [float(i)]

    def entity_from_json(self, value: Any) -> OtherOptionEntity:
        return OtherOptionEntity(value)
