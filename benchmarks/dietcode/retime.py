"""The DietCode benchmark's last pass: every arm re-timed at every T in turns, with the host's state read around every
timing (as ``host_state``), so each arm has a latency per T over all rounds and one from its fast-state timings."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..host_state import HostStates, interleaved_with_state
from ..noise_gate import Timer, interleaved, robust_cv
from .run import ArmResult, Retimer

__all__ = ["FAST_TIMINGS", "RetimeStates", "add_fast_latencies", "retime"]

#: fewest timings of an arm at a T with the probe readings around each in the fast state, for its fast-state latency
FAST_TIMINGS = 3


def retime(
    arms: list[tuple[ArmResult, Retimer]],
    rounds: int,
    settle_s: float = 0.005,
    probe: Timer | None = None,
    extra_passes: int = 2,
) -> RetimeStates | None:
    """Every arm re-timed at every T: per T, ``rounds`` rounds of one timing per arm (``noise_gate.interleaved``), and
    the median becomes the arm's latency (the first pass, taken right after each arm's tuning, is kept in
    ``extra["latency_passes"]``). Load that comes and goes then hits every arm at that T alike. A pause of ``settle_s``
    before each timing lets the thread pools another library leaves spinning (OpenMP, BLAS, TVM's) go idle first.

    With ``probe`` (``host_state.state_probe``) read around every timing (``host_state.interleaved_with_state``), and
    each arm gets ``extra["latency_fast"]``: the median of its timings at T between two fast readings, for each T with
    at least ``FAST_TIMINGS`` such timings. The host's slow state comes in spells, so up to ``extra_passes`` further
    passes re-time the T where an arm is still short of fast timings (adding rounds to every arm's list), waiting a slow
    spell out instead of averaging over it. Returns the readings (None without a probe)."""

    def settled(at: Retimer, t: int) -> Callable[[], float]:
        def timed() -> float:
            time.sleep(settle_s)
            return at(t)

        return timed

    first = [dict(res.latency) for res, _ in arms]
    ts = sorted(set().union(*(res.latency for res, _ in arms))) if arms else []
    per_t: list[dict[int, list[float]]] = [{} for _ in arms]
    readings: list[list[float]] = []
    orders: list[list[str]] = []
    t_of_round: list[int] = []

    arms_at = {t: [str(i) for i, (res, _) in enumerate(arms) if t in res.latency] for t in ts}

    def one_pass(pass_ts: list[int]) -> None:
        for t in pass_ts:
            timers = {name: settled(arms[int(name)][1], t) for name in arms_at[t]}
            if probe is None:
                times = interleaved(timers, rounds)
            else:
                times, probes, round_orders = interleaved_with_state(timers, rounds, probe)
                readings.extend(probes)
                orders.extend(round_orders)
                t_of_round.extend([t] * rounds)
            for name, secs in times.items():
                per_t[int(name)].setdefault(t, []).extend(secs)

    one_pass(ts)
    states = None
    for k in range(extra_passes + 1 if probe is not None else 0):
        states = RetimeStates(HostStates(readings, orders), t_of_round)
        short = [t for t in ts if not states.resolved_at(t, arms_at[t])]
        if not short or k == extra_passes:
            break
        one_pass(short)
    for i, ((res, _), before) in enumerate(zip(arms, first)):
        rounds_at = per_t[i]
        res.latency = {t: float(np.median(rounds_at[t])) for t in before}
        res.extra["latency_passes"] = [before, {t: min(rounds_at[t]) for t in before}]
        res.extra["latency_rounds"] = rounds_at
    if states is not None:
        add_fast_latencies([res for res, _ in arms], states)
    return states


def add_fast_latencies(results: list[ArmResult], states: RetimeStates) -> None:
    """Each arm's ``extra["latency_fast"]`` and ``["fast_rounds"]`` from its ``latency_rounds`` (arm i of
    ``results`` named ``str(i)`` in the states' round orders): also re-derives a stored run's (``--report``)."""
    for i, res in enumerate(results):
        rounds_at = {int(t): v for t, v in res.extra["latency_rounds"].items()}
        fast = {t: [rounds_at[t][j] for j in states.fast_rounds(t, str(i))] for t in rounds_at}
        res.extra["fast_rounds"] = {t: len(v) for t, v in fast.items()}
        res.extra["latency_fast"] = {t: float(np.median(v)) for t, v in fast.items() if len(v) >= FAST_TIMINGS}


@dataclass
class RetimeStates:
    """The host state around every timing of ``retime``: its probe readings and which T each round timed."""

    states: HostStates
    t_of_round: list[int]

    def fast_rounds(self, t: int, name: str) -> list[int]:
        """Which of T's rounds (0, 1, ... in the order T was timed) timed arm ``name`` between two fast readings."""
        return self._fast_by_t.get((t, name), [])

    @functools.cached_property
    def _fast_by_t(self) -> dict[tuple[int, str], list[int]]:
        seen: dict[int, int] = {}
        out: dict[tuple[int, str], list[int]] = {}
        for g, t in enumerate(self.t_of_round):
            j = seen[t] = seen.get(t, -1) + 1
            for name in self.states.round_orders[g] if self.states.round_orders else []:
                if self.states.state_of(self.states.readings_around(g, [name])) == "fast":
                    out.setdefault((t, name), []).append(j)
        return out

    def resolved_at(self, t: int, names: list[str]) -> bool:
        """Every arm timed at T has ``FAST_TIMINGS`` timings in the fast state."""
        return all(len(self.fast_rounds(t, n)) >= FAST_TIMINGS for n in names)

    def resolved(self, ts: list[int]) -> int:
        """How many of ``ts`` are resolved for every arm timed there."""
        return sum(self.resolved_at(t, self._names_at.get(t, [])) for t in ts)

    @functools.cached_property
    def _names_at(self) -> dict[int, list[str]]:
        orders = self.states.round_orders or []
        return {t: sorted(orders[g]) for g, t in enumerate(self.t_of_round)}

    def fast_reading_cv(self) -> float | None:
        """The robust CV of the probe readings in the fast state (None without any)."""
        fast = [p for r in self.states.round_probes for p in r if self.states.state_of([p]) == "fast"]
        return robust_cv(fast) if fast else None

    def gated(self, ts: list[int]) -> bool:
        """Every arm at every T has its fast timings and the fast readings are steady: the ratios may be claimed."""
        cv = self.fast_reading_cv()
        return self.resolved(ts) == len(ts) and cv is not None and cv <= self.states.cv_limit

    def sentence(self, ts: list[int]) -> str:
        cv = self.fast_reading_cv()
        fast_cv = f"the fast readings' robust CV {cv:.1%}" if cv is not None else "no fast reading"
        verdict = "**gated**" if self.gated(ts) else "**not gated**"
        return (
            f"{self.states.sentence()} T where every arm has >= {FAST_TIMINGS} timings in the fast state: "
            f"{self.resolved(ts)} of {len(ts)} (after {len(self.t_of_round)} rounds in all); {fast_cv}: fast-state "
            f"ratios {verdict}."
        )

    def to_json(self) -> dict[str, Any]:
        return {**self.states.to_json(), "t_of_round": self.t_of_round, "fast_timings_needed": FAST_TIMINGS}
