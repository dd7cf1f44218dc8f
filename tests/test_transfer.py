"""Transfer learning across workloads (AutoTVM's ``load_history`` base model): an XGB tuner fits a base model on
another workload of its template and plans its first batch with it; ``tune_model(transfer=True)`` hands its tuners
the cache's records of other workloads."""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_tuning_cache import _First, _model, _Second, _tune

import adatune
import adatune.models as am
from adatune.measure import MeasureErrorNo, MeasureResult, ReplayRunner
from adatune.records import load_from_file
from adatune.records.cache import TuningCache
from adatune.tuners import RandomTuner, XGBTuner


def _cost(cfg: Any) -> float:
    """Seconds that depend on the inner tiles and the vector knob alone, not on the shape: what transfers."""
    inner = abs(math.log2(cfg["tile_i"].size[-1]) - 3) + abs(math.log2(cfg["tile_j"].size[-1]) - 3)
    return 1e-4 * (1.0 + inner + 2.0 * (1 - cfg["vec"].val))


def _table(task: adatune.task.Task) -> dict:
    return {
        (task.workload_key, i): MeasureResult(
            (_cost(task.config_space.get(i)),), MeasureErrorNo.NO_ERROR, 0.3, time.time(), build_time=0.1, runs=1
        )
        for i in range(len(task.config_space))
    }


def test_an_xgb_tuner_plans_its_first_batch_from_another_workload_of_its_template(tmp_path: Path) -> None:
    host = adatune.target.host()
    seen = adatune.task.create("test/matmul", (32, 32, 32, "float32"), host)
    new = adatune.task.create("test/matmul", (64, 64, 32, "float32"), host)
    log = str(tmp_path / "seen.jsonl")
    option = adatune.measure_option(runner=ReplayRunner(_table(seen)))
    RandomTuner(seen, seed=0).tune(300, option, callbacks=[adatune.callback.log_to_file(log)])
    records = list(load_from_file(log))

    scratch, warm, short = (XGBTuner(new, plan_size=16, seed=0) for _ in range(3))
    assert warm.load_history(records, min_seed_records=100) == 0  # none of them is the new workload's own
    assert short.load_history(records, min_seed_records=301) == 0  # too few to learn from: nothing changes
    assert warm.cost_model.base_model is not None
    assert scratch.cost_model.base_model is None and short.cost_model.base_model is None
    assert [c.key for c in short.plan] == [c.key for c in scratch.plan]  # the random first plan
    cold, planned = np.mean([_cost(c) for c in scratch.plan]), np.mean([_cost(c) for c in warm.plan])
    assert planned < 0.8 * cold, (planned, cold)  # the base model knows which tiles are fast

    warm.tune(32, adatune.measure_option(runner=ReplayRunner(_table(new))), batch_size=16)
    assert len(warm.visited) == 32 and warm.best_flops > 0  # and the model built on it tunes on


def test_tune_model_hands_its_tuners_other_workloads_only_with_transfer(
    tmp_path: Path, model_option: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = TuningCache(tmp_path / "cache")
    first = _tune(_model(_First, "first"), tmp_path / "first.jsonl", cache, model_option)
    handed: list[set[str]] = []
    load = XGBTuner.load_history

    def spy(self: XGBTuner, records: Any, min_seed_records: int = 500) -> int:
        records = list(records)
        handed.append({r.task_name for r in records})
        return load(self, records, min_seed_records)

    monkeypatch.setattr(XGBTuner, "load_history", spy)
    second_model = _model(_Second, "second")
    tasks = [t for t in am.extract_tasks(second_model) if t.kind != "trace"]
    others = {t.task_name for t in first} - {t.task_name for t in tasks}  # the first model's dense layer
    for transfer in (False, True):  # each from a copy of the first model's cache (the second adds to it)
        handed.clear()
        arm = shutil.copytree(cache.directory, tmp_path / f"cache-{transfer}")
        am.tune_model(
            second_model, tmp_path / f"second-{transfer}.jsonl", n_trial=2 * len(tasks), strategy="round-robin",
            round_trials=2, tasks=tasks, progress=False, option=model_option, cache=arm, transfer=transfer,
        )  # fmt: skip
        assert handed and all(bool(others & names) == transfer for names in handed), (transfer, handed)
    with pytest.raises(ValueError, match="tuning cache"):
        am.tune_model(second_model, tmp_path / "x.jsonl", n_trial=2, tasks=tasks, transfer=True)


def test_resnet34_runs_resnet18s_workloads_more_often_and_bert_large_shares_none_with_bert_base() -> None:
    """What the two pairs of built-in models are for: a cache across models (ResNet-34 after ResNet-18) and
    transfer across shapes of one template (BERT-large after BERT-base)."""
    r18, r34 = (am.extract_tasks(am.load_builtin(name)) for name in ("resnet18", "resnet34"))
    assert {t.task_name for t in r34} == {t.task_name for t in r18}
    assert sum(t.weight for t in r34) > sum(t.weight for t in r18)
    module, (x,) = am.bert_large(layers=1, seq=8)
    base, _ = am.bert_base(layers=1, seq=8)
    assert module(x).shape == (1, 8, 1024)
    shapes = {tuple(p.shape) for p in base.parameters() if p.dim() == 2}
    assert shapes.isdisjoint(tuple(p.shape) for p in module.parameters() if p.dim() == 2)
