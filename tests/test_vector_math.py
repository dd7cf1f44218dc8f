"""Vector math through libmvec: the pipeline calls glibc's vector functions at the widths the target's ISA
has, keeps them within a few ulp of the exact functions, cuts other widths into pieces, links the library into
exported modules, and leaves TVM's own lowering alone outside the pipeline."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tvm
from scipy.special import erf
from tvm import te

from adatune import target as _target
from adatune.codegen import vector_math

pytestmark = pytest.mark.skipif(not vector_math.available(), reason="no libmvec (x86-64 glibc) in this process")

HOST = _target.host()
SSE2 = {"kind": "llvm", "mtriple": "x86_64-linux-gnu"}  # no mcpu: generic x86-64, 4-lane SSE variants only
# measured on glibc 2.36 over 65,536 inputs each: erf 4.0 ulp (16 lanes; 1.3
# at 4 and 8), log 3.5, exp 2.6, tanh 1.3 (TVM's own scalar tanh: 205, near zero); libm's scalar calls 0.5-0.8
MAX_ULP = 5
# name -> (TE function, float64 reference, input range; log's drawn log-uniformly)
FUNCS: dict[str, tuple[Callable[[Any], Any], Callable[[np.ndarray], np.ndarray], tuple[float, float]]] = {
    "exp": (te.exp, np.exp, (-87.0, 88.0)),
    "erf": (te.erf, erf, (-6.0, 6.0)),
    "tanh": (te.tanh, np.tanh, (-12.0, 12.0)),
    "log": (te.log, np.log, (1e-30, 1e6)),
}


def _elementwise(op: str, n: int, lanes: int) -> tvm.IRModule:
    fn = FUNCS[op][0]
    a = te.placeholder((n,), name="A")
    out = te.compute((n,), lambda i: fn(a[i]), name="out")
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, out]))
    if lanes > 1:
        (i,) = sch.get_loops(sch.get_sblock("out"))
        _, inner = sch.split(i, [None, lanes])
        sch.vectorize(inner)
    return sch.mod


def _reference(op: str, x: np.ndarray) -> np.ndarray:
    return FUNCS[op][1](x.astype(np.float64))


def _inputs(op: str, n: int) -> np.ndarray:
    """Uniform over the function's range, log-uniform for log."""
    lo, hi = FUNCS[op][2]
    rng = np.random.default_rng(0)
    if op == "log":
        return np.exp(rng.uniform(np.log(lo), np.log(hi), n)).astype("float32")
    return rng.uniform(lo, hi, n).astype("float32")


def _run(lib: object, x: np.ndarray) -> np.ndarray:
    dev = tvm.cpu()
    out = tvm.runtime.tensor(np.zeros_like(x), dev)
    lib["main"](tvm.runtime.tensor(x, dev), out)  # type: ignore[index]
    return out.numpy()


def _ulp_error(got: np.ndarray, ref: np.ndarray) -> float:
    ref32 = ref.astype(np.float32)
    return float(np.max(np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref32)).astype(np.float64)))


def _asm(lib: object) -> str:
    return lib.mod.inspect_source("asm")  # type: ignore[attr-defined]


def test_variants_follow_the_targets_isa() -> None:
    isa = _target.cpu_info(HOST).isa
    expected = {"avx512": {16, 8, 4}, "avx2": {8, 4}, "avx": {8, 4}, "sse4": {4}, "sse2": {4}}[isa]
    assert set(vector_math.lane_variants(HOST)) == expected
    assert vector_math.lane_variants(SSE2) == {4: "b"}
    assert vector_math.lane_variants({"kind": "cuda", "arch": "sm_80"}) == {}
    assert vector_math.tir_pipeline(HOST) == vector_math.PIPELINE
    assert vector_math.tir_pipeline({"kind": "cuda", "arch": "sm_80"}) == "default"
    assert vector_math.export_options(HOST) == ["-lmvec"]


@pytest.mark.parametrize("op", sorted(FUNCS))
def test_vector_calls_stay_within_a_few_ulp(op: str) -> None:
    widest = max(vector_math.lane_variants(HOST))
    x = _inputs(op, 4096)
    lib = tvm.compile(_elementwise(op, x.size, widest), target=HOST, tir_pipeline=vector_math.PIPELINE)
    letter = vector_math.lane_variants(HOST)[widest]
    assert f"_ZGV{letter}N{widest}v_{vector_math.FUNCTIONS['tirx.' + op]}" in _asm(lib)
    assert _ulp_error(_run(lib, x), _reference(op, x)) <= MAX_ULP


@pytest.mark.parametrize("lanes", [32, 6, 3])
def test_other_widths_are_cut_into_variants_and_scalars(lanes: int) -> None:
    """32 lanes: the widest variant's calls; 6: one 4-lane call and two scalar ones; 3: scalars."""
    x = _inputs("erf", 96)
    for tgt in (HOST, SSE2):
        lib = tvm.compile(_elementwise("erf", x.size, lanes), target=tgt, tir_pipeline=vector_math.PIPELINE)
        assert _ulp_error(_run(lib, x), _reference("erf", x)) <= MAX_ULP
        asm = _asm(lib)
        assert ("_ZGVbN4v_erff" in asm) == (lanes == 6 or (lanes == 32 and tgt is SSE2))
        scalar_calls = re.search(r"call\w*\s+erff@", asm) is not None
        assert scalar_calls == (lanes in (3, 6))


def test_tvms_own_lowering_is_unchanged_outside_the_pipeline() -> None:
    """The default pipeline still calls scalar libm, and erf is vectorisable only while the pipeline runs."""
    x = _inputs("exp", 256)
    assert tvm.ir.Op.get("tirx.erf").get_attr("TVectorizable") is None
    for op in ("exp", "erf"):
        lib = tvm.compile(_elementwise(op, x.size, 16), target=HOST)
        assert "_ZGV" not in _asm(lib)
        assert np.allclose(_run(lib, x), _reference(op, x), rtol=1e-6, atol=1e-30)
    tvm.compile(_elementwise("erf", x.size, 16), target=HOST, tir_pipeline=vector_math.PIPELINE)
    assert tvm.ir.Op.get("tirx.erf").get_attr("TVectorizable") is None


def test_an_exported_library_loads_in_a_process_without_adatune(tmp_path: object) -> None:
    x = _inputs("tanh", 512)
    lib = tvm.compile(_elementwise("tanh", x.size, 8), target=HOST, tir_pipeline=vector_math.PIPELINE)
    path = os.path.join(str(tmp_path), "tanh.so")
    lib.export_library(path, options=vector_math.export_options(HOST))
    np.save(os.path.join(str(tmp_path), "x.npy"), x)
    code = (
        "import sys, numpy as np, tvm\n"
        f"d = {str(tmp_path)!r}\n"
        "lib = tvm.runtime.load_module(d + '/tanh.so')\n"
        "x = np.load(d + '/x.npy'); out = tvm.runtime.tensor(np.zeros_like(x))\n"
        "lib['main'](tvm.runtime.tensor(x), out); np.save(d + '/out.npy', out.numpy())\n"
        "assert 'adatune' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    got = np.load(os.path.join(str(tmp_path), "out.npy"))
    assert _ulp_error(got, np.tanh(x.astype(np.float64))) <= MAX_ULP


def test_a_float64_erf_vectorised_in_the_pipeline_runs_one_scalar_call_per_lane() -> None:
    """libmvec's float32 variants only: a float64 erf loop, vectorisable inside the pipeline, lowers to TVM's
    scalar calls lane by lane (never a float32 variant, never a vector passed to a scalar function)."""
    from scipy.special import erf

    a = te.placeholder((64,), "float64", name="A")
    out = te.compute((64,), lambda i: te.erf(a[i]), name="out")
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, out]))
    _, inner = sch.split(sch.get_loops(sch.get_sblock("out"))[0], [None, 8])
    sch.vectorize(inner)
    lib = tvm.compile(sch.mod, target=HOST, tir_pipeline=vector_math.PIPELINE)
    assert "_ZGV" not in _asm(lib) and re.search(r"call\w*\s+erf@", _asm(lib))
    x = np.linspace(-5, 5, 64)
    got = tvm.runtime.tensor(np.zeros(64))
    lib["main"](tvm.runtime.tensor(x), got)
    np.testing.assert_allclose(got.numpy(), erf(x), rtol=1e-15, atol=1e-15)
