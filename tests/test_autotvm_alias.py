"""An AutoTVM script runs with one changed line, ``import adatune as autotvm``: AutoTVM's own spellings
(``autotvm.tuner.XGBTuner``, ``autotvm.record.pick_best(in_file, out_file)``, ...) and its flow, end to end
with real measurements on the suite's small matmul template."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings

import fixture_templates
import tvm

import adatune
from adatune.records import load_from_file

# A tutorial-shaped AutoTVM script; only the first line differs from one written for `from tvm import autotvm`.
SCRIPT = textwrap.dedent("""
    import adatune as autotvm
    import tvm

    task = autotvm.task.create("test/matmul", args=(32, 32, 32, "float32"), target="llvm")
    measure_option = autotvm.measure_option(
        builder=autotvm.LocalBuilder(),
        runner=autotvm.LocalRunner(number=2, repeat=2, min_repeat_ms=0, timeout=10),
    )
    tuner = autotvm.tuner.XGBTuner(task)
    tuner.tune(
        n_trial=N_TRIAL,
        measure_option=measure_option,
        early_stopping=None,
        callbacks=[autotvm.callback.progress_bar(N_TRIAL, prefix="matmul"), autotvm.callback.log_to_file(LOG)],
    )
    autotvm.record.pick_best(LOG, BEST)
    with autotvm.apply_history_best(BEST):
        with tvm.target.Target("llvm"):
            s, arg_bufs = matmul(32, 32, 32, "float32")
    func = tvm.tirx.build(s.mod, target="llvm")
""")


def test_an_autotvm_script_runs_with_one_changed_import(tmp_path):
    log, best = str(tmp_path / "matmul.log"), str(tmp_path / "matmul.best.log")
    scope = {"N_TRIAL": 6, "LOG": log, "BEST": best, "matmul": fixture_templates.matmul}
    exec(compile(SCRIPT, "autotvm_script", "exec"), scope)
    tuner = scope["tuner"]
    records = list(load_from_file(log))
    assert len(records) == 6 and all(r.result.ok for r in records)
    assert sorted(tuner.visited) == sorted(r.config_index for r in records)  # config indices, as AutoTVM's
    fastest = min(records, key=lambda r: r.cost)
    (picked,) = list(load_from_file(best))
    assert picked.config_index == fastest.config_index
    assert scope["func"] is not None
    scope["measure_option"].close()


def test_apply_history_best_applies_under_a_plain_llvm_target(replay_table, tmp_path):
    """AutoTVM scripts open ``tvm.target.Target("llvm")``: a plain LLVM target is this host for dispatch."""
    log = str(tmp_path / "matmul.log")
    task = adatune.task.create("test/matmul", (32, 32, 32, "float32"), "llvm")
    tuner = adatune.tuner.RandomTuner(task, seed=0)
    option = adatune.measure_option(runner=adatune.ReplayRunner(replay_table))
    tuner.tune(n_trial=16, measure_option=option, callbacks=[adatune.callback.log_to_file(log)])
    tile_i = tuner.best_config["tile_i"].size
    with adatune.apply_history_best(log), warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback config warns
        with tvm.target.Target("llvm"):
            s, _ = fixture_templates.matmul(32, 32, 32, "float32")
    assert f"factors=[{tile_i[0]}, {tile_i[1]}]" in str(s.trace)


def test_autotvm_spellings_name_adatune_objects(matmul_task):
    import adatune as autotvm

    assert autotvm.tuner.XGBTuner is adatune.tuners.XGBTuner
    assert isinstance(autotvm.tuner.RFEITuner(matmul_task), adatune.tuners.RFEITuner)
    for name in ("Tuner", "RandomTuner", "GridSearchTuner", "ModelBasedTuner"):
        assert getattr(autotvm.tuner, name) is getattr(adatune.tuners, name)
    assert autotvm.tuner.callback.log_to_file is autotvm.callback.log_to_file
    assert autotvm.record.load_from_file is adatune.records.load_from_file
    assert autotvm.record.encode is adatune.records.encode
    assert autotvm.measure.measure_option is autotvm.measure_option
    assert autotvm.task.create is adatune.task.create
    assert (autotvm.template, autotvm.get_config) == (adatune.task.template, adatune.task.get_config)
    assert autotvm.LocalRunner is adatune.measure.LocalRunner and autotvm.RPCRunner is adatune.measure.RPCRunner


def test_record_pick_best_writes_the_fastest_per_target_and_workload(tmp_path):
    """AutoTVM's pick_best(in_file, out_file): one line per (target, workload), the fastest valid, as written."""
    lines = []
    for mcpu, costs in (("znver3", [3e-4, 1e-4, 2e-4]), ("skylake", [5e-4, 4e-4])):
        for i, c in enumerate(costs):
            target = {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": mcpu}
            result = {"costs": [c], "error_no": 0, "all_cost": 0.1, "timestamp": 0.0}
            lines.append(
                json.dumps(
                    {
                        "v": 1,
                        "target": target,
                        "task": ["test/matmul", [32, 32, 32, "float32"]],
                        "config": {"index": i, "entity": {}},
                        "result": result,
                    }
                )
            )
    failed = json.loads(lines[0])
    failed["result"] = {"costs": [], "error_no": 4, "all_cost": 0.1, "timestamp": 0.0}
    (tmp_path / "in.log").write_text("\n".join([json.dumps(failed), *lines, "{corrupt"]) + "\n")
    adatune.record.pick_best(str(tmp_path / "in.log"), str(tmp_path / "out.log"))
    assert (tmp_path / "out.log").read_text().splitlines() == [lines[1], lines[4]]


def test_record_pick_best_keeps_the_workloads_stored_form(tmp_path):
    """The stored form rides on a log's first record of a workload; the picked (faster, later) line gets it."""
    form = {"imports": ["adatune.testing._templates"]}
    lines = []
    for i, c in enumerate([3e-4, 1e-4]):
        line = {
            "v": 2,
            "target": {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "znver3"},
            "task": ["test/matmul", [32, 32, 32, "float32"]],
            "kind": "knob",
            "key": str(i),
            "config": {"kind": "knob", "index": i, "entity": {}},
            "result": {"costs": [c], "error_no": 0, "all_cost": 0.1, "timestamp": 0.0},
        }
        lines.append({**line, "workload": form} if i == 0 else line)
    (tmp_path / "in.log").write_text("".join(json.dumps(x) + "\n" for x in lines))
    adatune.record.pick_best(str(tmp_path / "in.log"), str(tmp_path / "out.log"))
    (out,) = [json.loads(x) for x in (tmp_path / "out.log").read_text().splitlines()]
    assert out == {**lines[1], "workload": form}


def test_the_aliases_and_the_suites_load_only_when_used():
    lazy = ("adatune.tuner", "adatune.record", "adatune.testing", "adatune.tuners")
    code = f"import sys, adatune; print(sorted(m for m in {lazy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
