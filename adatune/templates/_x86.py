"""x86 building blocks shared by the CPU templates: the register budget of the micro-kernel, cache and
parallel limits, unroll pragmas, and the packed GEMM micro-kernel used by ``dense`` and ``batch_matmul``.

Every limit comes from ``adatune.target.cpu_info`` (vector width, vector registers, caches, cores) so one
template gives fast spaces on AVX2 (16 ymm) and on AVX-512 (32 zmm): a micro-kernel tile of ``rows x
vectors`` accumulators must fit the register file beside one row of operand vectors and a broadcast, and
must hold enough independent accumulators to keep the FMA pipes busy. Configs outside these limits spill
or stall; the spaces leave them out rather than spending trials on them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import tvm

from ..target import CpuInfo

__all__ = [
    "FMA_CHAINS",
    "apply_unroll",
    "define_unroll",
    "define_vector_split",
    "fits_registers",
    "parallel_ok",
    "register_tiles",
    "schedule_gemm",
    "vector_sizes",
]

# Independent accumulators that hide the FMA latency: 4 cycles x 2 FMA pipes on Zen 2-5, Skylake to
# Sapphire Rapids and Neoverse cores. Fewer leave the FMA units idle half the time.
FMA_CHAINS = 8


def fits_registers(rows: int, vectors: int, info: CpuInfo) -> bool:
    """A ``rows x vectors`` accumulator tile, one row of ``vectors`` operand vectors and one broadcast
    register fit in the vector register file (16 ymm with AVX2, 32 zmm with AVX-512)."""
    return rows * vectors + vectors + 1 <= info.vector_registers


def register_tiles(rows: Iterable[int], vectors: Iterable[int], info: CpuInfo) -> set[tuple[int, int]]:
    """The ``(rows, vectors)`` micro-kernel tiles worth measuring among the ones a shape allows.

    A tile must fit the registers (``fits_registers``) and hold ``FMA_CHAINS`` accumulators; and each k
    step, which loads ``rows`` broadcasts and ``vectors`` operand vectors for ``rows x vectors`` FMAs,
    must not load more than it multiplies: these cores issue two vector loads and two FMAs a cycle,
    so an 8x1 tile (9 loads, 8 FMAs) runs at half the speed of a 4x2 one (6 loads, 8 FMAs). Where the
    shape allows no such tile, the largest that fit are kept instead.
    """
    fit = [(r, v) for r in set(rows) for v in set(vectors) if fits_registers(r, v, info)]
    if not fit:
        return set()
    floor = min(FMA_CHAINS, max(r * v for r, v in fit))
    busy = [(r, v) for r, v in fit if r * v >= floor]
    balanced = [(r, v) for r, v in busy if r + v <= r * v]
    return set(balanced or busy)


PARALLEL_BALANCE = 0.8


def parallel_ok(extent: int, cores: int, limit: int) -> bool:
    """The outer parallel loop keeps every core busy with balanced work: at least ``cores`` chunks, and
    the last round of chunks leaves at most a fifth of the cores' time idle (``limit`` is the largest
    extent the op allows). Tuning on a busy machine otherwise drifts to single-threaded configs, which
    look as fast there. A ratio rather than "a multiple of the cores" keeps odd extents (a 7x7 conv
    output on 2 cores: 7 chunks, 88% busy) that are the only parallel split a shape has."""
    need = min(cores, limit)
    rounds = -(-extent // need) if need else 0
    return extent >= need and extent >= PARALLEL_BALANCE * rounds * need


def vector_sizes(extent: int, lanes: int, max_vectors: int) -> list[int]:
    """Innermost (vectorised) factors of a loop of ``extent``: multiples of the SIMD width up to
    ``max_vectors`` registers when the extent allows, otherwise every factor up to that width."""
    cap = lanes * max_vectors
    divisors = [d for d in range(1, min(extent, cap) + 1) if extent % d == 0]
    whole = [d for d in divisors if d % lanes == 0]
    return whole if whole else divisors


def define_vector_split(
    cfg: Any,
    name: str,
    extent: int,
    lanes: int,
    num_outputs: int,
    max_vectors: int = 4,
    keep: Callable[[Any], bool] | None = None,
) -> None:
    """A split whose innermost factor is one of ``vector_sizes`` (and passes ``keep``, if given)."""
    sizes = set(vector_sizes(extent, lanes, max_vectors))
    cfg.define_split(
        name, extent, num_outputs=num_outputs, filter=lambda e: e.size[-1] in sizes and (keep is None or keep(e))
    )


def define_unroll(cfg: Any, steps: Sequence[int] = (0, 16, 64, 512)) -> None:
    """LLVM-side unrolling of everything under the kernel (0 = only the explicit micro-kernel unrolls)."""
    cfg.define_knob("auto_unroll_max_step", list(steps))


def apply_unroll(sch: Any, cfg: Any, explicit: int = 1) -> None:
    """Annotate the root block: TVM's UnrollLoop pass unrolls loops up to the chosen step count."""
    step = cfg["auto_unroll_max_step"].val
    if step:
        root = sch.get_sblock("root")
        sch.annotate(root, "pragma_auto_unroll_max_step", step)
        sch.annotate(root, "pragma_unroll_explicit", explicit)


def _divisors(n: int, cap: int) -> list[int]:
    return [d for d in range(1, min(n, cap) + 1) if n % d == 0]


def _panel_bytes(rows: int, cols: int, k_bytes: int) -> int:
    """Bytes of A (``rows x K``) and B (``K x cols``) one cache tile reads."""
    return (rows + cols) * k_bytes


def _reuse(rows: int, cols: int) -> float:
    """Multiply-adds per operand element a ``rows x cols`` cache tile loads (it loads A and B once)."""
    return rows * cols / (rows + cols)


def _reuse_floor(n_i: int, n_j: int, k_bytes: int, info: CpuInfo) -> float:
    """Least reuse a cache tile must reach: half of the best tile whose panels fit in L2, at most 16
    (a 32x32 tile). Thin tiles stream B from L3 once per few rows of A and run at half speed."""
    fitting = [
        _reuse(r, c)
        for r in _divisors(n_i, n_i)
        for c in _divisors(n_j, n_j)
        if _panel_bytes(r, c, k_bytes) <= info.l2_bytes
    ]
    return min(16.0, max(fitting, default=0.0) / 2)


def _tile_can_reach(size: int, others: list[int], floor: float) -> bool:
    """Some partner side lets a cache tile with a ``size`` side reach the reuse floor (a necessary
    condition that prunes each split before the joint filter)."""
    return any(_reuse(size, o) >= floor for o in others)


def schedule_gemm(
    sch: Any,
    cfg: Any,
    block: Any,
    batch: Sequence[Any],
    i: Any,
    j: Any,
    k: Any,
    pack_map: Callable[[int], Callable],
    info: CpuInfo,
    dtype: str,
) -> None:
    """Schedule ``C[.., i, j] += A[.., i, k] * B[..]`` as a packed, register-blocked GEMM.

    Loops: ``batch, i0, j0`` (parallel) / ``i1, j1`` (cache tiles, order is a knob) / ``k0, k1`` (``k1``
    unrolled) / ``i2`` (unrolled rows) x ``j2`` (vectorised columns): the ``i2 x j2`` accumulator tile
    lives in registers (``cache_write`` "local") for the whole reduction, and B's panel is packed to
    ``[j // j2, k, j % j2]`` so each k step reads ``j2 / lanes`` contiguous vectors and broadcasts ``i2``
    scalars of A. ``pack_map(j2)`` gives the index map of B's layout to that packed one.

    The space keeps register tiles that fit ``info``'s register file with at least ``FMA_CHAINS``
    accumulators (on AVX2: 4x16, 8x8 and 2x32 for fp32; on AVX-512 up to 16x16 and 4x64), cache tiles
    whose A and B panels fit in L2, and parallel loops that keep every core evenly busy.
    """
    ext = lambda loop: int(sch.get(loop).extent)
    lanes = info.lanes(dtype)
    nbytes = tvm.DataType(dtype).bits // 8
    rows_cap = info.vector_registers - 2  # one vector column, one broadcast
    n_i, n_j, n_k = ext(i), ext(j), ext(k)
    cols = vector_sizes(n_j, lanes, max_vectors=info.vector_registers // 4)
    tiles = register_tiles(_divisors(n_i, rows_cap), [math.ceil(c / lanes) for c in cols], info)
    k_bytes = n_k * nbytes
    reuse_floor = _reuse_floor(n_i, n_j, k_bytes, info)
    # necessary conditions on each split alone keep most of the product space valid (cheap sampling)
    row_set = {r for r, _ in tiles}
    col_set = {c for c in cols if any(math.ceil(c / lanes) == v for _, v in tiles)}
    row_tiles = {r for r in _divisors(n_i, n_i) if _tile_can_reach(r, _divisors(n_j, n_j), reuse_floor)}
    col_tiles = {c for c in _divisors(n_j, n_j) if _tile_can_reach(c, _divisors(n_i, n_i), reuse_floor)}
    cfg.define_split(
        "tile_y", n_i, num_outputs=3, filter=lambda e: e.size[-1] in row_set and e.size[1] * e.size[2] in row_tiles
    )
    cfg.define_split(
        "tile_x", n_j, num_outputs=3, filter=lambda e: e.size[-1] in col_set and e.size[1] * e.size[2] in col_tiles
    )
    cfg.define_split("tile_k", n_k, num_outputs=2, max_factor=8)
    cfg.define_knob("order", ["ij", "ji"])
    cfg.define_knob("pack_b", ["global", "tile"])
    define_unroll(cfg, (0, 64))
    nbatch = math.prod(ext(b) for b in batch)
    limit = nbatch * n_i * (n_j // (lanes if n_j % lanes == 0 else 1))

    def keep(c: Any) -> bool:
        y, x = c["tile_y"].size, c["tile_x"].size
        rows, cols = y[1] * y[2], x[1] * x[2]  # one parallel chunk's cache tile
        return (
            (y[2], math.ceil(x[2] / lanes)) in tiles
            and (_panel_bytes(rows, cols, n_k * nbytes) <= info.l2_bytes or y[1] * x[1] == 1)
            and _reuse(rows, cols) >= reuse_floor
            and (c["pack_b"].val == "global" or y[0] == 1)  # a packed panel per row tile repeats work
            and parallel_ok(nbatch * y[0] * x[0], info.cores, limit)
        )

    cfg.multi_filter(keep)

    i0, i1, i2 = cfg["tile_y"].apply(sch, i)
    j0, j1, j2 = cfg["tile_x"].apply(sch, j)
    k0, k1 = cfg["tile_k"].apply(sch, k)
    mid = [i1, j1] if cfg["order"].val == "ij" else [j1, i1]
    sch.reorder(*batch, i0, j0, *mid, k0, k1, i2, j2)
    acc = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(acc, mid[1])

    nr = cfg["tile_x"].size[-1]
    packed = sch.cache_read(block, 1, "global")
    sch.transform_layout(block, ("read", 1), pack_map(nr))
    outer = sch.fuse(*batch, i0, j0)
    sch.parallel(outer)
    if cfg["pack_b"].val == "tile":  # each parallel tile packs the panel it reads
        sch.compute_at(packed, outer)
    else:  # pack all of B once, in parallel
        sch.parallel(sch.get_loops(packed)[0])

    sch.unroll(i2)
    sch.unroll(k1)
    if nr > 1:
        sch.vectorize(j2)  # vectorize before decompose_reduction, or TIR rejects it
        sch.vectorize(sch.get_loops(acc)[-1])
    sch.decompose_reduction(block, k0)
    apply_unroll(sch, cfg)
