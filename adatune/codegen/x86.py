"""x86 building blocks of the CPU templates: the micro-kernel's register budget, cache and parallel limits, unroll
pragmas. Every limit comes from ``adatune.target.cpu_info``, so configs that would spill or stall stay out of the spaces
on AVX2 and AVX-512 alike."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..target import CpuInfo

__all__ = [
    "ACCUMULATOR_SCOPE",
    "FMA_CHAINS",
    "apply_unroll",
    "define_unroll",
    "define_vector_split",
    "fits_registers",
    "mark_weight_pack",
    "parallel_ok",
    "register_tiles",
    "vector_sizes",
    "vectorize_columns",
]

#: the storage scope of a register tile's accumulators (``cache_write``). TVM 0.27 keeps a CPU allocation on the stack
#: only when its scope is "global" and its size a constant under 1 KiB; a "local" one, however small, comes from the
#: workspace pool (``TVMBackendAllocWorkspace`` and a free around every iteration of the parallel loop that holds it),
#: the tile zeroed and written back through heap memory. On the stack LLVM keeps it in registers throughout.
ACCUMULATOR_SCOPE = "global"

# Independent accumulators that hide the FMA latency: 4 cycles x 2 FMA pipes on Zen 2-5, Skylake to
# Sapphire Rapids and Neoverse cores. Fewer leave the FMA units idle half the time.
FMA_CHAINS = 8


def fits_registers(rows: int, vectors: int, info: CpuInfo) -> bool:
    """A ``rows x vectors`` accumulator tile, one row of ``vectors`` operand vectors and one broadcast
    register fit in the vector register file (16 ymm with AVX2, 32 zmm with AVX-512)."""
    return rows * vectors + vectors + 1 <= info.vector_registers


def register_tiles(rows: Iterable[int], vectors: Iterable[int], info: CpuInfo) -> set[tuple[int, int]]:
    """The ``(rows, vectors)`` tiles worth measuring: those fitting the registers with ``FMA_CHAINS`` accumulators that
    load no more per k step than they multiply (not 8x1: 9 loads, 8 FMAs); else the largest that fit."""
    fit = [(r, v) for r in set(rows) for v in set(vectors) if fits_registers(r, v, info)]
    if not fit:
        return set()
    floor = min(FMA_CHAINS, max(r * v for r, v in fit))
    busy = [(r, v) for r, v in fit if r * v >= floor]
    balanced = [(r, v) for r, v in busy if r + v <= r * v]
    return set(balanced or busy)


PARALLEL_BALANCE = 0.8


#: the block annotation TVM's ``relax.transform.SplitLayoutRewritePreproc`` splits into a function of its own
LAYOUT_REWRITE_PREPROC = "meta_schedule.layout_rewrite_preproc"


def mark_weight_pack(sch: Any, pack: Any) -> bool:
    """Mark a whole-operand packing block (``cache_read`` + ``transform_layout`` at the root, not inside a tile) as a
    layout rewrite when it copies a function parameter; False (unmarked) when its source is a buffer the function
    computes. A model build (``adatune.models.build``) folds marked blocks into the constant weights, so a deployed
    layer reads panels packed once; a standalone kernel still packs in every call (its code is unchanged)."""
    block = sch.get(pack)
    allocated = {str(b.name) for b in sch.get(sch.get_sblock("root")).alloc_buffers}
    if len(block.reads) != 1 or str(block.reads[0].source.name) in allocated:
        return False
    sch.annotate(pack, LAYOUT_REWRITE_PREPROC, 1)  # 1, not True: a trace's JSON (a MetaSchedule database) reads 1
    return True


def parallel_ok(extent: int, cores: int, limit: int) -> bool:
    """The outer parallel loop keeps every core busy with balanced work: at least ``cores`` chunks, and the last
    round of chunks leaves at most a fifth of the cores' time idle (``limit`` is the largest extent the op allows):
    tuning on a busy machine otherwise drifts to single-threaded configs. A ratio, not "a multiple of the cores",
    keeps odd extents that are a shape's only parallel split."""
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


def vectorize_columns(sch: Any, loop: Any, width: int) -> None:
    """Vectorise a register tile's ``width`` columns as power-of-two vectors (the largest dividing ``width``), the outer
    loop unrolled: LLVM widens other lengths, so a tile three AVX2 vectors wide (``<24 x float>``) is slower whole."""
    part = width & -width
    if width > part:
        outer, loop = sch.split(loop, [None, part])
        sch.unroll(outer)
    sch.vectorize(loop)
