"""Ratios taken inside one state of the host: the noise gate's probe timed between every two measurements.

Some virtual hosts run multi-threaded TVM kernels at two speeds, in spells of seconds (every thread on its own CPU, none
waiting), while one-thread kernels pinned to each CPU keep their speed and the other engines barely move. A study's
before/after gate then fails on drift although every ratio was taken in turns, and a ratio over all rounds mixes the two
states in whatever proportion the run saw. Here the probe is timed before every measurement of a round and after the
last, so each measurement is known to have run in the fast state (the readings before and after it within
``STATE_TOLERANCE`` of the run's fast reference reading), outside it, or across a change. A ratio between two
measurements of a round counts in a state when both are in it, and as gated when at least ``MIN_ROUNDS`` rounds qualify
and their probe readings have a robust CV under the noise gate's ``CV_LIMIT``.

    times, probes, orders = interleaved_with_state(timers, rounds, state_probe())
    states = HostStates(probes, orders)
    states.rounds_in("fast", ["tuned", "onnxruntime"])   # the rounds to take that ratio from
"""

from __future__ import annotations

import bisect
import functools
import statistics
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .noise_gate import CV_LIMIT, Timer, probe_timer, robust_cv

__all__ = [
    "MIN_ROUNDS",
    "REFERENCE_QUANTILE",
    "STATES",
    "STATE_TOLERANCE",
    "FastWatch",
    "HostStates",
    "State",
    "fast_reference",
    "interleaved_with_state",
    "state_probe",
]

#: a probe reading within this fraction of the run's fast reference is fast (states lie far further apart than noise)
STATE_TOLERANCE = 0.10
#: which of a run's probe readings, fastest first, stands for the fast state (robust to a stray fast reading)
REFERENCE_QUANTILE = 0.02
#: fewest rounds in one state for its ratio to count as gated
MIN_ROUNDS = 5

State = Literal["fast", "slow", "mixed"]
STATES: tuple[State, ...] = ("fast", "slow", "mixed")


def fast_reference(readings: Iterable[float]) -> float:
    """The host's fast state: the probe reading at ``REFERENCE_QUANTILE`` (the fastest of under 50 readings). Not the
    fastest outright: one stray fast reading would put nearly every fast-state reading outside the tolerance."""
    return _reference_of_sorted(sorted(readings))


def _reference_of_sorted(ordered: list[float]) -> float:
    if not ordered:
        raise ValueError("fast_reference needs at least one probe reading")
    return ordered[int(REFERENCE_QUANTILE * len(ordered))]


class FastWatch:
    """The host's state while a run goes on: every probe reading so far, and whether a new one is fast against
    them. A run that can repeat a measurement (a sweep re-runs a built batch) waits for the fast state before
    it and checks the reading after it; ``HostStates`` re-derives the states afterwards from the whole run."""

    def __init__(self, probe: Timer, tolerance: float = STATE_TOLERANCE, clock: Timer = time.monotonic) -> None:
        self.probe, self.tolerance, self.clock = probe, tolerance, clock
        self.readings: list[float] = []
        self._ordered: list[float] = []  # the readings kept sorted: a sweep reads thousands, judging each one

    def read(self) -> float:
        reading = self.probe()
        self.readings.append(reading)
        bisect.insort(self._ordered, reading)
        return reading

    def is_fast(self, reading: float) -> bool:
        return reading <= _reference_of_sorted(self._ordered) * (1 + self.tolerance)

    def scan(self, seconds: float, pause: float = 0.05) -> None:
        """Read the probe for ``seconds``, so the reference has seen the fast state before the run decides on it."""
        end = self.clock() + seconds
        while self.clock() < end:
            self.read()
            time.sleep(pause)

    def wait_fast(self, max_seconds: float, pause: float = 0.05) -> float:
        """Read until a reading is fast or ``max_seconds`` have passed; the last reading."""
        end = self.clock() + max_seconds
        reading = self.read()
        while not self.is_fast(reading) and self.clock() < end:
            time.sleep(pause)
            reading = self.read()
        return reading


def interleaved_with_state(
    timers: Mapping[str, Timer], rounds: int, probe: Timer
) -> tuple[dict[str, list[float]], list[list[float]], list[list[str]]]:
    """Each timer once per round, round-robin, the order reversed every other round (as ``interleaved``), with
    ``probe`` called before each timer and after the round's last: the seconds per timer and round, the probe's
    ``len(timers) + 1`` readings per round, and each round's order (reading i precedes the order's timer i)."""
    names = list(timers)
    out: dict[str, list[float]] = {n: [] for n in names}
    probes: list[list[float]] = []
    orders: list[list[str]] = []
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        readings = []
        for name in order:
            readings.append(probe())
            out[name].append(timers[name]())
        readings.append(probe())
        probes.append(readings)
        orders.append(list(order))
    return out, probes, orders


@dataclass
class HostStates:
    """The host's state around every measurement of a run, from the probe readings taken between them (the state flips
    within seconds, so whole rounds of four engines are seldom all fast)."""

    round_probes: list[list[float]]
    round_orders: list[list[str]] | None = None
    tolerance: float = STATE_TOLERANCE
    min_rounds: int = MIN_ROUNDS
    cv_limit: float = CV_LIMIT

    def __post_init__(self) -> None:
        if not self.round_probes or not all(self.round_probes) or min(min(r) for r in self.round_probes) <= 0:
            raise ValueError("HostStates needs at least one round of positive probe readings")
        if self.round_orders is not None and [len(o) + 1 for o in self.round_orders] != [
            len(r) for r in self.round_probes
        ]:
            raise ValueError("HostStates needs one reading more than measurements in every round")

    @functools.cached_property
    def reference(self) -> float:
        """The run's fast reference (``fast_reference`` of all its readings)."""
        return fast_reference(p for r in self.round_probes for p in r)

    def state_of(self, readings: list[float]) -> State:
        """Fast when every reading is within the tolerance of the run's fast reference, slow when none is."""
        fast = [p <= self.reference * (1 + self.tolerance) for p in readings]
        return "fast" if all(fast) else "slow" if not any(fast) else "mixed"

    def readings_around(self, round_index: int, names: Iterable[str] | None = None) -> list[float]:
        """The readings just before and after each of ``names`` in that round (all of the round's when None)."""
        readings = self.round_probes[round_index]
        if names is None:
            return list(readings)
        if self.round_orders is None:
            raise ValueError("HostStates without round orders cannot place a measurement")
        order = self.round_orders[round_index]
        return [readings[i + d] for n in names for i in [order.index(n)] for d in (0, 1)]

    def rounds_in(self, state: State, names: Iterable[str] | None = None) -> list[int]:
        """The rounds in which the readings around ``names`` (the whole round when None) are all in ``state``."""
        names = None if names is None else list(names)
        return [i for i in range(len(self.round_probes)) if self.state_of(self.readings_around(i, names)) == state]

    def probe_robust_cv(self, state: State, names: Iterable[str] | None = None) -> float | None:
        """The robust CV of the readings around ``names`` in the rounds in ``state`` (None without such rounds)."""
        names = None if names is None else list(names)
        readings = [p for i in self.rounds_in(state, names) for p in self.readings_around(i, names)]
        return robust_cv(readings) if readings else None

    def steady(self, state: State, names: Iterable[str] | None = None) -> bool:
        """Enough rounds in ``state`` around ``names``, with steady readings, to claim a ratio from those rounds."""
        names = None if names is None else list(names)
        cv = self.probe_robust_cv(state, names)
        enough = len(self.rounds_in(state, names)) >= self.min_rounds
        return state != "mixed" and enough and cv is not None and cv <= self.cv_limit

    def sentence(self) -> str:
        """The summary's line: how many measurements were in each state, and the probe in each."""
        counts = {s: 0 for s in STATES}
        per_state: dict[State, list[float]] = {s: [] for s in STATES}
        for readings in self.round_probes:
            for k in range(len(readings) - 1):
                s = self.state_of(readings[k : k + 2])
                counts[s] += 1
                per_state[s] += readings[k : k + 2]
        parts = [
            f"{s} {counts[s]} (probe median {statistics.median(per_state[s]) * 1e3:.3f} ms, robust CV "
            f"{robust_cv(per_state[s]):.1%})"
            for s in STATES
            if counts[s]
        ]
        return (
            f"Host state around each measurement (probe before and after it; fast = both readings within "
            f"{self.tolerance:.0%} of the run's fast reference, its {REFERENCE_QUANTILE:.0%} quantile, "
            f"{self.reference * 1e3:.3f} ms): " + "; ".join(parts) + "."
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "tolerance": self.tolerance,
            "min_rounds": self.min_rounds,
            "reference_s": self.reference,
            "round_probes_s": self.round_probes,
            "round_orders": self.round_orders,
        }


def state_probe(calls: int = 3, timer: Timer | None = None) -> Timer:
    """The noise gate's peak-FMA probe as one reading: the median of ``calls`` calls (a few ms in all); pass a
    gate's ``compute_timer`` to reuse its built kernel."""
    probe = timer or probe_timer()
    return lambda: statistics.median(probe() for _ in range(calls))
