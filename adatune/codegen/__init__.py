"""Code generation where TVM 0.27 falls short, shared by the templates, trace spaces, DietCode and model builds.

``x86``: the register, cache and parallel limits the CPU templates tile by. ``vector_math``: exp, erf, tanh and log
in vector registers through glibc's libmvec. ``stack_bounds``: buffers of symbolic size on the stack, sized by the
symbol's range. ``tir_rebuild``: the one rebuild of a TIR statement's children for rewrites in Python.
``tensor_intrinsics``: TVM's tensor intrinsics imported quickly. ``generic_schedule``: the shape-generic CPU schedule
of any legalised operator. Each loads on first use (they load TVM's compiler pieces), so importing the package
costs nothing. Below everything but ``target`` in the layers: they read TVM's TIR, never a task or a space.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["x86", "vector_math", "stack_bounds", "tir_rebuild", "tensor_intrinsics", "generic_schedule"]


def __getattr__(name: str) -> ModuleType:
    if name in __all__:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
