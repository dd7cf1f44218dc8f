"""Applying a micro-kernel to a dynamic GEMM with local padding.

``pad_einsum`` pads every axis the tile does not divide (the T axes). On x86 a T axis is padded only to the
register tile: a part-full tile runs the register tiles holding real rows or columns, one guard each, outside the
unrolled and vectorised loops (``padding_units``); CUDA pads to the block's tile. ``pad_places`` says where A's
padded copy is made and the output cropped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import tvm

from ..codegen import x86 as _x86
from ..codegen.x86 import vectorize_columns
from ._space import CROP_TILE, PACK_COLUMN, MicroKernel
from ._workloads import DynamicWorkload

__all__ = [
    "aligned_name",
    "aligned_tile",
    "aligned_versions",
    "alignment",
    "microkernel_func",
    "padding_units",
    "schedule_microkernel",
    "smem_error",
    "split_k_error",
    "serving_name",
    "versioned_funcs",
]


def _blocks(sch: tvm.s_tir.Schedule) -> set[str]:
    return {sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))}


def padding_units(wl: DynamicWorkload, mk: MicroKernel) -> tuple[int, int, int]:
    """What ``mk`` pads each GEMM axis of ``wl`` (rows, columns, reduction) to a multiple of: on x86 a T axis
    to the register tile, a static axis to the tile (it divides the static extents the space offers), the
    reduction to ``kt``; on CUDA every axis to the thread block's tile."""
    if mk.device != "cpu":
        return mk.mt, mk.nt, mk.kt
    rows, cols, _ = wl.dynamic_axes()
    return (mk.mr if rows else mk.mt), (mk.nr if cols else mk.nt), mk.kt


def alignment(wl: DynamicWorkload, mk: MicroKernel) -> int:
    """What ``T`` must be a multiple of for ``mk``'s aligned version on a bmm ``wl`` to leave its ``aligned_axis``
    unpadded: that axis's padding unit, or the rows' ``mr`` where that axis is never padded (bmm NN with ``kt = 1``,
    a one-column NT tile); 1 (no version) on CUDA and dense GEMMs, which pad only A's rows once. The version skips the
    padding and crop that a shape-generic kernel does even at a T that needs none."""
    if mk.device != "cpu" or wl.kind == "dense":
        return 1
    units = padding_units(wl, mk)
    return units[wl.aligned_axis()] if units[wl.aligned_axis()] > 1 else units[0]


def aligned_versions(
    wl: DynamicWorkload, kernels: Sequence[MicroKernel], kept: Sequence[int] | None = None
) -> list[int]:
    """Per kernel, the alignment of the version deployed beside it (0: none, where it would serve no T of the range;
    ``serving_name`` picks it wherever ``T % u == 0``). ``kept`` (a dispatcher's ``aligned``: the versions the tuner
    timed faster, ``check_versions``) overrides that default per kernel; each entry must be 0 or the kernel's own."""
    default = [u if 1 < u <= wl.t_range[1] else 0 for u in (alignment(wl, k) for k in kernels)]
    if kept is None:
        return default
    if len(kept) != len(kernels) or any(int(k) not in (0, u) for k, u in zip(kept, default)):
        raise ValueError(
            f"{wl.name}: kept aligned versions {list(kept)!r} must give, per kernel, 0 or its alignment {default!r}"
        )
    return [int(k) for k in kept]


def aligned_tile(wl: DynamicWorkload, mk: MicroKernel, align: int) -> MicroKernel:
    """The micro-kernel an aligned version (``align > 1``) is scheduled with: ``mk``, except that a bmm NT kernel
    whose register tile is not a power-of-two number of columns (three vectors, split by ``vectorize_columns``)
    takes its register tile as its column tile when its columns are aligned (its wider column tile is slower)."""
    units = padding_units(wl, mk)
    pow2 = mk.nr & (mk.nr - 1) == 0
    if align <= 1 or wl.kind != "bmm_nt" or pow2 or mk.nt == mk.nr or align % units[1]:
        return mk
    return dataclasses.replace(mk, nt=mk.nr)


def aligned_name(name: str, align: int) -> str:
    return f"{name}_a{align}"


def serving_name(name: str, align: int, t: int) -> str:
    """The function a module runs at ``T = t`` for kernel ``name``: its aligned version (``align`` from
    ``aligned_versions``; 0 for none) where ``t`` is a multiple of it, else the kernel."""
    return aligned_name(name, align) if align and t % align == 0 else name


def versioned_funcs(
    wl: DynamicWorkload, kernels: Sequence[MicroKernel], names: Sequence[str], kept: Sequence[int] | None = None
) -> dict[str, tvm.tirx.PrimFunc]:
    """Each kernel as ``names[i]`` plus, where ``aligned_versions(wl, kernels, kept)`` gives one, its aligned
    version: what a module compiles so that ``serving_name`` finds both."""
    funcs = {}
    for n, k, u in zip(names, kernels, aligned_versions(wl, kernels, kept)):
        funcs[n] = microkernel_func(wl, k, n)
        if u:
            funcs[aligned_name(n, u)] = microkernel_func(wl, k, aligned_name(n, u), u)
    return funcs


def _divides(extent: object, unit: int) -> bool:
    """``unit`` provably divides ``extent`` (a constant, or ``T // u * u`` for a multiple ``u`` of it)."""
    return bool(tvm.sym.Analyzer().can_prove_equal(tvm.tirx.floormod(extent, unit), 0))


def _tile_split(
    sch: tvm.s_tir.Schedule, loop: tvm.s_tir.LoopRV, tile: int, reg: int
) -> tuple[tvm.s_tir.LoopRV, tvm.s_tir.LoopRV, tvm.s_tir.LoopRV]:
    """(tiles, register tiles within a tile, one register tile) of an axis padded to ``reg``: where the tile
    does not divide the padded extent, the guard TVM adds is on the register-tile index, not on the lanes."""
    regs, inner = sch.split(loop, [None, reg])
    tiles, within = sch.split(regs, [None, tile // reg])
    return tiles, within, inner


def _rows_only(wl: DynamicWorkload, mk: MicroKernel, cols_padded: bool | None = None) -> bool:
    """Only the rows are padded: the columns are static and ``mk``'s tiles divide them (bmm_nt's columns are T,
    padded unless an aligned version declares them a multiple of the register tile: ``cols_padded``)."""
    if cols_padded is not None:
        return not cols_padded
    return wl.kind != "bmm_nt" and wl.dims[1] % mk.nt == 0


def pad_places(wl: DynamicWorkload, mk: MicroKernel, cols_padded: bool | None = None) -> tuple[str, str]:
    """Where the x86 schedule makes A's padded copy and crops the output of ``mk`` on ``wl``: dense pads A once per
    call (per tile it would be made N / nt times), bmm inside the tile; bmm_nt's output is cropped once per call
    (``mk.crop == ""``: vectorised, one more parallel launch) or per tile behind a guard (``"tile"``), as T votes."""
    a_pad = "call" if wl.kind == "dense" else "tile"
    if mk.crop and wl.kind != "bmm_nt":
        raise ValueError(
            f"{mk} chooses where its T x T output is cropped, which only bmm_nt kernels do; {wl.name} is {wl.kind}"
        )
    if _rows_only(wl, mk, cols_padded):
        return a_pad, "direct"
    if wl.kind == "bmm_nt":
        return a_pad, ("tile" if mk.crop == CROP_TILE else "call")
    return a_pad, "tile"


def _schedule_cpu(sch: tvm.s_tir.Schedule, wl: DynamicWorkload, mk: MicroKernel) -> None:
    """The x86 schedule: register-tile padding, A's copy and the crop where ``pad_places`` puts them."""
    blk = sch.get_sblock("C")
    *batch, i, j, k = sch.get_loops(blk)
    units = padding_units(wl, mk)
    extent = sch.get(j).extent
    cols_padded = not _divides(extent, units[1])  # an aligned version's columns may be left unpadded
    if wl.kind == "bmm_nt" and isinstance(extent, tvm.tirx.IntImm):
        # with T bound (a ``MicroKernelTask``'s build) bmm_nt keeps its crop: TVM 0.27's build of a bound-T kernel
        # writing straight to C corrupts the heap (the aligned, symbolic version is exact at every multiple)
        cols_padded = True
    a_pad, crop_place = pad_places(wl, mk, cols_padded)
    a_pad_per_tile = a_pad == "tile"
    sch.pad_einsum(blk, [1] * len(batch) + list(units))
    names = _blocks(sch)
    if wl.b_panel:  # pad the einsum first (it needs plain indices), then read B from its packed panels
        if wl.b_panel % mk.nr and mk.nr % wl.b_panel:
            raise ValueError(
                f"{mk} reads {mk.nr}-wide register tiles, which neither tile {wl.name}'s {wl.b_panel}-column "
                "panels nor are made of them"
            )
        wl.pack_b_layout(sch, sch.get_sblock("B_pad") if "B_pad" in names else blk)
    *batch, i, j, k = sch.get_loops(blk)
    io, iio, iii = _tile_split(sch, i, mk.mt, mk.mr)
    jo, jio, jii = _tile_split(sch, j, mk.nt, mk.nr)
    ko, ki = sch.split(k, [None, mk.kt])
    column = mk.pack == PACK_COLUMN
    if column and wl.kind != "bmm_nt":
        raise ValueError(f"{mk} packs B per column tile, which only bmm_nt kernels do; {wl.name} is {wl.kind}")
    if column and mk.nr == 1:
        raise ValueError(f"{mk} is one column wide: it reads B's rows as they are, nothing to pack per column tile")
    # a pre-packed dense weight is walked column tile by column tile, each tile's row tiles in turn, so a B panel is
    # read from memory once and reused from cache by every row tile (a model's many weights leave none in cache);
    # not when B itself is padded: its pad is computed per column tile, which leaves nothing to fuse
    col_first = column or (wl.kind == "dense" and bool(wl.b_panel) and "B_pad" not in names)
    outer, inner = (jo, io) if col_first else (io, jo)
    sch.reorder(*batch, outer, inner, jio, iio, ko, ki, iii, jii)
    acc = sch.cache_write(blk, 0, _x86.ACCUMULATOR_SCOPE)  # the mr x nr accumulators, in registers for the reduction
    sch.reverse_compute_at(acc, iio)
    if "C_pad" in names and crop_place == "direct":
        # only the rows are padded: the accumulators write the real rows straight to C, one guard per row, instead
        # of through a padded tile and a guarded copy (padded columns would need a guard per lane: no vector store)
        sch.reverse_compute_inline(sch.get_sblock("C_pad"))
        names.discard("C_pad")
    if column:  # B's nt x K panel packed k-major inside its column tile, once, before the row tiles reuse it
        panel = sch.get_sblock("B_pad") if "B_pad" in names else sch.cache_read(blk, 1, "global")
        nr = mk.nr
        sch.transform_layout(panel, ("write", 0), lambda n, jj, kk: (n, jj // nr, kk, jj % nr))
        sch.compute_at(panel, jo)
        if "A_pad" in names and a_pad_per_tile:
            sch.compute_at(sch.get_sblock("A_pad"), io)
        if "C_pad" in names:
            _place_crop(sch, crop_place, io)
        sch.parallel(sch.fuse(*batch, jo))
    elif wl.kind == "bmm_nt":  # B is [j, k]: pack it k-major in nr-wide panels so each k step reads whole vectors
        panel = sch.get_sblock("B_pad") if "B_pad" in names else sch.cache_read(blk, 1, "global")
        nr = mk.nr
        sch.transform_layout(panel, ("write", 0), lambda n, jj, kk: (n, jj // nr, kk, jj % nr))
        # once per call, in parallel over (batch, panel): a per-tile pack would repeat for every row tile
        sch.parallel(sch.fuse(*sch.get_loops(panel)[:2]))
    elif "B_pad" in names:
        sch.compute_at(sch.get_sblock("B_pad"), jo)
    if "A_pad" in names and not a_pad_per_tile:  # one parallel loop over A's (batch and) rows, before the GEMM
        a_copy = sch.get_sblock("A_pad")
        sch.parallel(sch.fuse(*sch.get_loops(a_copy)[: len(batch) + 1]))
    if not column:
        if "A_pad" in names and a_pad_per_tile:
            sch.compute_at(sch.get_sblock("A_pad"), inner)
        if "C_pad" in names:
            _place_crop(sch, crop_place, inner)
        sch.parallel(sch.fuse(*batch, outer, inner))
    sch.unroll(iii)
    sch.unroll(ki)
    if mk.nr > 1:  # a one-column tile (bmm_nt at small T) has nothing to vectorize
        # vectorize before decompose_reduction, or TIR rejects it
        _vectorize_columns(sch, jii, wl, mk)
        _vectorize_columns(sch, sch.get_loops(acc)[-1], wl, mk)
    sch.decompose_reduction(blk, ko)
    if mk.unroll:  # TVM's UnrollLoop pass unrolls every loop of up to ``unroll`` steps (the template's knob)
        root = sch.get_sblock("root")
        sch.annotate(root, "pragma_auto_unroll_max_step", mk.unroll)
        sch.annotate(root, "pragma_unroll_explicit", 1)


def _vectorize_columns(sch: tvm.s_tir.Schedule, loop: tvm.s_tir.LoopRV, wl: DynamicWorkload, mk: MicroKernel) -> None:
    """A register tile's column loop vectorised one packed weight's panel at a time where the tile spans several
    panels (one contiguous vector per panel per k step), else by power-of-two vectors (``vectorize_columns``)."""
    if wl.b_panel and mk.nr > wl.b_panel:
        outer, loop = sch.split(loop, [None, wl.b_panel])
        sch.unroll(outer)
    vectorize_columns(sch, loop, min(mk.nr, wl.b_panel or mk.nr))


def _place_crop(sch: tvm.s_tir.Schedule, place: str, tile: tvm.s_tir.LoopRV) -> None:
    """The padded output's crop into C: inside each tile (``tile``), or once per call, rows in parallel (``call``)."""
    crop = sch.get_sblock("C_pad")
    if place == "call":
        sch.parallel(sch.fuse(*sch.get_loops(crop)[:-1]))
    else:
        sch.reverse_compute_at(crop, tile)


def _cooperative_fetch(
    sch: tvm.s_tir.Schedule, block: tvm.s_tir.SBlockRV, at: tvm.s_tir.LoopRV, ty_extent: int, tx_extent: int
) -> None:
    sch.compute_at(block, at)
    loops = sch.get_loops(block)
    at_stmt = sch.get(at)
    below = next(n for n, loop in enumerate(loops) if sch.get(loop).same_as(at_stmt)) + 1
    fused = sch.fuse(*loops[below:])
    _, ty, tx = sch.split(fused, [None, ty_extent, tx_extent])
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")


def _k_major(sch: tvm.s_tir.Schedule, stage: tvm.s_tir.SBlockRV, n_batch: int, pad: bool) -> None:
    """Store ``stage``'s shared tile (rows x k, k innermost) k-major, so the threads of a warp that read one k-slice
    of it read neighbouring words (``SMEM_LAYOUTS``); ``pad``: each k-row padded to 4 words past a multiple of 16."""
    if n_batch:
        sch.transform_layout(stage, ("write", 0), lambda n, r, k: (n, k, r))
    else:
        sch.transform_layout(stage, ("write", 0), lambda r, k: (k, r))
    if pad:
        sch.storage_align(stage, 0, n_batch, 16, 4)


#: threads per block of a split-K kernel's second kernel (the sum of the parts and the crop into C)
_SUM_THREADS = 128


def split_k_error(wl: DynamicWorkload, mk: MicroKernel) -> str:
    """Why ``mk`` cannot split ``wl``'s reduction ('' if it can): parts are whole ``kt`` steps of a fixed reduction."""
    if mk.split_k == 1:
        return ""
    if mk.device != "cuda":
        return f"split-K is a CUDA option; {mk} is a {mk.device} kernel"
    if wl.dynamic_axes()[2]:
        return f"{wl.name} reduces over T; split-K needs a fixed reduction ({mk})"
    _, _, _, k = wl.gemm_extents(wl.t_range[0])
    if k % (mk.split_k * mk.kt):
        return f"{wl.name}'s reduction of {k} does not split into {mk.split_k} parts of whole {mk.kt}-steps ({mk})"
    return ""


def smem_error(kind: str, mk: MicroKernel) -> str:
    """Why ``mk``'s shared-memory layout does not apply to a GEMM of ``kind`` ('' where it does): only bmm NT reads
    B along its reduction; A's tile, read across its rows by a warp, measured slower transposed."""
    if not mk.smem or kind == "bmm_nt":
        return ""
    return f"a {kind} GEMM's B tile is k-major as read; smem={mk.smem!r} applies to bmm_nt only ({mk})"


def _sum_parts(sch: tvm.s_tir.Schedule, names: set[str]) -> None:
    """Split-K's second kernel: a thread sums one output's parts and crops it into C (a padded output stays in a
    register)."""
    red = sch.get_sblock("C")
    *spatial, _ = sch.get_loops(red)
    bx, tx = sch.split(sch.fuse(*spatial), [None, _SUM_THREADS])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    if "C_pad" in names:
        sch.reverse_compute_at(sch.get_sblock("C_pad"), tx)
        sch.set_scope(red, 0, "local")


def _schedule_cuda(sch: tvm.s_tir.Schedule, wl: DynamicWorkload, mk: MicroKernel) -> None:
    blk = sch.get_sblock("C")
    *batch, i, j, k = sch.get_loops(blk)
    sch.pad_einsum(blk, [1] * len(batch) + [mk.mt, mk.nt, mk.kt])
    names = _blocks(sch)
    *batch, i, j, k = sch.get_loops(blk)
    parts: list[tvm.s_tir.LoopRV] = []
    if mk.split_k > 1:  # split-K: part p of the reduction in blocks of their own, summed by a second kernel
        part, k = sch.split(k, [mk.split_k, None])
        blk = sch.rfactor(part, 0)
        _sum_parts(sch, names)
        *batch, i, j, part, k = sch.get_loops(blk)
        parts = [part]
    ty_n, tx_n = mk.mt // mk.mr, mk.nt // mk.nr
    ko, ki = sch.split(k, [None, mk.kt])
    if mk.interleave:  # a thread's outputs a thread-tile apart, as virtual threads: a warp stores adjacent
        by, vy, ty = sch.split(i, [None, mk.mr, ty_n])  # columns of C and reads adjacent words of B's tile
        bx, vx, tx = sch.split(j, [None, mk.nr, tx_n])
        sch.reorder(*parts, *batch, by, bx, vy, vx, ty, tx, ko, ki)
        sch.bind(vy, "vthread.y")
        sch.bind(vx, "vthread.x")
        register: list[tvm.s_tir.LoopRV] = []
    else:
        by, ty, ri = sch.split(i, [None, ty_n, mk.mr])
        bx, tx, rj = sch.split(j, [None, tx_n, mk.nr])
        sch.reorder(*parts, *batch, by, bx, ty, tx, ko, ki, ri, rj)
        register = [ri, rj]
    sch.bind(sch.fuse(*parts, *batch, by, bx), "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    acc = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(acc, tx)
    for idx, name in ((0, "A"), (1, "B")):  # stage this tile's kt-slices of A and B in shared memory
        if f"{name}_pad" in names:
            stage = sch.get_sblock(f"{name}_pad")
            sch.set_scope(stage, 0, "shared")
        else:
            stage = sch.cache_read(blk, idx, "shared")
        if mk.smem and name == "B":  # bmm NT's B^T, read along its reduction (smem_error: only there)
            _k_major(sch, stage, len(batch), pad=mk.smem == "kmajor-pad")
        _cooperative_fetch(sch, stage, ko, ty_n, tx_n)
    if "C_pad" in names and mk.split_k == 1:
        crop = sch.get_sblock("C_pad")
        sch.set_scope(acc, 0, "local")
        sch.reverse_compute_at(crop, tx)
    for loop in (ki, *register):
        sch.unroll(loop)
    sch.decompose_reduction(blk, ko)


def schedule_microkernel(wl: DynamicWorkload, mk: MicroKernel, align: int = 1) -> tvm.s_tir.Schedule:
    """The workload's symbolic-T PrimFunc scheduled with ``mk`` (a kernel correct for every T >= 1), or with
    ``align > 1`` its version for T a multiple of ``align`` (``DynamicWorkload.prim_func``; x86 only)."""
    if align > 1 and mk.device != "cpu":
        raise ValueError(f"aligned kernel versions are x86 only; {mk} is a {mk.device} kernel")
    units = padding_units(wl, mk)
    axes = {ax for ax, dyn in enumerate(wl.dynamic_axes()) if dyn and align % units[ax] == 0}
    mk = aligned_tile(wl, mk, align)
    sch = tvm.s_tir.Schedule(wl.prim_func(packed=False, align=align, axes=axes))
    if mk.device == "cpu":
        if mk.split_k > 1 or mk.interleave:
            raise ValueError(split_k_error(wl, mk) or f"interleaved threads are a CUDA option; {mk} is a cpu kernel")
        _schedule_cpu(sch, wl, mk)
    elif mk.device == "cuda":
        if mk.pack or mk.crop or mk.unroll:
            raise ValueError(
                f"CUDA micro-kernels stage B in shared memory, crop per block and unroll as scheduled; {mk} asks for "
                "x86 options"
            )
        if wl.b_panel:
            raise ValueError(f"CUDA micro-kernels read B row-major; {wl.name} packs it (b_panel={wl.b_panel})")
        if why := split_k_error(wl, mk) or smem_error(wl.kind, mk):
            raise ValueError(why)
        _schedule_cuda(sch, wl, mk)
    else:
        raise ValueError(f"micro-kernel device must be 'cpu' or 'cuda', got {mk.device!r}")
    return sch


def microkernel_func(wl: DynamicWorkload, mk: MicroKernel, name: str = "main", align: int = 1) -> tvm.tirx.PrimFunc:
    """The scheduled PrimFunc, renamed ``name`` (several kernels share one module when deployed)."""
    func = schedule_microkernel(wl, mk, align).mod["main"]
    return func.with_attr("global_symbol", name)
