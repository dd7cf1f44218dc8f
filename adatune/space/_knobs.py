"""Knobs of a config space: finite, ordered lists of entities (split, reorder, annotate, or a plain "other option"
value), each of which applies itself to a ``tvm.s_tir.Schedule``."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "KnobSpace",
    "SplitSpace",
    "ReorderSpace",
    "AnnotateSpace",
    "OtherOptionSpace",
    "SplitEntity",
    "ReorderEntity",
    "AnnotateEntity",
    "OtherOptionEntity",
    "VirtualAxis",
    "extent_of",
]


class VirtualAxis:
    """AutoTVM's ``cfg.axis(...)``: a named loop extent a knob can be defined over (no schedule needed)."""

    _count = 0

    def __init__(self, var: Any, name: str | None = None):
        self.length = extent_of(var)
        if name is None:
            name = getattr(getattr(var, "var", None), "name", None) or f"axis_{VirtualAxis._count}"
            VirtualAxis._count += 1
        self.name = str(name)

    def __repr__(self) -> str:
        return f"vaxis({self.name}, {self.length})"


def extent_of(axis: Any, sch: Any = None) -> int:
    """Integer extent of an int, a ``cfg.axis``, a loop (For node / LoopRV with its schedule), a Range or an IterVar."""
    if isinstance(axis, (int,)) and not isinstance(axis, bool):
        return int(axis)
    if isinstance(axis, VirtualAxis):
        return axis.length
    if sch is not None and type(axis).__name__ == "LoopRV":
        axis = sch.get(axis)
    if type(axis).__name__ == "LoopRV":
        raise TypeError("a LoopRV needs its schedule to know its extent: pass sch=... or the loop node sch.get(loop)")
    if hasattr(axis, "extent"):  # a For node or a Range
        return int(axis.extent)
    if hasattr(axis, "dom"):  # te.IterVar
        return int(axis.dom.extent)
    if hasattr(axis, "value"):  # IntImm
        return int(axis.value)
    raise TypeError(f"cannot take the extent of {axis!r}: expected an int, a loop or an IterVar")


def _loops_arg(args: tuple) -> Any:
    """``apply(sch, loops)`` on TIR, or AutoTVM's ``apply(sch, op, loops)`` (the op is not needed on TIR)."""
    if len(args) not in (1, 2):
        raise TypeError(f"apply takes (sch, loop[s]) or (sch, op, loop[s]), got {len(args) + 1} arguments")
    return args[-1]


# ----------------------------------------------------------------------------------------- entities
class SplitEntity:
    """Split factors, outermost first; ``size[0] == -1`` means "whatever is left" (a non-perfect split)."""

    def __init__(self, size: Sequence[int]):
        self.size = [int(s) for s in size]

    def apply(self, sch: Any, *op_and_loop: Any) -> list:
        """Split the loop (``apply(sch, loop)`` or AutoTVM's ``apply(sch, op, loop)``); new loops, outermost first."""
        factors = [None if s == -1 else s for s in self.size]
        return list(sch.split(_loops_arg(op_and_loop), factors))

    def to_json(self) -> list:
        return list(self.size)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SplitEntity) and self.size == other.size

    def __hash__(self) -> int:
        return hash(("sp", tuple(self.size)))

    def __repr__(self) -> str:
        return str(self.size)


class ReorderEntity:
    """A permutation of loop positions."""

    def __init__(self, perm: Sequence[int]):
        self.perm = [int(p) for p in perm]

    def apply(self, sch: Any, *op_and_loops: Any) -> list:
        """Reorder the loops (given in their current order) and return them in the new order."""
        loops = _loops_arg(op_and_loops)
        ordered = [loops[i] for i in self.perm if i < len(loops)]
        if [i for i in self.perm if i < len(loops)] != sorted(i for i in self.perm if i < len(loops)):
            sch.reorder(*ordered)
        return ordered

    def to_json(self) -> list:
        return list(self.perm)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReorderEntity) and self.perm == other.perm

    def __hash__(self) -> int:
        return hash(("re", tuple(self.perm)))

    def __repr__(self) -> str:
        return str(self.perm)


class AnnotateEntity:
    """One annotation per loop: 'none', 'unroll', 'vec' or 'parallel'."""

    def __init__(self, anns: Sequence[str]):
        self.anns = [str(a) for a in anns]

    def apply(self, sch: Any, *op_and_loops: Any) -> list:
        """Annotate the loops (``apply(sch, loops)`` or ``apply(sch, op, loops)``) and return them."""
        loops = list(_loops_arg(op_and_loops))
        for loop, ann in zip(loops, self.anns):
            if ann == "unroll":
                sch.unroll(loop)
            elif ann == "vec":
                sch.vectorize(loop)
            elif ann == "parallel":
                sch.parallel(loop)
            elif ann != "none":
                raise ValueError(f"unknown annotation {ann!r}")
        return loops

    def to_json(self) -> list:
        return list(self.anns)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnnotateEntity) and self.anns == other.anns

    def __hash__(self) -> int:
        return hash(("an", tuple(self.anns)))

    def __repr__(self) -> str:
        return str(self.anns)


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
        return str(self.val)


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
    ``candidate``). Inner factors are limited by ``max_factor``; ``filter`` drops entities; ``no_tail`` keeps
    only splits whose factors multiply to the extent (the default for ``factors``)."""

    kind = "split"

    def __init__(
        self,
        extent: int,
        num_outputs: int = 2,
        policy: str = "factors",
        max_factor: int | None = None,
        filter: Callable[[SplitEntity], bool] | None = None,
        candidate: Sequence[Sequence[int]] | None = None,
        no_tail: bool | None = None,
    ):
        if extent < 1:
            raise ValueError(f"split extent must be positive, got {extent}")
        if num_outputs < 2:
            raise ValueError(f"num_outputs must be at least 2, got {num_outputs}")
        self.extent, self.num_outputs, self.policy = extent, num_outputs, policy
        self.product, self.num_output = extent, num_outputs  # AutoTVM's names
        no_tail = policy == "factors" if no_tail is None else no_tail
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
                if prod > extent or (no_tail and extent % prod):
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
    """Permutations of ``n`` loops: ``all``, ``identity``, ``interval_all`` (every order of the loops in
    ``interval=(begin, end)``, the others kept) or an explicit ``candidate`` list."""

    kind = "reorder"

    def __init__(
        self,
        n: int,
        policy: str = "all",
        candidate: Sequence[Sequence[int]] | None = None,
        interval: tuple[int, int] | None = None,
    ):
        if policy == "all":
            perms = list(itertools.permutations(range(n)))
        elif policy == "identity":
            perms = [tuple(range(n))]
        elif policy == "interval_all":
            if interval is None or not 0 <= interval[0] <= interval[1] <= n:
                raise ValueError(f"policy='interval_all' needs interval=(begin, end) within [0, {n}], got {interval}")
            begin, end = interval
            perms = [tuple(range(begin)) + p + tuple(range(end, n)) for p in itertools.permutations(range(begin, end))]
        elif policy == "candidate":
            if not candidate:
                raise ValueError("policy='candidate' needs candidate=[[...], ...]")
            perms = [tuple(c) for c in candidate]
            for p in perms:
                if sorted(p) != list(range(n)):
                    raise ValueError(f"candidate {list(p)} is not a permutation of range({n})")
        else:
            raise ValueError(f"unknown reorder policy {policy!r}: use all, identity, interval_all or candidate")
        super().__init__([ReorderEntity(p) for p in perms])

    def numeric(self, i: int) -> list[float]:
        return [float(p) for p in self.entities[i].perm]

    def entity_from_json(self, value: Any) -> ReorderEntity:
        return ReorderEntity(value)


def _annotation_choices(policy: str) -> list[str] | None:
    """AutoTVM's policy names: ``try`` means "or none", the rest are annotations joined by ``_``
    (``try_unroll_vec`` -> none, unroll, vec); ``try_parallel`` is adatune's CPU addition."""
    choices = policy.replace("try", "none").split("_")
    return choices if choices and all(c in ("none", "unroll", "vec", "parallel") for c in choices) else None


class AnnotateSpace(KnobSpace):
    """Annotation choices for ``n`` loops, at most one vectorised (as AutoTVM); ``policy``: a name (``"try_unroll"``,
    ``"try_vec"``, ``"try_unroll_vec"``, ``"unroll"``, ``"try_parallel"``) or the annotations allowed on every loop."""

    kind = "annotate"

    def __init__(self, n: int, policy: str | Sequence[str] = "try_unroll"):
        choices = _annotation_choices(policy) if isinstance(policy, str) else list(policy)
        if not choices:
            raise ValueError(
                f"unknown annotate policy {policy!r}: use e.g. try_unroll, try_vec, try_unroll_vec, "
                f"try_parallel or a list of annotations"
            )
        anns = [c for c in itertools.product(choices, repeat=n) if c.count("vec") <= 1]
        super().__init__([AnnotateEntity(c) for c in anns])

    _CODES = {"none": 0.0, "vec": 1.0, "unroll": 2.0, "parallel": 3.0}

    def numeric(self, i: int) -> list[float]:
        return [self._CODES[a] for a in self.entities[i].anns]

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
