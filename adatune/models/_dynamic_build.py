"""Dynamic models compiled once for their whole range: DietCode's Relax build (``adatune.dietcode._relax_build``)
on a ``DynamicModel``'s graph, returned as a ``CompiledModel``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import target as _target
from ..dietcode import DietCodeResult, DietCodeTuner, DynamicWorkload, build_relax, gemm_workloads
from ._build import CompiledModel
from ._dynamic_import import DynamicModel
from ._graph import Model

__all__ = ["build_dynamic", "dynamic_workloads", "tune_dynamic"]


def _dynamic(model: Model, what: str) -> DynamicModel:
    if not isinstance(model, DynamicModel):
        raise TypeError(f"{what} needs a DynamicModel (from_torch(..., dynamic=...)), got {type(model)}")
    return model


def dynamic_workloads(
    model: Model, target: _target.TargetLike | None = None, pack: bool = True
) -> dict[str, DynamicWorkload]:
    """The model's distinct dynamic GEMMs as DietCode workloads, by name (``dense_768x3072``...); dense weights
    are packed in ``weight_panel(target)`` panels when ``pack`` (and it divides N), else read as ``[K, N]``."""
    model = _dynamic(model, "dynamic_workloads")
    return gemm_workloads(model.mod, model.symbols, target, pack)


def tune_dynamic(
    model: Model,
    target: _target.TargetLike | None = None,
    *,
    pack: bool = True,
    measure_option: Any = None,
    **tuner_options: Any,
) -> dict[str, DietCodeResult]:
    """Each dynamic GEMM tuned once with DietCode for its whole range (``tuner_options`` go to ``DietCodeTuner``:
    ``n_shapes``, ``rounds``, ``kernels_per_round``, ``max_kernels``, ``seed``, timing ``number``...)."""
    tgt = _target.create(target) if target is not None else _target.host()
    results = {}
    for name, wl in dynamic_workloads(model, tgt, pack=pack).items():
        tuner = DietCodeTuner(wl, tgt, **tuner_options)
        tuner.tune(measure_option=measure_option)
        results[name] = tuner.result()
    return results


def build_dynamic(
    model: Model,
    results: Mapping[str, DietCodeResult] | Sequence[DietCodeResult],
    target: _target.TargetLike | None = None,
    vector_math: bool = True,
    vector_tails: bool = True,
) -> CompiledModel:
    """One Relax VM executable for every extent in the model's ranges, its GEMMs on DietCode micro-kernels
    (``adatune.dietcode._relax_build.build_relax``).

    ``results`` are matched to GEMMs by kind, dims and T range; a GEMM without one warns and runs a generic
    schedule. The model's ``applied`` says per PrimFunc ``dietcode``, ``generic``, ``view`` or ``unscheduled``. CPU
    targets only; ``vector_math`` as in ``build``, ``vector_tails`` as in ``schedule_generic``.
    """
    model = _dynamic(model, "build_dynamic")
    built = build_relax(model.mod, model.symbols, results, target, vector_math, vector_tails)
    compiled = CompiledModel(model, built.executable, built.applied, built.link)
    compiled.module = built.module  # the Relax module compiled, dispatch functions included
    return compiled
