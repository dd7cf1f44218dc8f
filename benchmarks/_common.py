"""What the benchmarks share: CSV output."""

from __future__ import annotations

import csv
from collections.abc import Iterable

__all__ = ["write_csv"]


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
