"""ReLeASE's adaptive sampling: measure representatives of the search trajectory, not its top configs.

The optimizer's candidates crowd around a few promising regions, so measuring the top ``plan_size`` of
them spends hardware time on near-duplicates. Clustering them with k-means and measuring one config per
cluster covers the same regions with far fewer measurements; the number of clusters follows the data
(the knee of the inertia curve) instead of a fixed plan size.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
from sklearn.cluster import KMeans

from .space._candidate import CandidateSpace, DiscreteSpace

__all__ = ["AdaptiveSampler", "knee_kmeans"]


def knee_kmeans(
    points: np.ndarray, k_min: int = 8, k_max: int = 64, threshold: float = 1.05, seed: int = 0, n_init: int = 3
) -> tuple[np.ndarray, list[float]]:
    """Cluster ``points`` with k = k_min, k_min + 1, ... and stop at the knee of the inertia curve.

    The search stops at the first k whose inertia L_k satisfies ``threshold * L_k > L_{k-1}``, i.e. one
    more cluster no longer cuts the loss by the factor ``threshold``; the centroids of k - 1, the last
    k that still paid off, are returned (or those of ``k_max``). Also returns the inertias computed.
    """
    n_distinct = len(np.unique(points, axis=0))
    k_max = max(1, min(k_max, n_distinct))
    k_min = max(1, min(k_min, k_max))
    prev_loss, prev_centers = np.inf, None
    losses: list[float] = []
    for k in range(k_min, k_max + 1):
        km = KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit(points)
        loss = float(km.inertia_)
        losses.append(loss)
        if prev_centers is not None and threshold * loss > prev_loss:
            return prev_centers, losses
        if loss <= 1e-12:  # every point is a centroid already: more clusters cannot help
            return km.cluster_centers_, losses
        prev_loss, prev_centers = loss, km.cluster_centers_
    assert prev_centers is not None
    return prev_centers, losses


class AdaptiveSampler:
    """``select(candidates, num, visited)``: for each k-means centroid, the scored candidate nearest to it.

    Clustering runs on a discrete space's digits scaled to [0, 1] per dimension (so a knob with two values
    weighs as much as one with thirty), or on standardised features for other spaces. Each centroid is
    represented by the nearest candidate the optimizer proposed (so every measured config is one the model
    scored, as in the paper) that is neither measured already nor picked for this batch; a centroid whose
    whole neighbourhood is taken contributes nothing, so a batch never measures a config twice.
    """

    def __init__(
        self,
        space: CandidateSpace,
        k_min: int = 8,
        k_max: int = 64,
        threshold: float = 1.05,
        n_init: int = 3,
        rng: np.random.Generator | None = None,
    ):
        if not 1 <= k_min <= k_max:
            raise ValueError(f"need 1 <= k_min <= k_max, got k_min={k_min}, k_max={k_max}")
        if threshold < 1:
            raise ValueError(f"threshold must be >= 1 (1 keeps adding clusters while the loss falls), got {threshold}")
        self.space = space
        self.k_min, self.k_max, self.threshold, self.n_init = k_min, k_max, threshold, n_init
        self.rng = rng if rng is not None else np.random.default_rng()
        self.history: list[int] = []  # how many candidates each call chose (the adaptive batch size)

    def embed(self, candidates: Sequence[Any]) -> np.ndarray:
        """Points to cluster: scaled digits of a discrete space, else standardised features."""
        if isinstance(self.space, DiscreteSpace):
            span = np.maximum(np.asarray(self.space.dims, dtype=np.float64) - 1, 1)
            return np.asarray(self.space.encode(candidates), dtype=np.float64) / span
        x = np.nan_to_num(np.asarray(self.space.featurize(candidates), dtype=np.float64))
        std = x.std(axis=0)
        return (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)

    def select(self, candidates: Sequence[Any], num: int, visited: Collection[str]) -> list[Any]:
        # repeats kept: where the trajectory dwelt weighs more in the clustering
        cands = [c for c in candidates if str(c.key) not in visited]
        if not cands or num < 1:
            self.history.append(0)
            return []
        points = self.embed(cands)
        centers, _ = knee_kmeans(
            points,
            min(self.k_min, num),
            min(self.k_max, num),
            self.threshold,
            seed=int(self.rng.integers(2**31 - 1)),
            n_init=self.n_init,
        )
        dist = ((points[None, :, :] - centers[:, None, :]) ** 2).sum(axis=2)  # (centroids, candidates)
        taken: set[str] = set()
        out: list[Any] = []
        for row in dist:
            for j in np.argsort(row, kind="stable"):
                key = str(cands[j].key)
                if key not in taken:
                    out.append(cands[j])
                    taken.add(key)
                    break
        self.history.append(len(out))
        return out
