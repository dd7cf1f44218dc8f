"""Element-wise loops over a symbolic extent, vectorised: whole vectors first, the remainder scalar.

TVM vectorises a loop only over a constant extent. Split by the SIMD width over a symbolic one (a softmax's T
columns), the inner loop carries the guard ``jo * lanes + ji < T`` and TVM scalarises it; its loop partitioning
refuses symbolic extents, and buffer-level predication emits an invalid LLVM call for 64-bit indices (TVM 0.27).
So a dynamic model's softmax made one scalar ``expf`` call per element: 0.43-0.55 ms a call for 12 x 128 x 128 on
one Zen 4 core, 0.21-0.25 ms with the exponentials in vectors.

This rewrite does the partitioning itself: ``for j in range(T)`` over one data-parallel block becomes ``T //
lanes`` whole vectors (a vectorised inner loop with no guard) and then ``T % lanes`` scalar iterations over a copy
of the block with fresh definitions (TIR requires every variable defined once). Reductions over T are left alone:
a vector of partial results would change the order of the adds. It is the last step of a schedule (two blocks
then share a name, which a ``Schedule`` could no longer look up), and a loop that does not qualify is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import tvm
from tvm import tirx
from tvm.s_tir.stmt import SBlock, SBlockRealize

__all__ = ["vectorise_symbolic_tails"]


def _rebuild(stmt: tirx.Stmt, visit: Callable[[tirx.Stmt], tirx.Stmt]) -> tirx.Stmt:
    """``stmt`` with ``visit`` applied to its children (loops, sequences and blocks; anything else as it is)."""
    if isinstance(stmt, tirx.For):
        return tirx.For(
            stmt.loop_var,
            stmt.min,
            stmt.extent,
            stmt.kind,
            visit(stmt.body),
            stmt.thread_binding,
            stmt.annotations,
            stmt.step,
        )
    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([visit(s) for s in stmt.seq])
    if isinstance(stmt, SBlockRealize):
        b = stmt.block
        block = SBlock(
            b.iter_vars,
            b.reads,
            b.writes,
            b.name_hint,
            visit(b.body),
            b.init,
            b.alloc_buffers,
            b.match_buffers,
            b.annotations,
        )
        return SBlockRealize(stmt.iter_values, stmt.predicate, block)
    return stmt


def _uses(expr: tirx.PrimExpr, var: tirx.Var) -> bool:
    return any(v.same_as(var) for v in tirx.analysis.undefined_vars(expr))


def _qualifies(loop: tirx.For) -> bool:
    """A serial loop over a symbolic extent around one data-parallel block whose store is contiguous in it."""
    if isinstance(loop.extent, tirx.IntImm) or loop.kind != tirx.ForKind.SERIAL or loop.step is not None:
        return False
    realize = loop.body
    if not isinstance(realize, SBlockRealize) or realize.block.init is not None or len(realize.block.writes) != 1:
        return False
    bound = [iv for iv, value in zip(realize.block.iter_vars, realize.iter_values) if _uses(value, loop.loop_var)]
    if len(bound) != 1 or any(iv.iter_type != tirx.IterVar.DataPar for iv in bound):
        return False
    (write,) = realize.block.writes
    last = write.region[-1]
    return bool(last.min.same_as(bound[0].var) and isinstance(last.extent, tirx.IntImm) and int(last.extent) == 1)


def _fresh_copy(stmt: tirx.Stmt, var: tirx.Var, value: tirx.PrimExpr) -> tirx.Stmt:
    """``stmt`` with ``var`` replaced by ``value`` and its blocks' iterators defined anew (the buffers kept)."""
    buffers: dict[str, tirx.Buffer] = {}

    def collect(s: tirx.Stmt) -> tirx.Stmt:
        if isinstance(s, SBlockRealize):
            for region in [*s.block.reads, *s.block.writes]:
                buffers[region.source.name] = region.source
        return _rebuild(s, collect)

    collect(stmt)
    renewed = tvm.s_tir.renew_defs(tirx.PrimFunc([var], stmt).specialize({var: value})).body

    def restore(s: tirx.Stmt) -> tirx.Stmt:
        # RenewDefs declares a new buffer for each one the statement uses without defining, in the blocks'
        # access regions only: those regions go back to the function's own buffers
        if isinstance(s, SBlockRealize):
            b = s.block

            def regions(rs: list) -> list:
                return [tvm.ir.expr.TensorRegion(buffers[r.source.name], r.region, r.ty) for r in rs]

            block = SBlock(
                b.iter_vars,
                regions(b.reads),
                regions(b.writes),
                b.name_hint,
                restore(b.body),
                b.init,
                b.alloc_buffers,
                b.match_buffers,
                b.annotations,
            )
            return SBlockRealize(s.iter_values, s.predicate, block)
        return _rebuild(s, restore)

    return restore(renewed)


def _split(loop: tirx.For, lanes: int) -> tirx.Stmt:
    j = loop.loop_var
    dtype = str(j.ty)
    width = tirx.const(lanes, dtype)
    whole = tirx.floordiv(loop.extent, width)
    jo, ji, jt = (tirx.Var(f"{j.name}_{part}", dtype) for part in ("vo", "vi", "tail"))
    zero = tirx.const(0, dtype)
    vectors = tirx.For(
        jo, zero, whole, tirx.ForKind.SERIAL,
        tirx.For(ji, zero, width, tirx.ForKind.VECTORIZED, _fresh_copy(loop.body, j, loop.min + jo * width + ji)),
    )  # fmt: skip
    tail = tirx.For(
        jt,
        zero,
        loop.extent - whole * width,
        tirx.ForKind.SERIAL,
        _fresh_copy(loop.body, j, loop.min + whole * width + jt),
    )
    return tirx.SeqStmt([vectors, tail])


def vectorise_symbolic_tails(func: tirx.PrimFunc, lanes: int) -> tuple[tirx.PrimFunc, int]:
    """``func`` with every qualifying loop (module docstring) split into whole ``lanes``-wide vectors and a
    scalar remainder, and how many loops were split."""
    if lanes <= 1:
        return func, 0
    count = 0

    def visit(stmt: tirx.Stmt) -> tirx.Stmt:
        nonlocal count
        if isinstance(stmt, tirx.For) and _qualifies(stmt):
            count += 1
            return _split(stmt, lanes)
        return _rebuild(stmt, visit)

    body = visit(func.body)
    return (func.with_body(body), count) if count else (func, 0)
