"""Channel-blocked convolutions: the NCHW[x]c template against numpy, and models converted to it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import tvm
from torch import nn

import adatune
import adatune.models as am
from adatune.templates import conv2d_nchwc
from adatune.templates.conv2d import conv2d_reference

HOST = adatune.target.host()


def test_blocking_round_trips_and_the_reference_is_the_nchw_convolution() -> None:
    rng = np.random.default_rng(0)
    data = rng.standard_normal((1, 32, 9, 9)).astype("float32")
    kernel = rng.standard_normal((16, 32, 3, 3)).astype("float32")
    np.testing.assert_array_equal(conv2d_nchwc.unpack_nchwc(conv2d_nchwc.pack_nchwc(data, 8)), data)
    args = (1, 32, 9, 9, 16, 3, 3, 2, 1, 8, 4)
    # OIHW8i4o: [CO // 4, CI // 8, KH, KW, 8, 4]
    blocked_kernel = kernel.reshape(4, 4, 4, 8, 3, 3).transpose(0, 2, 4, 5, 3, 1)
    got = conv2d_nchwc.conv2d_nchwc_reference(conv2d_nchwc.pack_nchwc(data, 8), blocked_kernel, args)
    want = conv2d_nchwc.pack_nchwc(conv2d_reference(data, kernel, args), 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "args",
    [
        (1, 32, 14, 14, 32, 3, 3, 1, 1, 16, 16, "float32"),
        (1, 16, 15, 15, 32, 3, 3, 2, 1, 8, 16, "float32"),  # odd size, stride 2, two block sizes
        (1, 16, 14, 14, 32, 1, 1, 2, 0, 16, 8, "float32"),  # 1x1, no padding stage
    ],
)
def test_template_configs_match_numpy(args: tuple) -> None:
    task = adatune.task.create("conv2d_NCHWc.x86", args, HOST)
    space = task.config_space
    assert len(space) > 1 and task.flop > 0
    rng = np.random.default_rng(1)
    for index in space.sample(rng, 3):
        lib = tvm.tirx.build(task.instantiate(index)[0].mod, task.target)
        arrays = [
            np.zeros(s.shape, s.dtype) if s.is_output else rng.uniform(-1, 1, s.shape).astype(s.dtype)
            for s in task.arg_specs
        ]
        dev = [tvm.runtime.tensor(a, tvm.cpu()) for a in arrays]
        lib["main"](*dev)
        want = task.reference_outputs(arrays[:2])
        np.testing.assert_allclose(dev[-1].numpy(), want[0], rtol=1e-4, atol=1e-4, err_msg=f"config {index}")


def test_every_register_tile_fits_the_avx2_register_file() -> None:
    avx2 = {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "znver3", "num-cores": 2}
    task = adatune.task.create("conv2d_NCHWc.x86", (1, 64, 28, 28, 64, 3, 3, 1, 1, 16, 16, "float32"), avx2)
    for i in task.config_space.sample(np.random.default_rng(0), 200):
        cfg = task.config_space.get(i)
        rows = cfg["tile_y"].size[-1] * cfg["tile_x"].size[-1]
        vectors = cfg["tile_f"].size[-1] * 16 // 8
        assert rows * vectors + vectors + 1 <= 16, f"config {i}: {rows}x{vectors} spills 16 ymm"
        assert cfg["tile_f"].size[0] * cfg["tile_y"].size[0] * cfg["tile_x"].size[0] >= 2  # both cores


def test_auto_layout_blocks_channels_by_the_simd_width() -> None:
    avx2 = {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "znver3", "num-cores": 2}
    avx512 = {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "znver4", "num-cores": 2}
    assert am.resolve_conv_layout("auto", avx2) == "NCHW8c"
    assert am.resolve_conv_layout("auto", avx512) == "NCHW16c"
    assert am.resolve_conv_layout("NCHW4c", avx2) == "NCHW4c" and am.resolve_conv_layout("NCHW") == "NCHW"


def test_bad_blocks_are_named() -> None:
    with pytest.raises(ValueError, match="channel blocks ic_bn=5"):
        conv2d_nchwc.conv2d_nchwc_compute(1, 32, 8, 8, 16, 3, 3, 1, 1, 5, 4)
    with pytest.raises(ValueError, match="conv_layout must be"):
        am.load_builtin("resnet18", conv_layout="NHWC")


class _Net(nn.Module):
    """A 3-channel stem (stays NCHW: 3 is no multiple of the block), a residual block, a strided 1x1
    shortcut, pooling and a dense head: every place a layout begins, continues or ends."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, 1, 1)
        self.a = nn.Conv2d(16, 16, 3, 1, 1)
        self.b = nn.Conv2d(16, 32, 3, 2, 1)
        self.down = nn.Conv2d(16, 32, 1, 2, 0)
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        x = torch.relu(self.a(x) + x)
        x = torch.relu(self.b(x) + self.down(x))
        x = nn.functional.max_pool2d(x, 2)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def test_a_blocked_model_uses_the_template_and_matches_pytorch(tmp_path, tune_knob_tasks_briefly) -> None:
    torch.manual_seed(0)
    model = am.from_torch(_Net(), (torch.randn(1, 3, 12, 12),), name="blocked", conv_layout="NCHW8c")
    tasks = am.extract_tasks(model)
    blocked = [t for t in tasks if t.kind == "conv2d_NCHWc.x86"]
    assert {t.task.args[7:11] for t in blocked} == {(1, 1, 8, 8), (2, 1, 8, 8), (2, 0, 8, 8)}
    assert any(t.kind == "conv2d_nchw.x86" for t in tasks)  # the 3-channel stem
    assert all(1 in t.constant_args for t in blocked)  # the blocked kernel is a constant of the model
    x = model.random_inputs(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # every task falls back: no records
        fallback = am.build(model, None)
    np.testing.assert_allclose(fallback.run(*x)[0], model.reference(*x)[0], rtol=1e-4, atol=1e-4)

    log = tmp_path / "blocked.jsonl"
    tune_knob_tasks_briefly(model, tasks, log)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pooling and the layout transforms fall back
        tuned = am.build(model, log)
    assert any(tuned.applied[t.func_name] == "record" for t in blocked)
    np.testing.assert_allclose(tuned.run(*x)[0], model.reference(*x)[0], rtol=1e-4, atol=1e-4)
