"""The tuner registry: declarations match the constructors, options are converted and checked, names are live."""

from __future__ import annotations

import inspect

import pytest

import adatune
from adatune.tuners import RandomTuner, ReleaseTuner, RFEITuner, XGBTuner, _registry
from adatune.tuners._registry import (
    TUNER_NAMES,
    TunerOption,
    TunerSpec,
    create_tuner,
    get_tuner_spec,
    register_tuner,
    signature_mismatches,
    tuner_specs,
)

BUILTIN = ("xgb", "xgb-rank", "random", "grid", "rfei", "release")


@pytest.mark.parametrize("name", [spec.name for spec in tuner_specs()])  # tuners added later are checked too
def test_declared_options_match_the_constructor(name: str) -> None:
    """Every constructor keyword is declared (or fixed) and every declared default is the constructor's."""
    spec = get_tuner_spec(name)
    assert signature_mismatches(spec) == []
    params = inspect.signature(spec.factory).parameters
    for opt in spec.options:
        assert params[opt.name].default == opt.default, opt.name
    declared = {o.name for o in spec.options} | set(spec.fixed_kwargs) | {"task", "seed"}
    assert set(params) <= declared


def test_mismatches_are_reported() -> None:
    """The drift check can fail: a wrong default, a missing keyword and an unknown option are each named."""
    spec = TunerSpec(
        "drift",
        RFEITuner,
        "test",
        (TunerOption("plan_size", int, 32, "wrong default"), TunerOption("no_such", int, 1, "not a keyword")),
    )
    problems = "\n".join(signature_mismatches(spec))
    assert "'plan_size' declares default 32" in problems
    assert "'no_such' is not a keyword of RFEITuner" in problems
    assert "keyword 'n_trees' is not declared" in problems


def test_builtin_names_in_order() -> None:
    assert TUNER_NAMES[: len(BUILTIN)] == BUILTIN and tuple(TUNER_NAMES) == tuple(s.name for s in tuner_specs())
    assert TUNER_NAMES == tuple(TUNER_NAMES) and "rfei" in TUNER_NAMES and "nope" not in TUNER_NAMES
    assert TUNER_NAMES[0] == "xgb" and len(TUNER_NAMES) == len(tuner_specs())


def test_rfei_options_are_converted_from_text(matmul_task: adatune.task.Task) -> None:
    tuner = create_tuner(
        "rfei",
        matmul_task,
        seed=0,
        plan_size="16",
        contextual="false",
        n_trees="8",
        uncertainty="trees",
        eps_greedy="0.2",
    )
    assert isinstance(tuner, RFEITuner)
    assert tuner.plan_size == 16 and tuner.contextual is False and tuner.eps_greedy == pytest.approx(0.2)
    assert tuner.cost_model.n_trees == 8 and tuner.cost_model.uncertainty == "trees"
    # "none" for a nullable option means the constructor's derived default (0.05 without contextual exploration)
    assert create_tuner("rfei", matmul_task, seed=0, contextual="no", eps_greedy="none").eps_greedy == 0.05


def test_python_values_pass_and_are_checked(matmul_task: adatune.task.Task) -> None:
    tuner = create_tuner("release", matmul_task, seed=0, plan_size=8, sampler=None, agent_options={"step_cap": 4})
    assert isinstance(tuner, ReleaseTuner) and tuner.sampler is None and tuner.agent.step_cap == 4
    assert create_tuner("release", matmul_task, agent_options='{"step_cap": 3}').agent.step_cap == 3
    with pytest.raises(ValueError, match=r"plan_size=2.5: expected int"):
        create_tuner("xgb", matmul_task, plan_size=2.5)
    with pytest.raises(ValueError, match=r"contextual=1: expected true\|false"):
        create_tuner("rfei", matmul_task, contextual=1)


def test_xgb_rank_fixes_the_loss(matmul_task: adatune.task.Task) -> None:
    tuner = create_tuner("xgb-rank", matmul_task, seed=1, plan_size="8")
    assert isinstance(tuner, XGBTuner) and tuner.cost_model.loss_type == "rank" and tuner.plan_size == 8
    assert create_tuner("xgb", matmul_task, loss_type="rank").cost_model.loss_type == "rank"
    with pytest.raises(ValueError, match="unknown option 'loss_type' for tuner 'xgb-rank'"):
        create_tuner("xgb-rank", matmul_task, loss_type="reg")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"plan_size": "x"}, "tuner 'xgb': option plan_size=x: expected int"),
        ({"plan_size": "0"}, "option plan_size=0: expected at least 1"),
        ({"eps_greedy": "1.5"}, "option eps_greedy=1.5: expected at most 1"),
        ({"eps_greedy": "nan"}, "option eps_greedy=nan: expected a finite number"),
        ({"feature_type": "curve"}, "option feature_type=curve: expected one of knob, itervar"),
        ({"sampler": "kmeans"}, "option sampler=kmeans: expected one of adaptive, none"),
        ({"plan_size": "none"}, "option plan_size=none: expected int"),
        ({"bogus": "1"}, "unknown option 'bogus' for tuner 'xgb': valid options: plan_size, feature_type"),
    ],
)
def test_bad_options_are_named(matmul_task: adatune.task.Task, options: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        create_tuner("xgb", matmul_task, **options)
    assert message in str(err.value)


def test_unknown_tuner_lists_choices(matmul_task: adatune.task.Task) -> None:
    with pytest.raises(ValueError, match=r"unknown tuner 'nope': choose from xgb, xgb-rank, random, grid, rfei"):
        create_tuner("nope", matmul_task)


def test_text_forms() -> None:
    release = get_tuner_spec("release")
    assert release.option("cost_model").settable_from_text is False
    with pytest.raises(ValueError, match="cost_model=xgb: expected a Python object"):
        release.resolve({"cost_model": "xgb"})
    assert release.resolve({"agent_options": "none", "sampler": "None"}) == {"agent_options": None, "sampler": None}
    with pytest.raises(ValueError, match="agent_options=\\[1\\]: expected JSON object"):
        release.resolve({"agent_options": "[1]"})
    grid = get_tuner_spec("grid")
    assert grid.resolve({"range_idx": "3,40"}) == {"range_idx": (3, 40)}
    assert grid.resolve({"range_idx": [3, 40]}) == {"range_idx": (3, 40)}
    with pytest.raises(ValueError, match="range_idx=1: expected int,int"):
        grid.resolve({"range_idx": "1"})
    assert grid.option("range_idx").type_name() == "int,int|none"
    assert get_tuner_spec("rfei").option("contextual").type_name() == "true|false"


def test_register_a_new_tuner(matmul_task: adatune.task.Task) -> None:
    """A tuner added by another module shows up in TUNER_NAMES and create_tuner at once."""
    spec = TunerSpec(
        "random-test",
        RandomTuner,
        "random, registered by a test",
        (TunerOption("range_idx", tuple, None, "index range", length=2),),
    )
    try:
        register_tuner(spec)
        assert "random-test" in TUNER_NAMES and TUNER_NAMES[-1] == "random-test"
        assert isinstance(create_tuner("random-test", matmul_task, seed=0), RandomTuner)
        with pytest.raises(ValueError, match="already registered"):
            register_tuner(spec)
    finally:
        _registry._REGISTRY.pop("random-test", None)
    assert "random-test" not in TUNER_NAMES


@pytest.mark.parametrize(
    "options, message",
    [
        ((TunerOption("seed", int, 0, "reserved"),), "'seed' is declared twice or reserved"),
        ((TunerOption("a", int, 1, ""), TunerOption("a", int, 2, "")), "'a' is declared twice"),
        ((TunerOption("a", list, None, ""),), "unsupported type"),
        ((TunerOption("a", int, 0, "", minimum=1),), "a=0: expected at least 1"),
    ],
)
def test_malformed_specs_are_refused(options: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        register_tuner(TunerSpec("bad-spec", RandomTuner, "bad", options))
    assert "bad-spec" not in TUNER_NAMES


def test_constructors_check_the_one_declaration(matmul_task: adatune.task.Task) -> None:
    """An option shared by tuners and cost models is one declaration, enforced by every constructor alike."""
    from adatune.cost_models import RFEICostModel
    from adatune.tuners import TraceSearchTuner

    assert RFEITuner.option("n_trees") is RFEICostModel.option("n_trees") is TraceSearchTuner.option("n_trees")
    for make in (
        lambda: RFEITuner(matmul_task, n_trees=1),
        lambda: TraceSearchTuner(matmul_task, n_trees=1),
        lambda: RFEICostModel(n_trees=1),
        lambda: create_tuner("rfei", matmul_task, n_trees="1"),
    ):
        with pytest.raises(ValueError, match="n_trees=1: expected at least 2"):
            make()
    with pytest.raises(ValueError, match="XGBTuner: option plan_size=0: expected at least 1"):
        XGBTuner(matmul_task, plan_size=0)
    with pytest.raises(ValueError, match="option eps_greedy=1.5: expected at most 1"):
        ReleaseTuner(matmul_task, eps_greedy=1.5)
    defaults = {o.name: o.default for o in RFEITuner.declared_options()}
    assert defaults["n_trees"] == 100 and defaults["eps_greedy"] is None and defaults["plan_size"] == 64


def test_constructors_receive_converted_values(matmul_task: adatune.task.Task) -> None:
    """Text given straight to a constructor means what it means on the command line: "false" is False, not
    truthy text; "0,3" for a tuple option arrives as (0, 3)."""
    from adatune.cost_models import RFEICostModel

    model = RFEICostModel(calibrate="false", recalibrate="no", n_trees="8")
    assert model.calibrate is False and model.recalibrate is False and model.n_trees == 8
    assert RFEITuner(matmul_task, seed=0, contextual="off").contextual is False
    assert RandomTuner(matmul_task, range_idx="0,3").range == (0, 3)
