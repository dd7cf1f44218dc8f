"""Cost models: predict which unmeasured configs are fast."""
from ._base import CostModel
from ._xgb import XGBoostCostModel, average_recall_score
from .rfei import RFEICostModel, expected_improvement

__all__ = ["CostModel", "XGBoostCostModel", "average_recall_score", "RFEICostModel", "expected_improvement"]
