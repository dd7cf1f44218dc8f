"""Loops the SIMD width does not divide, vectorised: whole vectors first, then halving vectors, the rest scalar.

TVM vectorises a loop only over a constant extent. Split by the width over a symbolic one (a softmax's T columns),
the inner loop carries the guard ``jo * lanes + ji < T`` and TVM scalarises it; its loop partitioning refuses
symbolic extents, and buffer-level predication emits an invalid LLVM call for 64-bit indices (TVM 0.27). A constant
extent the width does not divide fares the same. This rewrite partitions a serial loop around one block that
accesses contiguously in it (a strided access would become a gather):

- element-wise: ``T // lanes`` unguarded vectors, the remainder in halving vectors down to ``MIN_TAIL_LANES``, the
  last iterations scalar, each part a copy of the block with fresh definitions (TIR defines each variable once);
- a reduction ``acc = acc (+, max, min) f(j)`` accumulates ``lanes`` partials a vector at a time, folds them down to
  four, then adds the last terms: a serial loop waits on each add's latency. A sum's order changes, as in any
  vectorised sum; max and min are exact.

It is the last step of a schedule (two blocks then share a name, which a ``Schedule`` could no longer look up).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx
from tvm.s_tir.stmt import SBlock, SBlockRealize

from ..tir_rebuild import rebuild

__all__ = ["vectorise_tails"]

# a reduction block's combiner (``acc = combine(acc, term)``) -> how to combine two values of it
_COMBINE: dict[type, Callable[[Any, Any], Any]] = {tirx.Add: lambda a, b: a + b, tirx.Max: tirx.max, tirx.Min: tirx.min}


def _uses(expr: tirx.PrimExpr, var: tirx.Var) -> bool:
    return any(v.same_as(var) for v in tirx.analysis.undefined_vars(expr))


def _contiguous(region: Any, var: tirx.Var) -> bool:
    """An access region that ``var`` moves along the last axis only, one element at a time (or not at all)."""
    *outer, last = region.region
    if any(_uses(r.min, var) or _uses(r.extent, var) for r in outer):
        return False
    if not _uses(last.min, var):
        return True
    return bool(last.min.same_as(var) and isinstance(last.extent, tirx.IntImm) and int(last.extent) == 1)


def _loop_block(loop: tirx.For, lanes: int) -> tuple[SBlockRealize, tirx.IterVar] | None:
    """The block of a serial loop over a symbolic extent or a constant above ``lanes``, and its iterator bound to the
    loop, when every access is contiguous in it and its store moves with it (element-wise) or stays (a reduction)."""
    if loop.kind != tirx.ForKind.SERIAL or loop.step is not None:
        return None
    if isinstance(loop.extent, tirx.IntImm) and int(loop.extent) <= lanes:
        return None  # one vector at most: the schedule vectorises such a loop whole where it can
    realize = loop.body
    if not isinstance(realize, SBlockRealize) or not isinstance(realize.block.body, tirx.BufferStore):
        return None  # one block storing one value (a block nesting others would need them copied too)
    if len(realize.block.writes) != 1:
        return None
    if not (isinstance(realize.predicate, tirx.IntImm) and int(realize.predicate) == 1):
        return None  # a guarded block (``T.where``)
    regions = [*realize.block.reads, *realize.block.writes]
    by_name: dict[str, Any] = {}
    if any(not by_name.setdefault(r.source.name, r.source).same_as(r.source) for r in regions):
        return None  # two buffers of one name: ``_fresh_copy`` tells buffers apart by name
    bound = [iv for iv, value in zip(realize.block.iter_vars, realize.iter_values) if _uses(value, loop.loop_var)]
    if len(bound) != 1 or not all(_contiguous(r, bound[0].var) for r in regions):
        return None
    (write,) = realize.block.writes
    moves = _uses(write.region[-1].min, bound[0].var)
    spatial = bound[0].iter_type == tirx.IterVar.DataPar
    if spatial and moves and realize.block.init is None:
        return realize, bound[0]
    if not spatial and not moves and _reduction(realize) is not None:
        return realize, bound[0]
    return None


def _reduction(realize: SBlockRealize) -> tuple[Callable[[Any, Any], Any], tirx.PrimExpr] | None:
    """``(combine, f)`` of a block ``acc = combine(acc, f)`` with an ``init`` storing to ``acc``, else None."""
    block = realize.block
    store, init = block.body, block.init
    if not isinstance(store, tirx.BufferStore) or not isinstance(init, tirx.BufferStore):
        return None
    combine = next((c for kind, c in _COMBINE.items() if isinstance(store.value, kind)), None)
    if combine is None or not init.buffer.same_as(store.buffer):
        return None

    def is_acc(e: Any) -> bool:
        return (
            isinstance(e, tvm.ir.expr.TensorLoad)
            and e.source.same_as(store.buffer)
            and all(a.same_as(b) for a, b in zip(e.indices, store.indices))
        )

    a, b = store.value.a, store.value.b
    return (combine, b) if is_acc(a) else (combine, a) if is_acc(b) else None


def _substitute(stmt: tirx.Stmt, mapping: dict[tirx.Var, tirx.PrimExpr]) -> tirx.Stmt:
    """``stmt`` with each variable of ``mapping`` replaced by its value (none of them defined inside ``stmt``)."""
    return tirx.PrimFunc(list(mapping), stmt).specialize(mapping).body


def _fresh_copy(realize: SBlockRealize, var: tirx.Var, value: tirx.PrimExpr) -> SBlockRealize:
    """The block with ``var`` replaced by ``value`` and its iterators defined anew (its buffers kept)."""
    buffers = {r.source.name: r.source for r in [*realize.block.reads, *realize.block.writes]}
    renewed = tvm.s_tir.renew_defs(tirx.PrimFunc([var], realize).specialize({var: value})).body
    # RenewDefs declares a new buffer for each one the block uses without defining, in its access regions only:
    # those regions go back to the function's own buffers (``_loop_block`` refused two buffers of one name)
    b = renewed.block

    def regions(rs: list) -> list:
        return [tvm.ir.expr.TensorRegion(buffers[r.source.name], r.region, r.ty) for r in rs]

    block = SBlock(
        b.iter_vars, regions(b.reads), regions(b.writes), b.name_hint, b.body, b.init, b.alloc_buffers,
        b.match_buffers, b.annotations,
    )  # fmt: skip
    return SBlockRealize(renewed.iter_values, renewed.predicate, block)


#: the narrowest vector a remainder is cut into before its last elements run scalar (libmvec's narrowest variant)
MIN_TAIL_LANES = 4


@dataclass(frozen=True)
class _Parts:
    """How ``[min, min + extent)`` is cut: ``whole`` vectors of ``lanes`` from ``min``; then ``pieces``, one vector
    per set bit of the remainder ``r = extent % lanes`` from ``lanes / 2`` down to ``MIN_TAIL_LANES`` (``(start,
    width, taken)``; T = 62 on 16 lanes: 3 x 16, then 8 and 4); then ``rest`` scalar iterations from ``rest_start``."""

    whole: tirx.PrimExpr
    pieces: list[tuple[tirx.PrimExpr, int, tirx.PrimExpr]]
    rest_start: tirx.PrimExpr
    rest: tirx.PrimExpr
    vectorised: tirx.PrimExpr  # whether any vector part runs (the extent is at least the narrowest one)


def _halvings(lanes: int) -> list[int]:
    """``lanes / 2, lanes / 4, ...`` down to ``MIN_TAIL_LANES``: a remainder's vectors, and the partials' folds."""
    widths, width = [], lanes // 2
    while width >= MIN_TAIL_LANES:
        widths.append(width)
        width //= 2
    return widths


def _vector_loop(var: tirx.Var, width: int, body: tirx.Stmt) -> tirx.For:
    dtype = str(var.ty)
    return tirx.For(var, tirx.const(0, dtype), tirx.const(width, dtype), tirx.ForKind.VECTORIZED, body)


def _parts(loop: tirx.For, lanes: int) -> _Parts:
    dtype = str(loop.loop_var.ty)
    # a constant extent's parts come out constant, the empty ones dropped (a symbolic one's are left as written)
    simplify = tvm.sym.Analyzer().simplify if isinstance(loop.extent, tirx.IntImm) else (lambda e: e)

    def const(v: int) -> tirx.PrimExpr:
        return tirx.const(v, dtype)

    whole = tirx.floordiv(loop.extent, const(lanes))
    base = loop.min + whole * const(lanes)
    r = loop.extent - whole * const(lanes)
    pieces = []
    widths = _halvings(lanes)
    for width in widths:  # higher bits first
        taken = simplify(tirx.floormod(tirx.floordiv(r, const(width)), const(2)) == const(1))
        if not _never(taken):
            pieces.append((simplify(base + r - tirx.floormod(r, const(2 * width))), width, taken))
    narrowest = widths[-1] if widths else lanes
    rest = tirx.floormod(r, const(narrowest))
    return _Parts(
        simplify(whole), pieces, simplify(base + r - rest), simplify(rest), simplify(loop.extent >= const(narrowest))
    )


def _never(cond: tirx.PrimExpr) -> bool:
    return isinstance(cond, tirx.IntImm) and not int(cond)


def _when(cond: tirx.PrimExpr, stmt: tirx.Stmt) -> list[tirx.Stmt]:
    """``stmt`` under ``cond``: alone where ``cond`` is constant true, nothing where constant false."""
    if isinstance(cond, tirx.IntImm):
        return [stmt] if int(cond) else []
    return [tirx.IfThenElse(cond, stmt, None)]


def _loop(var: tirx.Var, extent: tirx.PrimExpr, kind: tirx.ForKind, body: tirx.Stmt) -> list[tirx.Stmt]:
    """``for var in range(extent)``, or nothing where the extent is a constant 0."""
    if isinstance(extent, tirx.IntImm) and int(extent) == 0:
        return []
    return [tirx.For(var, tirx.const(0, str(var.ty)), extent, kind, body)]


def _fold(partial: Any, lanes: int, combine: Callable[[Any, Any], Any], dtype: str, name: str) -> list[tirx.Stmt]:
    """The ``lanes`` partials halved in vectors (the upper half combined into the lower) down to ``MIN_TAIL_LANES``."""
    folds = []
    for width in _halvings(lanes):
        lane = tirx.Var(f"{name}{width}", dtype)
        upper = tirx.BufferLoad(partial, [lane + tirx.const(width, dtype)])
        value = combine(tirx.BufferLoad(partial, [lane]), upper)
        folds.append(_vector_loop(lane, width, tirx.BufferStore(partial, value, [lane])))
    return folds


def _split_reduction(loop: tirx.For, realize: SBlockRealize, reduced: tirx.IterVar, lanes: int) -> tirx.Stmt:
    """A reduction over the loop as partials in a vector (module docstring): the whole and the remainder's vectors
    (``_parts``) combine into ``lanes`` partials, folded in halving vectors (``_fold``) into the accumulator, then the
    scalar rest. One opaque block inside the parallel row loop holds the partials, one per thread: a constant size in
    global scope, on the stack (in "local" scope TVM 0.27 takes it from its workspace pool: a call per row)."""
    block = realize.block
    parts = _reduction(realize)
    assert parts is not None  # _loop_block checked it
    combine, term = parts
    dtype = str(loop.loop_var.ty)
    k = tirx.Var("k", dtype)
    bindings = {
        iv.var: (k if iv.same_as(reduced) else value) for iv, value in zip(block.iter_vars, realize.iter_values)
    }
    seq = _substitute(tirx.SeqStmt([block.body, block.init, tirx.Evaluate(term)]), bindings)
    store, init, term = seq.seq[0], seq.seq[1], seq.seq[2].value
    cut = _parts(loop, lanes)
    partial = tirx.decl_buffer((lanes,), store.buffer.dtype, f"{block.name_hint}_lanes")
    zero = tirx.const(0, dtype)

    def var(part: str) -> tirx.Var:
        return tirx.Var(f"{loop.loop_var.name}_{part}", dtype)

    def term_at(index: tirx.PrimExpr) -> tirx.PrimExpr:
        return _substitute(tirx.Evaluate(term), {k: index}).value

    def accumulate(start: tirx.PrimExpr, width: int, name: str) -> tirx.Stmt:
        """Partials ``[0, width)`` combined with the terms of ``[start, start + width)``, as one vector."""
        lane = var(name)
        value = combine(tirx.BufferLoad(partial, [lane]), term_at(start + lane))
        return _vector_loop(lane, width, tirx.BufferStore(partial, value, [lane]))

    def into_acc(value: tirx.PrimExpr) -> tirx.Stmt:
        return tirx.BufferStore(
            store.buffer, combine(tirx.BufferLoad(store.buffer, store.indices), value), store.indices
        )

    k0, ko, kf, kt = var("init"), var("vo"), var("last"), var("tail")
    narrow = min(lanes, MIN_TAIL_LANES)  # the partials left after the vector folds, added to acc one by one
    vectors = [
        _vector_loop(k0, lanes, tirx.BufferStore(partial, init.value, [k0])),
        *_loop(ko, cut.whole, tirx.ForKind.SERIAL, accumulate(loop.min + ko * lanes, lanes, "vi")),
        *(s for start, width, taken in cut.pieces for s in _when(taken, accumulate(start, width, f"v{width}"))),
        *_fold(partial, lanes, combine, dtype, f"{loop.loop_var.name}_fold"),
        tirx.For(kf, zero, tirx.const(narrow, dtype), tirx.ForKind.SERIAL, into_acc(tirx.BufferLoad(partial, [kf]))),
    ]
    body = tirx.SeqStmt([
        tirx.BufferStore(store.buffer, init.value, store.indices),
        *_when(cut.vectorised, tirx.SeqStmt(vectors)),  # too short: folding would cost more than T
        *_loop(kt, cut.rest, tirx.ForKind.SERIAL, into_acc(term_at(cut.rest_start + kt))),
    ])  # fmt: skip
    return SBlockRealize([], True, SBlock([], [], [], f"{block.name_hint}_vectors", body, None, [partial]))


def _split(loop: tirx.For, realize: SBlockRealize, lanes: int) -> tirx.Stmt:
    """An element-wise loop around ``realize`` cut as ``_parts`` says, each part a fresh copy of the block."""
    j = loop.loop_var
    dtype = str(j.ty)

    def vector(start: tirx.PrimExpr, width: int, name: str) -> tirx.Stmt:
        lane = tirx.Var(f"{j.name}_{name}", dtype)
        return _vector_loop(lane, width, _fresh_copy(realize, j, start + lane))

    cut = _parts(loop, lanes)
    jo, jt = tirx.Var(f"{j.name}_vo", dtype), tirx.Var(f"{j.name}_tail", dtype)
    parts = [
        *_loop(jo, cut.whole, tirx.ForKind.SERIAL, vector(loop.min + jo * lanes, lanes, "vi")),
        *(s for start, width, taken in cut.pieces for s in _when(taken, vector(start, width, f"v{width}"))),
        *_loop(jt, cut.rest, tirx.ForKind.SERIAL, _fresh_copy(realize, j, cut.rest_start + jt)),
    ]
    return parts[0] if len(parts) == 1 else tirx.SeqStmt(parts)


def vectorise_tails(func: tirx.PrimFunc, lanes: int) -> tuple[tirx.PrimFunc, int]:
    """``func`` with every qualifying loop (module docstring) split into whole ``lanes``-wide vectors, halving
    vectors and a scalar rest, and how many loops were split."""
    if lanes <= 1:
        return func, 0
    count = 0

    def visit(stmt: tirx.Stmt) -> tirx.Stmt:
        nonlocal count
        found = _loop_block(stmt, lanes) if isinstance(stmt, tirx.For) else None
        if found is None:
            return rebuild(stmt, visit)
        count += 1
        realize, bound = found
        if bound.iter_type == tirx.IterVar.DataPar:
            return _split(stmt, realize, lanes)
        return _split_reduction(stmt, realize, bound, lanes)

    body = visit(func.body)
    return (func.with_body(body), count) if count else (func, 0)
