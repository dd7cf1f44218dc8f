"""Schedule rules that change layouts, so a trace space can reach the programs the x86 knob templates are built on.
TVM's CPU rules never change a buffer's layout (``RewriteLayout`` only packs weights declared layout-free), and its
multi-level tiling vectorises the output's innermost axis whatever it is. Two rules run before the tiling, each offering
a block as it was and re-laid, for the search to decide:

- :class:`PackOperandPanels`: the operand the output's vectorised axis ``j`` walks is read from a per-call copy
  packed as ``[..., j // P, k..., j % P]``, so a register tile of ``P`` columns loads consecutive floats (the
  templates' ``pack_b``).
- :class:`VectorizeOutputChannels`: a block whose innermost output extent the tile does not divide (an NCHW
  convolution's 28 columns) but with an axis ``f`` that indexes a weight accumulates into an NCHW[P]c copy of the
  output, its weight packed as above, so the tiling vectorises the channels as the templates do.

``P`` is the ``vector`` rule set's innermost output tile, so one register tile reads one panel. Extents ``P`` does
not divide are left alone (a tail panel would need padding); every index a rule touches must be one block variable."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

__all__ = ["PackOperandPanels", "VectorizeOutputChannels"]

_REDUCE = 2  # IterVar.iter_type of a reduction (tvm.tirx.IterVar.CommReduce)


def _plain_indices(region: Any, variables: set[Any]) -> list[Any] | None:
    """A buffer region's indices if each is one of the block's variables, else None."""
    mins = [r.min for r in region.region]
    return mins if all(isinstance(m, tvm.tirx.Var) and m in variables for m in mins) else None


def _index_map(sch: tvm.s_tir.Schedule, block: Any, func: Callable[..., list[Any]], ndim: int) -> tvm.tirx.IndexMap:
    """``func`` over ``ndim`` indices as an IndexMap in ``block``'s index type (TVM infers neither from ``*ix``)."""
    return tvm.tirx.IndexMap.from_func(func, ndim=ndim, index_dtype=str(sch.get(block).iter_vars[0].var.ty))


def _panels(dj: int, reduce_dims: Sequence[int], ndim: int, panel: int) -> Callable[..., list[Any]]:
    """Index map ``[..., j, ..., k...] -> [rest..., j // P, k..., j % P]`` (rest and k in their order)."""
    rest = [d for d in range(ndim) if d != dj and d not in reduce_dims]

    def index_map(*ix: Any) -> list[Any]:
        return [*(ix[d] for d in rest), ix[dj] // panel, *(ix[d] for d in reduce_dims), ix[dj] % panel]

    return index_map


def _pack_read(sch: tvm.s_tir.Schedule, block: Any, index: int, dj: int, reduce_dims: list[int], panel: int) -> None:
    """Make ``block`` read its ``index``-th buffer from a per-call copy in panels; copy loops in the panels' order."""
    ndim = len(sch.get(block).reads[index].region)
    copy = sch.cache_read(block, index, "global")
    sch.transform_layout(copy, ("write", 0), _index_map(sch, copy, _panels(dj, reduce_dims, ndim, panel), ndim))
    loops = sch.get_loops(copy)  # one per dimension of the operand, in its order
    outer, inner = sch.split(loops[dj], [None, panel])
    rest = [loops[d] for d in range(ndim) if d != dj and d not in reduce_dims]
    sch.reorder(*rest, outer, *(loops[d] for d in reduce_dims), inner)


def _operand(block: Any, j: Any, panel_bits: int) -> tuple[int, int, list[int], int] | None:
    """(read index, dimension of ``j``, reduction dimensions, panel width) of a read to pack along ``j``, or None."""
    variables = {iv.var for iv in block.iter_vars}
    reduce = {iv.var for iv in block.iter_vars if int(iv.iter_type) == _REDUCE}
    for index, read in enumerate(block.reads):
        mins = _plain_indices(read, variables)
        if mins is None:
            continue
        dims_j = [d for d, m in enumerate(mins) if m.same_as(j)]
        reduce_dims = [d for d, m in enumerate(mins) if m in reduce]
        if len(dims_j) != 1 or not reduce_dims:
            continue
        dj = dims_j[0]
        panel = panel_bits // read.source.dtype.bits
        extent = int(read.source.shape[dj])
        already = dj == len(mins) - 1 and extent == panel
        if panel >= 1 and extent % panel == 0 and not already:
            return index, dj, reduce_dims, panel
    return None


def _gemm_like(block: Any) -> bool:
    """One write, at least one reduction variable, every output index one spatial variable."""
    reduce = {iv.var for iv in block.iter_vars if int(iv.iter_type) == _REDUCE}
    if not reduce or len(block.writes) != 1:
        return False
    out = _plain_indices(block.writes[0], {iv.var for iv in block.iter_vars})
    return out is not None and not any(m in reduce for m in out)


def _channels_last(ndim: int, dim: int, panel: int) -> Callable[..., list[Any]]:
    """``[..., f, ...] -> [..., f // P, ..., f % P]``."""

    def index_map(*ix: Any) -> list[Any]:
        return [*(ix[d] // panel if d == dim else ix[d] for d in range(ndim)), ix[dim] % panel]

    return index_map


def _channels_last_iters(iters: Sequence[Any], position: int, panel: int) -> Callable[..., list[Any]]:
    """The block's iterations, ``f`` (at ``position``) split: ``f // P`` in place, ``f % P`` the last spatial one."""
    spatial = [n for n, iv in enumerate(iters) if int(iv.iter_type) != _REDUCE]
    reduce = [n for n, iv in enumerate(iters) if int(iv.iter_type) == _REDUCE]

    def index_map(*ix: Any) -> list[Any]:
        head = [ix[n] // panel if n == position else ix[n] for n in spatial]
        return [*head, ix[position] % panel, *(ix[n] for n in reduce)]

    return index_map


class _LayoutRule(ms.schedule_rule.PyScheduleRule):
    """A rule that returns a block as it was and, where it applies, re-laid (``_relaid``)."""

    def __init__(self, panel_bits: int) -> None:
        super().__init__()
        if panel_bits < 1:
            raise ValueError(f"panel_bits must be positive, got {panel_bits}")
        self.panel_bits = panel_bits

    def _initialize_with_tune_context(self, context: ms.TuneContext) -> None:
        pass

    def apply(self, sch: tvm.s_tir.Schedule, block: tvm.s_tir.SBlockRV) -> list[tvm.s_tir.Schedule]:
        stmt = sch.get(block)
        if not _gemm_like(stmt):
            return [sch]
        try:
            relaid = self._relaid(sch, block, stmt)
        except tvm.s_tir.ScheduleError:
            # a primitive refused the re-layout (a block an earlier rule already factored, whose bindings are no
            # longer its loops): the rule does not apply there; the discarded copy was the only thing changed
            return [sch]
        return [sch] if relaid is None else [sch, relaid]

    def _relaid(self, sch: tvm.s_tir.Schedule, block: Any, stmt: Any) -> tvm.s_tir.Schedule | None:
        raise NotImplementedError


@derived_object
class PackOperandPanels(_LayoutRule):
    """Offer each GEMM-like block its vectorised operand packed into panels ``panel_bits`` wide (module doc)."""

    def clone(self) -> ms.ScheduleRule:  # the decorated class: ``type(self)`` is the bare one TVM cannot take
        return PackOperandPanels(self.panel_bits)

    def _relaid(self, sch: tvm.s_tir.Schedule, block: Any, stmt: Any) -> tvm.s_tir.Schedule | None:
        found = _operand(stmt, stmt.writes[0].region[-1].min, self.panel_bits)
        if found is None:
            return None
        packed = sch.copy()
        _pack_read(packed, block, *found)
        return packed


@derived_object
class VectorizeOutputChannels(_LayoutRule):
    """Offer a block whose output's innermost extent the tile does not divide its channels innermost (module doc)."""

    def clone(self) -> ms.ScheduleRule:
        return VectorizeOutputChannels(self.panel_bits)

    def _relaid(self, sch: tvm.s_tir.Schedule, block: Any, stmt: Any) -> tvm.s_tir.Schedule | None:
        out = stmt.writes[0]
        tile = self.panel_bits // out.source.dtype.bits
        if tile < 1 or int(out.source.shape[-1]) % tile == 0:
            return None  # the innermost axis takes whole tiles: the vector rules vectorise it as it is
        iters = list(stmt.iter_vars)
        for df, f in enumerate(r.min for r in out.region[:-1]):
            found = _operand(stmt, f, self.panel_bits)
            if found is None or int(out.source.shape[df]) % found[3]:
                continue
            panel = found[3]
            relaid = sch.copy()
            _pack_read(relaid, block, *found)
            position = next(n for n, iv in enumerate(iters) if iv.var.same_as(f))
            relaid.transform_block_layout(
                block, _index_map(relaid, block, _channels_last_iters(iters, position, panel), len(iters))
            )
            relaid.cache_write(block, 0, "global")  # the output keeps its layout; the block writes the blocked copy
            ndim = len(out.region)
            blocked = _index_map(relaid, block, _channels_last(ndim, df, panel), ndim)
            relaid.transform_layout(block, ("write", 0), blocked)
            return relaid
        return None
