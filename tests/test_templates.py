"""Built-in templates and workloads: every x86 template builds and matches numpy on several configs,
every CUDA template compiles with nvcc, and the workload registry creates tasks for both targets."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import tvm

import adatune
import adatune.templates  # noqa: F401 - registers the templates
from adatune import workloads
from adatune.measure import MeasureErrorNo, MeasureInput

HOST = adatune.target.host()
CUDA = adatune.target.cuda("sm_80")

# small shapes, each exercising a different path of its template
X86_CASES = [
    ("dense.x86", (64, 48, 96, "float32")),
    ("dense.x86", (24, 20, 7, "float32")),  # extents that are no multiple of the vector width
    ("batch_matmul.x86", (3, 32, 48, 16, "NN", "float32")),
    ("batch_matmul.x86", (2, 32, 32, 32, "NT", "float32")),  # square: only transpose_b tells NN from NT
    ("conv2d_nchw.x86", (1, 16, 14, 14, 32, 3, 3, 1, 1, "float32")),
    ("conv2d_nchw.x86", (1, 16, 14, 14, 32, 3, 3, 2, 1, "float32")),  # same inputs, stride 2
    ("conv2d_nchw.x86", (1, 16, 14, 14, 32, 1, 1, 2, 0, "float32")),  # 1x1, no padding stage
    ("conv2d_nchw.x86", (1, 3, 20, 20, 16, 7, 7, 2, 3, "float32")),  # ResNet stem-like
    ("conv2d_nchw.x86", (1, 16, 14, 14, 32, 3, 3, 1, 1, "float32", "small")),
]
CUDA_CASES = [
    ("dense.cuda", (64, 48, 96, "float32")),
    ("batch_matmul.cuda", (3, 32, 48, 16, "NT", "float32")),
    ("conv2d_nchw.cuda", (1, 16, 14, 14, 32, 3, 3, 1, 1, "float32")),
    ("conv2d_nchw.cuda", (1, 3, 20, 20, 16, 7, 7, 2, 3, "float32")),
]


def _configs(task: adatune.task.Task, n_random: int, seed: int = 0) -> list[int]:
    """The first config (what a fallback uses), the last valid one, and random valid ones."""
    space = task.config_space
    last = next(i for i in range(len(space) - 1, -1, -1) if space.is_index_valid(i))
    rand = space.sample(np.random.default_rng(seed), n_random, exclude=[0, last])
    return [0, last, *rand]


@pytest.fixture(scope="module")
def cpu_option():
    opt = adatune.measure_option(adatune.LocalBuilder(timeout=60),
                                 adatune.LocalRunner(number=1, repeat=1, timeout=60, check_correctness=True))
    yield opt
    opt.close()


@pytest.mark.parametrize("name,args", X86_CASES, ids=[f"{n}{a[:-1] if a[-1] == 'float32' else a}"
                                                         for n, a in X86_CASES])
def test_x86_template_matches_numpy(name: str, args: tuple, cpu_option) -> None:
    task = adatune.task.create(name, args, HOST)
    assert len(task.config_space) > 1 and task.flop > 0
    idxs = _configs(task, 2, seed=len(args))
    results = cpu_option.measure([MeasureInput(task, task.config_space.get(i)) for i in idxs])
    for i, res in zip(idxs, results):
        assert res.error_no == MeasureErrorNo.NO_ERROR, f"config {i}: {res.error_no.name} {res.error_msg[-800:]}"
        assert min(res.costs) > 0


def test_references_agree_with_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    for args in [(1, 8, 9, 9, 4, 3, 3, 2, 1, "float32"), (1, 3, 11, 11, 5, 7, 7, 2, 3, "float32")]:
        task = adatune.task.create("conv2d_nchw.x86", args, HOST)
        x = rng.uniform(-1, 1, task.arg_specs[0].shape).astype("float32")
        w = rng.uniform(-1, 1, task.arg_specs[1].shape).astype("float32")
        want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=args[7],
                                          padding=args[8]).numpy()
        np.testing.assert_allclose(task.reference_outputs([x, w])[0], want, rtol=1e-4, atol=1e-4)
    a, b = rng.uniform(size=(2, 4, 3)).astype("float32"), rng.uniform(size=(2, 5, 3)).astype("float32")
    task = adatune.task.create("batch_matmul.x86", (2, 4, 5, 3, "NT", "float32"), HOST)
    np.testing.assert_allclose(task.reference_outputs([a, b])[0], a @ b.transpose(0, 2, 1), rtol=1e-5)


@pytest.mark.parametrize("name", ["conv2d-resnet18-L1", "conv2d-resnet18-L6", "conv2d-resnet18-L11",
                                  "conv2d-resnet18-L12", "dense-1024", "bmm-bert-nt"])
def test_full_size_random_configs_instantiate(name: str) -> None:
    """Real shapes: random configs instantiate (cheap), and one of them builds."""
    task = workloads.get(name).create_task(HOST)
    idxs = task.config_space.sample(np.random.default_rng(3), 8)
    assert len(idxs) == 8
    for i in idxs:
        task.instantiate(i)
    sch, _ = task.instantiate(idxs[0])
    tvm.tirx.build(sch.mod, task.target)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("name,args", CUDA_CASES, ids=[f"{n}{a[:-1]}" for n, a in CUDA_CASES])
def test_cuda_template_compiles_with_nvcc(name: str, args: tuple) -> None:
    from tvm.support import nvcc

    task = adatune.task.create(name, args, CUDA)
    for i in _configs(task, 1, seed=7):
        sch, _ = task.instantiate(i)
        lib = tvm.tirx.build(sch.mod, task.target)  # keeps CUDA source; nvcc proves it compiles
        source = lib.imports[0].inspect_source("cuda")
        assert "__global__" in source
        with task.target:
            cubin = nvcc.compile_cuda(source, target_format="cubin", arch="sm_80", compiler="nvcc")
        assert len(cubin) > 0, f"config {i}"


@pytest.mark.gpu
@pytest.mark.skipif(not tvm.cuda(0).exist, reason="no CUDA device")
def test_cuda_templates_run_correctly_on_gpu() -> None:
    opt = adatune.measure_option(adatune.LocalBuilder(timeout=120),
                                 adatune.LocalRunner(number=2, repeat=2, timeout=60, check_correctness=True))
    try:
        for name, args in CUDA_CASES:
            task = adatune.task.create(name, args, adatune.target.cuda(_local_arch()))
            idxs = _configs(task, 1, seed=11)
            results = opt.measure([MeasureInput(task, task.config_space.get(i)) for i in idxs])
            for i, res in zip(idxs, results):
                assert res.error_no == MeasureErrorNo.NO_ERROR, f"{name} config {i}: {res.error_msg[-800:]}"
    finally:
        opt.close()


def _local_arch() -> str:
    major, minor = tvm.cuda(0).compute_version.split(".")
    return f"sm_{major}{minor}"


REQUIRED = ["dense-1024", "bmm-bert-nn", "bmm-bert-nt", "conv2d-resnet18-L6-small",
            *[f"conv2d-resnet18-L{i}" for i in range(1, 13)]]


def test_workloads_are_listed_and_create_tasks_for_both_targets() -> None:
    names = workloads.list_workloads()
    assert set(REQUIRED) <= set(names) and len(names) == len(set(names))
    for name in names:
        w = workloads.get(name)
        assert w.description
        cpu = w.create_task(HOST)
        assert cpu.name.endswith(".x86") and cpu.flop == pytest.approx(w.flop)
        if w.cuda:
            gpu = w.create_task(CUDA)
            assert gpu.name.endswith(".cuda") and len(gpu.config_space) > 1
        else:
            with pytest.raises(ValueError):
                w.create_task(CUDA)
    assert workloads.get("conv2d-resnet18-L6").args[1:9] == (128, 28, 28, 128, 3, 3, 1, 1)
    small = len(workloads.get("conv2d-resnet18-L6-small").create_task(HOST).config_space)
    assert 1000 <= small <= 3000
    with pytest.raises(KeyError):
        workloads.get("no-such-workload")


def test_torch_reference_matches_template_reference() -> None:
    pytest.importorskip("torch")
    out = workloads.torch_reference("conv2d-resnet18-L12")()
    assert tuple(out.shape) == (1, 512, 7, 7)
    out = workloads.torch_reference("bmm-bert-nt")()
    assert tuple(out.shape) == (12, 128, 128)
