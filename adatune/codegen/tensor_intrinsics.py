"""Importing TVM's tensor intrinsics without scanning ``sys.modules`` once per stack frame.

Every ``tvm.s_tir.meta_schedule.TuneContext`` first imports ``tvm.s_tir.tensor_intrin``: 496 TVMScript functions,
each of whose decorators calls ``inspect.stack()``. For every frame of generated code on that stack (``<string>``,
``<ast>``, ``<frozen importlib._bootstrap>``) CPython's ``inspect.getmodule`` finds no module and scans all of
``sys.modules`` again, about 2,000 modules once TVM is imported: the import is slow, and every process that made
a trace space, a DietCode program-feature context or a meta_schedule tuning context paid for it.

``import_tensor_intrinsics`` imports them with ``inspect.getmodule`` answering None at once for a frame whose file is
such a pseudo-file that no module is cached under: the answer the scan reaches (a frame has no ``__name__`` for the
fallback checks after it) unless a module not yet scanned has that pseudo-name as its ``__file__``. The original is
put back afterwards.
"""

from __future__ import annotations

import contextlib
import inspect
import types
from collections.abc import Iterator
from typing import Any

__all__ = ["import_tensor_intrinsics"]


@contextlib.contextmanager
def _generated_frames_skip_the_module_scan() -> Iterator[None]:
    original = inspect.getmodule

    def getmodule(obj: Any, _filename: str | None = None) -> types.ModuleType | None:
        if (
            isinstance(obj, types.FrameType)
            and _filename is not None
            and _filename.startswith("<")
            and _filename not in inspect.modulesbyfile
            and inspect.getabsfile(obj, _filename) not in inspect.modulesbyfile
        ):
            return None
        return original(obj, _filename)

    inspect.getmodule = getmodule  # type: ignore[assignment]
    try:
        yield
    finally:
        inspect.getmodule = original


def import_tensor_intrinsics() -> None:
    """Import ``tvm.s_tir.tensor_intrin`` (what a ``TuneContext`` imports first) once per process, quickly."""
    with _generated_frames_skip_the_module_scan():
        import tvm.s_tir.tensor_intrin  # noqa: F401
