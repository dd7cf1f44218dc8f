"""Code generation where TVM 0.27 falls short, shared by the templates, trace spaces, DietCode and model builds.

``x86`` (the CPU templates' tiling limits), ``vector_math`` (libmvec), ``stack_bounds``, ``tir_rebuild``,
``tensor_intrinsics`` and ``generic_schedule`` load on first use, so importing the package costs nothing. They read
TVM's TIR, never a task or a space, so they sit below everything but ``target``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["x86", "vector_math", "stack_bounds", "tir_rebuild", "tensor_intrinsics", "generic_schedule"]


def __getattr__(name: str) -> ModuleType:
    if name in __all__:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
