"""Measuring a kernel the way a model runs it: constant weights packed once, before the timed calls.

A knob template marks a stage that packs a whole operand into panels as a layout rewrite, and a model build folds
such stages into the constant weights, so the deployed kernel never packs. Timing the packing with the kernel
steered tuning towards configs that pack inside each thread, which the model does pay for on every call; AutoTVM
likewise tunes with a placeholder packed weight. Only operands the task names in ``constant_args`` (a model's
constants) are split out, by TVM's ``SplitLayoutRewritePreproc`` on a one-call Relax wrapper, so what is measured
is what the model build deploys.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import tvm
from tvm import relax, tirx

from ..codegen.x86 import LAYOUT_REWRITE_PREPROC  # the mark the templates put on a whole-operand packing
from ._types import CallPlan

__all__ = ["split_constant_packing"]


def _marked_sources(mod: tvm.IRModule) -> set[str]:
    """Names of the buffers that marked packing blocks read."""
    sch = tvm.s_tir.Schedule(mod)
    found: set[str] = set()
    stack = [sch.get_sblock("root")]
    while stack:
        for child in sch.get_child_blocks(stack.pop()):
            block = sch.get(child)
            if block.annotations.get(LAYOUT_REWRITE_PREPROC) is not None:
                found.update(str(r.source.name) for r in block.reads)
            stack.append(child)
    return found


def split_constant_packing(
    mod: tvm.IRModule, arg_specs: Sequence[Any], constant_args: Collection[int]
) -> tuple[tvm.IRModule, CallPlan | None]:
    """``mod`` with the packing of its constant operands split into functions run once before timing, and the
    plan to call them; ``(mod, None)`` when nothing is split (no marked packing of a constant operand)."""
    func = mod["main"]
    marked = _marked_sources(mod)
    constant_names = {str(func.params[i].name) for i in constant_args if i < len(func.params)}
    if not marked or not marked <= constant_names:
        return mod, None  # nothing marked, or a marked packing of an operand that is not constant: one call
    ins = [i for i, s in enumerate(arg_specs) if not s.is_output]
    outs = [i for i, s in enumerate(arg_specs) if s.is_output]
    if len(outs) != 1 or len(ins) + 1 != len(func.params):
        return mod, None
    bb = relax.BlockBuilder()
    kernel = bb.add_func(func.with_attr("global_symbol", "kernel"), "kernel")
    params = [relax.Var(f"a{i}", relax.TensorType(arg_specs[i].shape, arg_specs[i].dtype)) for i in ins]
    out = arg_specs[outs[0]]
    with bb.function("main", params):
        with bb.dataflow():
            res = bb.emit_output(relax.call_tir(kernel, params, relax.TensorType(out.shape, out.dtype)))
        bb.emit_func_output(res)
    split = relax.transform.SplitLayoutRewritePreproc()(bb.get())
    refs: dict[Any, int] = {p: i for p, i in zip(params, ins)}
    temps: list[tuple[tuple[int, ...], str]] = []
    calls: list[tuple[str, tuple[int, ...]]] = []
    call_tir = tvm.ir.Op.get("relax.call_tir")
    bindings = [b for block in split["main"].body.blocks for b in block.bindings]
    n_calls = sum(isinstance(b.value, relax.Call) for b in bindings)
    for binding in bindings:
        value = binding.value
        if isinstance(value, relax.Var) and value in refs:  # ``gv = lv``: the same tensor
            refs[binding.var] = refs[value]
            continue
        if not isinstance(value, relax.Call) or not value.op.same_as(call_tir):
            return mod, None
        args = [refs.get(a) for a in value.args[1].fields]
        if any(a is None for a in args):
            return mod, None
        if len(calls) == n_calls - 1:  # the last call computes the task's output
            dest = outs[0]
        else:
            ty = binding.var.ty
            dest = len(arg_specs) + len(temps)
            temps.append((tuple(int(d) for d in ty.shape), str(ty.dtype)))
        refs[binding.var] = dest
        calls.append((value.args[0].name_hint, (*[int(a) for a in args if a is not None], dest)))
    if len(calls) < 2:
        return mod, None
    called = {name for name, _ in calls}
    prims = {
        gv.name_hint: f.with_attr("global_symbol", gv.name_hint)
        for gv, f in split.functions_items()
        if isinstance(f, tirx.PrimFunc) and gv.name_hint in called
    }
    plan = CallPlan(tuple(temps), tuple(calls[:-1]), calls[-1])
    return tvm.IRModule(prims), plan
