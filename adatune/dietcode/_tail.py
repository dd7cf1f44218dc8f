"""A bmm_nt kernel whose last columns run as a narrow tail instead of padding (x86, ``MicroKernel.tail``).

bmm_nt's columns are T, padded to a multiple of ``nr``. With a tail, the kernel's tile runs the ``T // nr * nr``
columns it covers and a one-vector tile runs the rest; the second GEMM costs too, so tail kernels and their twins
are different kernels of the space and each T votes. Blocks: ``C``, ``Bt`` (B's tail rows packed k-major), ``Ct``
(the tail GEMM; its padding rows read A's last row) and ``C_out``. (Guarding the last tile's vectors instead kept the
accumulators in memory.) Below one register tile (T < nr) TVM 0.27 cannot specialise the kernel (it folds the fused
parallel index's division to x // 0), so ``specialisable`` says so and that T stays an error with its reason.
"""

from __future__ import annotations

import tvm

from ..codegen import x86 as _x86
from ._space import MicroKernel
from ._workloads import DynamicWorkload

__all__ = ["finish_tail", "schedule_tail", "specialisable", "tail_error", "tail_func", "tail_rows"]


def tail_error(wl: DynamicWorkload, mk: MicroKernel) -> str:
    """Why ``mk`` cannot run its columns with a tail on ``wl`` ('' where it can)."""
    if not mk.tail:
        return ""
    if mk.device != "cpu" or wl.kind != "bmm_nt":
        return f"{mk} runs a column tail, which only x86 bmm_nt kernels do (T columns); {wl.name} is {wl.kind}"
    if mk.nr <= mk.tail or mk.nr % mk.tail:
        return f"{mk}'s register tile ({mk.nr} columns) must be several whole vectors of its {mk.tail}-lane tail"
    if mk.crop:
        return f"{mk} writes its own columns straight to the output: a tail kernel has no crop to place"
    return ""


def specialisable(mk: MicroKernel, t: int) -> bool:
    """Whether ``mk``'s kernel can be compiled with T bound to ``t`` (a tail kernel only from one register tile)."""
    return not mk.tail or t >= mk.nr


def tail_rows(mk: MicroKernel) -> int:
    """Rows of the tail's one-vector tile: as many accumulators as the kernel's own register tile holds."""
    return mk.mr * (mk.nr // mk.tail)


def tail_func(wl: DynamicWorkload, mk: MicroKernel) -> tvm.tirx.PrimFunc:
    """``wl`` (bmm_nt) as the kernel's columns plus a tail; args ``(A, B, C, T)`` as ``wl.prim_func``.

    Parsed from text: a decorated TVMScript function is re-read from its source file at every call, so editing the
    installed file while a tuning run imports it (its workers do) broke the run."""
    if why := tail_error(wl, mk):
        raise ValueError(why)
    batch, depth = wl.dims
    return tvm.script.from_source(
        _TEMPLATE.format(
            batch=batch, depth=depth, dt=wl.dtype, own=f"t // {mk.nr} * {mk.nr}", lanes=mk.tail, rows=tail_rows(mk)
        )
    )


#: ``own``: the kernel's own columns; ``tail``: the rest, padded to a vector; ``rows``: T padded to the tail's rows
_TEMPLATE = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(a_h: T.handle, b_h: T.handle, c_h: T.handle, t: T.int32):
    T.func_attr({{"tirx.noalias": True}})
    A = T.match_buffer(a_h, ({batch}, t, {depth}), "{dt}")
    B = T.match_buffer(b_h, ({batch}, t, {depth}), "{dt}")
    C_out = T.match_buffer(c_h, ({batch}, t, t), "{dt}")
    C = T.sblock_alloc_buffer(({batch}, t, {own}), "{dt}")
    Bm = T.sblock_alloc_buffer(({batch}, {own}, {depth}), "{dt}")
    Bt = T.sblock_alloc_buffer(({batch}, (t - {own} + {lanes} - 1) // {lanes} * {lanes}, {depth}), "{dt}")
    Ct = T.sblock_alloc_buffer(
        ({batch}, (t + {rows} - 1) // {rows} * {rows}, (t - {own} + {lanes} - 1) // {lanes} * {lanes}), "{dt}"
    )
    for n, j, k in T.grid({batch}, {own}, {depth}):
        with T.sblock("Bm"):
            vn, vj, vk = T.axis.remap("SSS", [n, j, k])
            Bm[vn, vj, vk] = B[vn, vj, vk]
    for n, i, j, k in T.grid({batch}, t, {own}, {depth}):
        with T.sblock("C"):
            vn, vi, vj, vk = T.axis.remap("SSSR", [n, i, j, k])
            with T.init():
                C[vn, vi, vj] = T.cast(0, "{dt}")
            C[vn, vi, vj] = C[vn, vi, vj] + A[vn, vi, vk] * Bm[vn, vj, vk]
    for n, j, k in T.grid({batch}, (t - {own} + {lanes} - 1) // {lanes} * {lanes}, {depth}):
        with T.sblock("Bt"):
            vn, vj, vk = T.axis.remap("SSS", [n, j, k])
            Bt[vn, vj, vk] = T.if_then_else({own} + vj < t, B[vn, T.min({own} + vj, t - 1), vk], T.cast(0, "{dt}"))
    for n, i, j, k in T.grid(
        {batch}, (t + {rows} - 1) // {rows} * {rows}, (t - {own} + {lanes} - 1) // {lanes} * {lanes}, {depth}
    ):
        with T.sblock("Ct"):
            vn, vi, vj, vk = T.axis.remap("SSSR", [n, i, j, k])
            with T.init():
                Ct[vn, vi, vj] = T.cast(0, "{dt}")
            Ct[vn, vi, vj] = Ct[vn, vi, vj] + A[vn, T.min(vi, t - 1), vk] * Bt[vn, vj, vk]
    for n, i in T.grid({batch}, t):
        with T.sblock("C_out"):
            vn, vi = T.axis.remap("SS", [n, i])
            T.reads(C[vn, vi, 0 : {own}], Ct[vn, vi, 0 : t - {own}])
            T.writes(C_out[vn, vi, 0:t])
            for j in range({own}):
                C_out[vn, vi, j] = C[vn, vi, j]
            for j in range(t - {own}):
                C_out[vn, vi, {own} + j] = Ct[vn, vi, j]
"""


def schedule_tail(sch: tvm.s_tir.Schedule, mk: MicroKernel) -> None:
    """Schedule the tail's blocks (``Bt``, ``Ct``, ``C_out``) of ``tail_func``; block ``C`` is the kernel's own
    (``_schedule_cpu``), and ``finish_tail`` inlines ``Bm`` after it."""
    lanes, rows_t = mk.tail, tail_rows(mk)
    bt = sch.get_sblock("Bt")  # at most nr - 1 rows of B: one thread, no parallel launch
    sch.transform_layout(bt, ("write", 0), lambda n, j, k: (n, j // lanes, k, j % lanes))
    ct = sch.get_sblock("Ct")
    n, i, j, k = sch.get_loops(ct)
    io, ii = sch.split(i, [None, rows_t])
    jv, jl = sch.split(j, [None, lanes])
    sch.reorder(n, io, jv, k, ii, jl)
    acc = sch.cache_write(ct, 0, _x86.ACCUMULATOR_SCOPE)
    # vector-major accumulators: laid out (row, column) the local buffer's extent along the columns stays
    # symbolic (min(tail width, lanes)) and LLVM kept every accumulator in memory
    sch.transform_layout(ct, ("write", 0), lambda n, i, j: (n, j // lanes, i, j % lanes))
    sch.reverse_compute_at(acc, jv)
    sch.parallel(n)
    sch.unroll(ii)
    sch.vectorize(jl)
    sch.vectorize(sch.get_loops(acc)[-1])
    sch.decompose_reduction(ct, k)
    out = sch.get_sblock("C_out")
    sch.parallel(sch.fuse(*sch.get_loops(out)[:2]))


def finish_tail(sch: tvm.s_tir.Schedule) -> None:
    """Read B's kernel columns straight from B (``Bm`` names them only so that the kernel's packed panels cover
    exactly its ``T // nr * nr`` rows of B, a multiple of ``nr``)."""
    sch.compute_inline(sch.get_sblock("Bm"))
