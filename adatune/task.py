"""Templates and tasks: AutoTVM's programming model on TIR schedules. A template builds TE tensors, schedules
``te.create_prim_func(...)`` and reads its knobs from ``adatune.get_config()``; a task binds it to arguments and a
target, running it once to collect the config space."""

from __future__ import annotations

import abc
import functools
import importlib.util
import inspect
import json
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
from tvm import te

from . import target as _target
from .space import ConfigEntity, ConfigSpace, FallbackConfig
from .space._candidate import CandidateSpace

__all__ = [
    "template",
    "get_config",
    "create",
    "TuningTask",
    "Task",
    "TemplateInfo",
    "ArgSpec",
    "registered_templates",
    "workload_key",
    "register_task_kind",
    "restore",
    "defining_module",
    "set_config_resolver",
]

_local = threading.local()


@dataclass(frozen=True)
class ArgSpec:
    """Shape, dtype and role of one kernel argument."""

    shape: tuple[int, ...]
    dtype: str
    is_output: bool

    def to_json(self) -> list:
        return [list(self.shape), self.dtype, self.is_output]


@dataclass
class TemplateInfo:
    name: str
    func: Callable[..., tuple[Any, list]]
    reference: Callable[..., Any] | None = None


_TEMPLATES: dict[str, TemplateInfo] = {}


def registered_templates() -> dict[str, TemplateInfo]:
    return dict(_TEMPLATES)


def workload_key(name: str, args: Sequence[Any]) -> str:
    """The key records use for a task: template name plus its arguments, as canonical JSON."""
    return json.dumps([name, _jsonable(args)], separators=(",", ":"))


def _jsonable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    raise TypeError(f"template argument {value!r} is not JSON-serialisable (use ints, floats, strings)")


def get_config() -> Any:
    """The config in effect inside a template: the space being collected, a chosen config, or a fallback."""
    cfg = getattr(_local, "config", None)
    if cfg is None:
        raise RuntimeError("adatune.get_config() is only valid inside a template function")
    return cfg


class _ConfigScope:
    def __init__(self, cfg: Any):
        self.cfg = cfg

    def __enter__(self) -> Any:
        self.prev = getattr(_local, "config", None)
        _local.config = self.cfg
        return self.cfg

    def __exit__(self, *exc: Any) -> None:
        _local.config = self.prev


ConfigResolver = Callable[[str, Sequence[Any]], Any]
_RESOLVER: list[ConfigResolver] = []


def set_config_resolver(resolver: ConfigResolver) -> None:
    """Install what a direct template call asks for its config (``adatune.dispatch`` installs the dispatch
    context stack on import). Tasks sit below dispatch, so dispatch hands itself down instead of being imported."""
    _RESOLVER[:] = [resolver]


def _resolve_config(name: str, args: Sequence[Any]) -> Any:
    if _RESOLVER:
        return _RESOLVER[0](name, args)
    return FallbackConfig()


def template(name: str, reference: Callable[..., Any] | None = None) -> Callable:
    """Register a schedule template under ``name``. ``reference(*inputs) -> output(s)``: optional numpy code that checks
    candidates (given the template's arguments if it takes a keyword ``args``); else the unscheduled TIR is the
    reference. Called directly, the template uses the enclosing ``apply_history_best``'s best record (or a fallback)."""
    if name in _TEMPLATES:
        raise ValueError(f"a template named {name!r} is already registered")

    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def dispatching(*args: Any) -> Any:
            if getattr(_local, "config", None) is not None:
                return func(*args)
            cfg = _resolve_config(name, args)
            with _ConfigScope(cfg):
                return func(*args)

        _TEMPLATES[name] = TemplateInfo(name, func, reference)
        dispatching.template_name = name  # type: ignore[attr-defined]
        return dispatching

    return decorate


class TuningTask(abc.ABC):
    """What tuners, builders, runners and records need of a task, whatever its kind of candidate: a computation bound
    to arguments and a target with a ``space`` of candidates, and ``scheduled_module(candidate)`` for the builder."""

    name: str
    args: tuple
    target: tvm.target.Target
    workload_key: str
    flop: float
    arg_specs: list[ArgSpec]
    #: calls per run of each model this task belongs to (``{model name: weight}``; set by task extraction and
    #: stored in logs with the workload, so a model log alone gives the model's estimated latency)
    uses: dict[str, int]
    #: argument positions that are constants where the task is deployed (a model's weights): a whole-operand
    #: packing of one is done once at build time there, so a measurement packs it once, before timing
    constant_args: frozenset[int] = frozenset()

    @property
    @abc.abstractmethod
    def space(self) -> CandidateSpace:
        """The candidates tuners choose from."""

    @abc.abstractmethod
    def scheduled_module(self, candidate: Any) -> tvm.IRModule:
        """The task's program with ``candidate`` applied, ready to build."""

    @abc.abstractmethod
    def unscheduled_module(self) -> tvm.IRModule:
        """The computation with no schedule (the correctness reference when there is no numpy one)."""

    def schedule(self, candidate: Any) -> tvm.s_tir.Schedule | None:
        """``candidate`` as a traced schedule whose trace, replayed on ``unscheduled_module()``, gives the scheduled
        program (what a MetaSchedule database stores), or None for a kind whose programs are not such a trace."""
        return None

    def reference_module(self) -> tvm.IRModule:
        """The program whose host build gives ``check_correctness`` its expected outputs: the unscheduled one."""
        return self.unscheduled_module()

    def reference_outputs(self, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
        """Expected outputs for ``inputs`` from a numpy reference, or None to use the unscheduled program."""
        return None

    def candidate_from_json(self, data: dict) -> Any:
        """A record's candidate (``ValueError`` when it does not fit this task's space)."""
        return self.space.decode(data)

    def workload_json(self) -> dict[str, Any]:
        """What a fresh process needs beyond the name and arguments to recreate this task, stored once per log
        (``adatune.records``): by default the module whose import registers the task's kind."""
        return defining_module(type(self))

    @property
    def target_kind(self) -> str:
        return str(self.target.kind.name)

    @property
    def template_name(self) -> str | None:
        """The knob template that schedules this task (None for other kinds): its workloads share knob features,
        which is what transfer learning across workloads (``XGBoostCostModel.fit_template_log``) builds on."""
        return None

    @property
    def workload(self) -> tuple:
        """AutoTVM's ``task.workload``: the template name followed by its arguments."""
        return (self.name, *self.args)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.name}, args={self.args}, target={self.target_kind}, "
            f"space={self.space.size}, flop={self.flop:.3g})"
        )


TaskFactory = Callable[[str, Sequence[Any], tvm.target.Target], TuningTask]
#: ``restore(name, args, target, stored)``: a task from its name, arguments and ``workload_json()``
TaskRestorer = Callable[[str, Sequence[Any], tvm.target.Target, dict], TuningTask]
_TASK_KINDS: dict[str, tuple[TaskFactory, TaskRestorer | None]] = {}


def register_task_kind(prefix: str, factory: TaskFactory, restore: TaskRestorer | None = None) -> None:
    """Let ``create`` (and so records) make tasks whose name starts with ``prefix`` (e.g. ``"trace/"``);
    ``restore`` also takes what the task's ``workload_json()`` stored (a program that no name can recreate)."""
    if not prefix:
        raise ValueError("a task kind needs a non-empty name prefix")
    _TASK_KINDS[prefix] = (factory, restore)


def restore(name: str, args: Sequence[Any], target: tvm.target.Target, stored: dict) -> TuningTask:
    """The task of a record: ``create``, or its kind's ``restore`` given the stored ``workload_json()``."""
    kind = _task_kind(name)
    if kind is not None and kind[1] is not None and stored:
        return kind[1](name, tuple(args), target, stored)
    return create(name, args, target)


def _task_kind(name: str) -> tuple[TaskFactory, TaskRestorer | None] | None:
    if name in _TEMPLATES:
        return None
    return next((kind for prefix, kind in _TASK_KINDS.items() if name.startswith(prefix)), None)


def defining_module(func: Callable) -> dict[str, Any]:
    """``{"imports": [module]}`` naming the importable module that defines ``func`` (so a fresh process can import
    it and so register a template), or ``{"script": path}`` for one defined in a script run as ``__main__``."""
    module = getattr(func, "__module__", None) or ""
    main = sys.modules.get("__main__")
    if module == "__main__" and getattr(main, "__spec__", None) is not None:
        module = main.__spec__.name  # type: ignore[union-attr]  # run as ``python -m package.module``
    if module and module != "__main__":
        try:
            if importlib.util.find_spec(module) is not None:
                return {"imports": [module]}
        except (ImportError, ValueError):
            pass
    return {"imports": [], "script": str(getattr(main, "__file__", None) or "<interactive>")}


def _arg_specs(tensors: list) -> list[ArgSpec]:
    return [
        ArgSpec(tuple(int(s) for s in t.shape), str(t.dtype), not isinstance(t.op, te.PlaceholderOp)) for t in tensors
    ]


class Task(TuningTask):
    """A knob template bound to arguments and a target, with its config space and FLOP count."""

    def __init__(self, name: str, args: Sequence[Any], target: _target.TargetLike):
        if name not in _TEMPLATES:
            known = ", ".join(sorted(_TEMPLATES)) or "none"
            raise KeyError(f"no template named {name!r} (registered: {known})")
        self.name = name
        self.args = tuple(args)
        self.target = _target.create(target)
        self.template = _TEMPLATES[name]
        self.workload_key = workload_key(name, self.args)
        space = ConfigSpace()
        with self.target, _ConfigScope(space):
            sch, tensors = self.template.func(*self.args)
        self.config_space = space
        self.template_space = space
        self.arg_specs = _arg_specs(tensors)
        self._tensors = tensors
        self.flop = space.flop or self._estimate_flop(tensors)

    @staticmethod
    def _estimate_flop(tensors: list) -> float:
        from tvm.s_tir.analysis import estimate_tir_flops

        func = te.create_prim_func(tensors)
        return float(estimate_tir_flops(tvm.IRModule({"main": func})))

    @property
    def space(self) -> ConfigSpace:
        return self.config_space

    @property
    def template_name(self) -> str:
        return self.name

    def unscheduled_module(self) -> tvm.IRModule:
        """The task's computation with no schedule (a reference when the template has none)."""
        return tvm.IRModule({"main": te.create_prim_func(self._tensors)})

    def reference_module(self) -> tvm.IRModule:
        """The template's computation for the host CPU, unscheduled, as AutoTVM builds its correctness reference, so
        a template that computes differently for the task's target (a wrong branch for a device) is compared with the
        host's computation, not itself; the task's own where the template fails for the host or changes arguments."""
        try:
            with _target.host(), _ConfigScope(ConfigSpace()):
                _, tensors = self.template.func(*self.args)
        except Exception:  # noqa: BLE001 - a template only for its device: its own computation is the reference
            return self.unscheduled_module()
        if _arg_specs(tensors) != self.arg_specs:
            return self.unscheduled_module()
        return tvm.IRModule({"main": te.create_prim_func(tensors)})

    def instantiate(self, config: ConfigEntity | int | FallbackConfig) -> tuple[Any, list]:
        """Run the template with ``config`` and return ``(schedule, tensors)``."""
        if isinstance(config, (int, np.integer)):
            config = self.config_space.get(int(config))
        with self.target, _ConfigScope(config):
            return self.template.func(*self.args)

    def scheduled_module(self, candidate: Any) -> tvm.IRModule:
        sch, _ = self.instantiate(candidate)
        return sch.mod

    def schedule(self, candidate: Any) -> tvm.s_tir.Schedule | None:
        sch, _ = self.instantiate(candidate)
        return sch if isinstance(sch, tvm.s_tir.Schedule) else None

    def workload_json(self) -> dict[str, Any]:
        """The module that defines the template: importing it registers the template in a fresh process."""
        return defining_module(self.template.func)

    def reference_outputs(self, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
        """Outputs of the template's numpy reference on ``inputs``, or None when it has none."""
        if self.template.reference is None:
            return None
        ref = self.template.reference
        takes_args = "args" in inspect.signature(ref).parameters
        out = ref(*inputs, args=self.args) if takes_args else ref(*inputs)
        return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]

    def __repr__(self) -> str:
        return (
            f"Task({self.name}, args={self.args}, target={self.target_kind}, "
            f"space={len(self.config_space)}, flop={self.flop:.3g})"
        )


def create(name: str, args: Sequence[Any], target: _target.TargetLike | None = None) -> TuningTask:
    """Create a task from a registered template (AutoTVM's ``autotvm.task.create``) or a registered task kind."""
    tgt = _target.create(target) if target is not None else _target.host()
    kind = _task_kind(name)
    return kind[0](name, tuple(args), tgt) if kind is not None else Task(name, args, tgt)
