"""The engine profile's bookkeeping: onnxruntime's profile read per inference (its first run left out), and both
engines' kernels put in the same operator classes; on a written profile and made-up names (nothing timed)."""

from __future__ import annotations

import json

import pytest

from benchmarks.models.engine_profile import by_class, ort_class, ort_nodes, tvm_class


def _node(name: str, op: str, ts: int, dur: int, inputs: list[list[int]], outputs: list[list[int]]) -> dict:
    return {
        "cat": "Node",
        "name": f"{name}_kernel_time",
        "ts": ts,
        "dur": dur,
        "args": {
            "op_name": op,
            "input_type_shape": [{"float": s} for s in inputs],
            "output_type_shape": [{"float": s} for s in outputs],
        },
    }


def test_profile_is_read_per_inference_without_the_first_run(tmp_path):
    events = []
    for run, start in enumerate((0, 1000, 2000)):
        events.append({"cat": "Session", "name": "model_run", "ts": start, "dur": 900})
        first = 10 if run == 0 else 1  # the first run pre-packs: 10x slower, and must not count
        events.append(_node("ffn1", "Gemm", start + 10, 100 * first, [[128, 768], [3072]], [[128, 3072]]))
        events.append(_node("qk", "MatMul", start + 300, 20, [[1, 12, 128, 64], [1, 12, 64, 128]], [[1, 12, 128, 128]]))
        events.append(_node("ln", "LayerNormalization", start + 400, 8, [[1, 128, 768], [768], [768]], [[1, 128, 768]]))
        events.append({"cat": "Node", "name": "ln_fence_before", "ts": start + 399, "dur": 0, "args": {}})
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(events))
    got = ort_nodes(str(path), skip=1)
    assert got == pytest.approx(
        {"GEMM|Gemm 768x3072": 100e-6, "attention GEMMs|MatMul": 20e-6, "layer norm|LayerNormalization": 8e-6}
    )
    with pytest.raises(ValueError, match="fewer than 4 runs"):
        ort_nodes(str(path), skip=3)


@pytest.mark.parametrize(
    ("symbol", "expected"),
    [
        ("fused_matmul3_add2_gelu", "GEMM + GELU"),
        ("fused_matmul4_add_add1", "GEMM"),
        ("fused_matmul_add", "GEMM"),
        ("fused_matmul1_divide", "attention GEMMs"),
        ("matmul2", "attention GEMMs"),
        ("fused_softmax_broadcast_to2", "softmax"),
        ("layer_norm", "layer norm"),
        ("fused_reshape1_transpose1_broadcast_to", "layout and copies"),
        ("vm.builtin.alloc_tensor", "other"),
    ],
)
def test_tuned_model_functions_fall_in_classes(symbol, expected):
    assert tvm_class(symbol) == expected


def test_onnxruntime_nodes_fall_in_the_same_classes():
    assert ort_class("MatMul", [[128, 768], [768, 768]]) == "GEMM"  # a weight is 2-d
    assert ort_class("MatMul", [[1, 12, 128, 64], [1, 12, 64, 128]]) == "attention GEMMs"
    assert ort_class("FusedMatMul", [[12, 128, 64], [12, 64, 128]]) == "attention GEMMs"
    assert ort_class("Gemm", [[128, 768], [768]]) == "GEMM"
    assert ort_class("SkipLayerNormalization", []) == "layer norm"
    assert ort_class("Attention", []) == "attention (fused)"
    assert ort_class("Where", []) == "other"


def test_classes_are_summed_per_round_then_the_median_taken():
    rounds = [
        {"GEMM|a": 1.0, "GEMM|b": 2.0, "softmax|s": 0.5},
        {"GEMM|a": 2.0, "GEMM|b": 2.0},
        {"GEMM|a": 1.5, "GEMM|b": 1.0},
    ]
    got = by_class(rounds)
    assert got["GEMM"] == pytest.approx(3.0)  # rounds sum to 3.0, 4.0, 2.5
    assert got["softmax"] == pytest.approx(0.0)  # absent from two rounds of three: 0 there


def test_convolutions_are_classed_by_layer_shape_alike_on_both_engines():
    """A convolution's class is its layer shape, read from onnxruntime's node shapes and from the tuned model's
    task arguments (direct, blocked-layout and Winograd tasks alike), so ResNet's layers compare one by one."""
    from benchmarks.models.engine_profile import task_conv_class

    stem = ort_class("FusedConv", [[1, 3, 224, 224], [64, 3, 7, 7], [64]], [[1, 64, 112, 112]])
    assert stem == "convolution 7x7/2 3->64 @112x112"
    assert task_conv_class("conv2d_nchw.x86", (1, 3, 224, 224, 64, 7, 7, 2, 3, "float32")) == stem
    late = ort_class("Conv", [[1, 512, 7, 7], [512, 512, 3, 3]], [[1, 512, 7, 7]])
    assert task_conv_class("conv2d_NCHWc.x86", (1, 512, 7, 7, 512, 3, 3, 1, 1, 8, 8, "float32")) == late
    wino = ort_class("Conv", [[1, 64, 56, 56], [64, 64, 3, 3]], [[1, 64, 56, 56]])
    assert task_conv_class("conv2d_winograd.x86", (1, 64, 56, 56, 64, 1, 4, "float32")) == wino
    assert wino == "convolution 3x3/1 64->64 @56x56"
    assert task_conv_class("dense.x86", (128, 768, 768, "float32")) is None
    assert ort_class("Conv", [[1, 64, 56, 56]], []) == "convolution"  # shapes not recorded: the plain class
