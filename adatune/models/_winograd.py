"""Winograd convolutions in a whole model: each eligible 3x3 stride-1 NCHW convolution (``winograd_eligible``) legalised
as ``adatune.templates.conv2d_winograd`` with its constant kernel transformed once, at import (``FoldConstant`` computes
``G g G^T``). The tile ``m`` follows the map's size (``winograd_tile``): the transformed kernel is ``(m+2)^2 / 9`` times
larger and streamed once per call for ever fewer tiles, so small maps take ``m = 2``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tvm
from tvm import relax

from ..templates.conv2d_winograd import BLOCK, WINOGRAD_TILES, conv2d_winograd, winograd_weight_transform

__all__ = [
    "WINOGRAD_MIN_PIXELS",
    "WINOGRAD_TILE_BY_MAP",
    "TileByMap",
    "describe_tiles",
    "legalize_winograd",
    "winograd_eligible",
    "winograd_tile",
    "winograd_tiles",
]

#: (smallest output map in pixels, output tile m) pairs, largest maps first: which convolutions run as Winograd
#: and with which tile (a map below the last entry's size stays direct)
TileByMap = tuple[tuple[int, int], ...]

#: the default: F(4x4, 3x3) (4x fewer multiplies than direct, 6x6 input tiles) from ResNet's 14x14 maps up; F(2x2, 3x3)
#: (2.25x fewer, a kernel 16/9 the original's size, not 4x) on maps from 7x7
WINOGRAD_TILE_BY_MAP: TileByMap = ((196, 4), (49, 2))
#: smallest output map (pixels) legalised to Winograd by default: ResNet's 7x7 maps and larger
WINOGRAD_MIN_PIXELS = WINOGRAD_TILE_BY_MAP[-1][0]


def winograd_tiles(spec: bool | Sequence[Sequence[int]]) -> TileByMap | None:
    """A model's ``winograd`` option as a table: False -> None (no Winograd), True -> ``WINOGRAD_TILE_BY_MAP``, or the
    user's own (smallest map in pixels, m) pairs, checked (``((1, m),)`` pins one tile everywhere)."""
    if isinstance(spec, bool):
        return WINOGRAD_TILE_BY_MAP if spec else None
    try:
        table = tuple((int(pixels), int(m)) for pixels, m in spec)
    except (TypeError, ValueError):
        table = ()
    if not table or any(p < 1 or m not in WINOGRAD_TILES for p, m in table) or list(table) != sorted(table)[::-1]:
        raise ValueError(
            f"winograd takes True, False or (smallest map in pixels >= 1, m in {WINOGRAD_TILES}) pairs, largest "
            f"maps first, got {spec!r}"
        )
    return table


def describe_tiles(tiles: TileByMap = WINOGRAD_TILE_BY_MAP) -> str:
    """The table in words, for help texts and summaries (one source, so they cannot drift from it)."""
    return ", ".join(f"F({m}x{m}, 3x3) on maps of >= {pixels} pixels" for pixels, m in tiles)


def winograd_tile(pixels: int, tiles: TileByMap = WINOGRAD_TILE_BY_MAP) -> int | None:
    """The output tile ``m`` for a convolution whose output map has ``pixels`` pixels; None: stays direct."""
    return next((m for smallest, m in tiles if pixels >= smallest), None)


def winograd_eligible(call: relax.Call, min_pixels: int = WINOGRAD_MIN_PIXELS) -> str | None:
    """None when ``call`` (a ``relax.nn.conv2d``) can run as Winograd; otherwise why not."""
    attrs = call.attrs
    if (str(attrs.data_layout), str(attrs.kernel_layout), str(attrs.out_layout)) != ("NCHW", "OIHW", "NCHW"):
        return "not NCHW/OIHW"
    if int(attrs.groups) != 1 or any(int(d) != 1 for d in attrs.dilation) or any(int(s) != 1 for s in attrs.strides):
        return "grouped, dilated or strided"
    if not isinstance(call.args[1], tvm.ir.expr.Constant):
        return "kernel is not a constant"
    data_ty, kernel_ty, out_ty = call.args[0].ty, call.args[1].ty, call.ty
    dims: list[list[Any]] = []
    for ty in (data_ty, kernel_ty, out_ty):
        values = getattr(getattr(ty, "shape", None), "values", None)
        if values is None:
            return "shape not static"
        dims.append(list(values))
    if not all(isinstance(d, tvm.tirx.IntImm) for ds in dims for d in ds):
        return "shape not static"
    kernel, out = [int(d) for d in dims[1]], [int(d) for d in dims[2]]
    if kernel[2:] != [3, 3]:
        return "kernel is not 3x3"
    if len({int(p) for p in attrs.padding}) != 1:
        return "padding differs between sides"
    if out[2] * out[3] < min_pixels:
        return f"output map {out[2]}x{out[3]} below {min_pixels} pixels"
    if str(data_ty.dtype) != "float32" or (str(attrs.out_dtype) not in ("", "float32")):
        return "not float32"
    return None


def _pixels(call: relax.Call) -> int:
    """Pixels of a (static) convolution's output map."""
    return int(call.ty.shape.values[2]) * int(call.ty.shape.values[3])


def _legalize(tiles: TileByMap) -> Any:
    def legalize(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        # an eligible call has a static output map of at least the table's smallest size, so it has a tile
        if winograd_eligible(call, tiles[-1][0]) is not None or (m := winograd_tile(_pixels(call), tiles)) is None:
            return tvm.ir.Op.get("relax.nn.conv2d").get_attr("FLegalize")(bb, call)
        pad = int(call.attrs.padding[0])
        weight = bb.emit(
            bb.call_te(lambda k: winograd_weight_transform(k, m), call.args[1], primfunc_name_hint="winograd_weight")
        )
        return bb.call_te(lambda d, u: conv2d_winograd(d, u, pad, m), call.args[0], weight, primfunc_name_hint=BLOCK)

    return legalize


def legalize_winograd(mod: tvm.IRModule, tiles: TileByMap = WINOGRAD_TILE_BY_MAP) -> tvm.IRModule:
    """``mod`` (un-legalised Relax, NCHW) legalised, its eligible convolutions as Winograd (tile by ``tiles``)."""
    return relax.transform.LegalizeOps(customize_legalize_map={"relax.nn.conv2d": _legalize(tiles)})(mod)
