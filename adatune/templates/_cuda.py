"""CUDA building blocks shared by the GPU templates (AutoTVM's direct CUDA schedules on TIR):
per-block limits as config filters, cooperative shared-memory fetch, and unroll pragmas.

The limits are checked on the knobs so that every config a tuner samples compiles and launches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "MAX_THREADS",
    "SHARED_BYTES",
    "MAX_ACCUMULATORS",
    "MIN_THREADS",
    "define_unroll",
    "apply_unroll",
    "cooperative_fetch",
]

MAX_THREADS = 1024  # threads per block on every CUDA architecture since sm_20
SHARED_BYTES = 48 * 1024  # static shared memory per block without opt-in
MIN_THREADS = 32  # one warp: fewer threads leave most of each SM's lanes idle
MAX_ACCUMULATORS = 64  # per-thread accumulators: beyond this nvcc spills registers to local memory


def define_unroll(cfg: Any) -> None:
    """AutoTVM's CUDA unroll knobs."""
    cfg.define_knob("auto_unroll_max_step", [0, 512, 1500])
    cfg.define_knob("unroll_explicit", [0, 1])


def apply_unroll(sch: Any, cfg: Any) -> None:
    root = sch.get_sblock("root")
    sch.annotate(root, "pragma_auto_unroll_max_step", cfg["auto_unroll_max_step"].val)
    sch.annotate(root, "pragma_unroll_explicit", cfg["unroll_explicit"].val)


def cooperative_fetch(sch: Any, block: Any, at: Any, threads: Sequence[int]) -> None:
    """Spread a shared-memory copy, already ``compute_at(block, at)``, over the block's threads: fuse
    its copy loops (those under ``at``) and split them over ``threadIdx.{z,y,x}`` (``threads`` in
    that order). A one-element copy gets a unit loop so that it is still bound to the threads."""
    at_sref = sch.get_sref(at)
    loops = list(sch.get_loops(block))
    pos = next(i for i, loop in enumerate(loops) if sch.get_sref(loop).same_as(at_sref))
    copy = loops[pos + 1 :]
    fused = sch.fuse(*copy) if len(copy) > 1 else copy[0] if copy else sch.add_unit_loop(block)
    tags = [f"threadIdx.{a}" for a in "zyx"[-len(threads) :]]
    parts = sch.split(fused, [None, *threads])
    for loop, tag in zip(parts[1:], tags):
        sch.bind(loop, tag)
