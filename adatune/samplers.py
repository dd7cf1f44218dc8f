"""ReLeASE's adaptive sampling: measure representatives of the search trajectory, not its top configs.

The optimizer's candidates crowd around a few promising regions, so measuring the top ``plan_size`` of
them spends hardware time on near-duplicates. Clustering them with k-means and measuring one config per
cluster covers the same regions with far fewer measurements; the number of clusters follows the data
(the knee of the inertia curve) instead of a fixed plan size.
"""
from __future__ import annotations

from collections import deque
from typing import Collection, Sequence

import numpy as np
from sklearn.cluster import KMeans

from .space import ConfigSpace

__all__ = ["AdaptiveSampler", "knee_kmeans"]


def knee_kmeans(points: np.ndarray, k_min: int = 8, k_max: int = 64, threshold: float = 1.05,
                seed: int = 0, n_init: int = 3) -> tuple[np.ndarray, list[float]]:
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
    """``select(candidates, num, visited)``: k-means centroids of the candidates, snapped to configs.

    Clustering runs on knob indices scaled to [0, 1] per knob, so a knob with two values weighs as much as
    one with thirty. A centroid is snapped to a config by rounding each knob index. When that config was
    measured already (or picked for this batch), it is replaced by the config of each knob's most common
    index over the candidates, and when that one is taken too, by the nearest unmeasured neighbour; so
    a batch never measures a config twice.
    """

    def __init__(self, space: ConfigSpace, k_min: int = 8, k_max: int = 64, threshold: float = 1.05,
                 n_init: int = 3, rng: np.random.Generator | None = None):
        if not 1 <= k_min <= k_max:
            raise ValueError(f"need 1 <= k_min <= k_max, got k_min={k_min}, k_max={k_max}")
        if threshold < 1:
            raise ValueError(f"threshold must be >= 1 (1 keeps adding clusters while the loss falls), got {threshold}")
        self.space = space
        self.k_min, self.k_max, self.threshold, self.n_init = k_min, k_max, threshold, n_init
        self.rng = rng if rng is not None else np.random.default_rng()
        self.dims = np.asarray(space.dims, dtype=np.int64)
        self._scale = np.concatenate([[1], np.cumprod(self.dims)[:-1]]).astype(np.int64)
        self.history: list[int] = []  # how many configs each call chose (the adaptive batch size)

    def digits(self, indices: Sequence[int]) -> np.ndarray:
        idx = np.asarray(indices, dtype=np.int64)
        return (idx[:, None] // self._scale[None, :]) % self.dims[None, :]

    def index(self, digits: np.ndarray) -> int:
        return int((np.asarray(digits, dtype=np.int64) * self._scale).sum())

    def select(self, candidates: Sequence[int], num: int, visited: Collection[int]) -> list[int]:
        cands = [int(c) for c in candidates]  # repeats kept: where the trajectory dwelt weighs more
        if not cands or num < 1:
            self.history.append(0)
            return []
        digits = self.digits(cands)
        span = np.maximum(self.dims - 1, 1).astype(np.float64)
        centers, _ = knee_kmeans(digits / span, min(self.k_min, num), min(self.k_max, num), self.threshold,
                                 seed=int(self.rng.integers(2**31 - 1)), n_init=self.n_init)
        snapped = np.clip(np.rint(centers * span), 0, self.dims - 1).astype(np.int64)
        mode = np.asarray([np.bincount(digits[:, k], minlength=int(self.dims[k])).argmax()
                           for k in range(len(self.dims))], dtype=np.int64)
        taken: set[int] = set()
        out: list[int] = []
        for c in snapped:
            pick = self._resolve(c, mode, visited, taken)
            if pick is not None:
                out.append(pick)
                taken.add(pick)
        self.history.append(len(out))
        return out

    def _free(self, idx: int, visited: Collection[int], taken: set[int]) -> bool:
        return idx not in visited and idx not in taken and self.space.is_index_valid(idx)

    def _resolve(self, centroid: np.ndarray, mode: np.ndarray, visited: Collection[int],
                 taken: set[int]) -> int | None:
        """The centroid's config, else the knob-mode config, else the nearest free neighbour of the centroid."""
        for digits in (centroid, mode):
            idx = self.index(digits)
            if self._free(idx, visited, taken):
                return idx
        return self._nearest_free(centroid, visited, taken)

    def _nearest_free(self, start: np.ndarray, visited: Collection[int], taken: set[int],
                      max_expand: int = 20000) -> int | None:
        """Breadth-first search over +-1 knob moves: the closest free config in knob-index steps."""
        first = self.index(start)
        seen = {first}
        queue: deque[tuple[int, np.ndarray]] = deque([(first, np.asarray(start, dtype=np.int64))])
        while queue and len(seen) < max_expand:
            _, d = queue.popleft()
            for k in range(len(self.dims)):
                for step in (-1, 1):
                    v = int(d[k]) + step
                    if not 0 <= v < self.dims[k]:
                        continue
                    nd = d.copy()
                    nd[k] = v
                    idx = self.index(nd)
                    if idx in seen:
                        continue
                    seen.add(idx)
                    if self._free(idx, visited, taken):
                        return idx
                    queue.append((idx, nd))
        # a nearly exhausted neighbourhood: any free config will do
        got = self.space.sample(self.rng, 1, exclude=set(visited) | taken)
        return got[0] if got else None
