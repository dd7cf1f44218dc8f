"""Every cost model the library ships passes adatune.testing's cost-model checks (each check a test of its own)."""

from __future__ import annotations

import pytest

from adatune.cost_models import COST_MODELS, create_cost_model
from adatune.testing import COST_MODEL_CHECKS


@pytest.mark.parametrize("check", list(COST_MODEL_CHECKS))
@pytest.mark.parametrize("name", sorted(COST_MODELS))
def test_cost_model_conformance(name: str, check: str) -> None:
    COST_MODEL_CHECKS[check](lambda seed, task: create_cost_model(name, task=task, seed=seed))


def test_unknown_cost_model_is_named() -> None:
    with pytest.raises(ValueError, match="unknown cost model 'svm'.*xgb"):
        create_cost_model("svm")
