"""What the benchmarks share: JSON and CSV output, sweep logs plain or gzipped, geometric means with their
interval, the load the machine was under while a run timed things, and the latency-over-T figure."""

from __future__ import annotations

import csv
import gzip
import json
import math
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Any, cast

import tvm
from scipy import stats

from adatune.records import Record, load_from_buffer
from adatune.target import tvm_main_thread

__all__ = [
    "command_line",
    "evaluator_timer",
    "geomean",
    "geomean_interval",
    "load_now",
    "load_records",
    "load_sentence",
    "mean_call_timer",
    "open_text",
    "plot_latency_over_t",
    "pyplot",
    "run_meta",
    "save_figure",
    "settled",
    "sweep_log",
    "sweep_stem",
    "write_csv",
    "write_json",
    "write_summary",
]


def open_text(path: str, mode: str = "r") -> IO[str]:
    """A text file, through gzip when its name ends in ``.gz`` (sweep logs are committed compressed)."""
    if path.endswith(".gz"):
        return cast(IO[str], gzip.open(path, mode + "t", encoding="utf-8"))
    return open(path, mode, encoding="utf-8")


def load_records(path: str) -> Iterator[Record]:
    """The records of a tuning log or sweep, ``.jsonl`` or ``.jsonl.gz``."""
    with open_text(path) as f:
        yield from load_from_buffer(f, name=path)


def sweep_log(directory: str, workload: str) -> str:
    """A workload's sweep log in ``directory``: ``.jsonl.gz`` where that exists, else ``.jsonl`` (perhaps new)."""
    plain = os.path.join(directory, f"{workload}.jsonl")
    return plain + ".gz" if os.path.exists(plain + ".gz") else plain


def sweep_stem(path: str) -> str:
    """A sweep log's path without ``.jsonl`` or ``.jsonl.gz``: its name, and where its side files go."""
    return path.removesuffix(".gz").removesuffix(".jsonl")


def write_json(path: str, data: Any, indent: int | None = 1, default: Any = None) -> None:
    """``data`` as JSON at ``path`` (``default``: how to write what json cannot, e.g. ``str``)."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=indent, default=default)


def geomean(xs: Iterable[float]) -> float:
    """The geometric mean (nan for no values)."""
    logs = [math.log(x) for x in xs]
    return math.exp(statistics.fmean(logs)) if logs else math.nan


def geomean_interval(ratios: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Geometric mean of ``ratios`` (one per seed, run or round) and its Student-t interval on the logs, which is
    honest for the few seeds a benchmark runs where a bootstrap is not; one ratio gives no interval (nan bounds)."""
    if not ratios or min(ratios) <= 0:
        raise ValueError(f"ratios must be positive and non-empty, got {list(ratios)}")
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan
    half = float(stats.t.ppf(0.5 + level / 2, len(logs) - 1)) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


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


def command_line(prog: str, argv: Sequence[str] | None) -> str:
    """The command that reproduces a run of ``python -m prog`` (``argv``: its arguments, or this process's)."""
    return f"python -m {prog} " + shlex.join(sys.argv[1:] if argv is None else argv)


def run_meta(prog: str, argv: list[str] | None, started: str, t0: float, load_before: list[float]) -> dict:
    """The fields a benchmark's results.json starts with: the command that reproduces it, when it started,
    how long it has run (``t0`` from ``time.perf_counter``) and the load before and now."""
    return {
        "command": command_line(prog, argv),
        "started": started,
        "wall_s": time.perf_counter() - t0,
        "load_before": load_before,
        "load_after": load_now(),
    }


def settled(seconds: float, pause_s: float = 0.25) -> float:
    """Return ``seconds`` after a pause: an engine's worker threads (onnxruntime's intra-op pool, PyTorch's OpenMP,
    OpenBLAS) spin for a while after a run, and the engine timed next must not share the cores with them."""
    time.sleep(pause_s)
    return seconds


def _calls_filling(fn: Callable[[], Any], min_ms: float) -> int:
    """Calls of ``fn`` that take at least ``min_ms`` (after a warm-up)."""
    settled(0.0)  # the previous engine's spinning worker threads would slow the calls measured here
    for _ in range(3):
        fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-7)
    return max(1, math.ceil(min_ms / 1e3 / once))


def mean_call_timer(fn: Callable[[], Any], min_ms: float) -> Callable[[], float]:
    """A timer returning the mean seconds of a batch of PyTorch calls ``fn`` filling at least ``min_ms``, then pausing:
    TVM's and PyTorch's worker threads spin after a call, and on few cores the engine timed next waits for them."""
    number = _calls_filling(fn, min_ms)

    def timer() -> float:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        return settled((time.perf_counter() - t0) / number)

    return timer


def evaluator_timer(lib: Any, args: Sequence[Any], min_ms: float) -> Callable[[], float]:
    """A timer of ``lib["main"](*args)`` by TVM's ``time_evaluator`` (the mean of calls filling ``min_ms``, looped in
    C++, so no Python call per run counts against TVM), warmed up once, run with the caller off TVM's worker CPUs."""
    evaluator = lib.time_evaluator("main", tvm.cpu(), number=1, repeat=1, min_repeat_ms=int(math.ceil(min_ms)))
    settled(0.0)
    evaluator(*args)  # warm-up

    def timer() -> float:
        with tvm_main_thread():
            return settled(float(evaluator(*args).mean))

    return timer


def write_summary(out_dir: str, lines: list[str], echo: bool = False) -> None:
    """A benchmark's ``summary.md`` in ``out_dir``: its markdown lines, newline-terminated (printed with ``echo``)."""
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out_dir, "summary.md"), "w", encoding="utf-8") as f:
        f.write(text)
    if echo:
        print(text, end="")


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend: benchmarks run headless."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, out_dir: str, name: str, dpi: int = 110) -> str:
    """Lay out ``fig``, write it as ``out_dir/name`` and close it (a benchmark draws many): the path written."""
    fig.tight_layout()
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path


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
