"""What the benchmarks share: CSV output, and the load the machine was under while a run timed things."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable

__all__ = ["load_now", "load_sentence", "write_csv"]


def write_csv(path: str, rows: Iterable[dict]) -> None:
    """Rows of dicts to CSV; the header is every key seen, in first-seen order."""
    rows = list(rows)
    if not rows:
        return
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def load_now() -> list[float]:
    """The 1-, 5- and 15-minute load averages, recorded as ``load_before`` / ``load_after`` in a run's meta."""
    return list(os.getloadavg())


def load_sentence(meta: dict, cores: int | None = None) -> str:
    """The summary's sentence on what else ran: the 1-minute load average before and after the run."""
    if "load_before" not in meta or "load_after" not in meta:
        return "The load on the machine during this run was not recorded."
    on = f"{cores} cores; " if cores else ""
    return (
        f"1-minute load average {meta['load_before'][0]:.2f} before the run and {meta['load_after'][0]:.2f} after it"
        f" ({on}above the core count, other work shared the machine)."
    )
