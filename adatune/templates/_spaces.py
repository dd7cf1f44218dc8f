"""Which search space a template offers: its hardware-derived default, or AutoTVM's unpruned one.

``space="full"`` keeps only configs that fit the target's registers, caches and cores, where every search method
finds the same plan; ``space="autotvm"`` keeps every factorisation and combination, as AutoTVM's templates define
them: the spaces on which methods differ. The name is a template argument, so their records never mix.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import te

from ..task import get_config

__all__ = ["SPACES", "choose_space", "start_schedule"]

SPACES = ("full", "autotvm")


def choose_space(cfg: Any, space: str, choices: tuple[str, ...] = SPACES) -> None:
    """Check ``space`` and switch the config's pruning off for ``"autotvm"`` (before any knob is defined)."""
    if space not in choices:
        raise ValueError(f"space must be one of {choices}, got {space!r}")
    cfg.prune(space != "autotvm")


def start_schedule(tensors: list[te.Tensor], flop: float, space: str, choices: tuple[str, ...] = SPACES) -> tuple:
    """What every template does first: a schedule of the tensors' PrimFunc, and the config (the space being
    collected, or the config being applied) with its FLOP count and the chosen space."""
    sch = tvm.s_tir.Schedule(te.create_prim_func(tensors))
    cfg = get_config()
    choose_space(cfg, space, choices)
    cfg.add_flop(flop)
    return sch, cfg
