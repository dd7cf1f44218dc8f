"""The benchmark harness's own logic: the noise gate's verdict, replay studies that include the adaptive
evaluator, and the trace-space study task. Nothing here is timed; the gate is fed readings."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import typing

import numpy as np
import pytest

import adatune
from adatune.measure import MeasureErrorNo, MeasureInput, MeasureResult
from adatune.records import save_to_file
from adatune.templates.workloads import get as get_workload
from benchmarks.harness.run import RunSpec, load_sweep_tasks, replay_study, restrict_to_table, study_task
from benchmarks.harness.stats import best_curve
from benchmarks.noise_gate import NoiseGate, ProbeReading


def _reading(label: str, seconds: list[float]) -> ProbeReading:
    return ProbeReading(label, 0.0, [0.5, 0.5, 0.5], seconds)


def test_the_noise_gate_passes_a_steady_probe_and_fails_a_noisy_or_drifting_one():
    steady = [1.00e-3, 1.01e-3, 0.99e-3, 1.00e-3, 1.02e-3, 0.98e-3] * 5
    preempted = steady[:-2] + [3e-3, 4e-3]  # two preempted repeats: the plain CV jumps, the robust one not
    gate = NoiseGate(readings=[_reading("before", steady), _reading("after", preempted)])
    assert gate.readings[1].cv > 0.3 and gate.readings[1].robust_cv < 0.03
    assert gate.passed and "**passed**" in gate.sentence()
    noisy = [1e-3, 1.2e-3, 0.8e-3, 1.1e-3, 0.9e-3] * 6
    assert not NoiseGate(readings=[_reading("before", noisy)]).passed
    drifted = [s * 1.10 for s in steady]
    gate = NoiseGate(readings=[_reading("before", steady), _reading("after", drifted)])
    assert gate.drift == pytest.approx(1.10) and not gate.passed
    assert "FAILED" in gate.sentence() and gate.to_json()["passed"] is False
    assert not NoiseGate().passed  # no reading: nothing to vouch for the run


def test_replay_studies_run_the_adaptive_evaluator_on_recorded_micro_batches(matmul_task, replay_table, tmp_path):
    """A sweep timed in micro-batches (6 per candidate): RFEI+CSA+AE is replayed with the evaluator cutting
    steady candidates at its floor, the other schemes see every recorded run."""
    log = tmp_path / "sweep.jsonl"
    pairs = []
    for (_wk, key), res in replay_table.items():
        if res.ok:
            # the last three micro-batches twice as slow: the evaluator stops on the first three, the table's
            # median is 1.5x the first reading
            res = dataclasses.replace(res, costs=(res.costs[0],) * 3 + (2 * res.costs[0],) * 3, runs=60)
        pairs.append((MeasureInput(matmul_task, matmul_task.config_space.get(int(key))), res))
    save_to_file(str(log), pairs)
    spec = RunSpec(n_trial=16, plan_size=8, batch_size=8, num_threads=1)
    (study,) = replay_study([str(log)], ["XGB+SA", "RFEI+CSA+AE"], [0], spec)
    runs = {r["scheme"]: r for r in study["runs"]}
    assert set(runs) == {"XGB+SA", "RFEI+CSA+AE"}
    ok = [t for t in runs["RFEI+CSA+AE"]["trials"] if t["error_no"] == 0]
    assert ok and all(t["runs"] == 30 for t in ok)  # 3 of 6 micro-batches: steady, stopped at the floor
    assert all(t["runs"] == 60 for t in runs["XGB+SA"]["trials"] if t["error_no"] == 0)
    # every incumbent is valued at the table: the deterministic run's curve is its own, the adaptive run's follows
    # its own incumbents at their table values
    common = study["common_gflops"]
    table = {str(inp.config.key): res.flops(matmul_task.flop) / 1e9 for inp, res in pairs}  # as the log holds them
    assert common and all(common[k] == pytest.approx(table[k]) for k in common)
    assert list(best_curve(runs["XGB+SA"], common)[1]) == pytest.approx(list(best_curve(runs["XGB+SA"])[1]))
    own, want = 0.0, []
    for t in runs["RFEI+CSA+AE"]["trials"]:
        if t["gflops"] > own:
            own = t["gflops"]
            want.append(table[str(t["key"])])
    assert best_curve(runs["RFEI+CSA+AE"], common)[1][-1] == pytest.approx(max(want))
    own_best = best_curve(runs["RFEI+CSA+AE"])[1][-1]  # its own reading of the same incumbent: 1.5x the table's
    assert own_best == pytest.approx(1.5 * max(want))


def test_rfei_runs_record_held_out_calibration_and_the_report_lists_it_per_forest(matmul_task, replay_table, tmp_path):
    """Every RFEI run keeps, per refit, how the forest before it did on the configs measured since (held out); a
    recalibrated run also keeps the factor its sigma was multiplied by (1 at the first fit: nothing held out yet),
    a plain one keeps 1s; the report tabulates both per forest."""
    from benchmarks.harness.report import write_report

    log = tmp_path / "sweep.jsonl"
    save_to_file(
        str(log),
        [(MeasureInput(matmul_task, matmul_task.config_space.get(int(k))), r) for (_w, k), r in replay_table.items()],
    )
    spec = RunSpec(n_trial=24, plan_size=8, batch_size=8, num_threads=1)
    (study,) = replay_study([str(log)], ["RFEI+SA", "RFEI-recal+SA"], [0, 1], spec)
    for r in study["runs"]:
        assert len(r["sigma_factors"]) == r["refits"] == 3 and r["sigma_factors"][0] == 1.0
        assert [h["fit"] for h in r["held_out"]] == [1.0, 2.0]  # forests 1 and 2 scored on the next 8 configs
        assert all(0 < h["n"] <= 8 and h["z_rms"] >= abs(h["z_mean"]) for h in r["held_out"])
        if r["scheme"] == "RFEI+SA":
            assert set(r["sigma_factors"]) == {1.0}
        else:  # the factor after each held-out batch is the one the next forest applies
            assert r["sigma_factors"][1:] == [h["factor"] for h in r["held_out"]]
    plain = {r["seed"]: r for r in study["runs"] if r["scheme"] == "RFEI+SA"}
    recal = {r["seed"]: r for r in study["runs"] if r["scheme"] == "RFEI-recal+SA"}
    for seed in (0, 1):  # the same first forest, so the same first held-out batch and factor
        assert recal[seed]["held_out"][0] == plain[seed]["held_out"][0]
    meta = {"host": {}, "command": "test", "schemes": ["RFEI+SA", "RFEI-recal+SA"], "baseline": "RFEI+SA"}
    write_report(str(tmp_path / "out"), "t", {**meta, "target_fraction": 0.95, "mode": "replay"}, [study])
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "## How each forest did on the configs it picked (held out)" in summary
    rows = [x.split(" | ") for x in summary.splitlines() if x.startswith("| ") and " | 2 | " in x and "RFEI" in x]
    table = {(c[1], c[2]): c for c in rows if len(c) == 12}
    assert set(table) == {("RFEI+SA", "1"), ("RFEI+SA", "2"), ("RFEI-recal+SA", "1"), ("RFEI-recal+SA", "2")}
    assert table[("RFEI+SA", "2")][10] == "1.00"  # sigma x: no factor applied without recalibrate


def test_a_partial_sweep_of_an_unpruned_space_is_searched_as_exactly_its_recorded_configs(tmp_path):
    """AutoTVM's unpruned spaces ignore the template's multi_filter; the replay's restriction to a subset sweep
    must still hold there, or the tuners would propose configs the table never recorded."""
    task = get_workload("batch_matmul:B=2,M=16,N=16,K=16,layout=NT,space=autotvm").create_task(adatune.target.host())
    rng = np.random.default_rng(0)
    keys = sorted(rng.choice(task.space.size, size=40, replace=False).tolist())
    pairs = [
        (
            MeasureInput(task, task.space.get(k)),
            MeasureResult((1e-5 * (1 + k % 7),) * 5, MeasureErrorNo.NO_ERROR, 0.1, 0.0, runs=15),
        )
        for k in keys
    ]
    log = tmp_path / "subset.jsonl"
    save_to_file(str(log), pairs)
    ((_, replay_task, table),) = load_sweep_tasks([str(log)])
    assert restrict_to_table(replay_task, table) == 40 < task.space.size
    assert sorted(int(i) for i in replay_task.space.valid_indices()) == keys
    spec = RunSpec(n_trial=24, plan_size=8, batch_size=8, num_threads=1)
    (study,) = replay_study([str(log)], ["XGB+SA"], [0], spec)
    assert study["searched_space"] == 40
    trials = study["runs"][0]["trials"]
    assert len(trials) == 24 and all(t["error_no"] == 0 for t in trials)  # every proposal was a recorded config


def test_a_replay_is_read_again_against_another_arm_from_its_gzipped_results(matmul_task, replay_table, tmp_path):
    """``report --baseline``: the same runs paired with another of their arms, read from the committed
    ``results.json.gz``; a baseline the runs lack is refused."""
    import gzip
    import shutil

    from benchmarks.harness.__main__ import main

    log = tmp_path / "sweep.jsonl"
    save_to_file(
        str(log),
        [(MeasureInput(matmul_task, matmul_task.config_space.get(int(k))), r) for (_wk, k), r in replay_table.items()],
    )
    study = tmp_path / "study"
    main(["replay", "--sweeps", str(log), "--schemes", "XGB+SA", "RF+SA", "--seeds", "2", "--trials", "16",
          "--plan-size", "8", "--batch-size", "8", "--num-threads", "1", "--out", str(study)])  # fmt: skip
    with open(study / "results.json", "rb") as src, gzip.open(study / "results.json.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    (study / "results.json").unlink()
    again = tmp_path / "again"
    main(["report", "--inputs", str(study), "--baseline", "RF+SA", "--out", str(again)])
    summary = (again / "summary.md").read_text()
    assert "Baseline RF+SA" in summary and "| XGB+SA | measurements |" in summary
    assert "| XGB+SA | search steps |" in summary  # ReLeASE's metric, from the steps each trial records
    with pytest.raises(ValueError, match="baseline 'Random' must be one of the schemes run"):
        main(["report", "--inputs", str(study), "--baseline", "Random", "--out", str(tmp_path / "bad")])
    # another run over the same table pairs with this one by seed: RF+SA (first run) against Random (second run)
    other = tmp_path / "other"
    main(["replay", "--sweeps", str(log), "--schemes", "XGB+SA", "Random", "--seeds", "2", "--trials", "16",
          "--plan-size", "8", "--batch-size", "8", "--num-threads", "1", "--out", str(other)])  # fmt: skip
    main(["report", "--inputs", str(study), str(other), "--baseline", "Random", "--out", str(tmp_path / "both")])
    both = (tmp_path / "both" / "summary.md").read_text()
    bullets = [line for line in both.splitlines() if line.startswith("- ") and "Task(" in line]
    assert "| RF+SA | measurements |" in both and len(bullets) == 1 and "6 runs" in bullets[0]  # XGB+SA kept once


def test_the_trace_study_task_is_the_same_operator_over_a_large_trace_space():
    knob = study_task("dense:M=32,N=32,K=32")
    trace = study_task("dense:M=32,N=32,K=32", "trace")
    assert trace.name == adatune.trace.RULES_PREFIX + knob.name and trace.args == knob.args
    assert trace.space.size > 100 * knob.space.size
    with pytest.raises(ValueError, match="space must be 'knob' or 'trace'"):
        study_task("dense-bert-qkv", "autotvm-ish")


# -- the tabular benchmark's pre-registered gates ---------------------------------------------------------


def test_expected_measurements_of_random_search_and_of_the_oracle_match_enumeration():
    import itertools

    import numpy as np

    from benchmarks.tabular import expected_oracle, expected_random, room_gates

    n, good, plan = 6, 2, 2
    firsts = []  # every order of 6 configs, 2 of them good: the position of the first good one
    for order in itertools.permutations([1, 1, 0, 0, 0, 0]):
        firsts.append(order.index(1) + 1)
    assert expected_random(n, good) == pytest.approx(np.mean(firsts))
    assert expected_oracle(n, good, plan) == pytest.approx(np.mean([min(t, plan + 1) for t in firsts]))
    assert expected_oracle(n, 0, plan) == plan + 1  # nothing good in the first plan: the oracle's next pick

    flops = np.concatenate([np.full(9990, 1.0), np.full(10, 100.0)])  # 10 of 10000 configs are good
    gates = room_gates(flops, plan=64, min_random_plans=10, min_ceiling=3)
    assert [g["good"] for g in gates] == [10, 10]
    assert gates[0]["expected_random"] == pytest.approx(10001 / 11)  # 909 >= 640: room to search
    assert gates[0]["random_gate"] and gates[0]["ceiling_gate"]
    flat = room_gates(np.linspace(0.9, 1.0, 10000), plan=64, min_random_plans=10, min_ceiling=3)
    assert not flat[0]["random_gate"] and not flat[0]["ceiling_gate"]  # half the space is within 95%


def test_regret_area_compares_how_close_runs_stayed_to_the_optimum():
    from benchmarks.harness.report import study_stats

    def run(scheme: str, seed: int, curve: list[float]) -> dict:
        trials = [{"clock": float(i + 1), "best_gflops": b, "gflops": b, "key": str(i)} for i, b in enumerate(curve)]
        return {"scheme": scheme, "seed": seed, "trials": trials, "clock": float(len(curve))}

    runs = []
    for seed in range(8):  # B reaches the optimum early, A late; both reach it, so only the area tells them apart
        runs.append(run("A", seed, [0.5] * 6 + [1.0] * 2))
        runs.append(run("B", seed, [0.5] * 2 + [1.0] * 6))
    study = {"mode": "replay", "optimum_gflops": 1.0, "runs": runs, "workload": "w"}
    rows = {r["metric"]: r for r in study_stats([study], ["A", "B"], "A", 1.0)}
    # A's mean regret 6 * 0.5 / 8, B's 2 * 0.5 / 8: B's area is a third of A's
    assert rows["regret area"]["median"] == pytest.approx(3.0)
    assert rows["final best"]["median"] == pytest.approx(1.0)


def test_live_runs_are_compared_within_their_budget_and_late_trials_are_not_counted(tmp_path):
    from benchmarks.harness.report import write_report

    def run(scheme: str, seed: int, gflops: list[float], step: float) -> dict:
        trials, best = [], 0.0
        for i, g in enumerate(gflops):
            best = max(best, g)
            trials.append({"clock": step * (i + 1), "best_gflops": best, "gflops": g, "key": f"{scheme}{i}"})
        return {
            "scheme": scheme,
            "seed": seed,
            "trials": trials,
            "clock": step * len(gflops),
            "best_gflops": best,
            "refits": 0,
            "search_time": 0.0,
        }

    runs = []
    for seed in range(4):  # A's best (100) lands at 12 s, past the 10 s budget; B reaches 80 at 4 s
        runs.append(run("A", seed, [10.0, 20.0, 100.0], 4.0))
        runs.append(run("B", seed, [50.0, 80.0], 2.0))
    common = {t["key"]: t["gflops"] for r in runs for t in r["trials"]}
    study = {
        "mode": "hardware",
        "workload": "w",
        "task": "t",
        "common_gflops": common,
        "runs": runs,
        "time_budget": 10.0,
    }
    meta = {
        "host": {},
        "command": "test",
        "schemes": ["A", "B"],
        "baseline": "A",
        "target_fraction": 0.75,
        "mode": "hardware",
    }
    rows = {r["metric"]: r for r in write_report(str(tmp_path), "t", meta, [study])["stats"]}
    # cut at 10 s the reference is 80 (B's), the target 60: A never reaches it (censored at 10 s, not 12 s)
    assert rows["seconds"]["scheme_reached"] == 4 and rows["seconds"]["baseline_reached"] == 0
    assert rows["seconds"]["median"] == pytest.approx(10.0 / 4.0)
    assert rows["final best"]["median"] == pytest.approx(80.0 / 20.0)
    summary = (tmp_path / "summary.md").read_text()
    assert "cut at its budget (10 s)" in summary and "4 trial(s)" in summary
    kept = json.loads((tmp_path / "results.json").read_text())["studies"][0]["runs"][0]["trials"]
    assert len(kept) == 3  # the raw results keep the late trial


def test_the_memory_probe_gates_too_and_older_readings_without_it_still_pass():
    steady = [1e-3 * (1 + 0.001 * (k % 3)) for k in range(30)]
    slow_memory = [x * 1.10 for x in steady]  # bandwidth taken by a neighbour: the L2 probe does not see it
    before = ProbeReading("before", 0.0, [0.5] * 3, steady, steady)
    after = ProbeReading("after", 1.0, [0.5] * 3, steady, slow_memory)
    gate = NoiseGate(readings=[before, after])
    assert gate.drift == pytest.approx(1.0) and gate.memory_drift == pytest.approx(1.10)
    assert not gate.passed and "memory drift 1.100x" in gate.sentence()
    noisy = ProbeReading("after", 1.0, [0.5] * 3, steady, [x * (1 + 0.2 * (k % 2)) for k, x in enumerate(steady)])
    assert noisy.memory_robust_cv > 0.03 and not NoiseGate(readings=[before, noisy]).passed
    old = NoiseGate(readings=[_reading("before", steady), _reading("after", steady)])  # no memory probe recorded
    assert old.passed and old.readings[0].memory_median is None


def test_a_gate_builds_its_probes_once_warms_them_up_once_and_reads_both_in_turns(monkeypatch):
    import benchmarks.noise_gate as ng

    calls: list[str] = []
    built: list[str] = []

    def fake(name: str, seconds: float):
        def build() -> ng.Timer:
            built.append(name)
            return lambda: calls.append(name) or seconds

        return build

    monkeypatch.setattr(ng, "probe_timer", fake("compute", 1e-3))
    monkeypatch.setattr(ng, "memory_probe_timer", fake("memory", 3e-2))
    monkeypatch.setattr(ng, "core_probe_seconds", lambda: [1e-3, 1e-3])
    gate = NoiseGate(repeats=4)
    first = gate.probe("before")
    assert built == ["compute", "memory"] and calls[: 2 * ng.WARM_UP] == ["compute", "memory"] * ng.WARM_UP
    assert first.seconds == [1e-3] * 4 and first.memory_seconds == [3e-2] * 4
    calls.clear()
    gate.probe("after")
    assert built == ["compute", "memory"] and calls == ["compute", "memory"] * 4  # no rebuild, no second warm-up
    assert gate.passed and [r.label for r in gate.readings] == ["before", "after"]


def test_the_per_cpu_probe_times_every_allowed_cpu_and_is_recorded_but_not_gated():
    import os

    from benchmarks.noise_gate import core_probe_seconds

    allowed = os.sched_getaffinity(0)
    seconds = core_probe_seconds(repeats=2, size=64, calls=2)
    assert len(seconds) == len(allowed) and all(s > 0 for s in seconds)
    assert os.sched_getaffinity(0) == allowed  # the thread may run anywhere again
    steady = [1e-3 * (1 + 0.001 * (k % 3)) for k in range(30)]
    lopsided = ProbeReading("after", 1.0, [0.5] * 3, steady, steady, [1e-3, 1.6e-3])
    gate = NoiseGate(readings=[ProbeReading("before", 0.0, [0.5] * 3, steady, steady, [1e-3, 1e-3]), lopsided])
    assert lopsided.core_spread == pytest.approx(1.6) and gate.passed  # one slow CPU is shown, not gated
    assert "per-CPU probe 1.00/1.60 ms" in gate.sentence()
    assert gate.to_json()["readings"][1]["core_spread"] == pytest.approx(1.6)


def test_sweep_logs_are_read_and_appended_to_gzipped_as_well_as_plain(tmp_path):
    """Sweeps are committed as .jsonl.gz: the loaders read either form alike, a gzipped sweep resumes in whole
    gzip members, its gate file is the plain sweep's, and the default sweep of a workload is the gzipped one."""
    import gzip

    from benchmarks._common import load_records, sweep_log
    from benchmarks.sweep import append_records, gate_path

    task = get_workload("batch_matmul:B=2,M=16,N=16,K=16,layout=NT,space=autotvm").create_task(adatune.target.host())
    pairs = [
        (
            MeasureInput(task, task.space.get(k)),
            MeasureResult((1e-5 * (1 + k % 5),) * 3, MeasureErrorNo.NO_ERROR, 0.1, 0.0, runs=9),
        )
        for k in range(14)
    ]
    plain, packed = tmp_path / "s.jsonl", tmp_path / "s.jsonl.gz"
    save_to_file(str(plain), pairs[:12])
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert (
        [r.key for r in load_records(str(packed))]
        == [r.key for r in load_records(str(plain))]
        == [str(k) for k in range(12)]
    )
    ((path, _, table),) = load_sweep_tasks([str(tmp_path / "*.gz")])
    assert path == str(packed) and table == load_sweep_tasks([str(plain)])[0][2]
    append_records(str(packed), pairs[12:13])
    append_records(str(packed), pairs[13:])
    assert [r.key for r in load_records(str(packed))] == [str(k) for k in range(14)]
    assert gate_path(str(packed)) == gate_path(str(plain)) == str(tmp_path / "s.gate.json")
    assert sweep_log(str(tmp_path), "s") == str(packed) and sweep_log(str(tmp_path), "t") == str(tmp_path / "t.jsonl")


def test_sweep_sessions_map_to_log_lines_and_remeasured_configs_count_as_gated():
    from types import SimpleNamespace

    from benchmarks.sweep import gated_keys, session_lines

    def session(measured: int, passed: bool, first: int | None = None) -> dict:
        s = {"measured": measured, "noise_gate": {"passed": passed}}
        return s if first is None else {**s, "first_line": first}

    # 3 lines before any gate, a failed legacy session (2), a passed legacy one (2), then a re-measure (3)
    sessions = [session(2, False), session(2, True), session(3, True, first=7)]
    assert session_lines(sessions, 10) == [(3, 5, False), (5, 7, True), (7, 10, True)]
    keys = ["a", "b", "c", "d", "e", "f", "g", "a", "b", "d"]  # a, b, d re-measured in the last session
    records = [SimpleNamespace(key=k) for k in keys]
    assert gated_keys(records, sessions) == {"a", "b", "d", "f", "g"}  # c: before the gate; e: failed session
    assert gated_keys(records[:7], sessions[:2]) == {"f", "g"}


def test_drift_is_the_reading_furthest_from_the_first_and_stored_sessions_are_rechecked():
    from benchmarks.noise_gate import drift_passes
    from benchmarks.sweep import session_passed

    steady = [1e-3] * 30
    flipped = [1.6e-3] * 30
    gate = NoiseGate(readings=[_reading("before", steady), _reading("middle", flipped), _reading("after", steady)])
    assert gate.drift == pytest.approx(1.6) and not gate.passed  # the last reading alone matches the first
    stored = gate.to_json()
    assert not drift_passes(stored["readings"])
    assert not session_passed({"noise_gate": {**stored, "passed": True}})  # written under the old rule
    assert session_passed({"noise_gate": {"passed": True}})  # no readings stored: the verdict stands


def test_dietcode_benchmark_retimes_every_arm_interleaved_and_states_the_goals():
    """The DietCode benchmark's last pass: at each T every arm is timed in turns (median of the rounds becomes
    its latency); the goals compare DietCode with torch at every T and with per-shape at its tuned T."""
    from benchmarks.dietcode.report import goals
    from benchmarks.dietcode.retime import retime
    from benchmarks.dietcode.run import ArmResult

    calls: list[tuple[str, int]] = []

    def timer(name: str, seconds: float):
        def at(t: int) -> float:
            calls.append((name, t))
            return seconds * t

        return at

    dc = ArmResult("g", "dietcode", 10.0, {1: 9.0, 2: 9.0})
    torch_ = ArmResult("g", "torch", 0.0, {1: 9.0, 2: 9.0})
    shape = ArmResult("g", "per-shape", 120.0, {1: 9.0, 2: 9.0}, extra={"kernels_at": [2]})
    retime([(dc, timer("dc", 1.0)), (torch_, timer("torch", 1.1)), (shape, timer("shape", 0.5))], rounds=3, settle_s=0)
    assert calls[:9] == [("dc", 1), ("torch", 1), ("shape", 1), ("shape", 1), ("torch", 1), ("dc", 1)] + [
        ("dc", 1), ("torch", 1), ("shape", 1)]  # fmt: skip
    assert dc.latency == {1: 1.0, 2: 2.0} and dc.extra["latency_passes"][0] == {1: 9.0, 2: 9.0}
    assert len(dc.extra["latency_rounds"][2]) == 3
    (g,) = goals([dc, torch_, shape])
    assert g["speed_vs_torch_geomean"] == pytest.approx(1.1) and g["t_below_0_9"] == []
    assert g["vs_per_shape_at_tuned_t"] == pytest.approx(2.0)  # only T=2 was tuned per shape
    assert g["tuning_time_share"] == pytest.approx(10.0 / (120.0 / 1 * 2))


def test_time_to_latency_takes_the_first_checkpoint_retimed_at_or_below_the_engine():
    from benchmarks.models.report import time_to_latency
    from benchmarks.models.run import checkpoint_name

    cps = [
        {"tuning_s": 60.0, "retimed_s": 0.030},
        {"tuning_s": 120.0, "retimed_s": 0.019},
        {"tuning_s": 180.0, "retimed_s": 0.021},  # slower again: the first crossing counts
        {"tuning_s": 240.0},  # a checkpoint that was not re-timed never counts
    ]
    assert time_to_latency(cps, 0.020) == 120.0
    assert time_to_latency(cps, 0.030) == 60.0
    assert time_to_latency(cps, 0.010) is None
    assert checkpoint_name("rfei-ae", 0) == "rfei-ae@1"


def _seed_run(seed: int, ort: float, arm_s: list[float]) -> dict:
    """A minimal results.json of benchmarks.models: one model, one arm, checkpoints re-timed in turns."""
    cps = [{"tuning_s": 60.0 * (k + 1), "retimed_s": s} for k, s in enumerate(arm_s)]
    return {
        "meta": {"config": {"seed": seed}, "host": {"model": "cpu", "mcpu": "x", "isa": "avx2"}},
        "models": [
            {
                "model": "resnet18",
                "final": {"onnxruntime": ort, "pytorch": 2 * ort, "rfei-ae": arm_s[-1]},
                "arms": [{"arm": "rfei-ae", "tuning_s": 60.0 * len(arm_s), "checkpoints": cps}],
            }
        ],
    }


def test_seed_summary_takes_ratios_inside_each_run_and_counts_seeds_that_never_reached_an_engine():
    import math

    from benchmarks._common import geomean_interval
    from benchmarks.models.seeds import summarize

    runs = [
        _seed_run(0, 0.020, [0.030, 0.019]),  # reaches onnxruntime at 2 min
        _seed_run(1, 0.040, [0.050, 0.041]),  # never reaches onnxruntime (its own run's 40 ms)
        _seed_run(2, 0.020, [0.018, 0.018]),  # at the first checkpoint
    ]
    (cell,) = summarize(runs)
    assert cell.seeds == [0, 1, 2]
    assert cell.speedup["onnxruntime"] == pytest.approx([0.020 / 0.019, 0.040 / 0.041, 0.020 / 0.018])
    assert cell.reached_s["onnxruntime"] == [120.0, None, 60.0]
    assert cell.median_reached("onnxruntime") == 120.0  # two of three reached: the median is the slower of them
    assert cell.reached_s["pytorch"] == [60.0, 60.0, 60.0]
    g, lo, hi = cell.geomean["onnxruntime"]
    assert lo < g < hi and g == pytest.approx(math.prod(cell.speedup["onnxruntime"]) ** (1 / 3))
    assert summarize([_seed_run(0, 0.020, [0.030, 0.025])])[0].median_reached("onnxruntime") is None
    assert math.isnan(geomean_interval([1.2])[1])
    with pytest.raises(ValueError, match="positive"):
        geomean_interval([1.0, -1.0])


def test_the_paper_preset_times_candidates_at_n_500_and_the_adaptive_arm_in_micro_batches_of_50():
    import argparse

    from benchmarks.harness.__main__ import _hardware_evaluator
    from benchmarks.harness.run import _options

    flags = argparse.Namespace(paper=True, number=10, repeat=10, min_converge_coef=0.1)
    evaluator = _hardware_evaluator(flags)
    opts = _options(evaluator, timeout=60.0, n_parallel=1)
    try:
        de, ae, common = (opts[k].runner.eval_config for k in ("DE", "AE", "common"))
        assert (de.cap_runs, de.min_converge_coef) == (500, None)
        assert (ae.cap_runs, ae.micro_batch, ae.min_micro_batches, ae.min_converge_coef) == (500, 50, 3, 0.1)
        assert ae.adaptive_micro_batch * ae.min_micro_batches == 150  # the floor: 30% of n
        assert (common.cap_runs, common.min_converge_coef) == (500, None)
    finally:
        for opt in opts.values():
            opt.close()
    plain = _hardware_evaluator(argparse.Namespace(paper=False, number=5, repeat=4, min_converge_coef=0.2))
    assert plain == {"number": 5, "repeat": 4, "min_converge_coef": 0.2, "common_repeat": 12}


def test_trace_search_summary_compares_each_arm_with_the_template_seed_by_seed():
    from benchmarks.trace_search.report import summarise
    from benchmarks.trace_search.run import ArmResult

    runs = [
        ArmResult("dense-1024", "knob-xgb", 0, trials=16, best=0.010),
        ArmResult("dense-1024", "knob-xgb", 1, trials=16, best=0.020),
        ArmResult("dense-1024", "trace-xgb", 0, trials=16, best=0.040),  # 4x slower than seed 0's template
        ArmResult("dense-1024", "trace-xgb", 1, trials=16, best=0.020),  # as fast as seed 1's
        ArmResult("dense-1024", "trace-rfei", 0, trials=0, error="RuntimeError: boom"),
    ]
    rows = {r["arm"]: r for r in summarise(runs)}
    assert rows["trace-xgb"]["speed_vs_knob_xgb"] == pytest.approx(0.5)  # geomean of 1/4 and 1
    assert (rows["trace-xgb"]["best_ms_min"], rows["trace-xgb"]["best_ms_max"]) == pytest.approx((20.0, 40.0))
    assert rows["knob-xgb"]["speed_vs_knob_xgb"] == pytest.approx(1.0)
    assert rows["trace-rfei"]["failed"] == 1 and rows["trace-rfei"]["errors"] == ["RuntimeError: boom"]


def test_a_sweep_batch_is_built_once_and_run_again_until_both_readings_around_it_are_fast():
    from types import SimpleNamespace

    from benchmarks.host_state import FastWatch
    from benchmarks.sweep import measure_in_fast_state

    calls: list[str] = []
    runner = SimpleNamespace(
        device_limits=lambda target: None,
        run=lambda inputs, builds: calls.append("run") or [f"result of {b}" for b in builds],
    )
    builder = SimpleNamespace(build=lambda inputs, limits: calls.append("build") or [f"lib {i}" for i in inputs])
    option = SimpleNamespace(builder=builder, runner=runner)
    inputs = [SimpleNamespace(task=SimpleNamespace(target=None))] * 2
    fast, slow = 1e-4, 1.9e-4
    # before run 1 fast, after it slow; run 2 between fast readings
    watch = FastWatch(iter([fast, slow, fast, fast]).__next__)
    results, around, runs = measure_in_fast_state(option, inputs, watch, tries=4, wait_seconds=0.0)  # type: ignore[arg-type]
    assert calls == ["build", "run", "run"] and runs == 2 and around == [fast, fast]
    assert len(results) == 2
    calls.clear()
    watch = FastWatch(iter([fast] + [slow] * 10).__next__)
    _, around, runs = measure_in_fast_state(option, inputs, watch, tries=2, wait_seconds=0.0)  # type: ignore[arg-type]
    assert calls == ["build", "run", "run"] and runs == 2 and around[1] == slow  # gives up: the last run is kept
    with pytest.raises(ValueError, match="state-tries"):
        measure_in_fast_state(option, inputs, watch, tries=0, wait_seconds=0.0)  # type: ignore[arg-type]


def test_a_host_state_session_gates_the_batches_run_between_steady_fast_readings():
    from types import SimpleNamespace

    from benchmarks.sweep import fast_batch_lines, gated_keys

    fast, slow = 1e-4, 1.9e-4
    brackets = [[fast, fast]] * 5 + [[fast, slow], [slow, slow]]
    batches = [[2 * k, 2, 1] for k in range(7)]  # two configs per batch, lines 0-13
    session = {
        "measured": 14,
        "first_line": 0,
        "noise_gate": {"passed": False},  # its before/after gate failed: the batches still count
        "host_state": {"tolerance": 0.1, "batches": batches, "brackets_s": brackets, "readings": 20},
    }
    assert fast_batch_lines(session) == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]
    records = [SimpleNamespace(key=str(k)) for k in range(14)]
    assert gated_keys(records, [session]) == {str(k) for k in range(10)}
    unsteady = {**session, "host_state": {**session["host_state"], "brackets_s": brackets[5:] * 3}}
    assert fast_batch_lines(unsteady) == []  # fewer than MIN_ROUNDS fast batches
    assert fast_batch_lines({"measured": 1, "noise_gate": {"passed": True}}) == []


def test_a_sweep_refuses_to_add_another_machines_timings():
    from types import SimpleNamespace

    from benchmarks.sweep import check_same_host

    zen5 = {"kind": "llvm", "mcpu": "znver5", "num-cores": 2}
    records = [SimpleNamespace(target=dict(zen5))]
    check_same_host(records, dict(zen5), "s.jsonl")  # the same machine resumes
    check_same_host([], {"kind": "llvm", "mcpu": "znver4"}, "s.jsonl")  # a new sweep
    with pytest.raises(SystemExit, match="znver5.*znver4.*another --out"):
        check_same_host(records, {**zen5, "mcpu": "znver4"}, "s.jsonl")


def test_a_live_study_killed_before_its_re_measurement_keeps_every_finished_run(tmp_path, monkeypatch):
    import benchmarks.harness.__main__ as harness_main
    import benchmarks.harness.run as harness_run

    class QuietGate:  # the gate's probes time a 256 MiB stream; this test is about what is saved
        def probe(self, _when: str) -> None:
            pass

    def killed(*_args, **_kwargs):
        raise KeyboardInterrupt  # as if the study were stopped after its last run

    def one_option(evaluator, timeout, n_parallel):  # every evaluator one runner: each starts a worker (~5 s)
        option = adatune.measure_option(adatune.LocalBuilder(n_parallel=1), adatune.LocalRunner(number=2, repeat=3))
        return {"DE": option, "AE": option, "common": option}

    monkeypatch.setattr(harness_main, "NoiseGate", QuietGate)
    monkeypatch.setattr(harness_run, "remeasure", killed)
    monkeypatch.setattr(harness_run, "_options", one_option)
    out = tmp_path / "live"
    argv = ["hardware", "--workloads", "dense:M=16,N=16,K=16", "--schemes", "Random", "--baseline", "Random"]
    argv += ["--seeds", "2"]
    argv += ["--budget", "0.5", "--number", "2", "--repeat", "3", "--n-parallel", "1", "--out", str(out)]
    with pytest.raises(KeyboardInterrupt):
        harness_main.main(argv)
    saved = json.loads((out / "results.json").read_text())
    assert saved["partial"] is True and saved["meta"]["schemes"] == ["Random"]
    (study,) = saved["studies"]
    assert study["partial"] is True and study["common_gflops"] == {}
    assert [(r["scheme"], r["seed"]) for r in study["runs"]] == [("Random", 0), ("Random", 1)]
    # a random candidate may fail to build or run; each finished run keeps its trials, some of them measured
    assert all(r["trials"] and any(t["gflops"] > 0 for t in r["trials"]) for r in study["runs"])


def test_the_dietcode_benchmark_takes_a_dynamic_gemm_that_is_not_berts(tmp_path: pathlib.Path) -> None:
    """``--gemm NAME=KIND:A:B`` adds a workload beside BERT's, bad specs and unknown or taken names are named."""
    import argparse

    from benchmarks.dietcode.__main__ import _gemm_spec, main, workloads

    assert _gemm_spec("mlp=dense:512:2048") == ("mlp", "dense", 512, 2048)
    for bad in ("dense:1:2", "x=conv:1:2", "x=dense:1", "x=dense:a:2", "x=bmm_nt:0:4"):
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(repr(bad)) if "=" in bad else "NAME="):
            _gemm_spec(bad)
    wl = workloads((1, 64), [("heads8", "bmm_nt", 8, 32)])
    assert (wl["heads8"].kind, wl["heads8"].dims, wl["heads8"].t_range) == ("bmm_nt", (8, 32), (1, 64))
    assert "scores" in wl
    with pytest.raises(ValueError, match="taken"):
        workloads((1, 64), [("qkv", "dense", 8, 8)])
    out = tmp_path / "run"
    assert main(["--workloads", "nope", "--gemm", "mlp=dense:8:8", "--out", str(out)]) == 2
    assert not out.exists()


def test_the_papers_arms_and_the_a_arms_of_each_fix_build_what_their_names_say(matmul_task):
    """Each A/B replay of issue 67 differs in one setting: the scheme pairs are checked to build exactly it."""
    from benchmarks.harness.schemes import SCHEMES, make_tuner

    def build(name: str) -> typing.Any:
        return make_tuner(name, matmul_task, seed=0, plan_size=16)

    assert build("RFEI+SA").model_optimizer.temp_scale == "spread"
    assert build("RFEI+SA/abs-T").model_optimizer.temp_scale == "absolute"
    assert (
        build("RFEI+CSA+AE/abs-T").model_optimizer.temp_scale == "absolute"
        and SCHEMES["RFEI+CSA+AE/abs-T"].adaptive_evaluator
    )
    assert build("XGB+SA").model_optimizer.temp_scale == "absolute"  # AutoTVM's rule, the baseline's
    for fixed, old in (("SA+AS", "SA+AS/eps"), ("RL+AS", "RL+AS/eps")):
        assert (build(fixed).eps_greedy, build(old).eps_greedy) == (0.0, 0.05)
    for name, plan in (("AutoTVM-2020", 16), ("AutoTVM-2020/32", 32)):
        tuner = build(name)
        assert (tuner.cost_model.loss_type, tuner.cost_model.feature_type, tuner.plan_size) == ("rank", "itervar", plan)
    released = build("RFEI-released+CSA+AE")
    model = released.cost_model
    assert (model.n_trees, model.max_features, model.uncertainty, model.features.feature_type) == (
        10,
        10,
        "trees",
        "itervar",
    )
    assert released.plan_size == 32 and released.exploration.n_context == 20 and released.contextual
    assert released.model_optimizer.temp_scale == "absolute"


def test_the_evaluators_stopping_rules_replay_on_recorded_micro_batches(matmul_task, tmp_path):
    """On a steady config the per-batch rule stops at its floor and the paper's cumulative rule with no floor after
    one batch; on a noisy one both spend all n; the fixed rule ranks exactly as itself."""
    from benchmarks.harness.evaluator_rules import RULES, evaluator_rules_study, replay_rule

    steady, noisy = [1e-4] * 10, [1e-4 * (1 + 0.5 * (k % 2)) for k in range(10)]
    runs = [50] * 10
    assert replay_rule("per-batch/3", steady, runs, 0.1)[1] == 150
    assert replay_rule("per-batch/2", steady, runs, 0.1)[1] == 100
    assert replay_rule("cumulative/1", steady, runs, 0.1)[1] == 50
    assert replay_rule("fixed", steady, runs, 0.1) == (1e-4, 500, pytest.approx(0.05))
    assert replay_rule("per-batch/3", noisy, runs, 0.1)[1] == 500
    # the running throughput's CV shrinks by construction: the paper's formula stops where per-batch CV does not
    assert replay_rule("cumulative/3", noisy, runs, 0.1)[1] < 500
    log = tmp_path / "sweep.jsonl"
    space = matmul_task.config_space
    rng = np.random.default_rng(0)
    save_to_file(
        str(log),
        [
            (
                MeasureInput(matmul_task, space.get(i)),
                MeasureResult(
                    tuple(1e-5 * (1 + i % 7) * (1 + 0.05 * rng.standard_normal(10))),
                    MeasureErrorNo.NO_ERROR, 0.1, 0.0, build_time=0.2, runs=500,
                ),
            )
            for i in range(40)
        ],
    )  # fmt: skip
    study = evaluator_rules_study(str(log))
    assert study["configs"] == 40 and list(study["rules"]) == list(RULES)
    fixed = study["rules"]["fixed"]
    assert fixed["spearman"] == 1.0 and fixed["first_pick_share"] == 1.0 and fixed["measure_less"][0] == 1.0
    assert study["rules"]["per-batch/3"]["measure_less"][0] > 1.0  # steady enough to stop before n
    with pytest.raises(ValueError, match="micro-batches"):
        evaluator_rules_study(str(log), min_batches=11)
