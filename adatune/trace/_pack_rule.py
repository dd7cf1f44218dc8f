"""A schedule rule that offers a GEMM-like block its vectorised operand packed into contiguous panels.

The x86 knob templates read the operand that the output's innermost (vectorised) axis walks, ``B[j, k]`` of a
batch matmul in NT layout or ``B[k, j]`` of a dense layer, from a copy packed as ``[j // P, k, j % P]``: for each
``k`` step a register tile of ``P`` columns loads ``P`` consecutive floats, and a tile's whole panel is one
contiguous stretch of memory. TVM's CPU rules never change a buffer's layout (``RewriteLayout`` does, but only for
weights declared layout-free and packed outside the function), so a trace space built from them reads ``B[j, k]``
with a stride of ``K`` along the vector, one cache line per lane, and cannot reach the templates' programs.

:class:`PackOperandPanels` runs before multi-level tiling. For a block with one reduction-carrying write whose
innermost output index is a spatial variable ``j``, it looks for a read buffer indexed by ``j`` in one dimension
and by exactly one reduction variable ``k`` in another (every index a plain block variable) and returns two design
spaces: the block as it was, and the block reading a per-call copy of that buffer in ``[..., j // P, k, j % P]``
layout (``cache_read`` + ``transform_layout``; its copy loop is ordered by the packed layout so the writes are
contiguous and vectorise). Which of the two is faster is the search's decision, as every other choice of the space.
``P`` is the innermost output tile of the ``vector`` rule set, so one tile reads exactly one panel.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

__all__ = ["PackOperandPanels"]

_REDUCE = 2  # IterVar.iter_type of a reduction (tvm.tirx.IterVar.CommReduce)


def _packable_read(block: Any, panel_bits: int) -> tuple[int, int, int, int] | None:
    """(read index, dimension of j, dimension of k, panel width in elements) of the operand to pack, or None."""
    variables = {iv.var for iv in block.iter_vars}
    reduce = {iv.var for iv in block.iter_vars if int(iv.iter_type) == _REDUCE}
    if not reduce or len(block.writes) != 1:
        return None
    j = block.writes[0].region[-1].min
    if not isinstance(j, tvm.tirx.Var) or j not in variables or j in reduce:
        return None
    for index, read in enumerate(block.reads):
        mins = [r.min for r in read.region]
        if not all(isinstance(m, tvm.tirx.Var) and m in variables for m in mins):
            continue
        dims_j = [d for d, m in enumerate(mins) if m.same_as(j)]
        dims_k = [d for d, m in enumerate(mins) if m in reduce]
        if len(dims_j) != 1 or len(dims_k) != 1:
            continue
        dj, dk = dims_j[0], dims_k[0]
        panel = panel_bits // read.source.dtype.bits
        extent = int(read.source.shape[dj])
        already = dj == len(mins) - 1 and dk == len(mins) - 2 and extent == panel
        if panel < 1 or extent % panel or already:
            continue  # a tail panel would need padding: left to the unpacked design space
        return index, dj, dk, panel
    return None


@derived_object
class PackOperandPanels(ms.schedule_rule.PyScheduleRule):
    """Offer each GEMM-like block its vectorised operand packed into panels ``panel_bits`` wide (module doc)."""

    def __init__(self, panel_bits: int) -> None:
        super().__init__()
        if panel_bits < 1:
            raise ValueError(f"panel_bits must be positive, got {panel_bits}")
        self.panel_bits = panel_bits

    def _initialize_with_tune_context(self, context: ms.TuneContext) -> None:
        pass

    def clone(self) -> PackOperandPanels:
        return PackOperandPanels(self.panel_bits)

    def apply(self, sch: tvm.s_tir.Schedule, block: tvm.s_tir.SBlockRV) -> list[tvm.s_tir.Schedule]:
        found = _packable_read(sch.get(block), self.panel_bits)
        if found is None:
            return [sch]
        index, dj, dk, panel = found
        ndim = len(sch.get(block).reads[index].region)
        others = [d for d in range(ndim) if d not in (dj, dk)]

        def panels(*ix: Any) -> list[Any]:
            return [*(ix[d] for d in others), ix[dj] // panel, ix[dk], ix[dj] % panel]

        packed = sch.copy()
        copy = packed.cache_read(block, index, "global")
        packed.transform_layout(copy, ("write", 0), panels)
        loops = packed.get_loops(copy)  # one per dimension of the operand, in its order
        outer, inner = packed.split(loops[dj], [None, panel])
        packed.reorder(*(loops[d] for d in others), outer, loops[dk], inner)
        return [sch, packed]
