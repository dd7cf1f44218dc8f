"""Options declared once, as data: name, type, bounds, default and doc of every constructor keyword. A ``Configurable``
tuner, cost model or search lists its keywords in ``OPTIONS``; its constructor checks them against their declarations,
and defaults come from the constructor's own signature, so nothing is written twice. The registry, the CLI's
``-o KEY=VALUE``, ``adatune tuners`` and docs/tuners.md all read these declarations."""

from __future__ import annotations

import builtins
import dataclasses
import functools
import inspect
import json
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

__all__ = ["Configurable", "Option", "OPTION_TYPES", "option_text"]

UNSET: Any = inspect.Parameter.empty  # an Option whose default comes from the constructor's signature


OPTION_TYPES = (int, float, str, bool, dict, tuple, object)
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


@dataclass(frozen=True)
class Option:
    """One constructor keyword: its type, default, meaning and allowed values. ``type``: ``int``, ``float``, ``str``,
    ``bool``, ``dict`` (JSON on the command line), ``tuple`` (``length`` comma-separated ``item_type`` items) or
    ``object`` (Python only). A ``None`` default or choice makes ``none`` valid; ``objects=True`` also accepts an object
    in place of a text choice, passed on unchanged."""

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

    @classmethod
    def declare(cls, name: str, type: builtins.type[Any], doc: str, **kw: Any) -> Option:
        """An option whose default is the constructor's (``Configurable.declared_options`` fills it in)."""
        return cls(name, type, UNSET, doc, **kw)

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
            names = [option_text(c) for c in self.choices]
            if self.nullable and "none" not in names:
                names.append("none")
            return "|".join(names)
        base = {dict: "JSON object", object: "Python object", bool: "true|false"}.get(self.type, self.type.__name__)
        if self.type is tuple:
            item = self.item_type.__name__
            base = ",".join([item] * self.length) if self.length else f"{item},..."
        return f"{base}|none" if self.nullable and self.type is not object else base

    def convert(self, value: Any) -> Any:
        """``value`` (command-line text or a Python value) as this option's type; ValueError naming what it accepts."""
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
            item = Option(self.name, self.item_type, self.item_type(), self.doc)
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
            raise self._error(value, "one of " + ", ".join(option_text(c) for c in self.choices))
        if isinstance(value, float) and not math.isfinite(value):
            raise self._error(value, "a finite number")
        if self.minimum is not None and value < self.minimum:
            raise self._error(value, f"at least {option_text(self.minimum)}")
        if self.maximum is not None and value > self.maximum:
            raise self._error(value, f"at most {option_text(self.maximum)}")
        return value

    def _error(self, value: Any, expected: str) -> ValueError:
        return ValueError(f"option {self.name}={option_text(value)}: expected {expected}")


class Configurable:
    """A class whose constructor keywords are declared once in ``OPTIONS``, checked and converted to their
    declared type on every construction (the constructor sees ``False`` for ``"false"``, a tuple for a list)."""

    OPTIONS: ClassVar[tuple[Option, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" not in cls.__dict__ or not cls.OPTIONS:
            return
        init = cls.__dict__["__init__"]
        signature = inspect.signature(init)
        declared = tuple(
            dataclasses.replace(o, default=signature.parameters[o.name].default)
            for o in cls.OPTIONS
            if o.name in signature.parameters
        )

        @functools.wraps(init)
        def checked_init(self: Any, *args: Any, **kw: Any) -> None:
            # converted values: "false" given from Python means False, as on the command line, not truthy text
            bound = signature.bind(self, *args, **kw)
            given = bound.arguments
            for opt in declared:
                if opt.name in given and given[opt.name] is not opt.default:
                    try:
                        given[opt.name] = opt.convert(given[opt.name])
                    except ValueError as err:
                        raise ValueError(f"{cls.__name__}: {err}") from None
            init(*bound.args, **bound.kwargs)

        cls.__init__ = checked_init  # type: ignore[method-assign]

    @classmethod
    def option(cls, name: str) -> Option:
        """The declaration of keyword ``name`` (for classes that take the same keyword and pass it on)."""
        for opt in cls.OPTIONS:
            if opt.name == name:
                return opt
        raise KeyError(f"{cls.__name__} declares no option {name!r}")

    @classmethod
    def declared_options(cls) -> tuple[Option, ...]:
        """``OPTIONS`` with each default read from the constructor's signature (one place for defaults)."""
        params = inspect.signature(cls.__init__).parameters
        out = []
        for opt in cls.OPTIONS:
            default = params[opt.name].default if opt.name in params else UNSET
            out.append(dataclasses.replace(opt, default=None if default is UNSET else default))
        return tuple(out)


def option_text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value)) if abs(value) < 1e15 else str(value)
    return str(value)
