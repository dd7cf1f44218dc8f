"""Tuners by name, each registered once (``register_tuner(TunerSpec(...))``) with its class's declared ``OPTIONS``:
the CLI, its help, docs/tuners.md and ``create_tuner`` all read the same ``TunerSpec``. ``signature_mismatches``
checks a hand-written spec against its factory.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from ..options import OPTION_TYPES, Option
from ..task import TuningTask
from ._base import Tuner
from ._release import ReleaseTuner
from ._rfei import RFEITuner
from ._simple import GridSearchTuner, RandomTuner
from ._trace import TraceSearchTuner
from ._xgb import XGBTuner

__all__ = [
    "TUNER_NAMES",
    "TunerOption",
    "TunerSpec",
    "create_tuner",
    "get_tuner_spec",
    "register_tuner",
    "signature_mismatches",
    "tuner_specs",
]

TunerOption = Option  # the name this module gave options before they were declared on the classes


@dataclass(frozen=True)
class TunerSpec:
    """A tuner as the registry knows it: ``factory(task, seed=..., **fixed_kwargs, **options)`` builds it."""

    name: str
    factory: Callable[..., Tuner]
    summary: str
    options: tuple[Option, ...] = ()
    fixed_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def option(self, name: str) -> Option:
        for opt in self.options:
            if opt.name == name:
                return opt
        valid = ", ".join(o.name for o in self.options) or "none"
        raise ValueError(f"unknown option {name!r} for tuner {self.name!r}: valid options: {valid}")

    def resolve(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The given options checked and converted (defaults are left to the constructor)."""
        out: dict[str, Any] = {}
        for key, value in options.items():
            opt = self.option(key)
            try:
                out[key] = opt.convert(value)
            except ValueError as err:
                raise ValueError(f"tuner {self.name!r}: {err}") from None
        return out


class _TunerNames(Sequence[str]):
    """A live, read-only tuple-like view of the registered names, in registration order."""

    def __init__(self, registry: dict[str, TunerSpec]):
        self._registry = registry

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...

    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        return tuple(self._registry)[index]

    def __len__(self) -> int:
        return len(self._registry)

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._registry))

    def __contains__(self, name: object) -> bool:
        return name in self._registry

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, (tuple, list, _TunerNames)) else other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


_REGISTRY: dict[str, TunerSpec] = {}
TUNER_NAMES = _TunerNames(_REGISTRY)


def register_tuner(spec: TunerSpec, replace: bool = False) -> TunerSpec:
    """Add a tuner under ``spec.name``; ValueError on a taken name (unless ``replace``) or a malformed spec."""
    if not spec.name or not isinstance(spec.name, str):
        raise ValueError(f"a tuner needs a non-empty name, got {spec.name!r}")
    if spec.name in _REGISTRY and not replace:
        raise ValueError(f"tuner {spec.name!r} is already registered")
    seen: set[str] = set()
    for opt in spec.options:
        if opt.name in seen or opt.name in spec.fixed_kwargs or opt.name in ("task", "seed"):
            raise ValueError(f"tuner {spec.name!r}: option {opt.name!r} is declared twice or reserved")
        if opt.type not in OPTION_TYPES:
            raise ValueError(f"tuner {spec.name!r}: option {opt.name!r} has unsupported type {opt.type!r}")
        seen.add(opt.name)
        if opt.default is not None and opt.type is not object:
            opt.convert(opt.default)  # a default must satisfy its own declaration
    _REGISTRY[spec.name] = spec
    return spec


def get_tuner_spec(name: str) -> TunerSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown tuner {name!r}: choose from {', '.join(_REGISTRY)}") from None


def tuner_specs() -> list[TunerSpec]:
    """Every registered tuner, in registration order."""
    return list(_REGISTRY.values())


def create_tuner(name: str, task: TuningTask, seed: int | None = None, **options: Any) -> Tuner:
    """``create_tuner("rfei", task, seed=0, plan_size="32")``: options are checked against the tuner's
    declarations and converted (text from the command line or Python values); ValueError names an unknown
    tuner or option and lists the valid ones."""
    spec = get_tuner_spec(name)
    kwargs = spec.resolve(options)
    return spec.factory(task, seed=seed, **dict(spec.fixed_kwargs), **kwargs)


def signature_mismatches(spec: TunerSpec) -> list[str]:
    """Where ``spec`` and its factory's signature disagree: undeclared keywords, declared options the factory
    does not take, defaults that differ. Empty when they agree."""
    params = {
        n: p
        for n, p in inspect.signature(spec.factory).parameters.items()
        if n not in ("self", "task", "seed") and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    declared = {o.name: o for o in spec.options}
    problems = [
        f"{spec.name}: keyword {n!r} is not declared"
        for n in params
        if n not in declared and n not in spec.fixed_kwargs
    ]
    for n, opt in declared.items():
        if n not in params:
            problems.append(f"{spec.name}: option {n!r} is not a keyword of {spec.factory.__name__}")
        elif params[n].default is inspect.Parameter.empty or params[n].default != opt.default:
            problems.append(
                f"{spec.name}: option {n!r} declares default {opt.default!r}, the constructor has {params[n].default!r}"
            )
    problems += [
        f"{spec.name}: fixed keyword {n!r} is not a keyword of {spec.factory.__name__}"
        for n in spec.fixed_kwargs
        if n not in params
    ]
    return problems


# -- today's tuners: their options are the classes' own declarations ------------------------------------------
def _spec(name: str, cls: type[Tuner], summary: str, fixed: Mapping[str, Any] | None = None) -> TunerSpec:
    fixed = dict(fixed or {})
    options = tuple(o for o in cls.declared_options() if o.name not in fixed)
    return TunerSpec(name, cls, summary, options, fixed)


register_tuner(_spec("xgb", XGBTuner, "AutoTVM's XGBoost cost model + simulated annealing"))
register_tuner(_spec("xgb-rank", XGBTuner, "XGBTuner with the pairwise-rank objective", {"loss_type": "rank"}))
register_tuner(_spec("random", RandomTuner, "uniform random sampling without repeats"))
register_tuner(_spec("grid", GridSearchTuner, "every valid config in index order"))
register_tuner(_spec("rfei", RFEITuner, "AdaTune: random-forest expected improvement, contextual exploration"))
register_tuner(_spec("release", ReleaseTuner, "ReLeASE: PPO search agent + adaptive sampling"))
register_tuner(_spec("trace", TraceSearchTuner, "MetaSchedule evolutionary search over traces + a cost model"))
