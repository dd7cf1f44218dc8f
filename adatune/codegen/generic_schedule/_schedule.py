"""The shape-generic CPU schedule (see the package docstring): nothing depends on the symbolic extent, so one schedule
serves every T. Per function:

1. single-consumer element-wise intermediates are inlined (but a window's pad, step 5);
2. row fusion: the output block's loops but the innermost become one parallel loop over rows, and every other block
   (a softmax's max and sum, a layer norm's moments) is computed inside it for that row only, so a row is read from
   cache (not where a row would need a block whole, as a mean over the rows);
3. a block that cannot move there gets its own parallel loop over its leading data-parallel loops;
4. a reduction over a constant extent the SIMD width divides is ``rfactor``-ed into a vector of partials (a serial
   sum waits on each add's latency); over T or another constant, ``_vector_tail`` does the same (TVM 0.27's rfactor
   drops the guard of a split over a symbolic extent);
5. a small constant-window reduction (pooling, depthwise) runs the window inside the row's loop over vectors
   (``_window_outside``) so a vector of outputs accumulates in a register; its pad is computed per plane.

The innermost loop is never fused into the parallel one (a fused index costs a 64-bit division per element); it is
vectorised when the width divides it, else by ``_vector_tail``. A step TIR rejects is skipped, so the worst case is
the unscheduled function, which is still correct.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import tvm
from tvm import tirx

from ._vector_tail import _halvings, vectorise_tails

__all__ = ["schedule_generic"]

#: the most iterations a reduction innermost in a block may have to be run as a window around its output row
#: (``_window_outside``): a 3x3 or 7x7 kernel, not a sum over a hidden size
WINDOW_MAX = 64
_IF_THEN_ELSE = "prim.if_then_else"


def _try(sch: tvm.s_tir.Schedule, step: Callable[[tvm.s_tir.Schedule], object]) -> tvm.s_tir.Schedule | None:
    """``step(copy)`` on a copy of the schedule; the copy if TIR accepted it, else None."""
    trial = sch.copy()
    try:
        step(trial)
    except Exception:  # noqa: BLE001 - TIR's schedule errors: the step does not apply to this block
        return None
    return trial


def _inlining(name: str) -> Callable[[tvm.s_tir.Schedule], None]:
    """The step that inlines block ``name`` into its consumers (for ``_try``)."""
    return lambda s: s.compute_inline(s.get_sblock(name))


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


def _vector_width(extent: object, lanes: int) -> int | None:
    """The widest vector, ``lanes`` or one of its halvings (``_vector_tail``'s widths), that divides a constant
    ``extent`` above it; None where none does (or the extent is symbolic)."""
    if not isinstance(extent, tirx.IntImm):
        return None
    return next((w for w in (lanes, *_halvings(lanes)) if int(extent) > w and int(extent) % w == 0), None)


def _vectorise_innermost(
    sch: tvm.s_tir.Schedule, name: str, lanes: int, narrower: bool = False
) -> tvm.s_tir.Schedule | None:
    """The block's innermost loop vectorised if it is data-parallel with a constant extent (split by ``lanes`` where
    they divide it; with ``narrower``, else by the widest power of two from 4 up that does); None where not."""
    loops = sch.get_loops(sch.get_sblock(name))
    if not loops or sch.get(loops[-1]).kind == tirx.ForKind.PARALLEL:
        return None  # a block computed per row with no loop of its own (a mean): its innermost loop is the rows'
    extent = sch.get(loops[-1]).extent
    if not isinstance(extent, tirx.IntImm) or int(extent) <= 1:
        return None
    ext = int(extent)
    width = lanes if ext <= lanes or ext % lanes == 0 else _vector_width(extent, lanes) if narrower else None
    if width is None:
        return None

    def vectorise(s: tvm.s_tir.Schedule) -> None:
        inner = s.get_loops(s.get_sblock(name))[-1]
        if ext > width:
            _, inner = s.split(inner, [None, width])
        s.vectorize(inner)

    return _try(sch, vectorise)


def _window(sch: tvm.s_tir.Schedule, name: str) -> int | None:
    """How many data-parallel loops the block has above its innermost loops if those are a small constant reduction
    (a pooling window, a depthwise kernel: at most ``WINDOW_MAX`` iterations) under at least two of them, else None."""
    loops = sch.get_loops(sch.get_sblock(name))
    spatial = _data_parallel_prefix(sch, loops)
    window = [sch.get(lp).extent for lp in loops[spatial:]]
    if spatial < 2 or not window or not all(isinstance(e, tirx.IntImm) for e in window):
        return None
    return spatial if math.prod(int(e) for e in window) <= WINDOW_MAX else None


def _is_padding(sch: tvm.s_tir.Schedule, name: str) -> bool:
    """Whether the block stores a guarded read (``if_then_else``, as a pad does): inlined into a window's
    update, its guard sits on every element of the update's row and keeps LLVM from vectorising it."""
    body = sch.get(sch.get_sblock(name)).body
    value = getattr(body, "value", None)
    return isinstance(body, tirx.BufferStore) and isinstance(value, tvm.ir.Call) and value.op.name == _IF_THEN_ELSE


def _window_outside(
    sch: tvm.s_tir.Schedule, name: str, lanes: int, staged: tuple[str, ...] = (), vectors: bool = True
) -> tvm.s_tir.Schedule | None:
    """A block of ``_window``: the row's column loop split into vectors with the window's loops between, so a vector of
    outputs accumulates in a register; the init split off and vectorised, rows in parallel (where no vector divides the
    row, the window goes outside the whole column loop). None for other blocks. The ``staged`` pads are computed per
    plane in the parallel loop, so the update reads unguarded. ``vectors=False``: the window around the whole row."""
    spatial = _window(sch, name)
    if spatial is None:
        return None
    blocks: list[str] = []  # the init's and the update's names (decompose_reduction renames the block)

    def move(s: tvm.s_tir.Schedule) -> None:
        block = s.get_sblock(name)
        ls = s.get_loops(block)
        rows, column, window = ls[: spatial - 1], ls[spatial - 1], ls[spatial:]
        width = _vector_width(s.get(column).extent, lanes) if vectors else None
        if width is None:
            s.reorder(*window, column)
        else:
            row_vectors, lane = s.split(column, [None, width])
            s.reorder(row_vectors, *window, lane)
        planes = rows[:-1] if staged and len(rows) > 1 else rows
        outer = s.fuse(*planes) if len(planes) > 1 else planes[0]
        s.parallel(outer)
        for producer in staged:
            s.compute_at(s.get_sblock(producer), outer, preserve_unit_loops=False)
        first_window = 1 + len(rows) - len(planes) + (width is not None)
        init = s.decompose_reduction(block, s.get_loops(block)[first_window])
        blocks[:] = [str(s.get(init).name_hint), str(s.get(block).name_hint)]

    moved = _try(sch, move)
    if moved is None:  # without its pads (``schedule_generic`` inlines a pad left at the root)
        return None if not staged else _window_outside(sch, name, lanes, vectors=vectors)
    # TIR's vectorize refuses the update's lane loop (inside the window's loops it is no "local reduction"), so
    # LLVM vectorises that loop; the init's is vectorised here
    vectorised = _vectorise_innermost(moved, blocks[0], lanes, narrower=True)
    return vectorised if vectorised is not None else moved


def _row_loops(sch: tvm.s_tir.Schedule, name: str) -> list:
    """The block's leading data-parallel loops, less the innermost loop (kept out of any fusion)."""
    loops = sch.get_loops(sch.get_sblock(name))
    spatial = _data_parallel_prefix(sch, loops)
    return list(loops[: min(spatial, len(loops) - 1)])


def _schedule_block(
    sch: tvm.s_tir.Schedule, name: str, lanes: int, staged: tuple[str, ...] = (), window_vectors: bool = True
) -> tuple[tvm.s_tir.Schedule, int]:
    """The block on its own: rows in parallel, the innermost loop vectorised where it can be (a small window's
    loops moved outside it first, with its ``staged`` pads)."""
    windowed = _window_outside(sch, name, lanes, staged, window_vectors)
    if windowed is not None:
        return windowed, 1
    steps = 0
    rows = _row_loops(sch, name)  # before the split: a vector's loop of whole vectors stays serial within a row
    vectorised = _vectorise_innermost(sch, name, lanes)
    if vectorised is not None:
        sch, steps = vectorised, 1
    if rows:

        def parallel(s: tvm.s_tir.Schedule) -> None:
            s.parallel(s.fuse(*rows) if len(rows) > 1 else rows[0])

        parallelised = _try(sch, parallel)
        if parallelised is not None:
            sch, steps = parallelised, steps + 1
    return sch, steps


def _rfactor(sch: tvm.s_tir.Schedule, name: str, lanes: int) -> tuple[tvm.s_tir.Schedule, str] | None:
    """The block's innermost reduction loop split by ``lanes`` and factored (``rfactor``) into a ``lanes``-wide partial
    so it runs as vector operations: (schedule, the partial block's name), or None where TIR cannot factor it."""
    loops = sch.get_loops(sch.get_sblock(name))
    if not loops or _data_parallel_prefix(sch, loops) == len(loops):
        return None
    extent = sch.get(loops[-1]).extent
    # a constant multiple of the lanes only: over a symbolic extent TVM 0.27's rfactor drops the split's guard and
    # reads past the row
    if not isinstance(extent, tirx.IntImm) or int(extent) <= lanes or int(extent) % lanes:
        return None
    found: list[str] = []

    def factor(s: tvm.s_tir.Schedule) -> None:
        blk = s.get_sblock(name)
        ndim = len(s.get(blk).writes[0].region)  # the partial's lanes last: a row's partials are one vector
        _, inner = s.split(s.get_loops(blk)[-1], [None, lanes])
        found.append(str(s.get(s.rfactor(inner, ndim)).name_hint))

    factored = _try(sch, factor)
    return (factored, found[0]) if factored is not None else None


def _iterations(sch: tvm.s_tir.Schedule, name: str, probe: int = 64) -> int:
    """How many times the block runs, with every symbolic extent set to ``probe``: placed inside a row loop, a
    block that each row needs whole (a mean over the rows) would run once per row, which ``_fuse_rows`` refuses."""
    count = 1
    for loop in sch.get_loops(sch.get_sblock(name)):
        extent = sch.get(loop).extent
        analyzer = tvm.sym.Analyzer()
        for var in tirx.analysis.undefined_vars(extent):
            analyzer.bind(var, probe)
        count *= int(analyzer.simplify(extent))
    return count


def _fuse_rows(sch: tvm.s_tir.Schedule, names: list[str], partials: set[str], lanes: int) -> tvm.s_tir.Schedule | None:
    """Step 2 (module docstring): every block of ``names`` computed inside the last one's parallel row loop, the
    ``partials`` of factored reductions lanes innermost; None where a block cannot go there (then each goes alone)."""
    *producers, output = names
    rows = _row_loops(sch, output)
    if not producers or not rows:
        return None

    def place(s: tvm.s_tir.Schedule) -> None:
        work = {name: _iterations(s, name) for name in producers}
        row = s.fuse(*rows) if len(rows) > 1 else rows[0]
        for name in reversed(producers):
            s.compute_at(s.get_sblock(name), row, preserve_unit_loops=False)
            if _iterations(s, name) > work[name]:  # each row would redo work other rows share (a mean over T)
                raise ValueError(f"{name} computed per row repeats work")
            if name in partials:  # compute_at orders its loops as the block's iterators: lanes, then reduction
                *_, lanes_loop, reduction = s.get_loops(s.get_sblock(name))
                s.reorder(reduction, lanes_loop)
        s.parallel(row)

    placed = _try(sch, place)
    if placed is None:
        return None
    for name in names:
        vectorised = _vectorise_innermost(placed, name, lanes)
        if vectorised is not None:
            placed = vectorised
    return placed


def schedule_generic(
    func: tirx.PrimFunc, lanes: int = 8, vector_tails: bool = True, window_vectors: bool = True
) -> tuple[tirx.PrimFunc, bool]:
    """``func`` with the schedule of the module docstring (``lanes``: float32 SIMD width) and whether any step
    applied; ``vector_tails=False`` leaves loops the lanes do not divide as plain loops, ``window_vectors=False``
    runs a window around its whole output row with its pad inlined (baselines for the benchmarks)."""
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
    try:
        root = sch.get_sblock("root")
    except Exception:  # noqa: BLE001 - no root block: not a legalised function, leave it alone
        return func, False
    names = [str(sch.get(b).name_hint) for b in sch.get_child_blocks(root)]
    kept, steps = [], 0
    staged: dict[str, tuple[str, ...]] = {}  # window block -> its pads, computed per plane (``_window_outside``)
    for name in names[:-1]:
        blk = sch.get_sblock(name)
        consumers = sch.get_consumers(blk)
        if window_vectors and len(consumers) == 1 and _is_padding(sch, name):
            window = str(sch.get(consumers[0]).name_hint)
            if _window(sch, window) is not None:
                staged[window] = (*staged.get(window, ()), name)
                continue
        if len(consumers) == 1:
            inlined = _try(sch, _inlining(name))
            if inlined is not None:
                sch, steps = inlined, steps + 1
                continue
        kept.append(name)
    blocks, partials = [], set()
    for name in [*kept, *names[-1:]]:
        factored = _rfactor(sch, name, lanes)
        if factored is not None:
            sch, partial = factored
            blocks.append(partial)
            partials.add(partial)
        blocks.append(name)
    fused = _fuse_rows(sch, blocks, partials, lanes)
    if fused is not None:
        sch, steps = fused, steps + 1
    else:
        for name in blocks:
            sch, n = _schedule_block(sch, name, lanes, staged.get(name, ()), window_vectors)
            steps += n
    for pad in (p for pads in staged.values() for p in pads):  # a pad its window did not take: inlined after all
        if not any(sch.get(lp).kind == tirx.ForKind.PARALLEL for lp in sch.get_loops(sch.get_sblock(pad))):
            sch = _try(sch, _inlining(pad)) or sch
    scheduled, tails = vectorise_tails(sch.mod["main"], lanes if vector_tails else 1)
    return scheduled, steps + tails > 0
