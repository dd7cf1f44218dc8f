"""One compiled Relax module for every extent of a dynamic graph: DietCode GEMMs plus shape-generic schedules.

The graph is a Relax module before legalisation, with its symbols' ranges (what ``from_torch(..., dynamic=...)``
imports; ``adatune.models.build_dynamic`` wraps ``build_relax``). ``gemm_workloads`` finds its GEMMs as
``R.matmul`` calls whose rows are the symbolic extent T: ``dense`` (``X @ W`` with a constant ``W``, or torch's
``linear``, transposed once here; packed into the workload's ``b_panel`` layout at build), ``bmm_nt`` (``Q @ K^T``;
a ``permute_dims`` behind reshapes is read through) and ``bmm_nn`` (``P @ V``). Leading batch axes are static.

``build_relax`` replaces each call by a Relax function per workload whose body is the DietCode decision tree as
nested ``If``s on T (``ShapeDispatcher.to_relax``), each leaf a ``call_tir`` of one micro-kernel: the dispatch is VM
bytecode in the module, and ``export_library`` writes everything. The rest of the graph is legalised and fused, and
every other PrimFunc gets ``schedule_generic`` and the ranges' tops as its symbols' bounds (``codegen.stack_bounds``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
from tvm import relax, tirx
from tvm.ir.expr import Constant

from .. import target as _target
from ..codegen import stack_bounds as _stack_bounds
from ..codegen import vector_math as _vector_math
from ..codegen.generic_schedule import schedule_generic
from ._dispatch import relax_seq
from ._schedule import aligned_name, aligned_versions, microkernel_func
from ._space import weight_panel
from ._tune import DietCodeResult
from ._workloads import DynamicWorkload

__all__ = ["RelaxBuild", "build_relax", "gemm_workloads"]

Symbols = Mapping[str, tuple[int, int]]  # a graph's symbolic extents (TIR variable names) -> their (lo, hi) ranges

_Key = tuple[str, tuple[int, int], tuple[int, int]]  # kind, dims, T range: what identifies a workload


@dataclass(frozen=True)
class _Gemm:
    """One matched ``R.matmul``: the workload's key and what the rewrite needs."""

    kind: str
    dims: tuple[int, int]
    t_range: tuple[int, int]
    rows: Any  # the kernel's T as a PrimExpr of the graph's symbol (c * T for a dense layer over [c, T] rows)
    batch: int
    b_source: Any  # bmm: K[..., T, D] (nt; K^T when transpose_b) or V[..., T, D] (nn); dense: None
    transpose_b: bool  # bmm_nt whose K^T is not a visible permute_dims: transpose it in Relax
    weight: np.ndarray | None  # dense: the [K, N] weight

    @property
    def key(self) -> _Key:
        return self.kind, self.dims, self.t_range


def _shape(expr: Any) -> list[Any] | None:
    ty = getattr(expr, "ty", None)
    if not isinstance(ty, relax.TensorType) or str(ty.dtype) != "float32" or not hasattr(ty.shape, "values"):
        return None
    return list(ty.shape.values)


def _static(d: Any) -> int | None:
    return int(d) if isinstance(d, tirx.IntImm) else None


def _op(expr: Any) -> str:
    return str(getattr(getattr(expr, "op", None), "name", "")) if isinstance(expr, relax.Call) else ""


def _bound(expr: Any, lookup: Callable[[Any], Any]) -> Any:
    return lookup(expr) if isinstance(expr, relax.Var) else expr


def _dense_weight(b: Any, lookup: Callable[[Any], Any]) -> np.ndarray | None:
    """The constant ``[K, N]`` a dense layer multiplies by: a constant, or the 2-D transpose of one."""
    b = b if isinstance(b, Constant) else _bound(b, lookup)
    if isinstance(b, Constant):
        return np.asarray(b.value.numpy(), np.float32)
    if _op(b) == "relax.permute_dims" and isinstance(b.args[0], Constant):
        axes = b.attrs.axes
        if axes is None or [int(a) for a in axes] == [1, 0]:
            return np.ascontiguousarray(b.args[0].value.numpy().T, np.float32)
    return None


def _scaled_symbol(dims: Sequence[Any], symbols: Mapping[str, tuple[int, int]]) -> tuple[int, Any] | None:
    """``prod(dims)`` as ``(c, T)`` with ``c`` a constant and ``T`` one symbol (``[2, T]``, ``[2 * T]``), or None."""
    c, found = 1, None
    stack = list(dims)
    while stack:
        d = stack.pop()
        if isinstance(d, tirx.IntImm):
            c *= int(d)
        elif isinstance(d, tirx.Mul):
            stack += [d.a, d.b]
        elif isinstance(d, tirx.Var) and str(d.name) in symbols and found is None:
            found = d
        else:
            return None
    return (c, found) if found is not None else None


def _untransposed(b: Any, lookup: Callable[[Any], Any], batch: int, t: Any, d: int) -> Any:
    """``K[..., T, D]`` when ``b`` (``K^T``, ``[..., D, T]``) is ``permute_dims`` of it swapping the last two axes,
    seen through reshapes and same-shape broadcasts (what torch's decomposition of ``k.transpose`` leaves); None
    when it is not visible. Both keep the row-major order, so ``reshape(K, [batch, T, D])`` is the kernel's B."""
    expr = _bound(b, lookup)
    for _ in range(4):
        op = _op(expr)
        if op == "relax.permute_dims":
            src, nd = expr.args[0], len(_shape(expr.args[0]) or [])
            shape = _shape(src) or []
            if nd < 2 or expr.attrs.axes is None:
                return None
            if [int(x) for x in expr.attrs.axes] != list(range(nd - 2)) + [nd - 1, nd - 2]:
                return None
            lead = [_static(x) for x in shape[:-2]]
            ok = all(x is not None for x in lead) and math.prod(x or 0 for x in lead) == batch
            ok = ok and shape[-2].same_as(t) and _static(shape[-1]) == d
            return src if ok else None
        if op not in ("relax.reshape", "relax.broadcast_to"):
            return None
        if op == "relax.broadcast_to" and not _same_shape(expr.args[0], _shape(expr) or []):
            return None
        expr = _bound(expr.args[0], lookup)
    return None


def _match(call: Any, lookup: Callable[[Any], Any], symbols: Mapping[str, tuple[int, int]]) -> _Gemm | None:
    """The call as one of DietCode's GEMM kinds, or None (it stays an ``R.matmul``, legalised and generic)."""
    if _op(call) != "relax.matmul" or str(call.attrs.out_dtype) not in ("", "float32"):
        return None
    a, b = call.args
    sa, sb = _shape(a), _shape(b)
    if sa is None or sb is None or len(sa) < 2 or len(sb) < 2:
        return None

    def sym(d: Any) -> Any:
        return d if isinstance(d, tirx.Var) and str(d.name) in symbols else None

    if len(sb) == 2 and all(_static(d) for d in sb) and _static(sa[-1]) == _static(sb[0]):
        rows = _scaled_symbol(sa[:-1], symbols)
        weight = _dense_weight(b, lookup) if rows is not None else None
        if rows is None or weight is None:
            return None
        c, t = rows
        lo, hi = symbols[str(t.name)]
        dims = (int(sb[0]), int(sb[1]))
        return _Gemm("dense", dims, (c * lo, c * hi), t * c if c > 1 else t, 1, None, False, weight)
    lead = sa[:-2]
    if len(sa) != len(sb) or any(_static(x) is None or _static(x) != _static(y) for x, y in zip(lead, sb[:-2])):
        return None
    batch = math.prod(int(d) for d in lead)
    t = sym(sa[-2])
    if t is None:
        return None
    lo_hi = symbols[str(t.name)]
    same = lambda d: sym(d) is not None and d.same_as(t)  # noqa: E731
    if _static(sa[-1]) and _static(sa[-1]) == _static(sb[-2]) and same(sb[-1]):  # Q[T, D] @ K^T[D, T]
        src = _untransposed(b, lookup, batch, t, int(sa[-1]))
        transpose = src is None
        return _Gemm("bmm_nt", (batch, int(sa[-1])), lo_hi, t, batch, b if src is None else src, transpose, None)
    if same(sa[-1]) and same(sb[-2]) and _static(sb[-1]):  # P[T, T] @ V[T, D]
        return _Gemm("bmm_nn", (batch, int(sb[-1])), lo_hi, t, batch, b, False, None)
    return None


def _gemms(mod: tvm.IRModule, symbols: Symbols) -> list[_Gemm]:
    found: list[_Gemm] = []

    @relax.expr_functor.mutator
    class Finder(relax.PyExprMutator):
        def visit_call_(self, call: relax.Call) -> relax.Expr:
            call = super().visit_call_(call)
            g = _match(call, self.lookup_binding, symbols)
            if g is not None:
                found.append(g)
            return call

    finder = Finder(mod)
    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            finder.visit_expr(func)
    return found


def _workload_name(key: _Key, clash: bool) -> str:
    kind, (d0, d1), (lo, hi) = key
    return f"{kind}_{d0}x{d1}" + (f"_t{lo}_{hi}" if clash else "")


def gemm_workloads(
    mod: tvm.IRModule, symbols: Symbols, target: _target.TargetLike | None = None, pack: bool = True
) -> dict[str, DynamicWorkload]:
    """The graph's distinct dynamic GEMMs as DietCode workloads, by name (``dense_768x3072``...); dense weights
    are packed in ``weight_panel(target)`` panels when ``pack`` (and it divides N), else read as ``[K, N]``."""
    tgt = _target.create(target) if target is not None else _target.host()
    keys = list(dict.fromkeys(g.key for g in _gemms(mod, symbols)))
    names = [(k[0], k[1]) for k in keys]
    out = {}
    for key in keys:
        kind, dims, t_range = key
        panel = weight_panel(tgt, "float32", dims[1]) if pack and kind == "dense" else 0
        name = _workload_name(key, names.count((kind, dims)) > 1)
        out[name] = DynamicWorkload(name, kind, dims, t_range, b_panel=panel)
    return out


def _kernel_func(wl: DynamicWorkload, kernel: Any, name: str, align: int = 1) -> tirx.PrimFunc:
    """A micro-kernel with params ``(A, B, T, C)`` (Relax's ``call_tir`` order: inputs, scalars, outputs)."""
    f = microkernel_func(wl, kernel, name, align)
    a, b, c, t = f.params
    return tirx.PrimFunc([a, b, t, c], f.body, f.ret_type, f.attrs).with_attr("tirx.is_scheduled", True)


def _dispatch_function(bb: relax.BlockBuilder, res: DietCodeResult) -> relax.GlobalVar:
    """``f(A, B) -> C`` for any T: the decision tree as nested ``If``s, each leaf one micro-kernel's call_tir (or,
    for a kernel with an aligned version, ``If(T % u == 0)`` between that version and the kernel)."""
    wl = res.workload
    if [k.key for k in res.kernels] != list(res.dispatcher.labels):
        raise ValueError(f"{wl.name}: the result's kernels must follow its dispatcher's labels, in order")
    names = [f"{wl.name}_mk{i}" for i in range(len(res.kernels))]
    gvs = [bb.add_func(_kernel_func(wl, k, n), n) for n, k in zip(names, res.kernels)]
    aligns = aligned_versions(wl, res.kernels, res.dispatcher.aligned)
    aligned = {
        i: bb.add_func(_kernel_func(wl, k, aligned_name(n, u), u), aligned_name(n, u))
        for i, (n, k, u) in enumerate(zip(names, res.kernels, aligns))
        if u
    }
    t = tirx.Var("T", "int64")
    shapes = wl.shapes(t)
    a = relax.Var("a", relax.TensorType(shapes[0], wl.dtype))
    b = relax.Var("b", relax.TensorType(shapes[1], wl.dtype))
    out = relax.TensorType(shapes[2], wl.dtype)
    t32 = relax.prim_value(tirx.Cast("int32", t))  # kernels take T as int32; Relax shapes are int64

    def call(gv: relax.GlobalVar) -> relax.Call:
        return relax.call_tir(gv, [a, b, t32], out)

    def leaf(i: int) -> relax.Expr:
        if i not in aligned:
            return call(gvs[i])
        aligned_t = relax.prim_value(tirx.floormod(t, aligns[i]) == 0)
        return relax.If(aligned_t, relax_seq(call(aligned[i]), out), relax_seq(call(gvs[i]), out))

    body = res.dispatcher.to_relax(t, leaf, out)
    return bb.add_func(relax.Function([a, b], body, out, is_pure=True), f"{wl.name}_dispatch")


def _results_by_key(results: Mapping[str, DietCodeResult] | Sequence[DietCodeResult]) -> dict[_Key, DietCodeResult]:
    items = list(results.values()) if isinstance(results, Mapping) else list(results)
    out: dict[_Key, DietCodeResult] = {}
    for r in items:
        if not isinstance(r, DietCodeResult):
            raise TypeError(f"results must be DietCodeResults, got {type(r).__name__}")
        wl = r.workload
        out[(wl.kind, tuple(wl.dims), tuple(wl.t_range))] = r  # type: ignore[index]
    return out


def _same_shape(expr: Any, shape: Sequence[Any]) -> bool:
    have = _shape(expr)
    if have is None or len(have) != len(shape):
        return False
    analyzer = tvm.sym.Analyzer()
    return all(
        analyzer.can_prove_equal(tirx.IntImm("int64", d) if isinstance(d, int) else d, h) for d, h in zip(shape, have)
    )


def _rewrite(
    mod: tvm.IRModule, symbols: Symbols, by_key: Mapping[_Key, DietCodeResult]
) -> tuple[tvm.IRModule, list[str]]:
    """The graph with every tuned GEMM replaced by a call to its dispatch function; also the untuned ones."""
    untuned: list[str] = []
    dispatch: dict[_Key, relax.GlobalVar] = {}

    @relax.expr_functor.mutator
    class Rewrite(relax.PyExprMutator):
        def visit_call_(self, call: relax.Call) -> relax.Expr:
            call = super().visit_call_(call)
            g = _match(call, self.lookup_binding, symbols)
            if g is None:
                return call
            res = by_key.get(g.key)
            if res is None:
                untuned.append(_workload_name(g.key, False))
                return call
            if g.key not in dispatch:
                dispatch[g.key] = _dispatch_function(self.builder_, res)
            wl = res.workload

            def reshape(x: Any, shape: Sequence[Any]) -> Any:
                return x if _same_shape(x, shape) else self.builder_.emit(relax.op.reshape(x, list(shape)))

            out_shape = _shape(call) or []
            a = call.args[0]
            if g.kind == "dense":
                a2 = reshape(a, [g.rows, g.dims[0]])
                assert g.weight is not None  # a dense match always carries its constant weight
                b2: Any = relax.const(wl.pack_b(g.weight))
            else:
                d = g.dims[1]
                a2 = reshape(a, [g.batch, g.rows, (_shape(a) or [])[-1]])
                src = g.b_source
                if g.transpose_b:
                    nd = len(_shape(src) or [])
                    src = self.builder_.emit(relax.op.permute_dims(src, list(range(nd - 2)) + [nd - 1, nd - 2]))
                b2 = reshape(src, [g.batch, g.rows, d])
            c = self.builder_.emit(relax.Call(dispatch[g.key], [a2, b2]))
            return c if _same_shape(c, out_shape) else relax.op.reshape(c, out_shape)

    rewrite = Rewrite(mod)
    for gv, func in mod.functions_items():
        if isinstance(func, relax.Function):
            rewrite.builder_.update_func(gv, rewrite.visit_expr(func))
    return rewrite.builder_.get(), sorted(set(untuned))


@dataclass
class RelaxBuild:
    """What ``build_relax`` compiled: the VM executable, its linker options, what each PrimFunc got (``applied``)
    and the Relax module compiled (dispatch functions included)."""

    executable: Any
    link: list[str]
    applied: dict[str, str]
    module: tvm.IRModule


def build_relax(
    mod: tvm.IRModule,
    symbols: Symbols,
    results: Mapping[str, DietCodeResult] | Sequence[DietCodeResult],
    target: _target.TargetLike | None = None,
    vector_math: bool = True,
    vector_tails: bool = True,
) -> RelaxBuild:
    """One Relax VM executable for every extent in the graph's ranges (module docstring); CPU targets only.
    ``results`` are matched to GEMMs by kind, dims and T range; a GEMM without one warns and is scheduled like any
    other operator. ``applied`` says per PrimFunc ``dietcode``, ``generic``, ``view`` (a reshape made a view) or
    ``unscheduled``. Memory is planned for each range's top, so a larger extent is undefined."""
    by_key = _results_by_key(results)
    first = next(iter(by_key.values()), None)
    tgt = _target.create(target) if target is not None else (first.target if first is not None else _target.host())
    if str(tgt.kind.name) != "llvm":
        raise ValueError(f"build_dynamic compiles for CPU (llvm) targets, got {tgt.kind.name!r}")
    for r in by_key.values():
        if str(r.target.kind.name) != str(tgt.kind.name):
            raise ValueError(f"{r.workload.name} was tuned for {r.target.kind.name}, not {tgt.kind.name}")
    mod, untuned = _rewrite(mod, symbols, by_key)
    if untuned:
        warnings.warn(
            f"{len(untuned)} dynamic GEMM workloads have no DietCode result and run a generic schedule: "
            + ", ".join(untuned),
            stacklevel=3,  # the caller of adatune.models.build_dynamic
        )
    mod = relax.transform.DeadCodeElimination()(mod)
    mod = relax.get_pipeline("zero")(mod)
    lanes = _target.cpu_info(tgt).lanes("float32")
    upper = {name: hi for name, (_, hi) in symbols.items()}  # buffers sized by T on the stack (stack_bounds)
    applied: dict[str, str] = {}
    funcs = {}
    for gv, func in mod.functions_items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        name = str(gv.name_hint)
        if func.attrs is not None and "tirx.is_scheduled" in func.attrs:
            applied[name] = "dietcode"
            continue
        if relax.analysis.has_reshape_pattern(func):  # the build turns these into views: no copy to schedule
            applied[name] = "view"
            continue
        scheduled, changed = schedule_generic(func, lanes, vector_tails)
        scheduled = scheduled.with_attr("tirx.is_scheduled", True) if changed else func
        funcs[gv] = _stack_bounds.with_upper_bounds(scheduled, upper)
        applied[name] = "generic" if changed else "unscheduled"
    for gv, func in funcs.items():
        mod[gv] = func
    with tgt:
        executable, link = _vector_math.compile_module(mod, tgt, vector_math)
    return RelaxBuild(executable, list(link), applied, mod)
