"""Rule sets of rule-made trace spaces: TVM's own, ``vector`` (a register-blocked output tile of whole vectors) and
``packed`` (``vector`` plus the vectorised operand offered in panels)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import tvm
from tvm import te

import adatune
import adatune.trace
from adatune.target import vector_lanes
from adatune.trace import TraceTask
from adatune.trace._rules import VECTORS_PER_ROW


@adatune.trace.workload("test-rules-matmul", reference=lambda a, b: a @ b)
def matmul(n: int):
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


@adatune.trace.workload("test-rules-bmm-nt", reference=lambda a, b: np.einsum("zik,zjk->zij", a, b))
def bmm_nt(batch: int, n: int, k: int):
    a = te.placeholder((batch, n, k), name="A")
    b = te.placeholder((batch, n, k), name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((batch, n, n), lambda z, i, j: te.sum(a[z, i, r] * b[z, j, r], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def _conv_reference(data, weight):
    _, ci, hw, _ = data.shape
    k = weight.shape[-1]
    padded = np.pad(data, ((0, 0), (0, 0), (k // 2, k // 2), (k // 2, k // 2)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (k, k), axis=(2, 3))  # n, ci, y, x, ky, kx
    return np.einsum("ncyxab,fcab->nfyx", windows, weight)


@adatune.trace.workload("test-rules-conv", reference=_conv_reference)
def conv(ci: int, hw: int, co: int, k: int):
    data = te.placeholder((1, ci, hw, hw), name="data")
    weight = te.placeholder((co, ci, k, k), name="weight")
    p, size = k // 2, hw + 2 * (k // 2)
    padded = te.compute(
        (1, ci, size, size),
        lambda b, c, y, x: te.if_then_else(
            te.all(y >= p, y < hw + p, x >= p, x < hw + p), data[b, c, y - p, x - p], 0.0
        ),
        name="pad",
    )
    rc, ry, rx = te.reduce_axis((0, ci), "rc"), te.reduce_axis((0, k), "ry"), te.reduce_axis((0, k), "rx")
    out = te.compute(
        (1, co, hw, hw),
        lambda b, f, y, x: te.sum(padded[b, rc, y + ry, x + rx] * weight[f, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv",
    )
    return te.create_prim_func([data, weight, out])


def _spaces_with(task: TraceTask, instruction: str) -> list[int]:
    return [i for i, tr in enumerate(task.space.design_spaces) if any(s.kind.name == instruction for s in tr.insts)]


def _packing_spaces(task: TraceTask) -> list[int]:
    return _spaces_with(task, "TransformLayout")


def _check_against_reference(task: TraceTask, cand, seed: int = 1) -> str:
    """Build ``cand``, run it on random inputs, compare with the task's numpy reference; the module's script."""
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(tuple(int(d) for d in s.shape)).astype("float32") for s in task.arg_specs[:-1]]
    expected = task.reference_outputs(inputs)[0]
    mod = task.scheduled_module(cand)
    lib = tvm.tirx.build(mod, task.target)
    out = tvm.runtime.tensor(np.zeros(expected.shape, "float32"))
    lib["main"](*(tvm.runtime.tensor(x) for x in inputs), out)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-3)
    return mod.script()


def _vectorized_extents(mod: tvm.IRModule) -> list[int]:
    return [int(x) for x in re.findall(r"T\.vectorized\((\d+)\)", str(mod))]


def test_vector_rules_hold_the_output_tile_at_whole_vectors_and_compute_correctly():
    tgt = adatune.target.host()
    vector = adatune.task.create(adatune.trace.VECTOR_RULES_PREFIX + "test-rules-matmul", (64,), tgt)
    plain = adatune.task.create(adatune.trace.RULES_PREFIX + "test-rules-matmul", (64,), tgt)
    assert isinstance(vector, TraceTask) and vector is not plain
    assert vector.name == "trace/vector-rules/test-rules-matmul"
    assert vector.space.size < plain.space.size  # the innermost output tile is fixed, not sampled
    width = VECTORS_PER_ROW * vector_lanes(tgt)
    rng = np.random.default_rng(0)
    cands = vector.space.random_candidates(rng, 7)  # the first is the generic program, no rule's
    assert cands[0] is vector.space.generic and len(cands) == 7
    cands = cands[1:]
    x = rng.standard_normal((64, 64)).astype("float32")
    y = rng.standard_normal((64, 64)).astype("float32")
    for n, cand in enumerate(cands):
        mod = vector.scheduled_module(cand)
        extents = _vectorized_extents(mod)
        assert extents and all(e % width == 0 for e in extents), (width, extents)
        again = vector.candidate_from_json(json.loads(json.dumps(cand.to_json())))
        assert again.key == cand.key
        if n < 2:  # two of them built and run
            lib = tvm.tirx.build(mod, tgt)
            args = [tvm.runtime.tensor(x), tvm.runtime.tensor(y), tvm.runtime.tensor(np.zeros((64, 64), "float32"))]
            lib["main"](*args)
            np.testing.assert_allclose(args[-1].numpy(), x @ y, rtol=1e-4, atol=1e-4)


def test_a_module_in_the_vector_rule_set_is_named_for_it_and_restored_by_that_name():
    tgt = adatune.target.host()
    task = TraceTask.from_module(matmul(32), tgt, rules="vector")
    assert task.name.startswith("trace/vector-rules/ir-")
    assert adatune.task.create(task.name, (), tgt) is task
    plain = TraceTask.from_module(matmul(32), tgt)
    assert plain.name == "trace/rules/" + task.name.removeprefix("trace/vector-rules/")
    restored = adatune.task.restore(task.name, (), tgt, task.workload_json())
    assert restored.space.size == task.space.size


def test_unknown_rule_sets_and_targets_without_simd_are_refused():
    with pytest.raises(ValueError, match="unknown rule set 'blocked'.*tvm, vector"):
        TraceTask.from_module(matmul(32), adatune.target.host(), rules="blocked")
    cuda = tvm.target.Target("nvidia/nvidia-a100", host=adatune.target.host())
    with pytest.raises(ValueError, match="'vector' rule set tiles for CPU SIMD registers"):
        TraceTask.from_module(matmul(32), cuda, rules="vector")
    with pytest.raises(ValueError, match="'packed' rule set tiles for CPU SIMD registers"):
        TraceTask.from_module(matmul(32), cuda, rules="packed")
    with pytest.raises(ValueError, match="rule-made design spaces, not templates"):
        adatune.trace.probabilistic_template("trace/vector-rules/x")


@pytest.mark.parametrize(
    ("workload", "args", "panels"),
    [
        # NT: B[z, j, k] is read with a stride of K along the vectorised j; packed as [z, j // P, k, j % P]
        ("test-rules-bmm-nt", (2, 64, 24), lambda p: (2, 64 // p, 24, p)),
        # NN: B[k, j] is contiguous along j but a tile's columns lie a row apart; packed as [j // P, k, j % P]
        ("test-rules-matmul", (64,), lambda p: (64 // p, 64, p)),
    ],
)
def test_packed_rules_offer_the_vectorised_operand_in_panels_and_compute_correctly(workload, args, panels):
    tgt = adatune.target.host()
    width = VECTORS_PER_ROW * vector_lanes(tgt)
    vector = adatune.task.create(adatune.trace.VECTOR_RULES_PREFIX + workload, args, tgt)
    packed = adatune.task.create("trace/packed-rules/" + workload, args, tgt)
    assert isinstance(packed, TraceTask) and packed.name == "trace/packed-rules/" + workload
    n_vector = len(vector.space.design_spaces)
    # every design space of the vector rules, once as it was and once reading the panels
    assert len(packed.space.design_spaces) == 2 * n_vector
    assert _packing_spaces(vector) == [] and len(_packing_spaces(packed)) == n_vector
    shape = ", ".join(str(d) for d in panels(width))
    for space in _packing_spaces(packed)[:2]:
        script = _check_against_reference(packed, packed.space.sample(space, seed=3))
        assert f"alloc_buffer(({shape}))" in script, (shape, script)


def test_packed_rules_leave_an_operand_the_panels_do_not_divide_as_it_is():
    tgt = adatune.target.host()
    width = VECTORS_PER_ROW * vector_lanes(tgt)
    n = 5 * width // 2  # the panels would need a padded tail
    packed = adatune.task.create("trace/packed-rules/test-rules-matmul", (n,), tgt)
    vector = adatune.task.create(adatune.trace.VECTOR_RULES_PREFIX + "test-rules-matmul", (n,), tgt)
    assert _packing_spaces(packed) == [] and len(packed.space.design_spaces) == len(vector.space.design_spaces)


def test_packed_rules_offer_a_convolution_its_output_channels_as_the_vector_and_compute_correctly():
    tgt = adatune.target.host()
    width = VECTORS_PER_ROW * vector_lanes(tgt)
    args = (8, 6, 2 * width, 3)  # 6 output columns take no whole vector tile; the channels take two
    vector = adatune.task.create(adatune.trace.VECTOR_RULES_PREFIX + "test-rules-conv", args, tgt)
    packed = adatune.task.create("trace/packed-rules/test-rules-conv", args, tgt)
    relaid = _spaces_with(packed, "TransformBlockLayout")
    assert _spaces_with(vector, "TransformBlockLayout") == []
    assert len(relaid) == len(vector.space.design_spaces) == len(packed.space.design_spaces) // 2
    for space in relaid[:2]:
        script = _check_against_reference(packed, packed.space.sample(space, seed=2))
        assert f"alloc_buffer((1, 2, 6, 6, {width}))" in script  # the output accumulated in NCHW[P]c
        assert f"alloc_buffer((2, 8, 3, 3, {width}))" in script  # the weight in panels of output channels


def test_layout_rules_clone_as_tvm_schedule_rules():
    """TVM clones a space generator's rules (a tuning context per thread); a clone must be a working ScheduleRule."""
    from tvm.s_tir import meta_schedule as ms

    from adatune.trace._layout_rules import PackOperandPanels, VectorizeOutputChannels

    tgt = adatune.target.host()
    bits = VECTORS_PER_ROW * vector_lanes(tgt) * 32
    clones = [rule.clone() for rule in (VectorizeOutputChannels(bits), PackOperandPanels(bits))]
    assert all(isinstance(c, ms.ScheduleRule) for c in clones)
    generator = ms.space_generator.PostOrderApply(sch_rules=clones, postprocs=[], mutator_probs={})
    context = ms.TuneContext(mod=tvm.IRModule({"main": matmul(64)}), target=tgt, space_generator=generator)
    spaces = context.generate_design_space()
    assert len(spaces) == 2 and any(
        "TransformLayout" in str(s.trace) or "transform_layout" in str(s.trace) for s in spaces
    )
    with pytest.raises(ValueError, match="panel_bits must be positive"):
        PackOperandPanels(0)
