"""Every valid operator shape gets a kernel: seeded, realistic shapes (BERT token counts, attention heads,
CNN layers, classifiers) on AVX2, AVX-512 and CUDA targets each have configs, and on this host a drawn
config of each shape builds and matches numpy, padded shapes included."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tvm
from test_templates import _run_against_numpy

import adatune
import adatune.templates  # noqa: F401 - registers the templates
from adatune.templates import _gemm

HOST = adatune.target.host()
_X86 = {"kind": "llvm", "mtriple": "x86_64-linux-gnu"}
CPU_TARGETS = {
    "host": HOST,
    "zen3-avx2-2c": adatune.target.create({**_X86, "mcpu": "znver3", "num-cores": 2}),
    "skylake-avx512-16c": adatune.target.create({**_X86, "mcpu": "skylake-avx512", "num-cores": 16}),
}
WIDTHS = [2, 10, 384, 512, 768, 1000, 1024, 2048, 3072, 4096, 30522]


def _dense_shapes(rng: np.random.Generator, n: int) -> list[tuple]:
    """Token counts 1-512 against transformer and classifier widths (rows, K, cols)."""
    return [
        (int(rng.integers(1, 513)), int(rng.choice(WIDTHS[2:])), int(rng.choice(WIDTHS)), "float32") for _ in range(n)
    ]


def _bmm_shapes(rng: np.random.Generator, n: int) -> list[tuple]:
    """Attention: heads x T x T scores (NT) and heads x T x d context (NN), T in 1-128."""
    out = []
    for _ in range(n):
        t, h, d = int(rng.integers(1, 129)), int(rng.choice([1, 4, 8, 12, 16])), int(rng.choice([32, 64, 80, 128]))
        out += [(h, t, t, d, "NT", "float32"), (h, t, d, t, "NN", "float32")]
    return out


def _conv_shapes(rng: np.random.Generator, n: int) -> list[tuple]:
    """CNN layers: stems, odd feature maps, 1x1 to 7x7 kernels, strides 1 and 2."""
    out = []
    for _ in range(n):
        k = int(rng.choice([1, 3, 5, 7]))
        ci, co = int(rng.choice([3, 16, 24, 32, 64, 96, 128, 256, 512])), int(rng.choice([16, 24, 32, 64, 96, 256]))
        h = int(rng.choice([7, 13, 14, 17, 28, 32, 56, 112]))
        out.append((1, ci, h, h, co, k, k, int(rng.choice([1, 2])), k // 2, "float32"))
    return out


SHAPES = {
    "dense": _dense_shapes(np.random.default_rng(19), 40),
    "batch_matmul": _bmm_shapes(np.random.default_rng(20), 25),
    "conv2d_nchw": _conv_shapes(np.random.default_rng(21), 30),
}


@pytest.mark.parametrize("target", list(CPU_TARGETS), ids=list(CPU_TARGETS))
@pytest.mark.parametrize("op", list(SHAPES))
def test_every_drawn_cpu_shape_has_configs(op: str, target: str) -> None:
    tgt = CPU_TARGETS[target]
    empty = [args for args in SHAPES[op] if len(adatune.task.create(f"{op}.x86", args, tgt).config_space) == 0]
    assert not empty, f"{op}.x86 on {target}: no config for {empty}"


@pytest.mark.parametrize("op", list(SHAPES))
def test_every_drawn_cuda_shape_has_configs(op: str) -> None:
    cuda = adatune.target.cuda("sm_80")
    empty = [args for args in SHAPES[op][:6] if len(adatune.task.create(f"{op}.cuda", args, cuda).config_space) == 0]
    assert not empty, f"{op}.cuda: no config for {empty}"


def _build_and_compare(task: adatune.task.Task, index: int) -> None:
    sch, _ = task.instantiate(index)
    _run_against_numpy(task, sch, f"config {index}", seed=index, atol=1e-3)


# awkward extents on this host: 2 x prime rows (padded), widths no multiple of the vector, odd attention T
BUILT = [
    ("dense.x86", (62, 256, 768, "float32")),  # BERT's FFN2 row count (62 = 2 x 31), smaller K
    ("dense.x86", (37, 64, 1000, "float32")),  # prime rows, a classifier's 1000 columns
    ("dense.x86", (1, 96, 30, "float32")),
    ("batch_matmul.x86", (2, 62, 62, 64, "NT", "float32")),
    ("batch_matmul.x86", (3, 58, 20, 58, "NN", "float32")),
    ("batch_matmul.x86", (1, 15, 15, 80, "NT", "float32")),
    *[("dense.x86", a) for a in _dense_shapes(np.random.default_rng(7), 2) if math.prod(a[:3]) < 2e8],
    *[("conv2d_nchw.x86", a) for a in _conv_shapes(np.random.default_rng(8), 3)],
]


@pytest.mark.parametrize("name,args", BUILT, ids=[f"{n}{a}" for n, a in BUILT])
def test_drawn_configs_of_awkward_shapes_build_and_match_numpy(name: str, args: tuple) -> None:
    task = adatune.task.create(name, args, HOST)
    (index,) = task.config_space.sample(np.random.default_rng(len(args) + args[1]), 1)
    _build_and_compare(task, index)


def test_bert_ffn2_at_62_tokens_is_padded_to_full_register_tiles() -> None:
    """62 rows offer only 1- and 2-row register tiles: the template pads them to 64 and keeps taller tiles."""
    info = adatune.target.cpu_info(HOST)
    assert _gemm.gemm_padding(62, 768, info.lanes("float32"), _gemm.register_rows_cap(info)) == (_gemm.ROW_PAD, 1)
    assert _gemm.gemm_padding(64, 768, info.lanes("float32"), _gemm.register_rows_cap(info)) == (1, 1)
    task = adatune.task.create("dense.x86", (62, 3072, 768, "float32"), HOST)
    space = task.config_space
    assert len(space) > 0
    drawn = space.sample(np.random.default_rng(0), min(64, len(space)))
    tallest = max(drawn, key=lambda i: space.get(i)["tile_y"].size[-1])
    assert space.get(tallest)["tile_y"].size[-1] >= _gemm.MIN_TILE_ROWS
    assert math.prod(space.get(tallest)["tile_y"].size) == 64  # the split runs over the padded rows
    _build_and_compare(task, tallest)


def test_a_model_dense_with_awkward_rows_and_columns_is_padded_and_keeps_its_epilogue() -> None:
    """62 tokens x 30 outputs + bias + GELU: the template's padded trace replays on the fused function (other
    buffer names, epilogue blocks after the crop) and the built kernel matches PyTorch."""
    import torch
    from torch import nn

    import adatune.models as am

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(48, 30), nn.GELU()).eval()
    x = torch.randn(62, 48)
    model = am.from_torch(net, (x,), name="awkward-dense")
    (task,) = [t for t in am.extract_tasks(model) if t.kind == "dense.x86"]
    assert task.task is not None and task.task.space.size > 0
    space = task.task.knob.config_space
    (index,) = space.sample(np.random.default_rng(0), 1)
    lib = tvm.tirx.build(task.task.scheduled_module(space.get(index)), HOST)
    specs = task.task.arg_specs
    params = {"weight": net[0].weight.detach().numpy().T.copy(), "bias": net[0].bias.detach().numpy()}
    host = []
    for s in specs:  # the fused function takes x, the pre-transposed weight and the bias, then the output
        if s.is_output:
            host.append(np.zeros(s.shape, s.dtype))
        elif tuple(s.shape) == tuple(x.shape):
            host.append(x.numpy())
        elif len(s.shape) == 2:
            host.append(params["weight"])
        else:
            host.append(params["bias"].reshape(s.shape))
    args = [tvm.runtime.tensor(a, tvm.cpu()) for a in host]
    lib["main"](*args)
    with torch.no_grad():
        want = net(x).numpy()
    np.testing.assert_allclose(args[-1].numpy(), want, rtol=1e-4, atol=1e-4)
