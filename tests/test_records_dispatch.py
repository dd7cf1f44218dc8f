"""Records, best_records, apply_history_best and resuming a run that was killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

import adatune
from adatune.measure import MeasureInput
from adatune.records import best_records, encode, load_from_file
from adatune.tuners import RandomTuner, XGBTuner

TESTS = Path(__file__).parent


def _log(task, option, path, n=12, seed=0):
    tuner = RandomTuner(task, seed=seed)
    tuner.tune(n_trial=n, measure_option=option, callbacks=[adatune.callback.log_to_file(str(path))])
    return tuner


def test_round_trip_and_corrupt_lines_skipped(matmul_task, replay_option, tmp_path):
    path = tmp_path / "r.jsonl"
    tuner = _log(matmul_task, replay_option, path)
    with open(path, "a") as f:
        f.write('{"v": 1, "target": {"kind": "llvm"}, "task": ["test/ma')  # a line cut by a kill
        f.write("\nnot json at all\n")
    with pytest.warns(UserWarning, match="corrupt record"):
        recs = list(load_from_file(str(path)))
    assert len(recs) == 12
    assert recs[0].task_name == "test/matmul" and recs[0].args == [32, 32, 32, "float32"]
    best = best_records(recs)[matmul_task.workload_key]
    assert best.config_index == tuner.best_config.index


def test_pick_best_is_a_deprecated_name_of_best_records(matmul_task, replay_option, tmp_path):
    """``records.pick_best(records, target)`` and ``adatune.pick_best`` warn and forward to ``best_records``;
    AutoTVM's ``record.pick_best(in_file, out_file)`` is another function and does not warn."""
    path = tmp_path / "r.jsonl"
    _log(matmul_task, replay_option, path)
    recs = list(load_from_file(str(path)))
    want = best_records(recs, matmul_task.target)
    assert list(want) == [matmul_task.workload_key]
    for old in (adatune.records.pick_best, adatune.pick_best):
        with pytest.warns(DeprecationWarning, match="renamed best_records"):
            got = old(recs, matmul_task.target)
        assert {k: r.key for k, r in got.items()} == {k: r.key for k, r in want.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        adatune.record.pick_best(str(path), str(tmp_path / "best.jsonl"))


def test_apply_history_best_dispatches_best_and_never_other_targets(matmul_task, replay_option, tmp_path):
    import fixture_templates

    path = tmp_path / "r.jsonl"
    tuner = _log(matmul_task, replay_option, path, n=20)
    with adatune.apply_history_best(str(path)):
        sch, _ = fixture_templates.matmul(32, 32, 32, "float32")
    best = tuner.best_config
    assert f"factors=[{best['tile_i'].size[0]}, {best['tile_i'].size[1]}]" in str(sch.trace)
    # the same records under another CPU target: they must not apply; the fallback warns once
    other = adatune.target.create({"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "skylake"})
    with adatune.apply_history_best(str(path)), other, warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sch2, _ = fixture_templates.matmul(32, 32, 32, "float32")
        fixture_templates.matmul(32, 32, 32, "float32")
    assert sum("fallback" in str(x.message) for x in w) == 1
    assert "factors=[32, 1]" in str(sch2.trace)  # fallback: no split


def test_encode_contains_everything_needed(matmul_task, replay_option):
    cfg = matmul_task.config_space.get(3)
    res = replay_option.measure([MeasureInput(matmul_task, cfg)])[0]
    line = encode(MeasureInput(matmul_task, cfg), res)
    for key in (
        '"v":2',
        '"kind":"knob"',
        '"key":"3"',
        '"target"',
        '"mcpu"',
        '"task"',
        '"entity"',
        '"error_no"',
        '"all_cost"',
        '"build_time"',
    ):
        assert key in line


SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    import adatune, fixture_templates
    from adatune.tuners import XGBTuner
    task = adatune.task.create("test/matmul", (32, 32, 32, "float32"), adatune.target.host())
    option = adatune.measure_option(adatune.LocalBuilder(), adatune.LocalRunner(number=2, repeat=2))
    XGBTuner(task, plan_size=8, seed=0).tune(n_trial=10_000, measure_option=option, batch_size=4,
        callbacks=[adatune.callback.log_to_file({log!r})])
""")


def test_resume_after_sigkill_loses_and_remeasures_nothing(matmul_task, tmp_path, checked_option):
    log = tmp_path / "killed.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT.format(tests=str(TESTS), log=str(log))],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 240
    while time.time() < deadline:
        if log.exists() and sum(1 for _ in open(log)) >= 12:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the tuner and its worker processes
    proc.wait()
    before = list(load_from_file(str(log)))
    assert len(before) >= 12
    tuner = XGBTuner(matmul_task, plan_size=8, seed=0)
    assert tuner.load_history(before) == len({r.config_index for r in before})
    tuner.tune(n_trial=8, measure_option=checked_option, callbacks=[adatune.callback.log_to_file(str(log))])
    after = [r.config_index for r in load_from_file(str(log))]
    assert after[: len(before)] == [r.config_index for r in before]  # nothing lost
    assert len(after) == len(before) + 8 and len(set(after)) == len(after)  # nothing measured twice


V1_LOG = os.path.join(os.path.dirname(__file__), "data", "records_v1.jsonl")


def test_logs_of_format_v1_still_load_resume_and_apply(replay_table):
    """A committed log written by the previous format (v1, knob configs only)."""
    recs = list(adatune.load_from_file(V1_LOG))
    assert len(recs) == 12 and all(r.version == 1 and r.kind == "knob" for r in recs)
    assert [r.key for r in recs] == [str(i) for i in range(12)]
    inp, res = recs[3]  # AutoTVM's unpacking
    assert inp.config.index == 3 and res.costs == (4e-4, 4e-4)
    task = recs[0].create_task()  # on the recorded target, whatever this machine is
    tuner = adatune.tuners.RandomTuner(task, seed=0)
    assert tuner.load_history(adatune.load_from_file(V1_LOG)) == 12
    assert tuner.best_config.index == 0  # the first of the fastest (indices 0, 5, 10)
    ctx = adatune.apply_history_best(V1_LOG)
    assert ctx.query(task.target, task.workload).index == 0
    table = {(task.workload_key, k[1]): v for k, v in replay_table.items()}
    tuner.tune(n_trial=20, measure_option=adatune.measure_option(runner=adatune.ReplayRunner(table)))
    assert not {t.key for t in tuner.trials[12:]} & {str(i) for i in range(12)}


def test_a_log_stores_each_workload_once_on_a_record_line(matmul_task, replay_option, tmp_path):
    """The task's stored form rides on the first record of its workload in each file, and only there: appending
    to a log (a resumed run, another process) does not repeat it; a file written anew gets it again."""
    import io
    import json

    from adatune.records import save_to_file

    path = tmp_path / "r.jsonl"
    _log(matmul_task, replay_option, path, n=4)
    _log(matmul_task, replay_option, path, n=4, seed=1)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(lines) == 8 and all("key" in x for x in lines)  # still one record per line
    assert [("workload" in x) for x in lines] == [True] + [False] * 7
    assert lines[0]["workload"] == {"imports": ["adatune.testing._templates"]}  # the module defining the template
    path.write_text("")
    _log(matmul_task, replay_option, path, n=2)
    assert "workload" in json.loads(path.read_text().splitlines()[0])
    recs = list(load_from_file(str(path)))
    assert recs[0].workload is not None and recs[1].workload is None
    assert recs[1].create_task().workload_key == matmul_task.workload_key
    stream = io.StringIO()
    pairs = [(MeasureInput(matmul_task, matmul_task.config_space.get(i)), r.result) for i, r in enumerate(recs)]
    save_to_file(stream, pairs[:1])
    save_to_file(stream, pairs[1:])
    assert [("workload" in json.loads(x)) for x in stream.getvalue().splitlines()] == [True, False]


def test_a_stored_module_round_trips_and_bad_text_is_a_value_error(matmul_task):
    import tvm_ffi

    from adatune.trace._candidate import module_from_text, module_to_text

    mod = matmul_task.unscheduled_module()
    assert tvm_ffi.structural_equal(module_from_text(module_to_text(mod)), mod)
    with pytest.raises(ValueError, match="not a stored IRModule"):
        module_from_text("not base64 at all")
