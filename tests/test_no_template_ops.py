"""The no-template operators benchmark compares like with like: each TE program, its numpy reference and the
PyTorch operator it is timed against compute the same thing (small shapes; nothing timed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import tvm

import adatune
from adatune.trace import RULES_PREFIX
from benchmarks._common import geomean_interval
from benchmarks.no_template_ops import _NAMES, OPS, SHAPES, layer_norm, max_pool

SMALL = {
    "layer-norm": (6, 40),
    "softmax": (6, 40),
    "softmax-fast-exp": (6, 40),
    "depthwise-conv": (4, 9),
    "max-pool": (3, 10),
}


@pytest.mark.parametrize("op", OPS)
def test_each_program_its_numpy_reference_and_pytorch_agree(op):
    tgt = adatune.target.host()
    task = adatune.task.create(RULES_PREFIX + _NAMES[op], SMALL[op], tgt)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(tuple(int(d) for d in s.shape)).astype("float32") for s in task.arg_specs[:-1]]
    expected = task.reference_outputs(inputs)[0]
    lib = tvm.tirx.build(task.unscheduled_module(), tgt)
    out = tvm.runtime.tensor(np.zeros(expected.shape, "float32"))
    lib["main"](*(tvm.runtime.tensor(x) for x in inputs), out)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        theirs = SHAPES[op][1](*(torch.from_numpy(x) for x in inputs)).numpy()
    np.testing.assert_allclose(theirs, expected, rtol=1e-4, atol=1e-4)


def test_the_shapes_are_the_models_and_the_pooling_halves_the_image():
    assert SHAPES["layer-norm"][0] == (128, 768) and SHAPES["softmax"][0] == (12 * 128, 128)
    assert [int(d) for d in max_pool(64, 112).params[-1].shape] == [1, 64, 56, 56]
    assert len(layer_norm(8, 16).params) == 4  # x, scale, shift, output


def test_geomean_interval_is_a_t_interval_on_the_logs():
    centre, low, high = geomean_interval([1.0, 1.0, 1.0])
    assert (centre, low, high) == (1.0, 1.0, 1.0)
    centre, low, high = geomean_interval([0.5, 2.0])
    assert centre == pytest.approx(1.0) and low < 0.5 and high > 2.0  # 2 seeds: t(1) = 12.7, wide
    centre, low, high = geomean_interval([1.2])
    assert centre == pytest.approx(1.2) and math.isnan(low) and math.isnan(high)
