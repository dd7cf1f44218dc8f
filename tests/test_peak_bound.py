"""The peak-rate bound on a model's latency: FLOPs from a run's tasks, latencies from an A/B run, the shares of the
peak each engine and the goal need. The FMA chain is compiled and run briefly to check that it reports a rate;
nothing here asserts a timing."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from benchmarks.models.peak_bound import (
    bound_table,
    compile_fma_chain,
    engine_latencies,
    flops_per_iteration,
    model_gflop,
    peak_rate,
)

FAST, SLOW = 1.0e-4, 1.9e-4


def test_a_model_latency_goal_is_read_as_a_share_of_the_peak(tmp_path) -> None:
    tasks = tmp_path / "tasks.csv"
    tasks.write_text("model,task,weight,gflop\nm,a,12,0.5\nm,b,2,1.0\n")
    assert model_gflop(str(tasks)) == pytest.approx(8.0)
    (tmp_path / "empty.csv").write_text("model,task,weight,gflop\n")
    with pytest.raises(ValueError, match="no tasks"):
        model_gflop(str(tmp_path / "empty.csv"))
    # one seed, three rounds; the tuned model's second round between slow readings
    probes = [[FAST, FAST, FAST], [FAST, SLOW, FAST], [FAST, FAST, FAST]]
    orders = [["tuned", "onnxruntime"], ["onnxruntime", "tuned"], ["tuned", "onnxruntime"]]
    seed = {"rounds_s": {"tuned": [0.1, 0.2, 0.1], "onnxruntime": [0.12, 0.125, 0.12]},
            "host_state": {"round_probes_s": probes, "round_orders": orders}}  # fmt: skip
    ab = tmp_path / "ab"
    ab.mkdir()
    (ab / "results.json").write_text(json.dumps({"results": [seed]}))
    lat = engine_latencies(str(ab))
    assert lat["tuned"] == {"all_rounds": 0.1, "fast_state": 0.1}
    assert lat["onnxruntime"]["fast_state"] == pytest.approx(0.12)  # its round-1 timing was after a slow reading
    rows = bound_table(8.0, 100e9, lat, 0.8, "onnxruntime")
    fast = {r["what"]: r for r in rows if r["state"] == "fast_state"}
    assert fast["tuned"]["gflops"] == pytest.approx(80.0) and fast["tuned"]["share_of_peak"] == pytest.approx(0.8)
    goal = fast["goal: 0.8x onnxruntime's latency"]
    assert goal["latency_ms"] == pytest.approx(96.0) and goal["share_of_peak"] == pytest.approx(8.0 / 0.096 / 100)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_the_fma_chain_builds_for_the_vector_width_and_reports_a_rate(tmp_path) -> None:
    exe = compile_fma_chain(8, str(tmp_path))
    assert os.access(exe, os.X_OK)
    rate = peak_rate(exe, 8, sorted(os.sched_getaffinity(0))[:1], 1000)
    assert rate > 0 and flops_per_iteration(8) == 16 * 8 * 2
