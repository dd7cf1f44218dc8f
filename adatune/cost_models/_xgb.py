"""AutoTVM's XGBoost cost model: gradient-boosted trees on knob or itervar features, regression or
pairwise-rank loss, early-stopped on the average recall of the true top configs."""
from __future__ import annotations

import logging
from typing import Iterable, Sequence

import numpy as np

from ..features import FeatureExtractor
from ..task import Task
from ._base import CostModel

__all__ = ["XGBoostCostModel", "average_recall_score"]

logger = logging.getLogger("adatune.cost_model")


def average_recall_score(y_true: np.ndarray, y_pred: np.ndarray, n: int) -> float:
    """Mean over k=1..n of |true top-k ∩ predicted top-k| / k (AutoTVM's a-recall@N)."""
    n = min(n, len(y_true))
    if n == 0:
        return 0.0
    true_rank = np.empty(len(y_true), dtype=np.int64)
    true_rank[np.argsort(-y_true, kind="stable")] = np.arange(len(y_true))
    ranks_in_pred_order = true_rank[np.argsort(-y_pred, kind="stable")][:n]
    hits = np.array([(ranks_in_pred_order[: k + 1] <= k).sum() / (k + 1) for k in range(n)])
    return float(hits.mean())


class XGBoostCostModel(CostModel):
    """XGBoost model with AutoTVM's hyperparameters (depth 3, eta 0.3, up to 8000 rounds, early stop 50)."""

    def __init__(self, task: Task, feature_type: str = "knob", loss_type: str = "reg", num_threads: int | None = None,
                 seed: int | None = None):
        if loss_type not in ("reg", "rank"):
            raise ValueError(f"loss_type must be 'reg' or 'rank', got {loss_type!r}")
        self.task = task
        self.features = FeatureExtractor(task, feature_type)
        self.loss_type = loss_type
        self.params = {"max_depth": 3, "gamma": 0.0001, "min_child_weight": 1, "subsample": 1.0, "eta": 0.3,
                       "lambda": 1.0, "alpha": 0.0, "tree_method": "hist", "verbosity": 0,
                       "disable_default_eval_metric": 1,
                       "objective": "reg:squarederror" if loss_type == "reg" else "rank:pairwise",
                       "seed": 0 if seed is None else int(seed) % (2**31)}
        # one thread by default: on small training sets threads only add overhead (3x slower measured on
        # this 2-core machine under load) and the trees stay identical run to run
        self.params["nthread"] = int(num_threads) if num_threads else 1
        self.booster = None
        self._base: tuple[list[int], list[float]] = ([], [])

    def fit(self, xs: Sequence[int], ys: Sequence[float], plan_size: int) -> None:
        import xgboost as xgb

        xs = list(self._base[0]) + list(xs)
        ys = np.asarray(list(self._base[1]) + list(ys), dtype=np.float64)
        if len(xs) == 0 or ys.max() <= 0:
            return
        y = ys / ys.max()
        dtrain = xgb.DMatrix(self.features(xs), label=y)
        if self.loss_type == "rank":
            dtrain.set_group([len(xs)])

        def recall(pred: np.ndarray, dm: object) -> tuple[str, float]:
            return f"a-recall@{plan_size}", average_recall_score(y, pred, plan_size)

        self.booster = xgb.train(self.params, dtrain, num_boost_round=8000, evals=[(dtrain, "tr")],
                                 custom_metric=recall, maximize=True, early_stopping_rounds=50,
                                 verbose_eval=False)
        logger.debug("XGB fit on %d configs: %d rounds", len(xs), self.booster.num_boosted_rounds())

    def predict(self, xs: Sequence[int]) -> np.ndarray:
        import xgboost as xgb

        if self.booster is None:
            return np.zeros(len(xs))
        return self.booster.predict(xgb.DMatrix(self.features(xs)),
                                    iteration_range=(0, self.booster.best_iteration + 1))

    def fit_log(self, records: Iterable, plan_size: int) -> None:
        xs, ys = [], []
        for r in records:
            if r.workload_key == self.task.workload_key:
                xs.append(r.config_index)
                ys.append(r.result.flops(self.task.flop))
        self._base = (xs, ys)
        if xs:
            self.fit([], [], plan_size)
