"""AutoTVM's XGBoost cost model: gradient-boosted trees on knob or itervar features, regression or
pairwise-rank loss, early-stopped on the average recall of the true top configs."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .. import target as _target
from ..options import Option
from ..records import as_records
from ..task import TuningTask
from ._base import FEATURE_TYPE, NUM_THREADS, CostModel

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
    """XGBoost model with AutoTVM's hyperparameters (depth 3, eta 0.3, up to 8000 rounds, early stop 50); made with a
    task it also takes candidates or config indices. ``load_basemodel`` stacks on a model fitted on earlier records
    (its predictions become this model's base margin).
    """

    OPTIONS = (
        FEATURE_TYPE,
        Option.declare("loss_type", str, "XGBoost objective: regression or pairwise rank", choices=("reg", "rank")),
        NUM_THREADS,
    )

    def __init__(
        self,
        task: TuningTask | None = None,
        feature_type: str = "knob",
        loss_type: str = "reg",
        num_threads: int | None = None,
        seed: int | None = None,
    ):
        self._bind(task, feature_type)
        self.feature_type = feature_type
        self.loss_type = loss_type
        self.params = {
            "max_depth": 3,
            "gamma": 0.0001,
            "min_child_weight": 1,
            "subsample": 1.0,
            "eta": 0.3,
            "lambda": 1.0,
            "alpha": 0.0,
            "tree_method": "hist",
            "verbosity": 0,
            "disable_default_eval_metric": 1,
            "objective": "reg:squarederror" if loss_type == "reg" else "rank:pairwise",
            "seed": 0 if seed is None else int(seed) % (2**31),
        }
        # one thread by default: on small training sets threads only add overhead, and the trees stay identical
        # run to run
        self.params["nthread"] = int(num_threads) if num_threads else 1
        self.booster: Any = None
        self.base_model: XGBoostCostModel | None = None

    def as_features(self, xs: Any) -> np.ndarray:
        """As ``CostModel.as_features``; a 1-D array of numbers is AutoTVM's knob config indices
        (``predict(np.ones(12))``), integer-valued floats included."""
        if self.task is not None and isinstance(xs, np.ndarray) and xs.ndim == 1 and xs.dtype.kind == "f":
            if not np.all(np.isfinite(xs) & (xs == np.round(xs))):
                raise ValueError("a 1-D array given to the cost model must hold knob config indices (integers)")
            xs = xs.astype(np.int64)
        return super().as_features(xs)

    def load_basemodel(self, base_model: XGBoostCostModel) -> None:
        """Use a model fitted on earlier records as the base of this one (AutoTVM's transfer learning)."""
        self.base_model = base_model

    def _margin(self, x: np.ndarray) -> np.ndarray | None:
        if self.base_model is None or self.base_model.booster is None:
            return None
        return self.base_model.predict(_width(x, self.base_model.booster.num_features()))

    def fit(self, xs: Any, ys: Sequence[float], plan_size: int) -> None:
        import xgboost as xgb

        x = self.as_features(xs)
        yv = np.asarray(list(ys), dtype=np.float64)
        if len(yv) == 0 or yv.max() <= 0:
            return
        y = yv / yv.max()
        dtrain = xgb.DMatrix(x, label=y, missing=np.nan, nthread=self.params["nthread"])
        margin = self._margin(x)
        if margin is not None:
            dtrain.set_base_margin(margin)
        if self.loss_type == "rank":
            dtrain.set_group([len(xs)])

        def recall(pred: np.ndarray, dm: object) -> tuple[str, float]:
            return f"a-recall@{plan_size}", average_recall_score(y, pred, plan_size)

        self.booster = xgb.train(
            self.params,
            dtrain,
            num_boost_round=8000,
            evals=[(dtrain, "tr")],
            custom_metric=recall,
            maximize=True,
            early_stopping_rounds=50,
            verbose_eval=False,
        )
        logger.debug("XGB fit on %d candidates: %d rounds", len(y), self.booster.num_boosted_rounds())

    def predict(self, xs: Any) -> np.ndarray:
        import xgboost as xgb

        x = self.as_features(xs)
        if self.booster is None:
            base = self._margin(x)
            return base if base is not None else np.zeros(len(x))
        dm = xgb.DMatrix(x, missing=np.nan, nthread=self.params["nthread"])
        margin = self._margin(x)
        if margin is not None:
            dm.set_base_margin(margin)
        return self.booster.predict(dm, iteration_range=(0, self.booster.best_iteration + 1))

    def fit_log(self, records: Iterable, plan_size: int) -> None:
        """Fit on earlier records of this model's task (records or ``(inp, res)`` pairs)."""
        cands, ys = self._task_history(records)
        if cands:
            self.fit(cands, ys, plan_size)

    def fit_template_log(self, records: Iterable, plan_size: int, min_seed_records: int = 500) -> bool:
        """Fit on the records of every workload of this task's template on its target (AutoTVM's ``fit_log``: the
        base model of its transfer learning), each workload's rows featurised by its own task (recreated from its
        record). Unlike AutoTVM, each workload's throughputs are divided by its own best, so shapes of different peak
        speeds share one scale; rows are cut or zero-padded to this task's feature width. Returns False, fitting
        nothing, with fewer than ``min_seed_records`` usable records."""
        if self.task is None or self.task.template_name is None:
            return False
        tgt = _target.to_json(self.task.target)
        by_workload: dict[str, list[Any]] = {}
        for r in as_records(records):
            if r.kind == "knob" and _target.same_target(r.target, tgt):
                by_workload.setdefault(r.workload_key, []).append(r)
        if sum(len(recs) for recs in by_workload.values()) < min_seed_records:  # too few even before the filtering
            return False
        width = self.as_features(self.task.space.random_candidates(np.random.default_rng(0), 1)).shape[1]
        xs, ys = [], []
        for key, recs in by_workload.items():
            try:
                task = self.task if key == self.task.workload_key else recs[0].create_task()
            except (KeyError, ValueError) as err:  # its template is not importable here: not transferable
                logger.debug("records of %s left out of the template's history: %s", key, err)
                continue
            if task.template_name != self.task.template_name:
                continue
            featurised = XGBoostCostModel(task, self.feature_type)
            cands, perf = featurised._task_history(recs)
            if cands and max(perf) > 0:
                xs.append(_width(featurised.as_features(cands), width))
                ys.append(np.asarray(perf) / max(perf))
        if sum(len(y) for y in ys) < min_seed_records:
            return False
        self.fit(np.concatenate(xs), np.concatenate(ys).tolist(), plan_size)
        return True


def _width(x: np.ndarray, width: int) -> np.ndarray:
    """Feature rows cut or zero-padded to ``width`` columns (another workload's, or a base model's)."""
    return np.pad(x, ((0, 0), (0, max(0, width - x.shape[1]))))[:, :width]
