"""The quick import of TVM's tensor intrinsics: ``inspect`` gives the same answers inside it and is put back after."""

from __future__ import annotations

import inspect
import sys

from adatune import tensor_intrinsics


def test_the_shortcut_answers_as_the_module_scan_would_and_inspect_is_put_back() -> None:
    original = inspect.getmodule
    generated = eval("sys._getframe()", {"sys": sys})  # a frame of generated code, as TVMScript's parser makes
    assert generated.f_code.co_filename == "<string>"
    here = sys._getframe()
    with tensor_intrinsics._generated_frames_skip_the_module_scan():
        assert inspect.getmodule is not original
        assert inspect.getmodule(generated, "<string>") is None
        assert inspect.getmodule(here, __file__) is sys.modules[__name__]  # a real file: the original's answer
    assert inspect.getmodule is original
    assert original(generated, "<string>") is None  # what the scan answers for the generated frame
    tensor_intrinsics.import_tensor_intrinsics()
    assert "tvm.s_tir.tensor_intrin" in sys.modules and inspect.getmodule is original
    assert inspect.stack()[0].code_context is not None  # inspect still reads source for real frames
