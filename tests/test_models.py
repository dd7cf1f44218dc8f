"""Whole models: import (PyTorch, ONNX, built-ins), task extraction, build with records and fallbacks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import tvm
from torch import nn

import adatune
import adatune.models as am
from adatune.models._zoo import bert_base, resnet18


class TinyNet(nn.Module):
    """Two convolutions (one with BN, one strided) and a dense layer."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, 1, 1)
        self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 16, 3, 2, 1)
        self.fc = nn.Linear(16 * 4 * 4, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.b1(self.c1(x)))
        x = F.relu(self.c2(x))
        return self.fc(torch.flatten(x, 1))


@pytest.fixture(scope="module")
def tiny() -> am.Model:
    torch.manual_seed(0)
    net = TinyNet().eval()
    with torch.no_grad():
        net.b1.running_mean.uniform_(-0.1, 0.1)
        net.b1.running_var.uniform_(0.5, 1.5)
    return am.from_torch(net, (torch.randn(1, 3, 8, 8),), name="tiny")


def test_builtin_models_are_seeded_and_bn_free() -> None:
    model, (x,) = resnet18()
    assert not any(isinstance(m, nn.BatchNorm2d) for m in model.modules())  # folded for inference
    assert tuple(x.shape) == (1, 3, 224, 224)
    bert, (h,) = bert_base(layers=1)
    assert tuple(h.shape) == (1, 128, 768)
    with torch.no_grad():
        assert bert(h).shape == (1, 128, 768)
    with pytest.raises(ValueError, match="unknown built-in model"):
        am.load_builtin("vgg16")


def test_extraction_covers_every_prim_func(tiny: am.Model) -> None:
    tasks = am.extract_tasks(tiny)
    called = {gv.name_hint for gv, f in tiny.mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)}
    covered = {name for t in tasks for name in t.global_vars}
    assert called == covered
    kinds = {t.kind for t in tasks}
    assert "conv2d_nchw.x86" in kinds  # the convolutions (with their bias/BN/ReLU epilogue) use the template
    assert all(t.weight >= 1 for t in tasks)
    assert all((t.space_size or 0) >= 1 for t in tasks if t.kind != "trace")
    conv = next(t for t in tasks if t.kind == "conv2d_nchw.x86" and t.task.args[7] == 2)
    assert conv.task.args[:9] == (1, 16, 8, 8, 16, 3, 3, 2, 1)
    table = am.format_task_table(am.model_tasks(tiny))
    assert "conv2d_nchw.x86" in table and "tasks" in table


def test_build_with_fallbacks_matches_pytorch(tiny: am.Model, tmp_path) -> None:
    x = tiny.random_inputs(0)
    with pytest.warns(UserWarning, match="fallback schedule"):
        compiled = am.build(tiny, None)
    tasks = am.extract_tasks(tiny)
    # knob tasks take their template's fallback config, trace tasks the shape-generic schedule (rows in parallel,
    # loops in vectors) but for a reshape, which the build makes a view
    for t in tasks:
        func = t.mod["main"]
        reshape = tvm.relax.analysis.has_reshape_pattern(func)
        want = "fallback" if t.kind != "trace" or reshape else "generic"
        assert compiled.applied[t.func_name] == want, t.func_name
    # the convolutions' and the dense layer's constant weights were packed at build, not in every call
    knob = {t.func_name for t in tasks if t.kind != "trace"}
    assert knob and set(compiled.prepacked) == knob
    assert not any(gv.name_hint.endswith("_weight_prepack") for gv, _ in compiled.module.functions_items())
    out = compiled.run(*x)[0]
    np.testing.assert_allclose(out, tiny.reference(*x)[0], rtol=1e-4, atol=1e-4)
    path = compiled.export_library(tmp_path / "tiny.so")
    vm = tvm.relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())
    again = vm["main"](tvm.runtime.tensor(x[0], tvm.cpu()))
    again = again[0] if not hasattr(again, "numpy") else again
    np.testing.assert_allclose(again.numpy(), out, rtol=1e-6, atol=1e-6)


def test_untuned_operators_without_a_template_get_the_generic_schedule() -> None:
    """A layer norm, a GELU and a softmax over 10 x 40 (40: not a multiple of the SIMD width) built with no log:
    each trace task falls back to ``schedule_generic`` (rows in parallel, columns in vectors), not TVM's serial
    default, and the model matches PyTorch."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.LayerNorm(40), nn.GELU(), nn.Softmax(-1)).eval()
    model = am.from_torch(net, (torch.randn(1, 10, 40),), name="no-template")
    tasks = am.extract_tasks(model)
    assert tasks and all(t.kind == "trace" for t in tasks)
    with pytest.warns(UserWarning, match="fallback schedule"):
        compiled = am.build(model, None)
    generic = [n for n, how in compiled.applied.items() if how == "generic"]
    assert generic and set(compiled.applied.values()) <= {"generic", "fallback"}
    for name in generic:
        text = compiled.module[name].script()
        assert "T.parallel" in text and "T.vectorized" in text, name
    x = model.random_inputs(0)
    np.testing.assert_allclose(compiled.run(*x)[0], model.reference(*x)[0], rtol=1e-5, atol=1e-6)


def test_bad_shapes_and_files(tiny: am.Model, tmp_path) -> None:
    with pytest.raises(ValueError, match="has shape"):
        tiny.check_inputs([np.zeros((1, 3, 9, 9), "float32")])
    with pytest.raises(ValueError, match="does not exist"):
        am.from_onnx(tmp_path / "missing.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not an onnx model")
    with pytest.raises(ValueError, match="not a valid ONNX model"):
        am.from_onnx(bad)
    with pytest.raises(ValueError, match="tuning log"):
        am.build(tiny, tmp_path / "missing.jsonl")


def test_onnx_import_matches_onnxruntime(tmp_path) -> None:
    pytest.importorskip("onnxscript")
    torch.manual_seed(1)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 4)).eval()
    path = tmp_path / "small.onnx"
    torch.onnx.export(net, (torch.randn(1, 3, 6, 6),), str(path), input_names=["x"], dynamo=False)
    model = am.from_onnx(path, {"x": [1, 3, 6, 6]})
    assert [s.shape for s in model.inputs] == [(1, 3, 6, 6)]
    with pytest.raises(ValueError, match="has shape"):
        am.from_onnx(path, {"x": [1, 3, 7, 6]})
    with pytest.raises(ValueError, match="no input 'y'"):
        am.from_onnx(path, {"y": [1]})


def test_tune_build_matches_pytorch_and_resumes_after_sigkill(tiny: am.Model, tmp_path, model_option) -> None:
    import json
    import signal
    import subprocess
    import sys
    import time

    log = tmp_path / "tiny.jsonl"
    script = tmp_path / "tune.py"
    tests_dir = str(__import__("pathlib").Path(__file__).parent)
    script.write_text(
        "import sys, torch\n"
        f"sys.path.insert(0, {tests_dir!r})\n"
        "from test_models import TinyNet\n"
        "import adatune.models as am\n"
        "torch.manual_seed(0)\n"
        "net = TinyNet().eval()\n"
        "with torch.no_grad():\n"
        "    net.b1.running_mean.uniform_(-0.1, 0.1)\n"
        "    net.b1.running_var.uniform_(0.5, 1.5)\n"
        "m = am.from_torch(net, (torch.randn(1, 3, 8, 8),), name='tiny')\n"
        "tasks = [t for t in am.extract_tasks(m) if t.kind != 'trace']\n"
        f"am.tune_model(m, {str(log)!r}, n_trial=400, strategy='round-robin', round_trials=2, tasks=tasks, "
        "progress=False)\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 150
    while time.time() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 4):
        time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    assert len(killed_lines) >= 4, "the killed run measured nothing"
    # knob tasks only: a trace task's first design space imports TVM's tensor intrinsics (minutes on 2 busy cores)
    tasks = [t for t in am.extract_tasks(tiny) if t.kind != "trace"]
    n_total = len(killed_lines) + 8
    summary = am.tune_model(
        tiny,
        log,
        n_trial=n_total,
        strategy="gradient",
        round_trials=2,
        tasks=tasks,
        progress=False,
        option=model_option,
    )
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    keys = [(json.dumps(r["task"]), r["key"]) for r in lines]
    assert len(keys) == len(set(keys)), "a candidate of the killed run was measured again"
    assert len(lines) <= n_total and sum(summary.trials) == len(lines)
    with pytest.warns(UserWarning, match="fallback schedule"):  # the untuned reshape
        compiled = am.build(tiny, log)
    assert "record" in compiled.applied.values()
    x = tiny.random_inputs(1)
    np.testing.assert_allclose(compiled.run(*x)[0], tiny.reference(*x)[0], rtol=1e-4, atol=1e-4)


class _TwoDense(nn.Module):
    """Two dense layers of one shape in different fused functions (the second with a residual): their packings
    are equal, so TVM's split makes one packing function serve both kernels."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(32, 32), nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        return self.b(h) + h


def test_every_kernel_whose_shared_packing_was_folded_is_listed_as_prepacked() -> None:
    torch.manual_seed(0)
    model = am.from_torch(_TwoDense().eval(), (torch.randn(8, 32),), name="two-dense")
    tasks = am.extract_tasks(model)
    dense = {t.func_name for t in tasks if t.kind != "trace"}
    with pytest.warns(UserWarning, match="fallback schedule"):
        compiled = am.build(model, None, tasks=tasks)
    assert len(dense) == 2 and set(compiled.prepacked) == dense
    assert not any(gv.name_hint.endswith("_weight_prepack") for gv, _ in compiled.module.functions_items())
    x = model.random_inputs(0)
    np.testing.assert_allclose(compiled.run(*x)[0], model.reference(*x)[0], rtol=1e-4, atol=1e-4)


def test_latency_table_measures_every_engine_on_the_same_inputs(tiny: am.Model) -> None:
    with pytest.warns(UserWarning, match="fallback schedule"):
        compiled = am.build(tiny, None)
    table = am.latency_table(compiled, repeats=3)
    assert set(table) == {"adatune", "pytorch", "onnxruntime"} and table.unavailable == {}
    assert all(v is not None and v > 0 for v in table.values())
    proto = am.onnx_proto(tiny)  # PyTorch's export of the source module computes what the module does
    import onnxruntime as ort

    x = tiny.random_inputs(2)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: x[0]}
    np.testing.assert_allclose(session.run(None, feed)[0], tiny.reference(*x)[0], rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="unknown framework 'tensorflow'"):
        am.framework_latency(tiny, "tensorflow", x)
    no_source = am.Model(tiny.name, tiny.mod, tiny.inputs)
    assert am.framework_latency(no_source, "pytorch", x) is None


def test_an_engine_that_cannot_run_the_model_is_reported_and_the_others_still_timed() -> None:
    """An eval-mode TransformerEncoderLayer runs PyTorch's fused fast path, which torch.onnx cannot export: the
    onnxruntime row is None with the exporter's reason, adatune's and PyTorch's rows are timed, and
    ``compile-model --bench`` prints the reason."""
    from adatune.models.cli import format_latency_table

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True).eval()
    model = am.from_torch(layer, (torch.randn(1, 4, 16),), name="encoder-layer")
    with pytest.warns(UserWarning, match="fallback schedule"):
        compiled = am.build(model, None)
    table = am.latency_table(compiled, repeats=2)
    assert list(table) == ["adatune", "pytorch", "onnxruntime"]
    assert table["adatune"] > 0 and table["pytorch"] > 0 and table["onnxruntime"] is None
    assert list(table.unavailable) == ["onnxruntime"]
    assert "_transformer_encoder_layer_fwd" in table.unavailable["onnxruntime"]
    lines = format_latency_table(table, 2).splitlines()
    assert "n/a (UnsupportedOperatorError: " in lines[2] and "_transformer_encoder_layer_fwd" in lines[2]
    assert "adatune is" in lines[1]


def test_model_tasks_are_timed_with_cold_caches_by_default() -> None:
    runner = am.model_runner()
    ev = runner.config.evaluator
    # TVM flushes the caches once per repeat: every run must be a repeat of its own to be cold
    assert ev.enable_cpu_cache_flush and ev.number == 1 and ev.repeat == 6


def test_budget_is_a_trial_count_or_a_duration() -> None:
    from adatune.models.cli import parse_budget

    assert parse_budget("2000") == (2000, None)
    assert parse_budget("30m") == (None, 1800.0)
    assert parse_budget("1.5h") == (None, 5400.0)
    assert parse_budget("90s") == (None, 90.0)
    for bad in ("0", "-5m", "30x", "m", ""):
        with pytest.raises(ValueError, match="--budget wants"):
            parse_budget(bad)


def test_builtin_models_import_into_tasks_with_templates() -> None:
    r18 = am.load_builtin("resnet18")
    assert [(s.shape, s.dtype) for s in r18.inputs] == [((1, 3, 224, 224), "float32")]
    tasks = am.extract_tasks(r18)
    kinds = [t.kind for t in tasks]
    assert len(tasks) == 22 and sum(t.weight for t in tasks) == 24
    assert kinds.count("conv2d_nchw.x86") == 18 and kinds.count("dense.x86") == 1
    assert sum(t.flop * t.weight for t in tasks) / 1e9 == pytest.approx(3.64, abs=0.01)
    module, example = bert_base(layers=1)
    bert = am.from_torch(module, example, name="bert-1")
    kinds = [t.kind for t in am.extract_tasks(bert)]
    assert kinds.count("dense.x86") == 4 and kinds.count("batch_matmul.x86") == 2 and "trace" in kinds


def test_kernel_breakdown_times_every_call_of_the_vm(tiny: am.Model) -> None:
    """Each fused function appears with its calls per inference; kernels, builtins and the rest add up to the
    end-to-end latency."""
    with pytest.warns(UserWarning, match="fallback schedule"):
        compiled = am.build(tiny, None)
    report = am.kernel_breakdown(compiled, tiny.random_inputs(0), repeats=3)
    kernels = {c.symbol: c for c in report.calls if not c.symbol.startswith("vm.builtin")}
    called = {g for t in am.extract_tasks(tiny) for g in t.global_vars}
    assert set(kernels) <= called and len(kernels) >= 3
    assert all(c.calls >= 1 for c in report.calls) and min(c.seconds for c in report.calls) >= 0
    assert report.end_to_end > 0 and report.kernels > 0
    assert report.kernels + report.builtins + report.outside == pytest.approx(report.end_to_end)
    assert "end to end" in report.table()


def test_model_tasks_are_timed_with_their_constant_weights_packed_once(tiny: am.Model, checked_option) -> None:
    """A convolution's weight is a constant of the model, which the build packs once: a config that packs the
    whole weight is measured with that packing split out and run once, before the checked and timed call; a
    config that packs inside each thread (which the model pays on every call) is timed as one call, and so is
    every config of a task with no constant operand."""
    from adatune.measure import MeasureInput
    from adatune.measure._builder import _instantiate

    conv = next(t for t in am.extract_tasks(tiny) if t.kind == "conv2d_nchw.x86")
    task = conv.task
    assert 1 in task.constant_args and 0 not in task.constant_args  # the weight is a constant; the data is not
    whole = next(
        c
        for c in map(task.space.get, task.space.sample(np.random.default_rng(0), 64))
        if c["pack_kernel"].val == "global"
    )
    mod, plan, err = _instantiate(MeasureInput(task, whole))
    assert not err and plan is not None and len(plan.setup) == 1
    assert "kernel_weight_prepack" in {gv.name_hint for gv in mod.get_global_vars()}
    (res,) = checked_option.measure([MeasureInput(task, whole)])
    assert res.error_no == 0, res.error_msg  # checked against the reference with the weight packed beforehand

    task.constant_args = frozenset()  # nothing constant: the packing stays in the timed call
    assert _instantiate(MeasureInput(task, whole))[1] is None
    wide = adatune.task.create("conv2d_nchw.x86", args=(1, 16, 14, 14, 64, 3, 3, 1, 1), target=adatune.target.host())
    wide.constant_args = frozenset({1})
    configs = list(map(wide.space.get, wide.space.sample(np.random.default_rng(0), 64)))
    per_thread = next(c for c in configs if c["pack_kernel"].val == "outer")
    assert _instantiate(MeasureInput(wide, per_thread))[1] is None
    assert _instantiate(MeasureInput(wide, next(c for c in configs if c["pack_kernel"].val == "global")))[1] is not None


class _DeepResidualDense(nn.Module):
    """A dense layer deep enough (K = 6144) that its template offers K-blocked configs, with BERT FFN2's epilogue:
    bias, then a residual add."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6144, 32)

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + r


def test_k_blocked_configs_of_a_fused_dense_task_pass_the_runners_check(checked_option) -> None:
    """A model's dense task carries its epilogue (bias, residual) into the tile buffer's write-back when the
    config sums K in blocks: those configs build and compute what the fused function does (the runner checks
    each against the function's reference), beside an unblocked one."""
    from adatune.measure import MeasureInput

    torch.manual_seed(0)
    model = am.from_torch(_DeepResidualDense().eval(), (torch.randn(1, 48, 6144), torch.randn(1, 48, 32)))
    (dense,) = [t for t in am.extract_tasks(model) if t.kind == "dense.x86"]
    task, space = dense.task, dense.task.space
    assert "k_block" in space.space_map
    valid = [space.get(int(i)) for i in space.valid_indices()]
    blocked = [c for c in valid if c["k_block"].val < 6144]
    assert blocked, "no blocked config in the fused task's space"
    picks = [blocked[int(i)] for i in np.random.default_rng(0).choice(len(blocked), 2, replace=False)]
    picks.append(next(c for c in valid if c["k_block"].val == 6144))
    for cfg, res in zip(picks, checked_option.measure([MeasureInput(task, c) for c in picks])):
        assert res.error_no == 0, f"{cfg}: {res.error_msg}"
