"""x86 building blocks shared by the CPU templates: SIMD-aware split knobs, the register budget of the
micro-kernel, unroll pragmas, and the packed GEMM micro-kernel used by ``dense`` and ``batch_matmul``.

They live here rather than in each template so that dense and batch_matmul tune the very same kernel.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import psutil

__all__ = ["register_count", "define_vector_split", "define_unroll", "apply_unroll", "fits_registers",
           "core_count", "parallel_ok", "schedule_gemm"]


def register_count(lanes: int) -> int:
    """Vector registers the micro-kernel may use: 32 zmm with AVX-512 (16 fp32 lanes), else 16."""
    return 32 if lanes >= 16 else 16


def fits_registers(rows: int, cols: int, lanes: int) -> bool:
    """A rows x cols accumulator tile, plus one operand row and a broadcast, fits in registers."""
    vecs = math.ceil(cols / lanes)
    return rows * vecs + vecs + 1 <= register_count(lanes)


def core_count(target: Any) -> int:
    """Cores the kernel's thread pool will use: the target's ``num-cores``, else this machine's."""
    cores = target.attrs.get("num-cores") if target is not None else None
    if cores:
        return int(cores)
    return psutil.cpu_count(logical=False) or psutil.cpu_count() or 1


def parallel_ok(extent: int, cores: int, limit: int) -> bool:
    """The outer parallel loop keeps every core busy with balanced work: at least ``cores`` chunks,
    and a multiple of it unless there are plenty (``limit`` is the largest extent the op allows).
    Tuning on a busy machine otherwise drifts to single-threaded configs, which look as fast there."""
    need = min(cores, limit)
    return extent >= need and (extent % need == 0 or extent >= 4 * need)


def define_vector_split(cfg: Any, name: str, extent: int, lanes: int, num_outputs: int,
                        max_vectors: int = 4) -> None:
    """A split whose innermost factor is vectorised: a multiple of the SIMD width (up to
    ``max_vectors`` registers) when the extent allows it, otherwise any factor up to that width."""
    cap = lanes * max_vectors
    if extent % lanes == 0:
        keep: Callable = lambda e: e.size[-1] % lanes == 0 and e.size[-1] <= cap
    else:
        keep = lambda e: e.size[-1] <= cap
    cfg.define_split(name, extent, num_outputs=num_outputs, filter=keep)


def define_unroll(cfg: Any) -> None:
    """LLVM-side unrolling of everything under the kernel (0 = only the explicit micro-kernel unrolls)."""
    cfg.define_knob("auto_unroll_max_step", [0, 16, 64, 512])


def apply_unroll(sch: Any, cfg: Any, explicit: int = 1) -> None:
    """Annotate the root block: TVM's UnrollLoop pass unrolls loops up to the chosen step count."""
    step = cfg["auto_unroll_max_step"].val
    if step:
        root = sch.get_sblock("root")
        sch.annotate(root, "pragma_auto_unroll_max_step", step)
        sch.annotate(root, "pragma_unroll_explicit", explicit)


def schedule_gemm(sch: Any, cfg: Any, block: Any, batch: Sequence[Any], i: Any, j: Any, k: Any,
                  pack_map: Callable[[int], Callable], lanes: int, cores: int) -> None:
    """Schedule ``C[.., i, j] += A[.., i, k] * B[..]`` as a packed, register-blocked GEMM.

    Loops: ``batch, i0, j0`` (parallel) / ``i1, j1`` (cache tiles, order is a knob) / ``k0, k1`` /
    ``i2`` (unrolled rows) x ``j2`` (vectorised columns): the ``i2 x j2`` accumulator lives in registers
    (``cache_write`` "local"), and B's panel is packed to ``[j // j2, k, j % j2]`` so the inner loop reads
    one contiguous vector per k. ``pack_map(j2)`` gives the index map of B's layout to that packed one.
    """
    ext = lambda loop: int(sch.get(loop).extent)
    cfg.define_split("tile_y", ext(i), num_outputs=3, filter=lambda e: e.size[-1] <= 16)
    define_vector_split(cfg, "tile_x", ext(j), lanes, 3)
    cfg.define_split("tile_k", ext(k), num_outputs=2, max_factor=16)
    cfg.define_knob("order", ["ij", "ji"])
    cfg.define_knob("pack_b", ["global", "tile"])
    cfg.define_knob("unroll_k", [0, 1])
    define_unroll(cfg)
    nbatch = math.prod(ext(b) for b in batch)
    limit = nbatch * ext(i) * (ext(j) // (lanes if ext(j) % lanes == 0 else 1))
    cfg.multi_filter(lambda c: fits_registers(c["tile_y"].size[-1], c["tile_x"].size[-1], lanes)
                     and parallel_ok(nbatch * c["tile_y"].size[0] * c["tile_x"].size[0], cores, limit))

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
    if cfg["unroll_k"].val:
        sch.unroll(k1)
    if nr > 1:
        sch.vectorize(j2)  # vectorize before decompose_reduction, or TIR rejects it
        sch.vectorize(sch.get_loops(acc)[-1])
    sch.decompose_reduction(block, k0)
    apply_unroll(sch, cfg)
