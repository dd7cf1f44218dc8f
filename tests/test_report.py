"""``adatune report``: committed knob, trace and model logs reduce to the right curves, error counts and
estimated model latency; the weights a model's tasks carry are stored in the log and read back."""

from __future__ import annotations

import csv
import math
import os

import numpy as np
import pytest

import adatune
from adatune.cli import main
from adatune.measure import MeasureErrorNo, MeasureInput, MeasureResult
from adatune.records import best_records, load_from_file, save_to_file
from adatune.records.report import report, weights_from_csv

ROOT = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "results")
KNOB_LOG = os.path.join(ROOT, "kernels_vs_pytorch", "records", "dense-1024-seed0.jsonl")
MODEL_LOG = os.path.join(ROOT, "models", "records_resnet18_xgb.jsonl")
BERT_LOG = os.path.join(ROOT, "models", "records_bert-base_xgb.jsonl")  # knob and trace tasks
TASKS_CSV = os.path.join(ROOT, "models", "tasks.csv")


def test_a_knob_log_gives_the_best_so_far_and_gflops_of_its_records() -> None:
    rep = report(KNOB_LOG)
    records = list(load_from_file(KNOB_LOG))
    (task,) = rep.tasks
    assert task.trials == len(records) and task.kind == "knob"
    assert task.best == pytest.approx(next(iter(best_records(records).values())).cost)
    assert all(a >= b for a, b in zip(task.best_seconds, task.best_seconds[1:]))  # best so far never rises
    assert all(a <= b for a, b in zip(task.elapsed, task.elapsed[1:])) and task.elapsed[0] >= 0
    assert task.flop == pytest.approx(2 * 1024**3) and task.gflops(task.best) > 1
    assert not rep.is_model and rep.model_latency == []
    assert "dense" in rep.text()


def test_a_model_log_with_the_task_table_gives_the_estimated_latency_and_where_it_goes(tmp_path) -> None:
    weights = weights_from_csv(TASKS_CSV, "resnet18")
    rep = report(MODEL_LOG, weights=weights)
    assert rep.is_model and {t.name for t in rep.tasks if t.weight} == set(weights)
    with open(TASKS_CSV, encoding="utf-8") as f:
        table = [r for r in csv.DictReader(f) if r["model"] == "resnet18" and r["arm"] == "xgb"]
    records = list(load_from_file(MODEL_LOG))
    best = {name: min(r.cost for r in records if r.task_name == name) for name in weights}
    t_end, est = rep.model_latency[-1]
    assert est == pytest.approx(sum(weights[n] * best[n] for n in weights), rel=1e-9) and t_end > 0
    # the benchmark's own table (its best by the mean of repeats, the report's by the median) agrees closely
    assert est == pytest.approx(sum(float(r["weighted_ms"]) for r in table) / 1e3, rel=0.02)
    lat = [y for _, y in rep.model_latency]
    assert all(a >= b - 1e-15 for a, b in zip(lat, lat[1:]))  # the estimate only improves
    shares = rep.remaining()
    assert sum(s for _, _, s in shares) == pytest.approx(1.0)
    assert shares[0][1] == max(t.weight * t.best for t in rep.tasks if t.weight)
    png = rep.plot(str(tmp_path / "model.png"))
    assert os.path.getsize(png) > 10_000
    assert "estimated model latency" in rep.text()


def test_trace_tasks_and_error_kinds_are_reported_per_task() -> None:
    rep = report(BERT_LOG)
    kinds = {t.kind for t in rep.tasks}
    assert kinds == {"knob", "trace"}
    records = list(load_from_file(BERT_LOG))
    for t in rep.tasks:
        mine = [r for r in records if r.task_name == t.name]
        failed = [r for r in mine if r.result.error_no != MeasureErrorNo.NO_ERROR]
        assert t.trials == len(mine) and sum(t.errors.values()) == len(failed)
        assert all(k in MeasureErrorNo.__members__ for k in t.errors)


def test_task_weights_are_stored_in_the_log_and_make_it_a_model_log(tmp_path) -> None:
    task = adatune.task.create("dense.x86", (16, 32, 48, "float32"), adatune.target.host())
    task.uses = {"tiny-model": 3}
    log = tmp_path / "model.jsonl"
    idx = task.config_space.sample(np.random.default_rng(0), 3)
    costs = [2e-3, 1e-3, math.inf]
    pairs = [
        (
            MeasureInput(task, task.config_space.get(i)),
            MeasureResult(
                (c,) if math.isfinite(c) else (),
                MeasureErrorNo.NO_ERROR if math.isfinite(c) else MeasureErrorNo.RUN_TIMEOUT,
                0.1,
                t,
            ),
        )
        for i, c, t in zip(idx, costs, [100.0, 101.0, 102.0])
    ]
    save_to_file(str(log), pairs)
    rep = report(log)
    (t,) = rep.tasks
    assert t.weight == 3 and dict(t.errors) == {"RUN_TIMEOUT": 1}
    assert t.best_seconds == [2e-3, 1e-3, 1e-3] and t.elapsed == [0.0, 1.0, 2.0]
    assert rep.model_latency == [(0.0, 6e-3), (1.0, 3e-3), (2.0, 3e-3)]


def test_the_command_prints_the_table_writes_the_figure_and_rejects_a_missing_log(tmp_path, capsys) -> None:
    png = tmp_path / "r.png"
    assert main(["report", KNOB_LOG, "-o", str(png)]) == 0
    out = capsys.readouterr().out
    assert "trials" in out and png.exists()
    assert main(["report", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("name,count\nx,1\n")
    assert main(["report", KNOB_LOG, "--weights", str(bad)]) == 2
    assert "'task' and 'weight'" in capsys.readouterr().err
