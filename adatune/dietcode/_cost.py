"""DietCode's micro-kernel cost model: cost(kernel, T) = f_MK(kernel) x f_occ(P / M) x f_pad(kernel, T), in seconds per
useful FLOP; ``P`` is the tiles shape T needs (parallel chunks on x86, thread blocks on CUDA), ``M`` the cores or SMs.
``f_pad`` = padded work / real work. ``f_occ(x) = 1 / (1 - k + k * x / ceil(x))``: the last wave leaves ``ceil(x) - x``
of the cores idle, and ``k`` in [0, 1] (fitted with scipy) says how much of that costs. ``f_MK`` depends on the kernel
alone: one xgboost regressor learns it from every measured shape at once, labels divided by ``f_occ`` and ``f_pad``,
from the program's features (``features="program"``) or hand-made ones (``"hand"``); see ``_program``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.optimize import least_squares

if TYPE_CHECKING:
    from xgboost import XGBRegressor

from ._program import kernel_features
from ._schedule import padding_units
from ._space import MicroKernel, MicroKernelSpace
from ._workloads import DynamicWorkload

__all__ = ["f_occ", "f_pad", "num_tiles", "fit_occupancy_k", "sample_shapes", "select_kernels", "MicroKernelCostModel"]


def num_tiles(wl: DynamicWorkload, mk: MicroKernel, t: int) -> int:
    """P: the tiles (chunks / thread blocks) the kernel runs for ``t``; a split-K kernel runs each once per part."""
    batch, m, n, _ = wl.gemm_extents(t)
    return batch * math.ceil(m / mk.mt) * math.ceil(n / mk.nt) * mk.split_k


def f_pad(wl: DynamicWorkload, mk: MicroKernel, t: int) -> float:
    """Padded work over real work: every axis rounds up to what the schedule pads it to (``padding_units``: the
    register tile for a T axis on x86, the tile on CUDA, ``kt`` for the reduction)."""
    _, m, n, k = wl.gemm_extents(t)
    padded = math.prod(math.ceil(x / u) * u for x, u in zip((m, n, k), padding_units(wl, mk)))
    return padded / (m * n * k)


def f_occ(x: float | np.ndarray, k: float) -> float | np.ndarray:
    """Occupancy penalty for ``x = P / M`` tiles per core: ``1 / (1 - k + k * x / ceil(x))``."""
    xs = np.asarray(x, dtype=np.float64)
    if np.any(xs <= 0):
        raise ValueError(f"P / M must be positive, got {x}")
    out = 1.0 / (1.0 - k + k * xs / np.ceil(xs))
    return float(out) if np.ndim(out) == 0 else out


def fit_occupancy_k(
    groups: Sequence[Any], x: Sequence[float] | np.ndarray, cost: Sequence[float] | np.ndarray
) -> float:
    """Fit k from measurements: ``log cost_i = c_{group_i} + log f_occ(x_i; k)``, one free level per kernel
    (``groups`` names each measurement's kernel), solved with scipy's bounded least squares."""
    g = np.asarray(groups)
    xs = np.asarray(x, dtype=np.float64)
    ys = np.log(np.asarray(cost, dtype=np.float64))
    ids, inv = np.unique(g, return_inverse=True)
    if len(ys) <= len(ids):  # every kernel seen once: k is not identifiable
        return 1.0
    eff = xs / np.ceil(xs)
    if np.allclose(eff, 1.0):  # every measured shape fills whole waves: k is not identifiable, assume no hiding
        return 1.0

    def residual(p: np.ndarray) -> np.ndarray:
        return ys - p[1:][inv] + np.log(1.0 - p[0] + p[0] * eff)

    levels = np.array([ys[inv == i].mean() for i in range(len(ids))])
    sol = least_squares(
        residual,
        np.concatenate([[0.5], levels]),
        bounds=(
            np.concatenate([[0.0], np.full(len(ids), -np.inf)]),
            np.concatenate([[1.0], np.full(len(ids), np.inf)]),
        ),
    )
    return float(sol.x[0])


def sample_shapes(t_range: tuple[int, int], n: int, rng: np.random.Generator) -> list[int]:
    """``n`` distinct extents spread over the range: both ends plus one random T per equal-width stratum."""
    lo, hi = t_range
    if n < 1:
        raise ValueError(f"need at least one shape, got n={n}")
    if hi - lo + 1 <= n:
        return list(range(lo, hi + 1))
    picks = {lo, hi}
    edges = np.linspace(lo, hi + 1, max(n - 2, 1) + 1)
    for a, b in zip(edges[:-1], edges[1:]):
        picks.add(int(rng.integers(int(math.ceil(a)), max(int(math.ceil(a)) + 1, int(math.ceil(b))))))
    extra = [t for t in range(lo, hi + 1) if t not in picks]
    while len(picks) < n and extra:
        picks.add(extra.pop(int(rng.integers(len(extra)))))
    return sorted(picks)[:n] if len(picks) > n else sorted(picks)


def select_kernels(costs: np.ndarray, max_kernels: int, tolerance: float = 0.01) -> list[int]:
    """A small kernel set covering every T, for scripts (the tuner votes over all kernels, ``_select``): greedily add
    the kernel that most lowers the summed relative cost ``min_{chosen} cost[k, t] / min_k cost[k, t]`` until
    ``max_kernels`` or a gain below ``tolerance``."""
    if costs.ndim != 2 or costs.shape[0] == 0:
        raise ValueError("costs must be a (kernels, shapes) matrix with at least one kernel")
    rel = costs / costs.min(axis=0, keepdims=True)
    chosen: list[int] = []
    current = np.full(rel.shape[1], np.inf)
    while len(chosen) < max_kernels:
        totals = np.minimum(rel, current).sum(axis=1)
        totals[chosen] = np.inf
        best = int(np.argmin(totals))
        before = current.sum() if chosen else np.inf
        if chosen and before - totals[best] < tolerance * rel.shape[1]:
            break
        chosen.append(best)
        current = np.minimum(current, rel[best])
    return chosen


class MicroKernelCostModel:
    """f_MK learnt jointly over all measured shapes, times the analytic f_occ and f_pad."""

    def __init__(self, space: MicroKernelSpace, workload: DynamicWorkload, seed: int = 0, features: str = "program"):
        self.space = space
        self.workload = workload
        self.seed = seed
        self.features = features
        self.featurize = kernel_features(features, space, workload)
        self.k = 1.0
        self._reg: XGBRegressor | None = None

    def _x(self, mk: MicroKernel, t: int) -> float:
        return num_tiles(self.workload, mk, t) / self.space.cores

    def fit(self, kernels: Sequence[MicroKernel], ts: Sequence[int], seconds: Sequence[float]) -> MicroKernelCostModel:
        """Fit k, then f_MK on labels ``log(cost / (f_pad * f_occ))``."""
        if not (len(kernels) == len(ts) == len(seconds)) or not kernels:
            raise ValueError("fit needs one (kernel, T, seconds) triple per measurement, and at least one")
        per_flop = np.array([s / self.workload.flop(t) for s, t in zip(seconds, ts)])
        pad = np.array([f_pad(self.workload, mk, t) for mk, t in zip(kernels, ts)])
        x = np.array([self._x(mk, t) for mk, t in zip(kernels, ts)])
        self.k = fit_occupancy_k([mk.key for mk in kernels], x, per_flop / pad)
        labels = np.log(per_flop / pad / np.asarray(f_occ(x, self.k)))
        from xgboost import XGBRegressor  # only a fit needs xgboost, not `import adatune`

        self._reg = XGBRegressor(
            n_estimators=200, max_depth=4, learning_rate=0.1, random_state=self.seed, n_jobs=1, verbosity=0
        )
        self._reg.fit(self.featurize(kernels), labels)
        return self

    def f_mk(self, kernels: Sequence[MicroKernel]) -> np.ndarray:
        if self._reg is None:
            raise RuntimeError("the cost model is not fitted yet")
        return np.exp(self._reg.predict(self.featurize(kernels)).astype(np.float64))

    def predict(self, kernels: Sequence[MicroKernel], ts: Sequence[int]) -> np.ndarray:
        """Predicted seconds, a ``(len(kernels), len(ts))`` matrix."""
        mk_cost = self.f_mk(kernels)
        out = np.empty((len(kernels), len(ts)))
        for a, mk in enumerate(kernels):
            for b, t in enumerate(ts):
                out[a, b] = (
                    mk_cost[a]
                    * float(f_occ(self._x(mk, t), self.k))
                    * f_pad(self.workload, mk, t)
                    * self.workload.flop(t)
                )
        return out
