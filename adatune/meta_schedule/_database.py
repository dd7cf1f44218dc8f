"""adatune's tuning results as MetaSchedule tuning records, for a user's own Relax pipeline, and MetaSchedule
databases read back as adatune history.

MetaSchedule keeps a workload (the PrimFunc as ``relax.transform.MetaScheduleApplyDatabase`` normalises it, one
``main``) and the trace that schedules it; the pass looks each function of a module up by structural equality and
replays the trace. ``export_database`` writes the best record of every task of an adatune log that way: a knob
template's trace (on a model, replayed on the fused function with its epilogue inlined, as ``adatune.models.build``
schedules it) and a trace-search candidate's. What is not a trace of its workload is reported, not written: the
shape-generic program (``schedule_generic`` rewrites the function) and DietCode's range tasks.

``import_database`` reads every record of a MetaSchedule database (stock ``ms.tune_tir``'s, a team's) as
``(MeasureInput, MeasureResult)`` pairs of trace tasks: a trace search resumes from them (``Tuner.load_history``) and
its cost model starts from their timings.

What ``adatune.models.build`` adds beyond the schedules, a user's pipeline does not get from a database: the weight
packing folded at build time (the kernels pack at run time instead) and glibc's vector math for exp, erf and tanh."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

import tvm
import tvm_ffi
from tvm.s_tir import meta_schedule as ms

from .. import target as _target
from ..measure import MeasureErrorNo, MeasureInput, MeasureResult
from ..records import Record, best_records, read_log
from ..trace import TraceTask

__all__ = ["export_database", "import_database", "workload_module"]

logger = logging.getLogger(__name__)

#: MetaSchedule's run seconds of a candidate that failed (``ms.runner`` reports 1e10 per run)
_FAILED_RUN_S = 1e9

#: an exported task's entry in ``export_database``'s report
EXPORTED = "exported"


def workload_module(func: tvm.tirx.PrimFunc) -> tvm.IRModule:
    """``func`` as MetaSchedule stores and looks up a workload (normalised as ``MetaScheduleApplyDatabase`` does)."""
    return tvm.get_global_func("tvm.s_tir.meta_schedule.normalize_mod")(func)


def _record_of(rec: Record) -> tuple[tvm.IRModule, tvm.s_tir.Trace] | str:
    """The workload and trace of a record, or why it has none that MetaSchedule can replay."""
    try:
        task = rec.create_task()
        candidate = task.candidate_from_json(rec.config)
        sch = task.schedule(candidate)
    except Exception as err:  # noqa: BLE001 - a record that no longer applies is reported, the others go on
        return f"does not apply here: {type(err).__name__}: {err}"
    if sch is None:
        return f"a {type(task).__name__}'s program is not a trace of its computation"
    workload = workload_module(task.unscheduled_module()["main"])
    replayed = tvm.s_tir.Schedule(workload)
    try:
        sch.trace.apply_to_schedule(replayed, remove_postproc=False)
    except Exception as err:  # noqa: BLE001
        return f"its trace does not replay on the computation: {type(err).__name__}: {err}"
    if not tvm_ffi.structural_equal(workload_module(replayed.mod["main"]), workload_module(sch.mod["main"])):
        return "its trace does not give its program (a rewrite outside the schedule, e.g. the generic program)"
    return workload, sch.trace


def export_database(
    log: str | os.PathLike | Iterable[Any] | Sequence[Any],
    database: ms.database.Database,
    target: _target.TargetLike | None = None,
) -> dict[str, str]:
    """Commit the best record of every task in ``log`` (a path, or records) to ``database`` (e.g.
    ``ms.database.JSONDatabase(work_dir=...)``), for ``target`` only if given, skipping traces it already holds.
    Returns, per task name, "exported" or why not (the others are written regardless)."""
    if not isinstance(database, ms.database.Database):
        raise TypeError(f"export_database writes to a meta_schedule Database, got {type(database).__name__}")
    report: dict[str, str] = {}
    for rec in best_records(read_log(log), target).values():
        made = _record_of(rec)
        if isinstance(made, str):
            report[rec.task_name] = made
            continue
        workload, trace = made
        entry = database.commit_workload(workload)
        if any(str(r.trace) == str(trace) for r in database.get_top_k(entry, 1 << 16)):
            report[rec.task_name] = EXPORTED  # already there (an export repeated, a pass run again): not twice
            continue
        args_info = ms.arg_info.ArgInfo.from_prim_func(workload["main"])
        tgt = _target.create(rec.target)
        database.commit_tuning_record(ms.database.TuningRecord(trace, entry, list(rec.result.costs), tgt, args_info))
        report[rec.task_name] = EXPORTED
    return report


def import_database(
    database: ms.database.Database, target: _target.TargetLike | None = None, rules: str = "tvm"
) -> list[tuple[MeasureInput, MeasureResult]]:
    """Every tuning record of ``database`` as a measured trace candidate of its workload's ``TraceTask`` (rule set
    ``rules``: "tvm", MetaSchedule's own, reads what ``ms.tune_tir`` wrote), on ``target`` (each record's own if None).
    A failed run is a ``RUNTIME_DEVICE`` result; a trace outside the design spaces is skipped with a warning."""
    if not isinstance(database, ms.database.Database):
        raise TypeError(f"import_database reads a meta_schedule Database, got {type(database).__name__}")
    pairs: list[tuple[MeasureInput, MeasureResult]] = []
    tasks: dict[tuple[str, str], TraceTask] = {}
    for rec in database.get_all_tuning_records():
        tgt = _target.create(target if target is not None else rec.target)
        func = rec.workload.mod["main"].without_attr("global_symbol")
        key = (f"{int(tvm_ffi.structural_hash(func)):x}", str(tgt))  # one task (and design space) per workload
        task = tasks.get(key)
        if task is None:
            task = tasks[key] = TraceTask.from_module(func, tgt, rules=rules)
        try:
            candidate = task.space.candidate_from_trace(rec.trace)
        except ValueError as err:
            logger.warning("a %s record is skipped: %s", task.name, err)
            continue
        secs = [float(s) for s in rec.run_secs] if rec.run_secs is not None else []
        ok = bool(secs) and all(0 < s < _FAILED_RUN_S and math.isfinite(s) for s in secs)
        result = MeasureResult(
            costs=tuple(secs) if ok else (),
            error_no=MeasureErrorNo.NO_ERROR if ok else MeasureErrorNo.RUNTIME_DEVICE,
            all_cost=sum(secs) if ok else 0.0,
            timestamp=0.0,
            error_msg="" if ok else "failed in the MetaSchedule run that wrote the database",
        )
        pairs.append((MeasureInput(task, candidate), result))
    return pairs
