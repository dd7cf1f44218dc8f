"""Small templates the conformance suites tune and measure: a knob matmul, an empty space and a faulty kernel.

The schedule functions are plain (undecorated) so a test suite may register them again under its own names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tvm
from tvm import te

from ..task import get_config, registered_templates, template

__all__ = ["MODES", "MATMUL", "EMPTY", "FAULTY", "matmul", "empty", "faulty", "matmul_reference", "faulty_reference"]

MATMUL = "adatune.testing/matmul"
EMPTY = "adatune.testing/empty"
FAULTY = "adatune.testing/faulty"

#: the faulty template's one knob: each value fails in a different, real way
MODES = ["ok", "build_fail", "crash", "hang", "wrong", "instantiate_fail", "slow_build"]


def matmul_reference(a: Any, b: Any) -> Any:
    return a @ b


def faulty_reference(a: Any) -> Any:
    return a * 2.0


def matmul(N: int, L: int, M: int, dtype: str):
    """A matmul with three splits and a vectorize knob (360 configs at 32x32x32)."""
    A = te.placeholder((N, L), dtype, name="A")
    B = te.placeholder((L, M), dtype, name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = tvm.s_tir.Schedule(te.create_prim_func([A, B, C]))
    cfg = get_config()
    i, j, kk = sch.get_loops(sch.get_sblock("C"))
    cfg.define_split("tile_i", N, num_outputs=2)
    cfg.define_split("tile_j", sch.get(j), num_outputs=2)
    cfg.define_split("tile_k", L, num_outputs=2, max_factor=16)
    cfg.define_knob("vec", [0, 1])
    io, ii = cfg["tile_i"].apply(sch, i)
    jo, ji = cfg["tile_j"].apply(sch, j)
    ko, ki = cfg["tile_k"].apply(sch, kk)
    sch.reorder(io, jo, ko, ki, ii, ji)
    if cfg["vec"].val:
        sch.vectorize(ji)
    return sch, [A, B, C]


def empty(n: int):
    """A template whose filter rejects every config (as dense.x86 does for some awkward shapes)."""
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    sch = tvm.s_tir.Schedule(te.create_prim_func([A, B]))
    cfg = get_config()
    cfg.define_split("tile", n, num_outputs=2)
    cfg.define_knob("unroll", [0, 1])
    cfg.multi_filter(lambda c: c["tile"].size[0] * c["unroll"].val > n)  # no split has an outer part > n
    return sch, [A, B]


def faulty(n: int):
    """One knob whose values each fail in a different, real way (see MODES)."""
    cfg = get_config()
    cfg.define_knob("mode", MODES)
    mode = cfg["mode"].val
    A = te.placeholder((n,), "float32", name="A")
    if mode == "crash":  # raise(SIGSEGV) inside the kernel kills the runner worker
        B = te.compute(
            (n,),
            lambda i: A[i] * 2.0 + tvm.tirx.Cast("float32", tvm.tirx.call_extern("int32", "raise", 11)),
            name="B",
        )
    elif mode == "hang":  # sleep(1000) inside the kernel: only the run timeout ends it
        B = te.compute(
            (n,),
            lambda i: A[i] * 2.0 + tvm.tirx.Cast("float32", tvm.tirx.call_extern("int32", "sleep", 1000)),
            name="B",
        )
    elif mode == "slow_build":  # TVM's simplifier never finishes on this 2^31-iteration modulo loop
        k = te.reduce_axis((0, (1 << 31) - 1), name="k")
        S = te.compute((n,), lambda i: te.sum(A[(i * 7 + k) % n], axis=k), name="S")
        B = te.compute((n,), lambda i: S[i] * 1e-30 + A[i] * 2.0, name="B")
    elif mode == "wrong":  # builds and runs, but off by one
        B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    else:
        B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    sch = tvm.s_tir.Schedule(te.create_prim_func([A, B]))
    if mode == "build_fail":  # LLVM rejects the imported IR text
        (i,) = sch.get_loops(sch.get_sblock("B"))
        sch.annotate(i, "pragma_import_llvm", "this is not LLVM IR")
    if mode == "instantiate_fail":
        sch.get_sblock("nonexistent")
    return sch, [A, B]


def register(names: dict[str, str] | None = None) -> dict[str, Callable[..., Any]]:
    """Register the three templates under ``names`` ({"matmul": ..., "empty": ..., "faulty": ...}; default the
    ``adatune.testing/`` ones). Returns the registered templates by role (called directly, each instantiates
    with the best record of the enclosing ``apply_history_best``); names already registered are skipped."""
    names = names or {"matmul": MATMUL, "empty": EMPTY, "faulty": FAULTY}
    funcs = {"matmul": (matmul, matmul_reference), "empty": (empty, None), "faulty": (faulty, faulty_reference)}
    known = registered_templates()
    return {
        role: template(name, reference=funcs[role][1])(funcs[role][0])
        for role, name in names.items()
        if name not in known
    }


register()
