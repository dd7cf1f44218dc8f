"""Ratios per host state: rounds sorted by the probe readings taken around their engines, and the A/B summary
that reports a ratio per state and gates only a steady one. Nothing here is timed: timers are fed numbers."""

from __future__ import annotations

import itertools

import pytest

from benchmarks.host_state import HostStates, interleaved_with_state
from benchmarks.models.run_ab import _markdown, ratios, state_ratios

FAST, SLOW = 1.0e-4, 1.9e-4


def test_the_probe_is_read_before_every_engine_and_after_the_last():
    calls: list[str] = []
    counter = itertools.count()

    def timer(name: str):
        return lambda: calls.append(name) or 1.0

    def probe() -> float:
        calls.append("probe")
        return FAST * (1 + next(counter) / 1000)

    times, probes, orders = interleaved_with_state({"a": timer("a"), "b": timer("b")}, 2, probe)
    assert calls == ["probe", "a", "probe", "b", "probe", "probe", "b", "probe", "a", "probe"]
    assert times == {"a": [1.0, 1.0], "b": [1.0, 1.0]} and [len(p) for p in probes] == [3, 3]
    assert orders == [["a", "b"], ["b", "a"]]
    states = HostStates(probes, orders)
    assert states.readings_around(1, ["a"]) == [probes[1][1], probes[1][2]]  # a ran second in round 1


def test_rounds_are_fast_slow_or_mixed_and_only_a_steady_state_with_enough_rounds_is_gated():
    rounds = [[FAST] * 3] * 5 + [[SLOW] * 3] * 4 + [[FAST, FAST, SLOW]]
    states = HostStates(rounds)
    assert states.reference == FAST
    assert states.rounds_in("fast") == [0, 1, 2, 3, 4]
    assert states.rounds_in("slow") == [5, 6, 7, 8] and states.rounds_in("mixed") == [9]
    assert states.steady("fast") and not states.steady("slow")  # 4 slow rounds < MIN_ROUNDS
    assert not states.steady("mixed")
    # a measurement between two fast readings is fast even in a round that changed state
    orders = [["x", "y"]] * 10
    states = HostStates(rounds, orders)
    assert states.rounds_in("fast", ["x"]) == [0, 1, 2, 3, 4, 9] and states.rounds_in("mixed", ["y"]) == [9]
    with pytest.raises(ValueError, match="one reading more"):
        HostStates(rounds, [["x"]] * 10)
    noisy = [[FAST * f for f in (1.0, 1.07, 0.98, 1.03, 0.975)]] * 6  # within 10% of the fastest, robust CV 3.7%
    assert HostStates(noisy).rounds_in("fast") == list(range(6)) and not HostStates(noisy).steady("fast")
    text = states.sentence()
    assert "fast 11 (" in text and "slow 8 (" in text and "mixed 1 (" in text  # measurements, two per round
    with pytest.raises(ValueError, match="positive probe readings"):
        HostStates([])


def test_an_ab_summary_reports_each_state_and_claims_only_from_a_state_gated_in_every_seed():
    """Two seeds whose tuned model runs 1.3x onnxruntime's speed in the fast state and 0.9x in the slow one."""

    def seed(run: str, n_fast: int, n_slow: int) -> dict:
        fast_rounds = {"Winograd": 10e-3, "onnxruntime": 13e-3, "pytorch": 20e-3}
        slow_rounds = {"Winograd": 14.4e-3, "onnxruntime": 13e-3, "pytorch": 20e-3}
        times = {k: [fast_rounds[k]] * n_fast + [slow_rounds[k]] * n_slow for k in fast_rounds}
        order = ["Winograd", "onnxruntime", "pytorch"]
        states = HostStates([[FAST] * 4] * n_fast + [[SLOW] * 4] * n_slow, [order] * (n_fast + n_slow))
        result = {"model": "resnet18", "labels": ["Winograd"], "runs": {"Winograd": run}, "rounds_s": times}
        result |= {
            "host_state": states.to_json(),
            **ratios(times, ["Winograd"], lambda names: list(range(n_fast + n_slow))),
        }
        result["by_state"] = {s: state_ratios(times, ["Winograd"], states, s) for s in ("fast", "slow", "mixed")}
        return result

    results = [seed("run0", 8, 7), seed("run1", 6, 9)]
    fast = results[0]["by_state"]["fast"]["vs"]["onnxruntime"]["Winograd"]
    assert fast["median_ratio"] == pytest.approx(1.3) and fast["geomean"] == pytest.approx(1.3)
    slow = results[1]["by_state"]["slow"]["vs"]["onnxruntime"]["Winograd"]
    assert slow["median_ratio"] == pytest.approx(13 / 14.4)

    class Gate:
        def sentence(self) -> str:
            return "Noise gate: FAILED"

    meta = {"command": "run_ab", "started": "now", "wall_s": 1.0, "load_before": [0.1], "host": {}}
    meta["host"] = {"model": "EPYC", "isa": "avx512f", "cores": 2}
    text = "\n".join(_markdown(meta, results, Gate()))  # type: ignore[arg-type]
    assert "fast state (2 of 2 seeds; gated), Winograd vs onnxruntime: geometric mean 1.300x" in text
    assert "slow state (2 of 2 seeds; gated), Winograd vs onnxruntime: geometric mean 0.903x" in text
    assert "| run0 | fast | 10.00 | 13.00 | 20.00 | 1.300x [1.300, 1.300] (8, gated) |" in text
    assert "| run1 | mixed | nan | nan | nan | - | - |" in text
    results[1]["by_state"]["fast"]["vs"]["onnxruntime"]["Winograd"]["steady"] = False
    text = "\n".join(_markdown(meta, results, Gate()))  # type: ignore[arg-type]
    assert "fast state (2 of 2 seeds; not gated: claims nothing)" in text


def test_dietcode_retime_waits_out_a_slow_spell_and_reports_goals_from_fast_rounds():
    """The DietCode benchmark's pass with the probe around every timing: T timed in a slow spell get further
    passes, each arm's fast-state latency comes only from its timings between two fast readings, and the goals
    say how many T have one; a run whose probe never settles is not gated."""
    from benchmarks.dietcode.report import goals
    from benchmarks.dietcode.retime import FAST_TIMINGS, RetimeStates, retime
    from benchmarks.dietcode.run import ArmResult

    calls: list[tuple[str, int]] = []
    slow_readings = iter([True] * 12)  # T=1's first pass (3 rounds x 3 readings) and T=2's first round slow

    def probe() -> float:
        return SLOW if next(slow_readings, False) else FAST

    def timer(name: str, seconds: float):
        def at(t: int) -> float:
            calls.append((name, t))
            # the slow spell slows the TVM kernel, not the vendor
            slow = name == "dc" and len([c for c in calls if c[1] == t]) <= 6 and t == 1
            return seconds * t * (2.0 if slow else 1.0)

        return at

    dc = ArmResult("g", "dietcode", 10.0, {1: 9.0, 2: 9.0, 3: 9.0})
    torch_ = ArmResult("g", "torch", 0.0, {1: 9.0, 2: 9.0, 3: 9.0})
    found = retime([(dc, timer("dc", 1.0)), (torch_, timer("torch", 0.95))], rounds=3, settle_s=0,
                   probe=probe, extra_passes=2)  # fmt: skip
    assert found is not None
    assert found.fast_rounds(1, "0") == found.fast_rounds(1, "1") == [3, 4, 5]  # T=1 re-timed: fast the 2nd time
    assert found.fast_rounds(2, "0") == [1, 2, 3, 4, 5] and found.fast_rounds(3, "1") == [0, 1, 2]
    assert found.t_of_round == [1] * 3 + [2] * 3 + [3] * 3 + [1] * 3 + [2] * 3
    assert len(dc.extra["latency_rounds"][1]) == 6 and dc.extra["fast_rounds"] == {1: 3, 2: 5, 3: 3}
    assert dc.extra["latency_fast"] == {1: 1.0, 2: 2.0, 3: 3.0}
    assert dc.latency[1] == pytest.approx(1.5)  # all rounds mix the spell in
    (g,) = goals([dc, torch_])
    assert g["fast_state"]["t_resolved"] == 3 == FAST_TIMINGS
    assert g["fast_state"]["speed_vs_torch_geomean"] == pytest.approx(0.95)
    assert g["speed_vs_torch_worst"] == pytest.approx(0.95 / 1.5)
    assert found.gated([1, 2, 3]) and "gated" in found.sentence([1, 2, 3])

    # a state change inside a round: the arm timed before it counts as fast, the one across it does not
    one_round = RetimeStates(HostStates([[FAST, FAST, SLOW, SLOW]], [["a", "b", "c"]]), [7])
    assert [one_round.fast_rounds(7, n) for n in "abc"] == [[0], [], []]

    never = ArmResult("g", "dietcode", 10.0, {1: 9.0})
    flips = itertools.cycle([FAST, SLOW])  # the state changes within every round: no round is wholly fast
    stuck = retime([(never, lambda t: 1.0)], rounds=3, settle_s=0, probe=lambda: next(flips), extra_passes=1)
    assert stuck is not None and never.extra["latency_fast"] == {} and stuck.resolved([1]) == 0
    assert len(never.extra["latency_rounds"][1]) == 6  # one further pass, then it gave up
    assert not stuck.gated([1]) and "not gated" in stuck.sentence([1])


def test_a_fast_watch_judges_each_reading_against_the_readings_so_far_and_waits_for_a_fast_one():
    from benchmarks.host_state import FastWatch, fast_reference

    readings = iter([SLOW, SLOW, FAST, SLOW, SLOW, SLOW, FAST * 1.05])
    now = itertools.count()
    watch = FastWatch(lambda: next(readings), clock=lambda: float(next(now)))
    assert watch.is_fast(watch.read())  # alone, a reading is its own reference
    watch.read()
    assert watch.is_fast(watch.read())  # FAST: the reference drops to it
    assert not watch.is_fast(SLOW)
    assert watch.wait_fast(100.0) == FAST * 1.05 and len(watch.readings) == 7  # three slow readings waited out
    assert fast_reference(watch.readings) == FAST
    with pytest.raises(ValueError, match="at least one"):
        fast_reference([])
    stuck = FastWatch(iter([FAST] + [SLOW] * 10).__next__, clock=lambda: float(next(now)))
    stuck.read()  # the fast state seen once: SLOW is judged slow from then on
    assert stuck.wait_fast(3.0) == SLOW and len(stuck.readings) == 4  # three readings, one per tick, then gives up
