"""From predicted costs to deployed kernels: every T votes over all measured kernels, a decision tree compresses.

Each T votes for the kernel predicted fastest there among those measured correct. Trees with 1, 2, ... leaves
(``DecisionTreeClassifier(max_leaf_nodes=...)``) learn the votes, each leaf serving its T with the kernel of least
summed predicted latency; the smallest tree whose mean predicted slowdown is within ``tolerance`` is deployed, so
the kernel count follows from its cost, not a cap. Each T then takes its best deployed kernel, and the dispatcher's
tree learns those choices exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Compression", "calibrated_costs", "compress_votes", "kept_versions", "verified_labels"]


@dataclass
class Compression:
    """The deployed choice: ``labels[i]`` serves ``ts[i]``, ``votes[i]`` is what it voted for; ``loss``: mean predicted
    slowdown against every T's own winner; ``tried``: (leaves, kernels, loss) of every tree considered."""

    ts: list[int]
    labels: list[int]
    votes: list[int]
    loss: float
    tried: list[tuple[int, int, float]] = field(default_factory=list)

    @property
    def kernels(self) -> list[int]:
        """Rows deployed, in order of first use over T."""
        return list(dict.fromkeys(self.labels))


def calibrated_costs(predicted: np.ndarray, timed: np.ndarray, ts: Sequence[int]) -> np.ndarray:
    """Each kernel's predicted seconds anchored to its timings: measured where timed, elsewhere the prediction times
    the measured / predicted ratio, interpolated in log space between the nearest timed T (constant beyond); rows
    never timed keep the prediction. f_MK is one number per kernel, so its error is similar at neighbouring T."""
    pred = np.asarray(predicted, dtype=np.float64)
    meas = np.asarray(timed, dtype=np.float64)
    if pred.shape != meas.shape or pred.ndim != 2 or pred.shape[1] != len(ts):
        raise ValueError(
            f"predicted and timed must both be (kernels, {len(ts)}) matrices, got {pred.shape}, {meas.shape}"
        )
    x = np.asarray(ts, dtype=np.float64)
    out = pred.copy()
    for i in range(pred.shape[0]):
        ok = np.isfinite(meas[i]) & (meas[i] > 0) & (pred[i] > 0)
        if not ok.any():
            continue
        order = np.argsort(x[ok])
        ratio = np.log(meas[i, ok] / pred[i, ok])[order]
        out[i] = pred[i] * np.exp(np.interp(x, x[ok][order], ratio))
        out[i, ok] = meas[i, ok]
    return out


def _runs(votes: np.ndarray) -> int:
    return int(1 + np.count_nonzero(votes[1:] != votes[:-1]))


def _leaf_labels(costs: np.ndarray, groups: np.ndarray) -> np.ndarray:
    labels = np.empty(costs.shape[1], dtype=np.int64)
    for g in np.unique(groups):
        cols = groups == g
        labels[cols] = int(np.argmin(costs[:, cols].sum(axis=1)))
    return labels


def compress_votes(
    costs: np.ndarray,
    ts: Sequence[int],
    tolerance: float = 0.01,
    max_kernels: int | None = None,
    random_state: int = 0,
) -> Compression:
    """Pick the kernels to deploy from a ``(kernels, len(ts))`` predicted-cost matrix (module docstring): trees grow
    one leaf at a time until their loss is within ``tolerance`` (and they deploy at most ``max_kernels``); when none
    is, the least-loss tree within ``max_kernels`` is taken."""
    c = np.asarray(costs, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] == 0 or c.shape[1] != len(ts) or not len(ts):
        raise ValueError(f"costs must be a (kernels, {len(ts)}) matrix with at least one kernel, got {c.shape}")
    if not np.all(np.isfinite(c)) or np.any(c <= 0):
        raise ValueError("predicted costs must be finite and positive")
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    if max_kernels is not None and max_kernels < 1:
        raise ValueError(f"max_kernels must be >= 1, got {max_kernels}")
    order = np.argsort(np.asarray(ts))
    xs = np.asarray(ts, dtype=np.int64)[order].reshape(-1, 1)
    c = c[:, order]
    best = c.min(axis=0)
    votes = c.argmin(axis=0)
    tried: list[tuple[int, int, float]] = []
    choice: tuple[float, np.ndarray] | None = None
    for leaves in range(1, _runs(votes) + 1):
        if leaves == 1:
            groups = np.zeros(len(xs), dtype=np.int64)
        else:
            from sklearn.tree import DecisionTreeClassifier  # only a selection needs scikit-learn

            tree = DecisionTreeClassifier(max_leaf_nodes=leaves, random_state=random_state).fit(xs, votes)
            groups = tree.apply(xs)
        labels = _leaf_labels(c, groups)
        loss = float(np.mean(c[labels, np.arange(len(best))] / best) - 1.0)
        n_kernels = len(set(labels.tolist()))
        tried.append((leaves, n_kernels, loss))
        if max_kernels is not None and n_kernels > max_kernels:
            continue
        if choice is None or loss < choice[0] - 1e-12:
            choice = (loss, labels)
        if loss <= tolerance:
            break
    if choice is None:  # every tree deployed too many kernels: one kernel is always within any cap
        labels = _leaf_labels(c, np.zeros(len(xs), dtype=np.int64))
        choice = (float(np.mean(c[labels, np.arange(len(best))] / best) - 1.0), labels)
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    deployed = np.unique(choice[1])
    labels = deployed[np.argmin(c[deployed], axis=0)]  # every T then takes its best deployed kernel
    loss = float(np.mean(c[labels, np.arange(len(best))] / best) - 1.0)
    return Compression([int(t) for t in ts], [int(v) for v in labels[back]], [int(v) for v in votes[back]], loss, tried)


def verified_labels(labels: Sequence[int], timed: np.ndarray, aligned: np.ndarray) -> tuple[list[int], int]:
    """Each T's kernel chosen again on the deployed kernels' timings at every T (``DietCodeTuner``'s ``verify``): the
    vote sees timings only at the sampled T, and between them another deployed kernel can be faster. ``timed``:
    seconds, a row per deployed kernel, a column per T (non-finite where it failed); ``labels[j]``: the row serving
    ``ts[j]``; ``aligned[i, j]``: kernel ``i`` runs its aligned version at ``ts[j]``, which it keeps (its timed
    generic version would overstate it); other T take the row timed fastest. Returns the labels and how many changed."""
    t = np.asarray(timed, dtype=np.float64)
    al = np.asarray(aligned, dtype=bool)
    if t.ndim != 2 or t.shape != al.shape or t.shape[1] != len(labels):
        raise ValueError(
            f"timed and aligned must both be (kernels, {len(labels)}) matrices, got {t.shape} and {al.shape}"
        )
    out = list(labels)
    for j, label in enumerate(labels):
        if al[label, j] or not np.isfinite(t[:, j]).any():
            continue
        best = int(np.nanargmin(np.where(np.isfinite(t[:, j]), t[:, j], np.nan)))
        if np.isfinite(t[label, j]) and t[best, j] >= t[label, j]:
            continue
        out[j] = best
    return out, sum(a != b for a, b in zip(out, labels))


def kept_versions(units: Sequence[int], kernel: np.ndarray, version: np.ndarray) -> tuple[list[int], list[float]]:
    """Which aligned versions to deploy: ``units[i]`` is kernel ``i``'s alignment (0: it has no version),
    ``kernel[i, j]`` and ``version[i, j]`` the seconds of the kernel and of its aligned version at the ``j``-th T
    they were both timed at (non-finite: failed or not timed). A version is kept where it ran faster than its kernel
    (geometric mean over the T both timed) or where only it ran. Returns the kept units (0: dropped) and each kernel's
    version/kernel time ratio (NaN: none)."""
    k, v = np.asarray(kernel, dtype=np.float64), np.asarray(version, dtype=np.float64)
    if k.ndim != 2 or k.shape != v.shape or k.shape[0] != len(units):
        raise ValueError(f"kernel and version must both be ({len(units)}, T) matrices, got {k.shape} and {v.shape}")
    kept, ratios = [], []
    for u, ks, vs in zip(units, k, v):
        both = np.isfinite(ks) & np.isfinite(vs) & (ks > 0) & (vs > 0)
        ratio = float(np.exp(np.mean(np.log(vs[both] / ks[both])))) if both.any() else float("nan")
        only_version = np.isfinite(vs).any() and not np.isfinite(ks).any()
        kept.append(int(u) if u and ((both.any() and ratio < 1.0) or only_version) else 0)
        ratios.append(ratio)
    return kept, ratios
