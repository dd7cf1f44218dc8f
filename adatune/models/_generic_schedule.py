"""A shape-generic CPU schedule for the operators a dynamic model leaves outside its GEMMs.

TVM's legalised TIR is correct for every extent but runs as one serial loop nest per block (no default CPU
schedules, see the project's TVM notes). Nothing here depends on the symbolic extent, so one schedule serves
every T: per function, element-wise intermediates with a single consumer are inlined into it (one pass over
memory instead of two); then per remaining block, its leading data-parallel loops are fused and run in parallel
and, when every loop is data-parallel and the innermost has a constant extent (a hidden size), that loop is
vectorised (split by the SIMD width when it divides it). A step TIR rejects (a reduction loop, an output
block) is skipped, so the worst case is the unscheduled function, which is still correct.
"""

from __future__ import annotations

from collections.abc import Callable

import tvm
from tvm import tirx

__all__ = ["schedule_generic"]


def _try(sch: tvm.s_tir.Schedule, step: Callable[[tvm.s_tir.Schedule], object]) -> tvm.s_tir.Schedule | None:
    """``step(copy)`` on a copy of the schedule; the copy if TIR accepted it, else None."""
    trial = sch.copy()
    try:
        step(trial)
    except Exception:  # noqa: BLE001 - TIR's schedule errors: the step does not apply to this block
        return None
    return trial


def _data_parallel_prefix(sch: tvm.s_tir.Schedule, loops: list) -> int:
    """How many outer loops bind data-parallel block iterators only (what ``parallel`` accepts)."""
    n = 0
    for loop in loops:

        def parallel(s: tvm.s_tir.Schedule, lp: object = loop) -> None:
            s.parallel(lp)

        if _try(sch, parallel) is None:
            break
        n += 1
    return n


def _schedule_block(sch: tvm.s_tir.Schedule, name: str, lanes: int) -> tuple[tvm.s_tir.Schedule, int]:
    """The block's loops parallelised and vectorised where TIR allows; also how many steps applied."""
    loops = sch.get_loops(sch.get_sblock(name))
    if not loops:
        return sch, 0
    spatial = _data_parallel_prefix(sch, loops)
    if spatial == 0:
        return sch, 0
    steps = 0
    outer = list(loops[:spatial])
    extent = sch.get(loops[-1]).extent
    if spatial == len(loops) and isinstance(extent, tirx.IntImm) and int(extent) > 1:
        ext = int(extent)

        def vectorise(s: tvm.s_tir.Schedule) -> None:
            inner = loops[-1]
            if ext > lanes and ext % lanes == 0:
                _, inner = s.split(inner, [None, lanes])
            s.vectorize(inner)

        if ext <= lanes or ext % lanes == 0:
            vectorised = _try(sch, vectorise)
            if vectorised is not None:
                sch, steps = vectorised, 1
                outer = outer[:-1]
    if outer:

        def parallel(s: tvm.s_tir.Schedule) -> None:
            s.parallel(s.fuse(*outer) if len(outer) > 1 else outer[0])

        parallelised = _try(sch, parallel)
        if parallelised is not None:
            sch, steps = parallelised, steps + 1
    return sch, steps


def schedule_generic(func: tirx.PrimFunc, lanes: int = 8) -> tuple[tirx.PrimFunc, bool]:
    """``func`` with the schedule of the module docstring (``lanes``: float32 SIMD width) and whether any step
    applied."""
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
    try:
        root = sch.get_sblock("root")
    except Exception:  # noqa: BLE001 - no root block: not a legalised function, leave it alone
        return func, False
    names = [str(sch.get(b).name_hint) for b in sch.get_child_blocks(root)]
    kept, steps = [], 0
    for name in names[:-1]:
        blk = sch.get_sblock(name)
        if len(sch.get_consumers(blk)) == 1:

            def inline(s: tvm.s_tir.Schedule, n: str = name) -> None:
                s.compute_inline(s.get_sblock(n))

            inlined = _try(sch, inline)
            if inlined is not None:
                sch, steps = inlined, steps + 1
                continue
        kept.append(name)
    for name in [*kept, *names[-1:]]:
        sch, n = _schedule_block(sch, name, lanes)
        steps += n
    return sch.mod["main"], steps > 0
