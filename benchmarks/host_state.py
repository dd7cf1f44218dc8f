"""Ratios taken inside one state of the host: the noise gate's probe timed around every engine of every round.

The 2-core Zen 4 host runs two-thread TVM kernels at two speeds that alternate within seconds (a 512^3 GEMM
1.28 ms or 2.45 ms in consecutive 2 s rounds, the gate's peak-FMA probe 0.116 or 0.203 ms; its parallel-region
overhead 0.77 us in both, so not thread wake-up) while onnxruntime on the same two threads moves by about 4%
(scratch probes of 2026-11-27, not committed). A study's before/after gate then fails on drift although every
ratio was taken in turns, and a ratio averaged over rounds mixes the two states in whatever proportion the run
happened to see. Here the probe is timed before every engine of a round and after the last one, so each round is
known to have run wholly in the fast state (every reading within ``STATE_TOLERANCE`` of the fastest reading of
the run), wholly outside it, or across a change; a ratio is then reported per state, and the fast state's
counts as gated when it has at least ``MIN_ROUNDS`` rounds whose probe readings have a robust CV under the noise
gate's ``CV_LIMIT``. Mixed rounds count in no state.

    times, probes = interleaved_with_state(timers, rounds, probe_timer())
    states = HostStates(probes)
    states.rounds_in("fast")   # indices of the rounds to take a ratio from
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .noise_gate import CV_LIMIT, Timer, probe_timer, robust_cv

__all__ = ["MIN_ROUNDS", "STATES", "STATE_TOLERANCE", "HostStates", "State", "interleaved_with_state", "state_probe"]

#: a probe reading within this fraction of the run's fastest reading is the fast state (the two states measured
#: 1.75-1.9x apart; repeat noise in the fast state is 1-3%)
STATE_TOLERANCE = 0.10
#: fewest rounds in one state for its ratio to count as gated
MIN_ROUNDS = 5

State = Literal["fast", "slow", "mixed"]
STATES: tuple[State, ...] = ("fast", "slow", "mixed")


def interleaved_with_state(
    timers: Mapping[str, Timer], rounds: int, probe: Timer
) -> tuple[dict[str, list[float]], list[list[float]]]:
    """Each timer once per round, round-robin, the order reversed every other round (as ``interleaved``), with
    ``probe`` called before each timer and after the round's last: the seconds per timer and round, and the
    probe's ``len(timers) + 1`` readings per round."""
    names = list(timers)
    out: dict[str, list[float]] = {n: [] for n in names}
    probes: list[list[float]] = []
    for r in range(rounds):
        readings = []
        for name in names if r % 2 == 0 else names[::-1]:
            readings.append(probe())
            out[name].append(timers[name]())
        readings.append(probe())
        probes.append(readings)
    return out, probes


@dataclass
class HostStates:
    """The state of every round, from the probe readings taken around its engines."""

    round_probes: list[list[float]]
    tolerance: float = STATE_TOLERANCE
    min_rounds: int = MIN_ROUNDS
    cv_limit: float = CV_LIMIT

    def __post_init__(self) -> None:
        if not self.round_probes or not all(self.round_probes) or min(min(r) for r in self.round_probes) <= 0:
            raise ValueError("HostStates needs at least one round of positive probe readings")

    @property
    def reference(self) -> float:
        """The fastest probe reading of the run: the host's fast state."""
        return min(min(r) for r in self.round_probes)

    def state(self, round_index: int) -> State:
        fast = [p <= self.reference * (1 + self.tolerance) for p in self.round_probes[round_index]]
        return "fast" if all(fast) else "slow" if not any(fast) else "mixed"

    def rounds_in(self, state: State) -> list[int]:
        return [i for i in range(len(self.round_probes)) if self.state(i) == state]

    def probe_robust_cv(self, state: State) -> float | None:
        """The robust CV of the probe readings of the rounds in ``state`` (None when it has no rounds)."""
        readings = [p for i in self.rounds_in(state) for p in self.round_probes[i]]
        return robust_cv(readings) if readings else None

    def steady(self, state: State) -> bool:
        """Enough rounds in ``state``, and its probe readings steady: a ratio from those rounds may be claimed."""
        cv = self.probe_robust_cv(state)
        enough = len(self.rounds_in(state)) >= self.min_rounds
        return state != "mixed" and enough and cv is not None and cv <= self.cv_limit

    def sentence(self) -> str:
        """The summary's line: rounds per state, the probe in each, and which state's ratios are gated."""
        parts = []
        for s in STATES:
            idx = self.rounds_in(s)
            if not idx:
                continue
            med = statistics.median(p for i in idx for p in self.round_probes[i])
            verdict = "gated" if self.steady(s) else "not gated"
            parts.append(
                f"{s} {len(idx)} rounds (probe median {med * 1e3:.3f} ms, robust CV {self.probe_robust_cv(s):.1%}; "
                f"{verdict})"
            )
        return (
            f"Host state per round (probe before every engine and after the last; fast = every reading within "
            f"{self.tolerance:.0%} of the run's fastest, {self.reference * 1e3:.3f} ms): " + "; ".join(parts) + "."
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "tolerance": self.tolerance,
            "min_rounds": self.min_rounds,
            "reference_s": self.reference,
            "round_states": [self.state(i) for i in range(len(self.round_probes))],
            "round_probes_s": self.round_probes,
            "probe_robust_cv": {s: self.probe_robust_cv(s) for s in STATES},
            "steady": {s: self.steady(s) for s in STATES},
        }


def state_probe(calls: int = 3) -> Timer:
    """The noise gate's peak-FMA probe as one reading: the median of ``calls`` calls (about 7 ms in all)."""
    timer = probe_timer()
    return lambda: statistics.median(timer() for _ in range(calls))
