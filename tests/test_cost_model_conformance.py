"""Every cost model the library ships passes the same contract, on feature matrices and on a task's candidates."""

from __future__ import annotations

import numpy as np
import pytest

from adatune.cost_models import COST_MODELS, create_cost_model

NAMES = sorted(COST_MODELS)


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, size=(n, 5)).astype(np.float32)
    y = 1e9 * np.exp(-4 * ((x[:, :3] - 0.6) ** 2).sum(axis=1))  # throughput-like, smooth
    return x, y


@pytest.mark.parametrize("name", NAMES)
def test_fit_predict_on_features_ranks_held_out_points(name):
    x, y = _data(300)
    model = create_cost_model(name, seed=0)
    model.fit(x[:200], y[:200], 32)
    scores = np.asarray(model.predict(x[200:]), dtype=float)
    assert scores.shape == (100,) and np.isfinite(scores).all()
    if hasattr(model, "predict_mean_std"):  # RFEI scores expected improvement; its mean must rank
        scores = model.predict_mean_std(x[200:])[0]
    top = np.argsort(-scores)[:10]
    assert y[200:][top].mean() > np.median(y[200:])  # the model's top picks beat a random half


@pytest.mark.parametrize("name", NAMES)
def test_unfitted_and_all_failed_models_score_without_error(name):
    x, _ = _data(20)
    model = create_cost_model(name, seed=0)
    assert np.asarray(model.predict(x)).shape == (20,)
    model.fit(x, np.zeros(20), 8)  # every candidate failed: nothing to learn, nothing to crash
    assert np.asarray(model.predict(x)).shape == (20,)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_predictions(name):
    x, y = _data(120)
    preds = []
    for _ in range(2):
        model = create_cost_model(name, seed=7)
        model.fit(x[:80], y[:80], 16)
        preds.append(np.asarray(model.predict(x[80:])))
    np.testing.assert_array_equal(preds[0], preds[1])


@pytest.mark.parametrize("name", NAMES)
def test_models_made_with_a_task_take_its_candidates(name, matmul_task):
    space = matmul_task.space
    cands = space.random_candidates(np.random.default_rng(0), 60)
    y = np.asarray([1e9 / (1 + c.index % 7) for c in cands])
    model = create_cost_model(name, task=matmul_task, seed=0)
    model.fit(cands[:40], y[:40], 16)
    by_cands = np.asarray(model.predict(cands[40:]))
    by_features = np.asarray(model.predict(space.featurize(cands[40:])))
    np.testing.assert_allclose(by_cands, by_features)


def test_unknown_cost_model_is_named():
    with pytest.raises(ValueError, match="unknown cost model 'svm'.*xgb"):
        create_cost_model("svm")
