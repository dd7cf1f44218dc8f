"""What the method benchmarks share: their common command-line flags, loading a recorded sweep for the
replay runner, and CSV output."""

from __future__ import annotations

import argparse
import csv
import platform
from collections.abc import Iterable
from dataclasses import dataclass

import adatune
from adatune.measure import MeasureResult, ReplayRunner
from adatune.records import group_by_workload, load_from_file

__all__ = ["write_csv", "add_common_args", "ReplaySweep", "load_sweeps", "cpu_name"]


def add_common_args(p: argparse.ArgumentParser, out: str) -> None:
    """Runner, replay and output flags every method benchmark takes (``out``: default output folder)."""
    p.add_argument("--timeout", type=float, default=10.0, help="runner timeout per candidate (s)")
    p.add_argument("--n-parallel", type=int, default=2, help="build processes")
    p.add_argument(
        "--replay-logs",
        nargs="*",
        default=["benchmarks/data/*.jsonl"],
        help="recorded sweep logs (globs) for the comparison in trials",
    )
    p.add_argument("--replay-seeds", type=int, default=15)
    p.add_argument("--replay-trials", type=int, default=512)
    p.add_argument("--no-hardware", action="store_true", help="only the replay comparison")
    p.add_argument("--no-replay", action="store_true")
    p.add_argument("--out", default=out)
    p.add_argument("-v", "--verbose", action="store_true")


@dataclass
class ReplaySweep:
    """One workload of a recorded sweep, ready for ``ReplayRunner``."""

    task: adatune.task.Task
    table: dict[tuple[str, int], MeasureResult]
    optimum_gflops: float
    max_trials: int


def load_sweeps(log_path: str, replay_trials: int) -> list[ReplaySweep]:
    """Every workload in a sweep log, with its replay table, best recorded GFLOPS and trial cap."""
    out = []
    for recs in group_by_workload(load_from_file(log_path)).values():
        task = recs[0].create_task()
        optimum = max((r.result.flops(task.flop) for r in recs), default=0.0) / 1e9
        out.append(
            ReplaySweep(
                task, ReplayRunner.from_records(recs).table, optimum, min(replay_trials, len(task.config_space))
            )
        )
    return out


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


def cpu_name() -> str:
    """The CPU's marketing name, for the benchmark summaries."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
