"""Models outside the zoo: three small PyTorch modules, built here (no downloads), with operator mixes the
templates do not cover alone (depthwise and pointwise convolutions; layer norm, GELU and softmax attention;
pooling, concatenation and residuals). Each is imported through Relax, tuned briefly (knob tasks by XGB, the
others by trace search), built from its log, and must match PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from small_models import SMALL_MODELS, TransformerBlock

import adatune
import adatune.models as am


@pytest.mark.parametrize("name", list(SMALL_MODELS))
def test_a_model_outside_the_zoo_tunes_builds_and_matches_pytorch(name: str, tmp_path, model_option) -> None:
    cls, shape = SMALL_MODELS[name]
    torch.manual_seed(0)
    net = cls().eval()
    model = am.from_torch(net, (torch.randn(*shape),), name=name)
    tasks = am.extract_tasks(model)
    kinds = {t.kind for t in tasks}
    assert "trace" in kinds and kinds - {"trace"}, f"{name}: expected template and trace tasks, got {kinds}"
    log = tmp_path / f"{name}.jsonl"
    confirm = 2 if name == "depthwise-separable" else 0  # re-timing rebuilds: checked on the smallest model only
    summary = am.tune_model(
        model,
        log,
        n_trial=2 * len(tasks),
        strategy="round-robin",
        round_trials=2,
        progress=False,
        confirm=confirm,
        option=model_option,
    )
    assert sum(summary.trials) > 0 and log.exists()
    records = list(adatune.load_from_file(str(log)))  # each task's two fastest re-timed (3 rounds) after the budget
    confirmed = {r.workload_key for r in records if "confirm" in r.result.extra}
    assert bool(confirmed) == bool(confirm) and all(
        len({r.key for r in records if r.workload_key == w and r.result.ok}) >= 2 for w in confirmed
    )
    compiled = am.build(model, log)
    assert "record" in compiled.applied.values()
    for seed in (1, 2):
        x = model.random_inputs(seed)
        np.testing.assert_allclose(compiled.run(*x)[0], model.reference(*x)[0], rtol=1e-4, atol=1e-4)


def test_fast_math_keeps_a_gelu_transformer_block_within_its_error_bound() -> None:
    """TVM's fast erf/exp replace the exact ones in GELU and softmax; the block's outputs stay within 1e-5 of
    PyTorch's (exact erf), and the erf itself within 2e-6 of scipy's over [-6, 6]."""
    import scipy.special
    import tvm
    from tvm import te, topi

    x = te.placeholder((4001,), "float32", name="x")
    f = tvm.tirx.build(te.create_prim_func([x, topi.fast_erf(x)]), "llvm")
    grid = np.linspace(-6, 6, 4001).astype("float32")
    out = tvm.runtime.tensor(np.zeros_like(grid))
    f(tvm.runtime.tensor(grid), out)
    assert np.max(np.abs(out.numpy() - scipy.special.erf(grid.astype("float64")))) < 2e-6
    torch.manual_seed(0)
    net = TransformerBlock().eval()
    exact = am.from_torch(net, (torch.randn(1, 12, 32),), name="exact")
    fast = am.from_torch(net, (torch.randn(1, 12, 32),), name="fast", fast_math=True)
    assert "erf" in exact.mod.script() and "erf" not in fast.mod.script().replace("fast_erf", "")
    compiled = am.build(fast, None)
    for seed in (1, 2):
        xs = fast.random_inputs(seed)
        np.testing.assert_allclose(compiled.run(*xs)[0], fast.reference(*xs)[0], rtol=0, atol=1e-5)


def test_exact_math_runs_through_libmvec_and_matches_the_scalar_build(tmp_path) -> None:
    """Without fast math a model's erf and exp go through ``adatune.codegen.vector_math`` (libmvec) by default: the
    block (its sequence length dynamic, so every function gets a vectorised generic schedule without tuning)
    stays within 1e-5 of PyTorch either way, and only the vector build calls libmvec and links it."""
    from adatune.codegen import vector_math

    if not vector_math.available():
        pytest.skip("no libmvec (x86-64 glibc) in this process")
    torch.manual_seed(0)
    net = TransformerBlock().eval()
    model = am.from_torch(net, (torch.randn(1, 12, 32),), name="exact", dynamic={"x": {1: (1, 16)}})
    builds = {on: am.build_dynamic(model, {}, vector_math=on) for on in (True, False)}
    assert builds[True].link == ["-lmvec"] and builds[False].link == []
    for t in (1, 9, 16):
        xs = model.random_inputs(seed=t, t=t)  # type: ignore[call-arg]
        want = model.reference(*xs)[0]
        for compiled in builds.values():
            np.testing.assert_allclose(compiled.run(*xs)[0], want, rtol=0, atol=1e-5)
    found = {}
    for on, compiled in builds.items():
        with open(compiled.export_library(tmp_path / f"block_{on}.so"), "rb") as f:
            binary = f.read()
        found[on] = (b"libmvec" in binary, b"_ZGV" in binary)  # linked, and its vector functions called
    assert found == {True: (True, True), False: (False, False)}


def test_a_model_tuned_with_templates_off_deploys_its_trace_records_from_either_task_table(
    tmp_path, model_option
) -> None:
    """``extract_tasks(templates=False)`` sends every function to trace search (the models benchmark's ``trace``
    arm); the log it writes applies whether the build is given that table or the default one with templates."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    model = am.from_torch(net, (torch.randn(2, 16),), name="mlp")
    with_templates = am.extract_tasks(model)
    trace_only = am.extract_tasks(model, templates=False)
    assert any(t.kind != "trace" for t in with_templates), "the dense layers should have a knob template"
    assert [t.kind for t in trace_only] == ["trace"] * len(with_templates)
    assert [t.task_name for t in trace_only] == [t.trace_task_name for t in with_templates]
    log = tmp_path / "mlp.jsonl"
    am.tune_model(
        model,
        log,
        n_trial=2 * len(trace_only),
        strategy="round-robin",
        round_trials=2,
        tasks=trace_only,
        progress=False,
        option=model_option,
    )
    names = {r.task_name for r in adatune.load_from_file(str(log))}
    assert names and all(n.startswith("trace/") for n in names)
    x = model.random_inputs(1)
    for table in (trace_only, with_templates, None):
        compiled = am.build(model, log, tasks=table)
        assert set(compiled.applied.values()) == {"record"}, compiled.applied
        np.testing.assert_allclose(compiled.run(*x)[0], model.reference(*x)[0], rtol=1e-4, atol=1e-4)
