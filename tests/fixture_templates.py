"""Templates used by the tests: a small tunable matmul and a deliberately faulty kernel."""

from __future__ import annotations

import tvm
from tvm import te

import adatune

MODES = ["ok", "build_fail", "crash", "hang", "wrong", "instantiate_fail", "slow_build"]

if "test/matmul" not in adatune.task.registered_templates():

    @adatune.template("test/matmul", reference=lambda a, b: a @ b)
    def matmul(N: int, L: int, M: int, dtype: str):
        A = te.placeholder((N, L), dtype, name="A")
        B = te.placeholder((L, M), dtype, name="B")
        k = te.reduce_axis((0, L), name="k")
        C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
        sch = tvm.s_tir.Schedule(te.create_prim_func([A, B, C]))
        cfg = adatune.get_config()
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

    @adatune.template("test/empty")
    def empty(n: int):
        """A template whose filter rejects every config (as dense.x86 does for some awkward shapes)."""
        A = te.placeholder((n,), "float32", name="A")
        B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
        sch = tvm.s_tir.Schedule(te.create_prim_func([A, B]))
        cfg = adatune.get_config()
        cfg.define_split("tile", n, num_outputs=2)
        cfg.define_knob("unroll", [0, 1])
        cfg.multi_filter(lambda c: c["tile"].size[0] * c["unroll"].val > n)  # no split has an outer part > n
        return sch, [A, B]

    @adatune.template("test/faulty", reference=lambda a: a * 2.0)
    def faulty(n: int):
        """One knob whose values each fail in a different, real way (see MODES)."""
        cfg = adatune.get_config()
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

    @adatune.template("test/gpu_copy")
    def gpu_copy(n: int):
        """A CUDA copy kernel with a block-size knob (compiles with nvcc; runs only on a GPU)."""
        cfg = adatune.get_config()
        A = te.placeholder((n,), "float32", name="A")
        B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
        sch = tvm.s_tir.Schedule(te.create_prim_func([A, B]))
        (i,) = sch.get_loops(sch.get_sblock("B"))
        cfg.define_split("tile", n, num_outputs=2, max_factor=256)
        bx, tx = cfg["tile"].apply(sch, i)
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        return sch, [A, B]
