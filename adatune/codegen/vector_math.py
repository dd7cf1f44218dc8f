"""exp, erf, tanh and log in vector registers on x86, through glibc's vector math library (libmvec). TVM lowers ``exp``,
``tanh`` and ``log`` to LLVM intrinsics and ``erf`` to a libm call, and LLVM on x86 has no vector version of either: a
vectorised softmax or GELU still makes one scalar call per element. Unlike ``fast_math``'s polynomials, libmvec keeps
glibc's accuracy.

``tir_pipeline(target)`` names TVM's TIR pipeline with two additions (pass it to ``tvm.compile(...,
tir_pipeline=...)``): ``erf`` counts as vectorisable, and a float32 call of 4, 8 or 16 lanes becomes libmvec's SSE, AVX2
or AVX-512 variant picked from the target's ISA (other lane counts are cut into those or scalar calls). A library built
this way needs libmvec at load time: ``export_options(target)`` links it, and importing this module loads it for
in-memory modules."""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Callable, Iterator
from typing import Any

import tvm

from .. import target as _target
from . import stack_bounds as _stack_bounds

__all__ = [
    "PIPELINE",
    "CPU_PIPELINE",
    "FUNCTIONS",
    "available",
    "lane_variants",
    "tir_pipeline",
    "export_options",
    "compile_module",
]

PIPELINE = "adatune-libmvec"
CPU_PIPELINE = "adatune"  # TVM's, with stack_bounds' pass: a CPU build without libmvec
# TIR op -> libmvec's float32 function name (the vector ABI mangles it as _ZGV<isa>N<lanes>v_<name>)
FUNCTIONS = {"tirx.exp": "expf", "tirx.erf": "erff", "tirx.tanh": "tanhf", "tirx.log": "logf"}
# adatune's ISA name -> lanes -> the vector ABI's ISA letter (b: SSE, c: AVX, d: AVX2, e: AVX-512)
_VARIANTS = {
    "avx512": {16: "e", 8: "d", 4: "b"},
    "avx2": {8: "d", 4: "b"},
    "avx": {8: "c", 4: "b"},
    "sse4": {4: "b"},
    "sse2": {4: "b"},
}


def _load_libmvec() -> bool:
    try:
        ctypes.CDLL("libmvec.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return False
    return True


_LIBMVEC = _load_libmvec()
_lowering = threading.local()  # the lanes -> ISA letter map of the target being lowered, inside the pipeline


def available() -> bool:
    """Whether this process has libmvec (x86-64 glibc) to call."""
    return _LIBMVEC


def lane_variants(target: _target.TargetLike) -> dict[int, str]:
    """Lanes -> vector ABI ISA letter of the libmvec variants ``target`` can run; empty when none."""
    tgt = _target.create(target)
    if not _LIBMVEC or tgt.kind.name != "llvm":
        return {}
    info = _target.cpu_info(tgt)
    if not info.triple.startswith("x86_64"):
        return {}
    return dict(_VARIANTS.get(info.isa, {}))


def tir_pipeline(target: _target.TargetLike, libmvec: bool = True) -> str:
    """``PIPELINE`` where libmvec serves ``target`` (and ``libmvec``), else ``CPU_PIPELINE`` on CPUs, else TVM's."""
    if libmvec and lane_variants(target):
        return PIPELINE
    return CPU_PIPELINE if str(_target.create(target).kind.name) == "llvm" else "default"


def export_options(target: _target.TargetLike) -> list[str]:
    """Linker options for ``export_library`` so the library finds libmvec wherever it is loaded."""
    return ["-lmvec"] if lane_variants(target) else []


def compile_module(mod: Any, target: _target.TargetLike, enabled: bool = True) -> tuple[Any, list[str]]:
    """``tvm.compile(mod, target)`` through this module's pipeline (``CPU_PIPELINE`` with ``enabled=False``), and the
    linker options its ``export_library`` needs: the one call every adatune build of a TIR or Relax module makes."""
    tgt = _target.create(target)
    if not enabled:
        return tvm.compile(mod, target=tgt, tir_pipeline=tir_pipeline(tgt, libmvec=False)), []
    return tvm.compile(mod, target=tgt, tir_pipeline=tir_pipeline(tgt)), export_options(tgt)


def _chunks(lanes: int, widths: list[int]) -> list[tuple[int, int]]:
    """(start, width) pieces covering ``lanes``: the widest variant that fits first, single lanes last."""
    pieces, start = [], 0
    while start < lanes:
        width = next((w for w in widths if w <= lanes - start), 1)
        pieces.append((start, width))
        start += width
    return pieces


def _rule(op_name: str, fallback: Callable[[Any], Any]) -> Callable[[Any], Any]:
    name = FUNCTIONS[op_name]

    def lower(call: Any) -> Any:
        dtype = tvm.DataType(str(call.ty.dtype))
        if dtype.lanes == 1:
            return fallback(call)
        variants: dict[int, str] = getattr(_lowering, "variants", {})
        if not (dtype.is_float and dtype.bits == 32):
            variants = {}
        if not variants and op_name != "tirx.erf":
            return fallback(call)  # TVM's vector intrinsic, as without this module
        # erf has no vector lowering in TVM (it is vectorised only inside the pipeline): one scalar call per lane
        (arg,) = call.args
        scalar = str(dtype.with_lanes(1))
        parts = []
        for start, width in _chunks(dtype.lanes, sorted(variants, reverse=True)):
            part = arg if width == dtype.lanes else tvm.tirx.Shuffle([arg], list(range(start, start + width)))
            if width in variants:
                symbol = f"_ZGV{variants[width]}N{width}v_{name}"
                parts.append(tvm.tirx.call_pure_extern(f"float32x{width}", symbol, part))
            else:
                parts.append(fallback(tvm.tirx.call_intrin(scalar, op_name, part)))
        return parts[0] if len(parts) == 1 else tvm.tirx.Shuffle(parts, list(range(dtype.lanes)))

    return lower


def _register_rules() -> None:
    for op_name in FUNCTIONS:
        op = tvm.ir.Op.get(op_name)
        fallback = op.get_attr("llvm.FLowerIntrinsic") or op.get_attr("default.FLowerIntrinsic")
        tvm.tirx.op.register_intrin_lowering(op_name, "llvm", f=_rule(op_name, fallback), level=99)


@contextlib.contextmanager
def _erf_vectorisable() -> Iterator[None]:
    """TVM leaves ``erf`` out of vectorisation (no vector libm call to lower it to); inside the pipeline there is."""
    op = tvm.ir.Op.get("tirx.erf")
    before = op.get_attr("TVectorizable")
    op.set_attr("TVectorizable", True, 99)
    try:
        yield
    finally:
        op.reset_attr("TVectorizable")
        if before is not None:
            op.set_attr("TVectorizable", before)


@contextlib.contextmanager
def _lowering_for(mod: Any) -> Iterator[None]:
    targets = [f.attrs["target"] for f in mod.functions.values() if f.attrs and "target" in f.attrs]
    _lowering.variants = lane_variants(targets[0]) if targets else {}
    try:
        yield
    finally:
        _lowering.variants = {}


def _pipeline(libmvec: bool) -> Callable[[], tuple[Any, Callable[[], Any], Callable[[], Any]]]:
    """TVM's default pipeline with ``stack_bounds``' pass before the host's builtins are lowered, and with
    ``libmvec`` this module's vectorisation and intrinsic lowering."""

    def pipeline() -> tuple[Any, Callable[[], Any], Callable[[], Any]]:
        main, finalize_host, finalize_device = tvm.tirx.get_tir_pipeline("default")

        @tvm.transform.module_pass(opt_level=0, name="adatune.VectorMathMain")
        def vectorised(mod: Any, _ctx: Any) -> Any:
            with _erf_vectorisable() if libmvec else contextlib.nullcontext():
                return main(mod)

        @tvm.transform.module_pass(opt_level=0, name="adatune.VectorMathLowerIntrin")
        def lowered(mod: Any, _ctx: Any) -> Any:
            mod = _stack_bounds.bound_allocations(mod)  # before LowerTVMBuiltin sends them to the workspace pool
            with _lowering_for(mod) if libmvec else contextlib.nullcontext():
                return finalize_host()(mod)

        return vectorised, lambda: lowered, finalize_device

    return pipeline


tvm.tirx.register_tir_pipeline(CPU_PIPELINE, _pipeline(libmvec=False))
if _LIBMVEC:
    _register_rules()
    tvm.tirx.register_tir_pipeline(PIPELINE, _pipeline(libmvec=True))
