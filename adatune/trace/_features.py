"""The one trace feature extractor: TVM's ``PerStoreFeature`` rows (one per buffer store) pooled by sum, mean and max
to one fixed-width row per program, keeping the total work and the heaviest store. Trace search and the
meta_schedule ``RFEICostModel`` both use it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tvm.s_tir.meta_schedule.feature_extractor import PerStoreFeature

__all__ = ["StoreFeatures", "aggregate_store_features"]

_AGGREGATES = 3  # sum, mean, max


def aggregate_store_features(per_store: np.ndarray, width: int) -> np.ndarray:
    """One row from a program's (n_stores, width) matrix: [sum, mean, max] over stores (zeros if none)."""
    a = np.asarray(per_store, dtype=np.float64).reshape(-1, width)
    if len(a) == 0:
        return np.zeros(_AGGREGATES * width)
    return np.concatenate([a.sum(axis=0), a.mean(axis=0), a.max(axis=0)])


class StoreFeatures:
    """Pooled per-store features of meta_schedule ``MeasureCandidate``s in a ``TuneContext``."""

    def __init__(self) -> None:
        self.extractor = PerStoreFeature(extract_workload=False)
        self.store_width = int(self.extractor.feature_vector_length)
        self.width = _AGGREGATES * self.store_width

    def __call__(self, context: Any, candidates: list) -> np.ndarray:
        """(n, width) float64 rows, one per candidate."""
        if not candidates:
            return np.zeros((0, self.width))
        per_store = self.extractor.extract_from(context, candidates)
        return np.stack([aggregate_store_features(f.numpy(), self.store_width) for f in per_store])
