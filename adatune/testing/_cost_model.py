"""The cost-model contract: fit and rank on feature matrices, survive no data, repeat by seed, and take a
task's candidates as well as their features. A factory is ``factory(seed, task) -> CostModel`` (task may be None)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..cost_models import CostModel
from ..task import TuningTask
from ._fixtures import knob_fixture

__all__ = ["CostModelFactory", "COST_MODEL_CHECKS", "check_cost_model"]

CostModelFactory = Callable[[int, "TuningTask | None"], CostModel]


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, size=(n, 5)).astype(np.float32)
    y = 1e9 * np.exp(-4 * ((x[:, :3] - 0.6) ** 2).sum(axis=1))  # throughput-like, smooth
    return x, y


def _mean(model: CostModel, x: np.ndarray) -> np.ndarray:
    """The model's predicted throughput: its mean where it scores by something else (RFEI's expected improvement)."""
    if hasattr(model, "predict_mean_std"):
        return np.asarray(model.predict_mean_std(x)[0], dtype=float)
    return np.asarray(model.predict(x), dtype=float)


def ranks_held_out_points(factory: CostModelFactory) -> None:
    x, y = _data(300)
    model = factory(0, None)
    model.fit(x[:200], y[:200].tolist(), 32)
    scores = np.asarray(model.predict(x[200:]), dtype=float)
    assert scores.shape == (100,), f"100 points scored as shape {scores.shape}"
    assert np.isfinite(scores).all(), "non-finite scores"
    top = np.argsort(-_mean(model, x[200:]))[:10]
    top_mean, median = y[200:][top].mean(), np.median(y[200:])
    assert top_mean > median, f"the model's top 10 average {top_mean:.3g}, not above the median {median:.3g}"


def scores_unfitted_and_all_failed(factory: CostModelFactory) -> None:
    x, _ = _data(20)
    model = factory(0, None)
    shape = np.asarray(model.predict(x)).shape
    assert shape == (20,), f"an unfitted model scored 20 points as shape {shape}"
    model.fit(x, [0.0] * 20, 8)  # every candidate failed: nothing to learn, nothing to crash
    shape = np.asarray(model.predict(x)).shape
    assert shape == (20,), f"a model fitted on all-failed data scored 20 points as shape {shape}"


def same_seed_same_predictions(factory: CostModelFactory) -> None:
    x, y = _data(120)
    preds = []
    for _ in range(2):
        model = factory(7, None)
        model.fit(x[:80], y[:80].tolist(), 16)
        preds.append(np.asarray(model.predict(x[80:])))
    np.testing.assert_array_equal(preds[0], preds[1], err_msg="two models with seed 7 predict differently")


def takes_a_tasks_candidates(factory: CostModelFactory) -> None:
    task = knob_fixture().task
    space = task.space
    cands = space.random_candidates(np.random.default_rng(0), 60)
    y = np.asarray([1e9 / (1 + c.index % 7) for c in cands])
    model = factory(0, task)
    model.fit(cands[:40], y[:40].tolist(), 16)
    by_cands = np.asarray(model.predict(cands[40:]))
    by_features = np.asarray(model.predict(space.featurize(cands[40:])))
    np.testing.assert_allclose(by_cands, by_features, err_msg="candidates and their features score differently")


COST_MODEL_CHECKS: dict[str, Callable[[CostModelFactory], None]] = {
    f.__name__: f
    for f in (
        ranks_held_out_points,
        scores_unfitted_and_all_failed,
        same_seed_same_predictions,
        takes_a_tasks_candidates,
    )
}


def check_cost_model(factory: CostModelFactory) -> None:
    """Run every cost-model check; ``AssertionError`` names the first that fails."""
    for name, check in COST_MODEL_CHECKS.items():
        try:
            check(factory)
        except AssertionError as err:
            raise AssertionError(f"cost-model check {name!r} failed: {err}") from err
