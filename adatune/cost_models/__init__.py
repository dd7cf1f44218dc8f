"""Cost models: predict which unmeasured candidates are fast, from their feature vectors.

``COST_MODELS`` names every model the library ships, as ``name -> factory(task=None, seed=None)``; the cost-model
conformance suite runs them all, and tuners that take a model by name (trace search) look it up here.
"""

from collections.abc import Callable
from typing import Any

from ._base import CostModel
from ._xgb import XGBoostCostModel, average_recall_score
from .rfei import RFEICostModel, expected_improvement

__all__ = [
    "CostModel",
    "XGBoostCostModel",
    "average_recall_score",
    "RFEICostModel",
    "expected_improvement",
    "COST_MODELS",
    "create_cost_model",
]

COST_MODELS: dict[str, Callable[..., CostModel]] = {
    "xgb": lambda task=None, seed=None, **kw: XGBoostCostModel(task, loss_type="reg", seed=seed, **kw),
    "xgb-rank": lambda task=None, seed=None, **kw: XGBoostCostModel(task, loss_type="rank", seed=seed, **kw),
    "rfei": lambda task=None, seed=None, **kw: RFEICostModel(task, uncertainty="forestci", seed=seed, **kw),
    "rfei-trees": lambda task=None, seed=None, **kw: RFEICostModel(task, uncertainty="trees", seed=seed, **kw),
}


def create_cost_model(name: str, task: Any = None, seed: int | None = None, **options: Any) -> CostModel:
    """A cost model by name (``ValueError`` naming the known ones otherwise)."""
    if name not in COST_MODELS:
        raise ValueError(f"unknown cost model {name!r}: choose from {', '.join(COST_MODELS)}")
    return COST_MODELS[name](task=task, seed=seed, **options)
