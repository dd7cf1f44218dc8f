"""Importing TVM's tensor intrinsics without scanning ``sys.modules`` once per stack frame.

Every ``TuneContext`` imports ``tvm.s_tir.tensor_intrin``, whose decorators call ``inspect.stack()``, and for every
generated-code frame ``inspect.getmodule`` scans all of ``sys.modules``. ``import_tensor_intrinsics`` makes it
answer None at once for such pseudo-files (what the scan answers), then puts it back.
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
