"""Conformance suites for what you plug into adatune, as ``optuna.testing`` ships Optuna's.

One call (``import adatune.testing as t``) checks a new piece against the contract the shipped ones pass (plain
functions raising ``AssertionError`` with a clear message, so they work in pytest or anywhere)::

    t.check_tuner(lambda task, seed: MyTuner(task, seed=seed))       # on a recorded table, seconds
    t.check_cost_model(lambda seed, task: MyModel(task, seed=seed))  # fit, rank, seeds, candidates
    t.check_candidate_space(my_space)                                # the candidate protocol alone
    t.check_candidate_kind(my_task, cost=lambda cand: seconds)       # every tuner, model, records, a build
    t.check_runner(MyRunner(timeout=3, check_correctness=True))      # error kinds on real faulty kernels

``TUNER_CHECKS`` and ``COST_MODEL_CHECKS`` name each check for parametrising; the fixtures (``knob_fixture``,
``CostFunctionRunner``, the ``adatune.testing/*`` templates) keep the suites fast and deterministic.
"""

from ._candidate import (
    check_candidate_kind,
    check_candidate_space,
    check_cost_models_learn,
    check_records_dispatch_and_build,
    check_tunes_and_resumes,
)
from ._cost_model import COST_MODEL_CHECKS, CostModelFactory, check_cost_model
from ._fixtures import CostFunctionRunner, KnobFixture, knob_fixture, synthetic_cost, synthetic_replay_table
from ._runner import EXPECTED_ERRORS, check_runner
from ._templates import EMPTY, FAULTY, MATMUL, MODES
from ._templates import register as register_templates
from ._tuner import TUNER_CHECKS, TunerFactory, check_tuner

__all__ = [
    "check_tuner",
    "check_cost_model",
    "check_candidate_space",
    "check_candidate_kind",
    "check_tunes_and_resumes",
    "check_cost_models_learn",
    "check_records_dispatch_and_build",
    "check_runner",
    "TUNER_CHECKS",
    "COST_MODEL_CHECKS",
    "EXPECTED_ERRORS",
    "TunerFactory",
    "CostModelFactory",
    "KnobFixture",
    "knob_fixture",
    "synthetic_cost",
    "synthetic_replay_table",
    "CostFunctionRunner",
    "register_templates",
    "MODES",
    "MATMUL",
    "EMPTY",
    "FAULTY",
]
