"""The quick import of TVM's tensor intrinsics: ``inspect`` gives the same answers inside it and is put back after."""

from __future__ import annotations

import inspect
import sys

from adatune.codegen import tensor_intrinsics


def test_the_shortcut_answers_as_the_module_scan_would_and_inspect_is_put_back() -> None:
    original = inspect.getmodule
    generated = eval("sys._getframe()", {"sys": sys})  # a frame of generated code, as TVMScript's parser makes
    assert generated.f_code.co_filename == "<string>"
    here = sys._getframe()
    scans: list[str | None] = []

    def counted(obj, _filename=None):  # stands for the original: records when the shortcut defers to it
        scans.append(_filename)
        return original(obj, _filename)

    inspect.getmodule = counted
    try:
        with tensor_intrinsics._generated_frames_skip_the_module_scan():
            assert inspect.getmodule is not counted
            assert inspect.getmodule(generated, "<string>") is None
            assert scans == []  # answered without the scan
            assert inspect.getmodule(here, __file__) is sys.modules[__name__]  # a real file: the original's answer
            assert scans == [__file__]
        assert inspect.getmodule is counted  # put back as it was found
    finally:
        inspect.getmodule = original
    assert original(generated, "<string>") is None  # what the scan answers for the generated frame
    tensor_intrinsics.import_tensor_intrinsics()
    assert "tvm.s_tir.tensor_intrin" in sys.modules and inspect.getmodule is original
    assert inspect.stack()[0].code_context is not None  # inspect still reads source for real frames
