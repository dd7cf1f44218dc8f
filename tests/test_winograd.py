"""Winograd F(m x m, 3 x 3) convolutions: the transform, the template against numpy, and a model using it."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
import tvm
from torch import nn
from tvm import te

import adatune
import adatune.models as am
from adatune.models._winograd import WINOGRAD_TILE_BY_MAP, winograd_tile, winograd_tiles
from adatune.templates import conv2d_winograd as wg
from adatune.templates.conv2d import conv2d_reference

HOST = adatune.target.host()


@pytest.mark.parametrize("m", [2, 4])
def test_transformed_weight_stands_for_the_direct_convolution(m: int) -> None:
    rng = np.random.default_rng(0)
    data = rng.standard_normal((1, 8, 10, 9)).astype("float32")
    kernel = rng.standard_normal((4, 8, 3, 3)).astype("float32")
    u = wg.winograd_weight_transform_numpy(kernel, m)
    assert u.shape == (m + 2, m + 2, 8, 4)
    want = conv2d_reference(data, kernel, (0,) * 7 + (1, 1))
    got = wg.conv2d_winograd_reference(data, u, (1, 8, 10, 9, 4, 1, m))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # the TE stage a model folds at import computes the same transform
    k = te.placeholder(kernel.shape, "float32", name="k")
    lib = tvm.tirx.build(te.create_prim_func([k, wg.winograd_weight_transform(k, m)]), HOST)
    out = tvm.runtime.tensor(np.zeros(u.shape, "float32"), tvm.cpu())
    lib["main"](tvm.runtime.tensor(kernel, tvm.cpu()), out)
    np.testing.assert_allclose(out.numpy(), u, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "args",
    [
        (1, 16, 14, 14, 32, 1, 4, "float32"),  # 14 = 3 tiles of 4 + an overhanging one
        (1, 16, 10, 12, 16, 0, 2, "float32"),  # no padding, a non-square map
        (2, 32, 9, 9, 16, 1, 4, "float32"),  # a batch of two
    ],
)
def test_template_configs_match_numpy(args: tuple) -> None:
    task = adatune.task.create("conv2d_winograd.x86", args, HOST)
    space = task.config_space
    assert len(space) > 1 and task.flop > 0
    rng = np.random.default_rng(1)
    N, CI, H, W, CO, pad, m, _ = args
    for index in space.sample(rng, 3):
        lib = tvm.tirx.build(task.instantiate(index)[0].mod, task.target)
        data = rng.uniform(-1, 1, (N, CI, H, W)).astype("float32")
        kernel = rng.uniform(-1, 1, (CO, CI, 3, 3)).astype("float32")
        out = np.zeros(task.arg_specs[-1].shape, "float32")
        dev = [tvm.runtime.tensor(a, tvm.cpu()) for a in (data, wg.winograd_weight_transform_numpy(kernel, m), out)]
        lib["main"](*dev)
        want = conv2d_reference(data, kernel, (0,) * 7 + (1, pad))
        np.testing.assert_allclose(dev[-1].numpy(), want, rtol=1e-4, atol=1e-4, err_msg=f"config {index}")


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="tile size m must be one of"):
        wg.conv2d_winograd_compute(1, 8, 8, 8, 8, 1, 3)
    with pytest.raises(ValueError, match="does not fit the 2x2 input"):
        wg.conv2d_winograd_compute(1, 8, 2, 2, 8, 0, 2)
    with pytest.raises(ValueError, match="3, 3\\] kernel"):
        wg.winograd_weight_transform_numpy(np.zeros((4, 4, 5, 5), "float32"), 4)
    with pytest.raises(ValueError, match="winograd convolutions take NCHW"):
        am.load_builtin("resnet18", conv_layout="NCHW8c", winograd=True)


class _Net(nn.Module):
    """3x3 stride-1 convolutions on a 16x16 map (Winograd, one with a residual add), a strided one and one on
    the 8x8 map below the pixel threshold (both direct), pooling and a dense head."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(16, 32, 3, 1, 1)
        self.b = nn.Conv2d(32, 32, 3, 1, 1)
        self.bn = nn.BatchNorm2d(32)
        self.down = nn.Conv2d(32, 32, 3, 2, 1)
        self.small = nn.Conv2d(32, 32, 3, 1, 1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.a(x))
        x = torch.relu(self.bn(self.b(x)) + x)
        x = torch.relu(self.small(self.down(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def test_a_winograd_model_uses_the_template_and_matches_pytorch(tmp_path, tune_knob_tasks_briefly) -> None:
    assert winograd_tile(16 * 16) == 4 and winograd_tile(8 * 8) == 2 and winograd_tile(6 * 6) is None
    torch.manual_seed(0)
    net = _Net()
    net.bn.running_mean.uniform_(-0.5, 0.5)
    net.bn.running_var.uniform_(0.5, 2.0)
    model = am.from_torch(net.eval(), (torch.randn(1, 16, 16, 16),), name="winograd", winograd=True)
    tasks = am.extract_tasks(model)
    winograd = [t for t in tasks if t.kind == "conv2d_winograd.x86"]
    assert sorted(t.task.args[:7] for t in winograd) == [
        (1, 16, 16, 16, 32, 1, 4),
        (1, 32, 8, 8, 32, 1, 2),  # the 8x8 map takes the smaller tile
        (1, 32, 16, 16, 32, 1, 4),
    ]
    assert sum(t.kind == "conv2d_nchw.x86" for t in tasks) == 1  # the strided convolution
    assert all(1 in t.constant_args for t in winograd)  # the transformed kernel is a constant of the model
    # with templates off, TVM's rules make no design space of a Winograd function: its template keeps it, noted
    off = {t.func_name: t for t in am.extract_tasks(model, templates=False)}
    assert {off[t.func_name].kind for t in winograd} == {"conv2d_winograd.x86"}
    assert all("no design space" in off[t.func_name].note for t in winograd)
    assert all(off[t.func_name].kind == "trace" for t in tasks if t not in winograd)
    x = model.random_inputs(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # every task falls back: no records
        fallback = am.build(model, None)
    np.testing.assert_allclose(fallback.run(*x)[0], model.reference(*x)[0], rtol=1e-4, atol=1e-4)

    log = tmp_path / "winograd.jsonl"
    tune_knob_tasks_briefly(model, tasks, log)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pooling falls back
        tuned = am.build(model, log)
    assert all(tuned.applied[t.func_name] == "record" for t in winograd)
    np.testing.assert_allclose(tuned.run(*x)[0], model.reference(*x)[0], rtol=1e-4, atol=1e-4)


def test_the_tile_table_is_checked_and_a_pinned_table_keeps_small_maps_direct() -> None:
    assert winograd_tiles(True) == WINOGRAD_TILE_BY_MAP and winograd_tiles(False) is None
    assert winograd_tiles([[196, 4]]) == ((196, 4),)
    for bad in ([], [(49, 3)], [(49, 2), (196, 4)], [(0, 2)], [("x", 2)], [(49,)]):
        with pytest.raises(ValueError, match="winograd takes"):
            winograd_tiles(bad)
    torch.manual_seed(0)
    net = _Net().eval()
    model = am.from_torch(net, (torch.randn(1, 16, 16, 16),), name="winograd-pinned", winograd=((196, 4),))
    kinds = sorted(t.kind for t in am.extract_tasks(model) if t.kind.startswith("conv2d"))
    assert kinds == ["conv2d_nchw.x86"] * 2 + ["conv2d_winograd.x86"] * 2  # the 8x8 map stays direct here


def test_a_models_run_rebuilds_with_the_tiles_it_was_tuned_with(tmp_path) -> None:
    from benchmarks.models.run_ab import WINOGRAD_TILES_BEFORE, run_config, run_winograd

    def run(config: dict, tiles: list | None) -> dict:
        d = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        d.mkdir()
        (d / "records_resnet18_rfei-ae.jsonl").write_text("")
        meta = {"config": config} | ({"winograd_tiles": tiles} if tiles is not None else {})
        (d / "results.json").write_text(
            json.dumps({"meta": meta, "models": [{"model": "resnet18", "arms": [{"arm": "rfei-ae"}]}]})
        )
        return run_config(str(d))[3]

    assert run_winograd(run({"winograd": False}, None)) is False
    before = run_winograd(run({"winograd": True}, None))  # recorded before the table: 7x7 maps stayed direct
    assert before == WINOGRAD_TILES_BEFORE == ((196, 4),)
    now = run_winograd(run({"winograd": True}, [list(t) for t in WINOGRAD_TILE_BY_MAP]))
    assert now == WINOGRAD_TILE_BY_MAP and winograd_tiles(now) == now
