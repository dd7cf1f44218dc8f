"""The AdaTune paper's ablation (NeurIPS 2020, sec. 5.3), reproduced on this machine.

Four schemes, each adding one AdaTune component to the AutoTVM baseline:

==============  =========================================================================
XGB+SA+DE       AutoTVM: XGBoost cost model, simulated annealing, deterministic evaluator
RFEI+SA+DE      random forest + expected improvement instead of XGBoost
RFEI+CSA+DE     + contextual simulated annealing (uncertainty-driven exploration)
RFEI+CSA+AE     + adaptive evaluator (``min_converge_coef``): full AdaTune
==============  =========================================================================

On hardware every (workload, seed, scheme) run gets the same wall-clock budget of the tuner's clock (search
plus build plus measurement); on the replay runner (a recorded sweep) the same schemes are compared in
trials over many seeds. Run ``python -m benchmarks.ablation --help`` for the options; results go to
``benchmarks/results/ablation/``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Scheme", "SCHEMES", "BASELINE"]


@dataclass(frozen=True)
class Scheme:
    name: str
    model: str  # "xgb" or "rfei"
    contextual: bool
    adaptive: bool


SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in (
        Scheme("XGB+SA+DE", "xgb", False, False),
        Scheme("RFEI+SA+DE", "rfei", False, False),
        Scheme("RFEI+CSA+DE", "rfei", True, False),
        Scheme("RFEI+CSA+AE", "rfei", True, True),
    )
}
BASELINE = "XGB+SA+DE"
