"""Trace tasks: tuning tasks whose candidates are schedule traces, with names records can recreate.

- a *probabilistic template* (``@probabilistic_template("name")``, task ``"trace/name"``): builds TE tensors and
  schedules them with ``sample_*`` calls where a knob template would read a knob. It runs once; its trace is the
  design space (Python branches on sampled values are frozen, as in MetaSchedule's ``ScheduleFn``).
- *design spaces from TVM's rules* for any PrimFunc: ``"trace/rules/name"`` for a ``@workload`` function or a knob
  template's computation, ``"trace/rules/ir-<hash>"`` for a module given to ``TraceTask.from_module`` (its records
  store the module). ``"trace/vector-rules/..."`` uses the ``vector`` rule set (``_rules``).

``adatune.task.create`` makes all of them once this package is imported.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, Union

import numpy as np
import tvm
from tvm import te
from tvm.s_tir import meta_schedule as ms

from .. import target as _target
from ..task import (
    ArgSpec,
    Task,
    TuningTask,
    defining_module,
    register_task_kind,
    registered_templates,
    workload_key,
)
from ._candidate import TraceCandidate, module_from_text, module_key, module_to_text
from ._rules import RULE_SETS, RuleSet, check_rules, space_generator
from ._space import TraceSpace

__all__ = ["PREFIX", "RULES_PREFIX", "VECTOR_RULES_PREFIX", "TraceTask", "probabilistic_template", "workload"]

PREFIX = "trace/"
RULES_PREFIX = RULE_SETS["tvm"].prefix
VECTOR_RULES_PREFIX = RULE_SETS["vector"].prefix

ModuleLike: TypeAlias = Union[tvm.IRModule, tvm.tirx.PrimFunc]  # noqa: UP007 - tvm classes are untyped


@dataclass(frozen=True)
class _Registered:
    name: str
    func: Callable[..., Any]
    reference: Callable[..., Any] | None


_TEMPLATES: dict[str, _Registered] = {}
_WORKLOADS: dict[str, _Registered] = {}
_MODULES: dict[str, tvm.IRModule] = {}
_TASKS: dict[tuple[str, str, str], TraceTask] = {}


def _short_name(name: str, prefix: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a trace task needs a non-empty name, got {name!r}")
    return name.removeprefix(prefix)


def _rule_set_of(name: str) -> RuleSet | None:
    """The rule set a rule-made task's name starts with, or None (a probabilistic template)."""
    return next((r for r in RULE_SETS.values() if name.startswith(r.prefix)), None)


def _workload_short(name: str) -> str:
    """A rule-made name without its rule set's prefix (a registered workload answers to every rule set)."""
    found = _rule_set_of(name) if isinstance(name, str) else None  # a bad name gets _short_name's clear error
    return _short_name(name, found.prefix if found else RULES_PREFIX)


def probabilistic_template(name: str, reference: Callable[..., Any] | None = None) -> Callable:
    """Register ``func(*args) -> (schedule, tensors)``, which samples its decisions, as task ``"trace/name"``.
    ``reference(*inputs)`` (optionally with keyword ``args``): numpy code that checks candidates; without it the
    unscheduled program is the reference."""
    short = _short_name(name, PREFIX)
    if _rule_set_of(PREFIX + short):
        raise ValueError(
            f"{name!r}: names under {', '.join(repr(r.prefix) for r in RULE_SETS.values())} are "
            "rule-made design spaces, not templates"
        )
    if short in _TEMPLATES:
        raise ValueError(f"a probabilistic template named {short!r} is already registered")

    def decorate(func: Callable) -> Callable:
        _TEMPLATES[short] = _Registered(short, func, reference)
        func.task_name = PREFIX + short  # type: ignore[attr-defined]
        return func

    return decorate


def workload(name: str, reference: Callable[..., Any] | None = None) -> Callable:
    """Register ``func(*args)`` returning a PrimFunc, a one-function IRModule or TE tensors (inputs first,
    outputs last) as task ``"trace/rules/name"``, tuned in the design spaces of TVM's schedule rules."""
    short = _workload_short(name)
    if short.startswith("ir-"):
        raise ValueError(f"{name!r}: 'ir-' names are reserved for modules given to TraceTask.from_module")
    if short in _WORKLOADS:
        raise ValueError(f"a trace workload named {short!r} is already registered")

    def decorate(func: Callable) -> Callable:
        _WORKLOADS[short] = _Registered(short, func, reference)
        func.task_name = RULES_PREFIX + short  # type: ignore[attr-defined]
        return func

    return decorate


def _as_module(value: Any) -> tvm.IRModule:
    """One PrimFunc named ``main`` from a PrimFunc, an IRModule holding exactly one, or TE tensors."""
    if isinstance(value, (list, tuple)) and value and all(isinstance(t, te.Tensor) for t in value):
        value = te.create_prim_func(list(value))
    if isinstance(value, tvm.IRModule):
        funcs = [f for _, f in value.functions_items() if isinstance(f, tvm.tirx.PrimFunc)]
        if len(funcs) != 1 or len(value.functions_items()) != 1:
            raise ValueError(
                f"a trace task tunes one PrimFunc; this module holds {len(value.functions_items())} "
                f"functions ({len(funcs)} PrimFuncs)"
            )
        value = funcs[0]
    if not isinstance(value, tvm.tirx.PrimFunc):
        raise TypeError(f"expected a PrimFunc, an IRModule or TE tensors, got {type(value).__name__}")
    if value.attrs is not None and "global_symbol" in value.attrs and str(value.attrs["global_symbol"]) != "main":
        value = value.with_attr("global_symbol", "main")
    return tvm.IRModule({"main": value})


def _written_vars(func: tvm.tirx.PrimFunc) -> list:
    """The tensors some block of ``func`` writes (its outputs among the parameters)."""
    written: list = []

    def visit(node: Any) -> None:
        if isinstance(node, tvm.s_tir.SBlock):
            written.extend(region.source for region in node.writes)
        for attr in ("block", "body", "init", "then_case", "else_case"):
            child = getattr(node, attr, None)
            if isinstance(child, tvm.tirx.Stmt):
                visit(child)
        if isinstance(node, tvm.tirx.SeqStmt):
            for stmt in node.seq:
                visit(stmt)

    visit(func.body)
    return written


def _arg_specs(func: tvm.tirx.PrimFunc) -> list[ArgSpec]:
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    written = _written_vars(func)
    infos = list(ArgInfo.from_prim_func(func))
    if len(infos) != len(func.params):
        raise ValueError("every parameter of a trace task's function must be a tensor")
    specs = []
    for param, info in zip(func.params, infos):
        shape = list(info.shape)
        if not all(isinstance(s, (int, tvm.tirx.IntImm)) for s in shape):
            raise ValueError(f"parameter {param} has a dynamic shape {shape}: trace tasks need static shapes")
        specs.append(ArgSpec(tuple(int(s) for s in shape), str(info.dtype), any(param.same_as(w) for w in written)))
    if not any(s.is_output for s in specs):
        raise ValueError("the function writes none of its parameters: it has no output to tune")
    return specs


def _template_space(trace: tvm.s_tir.Trace) -> ms.SpaceGenerator:
    def replay(sch: tvm.s_tir.Schedule) -> None:
        trace.apply_to_schedule(sch, remove_postproc=True)

    return ms.space_generator.ScheduleFn(replay, sch_rules=[], postprocs="from-target", mutator_probs="from-target")


class TraceTask(TuningTask):
    """A PrimFunc bound to a target with a trace space (see the module docstring for the kinds). ``space_generator``:
    any meta_schedule space generator (its postprocessors and mutators become the space's); ``generic``: on a CPU,
    the space also holds the shape-generic program."""

    def __init__(
        self,
        name: str,
        args: Sequence[Any],
        target: _target.TargetLike,
        mod: ModuleLike,
        space_generator: ms.SpaceGenerator | None = None,
        reference: Callable[..., Any] | None = None,
        flop: float | None = None,
        generic: bool = True,
    ):
        if not name.startswith(PREFIX):
            raise ValueError(f"trace task names start with {PREFIX!r}, got {name!r}")
        self.name = name
        self.args = tuple(args)
        self.target = _target.create(target)
        self.workload_key = workload_key(name, self.args)
        self._mod = _as_module(mod)
        self.arg_specs = _arg_specs(self._mod["main"])
        self._reference = reference
        generator = space_generator if space_generator is not None else ms.space_generator.PostOrderApply()
        self._space = TraceSpace(self._mod, self.target, generator, generic=generic)
        if flop is None:
            from tvm.s_tir.analysis import estimate_tir_flops

            flop = float(estimate_tir_flops(self._mod))
        self.flop = float(flop) if flop and flop > 0 else 1.0
        self._stored: dict[str, Any] = {"imports": [__name__]}
        self._stores_module = False

    def workload_json(self) -> dict[str, Any]:
        """This kind's module and the one defining its template or workload, or the module itself."""
        return {**self._stored, "ir": module_to_text(self._mod)} if self._stores_module else dict(self._stored)

    def _storing(self, origin: Callable | None = None, module: bool = False) -> TraceTask:
        if origin is not None:
            found = defining_module(origin)
            self._stored = {**found, "imports": [__name__, *found["imports"]]}
        self._stores_module = module
        return self

    # -- constructors -----------------------------------------------------------------------------
    @classmethod
    def from_template(cls, name: str, args: Sequence[Any], target: _target.TargetLike) -> TraceTask:
        """The task of a registered probabilistic template."""
        short = _short_name(name, PREFIX)
        if short not in _TEMPLATES:
            raise KeyError(
                f"no probabilistic template named {short!r} (registered: {', '.join(sorted(_TEMPLATES)) or 'none'})"
            )
        info = _TEMPLATES[short]
        tgt = _target.create(target)
        with tgt:
            out = info.func(*args)
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], tvm.s_tir.Schedule)):
            raise TypeError(f"probabilistic template {short!r} must return (schedule, tensors)")
        sch, tensors = out
        task = cls(PREFIX + short, args, tgt, list(tensors), _template_space(sch.trace), info.reference, generic=False)
        return task._storing(origin=info.func)

    @classmethod
    def from_module(
        cls,
        mod: ModuleLike,
        target: _target.TargetLike,
        name: str | None = None,
        reference: Callable[..., Any] | None = None,
        rules: str = "tvm",
    ) -> TraceTask:
        """Any PrimFunc or one-function IRModule, in the design spaces of rule set ``rules`` (``_rules``), named
        ``"trace/rules/ir-<hash>"`` unless given (``"trace/vector-rules/..."`` in the vector rule set); its records
        store the module, so a log recreates the task in any process."""
        rule_set = check_rules(rules)
        module = _as_module(mod)
        short = _workload_short(name) if name else f"ir-{module_key(module)}"
        _MODULES[short] = module
        tgt = _target.create(target)
        task = cls(rule_set.prefix + short, (), tgt, module, space_generator(rules, tgt), reference)
        task._storing(module=True)
        _TASKS[_cache_key(task.name, (), task.target)] = task
        return task

    @classmethod
    def from_rules(cls, name: str, args: Sequence[Any], target: _target.TargetLike) -> TraceTask:
        """Rule-made design spaces (the rule set the name's prefix names) for a registered workload, a knob
        template's computation, or a module registered by ``from_module``."""
        rule_set = _rule_set_of(name) or RULE_SETS["tvm"]
        short = _workload_short(name)
        full = rule_set.prefix + short
        tgt = _target.create(target)
        if short in _WORKLOADS:
            info = _WORKLOADS[short]
            with tgt:
                mod = info.func(*args)
            generator = space_generator(rule_set.name, tgt)
            return cls(full, args, tgt, mod, generator, info.reference)._storing(origin=info.func)
        if short in _MODULES:
            if tuple(args):
                raise ValueError(f"module {short!r} takes no arguments, got {tuple(args)}")
            return cls(full, (), tgt, _MODULES[short], space_generator(rule_set.name, tgt))._storing(module=True)
        if short in registered_templates() or "." in short:
            knob = Task(short, args, tgt)
            task = cls(
                full,
                args,
                tgt,
                knob.unscheduled_module(),
                space_generator(rule_set.name, tgt),
                reference=_knob_reference(knob),
                flop=knob.flop,
            )
            return task._storing(origin=knob.template.func)
        raise KeyError(
            f"no trace workload, registered module or knob template named {short!r} "
            f"(workloads: {', '.join(sorted(_WORKLOADS)) or 'none'})"
        )

    # -- TuningTask -------------------------------------------------------------------------------
    @property
    def space(self) -> TraceSpace:
        return self._space

    def scheduled_module(self, candidate: Any) -> tvm.IRModule:
        """The replayed, post-processed module of a trace candidate (or of its JSON)."""
        return self.schedule(candidate).mod

    def schedule(self, candidate: Any) -> tvm.s_tir.Schedule:
        """The replayed, post-processed schedule of a trace candidate (or of its JSON); the generic program's is
        not a trace of the computation (``schedule_generic`` rewrites it)."""
        if isinstance(candidate, dict):
            candidate = self._space.decode(candidate)
        if not isinstance(candidate, TraceCandidate):
            raise TypeError(f"a trace task applies trace candidates, got {type(candidate).__name__}")
        return candidate.schedule

    def unscheduled_module(self) -> tvm.IRModule:
        return self._mod

    def reference_outputs(self, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
        if self._reference is None:
            return None
        takes_args = "args" in inspect.signature(self._reference).parameters
        out = self._reference(*inputs, args=self.args) if takes_args else self._reference(*inputs)
        return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]


def _knob_reference(knob: Task) -> Callable[..., Any] | None:
    if knob.template.reference is None:
        return None
    return lambda *inputs: knob.reference_outputs(list(inputs))


def _cache_key(name: str, args: Sequence[Any], target: tvm.target.Target) -> tuple[str, str, str]:
    return name, json.dumps(list(args), default=str), str(target)


def create_trace_task(name: str, args: Sequence[Any], target: tvm.target.Target) -> TraceTask:
    """``adatune.task.create``'s factory for ``"trace/"`` names; one task object per name, arguments and target."""
    key = _cache_key(name, args, target)
    if key not in _TASKS:
        if _rule_set_of(name):
            _TASKS[key] = TraceTask.from_rules(name, args, target)
        else:
            _TASKS[key] = TraceTask.from_template(name, args, target)
    return _TASKS[key]


def _restore_trace_task(name: str, args: Sequence[Any], target: tvm.target.Target, stored: dict) -> TraceTask:
    """``create_trace_task``, first registering the module a record stored (``from_module`` in another process)."""
    short = _workload_short(name)
    if _rule_set_of(name) and "ir" in stored and short not in _MODULES and short not in _WORKLOADS:
        _MODULES[short] = module_from_text(stored["ir"])
    return create_trace_task(name, args, target)


register_task_kind(PREFIX, create_trace_task, _restore_trace_task)
