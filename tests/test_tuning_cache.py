"""A tuning cache across models: a second model sharing a workload with the first re-measures none of it (its log
starts from the cache's records, marked, and builds), measures what is new, and adds it to the cache;
``adatune cache ls|show|prune`` and the errors of a bad cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import adatune.models as am
from adatune import cli
from adatune.records import CACHED, load_from_file
from adatune.records.cache import TuningCache


class _First(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.fc = nn.Conv2d(3, 8, 3, 1, 1), nn.Linear(8 * 6 * 6, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))


class _Second(_First):
    """The same convolution (other weights: a workload is its shape, not its constants), another dense."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8 * 6 * 6, 24)


def _model(cls: type[nn.Module], name: str) -> am.Model:
    torch.manual_seed(len(name))
    return am.from_torch(cls().eval(), (torch.randn(1, 3, 6, 6),), name=name)


def _tune(model: am.Model, log: Path, cache: Any, option: Any) -> list:
    tasks = [t for t in am.extract_tasks(model) if t.kind != "trace"]
    am.tune_model(
        model, log, n_trial=2 * len(tasks), strategy="round-robin", round_trials=2, tasks=tasks, progress=False,
        option=option, cache=cache,
    )  # fmt: skip
    return tasks


def test_a_second_model_re_measures_no_workload_the_cache_holds(tmp_path: Path, model_option: Any) -> None:
    cache = TuningCache(tmp_path / "cache")
    first = _tune(_model(_First, "first"), tmp_path / "first.jsonl", cache, model_option)
    assert {r.task_name for r in cache.records()} == {t.task_name for t in first}
    second_model = _model(_Second, "second")
    second = _tune(second_model, tmp_path / "second.jsonl", tmp_path / "cache", model_option)
    shared = {t.task_name for t in first} & {t.task_name for t in second}
    assert len(shared) == 1 and len(second) == 2, (first, second)  # the convolution; the dense layers differ
    in_log = list(load_from_file(tmp_path / "second.jsonl"))
    from_cache = [r for r in in_log if r.task_name in shared]
    assert from_cache and all(CACHED in r.result.extra for r in from_cache)  # copied, none measured
    new = [r for r in in_log if r.task_name not in shared]
    assert len(new) == 2 * len(second) and not any(CACHED in r.result.extra for r in new)  # the budget: all to it
    assert sorted(r.task_name for r in cache.records()) == sorted(
        [r.task_name for r in load_from_file(tmp_path / "first.jsonl")] + [r.task_name for r in new]
    )  # the new workload's records went to the cache, nothing twice
    x = second_model.random_inputs()
    with pytest.warns(UserWarning, match="fallback schedule"):  # its trace tasks (reshape) were not tuned
        compiled = am.build(second_model, tmp_path / "second.jsonl")
    np.testing.assert_allclose(compiled.run(*x)[0], second_model.reference(*x)[0], rtol=1e-4, atol=1e-5)
    assert all(compiled.applied[t.func_name] == "record" for t in second)  # the shared one from the cache


def test_cache_commands_list_show_and_prune(tmp_path: Path, model_option: Any, capsys: pytest.CaptureFixture) -> None:
    directory = tmp_path / "cache"
    assert cli.main(["cache", "ls", "--dir", str(directory)]) == 0
    assert "empty" in capsys.readouterr().out
    tasks = _tune(_model(_First, "first"), tmp_path / "first.jsonl", directory, model_option)
    assert cli.main(["cache", "ls", "--dir", str(directory)]) == 0
    assert f"{len(tasks)} workloads, {2 * len(tasks)} records" in capsys.readouterr().out
    assert cli.main(["cache", "show", "conv2d", "--dir", str(directory)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert len(shown) == 1 and "conv2d" in shown[0] and " ms " in shown[0]
    assert cli.main(["cache", "prune", "--keep", "1", "--dir", str(directory)]) == 0
    assert f"{2 * len(tasks)} records, {len(tasks)} kept" in capsys.readouterr().out
    entries = TuningCache(directory).entries()
    assert [e.records for e in entries] == [1] * len(tasks) and all(e.best_seconds for e in entries)


def test_a_bad_cache_is_named(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is a file, not a directory"):
        TuningCache(tmp_path / "file")
    assert cli.main(["cache", "ls", "--dir", str(tmp_path / "file")]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert cli.main(["cache", "prune", "--keep", "0", "--dir", str(tmp_path)]) == 2
    with pytest.raises(ValueError, match="at least one record"):
        TuningCache(tmp_path).prune(0)
