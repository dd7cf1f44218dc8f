"""Buffers of symbolic size on the stack when the symbol's upper bound is stated, and parallel bodies' buffers up to
``PARALLEL_STACK_BYTES`` (``adatune.codegen.stack_bounds``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tvm
from tvm import relax

import adatune.models as am
from adatune import target as _target
from adatune.codegen import vector_math
from adatune.codegen.stack_bounds import ATTR, PARALLEL_STACK_BYTES, upper_bounds, with_upper_bounds

POOL = "TVMBackendAllocWorkspace"  # what TVM calls for a buffer that is not on the stack


def _softmax(lanes: int = 16) -> tvm.tirx.PrimFunc:
    """A softmax over the last axis of a [3, T, T] input, as a dynamic model gets it: legalised, then scheduled
    row by row (each row's exponentials in a buffer of T elements inside the parallel loop)."""
    t = tvm.tirx.Var("T", "int64")
    x = relax.Var("x", relax.TensorType([3, t, t], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(relax.op.nn.softmax(x, -1)))
    mod = relax.transform.LegalizeOps()(bb.get())
    func = next(f for _, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc))
    return am.schedule_generic(func, lanes)[0]


def _build(func: tvm.tirx.PrimFunc, pipeline: str | None = None) -> Any:
    target = _target.host()
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    return tvm.tirx.build(mod, target, pipeline=pipeline or vector_math.tir_pipeline(target))


def _check(lib: Any, ts: tuple[int, ...]) -> None:
    for t in ts:
        x = np.random.default_rng(t).standard_normal((3, t, t)).astype(np.float32) * 8
        e = np.exp(x - x.max(-1, keepdims=True))
        out = tvm.runtime.tensor(np.zeros_like(x))
        lib["main"](tvm.runtime.tensor(x), out)
        np.testing.assert_allclose(out.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6, err_msg=f"T={t}")


def test_a_bounded_softmax_keeps_its_rows_on_the_stack_and_stays_right() -> None:
    """Unbounded, each row's exponentials come from TVM's workspace pool; with T <= 128 stated, the same schedule
    builds with no pool call and computes the same softmax at T from 1 to the bound."""
    func = _softmax()
    assert POOL in _build(func).inspect_source("ll")
    bounded = _build(with_upper_bounds(func, {"T": 128}))
    assert POOL not in bounded.inspect_source("ll")
    _check(bounded, (1, 5, 16, 17, 62, 100, 128))


@pytest.mark.parametrize("bound, pooled", [(255, False), (256, False), (8192, False), (8193, True)])
def test_only_a_buffer_the_bound_caps_under_the_parallel_stack_limit_moves(bound: int, pooled: bool) -> None:
    """The rows are buffers of a parallel loop's body: up to ``PARALLEL_STACK_BYTES`` (32 KiB, 8192 float32s) they
    move to the stack (from 1 KiB on, TVM's own limit, marked for it), a larger bound leaves them in the pool; all
    are right at T up to the bound."""
    assert PARALLEL_STACK_BYTES == 8192 * 4
    lib = _build(with_upper_bounds(_softmax(), {"T": bound}))
    assert (POOL in lib.inspect_source("ll")) == pooled
    _check(lib, (3, 200, 255))


def _scratch(size: int, parallel: bool) -> tvm.tirx.PrimFunc:
    """Each of 64 rows doubled through a scratch buffer of ``size`` float32s inside its loop's body."""
    loop = "T.parallel(64)" if parallel else "range(64)"
    return tvm.script.from_source(
        f"""
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(a: T.Buffer((64, {size}), "float32"), b: T.Buffer((64, {size}), "float32")):
    for i in {loop}:
        with T.sblock("row"):
            vi = T.axis.spatial(64, i)
            tmp = T.sblock_alloc_buffer(({size},), "float32")
            for j in range({size}):
                tmp[j] = a[vi, j] * T.float32(2)
            for j in range({size}):
                b[vi, j] = tmp[{size} - 1 - j]
"""
    )


@pytest.mark.parametrize(
    "size, parallel, pooled",
    [(1024, True, False), (8192, True, False), (8193, True, True), (1024, False, True), (255, True, False)],
)
def test_a_parallel_bodys_constant_buffer_goes_on_the_stack_up_to_the_limit(
    size: int, parallel: bool, pooled: bool
) -> None:
    """Without any bound stated: a constant buffer of 4-32 KiB inside a parallel loop is on the stack (no pool call
    per iteration), one over 32 KiB and one outside a parallel loop (allocated once per call) stay in the pool, one
    under 1 KiB is on the stack as TVM puts it; each computes the same rows."""
    lib = _build(_scratch(size, parallel))
    assert (POOL in lib.inspect_source("ll")) == pooled
    a = np.random.default_rng(size).standard_normal((64, size)).astype(np.float32)
    out = tvm.runtime.tensor(np.zeros_like(a))
    lib["main"](tvm.runtime.tensor(a), out)
    np.testing.assert_array_equal(out.numpy(), 2 * a[:, ::-1])


def test_the_cpu_pipeline_without_libmvec_bounds_too() -> None:
    """``vector_math=False`` builds (``CPU_PIPELINE``) run the same pass, so they differ only in the libm calls."""
    target = _target.host()
    pipeline = vector_math.tir_pipeline(target, libmvec=False)
    assert pipeline == vector_math.CPU_PIPELINE
    lib = _build(with_upper_bounds(_softmax(lanes=8), {"T": 64}), pipeline)
    assert POOL not in lib.inspect_source("ll") and "_ZGV" not in lib.inspect_source("ll")
    _check(lib, (2, 9, 64))


def test_a_bound_on_another_symbol_changes_nothing() -> None:
    func = _softmax()
    assert POOL in _build(with_upper_bounds(func, {"N": 8})).inspect_source("ll")


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "128"])
def test_bad_bounds_name_the_symbol(bad: Any) -> None:
    with pytest.raises(ValueError, match="'T'"):
        with_upper_bounds(_softmax(), {"T": bad})


def test_bounds_round_trip_on_the_function() -> None:
    func = _softmax()
    assert upper_bounds(func) == {}
    bounded = with_upper_bounds(func, {"T": 128, "B": 4})
    assert upper_bounds(bounded) == {"T": 128, "B": 4} and ATTR in bounded.attrs
