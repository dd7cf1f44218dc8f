"""AdaTune's RFEI cost model as a meta_schedule ``PyCostModel``, on trace search's features. Targets are throughputs
normalised per workload (0 for failures), as meta_schedule's XGB model does, so one model serves every task."""

from __future__ import annotations

import os
import weakref
from typing import Any

import numpy as np
import tvm_ffi
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel

from ..cost_models.rfei import RFEICostModel as ForestEIModel
from ..cost_models.rfei import expected_improvement
from ..trace import StoreFeatures, aggregate_store_features

__all__ = ["PREDICT_MODES", "RFEICostModel", "aggregate_store_features", "python_cost_model"]

PREDICT_MODES = ("ei", "mean")
_REFERENCE_POOL = 2048  # unmeasured candidates' rows kept for forestci's calibration


# ``load`` runs behind meta_schedule's C++ ``CostModel.load``: errors cross the FFI by class name, and an
# unregistered name comes back as RuntimeError, so a missing file would lose its FileNotFoundError.
tvm_ffi.error.register_error("FileNotFoundError", FileNotFoundError)

_LIVE_MODELS: weakref.WeakSet = weakref.WeakSet()  # the Python side of every RFEICostModel alive


def python_cost_model(cost_model: Any) -> Any:
    """The Python ``RFEICostModel`` behind a cost model handed over by meta_schedule's C++ side (which passes a
    bare ``PyCostModel`` handle, without the Python methods), or ``None`` when it is not one of ours."""
    if cost_model is None:
        return None
    if hasattr(cost_model, "predict_mean_std"):
        return cost_model
    for model in list(_LIVE_MODELS):
        outer = model._outer() if hasattr(model, "_outer") else None
        if outer is not None and outer.same_as(cost_model):
            return model
    return None


def _workload_key(context: Any) -> str:
    return f"{tvm_ffi.structural_hash(context.mod):x}"


@derived_object
class RFEICostModel(PyCostModel):
    """Random forest + expected improvement over meta_schedule candidates. ``predict``: expected improvement over the
    workload's best (``"ei"``) or normalised throughput (``"mean"``), higher better. ``predict_mean_std`` gives mean and
    forestci standard deviation in the same units, from which ``ContextualEvolutionarySearch`` sets its exploration
    rate. ``save``/``load`` keep the training data (``.npz``)."""

    def __init__(
        self,
        n_trees: int = 100,
        predict: str = "ei",
        uncertainty: str = "forestci",
        calibrate: bool = True,
        seed: int = 0,
    ):
        super().__init__()
        if predict not in PREDICT_MODES:
            raise ValueError(f"RFEICostModel: predict must be one of {PREDICT_MODES}, got {predict!r}")
        self.predict_mode = predict
        self.featurize = StoreFeatures()
        self.width = self.featurize.store_width
        self.rfei_options = {
            "n_trees": int(n_trees),
            "uncertainty": uncertainty,
            "calibrate": bool(calibrate),
            "seed": int(seed),
        }
        self.rfei = ForestEIModel(**self.rfei_options, reference=self._reference_rows)  # type: ignore[arg-type]
        self.features = np.zeros((0, self.featurize.width))
        self.costs = np.zeros(0)  # mean seconds per run; inf for failed candidates
        self.workloads: list[str] = []
        self._pool = np.zeros((0, self.featurize.width))
        self.n_updates = 0
        self.n_predicts = 0
        _LIVE_MODELS.add(self)

    # -- features -------------------------------------------------------------------------------
    def _reference_rows(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Random unmeasured candidates for forestci's calibration: rows this model was last asked about."""
        pool = self._pool if len(self._pool) else self.features
        if len(pool) <= n:
            return pool
        return pool[rng.choice(len(pool), n, replace=False)]

    # -- training -------------------------------------------------------------------------------
    def update(self, context: Any, candidates: list, results: list) -> None:
        """Add measured candidates (``RunnerResult``; errors count as throughput 0) and refit."""
        self.n_updates += 1
        if len(candidates) != len(results):
            raise ValueError(f"RFEICostModel.update: {len(candidates)} candidates but {len(results)} results")
        if not candidates:
            return
        rows = self.featurize(context, candidates)
        costs = []
        for res in results:
            secs = [float(s) for s in res.run_secs] if res.run_secs is not None and res.error_msg is None else []
            costs.append(float(np.mean(secs)) if secs and all(s > 0 for s in secs) else np.inf)
        self.features = np.concatenate([self.features, rows])
        self.costs = np.concatenate([self.costs, costs])
        self.workloads += [_workload_key(context)] * len(candidates)
        self._refit()

    def _targets(self) -> np.ndarray:
        """best cost / cost within each workload (1 for its best candidate, 0 for failures)."""
        ys = np.zeros(len(self.costs))
        keys = np.asarray(self.workloads)
        for key in set(self.workloads):
            mask = keys == key
            best = float(np.min(self.costs[mask]))
            if np.isfinite(best):
                ys[mask] = best / self.costs[mask]
        return ys

    def _refit(self) -> None:
        ys = self._targets()
        if len(ys) and ys.max() > 0:  # a fresh forest per fit: it depends on the data and the seed only
            self.rfei = ForestEIModel(**self.rfei_options, reference=self._reference_rows)  # type: ignore[arg-type]
            self.rfei.fit(self.features.astype(np.float32), ys, len(ys))

    # -- scoring --------------------------------------------------------------------------------
    def best_throughput(self, context: Any) -> float:
        """The workload's best measured normalised throughput: 1 once it has a valid measurement, else 0."""
        key = _workload_key(context)
        ok = [np.isfinite(c) for c, k in zip(self.costs, self.workloads) if k == key]
        return 1.0 if any(ok) and self.rfei.forest is not None else 0.0

    def predict_mean_std(self, context: Any, candidates: list) -> tuple[np.ndarray, np.ndarray]:
        """Predicted normalised throughput and its standard deviation (zeros before the first fit)."""
        rows = self.featurize(context, candidates)
        self._pool = np.concatenate([rows, self._pool])[:_REFERENCE_POOL]
        if self.rfei.forest is None:
            return np.zeros(len(rows)), np.zeros(len(rows))
        return self.rfei.predict_mean_std(rows.astype(np.float32))

    def predict(self, context: Any, candidates: list) -> np.ndarray:
        """Scores, higher is better: expected improvement or the predicted mean (see ``predict``)."""
        self.n_predicts += 1
        mean, std = self.predict_mean_std(context, candidates)
        if self.rfei.forest is None or self.predict_mode == "mean":
            return np.asarray(mean, dtype="float64")
        return np.asarray(expected_improvement(mean, std, 1.0), dtype="float64")

    # -- persistence ----------------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Write the training data (features, costs, workloads) to ``path`` as ``.npz``."""
        with open(path, "wb") as fh:
            np.savez(
                fh,
                features=self.features,
                costs=self.costs,
                workloads=np.asarray(self.workloads, dtype=str),
                width=np.asarray(self.width),
            )

    def load(self, path: str) -> None:
        """Read what ``save`` wrote and refit the forest on it."""
        if not os.path.isfile(path):
            raise FileNotFoundError(f"RFEICostModel.load: no such file: {path}")
        try:
            with np.load(path, allow_pickle=False) as data:
                features, costs = data["features"], data["costs"]
                workloads, width = [str(w) for w in data["workloads"]], int(data["width"])
        except (KeyError, ValueError, OSError) as err:
            raise ValueError(f"RFEICostModel.load: {path} is not a file RFEICostModel.save wrote ({err})") from err
        if width != self.width or features.shape != (len(costs), self.featurize.width) or len(workloads) != len(costs):
            raise ValueError(
                f"RFEICostModel.load: {path} holds features of shape {features.shape} for {len(costs)} "
                f"costs; this model needs ({len(costs)}, {self.featurize.width})"
            )
        self.features, self.costs, self.workloads = features.astype(np.float64), costs.astype(np.float64), workloads
        self._refit()
