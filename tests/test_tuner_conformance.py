"""Every tuner the library ships passes adatune.testing's tuner checks (each check a test of its own)."""

from __future__ import annotations

import pytest
from tuner_factories import TUNER_FACTORIES

from adatune.testing import TUNER_CHECKS, KnobFixture


@pytest.mark.parametrize("check", list(TUNER_CHECKS))
@pytest.mark.parametrize("name", sorted(TUNER_FACTORIES))
def test_tuner_conformance(name: str, check: str, knob_fixture: KnobFixture) -> None:
    TUNER_CHECKS[check](TUNER_FACTORIES[name], knob_fixture)
