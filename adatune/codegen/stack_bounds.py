"""Buffers of symbolic size on the stack, sized by the symbol's range. TVM puts a buffer on the stack only when its size
is a constant under 1 KiB; any other comes from its workspace pool, an allocate and a free call each time (twice per row
of a dynamic model's softmax).

A PrimFunc that states its symbols' upper bounds (``with_upper_bounds``) has every allocation those bounds cap below
the stack limit sized to the cap (after flattening, so no index changes). A size nothing caps is left to the pool;
calling such a function with a symbol above its bound is undefined, as is a dynamic model outside its range. Inside a
parallel loop the pool is called every iteration, so there any buffer of capped size up to ``PARALLEL_STACK_BYTES`` is
kept out of ``LowerTVMBuiltin`` (``disable_lower_builtin``) and LLVM allocates it on the worker's stack, once per
parallel body. The pass runs in adatune's TIR pipelines (``adatune.codegen.vector_math``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tvm
from tvm import tirx

from .tir_rebuild import rebuild

__all__ = [
    "ATTR",
    "PARALLEL_STACK_BYTES",
    "STACK_LIMIT_BYTES",
    "bound_allocations",
    "upper_bounds",
    "with_upper_bounds",
]

ATTR = "adatune.upper_bounds"
# TVM's kMaxStackAlloca (tvm/runtime/device_api.h): a CPU allocation must be strictly smaller to stay on the stack
STACK_LIMIT_BYTES = 1024
#: the largest buffer a parallel loop's body gets on its thread's stack (threads start with megabytes of it)
PARALLEL_STACK_BYTES = 32 * 1024
#: TVM's annotation (``transform::kDisableLowerTVMBuiltin``) that leaves an allocation to the code generator
_ON_STACK = "disable_lower_builtin"


def with_upper_bounds(func: tirx.PrimFunc, bounds: Mapping[str, int]) -> tirx.PrimFunc:
    """``func`` stating that each named symbol (a shape variable's name) is at most its bound at every call."""
    for name, hi in bounds.items():
        if not isinstance(hi, int) or isinstance(hi, bool) or hi < 1:
            raise ValueError(f"upper bound of {name!r} must be a positive int, got {hi!r}")
    return func.with_attr(ATTR, {str(k): int(v) for k, v in bounds.items()})


def upper_bounds(func: tirx.PrimFunc) -> dict[str, int]:
    """The bounds ``with_upper_bounds`` stated on ``func`` (empty if none)."""
    if func.attrs is None or ATTR not in func.attrs:
        return {}
    return {str(k): int(v) for k, v in func.attrs[ATTR].items()}


def _is_int(var: tirx.Var) -> bool:
    try:
        return tvm.DataType(str(var.ty.dtype)).type_code == tvm.DataTypeCode.INT
    except Exception:  # noqa: BLE001 - a handle or another non-scalar type has no integer bound
        return False


class _Bounder:
    """Rebuilds a lowered body with the capped allocations; ``Bind`` definitions are fed to the analyzer."""

    def __init__(self, bounds: Mapping[str, int]) -> None:
        self.bounds = bounds
        self.analyzer = tvm.sym.Analyzer()
        self.changed = 0
        self.parallel = 0  # parallel loops around the statement being visited

    def _note(self, expr: Any) -> None:
        """Tell the analyzer the bounds of the stated symbols in ``expr`` (before a definition or a size uses them)."""
        for var in tirx.analysis.undefined_vars(expr):
            name = str(var.name)
            if name in self.bounds:
                self.analyzer.update(var, tvm.sym.ConstIntBound(1, self.bounds[name]), override=True)

    def _cap(self, extent: Any) -> int | None:
        if isinstance(extent, tirx.IntImm):
            return int(extent.value)
        self._note(extent)
        hi = self.analyzer.const_int_bound(extent).max_value
        return None if hi >= tvm.sym.ConstIntBound.POS_INF else int(hi)

    def _alloc(self, stmt: tirx.AllocBuffer) -> list[tirx.Stmt]:
        """The allocation; or, where its size is capped under the stack's limit, one of that size (with the original
        buffer declared on its memory: a buffer is a variable whose type holds its shape, and the body keeps reading
        the one it knows), marked for the stack where it exceeds TVM's own limit (inside a parallel loop)."""
        buf = stmt.buffer
        constant = all(isinstance(e, tirx.IntImm) for e in buf.shape)
        if constant and not self.parallel:
            return [stmt]
        caps = [self._cap(e) for e in buf.shape]
        if any(c is None or c < 1 for c in caps):
            return [stmt]
        size = 1
        for c in caps:
            size *= int(c)  # type: ignore[arg-type]
        dtype = tvm.DataType(str(buf.dtype))
        nbytes = size * dtype.bits * dtype.lanes // 8
        mark = nbytes >= STACK_LIMIT_BYTES  # over TVM's own limit: the stack only inside a parallel loop, marked
        if (mark and not (self.parallel and nbytes <= PARALLEL_STACK_BYTES)) or (constant and not mark):
            return [stmt]
        annotations = dict(stmt.annotations) | ({_ON_STACK: tirx.IntImm("int32", 1)} if mark else {})
        self.changed += 1
        if constant:
            return [tirx.AllocBuffer(buf, annotations)]
        shape = [tirx.IntImm(str(e.ty.dtype), int(c)) for e, c in zip(buf.shape, caps)]  # type: ignore[arg-type]
        capped = tirx.decl_buffer(shape, buf.dtype, f"{buf.name}_capped", scope=buf.scope())
        return [tirx.AllocBuffer(capped, annotations), tirx.DeclBuffer(buf, data=capped.data)]

    def visit(self, stmt: tirx.Stmt) -> tirx.Stmt:
        if isinstance(stmt, tirx.Bind):
            if _is_int(stmt.var):  # the common subexpressions a shape is written in
                self._note(stmt.value)
                self.analyzer.bind(stmt.var, stmt.value)
            return stmt
        if isinstance(stmt, tirx.SeqStmt):  # an allocation is a statement of a sequence, in scope to its end
            seq: list[tirx.Stmt] = []
            for s in stmt.seq:
                seq.extend(self._alloc(s) if isinstance(s, tirx.AllocBuffer) else [self.visit(s)])
            return tirx.SeqStmt(seq)
        if isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.PARALLEL:
            self.parallel += 1
            try:
                return rebuild(stmt, self.visit)
            finally:
                self.parallel -= 1
        return rebuild(stmt, self.visit)


@tvm.transform.module_pass(opt_level=0, name="adatune.BoundAllocations")
def bound_allocations(mod: tvm.IRModule, _ctx: Any) -> tvm.IRModule:
    """The module with each PrimFunc's capped allocations and its parallel bodies' buffers on the stack; run it after
    TVM's lowering passes and before ``LowerTVMBuiltin`` (which moves the rest to the workspace pool)."""
    updates = {}
    for gv, func in mod.functions_items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        bounder = _Bounder(upper_bounds(func))
        body = bounder.visit(func.body)
        if bounder.changed:
            updates[gv] = func.with_body(body)
    for gv, func in updates.items():
        mod[gv] = func
    return mod
