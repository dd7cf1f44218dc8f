"""The noise gate every timing benchmark runs: a fixed probe kernel timed before and after the study.

Each study records, before and after its measurements, the load average, the CPU model and ISA, and two probes timed in
turns. The gate passes when each probe's robust CV (``robust_cv``: an occasional preempted repeat does not inflate it,
as the median costs the studies rank by ignore such repeats too) stays under ``CV_LIMIT`` at every reading and its
median moved by less than ``DRIFT_LIMIT`` from the first reading to any other; the plain CV is recorded beside it.

- ``probe_timer``: a GEMM at the cores' peak FMA rate, where a naive matmul far below peak would stay flat.
- ``memory_probe_timer``: 256 MiB streamed through every core, for a neighbour on the memory bus or L3.
- ``core_probe_seconds`` (recorded, not gated): a one-thread matmul pinned to each CPU in turn: it tells a slowed vCPU
  (per-CPU times differ) from vCPUs slowing each other (per-CPU times unchanged while the multi-thread probe slows).

Both multi-thread probes run under ``adatune.target.tvm_main_thread``: with the calling thread on a TVM worker's CPU the
compute probe reads slow in every call. A study whose gate failed reports its numbers but claims no speedup from them.

``interleaved`` times several kernels round-robin (one repeat of each per round), so slow drift of the machine lands on
all of them alike: a ratio between kernels is only meaningful when taken that way.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "CV_LIMIT",
    "DRIFT_LIMIT",
    "NoiseGate",
    "ProbeReading",
    "interleaved",
    "PROBE_GEMM",
    "memory_probe_timer",
    "drift_passes",
    "core_probe_seconds",
    "probe_timer",
    "robust_cv",
]

#: the probe's repeat-to-repeat CV above which a run is too noisy to claim a speedup from
CV_LIMIT = 0.03
#: the largest move of the probe's median between the start and the end of a run
DRIFT_LIMIT = 0.05
#: untimed rounds of both probes before a gate's first reading (after one warm-up call it reads far noisier)
WARM_UP = 10

Timer = Callable[[], float]


PROBE_GEMM = (64, 256, 512)  # rows, K, columns: operands in L2, so the probe reads the FMA units


def probe_timer(number: int = 20, place_caller: bool = True) -> Timer:
    """Mean seconds per run over ``number`` runs of a 64x256x512 float32 GEMM (``dense.x86``, this host, every core) in
    its largest register tile: it runs at peak FMA rate, so a host state slowing peak-rate kernels moves it."""
    import tvm

    import adatune
    import adatune.templates  # noqa: F401 - registers dense.x86

    adatune.target.size_tvm_thread_pool()
    task = adatune.task.create("dense.x86", (*PROBE_GEMM, "float32"), adatune.target.host())
    if not isinstance(task, adatune.task.Task):
        raise TypeError(f"the probe needs dense.x86's knob template, got a {type(task).__name__}")
    space = task.config_space

    def tile(i: int) -> tuple:
        c = space.get(i)
        y, x = c["tile_y"].size, c["tile_x"].size
        return (y[2] * x[2], c["pack_b"].val == "global", c["auto_unroll_max_step"].val == 0, y[1] * x[1], -i)

    config = space.get(max((int(i) for i in space.valid_indices()), key=tile))
    lib = tvm.tirx.build(task.scheduled_module(config), task.target)
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    args = [tvm.runtime.tensor(rng.uniform(-1, 1, s.shape).astype(s.dtype), dev) for s in task.arg_specs]
    timer = lib.time_evaluator("main", dev, number=number, repeat=1)
    placement = adatune.target.tvm_main_thread if place_caller else contextlib.nullcontext

    def call() -> float:
        with placement():
            return float(timer(*args).results[0])

    return call


def memory_probe_timer(mib: int = 256, number: int = 2) -> Timer:
    """One call: seconds per run of ``B = 2 A + 1`` over ``mib`` MiB of float32 (TVM, every core, vectorised),
    averaged over ``number`` runs; large enough not to run from cache, so it reads what memory bandwidth is left."""
    import tvm
    from tvm import te

    import adatune

    adatune.target.size_tvm_thread_pool()
    n = mib * 2**20 // 4
    a = te.placeholder((n,), "float32", name="A")
    b = te.compute((n,), lambda i: a[i] * 2.0 + 1.0, name="B")
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, b]))
    (i,) = sch.get_loops(sch.get_sblock("B"))
    io, ii, iv = sch.split(i, [None, 256, 16])
    sch.parallel(io)
    sch.vectorize(iv)
    lib = tvm.tirx.build(sch.mod, adatune.target.host())
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(np.ones(n, "float32"), dev), tvm.runtime.tensor(np.zeros(n, "float32"), dev)]
    timer = lib.time_evaluator(lib.entry_name, dev, number=number, repeat=1)

    def call() -> float:
        with adatune.target.tvm_main_thread():
            return float(timer(*args).results[0])

    return call


def core_probe_seconds(repeats: int = 7, size: int = 256, calls: int = 8) -> list[float]:
    """Median seconds of ``calls`` one-thread ``size``^2 float32 matmuls (numpy's BLAS) on each CPU this process
    may run on, pinned to it in turn (CPU order); the calling thread's affinity is restored after."""
    from adatune.target import one_blas_thread

    allowed = sorted(os.sched_getaffinity(0))
    a = np.random.default_rng(0).uniform(-1, 1, (size, size)).astype("float32")
    out = []
    try:
        with one_blas_thread():
            for cpu in allowed:
                os.sched_setaffinity(0, {cpu})  # pid 0: the calling thread
                a @ a  # first call on this CPU: caches, clock
                runs = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    for _ in range(calls):
                        a @ a
                    runs.append(time.perf_counter() - t0)
                out.append(statistics.median(runs))
    finally:
        os.sched_setaffinity(0, allowed)
    return out


def _furthest(medians: list[float]) -> float:
    """The ratio to the first median that is furthest from 1 (1.0 for fewer than two)."""
    return max((m / medians[0] for m in medians[1:]), key=lambda r: abs(r - 1.0), default=1.0)


def drift_passes(readings: list[dict], limit: float = DRIFT_LIMIT) -> bool:
    """Re-check stored readings (``NoiseGate.to_json()["readings"]``) by the furthest-reading drift rule, for
    sessions recorded while the rule compared only the last reading with the first."""
    meds = [float(r["median"]) for r in readings]
    mem = [float(r["memory_median"]) for r in readings if r.get("memory_median") is not None]
    return abs(_furthest(meds) - 1.0) <= limit and abs(_furthest(mem) - 1.0) <= limit


def robust_cv(seconds: list[float]) -> float:
    """1.4826 x MAD / median: equals the CV for normal noise, unmoved by a few preempted repeats."""
    x = np.asarray(seconds, dtype=np.float64)
    med = float(np.median(x))
    return float(1.4826 * np.median(np.abs(x - med)) / med)


def interleaved(timers: Mapping[str, Timer], rounds: int) -> dict[str, list[float]]:
    """Each timer called once per round, round-robin, the order reversed every other round."""
    names = list(timers)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            out[name].append(timers[name]())
    return out


@dataclass
class ProbeReading:
    """One probe session: when, the load average (1, 5, 15 min) and the probe's per-repeat seconds."""

    label: str
    at: float
    load: list[float]
    seconds: list[float]
    memory_seconds: list[float] = field(default_factory=list)  # the memory probe's (absent in older records)
    core_seconds: list[float] = field(default_factory=list)  # ``core_probe_seconds``, per CPU (recorded, not gated)

    @property
    def core_spread(self) -> float | None:
        """The slowest CPU's probe over the fastest's (None without per-core readings)."""
        return max(self.core_seconds) / min(self.core_seconds) if self.core_seconds else None

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def cv(self) -> float:
        """Repeat-to-repeat coefficient of variation (population std over mean)."""
        return float(np.std(self.seconds) / np.mean(self.seconds))

    @property
    def robust_cv(self) -> float:
        """1.4826 x MAD / median: equals the CV for normal noise, unmoved by a few preempted repeats."""
        return robust_cv(self.seconds)

    @property
    def memory_median(self) -> float | None:
        return statistics.median(self.memory_seconds) if self.memory_seconds else None

    @property
    def memory_robust_cv(self) -> float | None:
        return robust_cv(self.memory_seconds) if self.memory_seconds else None


@dataclass
class NoiseGate:
    """Probe readings of one study and its verdict; ``probe(label)`` before and after the measurements."""

    repeats: int = 30
    cv_limit: float = CV_LIMIT
    drift_limit: float = DRIFT_LIMIT
    readings: list[ProbeReading] = field(default_factory=list)
    _timer: Timer | None = field(default=None, repr=False)
    _memory_timer: Timer | None = field(default=None, repr=False)

    @property
    def compute_timer(self) -> Timer:
        """The compute probe this gate times (built by its first reading, or here), for a study that also reads
        it between its own measurements (``host_state``) without building the kernel again."""
        if self._timer is None:
            self._timer = probe_timer()
        return self._timer

    def probe(self, label: str) -> ProbeReading:
        timer, memory_timer = self.compute_timer, self._memory_timer
        if memory_timer is None:  # the first reading: build what is not built yet, then warm both up
            memory_timer = self._memory_timer = memory_probe_timer()
            for _ in range(WARM_UP):  # first calls pay page faults, thread start-up and clock ramp-up
                timer()
                memory_timer()
        secs, mem = [], []
        for _ in range(self.repeats):  # the two probes in turns, so both see the same moments
            secs.append(timer())
            mem.append(memory_timer())
        reading = ProbeReading(label, time.time(), list(os.getloadavg()), secs, mem, core_probe_seconds())
        self.readings.append(reading)
        return reading

    @property
    def drift(self) -> float:
        """The reading's median furthest from the first's, over the first's (1.0 when there is only one): a host
        state that flips and flips back within a run moves a middle reading while the last matches the first."""
        return _furthest([r.median for r in self.readings])

    @property
    def memory_drift(self) -> float:
        """The memory probe's last median over its first (1.0 without two readings that have it)."""
        return _furthest([m for r in self.readings if (m := r.memory_median) is not None])

    @property
    def passed(self) -> bool:
        memory_cvs = [cv for r in self.readings if (cv := r.memory_robust_cv) is not None]
        return (
            bool(self.readings)
            and all(r.robust_cv <= self.cv_limit for r in self.readings)
            and abs(self.drift - 1.0) <= self.drift_limit
            and all(cv <= self.cv_limit for cv in memory_cvs)
            and abs(self.memory_drift - 1.0) <= self.drift_limit
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NoiseGate:
        """The gate as ``to_json`` stored it (its readings and limits), to re-write a summary from results.json."""
        fields = ("label", "at", "load", "seconds", "memory_seconds", "core_seconds")
        readings = [ProbeReading(**{k: r[k] for k in fields if k in r}) for r in data.get("readings", [])]
        return cls(cv_limit=data["cv_limit"], drift_limit=data["drift_limit"], readings=readings)

    def to_json(self) -> dict[str, Any]:
        return {
            "probe": f"dense.x86{PROBE_GEMM} at peak FMA rate; memory: 256 MiB stream; per CPU: 1-thread 256^2 matmul",
            "cv_limit": self.cv_limit,
            "drift_limit": self.drift_limit,
            "passed": self.passed,
            "drift": self.drift,
            "memory_drift": self.memory_drift,
            "readings": [
                {
                    **asdict(r),
                    "median": r.median,
                    "cv": r.cv,
                    "robust_cv": r.robust_cv,
                    "memory_median": r.memory_median,
                    "memory_robust_cv": r.memory_robust_cv,
                    "core_spread": r.core_spread,
                }
                for r in self.readings
            ],
        }

    def sentence(self) -> str:
        """The summary's line on noise: each reading's CV and load, the drift, and the verdict."""
        parts = [
            f"{r.label}: probe robust CV {r.robust_cv:.1%} (plain {r.cv:.1%}), median {r.median * 1e3:.3f} ms, "
            + (
                f"memory probe robust CV {r.memory_robust_cv:.1%}, median {r.memory_median * 1e3:.2f} ms, "
                if r.memory_median is not None and r.memory_robust_cv is not None
                else ""
            )
            + (f"per-CPU probe {'/'.join(f'{c * 1e3:.2f}' for c in r.core_seconds)} ms, " if r.core_seconds else "")
            + f"load {r.load[0]:.2f}"
            for r in self.readings
        ]
        verdict = (
            "passed"
            if self.passed
            else "FAILED: the run was noisier than the gate allows, so no speedup is claimed from it"
        )
        return (
            f"Noise gate (probe robust CV <= {self.cv_limit:.0%}, drift <= {self.drift_limit:.0%}): "
            + "; ".join(parts)
            + f"; drift {self.drift:.3f}x, memory drift {self.memory_drift:.3f}x: **{verdict}**."
        )
