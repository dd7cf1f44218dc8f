"""adatune in Relax's own tuning flow: a pass and a registered pipeline, as TVM's ``MetaScheduleTuneIRMod`` and
``relax.get_pipeline("static_shape_tuning", ...)``. ``TuneIRMod`` tunes every fused function of a module within one
budget (``adatune.models.tune_model``, logging to ``work_dir/adatune.jsonl``, which resumes) and leaves each task's best
schedule in a MetaSchedule ``JSONDatabase`` in ``work_dir``, which
``relax.transform.MetaScheduleApplyDatabase(work_dir)`` applies, in this pipeline or in one's own; the module passes
through unchanged. Importing this module registers the pipeline ``"adatune_tuning"``: TVM's static-shape tuning pipeline
with this pass in MetaSchedule's place::

    import adatune.relax  # registers the pipeline
    mod = relax.get_pipeline("adatune_tuning", target=target, work_dir="tuning", budget=200)(mod)
    executable = tvm.compile(mod, target)

Measurement defaults to adatune's warm build pool and model runner with the adaptive evaluator
(``min_converge_coef=0.1``), not MetaSchedule's ``LocalBuilder``, whose per-call worker start times out on small hosts.
Where this leaves ``adatune.models.build``: a database holds traces only, so an untemplated operator gets TVM's default
lowering, not the shape-generic program, and there is no build-time weight packing or vector math."""

from __future__ import annotations

import os
from typing import Any

import tvm
from tvm import relax
from tvm.relax import pipeline as _pipeline
from tvm.s_tir import meta_schedule as ms

from . import target as _target
from .measure import LocalBuilder, MeasureOption, measure_option
from .meta_schedule import export_database
from .models import from_relax, model_runner, prepare, tune_model

__all__ = ["LOG_NAME", "PIPELINE", "TuneIRMod", "tuning_pipeline"]

PIPELINE = "adatune_tuning"
#: adatune's own log of a tuning pass, in its ``work_dir`` beside the MetaSchedule database
LOG_NAME = "adatune.jsonl"


def TuneIRMod(  # noqa: N802 - named as TVM's MetaScheduleTuneIRMod
    target: _target.TargetLike,
    work_dir: str | os.PathLike,
    budget: int | None = None,
    time_budget: float | None = None,
    option: MeasureOption | None = None,
    min_converge_coef: float | None = 0.1,
    **tune_options: Any,
) -> tvm.transform.Pass:
    """A module pass tuning the fused functions of a prepared module (``relax.get_pipeline("zero")`` made them) for
    ``target`` within ``budget`` trials in all and/or ``time_budget`` seconds, then writing the database.
    ``tune_options`` go to ``tune_model`` (``tuner``, ``strategy``, ``round_trials``, ``seed``, ``cache``, ...)."""
    if budget is None and time_budget is None:
        raise ValueError("TuneIRMod needs a budget: budget (trials) and/or time_budget (seconds)")
    tgt, directory = _target.create(target), os.fspath(work_dir)

    @tvm.transform.module_pass(opt_level=0, name="adatune.TuneIRMod")
    def tune(mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        os.makedirs(directory, exist_ok=True)
        log = os.path.join(directory, LOG_NAME)
        opt = option or measure_option(LocalBuilder(), model_runner(), min_converge_coef=min_converge_coef)
        try:
            model = from_relax(mod, prepared=True)
            tune_model(model, log, budget, time_budget, option=opt, target=tgt, progress=False, **tune_options)
        finally:
            if option is None:
                opt.close()
        export_database(log, ms.database.JSONDatabase(work_dir=directory), tgt)
        return mod

    return tune


def tuning_pipeline(
    target: _target.TargetLike, work_dir: str | os.PathLike = "tuning_logs", **tune: Any
) -> tvm.transform.Pass:
    """The ``"adatune_tuning"`` pipeline: adatune's front half (``adatune.models.prepare``: BatchNorm decomposed,
    legalised, fused), ``TuneIRMod(target, work_dir, **tune)``, then ``MetaScheduleApplyDatabase(work_dir)``."""
    tgt = _target.create(target)
    tuning = TuneIRMod(tgt, work_dir, **tune)

    @tvm.transform.module_pass(opt_level=0, name="adatune.tuning_pipeline")
    def run(mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        with tgt:
            mod = tuning(prepare(mod))
            return relax.transform.MetaScheduleApplyDatabase(os.fspath(work_dir))(mod)

    return run


if PIPELINE not in _pipeline.PIPELINE_MAP:  # a reloaded module registers once
    _pipeline.register_pipeline(PIPELINE)(tuning_pipeline)  # type: ignore[operator]
