"""CUDA without a GPU: launch limits reject configs before they are built, every CUDA template's source
compiles with nvcc for sm_80 and sm_90, launch dims and argument order match the PrimFunc, and the
export / standalone CuPy runner / resume loop works end to end with a fake launcher standing in for CuPy.
GPU tests are marked ``gpu`` and skip without a device."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tvm

import adatune
from adatune.cuda_export import cupy_runner, export_batch, export_candidate, select_candidates
from adatune.measure import LocalBuilder, LocalRunner, MeasureErrorNo, MeasureInput, _worker, evaluator
from adatune.measure import device_limits as devices

CUDA = adatune.target.cuda("sm_80")
TEMPLATES = {
    "dense.cuda": (64, 64, 64),
    "batch_matmul.cuda": (2, 64, 32, 64, "NT"),
    "conv2d_nchw.cuda": (1, 16, 14, 14, 16, 3, 3, 1, 1),
}
HAS_NVCC = shutil.which("nvcc") is not None


def _task(name: str) -> adatune.task.Task:
    return adatune.task.create(name, TEMPLATES[name], CUDA)


def _config_with_threads(task: adatune.task.Task, threads: int) -> object:
    for idx in task.space.valid_indices():
        cfg = task.space.get(int(idx))
        if cfg["tile_y"].size[2] * cfg["tile_x"].size[2] == threads:
            return cfg
    raise AssertionError(f"no config with {threads} threads")


# ---------------------------------------------------------------------- limits before cost
def test_256_thread_block_is_rejected_before_build_for_a_64_thread_device() -> None:
    task = adatune.task.create("dense.cuda", (256, 256, 256), CUDA)
    cfg = _config_with_threads(task, 256)
    small = devices.DeviceLimits("small", 64, 48 * 1024, 65536, 32)
    builder = LocalBuilder(n_parallel=1)
    try:
        (res,) = builder.build([MeasureInput(task, cfg)], small)
        assert res.error_no == MeasureErrorNo.INSTANTIATION_ERROR
        assert "max_threads_per_block=64" in res.error_msg and "small" in res.error_msg
        assert builder._pool is None  # nothing was compiled
    finally:
        builder.close()
    # the same config fits an H100
    h100 = devices.profile("h100").verify_gpu_code_kwargs()
    assert _worker.gpu_limit_violation(task.scheduled_module(cfg), h100) == ""


def test_meta_schedule_verifier_itself_rejects_the_thread_count_and_shared_memory() -> None:
    task = adatune.task.create("dense.cuda", (256, 256, 256), CUDA)
    mod = task.scheduled_module(_config_with_threads(task, 256))
    assert not _worker._passes_verify_gpu_code(mod, 64, 48 * 1024)
    assert _worker._passes_verify_gpu_code(mod, 1024, 48 * 1024)
    assert not _worker._passes_verify_gpu_code(mod, 1024, 16)


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_shared_memory_over_the_limit_is_rejected_and_valid_configs_pass(name: str) -> None:
    task = _task(name)
    h100 = devices.profile("h100").verify_gpu_code_kwargs()
    rng = np.random.default_rng(0)
    for cfg in task.space.random_candidates(rng, 4):
        mod = task.scheduled_module(cfg)
        assert _worker.gpu_limit_violation(mod, h100) == "", cfg
        broken = _worker.gpu_limit_violation(mod, dict(h100, max_shared_memory_per_block=4))
        assert "shared memory" in broken and "max_shared_memory_per_block=4" in broken


def test_per_axis_thread_limit() -> None:
    task = adatune.task.create("dense.cuda", (256, 256, 256), CUDA)
    cfg = _config_with_threads(task, 256)
    axis = "y" if cfg["tile_y"].size[2] == 256 else "x"
    limits = dict(devices.profile("a100").verify_gpu_code_kwargs(), **{f"max_thread_{axis}": 128})
    assert f"threadIdx.{axis} extent 256 exceeds max_thread_{axis}=128" in _worker.gpu_limit_violation(
        task.scheduled_module(cfg), limits
    )


def test_device_profile_option_of_the_local_runner() -> None:
    runner = LocalRunner(device_profile="H100")
    try:
        assert runner.device_limits(CUDA) == devices.PROFILES["h100"]
        assert runner.device_limits(adatune.target.host()) is None
        assert runner.with_min_converge_coef(0.1).device_limits(CUDA) == devices.PROFILES["h100"]
    finally:
        runner.close()
    with pytest.raises(ValueError, match="unknown device profile 'b200'.*a100"):
        LocalRunner(device_profile="b200")


# ---------------------------------------------------------------------- source, nvcc, launch dims
@pytest.fixture(scope="module")
def exported() -> dict[str, tuple]:
    out = {}
    for name in TEMPLATES:
        task = _task(name)
        cfg = task.space.random_candidates(np.random.default_rng(1), 1)[0]
        out[name] = (task, cfg, *export_candidate(task, cfg))
    return out


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_launch_dims_and_argument_order_match_the_primfunc(name: str, exported: dict) -> None:
    task, cfg, source, launch = exported[name]
    assert f'extern "C" __global__ void __launch_bounds__({launch.launch_bounds}) {launch.name}(' in source
    assert int(np.prod(launch.block)) == launch.launch_bounds
    params = [str(p.name) for p in task.scheduled_module(cfg)["main"].params]
    kernel_params = cupy_runner.kernel_parameters(source, launch.name)
    assert [params[i] + "_ptr" for i in launch.arg_order] == kernel_params
    assert sorted(launch.arg_order) == list(range(len(task.arg_specs)))
    y, x = cfg["tile_y"].size, cfg["tile_x"].size
    if name == "conv2d_nchw.cuda":
        f = cfg["tile_f"].size
        assert launch.arg_order == (2, 0, 1)  # TVM puts the conv2d output first
        assert launch.grid == (x[0], y[0], f[0]) and launch.block == (x[2], y[2], f[2])
    else:
        batch = TEMPLATES[name][0] if name.startswith("batch") else 1
        assert launch.grid == (x[0], y[0], batch) and launch.block == (x[2], y[2], 1)


@pytest.mark.skipif(not HAS_NVCC, reason="nvcc not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", list(TEMPLATES))
def test_nvcc_compiles_every_template_source(name: str, arch: str, exported: dict, tmp_path: os.PathLike) -> None:
    source = exported[name][2]
    cu, cubin = os.path.join(str(tmp_path), "k.cu"), os.path.join(str(tmp_path), "k.cubin")
    with open(cu, "w") as f:
        f.write(source)
    proc = subprocess.run(
        ["nvcc", f"-arch={arch}", "-cubin", "-std=c++17", "-o", cubin, cu], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert os.path.getsize(cubin) > 0


# ---------------------------------------------------------------------- the standalone runner's logic
def test_error_numbers_and_evaluator_rule_are_those_of_adatune() -> None:
    for kind in MeasureErrorNo:
        assert getattr(cupy_runner, kind.name) == int(kind)
    assert (cupy_runner.TRIM_FROM_BATCHES, cupy_runner.FLOOR_SHARE) == (
        evaluator.TRIM_FROM_BATCHES,
        evaluator.FLOOR_SHARE,
    )
    settings = [
        dict(number=5, repeat=3),
        dict(number=5, repeat=3, min_converge_coef=0.05),
        dict(number=20, repeat=10, min_converge_coef=0.02, micro_batch=10),
        dict(number=100, repeat=4, min_converge_coef=0.3, micro_batch=7, min_micro_batches=2),
        dict(number=50, repeat=10, min_converge_coef=1e-9, micro_batch=25),
        dict(evaluator.ADATUNE_PAPER),
        dict(number=5, repeat=3, warmup_ms=0.0),
        dict(number=5, repeat=3, min_converge_coef=0.05, warmup_ms=3.0),
    ]
    for noise in (0.001, 0.05, 0.5):
        for kw in settings:

            def fake_timings(noise: float) -> evaluator.TimeFn:
                rng = np.random.default_rng(0)
                return lambda _n, repeat, _ms: [1e-4 * (1 + noise * abs(rng.standard_normal())) for _ in range(repeat)]

            want = evaluator.evaluate(fake_timings(noise), evaluator.EvaluatorConfig(**kw))
            costs, runs, cv, batch_runs = cupy_runner.evaluate(fake_timings(noise), cupy_runner.EvalSettings(**kw))
            assert (costs, runs, batch_runs) == (want.costs, want.runs, want.batch_runs), kw
            assert cv == want.cv, kw


def test_error_classification() -> None:
    assert cupy_runner.classify("compile", "anything") == MeasureErrorNo.COMPILE_DEVICE
    assert cupy_runner.classify("run", "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access") == 4
    assert cupy_runner.classify("run", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested") == 4
    assert cupy_runner.classify("run", "KeyError: 'in0'") == MeasureErrorNo.UNKNOWN_ERROR


def test_manifest_errors_name_the_problem(tmp_path: os.PathLike) -> None:
    with open(os.path.join(str(tmp_path), "manifest.json"), "w") as f:
        json.dump({"format": "something-else", "version": 1}, f)
    with pytest.raises(ValueError, match="not an adatune CUDA batch manifest"):
        cupy_runner.load_manifest(str(tmp_path))


def test_export_measure_there_resume_here(tmp_path: os.PathLike, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole loop with CuPy absent: export (one candidate over a small device's limits), run the copied
    standalone script's run_batch in child processes with the fake launcher, resume a tuner from its records."""
    import functools
    import importlib.util

    import cuda_fake_launcher as fake

    from adatune import records

    task = adatune.task.create("dense.cuda", (64, 64, 64), CUDA)
    old = task.space.random_candidates(np.random.default_rng(5), 1)[0]
    log = os.path.join(str(tmp_path), "tune.jsonl")
    first = adatune.MeasureResult((2e-5,), MeasureErrorNo.NO_ERROR, 1.0, 0)
    records.save_to_file(log, [(MeasureInput(task, old), first)])
    seen = adatune.cuda_export.logged_keys(task, log)
    assert seen == {str(old.key)}
    cands = select_candidates(task, 6, seed=3, exclude=seen)
    over = _config_with_threads(task, 256)
    assert str(old.key) not in {str(c.key) for c in cands} and str(over.key) not in {str(c.key) for c in cands}
    batch = os.path.join(str(tmp_path), "batch")
    limits = devices.DeviceLimits("small", 128, 48 * 1024, 65536, 32)
    manifest = export_batch(task, [*cands, over], batch, limits)
    with pytest.raises(FileExistsError):
        export_batch(task, cands, batch)
    assert "max_threads_per_block=128" in manifest["candidates"][-1]["error"]["msg"]
    copied = os.path.join(batch, "cupy_runner.py")
    with open(copied) as f:
        assert "adatune" not in "".join(line for line in f if line.startswith(("import", "from")))

    sources = [open(os.path.join(batch, c["source"])).read() for c in manifest["candidates"][:-1]]
    plan = ["ok:3e-5", "ok:1e-5", "wrong", "illegal", "segv", "nvrtc"]
    behaviours = {fake.source_id(s): b for s, b in zip(sources, plan)}
    assert len(behaviours) == len(plan)  # every candidate's source differs
    monkeypatch.syspath_prepend(batch)  # the child processes import the copied script by its name
    spec = importlib.util.spec_from_file_location("cupy_runner", copied)
    assert spec is not None and spec.loader is not None
    standalone = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "cupy_runner", standalone)
    spec.loader.exec_module(standalone)
    out = os.path.join(str(tmp_path), "results.jsonl")
    lines = standalone.run_batch(
        batch,
        out,
        standalone.EvalSettings(number=20, repeat=5, min_converge_coef=0.05, micro_batch=10),
        timeout=60.0,
        launcher_factory=functools.partial(fake.FakeLauncher, behaviours),
        log=lambda _msg: None,
    )
    kinds = [line["result"]["error_no"] for line in lines]
    assert kinds == [0, 0, 5, 4, 4, 3, 1]
    assert "illegal memory access" in lines[3]["result"]["error_msg"]
    assert "crashed" in lines[4]["result"]["error_msg"]
    ok = lines[1]["result"]
    assert ok["runs"] <= 100 and len(ok["costs"]) >= 3 and ok["extra"]["device"] == "fake0"

    recs = list(records.load_from_file(out))
    assert [r.key for r in recs] == [str(c.key) for c in [*cands, over]]
    with open(log, "a") as f, open(out) as g:
        f.write(g.read())
    tuner = adatune.tuners.create_tuner("random", task, seed=0)
    assert tuner.load_history(records.load_from_file(log)) == 8
    assert tuner.visited == {str(c.key) for c in [old, *cands, over]}
    assert str(tuner.best_config.key) == str(cands[1].key)
    assert not {str(c.key) for c in tuner.next_batch(8)} & tuner.visited


def test_hang_is_killed_and_recorded_as_run_timeout(tmp_path: os.PathLike) -> None:
    import cuda_fake_launcher as fake

    task = adatune.task.create("dense.cuda", (64, 64, 64), CUDA)
    batch = os.path.join(str(tmp_path), "batch")
    manifest = export_batch(task, select_candidates(task, 1, seed=9), batch)
    with open(os.path.join(batch, manifest["candidates"][0]["source"])) as f:
        behaviours = {fake.source_id(f.read()): "hang"}
    import functools

    (line,) = cupy_runner.run_batch(
        batch,
        os.path.join(str(tmp_path), "r.jsonl"),
        timeout=3.0,
        launcher_factory=functools.partial(fake.FakeLauncher, behaviours),
        start_method="fork",  # no CUDA in this parent: forking is safe and skips re-importing adatune
        log=lambda _msg: None,
    )
    assert line["result"]["error_no"] == MeasureErrorNo.RUN_TIMEOUT and "3 s" in line["result"]["error_msg"]


def test_parallel_compiles_share_one_reference_and_never_share_the_gpu(tmp_path: os.PathLike) -> None:
    """Four children compile at once; the GPU goes to one at a time (a crash or a hang on it does not keep it),
    records come back in the manifest's order, and two batches read one reference file."""
    import functools

    import cuda_fake_launcher as fake

    from adatune.cuda_export import write_reference

    task = adatune.task.create("dense.cuda", (64, 64, 64), CUDA)
    root = str(tmp_path)
    write_reference(task, os.path.join(root, "reference.npz"))
    with pytest.raises(ValueError, match="write it with write_reference"):
        export_batch(task, select_candidates(task, 1), os.path.join(root, "x"), reference="../nothing.npz")
    cands = select_candidates(task, 10, seed=4)
    plan = ["ok:3e-5", "segv", "ok:1e-5", "hang", "wrong", "illegal", "nvrtc", "ok:2e-5"]
    first = export_batch(task, cands[:8], os.path.join(root, "a"), reference="../reference.npz")
    second = export_batch(task, cands[8:], os.path.join(root, "b"), reference="../reference.npz")
    assert first["reference"] == second["reference"] == "../reference.npz"
    assert not os.path.exists(os.path.join(root, "a", "reference.npz"))
    behaviours = {}
    for c, what in zip(first["candidates"], plan):
        with open(os.path.join(root, "a", c["source"])) as f:
            behaviours[fake.source_id(f.read())] = what
    gpu_log = os.path.join(root, "gpu.log")
    launcher = functools.partial(fake.FakeLauncher, behaviours, gpu_log=gpu_log)
    out = os.path.join(root, "a.jsonl")
    with pytest.raises(ValueError, match="jobs must be"):
        cupy_runner.run_batch(os.path.join(root, "a"), out, jobs=0)
    lines = cupy_runner.run_batch(
        os.path.join(root, "a"), out, timeout=3.0, launcher_factory=launcher, start_method="fork", jobs=4,
        log=lambda _msg: None,
    )  # fmt: skip
    assert [line["key"] for line in lines] == [str(c.key) for c in cands[:8]]
    assert [line["result"]["error_no"] for line in lines] == [0, 4, 0, 7, 5, 4, 3, 0]
    with open(out) as f:
        assert sorted(json.loads(row)["key"] for row in f) == sorted(str(c.key) for c in cands[:8])
    spans = []
    with open(gpu_log) as f:
        for row in f:
            pid, start, end = row.split()
            spans.append((float(start), float(end), pid))
    spans.sort()
    assert len({pid for _, _, pid in spans}) >= 4  # the ok and wrong ones launched, each in its own child
    for (_, end, pid), (start, _, other) in zip(spans, spans[1:]):
        assert pid == other or end <= start, "two children used the GPU at once"
    (ok,) = cupy_runner.run_batch(
        os.path.join(root, "b"), os.path.join(root, "b.jsonl"), launcher_factory=launcher, start_method="fork",
        jobs=2, log=lambda _msg: None,
    )[:1]  # fmt: skip
    assert ok["result"]["error_no"] == 0


def test_export_cli_and_the_script_without_cupy(tmp_path: os.PathLike) -> None:
    from adatune.cuda_export.__main__ import main

    batch = os.path.join(str(tmp_path), "b")
    assert main(["export", "--workload", "dense:M=32,N=32,K=32", "--n", "2", "--out", batch, "--arch", "sm_90"]) == 0
    manifest = cupy_runner.load_manifest(batch)
    assert len(manifest["candidates"]) == 2 and manifest["target"]["arch"] == "sm_90"
    assert main(["export", "--workload", "no-such-workload", "--out", batch]) == 2
    proc = subprocess.run(
        [sys.executable, os.path.join(batch, "cupy_runner.py"), batch, "--out", os.path.join(batch, "r.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        import cupy  # noqa: F401
    except ImportError:
        assert proc.returncode == 2 and "needs CuPy" in proc.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not tvm.cuda(0).exist, reason="no CUDA device")
def test_cupy_runner_on_a_real_gpu(tmp_path: os.PathLike) -> None:
    pytest.importorskip("cupy")
    task = adatune.task.create("dense.cuda", (64, 64, 64), CUDA)
    batch = os.path.join(str(tmp_path), "batch")
    export_batch(task, select_candidates(task, 3), batch, devices.profile("h100"))
    lines = cupy_runner.run_batch(batch, os.path.join(str(tmp_path), "r.jsonl"), log=lambda _msg: None)
    assert all(line["result"]["error_no"] == 0 for line in lines)


def test_gpu_benchmark_rounds_export_measure_ingest_report(
    tmp_path: os.PathLike, monkeypatch: pytest.MonkeyPatch
) -> None:
    """benchmarks/gpu's local halves: two rounds of two schemes, the GPU side played by the fake launcher."""
    import functools

    import cuda_fake_launcher as fake

    from adatune import records

    monkeypatch.syspath_prepend(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from benchmarks.gpu.__main__ import ingest, main, make_round, report, rounds

    state, spec = os.path.join(str(tmp_path), "state"), "dense:M=32,N=32,K=32"
    assert main(["report", "--state", state]) == 0
    with open(os.path.join(state, "summary.md")) as f:
        assert "not yet measured" in f.read()
    with pytest.raises(ValueError, match="unknown scheme 'ga'"):
        make_round(state, [spec], ["ga"], 4, "sm_90", 0, None)
    keys: dict[str, set[str]] = {}
    for k in (1, 2):
        root = make_round(state, [spec], ["xgb", "rfei-ae"], 4, "sm_90", 0, "h100")
        assert rounds(state)[-1] == k and root.endswith(f"round-{k}")
        with open(os.path.join(root, "run.sh")) as f:
            script = f.read()
        assert "--min-converge-coef 0.1" in script and "torch_reference.py" in script
        with open(os.path.join(root, "shapes.json")) as f:
            assert json.load(f) == {"dense_M_32_N_32_K_32": ["dense", [32, 32, 32, "float32"]]}
        out_dir = os.path.join(str(tmp_path), f"gpu-out-{k}")  # what the device run would bring back
        for scheme in ("xgb", "rfei-ae"):
            batch = os.path.join(root, "dense_M_32_N_32_K_32", scheme)
            manifest = cupy_runner.load_manifest(batch)
            new = {c["key"] for c in manifest["candidates"]}
            assert len(new) == 4 and not new & keys.get(scheme, set())  # never the same candidate twice
            keys.setdefault(scheme, set()).update(new)
            times = {}
            for j, c in enumerate(manifest["candidates"]):
                with open(os.path.join(batch, c["source"])) as f:
                    times[fake.source_id(f.read())] = f"ok:{(j + 1) * 1e-6}"
            os.makedirs(os.path.join(out_dir, "dense_M_32_N_32_K_32", scheme))
            cupy_runner.run_batch(
                batch,
                os.path.join(out_dir, "dense_M_32_N_32_K_32", scheme, "results.jsonl"),
                launcher_factory=functools.partial(fake.FakeLauncher, times),
                start_method="fork",
                log=lambda _msg: None,
            )
        assert ingest(state, k, out_dir) == {"dense_M_32_N_32_K_32/rfei-ae": 4, "dense_M_32_N_32_K_32/xgb": 4}
        assert ingest(state, k, out_dir) == {"dense_M_32_N_32_K_32/rfei-ae": 0, "dense_M_32_N_32_K_32/xgb": 0}
    table = report(state)
    logged = list(records.load_from_file(os.path.join(state, "logs", "dense_M_32_N_32_K_32", "xgb.jsonl")))
    assert {r.key for r in logged} == keys["xgb"]
    best = max(2.0 * 32**3 / r.result.cost for r in logged)  # the fake's fastest kernel: ~1 us a run (median)
    assert 0.9 * 2.0 * 32**3 / 1e-6 < best < 1.1 * 2.0 * 32**3 / 1e-6
    assert f"| dense_M_32_N_32_K_32 | xgb | 8 | 8 | {best / 1e9:.1f} | not yet measured |" in table


def test_gpu_retime_round_exports_each_schemes_best_and_reports_them_beside_pytorch(
    tmp_path: os.PathLike, monkeypatch: pytest.MonkeyPatch
) -> None:
    import functools

    import cuda_fake_launcher as fake

    monkeypatch.syspath_prepend(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from benchmarks.gpu.__main__ import ingest, main, make_retime, make_round
    from benchmarks.gpu.retime import ingest_retime, retime_table

    state, spec, wl = os.path.join(str(tmp_path), "state"), "dense:M=32,N=32,K=32", "dense_M_32_N_32_K_32"
    with pytest.raises(ValueError, match="run tuning rounds first"):
        make_retime(state, [spec], ["xgb"], 2, 2, "sm_90", "h100")
    root = make_round(state, [spec], ["xgb", "rfei"], 4, "sm_90", 0, "h100")
    out_dir = os.path.join(str(tmp_path), "out")
    speed: dict[str, float] = {}
    for scheme in ("xgb", "rfei"):
        batch = os.path.join(root, wl, scheme)
        times = {}
        for j, c in enumerate(cupy_runner.load_manifest(batch)["candidates"]):
            with open(os.path.join(batch, c["source"])) as f:
                times[fake.source_id(f.read())] = f"ok:{(j + 1) * 1e-6}"
            speed[c["key"]] = (j + 1) * 1e-6
        os.makedirs(os.path.join(out_dir, wl, scheme))
        cupy_runner.run_batch(
            batch, os.path.join(out_dir, wl, scheme, "results.jsonl"),
            launcher_factory=functools.partial(fake.FakeLauncher, times), start_method="fork", log=lambda _m: None,
        )  # fmt: skip
    ingest(state, 1, out_dir)
    rt = make_retime(state, [spec], ["xgb", "rfei"], 2, 2, "sm_90", "h100")
    with open(os.path.join(rt, "retime.json")) as f:
        picked = json.load(f)["picked"][wl]
    assert all(len(keys) == 2 for keys in picked.values())  # the two fastest of each scheme
    batch = os.path.join(rt, wl, "best")
    cands = cupy_runner.load_manifest(batch)["candidates"]
    assert {c["key"] for c in cands} == {k for keys in picked.values() for k in keys}
    with open(os.path.join(rt, "run.sh")) as f:
        script = f.read()
    assert script.index("pass-1.jsonl") < script.index("torch_reference-1.json") < script.index("pass-2.jsonl")
    # the GPU side: every kernel now twice as fast as in tuning, PyTorch at 1 us
    times = {}
    for c in cands:
        with open(os.path.join(batch, c["source"])) as f:
            times[fake.source_id(f.read())] = f"ok:{speed[c['key']] / 2}"
    res = os.path.join(str(tmp_path), "retimed")
    for p in (1, 2):
        os.makedirs(os.path.join(res, wl), exist_ok=True)
        cupy_runner.run_batch(
            batch, os.path.join(res, wl, f"pass-{p}.jsonl"),
            launcher_factory=functools.partial(fake.FakeLauncher, times), start_method="fork", log=lambda _m: None,
        )  # fmt: skip
        with open(os.path.join(res, f"torch_reference-{p}.json"), "w") as f:
            json.dump({"seconds": {wl: 1e-6}}, f)
    with pytest.raises(ValueError, match="not a re-timing round"):
        ingest_retime(state, 1, res)
    assert main(["ingest", "--state", state, "--round", "2", "--results", res]) == 0
    table = retime_table(state, 2)
    fastest = min(speed[k] for keys in picked.values() for k in keys) / 2
    row = next(line for line in table.splitlines() if f"| {wl} | " in line and fastest * 1e6 < 1.0)
    assert "PyTorch" in table and "x |" in row
    assert main(["report", "--state", state]) == 0
    assert os.path.exists(os.path.join(state, "tuning.png"))
    with open(os.path.join(state, "summary.md")) as f:
        assert "Re-timed round 2" in f.read()


def test_a_cuda_record_recreates_its_task_on_the_gpu_target(tmp_path: os.PathLike) -> None:
    """The record's target keeps the CUDA target's host as a dict (it was written as the list of its keys, so
    the task came back on the CPU); logs written that way still load onto the GPU target."""
    from adatune import records

    task = adatune.task.create("dense.cuda", (64, 64, 64), CUDA)
    cand = select_candidates(task, 1, seed=1)[0]
    stub = adatune.cuda_export.record_stub(task, cand)
    assert isinstance(stub["target"]["host"], dict)
    res = adatune.MeasureResult((1e-5,), MeasureErrorNo.NO_ERROR, 1.0, 0)
    log = os.path.join(str(tmp_path), "cuda.jsonl")
    records.save_to_file(log, [(MeasureInput(task, cand), res)])
    with open(log) as f:
        line = json.loads(f.readline())
    legacy = dict(line, target={**line["target"], "host": ["kind", "tag", "keys", "num-cores", "mtriple", "mcpu"]})
    legacy_log = os.path.join(str(tmp_path), "legacy.jsonl")
    with open(legacy_log, "w") as f:
        f.write(json.dumps(legacy) + "\n")
    for path in (log, legacy_log):
        (rec,) = records.load_from_file(path)
        made = rec.create_task().target
        assert made.kind.name == "cuda" and str(made.attrs["arch"]) == str(CUDA.attrs["arch"]), path


@pytest.mark.parametrize(
    "op,args",
    [
        ("dense", [8, 16, 12, "float32"]),
        ("batch_matmul", [2, 8, 12, 16, "NT", "float32"]),
        ("batch_matmul", [2, 8, 12, 16, "NN", "float32"]),
        ("conv2d_nchw", [1, 4, 9, 9, 6, 3, 3, 2, 1, "float32"]),
    ],
)
def test_pytorch_reference_computes_the_workloads_operator(
    op: str, args: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from benchmarks.gpu.torch_reference import operator_for

    torch.manual_seed(0)
    fn = operator_for(op, args, torch, dev="cpu")
    cells = fn.__closure__ or ()
    inputs = [c.cell_contents for c in cells if isinstance(c.cell_contents, torch.Tensor)]
    task = adatune.task.create(f"{op}.cuda", tuple(args), CUDA)
    shapes = [tuple(s.shape) for s in task.arg_specs if not s.is_output]
    by_shape = {tuple(t.shape): t.numpy() for t in inputs}
    (want,) = task.reference_outputs([by_shape[s] for s in shapes])
    np.testing.assert_allclose(fn().numpy(), want, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------- the one runner, alone on a machine
_WITHOUT_ADATUNE = """
import importlib.abc, json, sys
class NotHere(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("adatune", "tvm", "cupy", "torch"):
            raise ImportError(f"{name} is not on the GPU machine")
sys.meta_path.insert(0, NotHere())
sys.path.insert(0, sys.argv[1])
import cupy_runner as r
rng = [1e-4 * (1 + 0.3 * (i % 3)) for i in range(200)]
calls = iter(rng)
timed = lambda number, repeat, warm: [next(calls) for _ in range(repeat)]
settings = r.EvalSettings(number=20, repeat=5, min_converge_coef=0.05, micro_batch=10, warmup_ms=0.0)
print(json.dumps({
    "rule_file": r._rule.__file__,
    "rule": [r.TRIM_FROM_BATCHES, r.FLOOR_SHARE],
    "evaluate": list(r.evaluate(timed, settings)),
    "launches": r._launches({"launches": [{"grid": [1, 2], "block": [32, 1, 1], "params": ["A_ptr", "ws"]}]}),
    "single": r._launches({"grid": [3], "block": [64, 1, 1]}),
    "batch_without_cupy": r.main([sys.argv[1], "--out", sys.argv[1] + "/r.jsonl"]),
}))
"""


def test_the_copied_runner_works_where_neither_adatune_nor_tvm_imports(tmp_path: os.PathLike) -> None:
    """``copy_runner`` puts the runner and the one rule file beside each other; there, with adatune, TVM, CuPy and
    PyTorch unimportable, the runner loads the copied rule, decides the adaptive evaluator's stop as adatune's
    evaluator does, parses a plan's launches (split-K's several, an older batch's one) and says CuPy is missing."""
    where = os.path.join(str(tmp_path), "gpu machine")
    cupy_runner.copy_runner(where)
    assert sorted(os.listdir(where)) == ["cupy_runner.py", "micro_batches.py"]
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT_ADATUNE, where], capture_output=True, text=True, timeout=120, cwd=where
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert os.path.dirname(got["rule_file"]) == where
    assert got["rule"] == [evaluator.TRIM_FROM_BATCHES, evaluator.FLOOR_SHARE]
    calls = iter([1e-4 * (1 + 0.3 * (i % 3)) for i in range(200)])
    cfg = evaluator.EvaluatorConfig(number=20, repeat=5, min_converge_coef=0.05, micro_batch=10, warmup_ms=0.0)
    want = evaluator.evaluate(lambda _n, repeat, _ms: [next(calls) for _ in range(repeat)], cfg)
    assert got["evaluate"] == [want.costs, want.runs, want.cv, want.batch_runs]
    assert got["launches"] == [[[1, 2], [32, 1, 1], ["A_ptr", "ws"]]]
    assert got["single"] == [[[3], [64, 1, 1], ["A_ptr", "B_ptr", "C_ptr", "T"]]]
    assert got["batch_without_cupy"] == 2 and "needs CuPy" in proc.stderr
