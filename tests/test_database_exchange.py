"""adatune's records in a MetaSchedule database: a model's best records, exported and applied by TVM's own
``MetaScheduleApplyDatabase`` in a plain Relax flow, schedule the functions ``am.build`` schedules and the compiled
module matches PyTorch; what is not a trace of its workload (the generic program) is reported, not written.
(Reading a database back, written by ``ms.tune_tir``, is tested in test_meta_schedule.py, in ``tune_tir``'s process.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import tvm
import tvm_ffi
from torch import nn
from tvm import relax, te
from tvm.s_tir import meta_schedule as ms

import adatune
import adatune.models as am
from adatune.measure import MeasureErrorNo, MeasureInput, MeasureResult
from adatune.meta_schedule import export_database, workload_module
from adatune.trace import TraceTask

HOST = adatune.target.host()


class _Net(nn.Module):
    """A convolution with batch norm and ReLU, a dense layer with ReLU (knob tasks) and a softmax (a trace task)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn, self.fc = nn.Conv2d(3, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.Linear(8 * 8 * 8, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.conv(x)))
        return torch.softmax(torch.relu(self.fc(torch.flatten(x, 1))), -1)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory, model_option: Any) -> tuple[am.Model, Path, list]:
    """The model, a log of two trials per knob task, and those tasks."""
    torch.manual_seed(0)
    net = _Net().eval()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-0.1, 0.1)
        net.bn.running_var.uniform_(0.5, 1.5)
    model = am.from_torch(net, (torch.randn(1, 3, 8, 8),), name="exchange")
    knob = [t for t in am.extract_tasks(model, HOST) if t.kind != "trace"]
    log = tmp_path_factory.mktemp("exchange") / "exchange.jsonl"
    am.tune_model(
        model, log, n_trial=2 * len(knob), strategy="round-robin", round_trials=2, tasks=knob, progress=False,
        option=model_option, target=HOST,
    )  # fmt: skip
    return model, log, knob


def _plain(func: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
    return func.without_attr("global_symbol").without_attr("tirx.is_scheduled").without_attr("tirx.noalias")


def _applied(mod: tvm.IRModule, db: ms.database.Database) -> tvm.IRModule:
    with HOST, db:
        return relax.transform.MetaScheduleApplyDatabase()(mod)


def test_a_models_records_schedule_a_plain_relax_flow_as_am_build_does(tuned, tmp_path: Path) -> None:
    model, log, knob = tuned
    (tmp_path / "db").mkdir()
    db = ms.database.JSONDatabase(work_dir=str(tmp_path / "db"))
    report = export_database(log, db, HOST)
    assert {t.task_name for t in knob} <= {name for name, how in report.items() if how == "exported"}, report
    reopened = ms.database.JSONDatabase(work_dir=str(tmp_path / "db"))  # what another process reads
    assert len(reopened.get_all_tuning_records()) == list(report.values()).count("exported")
    applied = _applied(model.mod, reopened)
    built = am.build(model, log, HOST, prepack=False)  # the schedules alone (a database carries no weight packing)
    for t in knob:
        for name in t.global_vars:
            func = applied[name]
            assert func.attrs is not None and func.attrs.get("tirx.is_scheduled"), f"{name} left unscheduled"
            same = tvm_ffi.structural_equal(_plain(func), _plain(built.module[name]))
            assert same, f"{name} scheduled otherwise: {_first_difference(func, built.module[name])}"
    compiled = am.CompiledModel(model, tvm.compile(applied, HOST), {})  # TVM's own compile, adatune's calling
    x = model.random_inputs()
    np.testing.assert_allclose(compiled.run(*x)[0], model.reference(*x)[0], rtol=1e-4, atol=1e-5)


def test_a_weight_packing_mark_survives_a_json_database(tmp_path: Path) -> None:
    """A trace read back from a ``JSONDatabase`` gives its annotations as JSON holds them (True comes back 1): the
    templates' weight-packing mark is 1, so a packing config applied from a database is the program ``am.build``
    builds (with True, the export test above failed whenever a packing config was a task's best)."""
    from adatune.codegen.x86 import mark_weight_pack

    a, b = te.placeholder((16, 16), name="A"), te.placeholder((16, 16), name="B")
    k = te.reduce_axis((0, 16), name="k")
    func = te.create_prim_func([a, b, te.compute((16, 16), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")])
    workload = workload_module(func)
    sch = tvm.s_tir.Schedule(workload)
    assert mark_weight_pack(sch, sch.cache_read(sch.get_sblock("C"), 1, "global"))
    db = ms.database.JSONDatabase(work_dir=str(tmp_path))
    args_info = ms.arg_info.ArgInfo.from_prim_func(workload["main"])
    db.commit_tuning_record(ms.database.TuningRecord(sch.trace, db.commit_workload(workload), [1e-3], HOST, args_info))
    replayed = ms.database.JSONDatabase(work_dir=str(tmp_path)).query_schedule(workload, HOST, workload_name="main")
    assert tvm_ffi.structural_equal(replayed.mod, sch.mod), _first_difference(replayed.mod["main"], sch.mod["main"])


def _first_difference(a: tvm.tirx.PrimFunc, b: tvm.tirx.PrimFunc) -> str:
    for i, (x, y) in enumerate(zip(_plain(a).script().splitlines(), _plain(b).script().splitlines())):
        if x != y:
            return f"line {i}: {x.strip()!r} != {y.strip()!r}"
    return "the scripts agree line by line (a difference the script does not print)"


def _matmul() -> tvm.tirx.PrimFunc:
    a, b = te.placeholder((32, 32), name="A"), te.placeholder((32, 32), name="B")
    k = te.reduce_axis((0, 32), name="k")
    return te.create_prim_func([a, b, te.compute((32, 32), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")])


def _measured(task: Any, candidate: Any) -> tuple[MeasureInput, MeasureResult]:
    """A record of ``candidate`` (its timing is not what the export is about)."""
    return MeasureInput(task, candidate), MeasureResult((1e-3,), MeasureErrorNo.NO_ERROR, 0.0, 0.0)


def test_a_trace_candidate_is_exported_and_the_generic_program_is_reported() -> None:
    task = TraceTask.from_module(_matmul(), HOST, name="exchange/matmul")
    assert task.space.generic is not None
    db = ms.database.MemoryDatabase()
    (why,) = export_database([_measured(task, task.space.generic)], db).values()
    assert "does not give its program" in why  # schedule_generic rewrites the function outside its trace
    assert len(db.get_all_tuning_records()) == 0
    candidate = task.space.sample(0, seed=3)
    assert export_database([_measured(task, candidate)], db) == {task.name: "exported"}
    sch = db.query_schedule(workload_module(task.unscheduled_module()["main"]), HOST, workload_name="main")
    assert sch is not None and tvm_ffi.structural_equal(_plain(sch.mod["main"]), _plain(candidate.mod["main"]))


def test_bad_export_arguments_are_named(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="meta_schedule Database"):
        export_database([], "not a database")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="does not exist"):
        export_database(tmp_path / "missing.jsonl", ms.database.MemoryDatabase())


def test_the_adatune_tuning_pipeline_tunes_writes_the_database_and_applies_it(
    tmp_path: Path, model_option: Any
) -> None:
    """``relax.get_pipeline("adatune_tuning", ...)`` on an imported (unprepared) module: it tunes, leaves adatune's
    log and a MetaSchedule database in ``work_dir``, returns the module with the database's schedules applied, and
    that module, compiled by TVM alone, matches PyTorch; the pass alone (``TuneIRMod``) leaves its module as it was."""
    from tvm.relax.frontend.torch import from_exported_program

    import adatune.relax

    torch.manual_seed(1)
    net, x = _Net().eval(), torch.randn(1, 3, 8, 8)
    with torch.no_grad():
        mod = from_exported_program(torch.export.export(net, (x,)), keep_params_as_input=False)
    work = tmp_path / "tuning"
    tuning = relax.get_pipeline(
        "adatune_tuning", target=HOST, work_dir=work, budget=4, option=model_option, strategy="round-robin",
        round_trials=2,
    )  # fmt: skip
    out = tuning(mod)
    assert (work / adatune.relax.LOG_NAME).is_file()
    written = ms.database.JSONDatabase(work_dir=str(work)).get_all_tuning_records()
    scheduled = [
        f for _, f in out.functions_items() if isinstance(f, tvm.tirx.PrimFunc) and "tirx.is_scheduled" in f.attrs
    ]
    assert written and len(scheduled) >= len(written)  # a workload may be called from several functions
    model = am.from_torch(net, (x,), name="pipeline")
    compiled = am.CompiledModel(model, tvm.compile(out, HOST), {})
    np.testing.assert_allclose(compiled.run(x.numpy())[0], model.reference(x.numpy())[0], rtol=1e-4, atol=1e-5)
    prepared = am.prepare(mod)
    again = adatune.relax.TuneIRMod(HOST, work, budget=4, option=model_option)(prepared)  # resumes: nothing left
    assert tvm_ffi.structural_equal(again, prepared)
    assert len(ms.database.JSONDatabase(work_dir=str(work)).get_all_tuning_records()) == len(written)  # not twice
    with pytest.raises(ValueError, match="needs a budget"):
        adatune.relax.TuneIRMod(HOST, work)


@pytest.mark.parametrize("name", ["resnet18", "bert-base"])
def test_the_zoo_models_round_trip_through_a_json_database(name: str, tmp_path: Path) -> None:
    """ResNet-18 and BERT-base: a random config of every knob task, recorded (a round trip needs schedules, not
    timings), exported to a ``JSONDatabase`` and applied by TVM's pass: each function is the program ``am.build``
    gives it (``task.scheduled_module`` of the record), and TVM's own compile of the module matches PyTorch."""
    model = am.load_builtin(name)
    knob = [t for t in am.extract_tasks(model, HOST) if t.kind != "trace"]
    rng = np.random.default_rng(0)
    records = [_measured(t.task, t.task.space.random_candidates(rng, 1)[0]) for t in knob]
    db = ms.database.JSONDatabase(work_dir=str(tmp_path))
    assert set(export_database(records, db, HOST).values()) == {"exported"}
    applied = _applied(model.mod, ms.database.JSONDatabase(work_dir=str(tmp_path)))
    for t, (inp, _) in zip(knob, records):
        want = t.task.scheduled_module(inp.config)["main"]
        for fn in t.global_vars:
            assert tvm_ffi.structural_equal(_plain(applied[fn]), _plain(want)), _first_difference(applied[fn], want)
    compiled = am.CompiledModel(model, tvm.compile(applied, HOST), {})
    x = model.random_inputs()
    np.testing.assert_allclose(compiled.run(*x)[0], model.reference(*x)[0], rtol=1e-3, atol=1e-4)
