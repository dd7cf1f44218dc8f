"""Apply and deploy: compile a model with the best record of every task. Records for another target never apply; a
task with none warns and gets the template's fallback config or, on a CPU, the shape-generic schedule, so an
untuned operator still runs rows in parallel and loops in vectors."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import tvm
from tvm import relax, tirx

from .. import target as _target
from ..codegen import vector_math as _vector_math
from ..codegen.generic_schedule import schedule_generic
from ..records import best_records, read_log
from ..space import FallbackConfig
from ..target import cpu_info
from ..task import TuningTask
from ._extract import FusedKnobTask, ModelTask, extract_tasks
from ._frontend import Model

__all__ = ["CompiledModel", "build", "prepack_weights"]


class CompiledModel:
    """A compiled model: ``run(*arrays)`` returns numpy outputs; ``export_library(path)`` writes one .so that
    TVM's runtime alone loads (``tvm.runtime.load_module`` + ``relax.VirtualMachine``)."""

    def __init__(self, model: Model, executable: Any, applied: dict[str, str], link: Sequence[str] = ()):
        self.model = model
        self.link = list(link)  # linker options its library needs (``adatune.codegen.vector_math.export_options``)
        self.executable = executable
        self.applied = applied  # function name -> "record", "fallback" or "generic" (see ``build``)
        self.prepacked: list[str] = []  # functions whose constant weights were packed at build (``prepack_weights``)
        self.module: tvm.IRModule | None = None  # the Relax module that was compiled
        _target.size_tvm_thread_pool()  # its kernels run in this process: every physical core, as when measured
        self._vm = relax.VirtualMachine(executable, tvm.cpu())

    @property
    def main(self) -> Any:
        """The VM's ``main`` on TVM tensors (what latency measurements call, without numpy conversions), run with
        the calling thread off TVM's pool workers' CPUs (``adatune.target.tvm_main_thread``)."""
        fn = self._vm["main"]

        def call(*args: Any) -> Any:
            with _target.tvm_main_thread():
                return fn(*args)

        return call

    def run(self, *arrays: np.ndarray) -> list[np.ndarray]:
        self.model.check_inputs(arrays)
        out = self.main(*[tvm.runtime.tensor(a, tvm.cpu()) for a in arrays])
        outs = out if not hasattr(out, "numpy") else [out]
        return [o.numpy() for o in outs]

    def export_library(self, path: str | os.PathLike) -> str:
        path = os.fspath(path)
        self.executable.export_library(path, options=self.link)
        return path


def _fallback(task: ModelTask, target: tvm.target.Target) -> tuple[tirx.PrimFunc | None, str]:
    """A task's function when no record applies, and how it was made: a knob task's fallback config (``fallback``); on a
    CPU, a trace task's function under ``schedule_generic`` (``generic``), not TVM's serial scalar default lowering;
    else None (``fallback``: that lowering). A reshape is left alone, for the build to make it a view."""
    if task.created and isinstance(task.task, FusedKnobTask):
        return task.task.scheduled_module(FallbackConfig())["main"], "fallback"
    func = task.mod["main"]
    if str(target.kind.name) != "llvm" or relax.analysis.has_reshape_pattern(func):
        return None, "fallback"
    scheduled, changed = schedule_generic(func, cpu_info(target).lanes("float32"))
    return (scheduled, "generic") if changed else (None, "fallback")


def build(
    model: Model,
    log: str | os.PathLike | Sequence[Any] | None,
    target: _target.TargetLike | None = None,
    tasks: list[ModelTask] | None = None,
    prepack: bool = True,
    vector_math: bool = True,
) -> CompiledModel:
    """Compile ``model`` for ``target`` (the host CPU by default) with the best record per task from ``log``;
    ``prepack``: pack constant weights at build time where the schedule packs them whole (``prepack_weights``);
    ``vector_math``: exp, erf, tanh and log in vector registers where the target has libmvec
    (``adatune.codegen.vector_math``; False: TVM's scalar calls, as tuned candidates were built before it)."""
    tgt = _target.create(target) if target is not None else _target.host()
    tasks = tasks if tasks is not None else extract_tasks(model, tgt)
    records: list[Any] = []
    if log is not None:
        records = read_log(log)
    best = best_records(records, tgt)
    mod = model.mod
    applied: dict[str, str] = {}
    untuned = []
    by_name = {json.loads(k)[0]: r for k, r in best.items()}
    for t in tasks:
        picked = _record_for(t, by_name)
        if picked is not None:
            task, rec = picked
            func, how = task.scheduled_module(task.candidate_from_json(rec.config))["main"], "record"
        else:
            func, how = _fallback(t, tgt)
            untuned.append(t.func_name)
        applied[t.func_name] = how
        if func is None:
            continue
        func = func.without_attr("global_symbol").with_attr("tirx.is_scheduled", True)
        for name in t.global_vars:
            mod = tvm.IRModule(dict(mod.functions_items()))
            mod[mod.get_global_var(name)] = func
    if untuned:
        warnings.warn(
            f"{len(untuned)} of {len(tasks)} tasks have no record for this target and use a fallback schedule: "
            + ", ".join(untuned[:8])
            + (" ..." if len(untuned) > 8 else ""),
            stacklevel=2,
        )
    mod, prepacked = prepack_weights(mod) if prepack else (mod, [])
    executable, link = _vector_math.compile_module(mod, tgt, vector_math)
    compiled = CompiledModel(model, executable, applied, link)
    compiled.prepacked, compiled.module = prepacked, mod
    return compiled


def _record_for(t: ModelTask, by_name: dict[str, Any]) -> tuple[TuningTask, Any] | None:
    """The best record and its task: the function's own or its trace task's (templates off); the faster if both."""
    found = []
    if t.task_name in by_name:
        found.append((by_name[t.task_name], lambda: t.task))
    if t.trace_task_name != t.task_name and t.trace_task_name in by_name:
        found.append((by_name[t.trace_task_name], lambda: t.trace_task))
    if not found:
        return None
    rec, task_of = min(found, key=lambda f: f[0].cost)
    return task_of(), rec


def prepack_weights(mod: tvm.IRModule) -> tuple[tvm.IRModule, list[str]]:
    """Pack constant weights once, at build time: the blocks a template marked as whole-weight packing
    (``adatune.codegen.x86.mark_weight_pack``) become functions (TVM's ``SplitLayoutRewritePreproc``) that
    ``FoldConstant`` runs on the model's constants, so deployed kernels read packed panels; packing a non-constant (a
    batch matmul's operands) stays a run-time call. Returns the module and the functions whose weights were folded."""
    split = relax.transform.SplitLayoutRewritePreproc()(mod)
    preprocs = {gv.name_hint for gv, f in split.functions_items() if gv.name_hint.endswith("_weight_prepack")}
    if not preprocs:
        return mod, []
    folded = relax.transform.DeadCodeElimination(["main"])(relax.transform.FoldConstant()(split))
    left = {gv.name_hint for gv, _ in folded.functions_items()} & preprocs
    uses = _packings_used(split)
    return folded, sorted(k.removesuffix("_prepacked") for k, packs in uses.items() if packs and not packs & left)


def _packings_used(mod: tvm.IRModule) -> dict[str, set[str]]:
    """Per kernel called in ``main`` (``*_prepacked``), the ``*_weight_prepack`` functions producing its arguments,
    which ``SplitLayoutRewritePreproc`` may share between kernels (one function per distinct packing)."""
    made_by: dict[relax.Var, str] = {}
    uses: dict[str, set[str]] = {}
    call_tir = tvm.ir.Op.get("relax.call_tir")
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if not (isinstance(value, relax.Call) and value.op.same_as(call_tir)):
                continue
            callee = value.args[0].name_hint
            made_by[binding.var] = callee
            args = value.args[1].fields if isinstance(value.args[1], relax.Tuple) else [value.args[1]]
            packs = {
                made_by[a] for a in args if isinstance(a, relax.Var) and made_by.get(a, "").endswith("_weight_prepack")
            }
            if callee.endswith("_prepacked"):
                uses.setdefault(callee, set()).update(packs)
    return uses
