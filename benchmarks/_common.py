"""What the benchmarks share: CSV output, the load the machine was under while a run timed things, and the
latency-over-T figure."""

from __future__ import annotations

import csv
import os
import shlex
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["load_now", "load_sentence", "plot_latency_over_t", "run_meta", "settled", "write_csv"]


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


def run_meta(prog: str, argv: list[str] | None, started: str, t0: float, load_before: list[float]) -> dict:
    """The fields a benchmark's results.json starts with: the command that reproduces it, when it started,
    how long it has run (``t0`` from ``time.perf_counter``) and the load before and now."""
    return {
        "command": f"python -m {prog} " + shlex.join(sys.argv[1:] if argv is None else argv),
        "started": started,
        "wall_s": time.perf_counter() - t0,
        "load_before": load_before,
        "load_after": load_now(),
    }


def settled(seconds: float, pause_s: float = 0.25) -> float:
    """Return ``seconds`` after a pause: an engine's worker threads (onnxruntime's intra-op pool, PyTorch's
    OpenMP, OpenBLAS) spin for a while after a run, and the engine timed next must not share the cores with
    them (numpy's BLAS threads did that to TVM kernels in benchmarks.dietcode: 0.07 -> 4 ms)."""
    time.sleep(pause_s)
    return seconds


def write_summary(out_dir: str, lines: list[str], echo: bool = False) -> None:
    """A benchmark's ``summary.md`` in ``out_dir``: its markdown lines, newline-terminated (printed too with
    ``echo``)."""
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out_dir, "summary.md"), "w", encoding="utf-8") as f:
        f.write(text)
    if echo:
        print(text, end="")


def plot_latency_over_t(ax: Any, rows: Sequence[dict], arms: Iterable[str], xlabel: str) -> None:
    """One line per arm of its latency (``{arm}_s`` of each row, seconds) against the row's ``T``, in ms on a log
    axis: the figure every per-T benchmark draws (a single point as a marker)."""
    for arm in arms:
        have = [r for r in rows if f"{arm}_s" in r]
        if have:
            ax.plot(
                [r["T"] for r in have], [r[f"{arm}_s"] * 1e3 for r in have], "o-" if len(have) > 1 else "s", label=arm
            )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("latency (ms)")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
