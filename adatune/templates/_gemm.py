"""The packed, register-blocked x86 GEMM of ``dense`` and ``batch_matmul``: schedule, padding and tile choice.

Every valid shape gets configs: awkward extents are padded locally (``gemm_padding``), and the cache-tile rules come
in tiers (panels in L2, enough reuse, every core busy; then without the cache rules; then without the parallel
rule), each checked before any knob is defined, so a template never ends with an empty space.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import tvm

from ..codegen import x86 as _x86
from ..codegen.x86 import (
    apply_unroll,
    define_unroll,
    mark_weight_pack,
    parallel_ok,
    register_tiles,
    vector_sizes,
    vectorize_columns,
)
from ..target import CpuInfo

__all__ = [
    "MIN_TILE_ROWS",
    "ROW_PAD",
    "define_gemm_space",
    "gemm_padding",
    "k_blocks",
    "register_rows_cap",
    "schedule_gemm",
]

# A row extent whose divisors offer no register-tile height of at least this many rows is padded
# (2 x prime rows would otherwise run 1- or 2-row micro-kernels)...
MIN_TILE_ROWS = 4
# ...up to a multiple of this many rows (at most 7 padded rows; 8 divides every AVX2/AVX-512 tile height).
ROW_PAD = 8
# The best cache tile's reuse is capped here (a 32x32 tile); the space keeps tiles with half of it.
REUSE_CAP = 16.0
# Reduction blocks (GotoBLAS's kc) offered for a deep reduction: the largest divisors of K up to these...
K_BLOCK_BOUNDS = (512,)
# ...when K is at least this deep (shallower reductions already fit their panels in L2).
K_BLOCK_MIN_DEPTH = 1024


def register_rows_cap(info: CpuInfo) -> int:
    """Most rows a register tile can have: the register file less one vector column and one broadcast."""
    return info.vector_registers - 2


def _divisors(n: int, cap: int) -> list[int]:
    return [d for d in range(1, min(n, cap) + 1) if n % d == 0]


def gemm_padding(n_i: int, n_j: int, lanes: int, rows_cap: int) -> tuple[int, int]:
    """The multiples ``(rows, cols)`` a GEMM's output is padded to (1: not padded), so that every shape gets
    full-width vectors and a register tile of at least ``MIN_TILE_ROWS`` rows: columns to whole SIMD vectors, rows
    when no divisor in ``[MIN_TILE_ROWS, min(rows_cap, 16)]`` exists (62 = 2 x 31 tokens). The padding is local:
    register-blocked loops run full tiles unguarded; only the padded copies and the write-back are guarded."""
    pad_cols = lanes if n_j > lanes and n_j % lanes else 1
    tall = [d for d in _divisors(n_i, min(rows_cap, 16)) if d >= MIN_TILE_ROWS]
    pad_rows = ROW_PAD if n_i > MIN_TILE_ROWS and not tall else 1
    return pad_rows, pad_cols


def k_blocks(n_k: int) -> list[int]:
    """Reduction blocks for a ``K = n_k`` GEMM: its largest divisor up to each of ``K_BLOCK_BOUNDS`` that cuts it at
    least in two (none below ``K_BLOCK_MIN_DEPTH``). Unblocked, a deep K leaves only narrow tiles fitting L2, whose B
    panel each parallel tile re-reads from memory; blocked, a 128-row tile's panels fit for any K; B streams once."""
    if n_k < K_BLOCK_MIN_DEPTH:
        return []
    found = {max(d for d in range(1, bound + 1) if n_k % d == 0) for bound in K_BLOCK_BOUNDS}
    return sorted(d for d in found if 2 * d <= n_k and d >= K_BLOCK_MIN_DEPTH // 8)


def _panel_bytes(rows: int, cols: int, k_bytes: int) -> int:
    """Bytes of A (``rows x K``) and B (``K x cols``) one cache tile reads."""
    return (rows + cols) * k_bytes


def _reuse(rows: int, cols: int) -> float:
    """Multiply-adds per operand element a ``rows x cols`` cache tile loads (it loads A and B once)."""
    return rows * cols / (rows + cols)


class _Rules:
    """The cache-tile rules of one GEMM shape; ``tier`` 0 is strict, 1 drops the cache rules, 2 also the
    parallel rule. ``pairs`` are the ``(rows, cols)`` cache tiles some register tile divides."""

    def __init__(self, n_i: int, n_j: int, n_k: int, nbatch: int, nbytes: int, lanes: int, info: CpuInfo):
        self.n_i, self.n_j, self.nbatch, self.lanes, self.info = n_i, n_j, nbatch, lanes, info
        self.k_bytes = n_k * nbytes
        cols = vector_sizes(n_j, lanes, max_vectors=info.vector_registers // 4)
        self.tiles = register_tiles(_divisors(n_i, register_rows_cap(info)), [math.ceil(c / lanes) for c in cols], info)
        self.rows_set = {r for r, _ in self.tiles}
        self.cols_set = {c for c in cols if any(math.ceil(c / lanes) == v for _, v in self.tiles)}
        self.limit = nbatch * n_i * (n_j // (lanes if n_j % lanes == 0 else 1))
        rows_of = {R: {r for r in self.rows_set if R % r == 0} for R in _divisors(n_i, n_i)}
        vecs_of = {C: {math.ceil(c / lanes) for c in self.cols_set if C % c == 0} for C in _divisors(n_j, n_j)}
        self.pairs = [
            (R, C)
            for R, rs in rows_of.items()
            for C, vs in vecs_of.items()
            if any(r in rs and v in vs for r, v in self.tiles)
        ]
        fitting = [_reuse(R, C) for R, C in self.pairs if _panel_bytes(R, C, self.k_bytes) <= info.l2_bytes]
        self.floor = min(REUSE_CAP, max(fitting, default=0.0) / 2)
        passing = {t: [(R, C) for R, C in self.pairs if self.cache_ok(R, C, self._single(R, C), t)] for t in (0, 1, 2)}
        self.tier = next(t for t in (0, 1, 2) if passing[t] or t == 2)
        if self.tier == 0:  # a side must reach the reuse floor with some partner side
            rows, cols = _divisors(n_i, n_i), _divisors(n_j, n_j)
            self.row_sides = {R for R in rows if any(_reuse(R, C) >= self.floor for C in cols)}
            self.col_sides = {C for C in cols if any(_reuse(R, C) >= self.floor for R in rows)}
        else:
            self.row_sides = {R for R, _ in passing[self.tier]}
            self.col_sides = {C for _, C in passing[self.tier]}

    def _single(self, rows: int, cols: int) -> bool:
        """The cache tile is one register tile (its panels stream through L1: no L2 rule)."""
        return rows in self.rows_set and cols in self.cols_set and (rows, math.ceil(cols / self.lanes)) in self.tiles

    def cache_ok(self, rows: int, cols: int, single: bool, tier: int, k_bytes: int | None = None) -> bool:
        """A cache tile of ``rows x cols`` (``single``: one register tile) passes tier ``tier``; ``k_bytes``:
        the depth of its panels when the reduction is blocked (the whole K otherwise)."""
        chunks = self.nbatch * (self.n_i // rows) * (self.n_j // cols)
        depth = self.k_bytes if k_bytes is None else k_bytes
        in_l2 = _panel_bytes(rows, cols, depth) <= self.info.l2_bytes or single
        cached = in_l2 and _reuse(rows, cols) >= self.floor
        return (tier >= 1 or cached) and (tier >= 2 or parallel_ok(chunks, self.info.cores, self.limit))


def define_gemm_space(
    cfg: Any, n_i: int, n_j: int, n_k: int, nbatch: int, nbytes: int, lanes: int, info: CpuInfo
) -> bool:
    """Knobs of ``schedule_gemm`` on a (padded) ``nbatch x n_i x n_j x n_k`` GEMM and the filters that keep register
    tiles fitting the register file with at least ``FMA_CHAINS`` accumulators, cache tiles fitting L2 with enough
    reuse, and parallel loops keeping every core evenly busy (as far as the shape's tier allows). True when the space
    has the ``k_block`` knob (a deep reduction in the pruned space; defined last, its first value ``n_k`` is the
    unblocked GEMM, so records written before it existed keep their indices)."""
    rules = _Rules(n_i, n_j, n_k, nbatch, nbytes, lanes, info)
    cfg.define_split(
        "tile_y",
        n_i,
        num_outputs=3,
        filter=lambda e: e.size[-1] in rules.rows_set and e.size[1] * e.size[2] in rules.row_sides,
    )
    cfg.define_split(
        "tile_x",
        n_j,
        num_outputs=3,
        filter=lambda e: e.size[-1] in rules.cols_set and e.size[1] * e.size[2] in rules.col_sides,
    )
    cfg.define_split("tile_k", n_k, num_outputs=2, max_factor=8)
    cfg.define_knob("order", ["ij", "ji"])
    cfg.define_knob("pack_b", ["global", "tile"])
    define_unroll(cfg, (0, 64))
    blocks = k_blocks(n_k) if cfg.pruned else []  # AutoTVM's unpruned space keeps AutoTVM's knobs
    if blocks:
        cfg.define_knob("k_block", [n_k, *blocks])

    def keep(c: Any) -> bool:
        y, x = c["tile_y"].size, c["tile_x"].size
        rows, cols, single = y[1] * y[2], x[1] * x[2], y[1] * x[1] == 1
        kc = c["k_block"].val if blocks else n_k
        if kc < n_k and (  # a block only for tiles whose whole-K panels miss L2, stepped by the widest unroll
            single
            or _panel_bytes(rows, cols, rules.k_bytes) <= info.l2_bytes
            or c["tile_k"].size[-1] != _divisors(kc, 8)[-1]
        ):
            return False
        return (
            (y[2], math.ceil(x[2] / lanes)) in rules.tiles
            and rules.cache_ok(rows, cols, single, rules.tier, kc * nbytes)
            and (c["pack_b"].val == "global" or y[0] == 1)  # a packed panel per row tile repeats work
        )

    cfg.multi_filter(keep)
    return bool(blocks)


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
    """Schedule ``C[.., i, j] += A[.., i, k] * B[..]`` as a packed, register-blocked GEMM (``define_gemm_space``).

    Loops: ``batch, i0, j0`` (parallel) / ``i1, j1`` (cache tiles) / ``k0, k1`` (``k1`` unrolled) / ``i2`` x ``j2``
    (vectorised): the ``i2 x j2`` accumulator tile stays in registers (``ACCUMULATOR_SCOPE``) for the whole reduction
    (with ``k_block`` < K, ``kb`` runs outside the cache tiles), and B is packed to ``[j // j2, k, j % j2]``
    (``pack_map(j2)``) so each k step reads contiguous vectors and broadcasts ``i2`` scalars of A. An awkward shape is
    padded first (``gemm_padding``): B's padded copy is its packing stage, A's one parallel copy, and C is written
    guarded."""
    ext = lambda loop: int(sch.get(loop).extent)
    lanes = info.lanes(dtype)
    padding = gemm_padding(ext(i), ext(j), lanes, register_rows_cap(info))
    a_pad = b_pad = crop = None
    if padding != (1, 1):
        sch.pad_einsum(block, [1] * len(batch) + [*padding, 1])
        # the padded copies and the crop by their place, not by name: a model's fused function replays this
        # trace with other buffer names and epilogue blocks (``models.FusedKnobTask``)
        producers = list(sch.get_producers(block))
        a_pad = producers.pop(0) if padding[0] > 1 else None
        b_pad = producers.pop(0) if padding[1] > 1 else None
        (crop,) = sch.get_consumers(block)
        *batch, i, j, k = sch.get_loops(block)
    nbatch = math.prod(ext(b) for b in batch)
    n_k = ext(k)
    blocked = define_gemm_space(cfg, ext(i), ext(j), n_k, nbatch, tvm.DataType(dtype).bits // 8, lanes, info)
    kc = cfg["k_block"].val if blocked else n_k

    i0, i1, i2 = cfg["tile_y"].apply(sch, i)
    j0, j1, j2 = cfg["tile_x"].apply(sch, j)
    nr = cfg["tile_x"].size[-1]
    mid = [i1, j1] if cfg["order"].val == "ij" else [j1, i1]
    if kc < n_k:
        # blocked: each parallel tile sums its output over K blocks in a tile-sized buffer; the register tile
        # is loaded and stored once per block (LLVM keeps it in registers within a block)
        step = cfg["tile_k"].size[-1]
        kb, k0, k1 = sch.split(k, [None, kc // step, step])
        sch.reorder(*batch, i0, j0, kb, *mid, k0, k1, i2, j2)
        acc = sch.cache_write(block, 0, "global")
        sch.reverse_compute_at(acc, j0)
        _, vec = sch.split(sch.get_loops(acc)[-1], [None, nr])
        reduce_from = kb
    else:
        k0, k1 = cfg["tile_k"].apply(sch, k)
        sch.reorder(*batch, i0, j0, *mid, k0, k1, i2, j2)
        acc = sch.cache_write(block, 0, _x86.ACCUMULATOR_SCOPE)
        sch.reverse_compute_at(acc, mid[1])
        vec = sch.get_loops(acc)[-1]
        reduce_from = k0

    # a padded B is copied anyway: its copy is the packing stage
    packed = b_pad if b_pad is not None else sch.cache_read(block, 1, "global")
    sch.transform_layout(block, ("read", 1), pack_map(nr))
    if a_pad is not None:  # padded rows of A: one parallel copy (a per-tile copy repeats for every column tile)
        sch.parallel(sch.get_loops(a_pad)[0])
    if crop is not None:  # the accumulators write the real rows and columns straight to C, guarded
        sch.reverse_compute_inline(crop)
    outer = sch.fuse(*batch, i0, j0)
    sch.parallel(outer)
    if cfg["pack_b"].val == "tile":  # each parallel tile packs the panel it reads
        sch.compute_at(packed, outer)
    else:  # pack all of B once, in parallel (in a model, once at build time when B is a constant weight)
        sch.parallel(sch.get_loops(packed)[0])
        mark_weight_pack(sch, packed)

    sch.unroll(i2)
    sch.unroll(k1)
    if nr > 1:  # vectorize before decompose_reduction, or TIR rejects it
        vectorize_columns(sch, j2, nr)
        vectorize_columns(sch, vec, nr)
    sch.decompose_reduction(block, reduce_from)
    apply_unroll(sch, cfg)
