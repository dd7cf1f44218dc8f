"""ReLeASE (Ahn et al., 2019; Chameleon, ICLR 2020) against AutoTVM, reproduced on this machine.

Four schemes: the AutoTVM baseline and each ReLeASE component alone and together.

========  ===============================================================================
AutoTVM   XGBoost cost model + simulated annealing, top-64 batches (``XGBTuner``)
RL        XGBoost + the PPO search agent, top-64 batches (``ReleaseTuner(sampler=None)``)
SA+AS     XGBoost + simulated annealing + k-means adaptive sampling (``XGBTuner(sampler="adaptive")``)
RL+AS     XGBoost + PPO agent + adaptive sampling: full ReLeASE (``ReleaseTuner``)
========  ===============================================================================

On hardware every (workload, seed, scheme) run gets the same budget of the tuner's clock (search plus
build plus measurement); the report gives the hardware measurements and the clock each scheme needs to
reach the baseline's final best, and the search steps per tuning iteration (RL against SA). On the replay
runner (a recorded sweep) the same comparison runs in trials over many seeds. ``python -m
benchmarks.release --help`` lists the options; results go to ``benchmarks/results/release/``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Scheme", "SCHEMES", "BASELINE"]


@dataclass(frozen=True)
class Scheme:
    name: str
    search: str  # "sa" or "rl"
    adaptive: bool  # k-means adaptive sampling


SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in (
        Scheme("AutoTVM", "sa", False),
        Scheme("RL", "rl", False),
        Scheme("SA+AS", "sa", True),
        Scheme("RL+AS", "rl", True),
    )
}
BASELINE = "AutoTVM"
