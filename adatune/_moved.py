"""Old import paths of moved modules and names, kept working with a DeprecationWarning that names the new path.

``adatune/__init__`` calls ``install()``, which puts a finder first on ``sys.meta_path``. Importing an old module
path gives the module at its new path: the same module object, which keeps its own name and spec, so pickles,
``isinstance`` checks and monkeypatches see one module. A public name that moved to another module
(``adatune.dispatch.X``) resolves through a module ``__getattr__`` that the finder adds to the old module when it loads,
so the module that lost the name never imports the one that gained it (often a higher layer). The tables are plain
strings and this module imports nothing of adatune's, so it sits outside the layers."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Callable, Sequence
from typing import Any

#: old module path -> new module path; a package's row covers its submodules
MODULES: dict[str, str] = {
    "adatune.evaluator": "adatune.measure.evaluator",
    "adatune.reference": "adatune.measure.vendor_reference",
    "adatune.devices": "adatune.measure.device_limits",
    "adatune.optimizers": "adatune.search.optimizers",
    "adatune.agents": "adatune.search.agents",
    "adatune.samplers": "adatune.search.samplers",
    "adatune.vector_math": "adatune.codegen.vector_math",
    "adatune.stack_bounds": "adatune.codegen.stack_bounds",
    "adatune.tir_rebuild": "adatune.codegen.tir_rebuild",
    "adatune.tensor_intrinsics": "adatune.codegen.tensor_intrinsics",
    "adatune.generic_schedule": "adatune.codegen.generic_schedule",
    "adatune.features": "adatune.cost_models.features",
    "adatune.workloads": "adatune.templates.workloads",
    "adatune.report": "adatune.records.report",
}

#: old ``module.name`` -> new ``module.name``, for a public name that moved to another module
NAMES: dict[str, str] = {
    "adatune.dispatch.ShapeDispatcher": "adatune.dietcode.ShapeDispatcher",
    "adatune.dispatch.CompiledDispatcher": "adatune.dietcode.CompiledDispatcher",
    "adatune.dispatch.check_extent": "adatune.dietcode.check_extent",
}

_ROOT = "adatune"
#: modules that get a ``__getattr__`` for old names: hosts of NAMES rows and parents of MODULES rows
_HOSTS: frozenset[str] = frozenset()


def _index() -> None:
    """Derive the hosts once from the tables (call again after changing them), not on every import."""
    global _HOSTS
    rows = [old.rpartition(".")[0] for old in (*MODULES, *NAMES)]
    _HOSTS = frozenset(host for host in rows if host != _ROOT)


def new_module_path(old: str) -> str | None:
    """The new path of module ``old`` (its own row or a moved package's), or None if it did not move."""
    head, rest = old, ""
    while head:
        new = MODULES.get(head)
        if new is not None:
            return new + rest
        head, dot, last = head.rpartition(".")
        rest = f".{last}{rest}"
    return None


def _warn(old: str, new: str, stacklevel: int) -> None:
    """Warn on behalf of the frame ``stacklevel`` up from the caller (1: the caller itself)."""
    message = f"{old} moved to {new}; import it from there, the old path will be removed"
    warnings.warn(message, DeprecationWarning, stacklevel=stacklevel + 1)


def is_moved(old: str) -> bool:
    """Whether ``old`` is a moved module (or inside a moved package) or a moved name."""
    return old in NAMES or new_module_path(old) is not None


def old_attribute(module: str, name: str, stacklevel: int = 2) -> Any:
    """``module.name`` for a moved submodule or public name: warns on behalf of the caller (``stacklevel`` as
    ``warnings.warn`` counts) and returns the object at its new path; any other name raises AttributeError."""
    old = f"{module}.{name}"
    new_module = new_module_path(old)
    if new_module is not None:
        _warn(old, new_module, stacklevel)
        return importlib.import_module(new_module)
    new_name = NAMES.get(old)
    if new_name is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    _warn(old, new_name, stacklevel)
    owner, _, attr = new_name.rpartition(".")
    return getattr(importlib.import_module(owner), attr)


def _add_old_names(module: types.ModuleType) -> None:
    """Give a host module a ``__getattr__`` for its old names, falling back to the one it defines itself."""
    own = module.__dict__.get("__getattr__")
    if getattr(own, "_adatune_moved", False):
        return
    host = module.__name__

    def __getattr__(name: str) -> Any:
        if own is None or is_moved(f"{host}.{name}"):
            return old_attribute(host, name, stacklevel=3)
        return own(name)

    __getattr__._adatune_moved = True  # type: ignore[attr-defined]
    module.__getattr__ = __getattr__  # type: ignore[method-assign]


class _AliasLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new path."""

    def __init__(self, new: str) -> None:
        self.new = new
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        _warn(spec.name, self.new, stacklevel=2)  # the caller's frame, past the import system's own
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self.spec  # the import system set the old path's spec on it; the module keeps its own


class _HostLoader(importlib.abc.Loader):
    """Runs a host module's own loader, then adds its ``__getattr__`` for old names and steps aside."""

    def __init__(self, spec: importlib.machinery.ModuleSpec) -> None:
        self.spec = spec
        self.inner = spec.loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.inner.create_module(spec) if self.inner is not None else None

    def exec_module(self, module: types.ModuleType) -> None:
        assert self.inner is not None
        self.inner.exec_module(module)
        self.spec.loader = module.__loader__ = self.inner
        _add_old_names(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("adatune."):  # every import in the process passes here: leave others at once
            return None
        new = new_module_path(fullname)
        if new is not None:
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))
        if fullname in _HOSTS:
            return self._host_spec(fullname, path, target)
        return None

    def _host_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None
    ) -> importlib.machinery.ModuleSpec | None:
        for finder in sys.meta_path:
            find: Callable[..., Any] | None = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _HostLoader(spec)
                return spec
        return None


_FINDER = _Finder()


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once) and give already-loaded hosts their old names."""
    _index()
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    for host in _HOSTS:
        module = sys.modules.get(host)
        if module is not None:
            _add_old_names(module)
