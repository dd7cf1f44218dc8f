"""AdaTune's cost model: a random forest whose predictive uncertainty turns into expected improvement.

The infinitesimal jackknife (Wager, Hastie & Efron 2014, as in forestci) gives the variance of the forest's throughput
prediction, and expected improvement over the best measured throughput (AdaTune, NeurIPS 2020, eqs. (1)-(2)) rewards
configs predicted fast or poorly known. ``forestci.random_forest_error`` is not called per query (slow, and its
calibration depends on the query batch and NumPy's global state): the in-bag matrix and the empirical-Bayes
calibration are fitted once per fit. With ``calibrate=False`` the variance equals forestci's clipped at zero.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from scipy.stats import norm

from ..options import Option
from ..target import one_blas_thread
from ..task import TuningTask
from ._base import FEATURE_TYPE, NUM_THREADS, CostModel

__all__ = ["ACQUISITIONS", "RFEICostModel", "expected_improvement", "UNCERTAINTY_SOURCES"]

logger = logging.getLogger("adatune.cost_model")

UNCERTAINTY_SOURCES = ("forestci", "trees")
ACQUISITIONS = ("ei", "plugin-ei", "mean")
_N_REFERENCE = 256  # random configs the empirical-Bayes calibration is fitted on, once per fit
_CHI2_1_MEDIAN = 0.45493642311957283  # median of a chi-square with one degree of freedom: z^2 of a N(0, 1) z
_SIGMA_FACTOR_RANGE = (1e-2, 1e2)


def expected_improvement(mu: np.ndarray, sigma: np.ndarray, best: float) -> np.ndarray:
    """EI(x) = E[max(0, f(x) - f(x+))] for f(x) ~ N(mu, sigma^2) (eq. 1), in closed form (eq. 2):
    (mu - f+) Phi(Z) + sigma phi(Z), Z = (mu - f+) / sigma; where sigma = 0 it is max(0, mu - f+), never through Z."""
    mu = np.asarray(mu, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64)
    gap = mu - float(best)
    ei = np.maximum(gap, 0.0)
    pos = sigma > 0
    if np.any(pos):
        # beyond |Z| = 40, Phi is 0 or 1 and phi is 0 in double precision; clipping keeps Z**2 from overflowing
        z = np.clip(gap[pos] / sigma[pos], -40.0, 40.0)
        ei = ei.copy()
        ei[pos] = gap[pos] * norm.cdf(z) + sigma[pos] * norm.pdf(z)
    return np.maximum(ei, 0.0)  # the closed form can round to -1e-17 far below the best


class RFEICostModel(CostModel):
    """Random forest + expected improvement (AdaTune's RFEI).

    ``uncertainty="forestci"``: standard deviation from the infinitesimal jackknife (with forestci's empirical-Bayes
    calibration when ``calibrate``), falling back with a warning to the per-tree spread for a fit it cannot compute;
    ``"trees"``: the per-tree spread (what AdaTune's released code used). ``predict`` returns EI divided by the best
    measured throughput, so simulated annealing's temperature schedule applies as to AutoTVM's normalised XGB scores;
    ``predict_mean_std`` returns FLOP/s.

    ``acquisition="plugin-ei"``: EI over the forest's best predicted mean among its training configs (plug-in EI). A
    bootstrap forest's mean sits below its best training target, so plain EI ranks mostly by uncertainty.

    ``recalibrate=True`` scales the standard deviation (and eps_t) so the configs measured after each fit are
    standard-normal in hindsight: sqrt(median(z^2) / median(chi2_1)) over their held-out z (Kuleshov et al., ICML
    2018). The held-out statistics (``held_out``) are kept either way."""

    OPTIONS = (
        Option.declare("n_trees", int, "trees in the random forest (a spread needs two)", minimum=2),
        Option.declare(
            "uncertainty",
            str,
            "uncertainty source: forestci's jackknife or the per-tree spread",
            choices=UNCERTAINTY_SOURCES,
        ),
        FEATURE_TYPE,
        Option.declare("calibrate", bool, "empirical-Bayes calibration of forestci's variance"),
        Option.declare("min_samples_leaf", int, "the forest's minimum samples per leaf", minimum=1),
        Option.declare(
            "acquisition",
            str,
            "what the search maximises: expected improvement over the best measured throughput, over the forest's "
            "best predicted mean among the measured configs (plug-in EI), or the forest's mean alone (an ablation "
            "control)",
            choices=ACQUISITIONS,
        ),
        Option.declare(
            "recalibrate",
            bool,
            "scale the standard deviation so the configs measured after each fit have unit z-scores (held out)",
        ),
        NUM_THREADS,
    )

    def __init__(
        self,
        task: TuningTask | None = None,
        n_trees: int = 100,
        uncertainty: str = "forestci",
        feature_type: str = "knob",
        calibrate: bool = True,
        max_features: float | str | None = 1.0,
        min_samples_leaf: int = 1,
        num_threads: int | None = None,
        seed: int | None = None,
        reference: Callable[[np.random.Generator, int], np.ndarray] | None = None,
        acquisition: str = "ei",
        recalibrate: bool = False,
    ):
        self._bind(task, feature_type)
        self.acquisition = acquisition
        self.recalibrate = recalibrate
        self.sigma_factor = 1.0  # what the standard deviation is multiplied by (1 unless ``recalibrate``)
        self.sigma_factors: list[float] = []  # the factor after every fit, for the record
        self._held_out_z2: list[float] = []  # z^2 of every config measured after the forest that predicted it
        self.held_out: list[dict[str, float]] = []  # per refit: how the last forest did on the configs measured since
        self._n_train = 0  # training rows of the current forest: the rows after it in the next fit are held out
        if reference is None and task is not None:
            features = self.features

            def reference(rng: np.random.Generator, n: int) -> np.ndarray:
                return features(task.space.random_candidates(rng, n))  # type: ignore[misc]

        self.reference = reference  # random unmeasured candidates' features, for the calibration
        self.n_trees = int(n_trees)
        self.uncertainty = uncertainty
        self.calibrate = calibrate
        self.max_features = max_features
        self.min_samples_leaf = int(min_samples_leaf)
        self.num_threads = num_threads
        self.seed = 0 if seed is None else int(seed) % (2**31)
        self.forest: Any = None
        self.best_flops = 0.0  # f(x+): the best measured throughput the model was fitted on
        self.best_mean = 0.0  # plug-in EI's incumbent: the forest's best predicted mean on its training configs
        self.scale = 1.0  # targets are divided by this (the best throughput) for numerical comfort
        self.x_train_shape: Any = None
        self.uncertainty_used: str | None = None  # what the last fit actually uses ("forestci" or "trees")
        self._inbag: Any = None
        self._calib: tuple[np.ndarray, np.ndarray] | None = None
        self._cache: dict[bytes, tuple[float, float]] = {}
        self._base: tuple[np.ndarray | None, list[float]] = (None, [])
        self._n_fits = 0

    # -- fitting ----------------------------------------------------------------------------------
    def fit(self, xs: Any, ys: Any, plan_size: int) -> None:
        from sklearn.ensemble import RandomForestRegressor

        x_new = self.as_features(xs)
        base_x, base_y = self._base
        x_train = (
            np.concatenate([base_x, x_new])
            if base_x is not None and len(x_new)
            else (base_x if base_x is not None else x_new)
        )
        ys = np.asarray(list(base_y) + list(ys), dtype=np.float64)
        if len(ys) == 0 or not np.isfinite(ys).all() or ys.max() <= 0:
            return
        self._hold_out(x_train[self._n_train :], ys[self._n_train :])
        self.best_flops = float(ys.max())
        self.scale = self.best_flops
        self.forest = RandomForestRegressor(
            n_estimators=self.n_trees,
            max_features=self.max_features,
            min_samples_leaf=self.min_samples_leaf,
            bootstrap=True,
            n_jobs=self.num_threads,
            random_state=self.seed + self._n_fits,
        )
        self.forest.fit(x_train, ys / self.scale)
        self._n_fits += 1
        self._n_train = len(ys)
        self.sigma_factors.append(self.sigma_factor)
        self.x_train_shape = tuple(x_train.shape)  # type: ignore[assignment]
        self._cache.clear()
        self._inbag, self._calib = None, None
        self.uncertainty_used = self.uncertainty
        if self.uncertainty == "forestci":
            self._prepare_jackknife()
        if self.acquisition == "plugin-ei":
            self.best_mean = float(self._tree_predictions(x_train).mean(axis=0).max()) * self.scale
        logger.debug(
            "RFEI fit on %d candidates (best %.4g FLOP/s, uncertainty %s)",
            len(ys),
            self.best_flops,
            self.uncertainty_used,
        )

    def _hold_out(self, x_new: np.ndarray, y_new: np.ndarray) -> None:
        """Score the configs measured since the last fit under that fit's forest (before it is replaced): their
        statistics go to ``held_out`` (how well calibrated the search's picks were), and with ``recalibrate``
        ``sigma_factor`` follows every held-out z so far. Failed configs (y = 0) are left out: their error is the
        builder's or runner's, not the surrogate's. Values are fractions of the best throughput of the last fit."""
        if self.forest is None or len(x_new) == 0:
            return
        mean, std = self._mean_std_scaled(np.ascontiguousarray(x_new, dtype=np.float32))
        y = y_new / self.scale
        keep = (y_new > 0) & (std > 0) & np.isfinite(std)
        if not np.any(keep):
            return
        z = (y - mean)[keep] / std[keep]
        self._held_out_z2.extend((z**2).tolist())
        factor = float(np.clip(np.sqrt(np.median(self._held_out_z2) / _CHI2_1_MEDIAN), *_SIGMA_FACTOR_RANGE))
        self.held_out.append(
            {
                "fit": float(self._n_fits),
                "n": float(keep.sum()),
                "y_median": float(np.median(y[keep])),
                "mean_median": float(np.median(mean[keep])),
                "std_median": float(np.median(std[keep])),
                "z_mean": float(z.mean()),
                "z_rms": float(np.sqrt(np.mean(z**2))),
                "factor": factor,
            }
        )
        if self.recalibrate:
            self.sigma_factor = factor

    def _prepare_jackknife(self) -> None:
        """In-bag matrix and calibration curve, once per fit (the per-tree spread where forestci fails on it)."""
        import forestci

        try:
            if self.x_train_shape[0] < 2:
                raise ValueError("the jackknife needs at least two training configs")
            self._inbag = np.asarray(forestci.calc_inbag(self.x_train_shape[0], self.forest), dtype=np.float64)
            if self.calibrate:
                with one_blas_thread():
                    self._calib = self._fit_calibration()
        except Exception as err:  # noqa: BLE001 - any failure here means: no jackknife for this fit
            logger.warning(
                "forestci cannot compute the infinitesimal jackknife for this forest (%s: %s); "
                "using the spread of per-tree predictions instead",
                type(err).__name__,
                err,
            )
            self._inbag, self._calib = None, None
            self.uncertainty_used = "trees"

    def _fit_calibration(self) -> tuple[np.ndarray, np.ndarray] | None:
        """forestci's empirical-Bayes calibration (Wager et al. 2014, sec. 4.2), fitted on a fixed random
        sample of the space so that every later query maps its raw variance through the same curve."""
        from forestci.calibration import gbayes, gfit

        rng = np.random.default_rng(self.seed + 7919 * self._n_fits)
        if self.reference is None:
            return None  # no way to draw unmeasured candidates: uncalibrated jackknife
        ref = self.reference(rng, _N_REFERENCE)
        preds = self._tree_predictions(ref)
        v_full = self._ij_variance(preds, self._inbag)
        # Monte Carlo noise of the estimate, from a half-size forest (forestci's calibration_ratio = 2)
        half = rng.permutation(self.n_trees)[: int(np.ceil(self.n_trees / 2))]
        v_half = self._ij_variance(preds[half], self._inbag[:, half])
        delta = len(half) / self.n_trees
        sigma2 = (delta**2 + (1 - delta) ** 2) / (2 * (1 - delta) ** 2) * float(np.mean((v_half - v_full) ** 2))
        if not sigma2 > 0 or np.ptp(v_full) == 0 or len(ref) < 3:
            return None
        sigma = float(np.sqrt(sigma2))
        prior = gfit(v_full, sigma)
        calib_x = np.unique(np.percentile(v_full, np.arange(0, 102, 2)))
        calib_y = np.asarray([gbayes(x, g_est=prior, sigma=sigma) for x in calib_x], dtype=np.float64)
        if not np.isfinite(calib_y).all():
            raise FloatingPointError("empirical-Bayes calibration produced non-finite variances")
        return calib_x, calib_y

    def fit_log(self, records: Iterable, plan_size: int) -> None:
        """Warm start: earlier records of this task become part of every later fit's training set."""
        cands, ys = self._task_history(records)
        self._base = (self.as_features(cands), ys) if cands else (None, [])
        if cands:
            self.fit(np.zeros((0, self._base[0].shape[1]), np.float32), [], plan_size)  # type: ignore[union-attr]

    # -- predicting -------------------------------------------------------------------------------
    def _tree_predictions(self, x: np.ndarray) -> np.ndarray:
        """(n_trees, n) predictions: the input validated once, each tree's ``tree_.predict`` called directly (the
        per-tree validation of ``DecisionTreeRegressor.predict`` dominates simulated annealing's queries)."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        try:
            out = np.stack([t.tree_.predict(x).reshape(len(x)) for t in self.forest.estimators_])
        except (AttributeError, ValueError, TypeError):  # another scikit-learn layout: the public path
            out = np.stack([t.predict(x, check_input=False) for t in self.forest.estimators_])
        return out.astype(np.float64)

    def _ij_variance(self, preds: np.ndarray, inbag: np.ndarray) -> np.ndarray:
        """Bias-corrected infinitesimal-jackknife variance, exactly forestci's computation."""
        from forestci.forestci import _bias_correction, _core_computation

        n_trees = preds.shape[0]
        centered = (preds - preds.mean(axis=0)).T
        v_ij = _core_computation(self.x_train_shape, None, inbag, centered, n_trees)
        v = _bias_correction(v_ij, inbag, centered, n_trees)
        if np.max(inbag) == 1:  # sampling without replacement, as forestci corrects it
            v = v / (1 - np.mean(inbag)) ** 2
        return v

    def _calibrated(self, v: np.ndarray) -> np.ndarray:
        if self._calib is None:
            return v
        cx, cy = self._calib
        out = np.interp(v, cx, cy)
        above = v > cx[-1]  # beyond the reference sample: keep the raw value, shifted for continuity
        out[above] = v[above] + (cy[-1] - cx[-1])
        return out

    def _mean_std_scaled(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        preds = self._tree_predictions(x)
        mean = preds.mean(axis=0)
        if self.uncertainty_used == "forestci" and self._inbag is not None:
            with one_blas_thread(), np.errstate(divide="ignore", invalid="ignore"):
                var = self._calibrated(self._ij_variance(preds, self._inbag))
            std = np.sqrt(np.maximum(var, 0.0))
            bad = ~np.isfinite(std)
            if np.any(bad):  # degenerate in-bag counts: those points get the per-tree spread
                std[bad] = preds[:, bad].std(axis=0)
        else:
            std = preds.std(axis=0)
        return mean, std

    def predict_mean_std(self, xs: Any) -> tuple[np.ndarray, np.ndarray]:
        """Predicted throughput and its standard deviation (FLOP/s) for feature rows (or candidates), cached per
        feature row until the next fit (simulated annealing revisits many candidates)."""
        x = np.ascontiguousarray(self.as_features(xs), dtype=np.float32)
        if self.forest is None:
            return np.zeros(len(x)), np.zeros(len(x))
        rows = [r.tobytes() for r in x]
        todo = sorted({k for k, r in enumerate(rows) if r not in self._cache}, key=lambda k: rows[k])
        fresh: dict[bytes, int] = {}
        for k in todo:
            fresh.setdefault(rows[k], k)
        if fresh:
            pick = list(fresh.values())
            m, s = self._mean_std_scaled(x[pick])
            for k, mi, si in zip(pick, m, s):
                self._cache[rows[k]] = (float(mi), float(si))
        mean = np.fromiter((self._cache[r][0] for r in rows), np.float64, len(rows))
        std = np.fromiter((self._cache[r][1] for r in rows), np.float64, len(rows))
        if len(self._cache) > 500_000:
            self._cache.clear()
        return mean * self.scale, std * (self.scale * self.sigma_factor)

    def predict(self, xs: Any) -> np.ndarray:
        """EI over the best measured throughput (``"plugin-ei"``: the best predicted mean of a measured config), divided
        by that throughput; ``acquisition="mean"``: the predicted throughput over the best, uncertainty unused."""
        if self.forest is None:
            return np.zeros(len(self.as_features(xs)))
        mean, std = self.predict_mean_std(xs)
        if self.acquisition == "mean":
            return mean / self.scale
        incumbent = self.best_mean if self.acquisition == "plugin-ei" else self.best_flops
        return expected_improvement(mean / self.scale, std / self.scale, incumbent / self.scale)
