"""The cold-runs benchmark's summary: ratios to the steady time, rankings against the reference and the fastest
candidate, computed from scripted rows (nothing timed)."""

from __future__ import annotations

import pytest

from benchmarks.cold_runs import summarise


def _rows() -> list[dict]:
    steady = [1.0, 2.0, 3.0]  # candidate k's steady time
    rows = []
    for rnd in range(2):
        for k, s in enumerate(steady):
            rows.append(
                {
                    "op": "x",
                    "round": rnd,
                    "arm": "series",
                    "candidate": k,
                    "cost": s,
                    "run_time": 0.1,
                    "steady": s,
                    "cold_ratio": 1.5 if k == 0 else 1.0,
                }
            )
            rows.append({"op": "x", "round": rnd, "arm": "reference", "candidate": k, "cost": s, "run_time": 0.4})
            # cold: candidate 0 read 1.5x slow (after 1, 2), so it ranks second; warm: the steady order
            cold = s * (2.5 if k == 0 else 1.0)
            rows.append({"op": "x", "round": rnd, "arm": "warmup-0ms", "candidate": k, "cost": cold, "run_time": 0.1})
            rows.append({"op": "x", "round": rnd, "arm": "warmup-10ms", "candidate": k, "cost": s, "run_time": 0.2})
    rows.append({"op": "x", "round": 0, "arm": "warmup-10ms", "candidate": 3, "error": 4})  # a failure: no cost
    return rows


def test_summary_compares_each_arm_with_the_steady_times_and_the_reference_ranking():
    got = {s["arm"]: s for s in summarise(_rows(), ["warmup-0ms", "warmup-10ms"])}
    assert list(got) == ["warmup-0ms", "warmup-10ms", "reference"]
    cold, warm = got["warmup-0ms"], got["warmup-10ms"]
    assert cold["ratio_to_steady_median"] == pytest.approx(1.0) and cold["ratio_to_steady_p90"] > 2.0
    assert cold["kendall_tau_median"] == pytest.approx(1 / 3) and cold["same_fastest"] == "0/2"
    assert warm["ratio_to_steady_median"] == pytest.approx(1.0) and warm["kendall_tau_min"] == pytest.approx(1.0)
    assert warm["same_fastest"] == "2/2" and warm["seconds_per_candidate"] == pytest.approx(0.2)
    assert cold["cold_ratio_max"] == pytest.approx(1.5)
