"""Dynamic-shape models: a PyTorch model with a symbolic sequence length, its GEMMs tuned once with DietCode,
compiled once into one Relax VM module that runs every length of the range (checked against PyTorch)."""

from __future__ import annotations

import dataclasses
import math
import os
import re
import warnings
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import tvm
from torch import nn
from tvm import relax

import adatune.models as am
from adatune import target as _target
from adatune.codegen import vector_math
from adatune.codegen.generic_schedule import vectorise_tails
from adatune.codegen.stack_bounds import upper_bounds
from adatune.dietcode import MicroKernel, MicroKernelSpace, ShapeDispatcher

T_RANGE = (1, 24)
CHECK_T = (1, 2, 7, 13, 16, 24)
# a small search per GEMM (what is tested is the built module, not the search): population 16, one generation
TUNE: dict[str, Any] = {
    "n_shapes": 2, "rounds": 1, "kernels_per_round": 1, "max_kernels": 1, "number": 1, "repeat": 1,
    "population": 16, "generations": 1,
}  # fmt: skip


class _Block(nn.Module):
    """A post-LN transformer block on [1, T, 32]: fused QKV, 2-head softmax attention, GELU FFN."""

    def __init__(self, hidden: int = 32, heads: int = 2):
        super().__init__()
        self.heads, self.d = heads, hidden // heads
        self.qkv, self.o = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, self.d).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.d), dim=-1)
        x = self.ln1(x + self.o((att @ v).transpose(1, 2).reshape(b, t, h)))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


class _MLP(nn.Module):
    """Two linear layers on [2, T, 32]: the GEMMs' rows are 2T."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(32, 64), nn.Linear(64, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _seeded(cls: type[nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return cls().eval()


def _dynamic(cls: type[nn.Module], shape: tuple[int, ...]) -> am.DynamicModel:
    model = am.from_torch(_seeded(cls), [torch.randn(*shape)], dynamic={"x": {1: T_RANGE}})
    assert isinstance(model, am.DynamicModel)
    return model


@pytest.fixture(scope="module")
def block() -> am.DynamicModel:
    return _dynamic(_Block, (1, 5, 32))


@pytest.fixture(scope="module")
def block_results(block: am.DynamicModel, dietcode_option: Any) -> dict:
    return am.tune_dynamic(block, measure_option=dietcode_option, **TUNE)


@pytest.fixture(scope="module")
def block_compiled(block: am.DynamicModel, block_results: dict) -> am.CompiledModel:
    return am.build_dynamic(block, block_results)


def _check(model: am.DynamicModel, compiled: am.CompiledModel, ts: tuple[int, ...] = CHECK_T) -> None:
    for t in ts:
        x = model.random_inputs(seed=t, t=t)
        got, want = compiled.run(*x)[0], model.reference(*x)[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"T={t}")


def test_import_keeps_the_sequence_length_symbolic(block: am.DynamicModel) -> None:
    assert list(block.symbols.values()) == [T_RANGE]
    assert block.axes == {("x", 1): next(iter(block.symbols))}
    assert block.inputs[0].shape == (1, T_RANGE[1], 32)
    assert block.input_shapes(7) == [(1, 7, 32)]
    wls = am.dynamic_workloads(block)
    assert {(w.kind, w.dims, w.t_range) for w in wls.values()} == {
        ("dense", (32, 96), T_RANGE),
        ("dense", (32, 32), T_RANGE),
        ("dense", (32, 128), T_RANGE),
        ("dense", (128, 32), T_RANGE),
        ("bmm_nt", (2, 16), T_RANGE),
        ("bmm_nn", (2, 16), T_RANGE),
    }


def test_transformer_block_matches_pytorch_at_every_length(
    block_compiled: am.CompiledModel, block: am.DynamicModel, block_results: dict
) -> None:
    _check(block, block_compiled)
    applied = block_compiled.applied
    for name in block_results:
        assert applied[f"{name}_mk0"] == "dietcode"
    assert any(v == "generic" for k, v in applied.items() if "layer_norm" in k)
    assert "unscheduled" not in applied.values(), applied


def test_generic_schedules_get_the_range_top_as_upper_bound(
    block_compiled: am.CompiledModel, block: am.DynamicModel
) -> None:
    """Every shape-generic PrimFunc of the built module states T's top, so its buffers sized by T go on the stack
    (``adatune.codegen.stack_bounds``; correctness at every T is the test above)."""
    top = {name: hi for name, (_, hi) in block.symbols.items()}
    generic = [name for name, how in block_compiled.applied.items() if how == "generic"]
    assert generic
    for gv, func in block_compiled.module.functions_items():
        if str(gv.name_hint) in generic:
            assert upper_bounds(func) == top, gv.name_hint


def test_fast_math_dynamic_block_matches_pytorch(block_results: dict) -> None:
    """``fast_math`` on a dynamic model: GELU's erf and softmax's exp become TVM's approximations (the dynamic
    BERT benchmark's GELU ran 6x faster with them) and the block still matches PyTorch at every length."""
    fast = am.from_torch(_seeded(_Block), [torch.randn(1, 5, 32)], dynamic={"x": {1: T_RANGE}}, fast_math=True)
    assert isinstance(fast, am.DynamicModel)
    assert set(am.dynamic_workloads(fast)) == set(block_results)  # the same GEMMs: the tuned kernels serve it
    compiled = am.build_dynamic(fast, block_results)
    names = " ".join(compiled.applied)
    assert "fast_erf" in names and "fast_softmax" in names, names
    _check(fast, compiled, (1, 7, 24))


def test_dispatch_among_several_micro_kernels_happens_inside_the_module(
    block: am.DynamicModel, block_results: dict
) -> None:
    """Three kernels per GEMM behind a hand-made tree (T <= 5, <= 13, the rest): every T is still exact."""
    space = MicroKernelSpace(_target.host())
    ts = list(range(T_RANGE[0], T_RANGE[1] + 1))
    multi = {}
    for name, res in block_results.items():
        panel = res.workload.b_panel
        pool = [k for k in space.kernels if not panel or panel % k.nr == 0 or k.nr % panel == 0]
        picks = {k.mt: k for k in pool}  # kernels of distinct row tiles: different padding per T
        kernels = list(picks.values())[:3]
        assert len(kernels) == 3
        votes = [kernels[0 if t <= 5 else 1 if t <= 13 else 2].key for t in ts]
        disp = ShapeDispatcher.fit(ts, votes, T_RANGE)
        by_key = {k.key: k for k in kernels}
        multi[name] = dataclasses.replace(res, kernels=[by_key[lb] for lb in disp.labels], dispatcher=disp)
    compiled = am.build_dynamic(block, multi)
    assert compiled.module is not None
    for name in multi:
        assert all(compiled.applied[f"{name}_mk{i}"] == "dietcode" for i in range(3))
        script = compiled.module[f"{name}_dispatch"].script()
        assert len(re.findall(r"if .*<=", script)) == 2  # the tree, as Relax branches (aligned versions aside)
    _check(block, compiled, tuple(ts))


def test_attention_kernels_run_their_aligned_versions_inside_the_module(
    block: am.DynamicModel, block_results: dict
) -> None:
    """A bmm kernel with an aligned version: the dispatch leaf branches on ``T % u`` between the two, and the
    block still matches PyTorch at multiples of ``u`` and between them."""
    lanes = _target.cpu_info(_target.host()).lanes("float32")
    keys = {"bmm_nt": f"cpu:8x{lanes}x4/4x{lanes}", "bmm_nn": f"cpu:8x{lanes}x4/4x{lanes}"}  # aligned to lanes, 4
    ts = list(range(T_RANGE[0], T_RANGE[1] + 1))
    forced = dict(block_results)
    for name, res in block_results.items():
        if res.workload.kind in keys:
            mk = MicroKernel.from_key(keys[res.workload.kind])
            forced[name] = dataclasses.replace(
                res, kernels=[mk], dispatcher=ShapeDispatcher.fit(ts, [mk.key] * len(ts), T_RANGE)
            )
    compiled = am.build_dynamic(block, forced)
    for name, res in forced.items():
        if res.workload.kind in keys:
            u = lanes if res.workload.kind == "bmm_nt" else 4
            assert compiled.applied[f"{name}_mk0_a{u}"] == "dietcode"
            assert f"{name}_mk0_a{u}" in compiled.module[f"{name}_dispatch"].script()
    _check(block, compiled, (3, 4, 7, 8, 16, 24))


def test_exported_module_reloads_and_runs_every_length(
    block_compiled: am.CompiledModel, block: am.DynamicModel, tmp_path: os.PathLike
) -> None:
    path = block_compiled.export_library(os.path.join(tmp_path, "block.so"))
    vm = relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())
    for t in (1, 13, 24):
        x = block.random_inputs(seed=t, t=t)
        out = vm["main"](tvm.runtime.tensor(x[0], tvm.cpu()))
        np.testing.assert_allclose(out[0].numpy(), block.reference(*x)[0], rtol=1e-4, atol=1e-4)


def test_mlp_with_batched_rows(dietcode_option: Any) -> None:
    """[2, T, 32] inputs: the dense GEMMs run 2T rows, so their workloads cover [2, 48]."""
    model = _dynamic(_MLP, (2, 1, 32))  # an example extent of 1 is re-tiled: torch would specialise it
    wls = am.dynamic_workloads(model)
    assert {(w.kind, w.dims, w.t_range) for w in wls.values()} == {
        ("dense", (32, 64), (2, 48)),
        ("dense", (64, 32), (2, 48)),
    }
    compiled = am.build_dynamic(model, am.tune_dynamic(model, measure_option=dietcode_option, **TUNE))
    _check(model, compiled, (1, 7, 13, 24))
    with warnings.catch_warnings(record=True) as caught:  # no results: the GEMMs fall back to generic TIR
        warnings.simplefilter("always")
        fallback = am.build_dynamic(model, {})
    assert any("no DietCode result" in str(w.message) for w in caught)
    _check(model, fallback, (1, 13))


def test_inputs_outside_the_range_are_rejected(block_compiled: am.CompiledModel, block: am.DynamicModel) -> None:
    with pytest.raises(ValueError, match="outside its range"):
        block_compiled.run(np.zeros((1, 25, 32), np.float32))
    with pytest.raises(ValueError, match="axis 2 fixed"):
        block_compiled.run(np.zeros((1, 4, 16), np.float32))


@pytest.mark.parametrize(
    "dynamic, message",
    [
        ({"y": {1: (1, 8)}}, "unknown input 'y'"),
        ({"x": {3: (1, 8)}}, "axis 3 of input 'x' is out of range"),
        ({"x": {-4: (1, 8)}}, "out of range"),
        ({"x": {1: (0, 8)}}, "1 <= lo < hi"),
        ({"x": {1: (8, 8)}}, "1 <= lo < hi"),
        ({"x": {1: (9, 8)}}, "1 <= lo < hi"),
        ({"x": {1: (1,)}}, "pair"),
        ({"x": {1: (1, 8.5)}}, "integer"),
        ({"x": {"1": (1, 8)}}, "integer"),
        ({"x": {}}, "axes"),
        ({}, "dynamic must map"),
    ],
)
def test_bad_dynamic_specs_raise_value_errors(dynamic: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        am.from_torch(_MLP(), [torch.randn(2, 4, 32)], dynamic=dynamic)


def _legalised(build: Any, shape: list[Any]) -> tvm.tirx.PrimFunc:
    """The PrimFunc LegalizeOps makes of ``build(x)`` on a float32 ``x`` of ``shape`` (symbolic axes allowed)."""
    x = relax.Var("x", relax.TensorType(shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(build(x)))
    mod = relax.transform.LegalizeOps()(bb.get())
    return next(f for _, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc))


def _loops_in_parallel_loop(func: tvm.tirx.PrimFunc) -> list[str]:
    """The headers of the loops nested in ``func``'s one parallel loop, read off its TVMScript by indentation."""
    lines = func.script().splitlines()
    (start,) = [i for i, line in enumerate(lines) if "T.parallel(" in line]
    depth = len(lines[start]) - len(lines[start].lstrip())
    inside = []
    for line in lines[start + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) <= depth:
            break
        if line.lstrip().startswith("for "):
            inside.append(line.strip())
    return inside


def _run(func: tvm.tirx.PrimFunc, *arrays: np.ndarray) -> np.ndarray:
    """Build ``func`` for this host and run it; its last argument is the output, shaped like the first input."""
    lib = tvm.tirx.build(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), _target.host())
    out = tvm.runtime.tensor(np.zeros_like(arrays[0]))
    lib["main"](*(tvm.runtime.tensor(a) for a in arrays), out)
    return out.numpy()


def test_generic_schedule_parallelises_and_vectorises_a_symbolic_layer_norm() -> None:
    t = tvm.tirx.Var("T", "int64")
    g, b = relax.const(np.ones(64, np.float32)), relax.const(np.zeros(64, np.float32))
    func = _legalised(lambda x: relax.op.nn.layer_norm(x, g, b, axes=[-1]), [t, 64])
    scheduled, changed = am.schedule_generic(func, lanes=16)
    text = scheduled.script()
    assert changed and text.count("T.parallel") == 1 and "T.vectorized" in text
    # the mean and variance over the 64 hidden units are accumulated as 16-lane vectors, then summed once
    assert "_rf" in text
    for n in (1, 5, 33):
        xs = np.random.default_rng(n).standard_normal((n, 64)).astype(np.float32)
        want = (xs - xs.mean(-1, keepdims=True)) / np.sqrt(xs.var(-1, keepdims=True) + 1e-5)
        ones, zeros = np.ones(64, np.float32), np.zeros(64, np.float32)
        np.testing.assert_allclose(_run(scheduled, xs, ones, zeros), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows", [8, 64])
def test_generic_schedule_keeps_a_constant_row_loop_parallel(rows: int) -> None:
    """A layer norm over a constant number of rows that the lanes divide (or exceed): the mean computed per row
    has no loop of its own, and vectorising its innermost loop would vectorise the parallel row loop (TVM then
    refuses to build it); the rows stay one parallel loop and the result is right."""
    g, b = relax.const(np.ones(64, np.float32)), relax.const(np.zeros(64, np.float32))
    func = _legalised(lambda x: relax.op.nn.layer_norm(x, g, b, axes=[-1]), [rows, 64])
    scheduled, changed = am.schedule_generic(func, lanes=16)
    text = scheduled.script()
    assert changed and text.count("T.parallel") == 1 and not re.search(r"for ax0 in T\.vectorized", text)
    xs = np.random.default_rng(rows).standard_normal((rows, 64)).astype(np.float32)
    want = (xs - xs.mean(-1, keepdims=True)) / np.sqrt(xs.var(-1, keepdims=True) + 1e-5)
    ones, zeros = np.ones(64, np.float32), np.zeros(64, np.float32)
    np.testing.assert_allclose(_run(scheduled, xs, ones, zeros), want, rtol=1e-4, atol=1e-4)


def test_generic_schedule_computes_a_symbolic_softmax_row_by_row() -> None:
    """A softmax over T (BERT's attention scores, [heads, T, T]): one parallel loop over the rows, each computing
    its max, exponentials and sum inside it; right at T that 16 lanes do not divide (its reductions over T
    must stay guarded)."""
    t = tvm.tirx.Var("T", "int64")
    scheduled, changed = am.schedule_generic(_legalised(lambda x: relax.op.nn.softmax(x, -1), [3, t, t]), lanes=16)
    assert changed and scheduled.script().count("T.parallel") == 1
    inside = _loops_in_parallel_loop(scheduled)
    assert len(inside) >= 4  # max, exponentials, sum and the normalised write, each over one row's T columns
    for n in (1, 5, 17, 62):
        xs = np.random.default_rng(n).standard_normal((3, n, n)).astype(np.float32)
        e = np.exp(xs - xs.max(-1, keepdims=True))
        np.testing.assert_allclose(_run(scheduled, xs), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def _build_for_host(func: tvm.tirx.PrimFunc) -> Any:
    """``func`` built for this host through adatune's TIR pipeline (libmvec's vector functions where it has them)."""
    target = _target.host()
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    return tvm.tirx.build(mod, target, pipeline=vector_math.tir_pipeline(target))


@pytest.mark.parametrize("lanes", [16, 4])
def test_generic_schedule_runs_a_symbolic_softmax_in_whole_vectors_and_a_scalar_tail(lanes: int) -> None:
    """Every loop of the softmax over T in whole ``lanes``-wide vectors (no guard, so TVM vectorises them and
    libmvec's vector exp serves them), then the T % lanes remainder in halving vectors and a scalar rest: the
    exponentials and the normalised write element-wise, the max and the sum as ``lanes`` partial results in a
    per-row buffer folded once, in halving vectors. Right at T below, at and around multiples of the lanes and at
    every remainder's bit pattern, with large inputs (the max decides overflow)."""
    t = tvm.tirx.Var("T", "int64")
    scheduled, changed = am.schedule_generic(_legalised(lambda x: relax.op.nn.softmax(x, -1), [3, t, t]), lanes=lanes)
    text = scheduled.script()
    n = rf"T\.int64\({lanes}\)"
    assert changed and text.count(f"T.vectorized(T.int64({lanes}))") == 6, text  # 2 element-wise, 2 x 2 reductions
    assert len(re.findall(rf"in range\((\w+) // {n}\)", text)) == 4  # the whole vectors' loops
    # the remainders: one vector per halving width down to 4 lanes, then at most 3 scalar iterations, in all four;
    # the two reductions' partials folded in the same halving widths
    for width in [w for w in (lanes // 2, lanes // 4) if w >= 4]:
        assert text.count(f"T.vectorized(T.int64({width}))") == 4 + 2
    assert len(re.findall(r"in range\(T\.int64\(4\)\):", text)) == 2  # the four partials left, into acc
    assert len(re.findall(rf"in range\(\((\w+) - \1 // {n} \* {n}\) % T\.int64\(4\)\)", text)) == 4
    assert text.count(f"T.sblock_alloc_buffer(({lanes},))") == 2  # the max's and sum's partials
    assert not re.search(r"for ax0 in range\(\w+\):", text)  # no serial loop over all of T is left
    lib = _build_for_host(scheduled)
    # the partials live on the stack of the thread running the row, not in TVM's workspace pool (a call per row)
    assert not re.search(r"_lanes = tail call ptr", lib.inspect_source("ll"))
    if lanes in vector_math.lane_variants(_target.host()):
        assert "_ZGV" in lib.inspect_source("ll")
    for n in sorted({1, 3, 4, 7, lanes - 1, lanes, lanes + 1, 2 * lanes + 3, 2 * lanes + 12, 62}):
        xs = np.random.default_rng(n).standard_normal((3, n, n)).astype(np.float32) * 30
        out = tvm.runtime.tensor(np.zeros_like(xs))
        lib["main"](tvm.runtime.tensor(xs), out)
        e = np.exp(xs - xs.max(-1, keepdims=True))
        np.testing.assert_allclose(out.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reducer", ["sum", "min"])
def test_vector_tail_accumulates_a_contiguous_reduction_over_t_in_partial_vectors(reducer: str) -> None:
    """``y[c] = reduce_t x[c, t]``, T innermost and contiguous: ``lanes`` partial results, then the remainder;
    right against numpy at T around the lanes (a sum's order changes: float tolerance)."""
    t = tvm.tirx.Var("T", "int64")
    x = tvm.te.placeholder((5, t), "float32", name="x")
    r = tvm.te.reduce_axis((0, t), name="r")
    op = tvm.te.sum if reducer == "sum" else tvm.te.min
    y = tvm.te.compute((5,), lambda c: op(x[c, r], axis=r), name="y")
    func, splits = vectorise_tails(tvm.te.create_prim_func([x, y]), 8)
    assert splits == 1 and "T.vectorized(T.int64(8))" in func.script() and "T.vectorized(T.int64(4))" in func.script()
    lib = _build_for_host(func)
    for n in (1, 3, 4, 7, 8, 9, 12, 13, 40, 123):
        xs = np.random.default_rng(n).standard_normal((5, n)).astype(np.float32)
        out = tvm.runtime.tensor(np.zeros(5, np.float32))
        lib["main"](tvm.runtime.tensor(xs), out)
        want = xs.sum(-1) if reducer == "sum" else xs.min(-1)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_vector_tail_leaves_short_constant_and_strided_loops_alone() -> None:
    """Only a serial loop over a symbolic extent (or a constant one above the lanes) whose block's accesses are
    contiguous in it is split: a transpose's loop (its read strided in the loop) and a reduction over T down a
    column are not (vectors there would be gathers), nor a constant extent of one vector at most, nor a block
    reading two buffers of one name."""
    t = tvm.tirx.Var("T", "int64")
    x = tvm.te.placeholder((t, 24), "float32", name="x")
    transposed = tvm.te.compute((24, t), lambda c, i: x[i, c] * 2.0, name="y")
    r = tvm.te.reduce_axis((0, t), name="r")
    total = tvm.te.compute((24,), lambda c: tvm.te.sum(x[r, c], axis=r), name="total")
    for outputs in ([transposed], [total]):
        func = tvm.te.create_prim_func([x, *outputs])
        sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
        block = sch.get_sblock(outputs[0].op.name)
        sch.reorder(*reversed(sch.get_loops(block)))  # T innermost
        _, splits = vectorise_tails(sch.mod["main"], 16)
        assert splits == 0
    _, splits = vectorise_tails(tvm.te.create_prim_func([x, tvm.te.compute((t, 24), lambda i, c: x[i, c] + 1.0)]), 24)
    assert splits == 0
    a, b = (tvm.te.placeholder((t,), "float32", name="same") for _ in range(2))
    same_name = tvm.te.create_prim_func([a, b, tvm.te.compute((t,), lambda i: a[i] - b[i], name="d")])
    assert vectorise_tails(same_name, 16)[1] == 0  # the copy maps buffers back by name: not split


@pytest.mark.parametrize("n", [62, 100, 17])
def test_generic_schedule_vectorises_a_constant_softmax_the_lanes_do_not_divide(n: int) -> None:
    """A softmax over a constant number of columns that 16 lanes do not divide (BERT's at 62 or 100 tokens,
    legalised with T known): its four loops per row run as whole vectors, halving vectors and a scalar rest,
    not as serial loops, and the result is right."""
    scheduled, changed = am.schedule_generic(_legalised(lambda x: relax.op.nn.softmax(x, -1), [3, n, n]), lanes=16)
    text = scheduled.script()
    assert changed and text.count("T.vectorized(T.int64(16))") == 6, text  # 2 element-wise, 2 x 2 reductions
    assert not re.search(rf"for ax0 in range\(T\.int64\({n}\)\):", text)  # no serial loop over a whole row
    xs = np.random.default_rng(n).standard_normal((3, n, n)).astype(np.float32) * 8
    e = np.exp(xs - xs.max(-1, keepdims=True))
    lib = _build_for_host(scheduled)
    out = tvm.runtime.tensor(np.zeros_like(xs))
    lib["main"](tvm.runtime.tensor(xs), out)
    np.testing.assert_allclose(out.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["max-pool", "depthwise"])
@pytest.mark.parametrize("hw", [21, 47])
def test_generic_schedule_runs_a_small_window_around_vectors_of_the_output_row(op: str, hw: int) -> None:
    """A 3x3 max pool (stride 2) and a 3x3 depthwise convolution, both padded: the planes (batch, channel) run in
    one parallel loop, each padding its own plane inside it (the update reads no guarded element); where a vector
    divides the output row (24 or 47 columns) the window's loops run inside the row's vector loop, so a vector of
    outputs accumulates the whole window, else (11 or 21) outside the whole row; right against numpy."""
    c = 6
    data = tvm.te.placeholder((1, c, hw, hw), name="data")
    pad_value = tvm.te.min_value("float32") if op == "max-pool" else tvm.tirx.const(0.0, "float32")
    padded = tvm.te.compute(
        (1, c, hw + 2, hw + 2),
        lambda b, ch, y, x: tvm.te.if_then_else(
            tvm.te.all(y >= 1, y <= hw, x >= 1, x <= hw), data[b, ch, y - 1, x - 1], pad_value
        ),
        name="pad",
    )
    ry, rx = tvm.te.reduce_axis((0, 3), "ry"), tvm.te.reduce_axis((0, 3), "rx")
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    padded_np = np.pad(xs, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf if op == "max-pool" else 0.0)
    windows = np.lib.stride_tricks.sliding_window_view(padded_np, (3, 3), axis=(2, 3))
    if op == "max-pool":
        out_hw = (hw - 1) // 2 + 1
        out = tvm.te.compute(
            (1, c, out_hw, out_hw),
            lambda b, ch, y, x: tvm.te.max(padded[b, ch, 2 * y + ry, 2 * x + rx], axis=[ry, rx]),
            name="out",
        )
        func, args, want = tvm.te.create_prim_func([data, out]), [xs], windows[:, :, ::2, ::2].max(axis=(-1, -2))
    else:
        out_hw = hw
        weight = tvm.te.placeholder((c, 3, 3), name="weight")
        out = tvm.te.compute(
            (1, c, hw, hw),
            lambda b, ch, y, x: tvm.te.sum(padded[b, ch, y + ry, x + rx] * weight[ch, ry, rx], axis=[ry, rx]),
            name="out",
        )
        ws = rng.standard_normal((c, 3, 3)).astype(np.float32)
        func, args = tvm.te.create_prim_func([data, weight, out]), [xs, ws]
        want = np.einsum("bcyxij,cij->bcyx", windows, ws)
    scheduled, changed = am.schedule_generic(func, lanes=16)
    text = scheduled.script()
    assert changed and text.count("T.parallel") == 1 and "T.vectorized" in text, text  # the init's vectors
    assert re.search(r"for b_ch_fused in T\.parallel\(6\):\n\s+for ax0, ax1 in T\.grid", text), text  # the plane's pad
    assert text.count("if_then_else") == 1, text  # in the pad only, not in the update
    if out_hw % 8:  # no vector divides the row: the window around the whole row
        assert re.search(rf"for ry, rx, x in T\.grid\(3, 3, {out_hw}\):", text), text
    else:  # the window's loops between the row's vectors and a vector's lanes
        assert re.search(rf"x_0 in (range\(|T\.grid\(\d+, ){out_hw // 8}\):", text), text
        assert "for ry, rx, x_1 in T.grid(3, 3, 8):" in text, text
    lib = _build_for_host(scheduled)
    got = tvm.runtime.tensor(np.zeros(want.shape, np.float32))
    lib["main"](*(tvm.runtime.tensor(a) for a in args), got)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_a_pad_its_window_does_not_take_is_inlined(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the window's schedule fails with its pad computed per plane, the pad is not left as a serial pass of
    its own at the root: it is inlined into the window, as before pads were staged, and the result stays right."""
    import adatune.codegen.generic_schedule._schedule as generic

    original = generic._window_outside

    def without_staging(sch: Any, name: str, lanes: int, staged: tuple = (), vectors: bool = True) -> Any:
        return original(sch, name, lanes, (), vectors)  # as if computing the pads per plane had failed

    monkeypatch.setattr(generic, "_window_outside", without_staging)
    data = tvm.te.placeholder((1, 4, 16, 16), name="data")
    padded = tvm.te.compute(
        (1, 4, 18, 18),
        lambda b, c, y, x: tvm.te.if_then_else(
            tvm.te.all(y >= 1, y <= 16, x >= 1, x <= 16), data[b, c, y - 1, x - 1], tvm.tirx.const(0.0, "float32")
        ),
        name="pad",
    )
    ry, rx = tvm.te.reduce_axis((0, 3), "ry"), tvm.te.reduce_axis((0, 3), "rx")
    out = tvm.te.compute((1, 4, 16, 16), lambda b, c, y, x: tvm.te.sum(padded[b, c, y + ry, x + rx], axis=[ry, rx]))
    scheduled, changed = am.schedule_generic(tvm.te.create_prim_func([data, out]), lanes=8)
    text = scheduled.script()
    assert changed and 'T.sblock("pad")' not in text and text.count("T.parallel") == 1, text
    xs = np.random.default_rng(5).standard_normal((1, 4, 16, 16)).astype(np.float32)
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(xs, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), (2, 3))
    got = tvm.runtime.tensor(np.zeros((1, 4, 16, 16), np.float32))
    _build_for_host(scheduled)["main"](tvm.runtime.tensor(xs), got)
    np.testing.assert_allclose(got.numpy(), windows.sum(axis=(-1, -2)), rtol=1e-5, atol=1e-5)


def test_generic_schedule_does_not_redo_a_reduction_over_the_rows_in_every_row() -> None:
    """``y[t, c] = x[t, c] - mean_t x[t, c]``: every row needs the whole mean; computed inside the row loop each row
    would redo it (T times the work), so the mean keeps a loop nest of its own and the rows one parallel loop."""
    t = tvm.tirx.Var("T", "int64")
    x = tvm.te.placeholder((t, 24), "float32", name="x")
    r = tvm.te.reduce_axis((0, t), name="r")
    total = tvm.te.compute((24,), lambda c: tvm.te.sum(x[r, c], axis=r), name="total")
    y = tvm.te.compute((t, 24), lambda i, c: x[i, c] - total[c] / tvm.tirx.Cast("float32", t), name="y")
    scheduled, changed = am.schedule_generic(tvm.te.create_prim_func([x, y]), lanes=16)
    text = scheduled.script()
    assert changed and text.count("T.parallel") == 2  # the mean's columns, then the rows: two loop nests
    for n in (1, 6, 33):
        xs = np.random.default_rng(n).standard_normal((n, 24)).astype(np.float32)
        np.testing.assert_allclose(_run(scheduled, xs), xs - xs.mean(0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hidden", [24, 40])
def test_generic_schedule_keeps_the_innermost_loop_out_of_the_parallel_fusion(hidden: int) -> None:
    """An element-wise op whose hidden size the 16 lanes do not divide: the rows run in parallel and each row's
    columns in loops of their own (so no element pays a division to find its row and column): whole vectors,
    then the remainder's 8-lane vector, no empty part left in."""
    t = tvm.tirx.Var("T", "int64")
    scheduled, changed = am.schedule_generic(_legalised(lambda x: relax.op.tanh(x), [t, hidden]), lanes=16)
    assert changed
    whole, vector, half = _loops_in_parallel_loop(scheduled)
    assert f"in range(T.int64({hidden // 16})):" in whole
    assert "T.vectorized(T.int64(16))" in vector and "T.vectorized(T.int64(8))" in half
    assert "T.bool(" not in scheduled.script()
    xs = np.random.default_rng(hidden).standard_normal((7, hidden)).astype(np.float32)
    np.testing.assert_allclose(_run(scheduled, xs), np.tanh(xs), rtol=1e-5, atol=1e-6)


def test_dynamic_workloads_needs_a_dynamic_model() -> None:
    with pytest.raises(TypeError, match="DynamicModel"):
        am.dynamic_workloads(object())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "module, name",
    [
        ("adatune.models", "dietcode_bert"),
        ("adatune.models", "bert_layer_weights"),
        ("adatune.dietcode", "BertEncoder"),
        ("adatune.dietcode", "BertEncoderLayer"),
        ("adatune.dietcode", "bert_layer_reference"),
        ("adatune.dietcode", "random_bert_weights"),
    ],
)
def test_the_hand_built_dynamic_bert_names_say_what_replaced_them(module: str, name: str) -> None:
    import importlib

    with pytest.raises(AttributeError, match=r"removed: .*from_torch\(module, inputs, dynamic=\.\.\.\)"):
        getattr(importlib.import_module(module), name)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        importlib.import_module(module).no_such_name  # noqa: B018
