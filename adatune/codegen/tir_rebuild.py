"""One rebuild of a TIR statement's children: TVM 0.27's Python API has no statement mutator, so ``stack_bounds`` and
``_vector_tail`` rebuild what they pass through here, the one place that knows each statement's children.
"""

from __future__ import annotations

from collections.abc import Callable

from tvm import tirx
from tvm.s_tir.stmt import SBlock, SBlockRealize

__all__ = ["rebuild"]


def rebuild(stmt: tirx.Stmt, visit: Callable[[tirx.Stmt], tirx.Stmt]) -> tirx.Stmt:
    """``stmt`` with ``visit`` applied to each child statement (loops, sequences, attributes, branches and blocks;
    any other statement, a leaf, as it is)."""
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
    if isinstance(stmt, tirx.While):
        return tirx.While(stmt.condition, visit(stmt.body))
    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([visit(s) for s in stmt.seq])
    if isinstance(stmt, tirx.AttrStmt):
        return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, visit(stmt.body))
    if isinstance(stmt, tirx.IfThenElse):
        other = None if stmt.else_case is None else visit(stmt.else_case)
        return tirx.IfThenElse(stmt.condition, visit(stmt.then_case), other)
    if isinstance(stmt, SBlockRealize):
        b = stmt.block
        block = SBlock(
            b.iter_vars, b.reads, b.writes, b.name_hint, visit(b.body), b.init, b.alloc_buffers, b.match_buffers,
            b.annotations,
        )  # fmt: skip
        return SBlockRealize(stmt.iter_values, stmt.predicate, block)
    return stmt
