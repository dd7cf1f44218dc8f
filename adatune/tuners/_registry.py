"""Tuners by name, each registered once with its options declared as data.

The CLI's ``--tuner``/``--option``, its help text, the README table and ``create_tuner`` all read the same
``TunerSpec``, so a tuner's options are written down in one place; ``tests/test_registry.py`` checks the
declarations against the constructors' signatures so they cannot drift. Modules adding a tuner call
``register_tuner(TunerSpec(...))`` when imported.
"""

from __future__ import annotations

import builtins
import inspect
import json
import math
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from ..cost_models import COST_MODELS
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

_OPTION_TYPES = (int, float, str, bool, dict, tuple, object)
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


@dataclass(frozen=True)
class TunerOption:
    """One constructor keyword of a tuner: its type, default, meaning and allowed values.

    ``type`` is ``int``, ``float``, ``str``, ``bool``, ``dict`` (JSON text on the command line), ``tuple``
    (``length`` items of ``item_type``, comma-separated on the command line) or ``object`` (a Python object
    such as a cost model, settable from Python only). A ``None`` default, or ``None`` among
    ``choices``, makes ``none`` a valid value. ``objects=True`` lets Python callers pass an object instead of
    one of the text choices (e.g. a ``Sampler`` instance); it is handed to the constructor unchanged.
    """

    name: str
    type: builtins.type[Any]
    default: Any
    doc: str
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    objects: bool = False
    item_type: builtins.type[Any] = int
    length: int | None = None

    @property
    def nullable(self) -> bool:
        return self.default is None or (self.choices is not None and None in self.choices)

    @property
    def settable_from_text(self) -> bool:
        """False for Python-only options (``type=object``), which the command line cannot give."""
        return self.type is not object

    def type_name(self) -> str:
        """How the value is written: ``int``, ``float|none``, ``adaptive|none``, ``JSON object``, ..."""
        if self.choices is not None:
            names = [_text(c) for c in self.choices]
            if self.nullable and "none" not in names:
                names.append("none")
            return "|".join(names)
        base = {dict: "JSON object", object: "Python object", bool: "true|false"}.get(self.type, self.type.__name__)
        if self.type is tuple:
            item = self.item_type.__name__
            base = ",".join([item] * self.length) if self.length else f"{item},..."
        return f"{base}|none" if self.nullable and self.type is not object else base

    def convert(self, value: Any) -> Any:
        """``value`` (text from the command line, or a Python value) as this option's type; ValueError naming
        the option and what it accepts when it does not fit."""
        if value is None or (isinstance(value, str) and value.strip().lower() == "none" and self.nullable):
            return self._checked(None)
        if self.type is object or (self.objects and not isinstance(value, str)):
            if isinstance(value, str):
                raise self._error(value, "a Python object, which cannot be given as text")
            return value
        if isinstance(value, str) and self.type is not str:
            return self._checked(self._parse(value))
        return self._checked(self._coerce(value))

    def _parse(self, text: str) -> Any:
        text = text.strip()
        try:
            if self.type is bool:
                low = text.lower()
                if low in _TRUE or low in _FALSE:
                    return low in _TRUE
                raise ValueError
            if self.type is dict:
                parsed = json.loads(text)
                if not isinstance(parsed, dict):
                    raise ValueError
                return parsed
            if self.type is tuple:
                return self._coerce(text.strip("()[] ").split(","))
            return self.type(text)
        except ValueError:
            raise self._error(text, self.type_name()) from None

    def _coerce(self, value: Any) -> Any:
        if self.type is tuple:
            if (
                isinstance(value, (str, Mapping))
                or not isinstance(value, Sequence)
                or (self.length is not None and len(value) != self.length)
            ):
                raise self._error(value, self.type_name())
            item = TunerOption(self.name, self.item_type, self.item_type(), self.doc)
            return tuple(item.convert(v) for v in value)
        ok = {
            int: isinstance(value, numbers.Integral) and not isinstance(value, bool),
            float: isinstance(value, numbers.Real) and not isinstance(value, bool),
            bool: isinstance(value, (bool, np.bool_)),
            str: isinstance(value, str),
            dict: isinstance(value, Mapping),
        }[self.type]
        if not ok:
            raise self._error(value, self.type_name())
        return dict(value) if self.type is dict else self.type(value)

    def _checked(self, value: Any) -> Any:
        if value is None:
            if not self.nullable:
                raise self._error(None, self.type_name())
            return None
        if self.choices is not None and value not in self.choices:
            raise self._error(value, "one of " + ", ".join(_text(c) for c in self.choices))
        if isinstance(value, float) and not math.isfinite(value):
            raise self._error(value, "a finite number")
        if self.minimum is not None and value < self.minimum:
            raise self._error(value, f"at least {_text(self.minimum)}")
        if self.maximum is not None and value > self.maximum:
            raise self._error(value, f"at most {_text(self.maximum)}")
        return value

    def _error(self, value: Any, expected: str) -> ValueError:
        return ValueError(f"option {self.name}={_text(value)}: expected {expected}")


@dataclass(frozen=True)
class TunerSpec:
    """A tuner as the registry knows it: ``factory(task, seed=..., **fixed_kwargs, **options)`` builds it."""

    name: str
    factory: Callable[..., Tuner]
    summary: str
    options: tuple[TunerOption, ...] = ()
    fixed_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def option(self, name: str) -> TunerOption:
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
        if opt.type not in _OPTION_TYPES:
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


def _text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value)) if abs(value) < 1e15 else str(value)
    return str(value)


# -- today's tuners -----------------------------------------------------------------------------------------
_FEATURE_TYPES = ("knob", "itervar")


def _plan_size() -> TunerOption:
    return TunerOption("plan_size", int, 64, "trials per plan: the cost model is refit after each plan", minimum=1)


def _model_options(loss: bool) -> tuple[TunerOption, ...]:
    """The XGBoost cost model's options shared by xgb, xgb-rank and release."""
    opts = [
        TunerOption(
            "feature_type",
            str,
            "knob",
            "cost-model features: knob values or loop (itervar) features",
            choices=_FEATURE_TYPES,
        )
    ]
    if loss:
        opts.append(
            TunerOption(
                "loss_type", str, "reg", "XGBoost objective: regression or pairwise rank", choices=("reg", "rank")
            )
        )
    opts.append(TunerOption("num_threads", int, None, "XGBoost threads (none: all cores)", minimum=1))
    return tuple(opts)


def _eps_greedy(default: float | None, doc: str) -> TunerOption:
    return TunerOption("eps_greedy", float, default, doc, minimum=0.0, maximum=1.0)


def _xgb_options(loss: bool) -> tuple[TunerOption, ...]:
    return (
        _plan_size(),
        *_model_options(loss),
        TunerOption("optimizer", str, "sa", "model optimizer: parallel simulated annealing", choices=("sa",)),
        TunerOption(
            "diversity_filter_ratio",
            float,
            None,
            "ask the optimizer for this many times plan_size candidates, keep a diverse subset",
            minimum=1.0,
        ),
        TunerOption(
            "sampler",
            str,
            None,
            "choose each plan by ReLeASE's k-means adaptive sampling",
            choices=("adaptive", None),
            objects=True,
        ),
        _eps_greedy(0.05, "share of each plan measured at random"),
    )


register_tuner(TunerSpec("xgb", XGBTuner, "AutoTVM's XGBoost cost model + simulated annealing", _xgb_options(True)))
register_tuner(
    TunerSpec(
        "xgb-rank",
        XGBTuner,
        "XGBTuner with the pairwise-rank objective",
        _xgb_options(False),
        fixed_kwargs={"loss_type": "rank"},
    )
)


def _range_idx() -> TunerOption:
    return TunerOption(
        "range_idx",
        tuple,
        None,
        "only knob configs with an index in [first, last] (AutoTVM's)",
        item_type=int,
        length=2,
    )


register_tuner(TunerSpec("random", RandomTuner, "uniform random sampling without repeats", (_range_idx(),)))
register_tuner(TunerSpec("grid", GridSearchTuner, "every valid config in index order", (_range_idx(),)))
register_tuner(
    TunerSpec(
        "rfei",
        RFEITuner,
        "AdaTune: random-forest expected improvement, contextual exploration",
        (
            _plan_size(),
            TunerOption("n_trees", int, 100, "trees in the random forest", minimum=1),
            TunerOption(
                "uncertainty",
                str,
                "forestci",
                "uncertainty source: forestci's jackknife or the per-tree spread",
                choices=("forestci", "trees"),
            ),
            TunerOption("contextual", bool, True, "exploration share eps_t from the model's uncertainty (AdaTune)"),
            TunerOption("n_context", int, 64, "unmeasured configs eps_t is estimated on", minimum=1),
            TunerOption(
                "feature_type",
                str,
                "knob",
                "cost-model features: knob values or loop (itervar) features",
                choices=_FEATURE_TYPES,
            ),
            TunerOption("calibrate", bool, True, "empirical-Bayes calibration of forestci's variance"),
            _eps_greedy(None, "fixed random share (none: 0 when contextual, else 0.05)"),
            TunerOption("num_threads", int, None, "threads for the forest (none: all cores)", minimum=1),
        ),
    )
)
register_tuner(
    TunerSpec(
        "release",
        ReleaseTuner,
        "ReLeASE: PPO search agent + adaptive sampling",
        (
            _plan_size(),
            TunerOption("cost_model", object, None, "a CostModel instance (none: AutoTVM's XGBoost model)"),
            TunerOption(
                "sampler",
                str,
                "adaptive",
                "k-means adaptive sampling, or none for the top plan_size",
                choices=("adaptive", None),
                objects=True,
            ),
            _eps_greedy(0.05, "share of each plan measured at random"),
            *_model_options(True),
            TunerOption("agent_options", dict, None, 'PPOAgent keyword arguments, e.g. {"step_cap": 16}'),
        ),
    )
)


register_tuner(
    TunerSpec(
        "trace",
        TraceSearchTuner,
        "MetaSchedule evolutionary search over traces + a cost model",
        (
            TunerOption(
                "cost_model",
                str,
                "xgb",
                "cost model on the space's features: XGBoost or AdaTune's RFEI",
                choices=tuple(COST_MODELS),
                objects=True,
            ),
            TunerOption("plan_size", int, 64, "candidates per plan (the model is refit between plans)", minimum=1),
            TunerOption("population_size", int, 128, "evolutionary population", minimum=2),
            TunerOption(
                "init_measured_ratio",
                float,
                0.2,
                "share of the population seeded with the best measured",
                minimum=0.0,
                maximum=1.0,
            ),
            TunerOption("genetic_num_iters", int, 3, "rounds of selection and mutation per plan", minimum=0),
            TunerOption(
                "mutate_prob", float, 0.85, "probability that a selected parent is mutated", minimum=0.0, maximum=1.0
            ),
            TunerOption(
                "eps_greedy",
                float,
                None,
                "fixed random share (none: 0 with RFEI and contextual, else 0.05)",
                minimum=0.0,
                maximum=1.0,
            ),
            TunerOption(
                "contextual", bool, True, "with RFEI: random share eps_t from the model's uncertainty (AdaTune)"
            ),
            TunerOption("n_context", int, 64, "unmeasured samples eps_t is estimated on", minimum=1),
            TunerOption("n_trees", int, 100, "trees in RFEI's random forest", minimum=2),
            TunerOption(
                "uncertainty",
                str,
                "forestci",
                "RFEI's uncertainty: forestci's jackknife or the per-tree spread",
                choices=("forestci", "trees"),
            ),
            TunerOption("num_threads", int, None, "cost-model threads (none: the model's default)", minimum=1),
        ),
    )
)
