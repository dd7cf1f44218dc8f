"""The search schemes the harness compares, each one a library tuner with one setting changed.

==================  ==========================================================================================
XGB+SA              AutoTVM: XGBoost cost model + simulated annealing, top-``plan_size`` batches (baseline)
XGB+SA+AE           AutoTVM's search measured by the adaptive evaluator (isolates the evaluator from RFEI+CSA)
AutoTVM-2020        AutoTVM's defaults when both papers ran it: XGBoost rank objective on itervar features, plan 64
AutoTVM-2020/32     the same with plan 32, as the AdaTune authors' released script ran it
RFEI+SA             AdaTune's random forest + expected improvement instead of XGBoost
RFEI+CSA            + contextual simulated annealing (uncertainty-driven exploration)
RFEI+CSA+AE         + the adaptive evaluator: full AdaTune (replay: cut at the recorded micro-batch where it stops)
RFEI-released+CSA+AE  AdaTune as its authors' code ran it: 10 trees of 10 features each, the per-tree spread, itervar
                    features, plan 32, eps_t over 20 configs, AutoTVM's absolute temperature
RF+SA               ablation control: the same random forest's mean, no uncertainty (isolates EI from the forest)
RF+CSA+AE           full AdaTune with the forest's mean as its acquisition (exploration and evaluator kept)
RFEI-trees+SA       RFEI+SA with the per-tree spread instead of forestci's jackknife (AdaTune's released code)
RFEI-raw+SA         RFEI+SA with forestci's jackknife uncalibrated (no empirical-Bayes step)
RFEI-plugin+SA      RFEI+SA with plug-in EI: over the forest's best predicted mean of a measured config
RFEI-plugin+CSA+AE  full AdaTune with plug-in EI
RFEI-recal+SA       RFEI+SA with sigma recalibrated on held-out measurements (unit z-scores on the picked configs)
RFEI-recal+CSA+AE   full AdaTune with sigma recalibrated on held-out measurements
RFEI+SA/abs-T       RFEI+SA with AutoTVM's absolute temperature (the annealer before it worked on EI's scale)
RFEI+CSA+AE/abs-T   full AdaTune with AutoTVM's absolute temperature
RFEI-trees+CSA      RFEI+CSA with the per-tree spread (contextual exploration without the adaptive evaluator)
RFEI-trees+CSA+AE   full AdaTune with the per-tree spread as EI's uncertainty
RL                  ReLeASE's PPO agent instead of simulated annealing (XGBoost model)
SA+AS               XGBoost + simulated annealing + ReLeASE's k-means adaptive sampling
RL+AS               PPO agent + adaptive sampling: full ReLeASE
SA+AS/eps           SA+AS with AutoTVM's 5% random share added to every sampled plan (not the centroids alone)
RL+AS/eps           RL+AS with the 5% random share added
Random              uniform random search (a floor)
TS-XGB              TraceSearchTuner: evolutionary search over a trace space with XGBoost (MetaSchedule-style)
TS-RFEI             TraceSearchTuner with RFEI and contextual (eps_t) exploration
TS-XGB+AE           TS-XGB measured by the adaptive evaluator
TS-RFEI+AE          TS-RFEI measured by the adaptive evaluator (AdaTune's method on a trace space)
==================  ==========================================================================================

The TS- schemes need a trace task (``python -m benchmarks.harness hardware --space trace``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from adatune.search.optimizers import SimulatedAnnealingOptimizer
from adatune.task import TuningTask
from adatune.tuners import RandomTuner, ReleaseTuner, RFEITuner, TraceSearchTuner, Tuner, XGBTuner

__all__ = ["Scheme", "SCHEMES", "BASELINE", "make_tuner", "check_schemes"]


@dataclass(frozen=True)
class Scheme:
    """A named tuner factory; ``adaptive_evaluator`` schemes measure with AdaTune's evaluator."""

    name: str
    build: Callable[[TuningTask, int, int, int | None], Tuner]  # (task, seed, plan_size, num_threads)
    adaptive_evaluator: bool = False


def _xgb(task: TuningTask, seed: int, plan: int, threads: int | None) -> Tuner:
    return XGBTuner(task, plan_size=plan, num_threads=threads, seed=seed)


def _autotvm_2020(plan_size: int | None) -> Callable[[TuningTask, int, int, int | None], Tuner]:
    def build(task: TuningTask, seed: int, plan: int, threads: int | None) -> Tuner:
        size = plan_size or plan
        return XGBTuner(task, size, feature_type="itervar", loss_type="rank", num_threads=threads, seed=seed)

    return build


def _xgb_as(eps_greedy: float | None = None) -> Callable[[TuningTask, int, int, int | None], Tuner]:
    def build(task: TuningTask, seed: int, plan: int, threads: int | None) -> Tuner:
        return XGBTuner(task, plan_size=plan, num_threads=threads, sampler="adaptive", eps_greedy=eps_greedy, seed=seed)

    return build


def _rfei(contextual: bool, **options: Any) -> Callable[[TuningTask, int, int, int | None], Tuner]:
    def build(task: TuningTask, seed: int, plan: int, threads: int | None) -> Tuner:
        return RFEITuner(task, plan_size=plan, contextual=contextual, num_threads=threads, seed=seed, **options)

    return build


def _absolute(tuner: Tuner) -> None:
    annealer = getattr(tuner, "model_optimizer", None)
    if not isinstance(annealer, SimulatedAnnealingOptimizer):
        raise TypeError(f"{type(tuner).__name__} does not anneal: it has no temperature to set")
    annealer.temp_scale = "absolute"


def _absolute_temperature(
    build: Callable[[TuningTask, int, int, int | None], Tuner],
) -> Callable[[TuningTask, int, int, int | None], Tuner]:
    """The scheme with its annealer on AutoTVM's absolute temperature (the A arm of the temperature fix)."""

    def absolute(task: TuningTask, seed: int, plan: int, threads: int | None) -> Tuner:
        tuner = build(task, seed, plan, threads)
        _absolute(tuner)
        return tuner

    return absolute


def _rfei_released(task: TuningTask, seed: int, plan: int, threads: int | None) -> Tuner:
    tuner = RFEITuner(
        task, plan_size=32, n_trees=10, uncertainty="trees", feature_type="itervar", n_context=20,
        num_threads=threads, seed=seed,
    )  # fmt: skip
    tuner.cost_model.max_features = 10  # type: ignore[attr-defined]
    _absolute(tuner)
    return tuner


def _rl(adaptive: bool, eps_greedy: float | None = None) -> Callable[[TuningTask, int, int, int | None], Tuner]:
    def build(task: TuningTask, seed: int, plan: int, threads: int | None) -> Tuner:
        sampler = "adaptive" if adaptive else None
        return ReleaseTuner(
            task, plan_size=plan, sampler=sampler, eps_greedy=eps_greedy, num_threads=threads, seed=seed
        )

    return build


def _trace(model: str) -> Callable[[TuningTask, int, int, int | None], Tuner]:
    def build(task: TuningTask, seed: int, plan: int, threads: int | None) -> Tuner:
        return TraceSearchTuner(task, cost_model=model, plan_size=plan, num_threads=threads, seed=seed)

    return build


def _random(task: TuningTask, seed: int, plan: int, threads: int | None) -> Tuner:
    return RandomTuner(task, seed=seed)


SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in (
        Scheme("XGB+SA", _xgb),
        Scheme("XGB+SA+AE", _xgb, adaptive_evaluator=True),
        Scheme("AutoTVM-2020", _autotvm_2020(None)),
        Scheme("AutoTVM-2020/32", _autotvm_2020(32)),
        Scheme("RFEI+SA", _rfei(False)),
        Scheme("RFEI+CSA", _rfei(True)),
        Scheme("RFEI+CSA+AE", _rfei(True), adaptive_evaluator=True),
        Scheme("RFEI+SA/abs-T", _absolute_temperature(_rfei(False))),
        Scheme("RFEI+CSA+AE/abs-T", _absolute_temperature(_rfei(True)), adaptive_evaluator=True),
        Scheme("RFEI-released+CSA+AE", _rfei_released, adaptive_evaluator=True),
        Scheme("RF+SA", _rfei(False, acquisition="mean")),
        Scheme("RF+CSA+AE", _rfei(True, acquisition="mean"), adaptive_evaluator=True),
        Scheme("RFEI-trees+SA", _rfei(False, uncertainty="trees")),
        Scheme("RFEI-raw+SA", _rfei(False, calibrate=False)),
        Scheme("RFEI-plugin+SA", _rfei(False, acquisition="plugin-ei")),
        Scheme("RFEI-plugin+CSA+AE", _rfei(True, acquisition="plugin-ei"), adaptive_evaluator=True),
        Scheme("RFEI-recal+SA", _rfei(False, recalibrate=True)),
        Scheme("RFEI-recal+CSA+AE", _rfei(True, recalibrate=True), adaptive_evaluator=True),
        Scheme("RFEI-trees+CSA", _rfei(True, uncertainty="trees")),
        Scheme("RFEI-trees+CSA+AE", _rfei(True, uncertainty="trees"), adaptive_evaluator=True),
        Scheme("RL", _rl(False)),
        Scheme("SA+AS", _xgb_as()),
        Scheme("RL+AS", _rl(True)),
        Scheme("SA+AS/eps", _xgb_as(0.05)),
        Scheme("RL+AS/eps", _rl(True, 0.05)),
        Scheme("Random", _random),
        Scheme("TS-XGB", _trace("xgb")),
        Scheme("TS-RFEI", _trace("rfei")),
        Scheme("TS-XGB+AE", _trace("xgb"), adaptive_evaluator=True),
        Scheme("TS-RFEI+AE", _trace("rfei"), adaptive_evaluator=True),
    )
}
BASELINE = "XGB+SA"


def check_schemes(names: list[str]) -> list[str]:
    """The names, each checked against ``SCHEMES`` (a clear error for a typo)."""
    unknown = [n for n in names if n not in SCHEMES]
    if unknown:
        raise ValueError(f"unknown scheme(s) {', '.join(unknown)}: choose from {', '.join(SCHEMES)}")
    return list(names)


def make_tuner(name: str, task: TuningTask, seed: int, plan_size: int, num_threads: int | None = 1) -> Tuner:
    """A fresh tuner of scheme ``name`` for one (workload, seed) run."""
    return SCHEMES[check_schemes([name])[0]].build(task, seed, plan_size, num_threads)
