"""ReLeASE's adaptive sampling: measure representatives of the search trajectory, not its top configs. Walkers crowd
around a few regions, so the top ``plan_size`` are near-duplicates; one config per k-means cluster covers the same
regions with fewer measurements, k at the knee of the inertia curve."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
from scipy import stats
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from ..space._candidate import CandidateSpace, DiscreteSpace

__all__ = ["AdaptiveSampler", "knee_kmeans"]


def knee_kmeans(
    points: np.ndarray, k_min: int = 8, k_max: int = 64, threshold: float = 1.05, seed: int = 0, n_init: int = 3
) -> tuple[np.ndarray, list[float]]:
    """Cluster ``points`` with k = k_min, k_min + 1, ... up to the knee of the inertia curve: the first k with
    ``threshold * L_k > L_{k-1}`` stops, and the centroids of k - 1 (or ``k_max``) are returned, with the inertias."""
    n_distinct = len(np.unique(points, axis=0))
    k_max = max(1, min(k_max, n_distinct))
    k_min = max(1, min(k_min, k_max))
    prev_loss, prev_centers = np.inf, None
    losses: list[float] = []
    for k in range(k_min, k_max + 1):
        # k-means on a few hundred points gains nothing from OpenMP threads, which would spin on the cores that
        # the tuner's measurement workers time kernels on (XGBoost's model runs on one thread for the same reason)
        with threadpool_limits(1, "openmp"):
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
    """ReLeASE's adaptive sampling (Chameleon, ICLR 2020, Alg. 2): ``select(trajectory, num, visited)``. The optimizer's
    trajectory (repeats kept, so where the search dwelt weighs more) is clustered with k-means, k from ``k_min`` to
    ``k_max`` by the knee rule; the batch is one config per cluster, so its size follows the data, not ``num``. On a
    ``DiscreteSpace`` a centroid is rounded to a digit vector; one already taken is replaced by its cluster's
    per-dimension mode (the paper's sample synthesis), then by the untaken member nearest the centroid, which also
    represents clusters on other spaces. A batch never measures a config twice. ``max_points`` caps the points clustered
    (a seeded subsample). The centroids are the whole plan (Alg. 2: NextSamples = Centroids): tuners add no random share
    unless ``eps_greedy`` is given.

    Where this leaves the paper: Alg. 2 replaces every visited centroid by ``mode(s_Theta)``, one mode of the whole
    trajectory; its text (sec. 4.2) says "modes of each dimension". Each cluster's own per-dimension mode keeps two
    replaced centroids from becoming the same config, as one global mode would make them."""

    def __init__(
        self,
        space: CandidateSpace,
        k_min: int = 8,
        k_max: int = 64,
        threshold: float = 1.05,
        n_init: int = 3,
        max_points: int = 4096,
        rng: np.random.Generator | None = None,
    ):
        if not 1 <= k_min <= k_max:
            raise ValueError(f"need 1 <= k_min <= k_max, got k_min={k_min}, k_max={k_max}")
        if threshold < 1:
            raise ValueError(f"threshold must be >= 1 (1 keeps adding clusters while the loss falls), got {threshold}")
        if max_points < k_max:
            raise ValueError(f"max_points must be at least k_max={k_max}, got {max_points}")
        self.space = space
        self.k_min, self.k_max, self.threshold, self.n_init = k_min, k_max, threshold, n_init
        self.max_points = max_points
        self.rng = rng if rng is not None else np.random.default_rng()
        self.history: list[int] = []  # how many candidates each call chose (the adaptive batch size)
        self.sources: list[dict[str, int]] = []  # per call: picks that were centroids, modes, members

    def embed(self, candidates: Sequence[Any]) -> np.ndarray:
        """Points to cluster: scaled digits of a discrete space, else standardised features."""
        if isinstance(self.space, DiscreteSpace):
            return np.asarray(self.space.encode(candidates), dtype=np.float64) / self._span()
        x = np.nan_to_num(np.asarray(self.space.featurize(candidates), dtype=np.float64))
        std = x.std(axis=0)
        return (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)

    def _span(self) -> np.ndarray:
        assert isinstance(self.space, DiscreteSpace)
        return np.maximum(np.asarray(self.space.dims, dtype=np.float64) - 1, 1)

    def _free(self, digits: np.ndarray, taken: set[str]) -> Any | None:
        """The candidate of one digit row when it is valid and not taken, else None."""
        assert isinstance(self.space, DiscreteSpace)
        row = np.asarray(digits, dtype=np.int64)[None, :]
        if not bool(self.space.valid_digits(row)[0]):
            return None
        cand = self.space.from_digits(row)[0]
        return None if str(cand.key) in taken else cand

    def select(self, candidates: Sequence[Any], num: int, visited: Collection[str]) -> list[Any]:
        cands = list(candidates)
        if not cands or all(str(c.key) in visited for c in cands):
            self.history.append(0)
            self.sources.append({"centroid": 0, "mode": 0, "member": 0})
            return []
        seed = int(self.rng.integers(2**31 - 1))
        if len(cands) > self.max_points:
            keep = np.random.default_rng(seed).choice(len(cands), size=self.max_points, replace=False)
            cands = [cands[i] for i in sorted(keep)]
        points = self.embed(cands)
        centers, _ = knee_kmeans(points, self.k_min, self.k_max, self.threshold, seed=seed, n_init=self.n_init)
        dist = ((points[None, :, :] - centers[:, None, :]) ** 2).sum(axis=2)  # (centroids, points)
        label = np.argmin(dist, axis=0)
        taken: set[str] = {str(v) for v in visited}
        out: list[Any] = []
        count = {"centroid": 0, "mode": 0, "member": 0}
        space = self.space
        digits = space.encode(cands) if isinstance(space, DiscreteSpace) else None
        for c, row in enumerate(dist):
            pick, source = None, "member"
            if digits is not None and isinstance(space, DiscreteSpace):
                dims = np.asarray(space.dims, dtype=np.int64)
                rounded = np.clip(np.rint(centers[c] * self._span()), 0, dims - 1)
                pick, source = self._free(rounded, taken), "centroid"
                members = digits[label == c]
                if pick is None and len(members):
                    pick, source = self._free(stats.mode(members, axis=0, keepdims=False).mode, taken), "mode"
            if pick is None:
                source = "member"
                for j in np.argsort(row, kind="stable"):
                    if str(cands[j].key) not in taken:
                        pick = cands[j]
                        break
            if pick is not None:
                out.append(pick)
                taken.add(str(pick.key))
                count[source] += 1
        self.history.append(len(out))
        self.sources.append(count)
        return out
