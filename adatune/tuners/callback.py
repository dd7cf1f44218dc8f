"""Callbacks for ``Tuner.tune``: plain functions ``f(tuner, inputs, results)`` called after every batch."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import IO, Any

from tqdm.auto import tqdm

from ..measure import MeasureInput, MeasureResult
from ..records import CONFIRM, save_to_file
from ._base import Callback, Tuner

__all__ = ["Callback", "log_to_file", "progress_bar"]


def log_to_file(file_out: str | os.PathLike | IO[str]) -> Callback:
    """Append each measured candidate to a JSON-lines log (a path, or an open text file), flushed per batch so
    a killed run loses nothing that was measured."""

    def _log(tuner: Any, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        save_to_file(file_out, zip(inputs, results))

    return _log


def progress_bar(total: int, prefix: str = "", si_prefix: str = "G") -> Callback:
    """A tqdm bar showing trials, current and best throughput, and elapsed time."""
    scale = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[si_prefix]
    state: dict = {}

    def _bar(tuner: Tuner, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        if any(CONFIRM in r.extra for r in results):  # ``Tuner.confirm``'s re-timings are not trials
            return
        if "bar" not in state or state.get("tuner") is not tuner:
            state["tuner"] = tuner
            state["bar"] = tqdm(total=total, desc=prefix or tuner.task.name, unit="trial", dynamic_ncols=True)
        bar = state["bar"]
        cur = max((r.flops(tuner.task.flop) for r in results), default=0.0)
        bar.set_postfix_str(f"cur {cur / scale:.1f} / best {tuner.best_flops / scale:.1f} {si_prefix}FLOPS")
        bar.update(len(results))
        if bar.n >= total:
            bar.close()

    return _bar
