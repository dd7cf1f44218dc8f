"""Built-in templates and workloads: every x86 template builds and matches numpy on several configs,
every CUDA template compiles with nvcc, and the workload registry creates tasks for both targets."""

from __future__ import annotations

import math
import re
import shutil
from typing import Any

import numpy as np
import pytest
import tvm

import adatune
import adatune.templates  # noqa: F401 - registers the templates
from adatune.codegen import x86 as _x86
from adatune.measure import MeasureErrorNo, MeasureInput
from adatune.templates import _gemm, batch_matmul, conv2d, dense, workloads

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


DIRECT_CALLS = {
    "dense.x86": dense.dense_x86,
    "batch_matmul.x86": batch_matmul.batch_matmul_x86,
    "conv2d_nchw.x86": conv2d.conv2d_x86,
}
AVX2 = {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "znver3", "num-cores": 2}
AVX512 = [
    {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "znver4", "num-cores": 2},
    {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "skylake-avx512", "num-cores": 4},
]


def _configs(task: adatune.task.Task, n_random: int, seed: int = 0) -> list[int]:
    """The first valid config, the last valid one, and random valid ones."""
    space = task.config_space
    first, last = space.get_next_index(-1), space.get_next_index(space.range_length, -1)
    assert first is not None and last is not None, f"{task}: the space has no valid config"
    rand = space.sample(np.random.default_rng(seed), n_random, exclude=[first, last])
    return [first, last, *rand]


def _register_tile(task: adatune.task.Task, cfg: Any) -> tuple[int, int]:
    """(rows, vectors) of a config's micro-kernel: broadcast rows x vectorised columns."""
    lanes = adatune.target.cpu_info(task.target).lanes(task.arg_specs[0].dtype)
    if task.name.startswith("conv2d"):
        rows, cols = cfg["tile_y"].size[-1] * cfg["tile_x"].size[-1], cfg["tile_f"].size[-1]
    else:
        rows, cols = cfg["tile_y"].size[-1], cfg["tile_x"].size[-1]
    return rows, -(-cols // lanes)


def _valid_configs(task: adatune.task.Task, n: int = 400) -> list[int]:
    """Every valid config of a small space, else ``n`` random ones."""
    space = task.config_space
    if len(space) <= 200_000:
        return [int(i) for i in space.valid_indices()]
    return space.sample(np.random.default_rng(0), n)


def _good_config(task: adatune.task.Task) -> int:
    """The valid config with the most accumulators, then the largest cache tiles: what the space's rules
    call fast."""
    space = task.config_space

    def score(i: int) -> tuple:
        cfg = space.get(i)
        rows, vecs = _register_tile(task, cfg)
        mids = [cfg[k].size[1] for k in ("tile_y", "tile_x", "tile_f") if k in space.space_map]
        return rows * vecs, math.prod(mids), -i

    return max(_valid_configs(task, 1000), key=score)


def _run_against_numpy(task: adatune.task.Task, sch: Any, what: str, seed: int = 0, atol: float = 1e-4) -> None:
    """Build a schedule, run it on random inputs, compare every output with the numpy reference."""
    lib = tvm.tirx.build(sch.mod, task.target)
    rng = np.random.default_rng(seed)
    host = [
        np.zeros(s.shape, s.dtype) if s.is_output else rng.uniform(-1, 1, s.shape).astype(s.dtype)
        for s in task.arg_specs
    ]
    args = [tvm.runtime.tensor(a, tvm.cpu()) for a in host]
    lib["main"](*args)
    want = task.reference_outputs([a for a, s in zip(host, task.arg_specs) if not s.is_output])
    got = [a.numpy() for a, s in zip(args, task.arg_specs) if s.is_output]
    assert want is not None and len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=atol, err_msg=f"{task.name}{task.args} {what}")


@pytest.mark.parametrize(
    "name,args", X86_CASES, ids=[f"{n}{a[:-1] if a[-1] == 'float32' else a}" for n, a in X86_CASES]
)
def test_x86_random_good_and_fallback_configs_match_numpy(name: str, args: tuple) -> None:
    task = adatune.task.create(name, args, HOST)
    assert len(task.config_space) > 1 and task.flop > 0
    random = task.config_space.sample(np.random.default_rng(len(args)), 2)
    assert len(random) == 2
    for index in [*random, _good_config(task)]:
        _run_against_numpy(task, task.instantiate(index)[0], f"config {index}")
    with pytest.warns(UserWarning, match="fallback"), task.target:  # no record: every knob's first value
        sch, _ = DIRECT_CALLS[name](*args)
    _run_against_numpy(task, sch, "fallback config")


@pytest.mark.parametrize("name,args", X86_CASES[::4], ids=[f"{n}{a[:-1]}" for n, a in X86_CASES[::4]])
def test_x86_configs_pass_the_measure_pipelines_check(name: str, args: tuple, checked_option) -> None:
    """The runner's own correctness check (in its worker process) accepts the same kernels."""
    task = adatune.task.create(name, args, HOST)
    idxs = [_good_config(task), *task.config_space.sample(np.random.default_rng(1), 1)]
    results = checked_option.measure([MeasureInput(task, task.config_space.get(i)) for i in idxs])
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
        want = torch.nn.functional.conv2d(
            torch.from_numpy(x), torch.from_numpy(w), stride=args[7], padding=args[8]
        ).numpy()
        np.testing.assert_allclose(task.reference_outputs([x, w])[0], want, rtol=1e-4, atol=1e-4)
    a, b = rng.uniform(size=(2, 4, 3)).astype("float32"), rng.uniform(size=(2, 5, 3)).astype("float32")
    task = adatune.task.create("batch_matmul.x86", (2, 4, 5, 3, "NT", "float32"), HOST)
    np.testing.assert_allclose(task.reference_outputs([a, b])[0], a @ b.transpose(0, 2, 1), rtol=1e-5)


@pytest.mark.parametrize(
    "name",
    [
        "conv2d-resnet18-L1",
        "conv2d-resnet18-L6",
        "conv2d-resnet18-L11",
        "conv2d-resnet18-L12",
        "dense-1024",
        "bmm-bert-nt",
    ],
)
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
    opt = adatune.measure_option(
        adatune.LocalBuilder(timeout=120), adatune.LocalRunner(number=2, repeat=2, timeout=60, check_correctness=True)
    )
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


REQUIRED = [
    "dense-1024",
    "bmm-bert-nn",
    "bmm-bert-nt",
    "conv2d-resnet18-L6-small",
    *[f"conv2d-resnet18-L{i}" for i in range(1, 13)],
]


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


# Spaces are checked for what a fast kernel needs, from the ISA alone (16 ymm / 8 fp32 lanes with AVX2,
# 32 zmm / 16 lanes with AVX-512), whatever machine runs the test: nothing here runs a kernel.
ISA_LIMITS = {"znver3": (16, 8), "znver4": (32, 16), "skylake-avx512": (32, 16)}
SPACE_CASES = [
    ("dense.x86", (1024, 1024, 1024, "float32")),
    ("dense.x86", (128, 3072, 768, "float32")),
    ("batch_matmul.x86", (12, 128, 128, 64, "NT", "float32")),
    ("conv2d_nchw.x86", (1, 128, 28, 28, 128, 3, 3, 1, 1, "float32")),
    ("conv2d_nchw.x86", (1, 64, 56, 56, 64, 3, 3, 1, 1, "float32")),
    ("conv2d_nchw.x86", (1, 128, 28, 28, 128, 3, 3, 1, 1, "float32", "small")),
]


@pytest.mark.parametrize("tgt", [AVX2, *AVX512], ids=lambda t: t["mcpu"])
@pytest.mark.parametrize("name,args", SPACE_CASES, ids=[f"{n}{a[:-1]}" for n, a in SPACE_CASES])
def test_every_config_fits_the_register_file_and_keeps_cores_busy(tgt: dict, name: str, args: tuple) -> None:
    registers, lanes = ISA_LIMITS[tgt["mcpu"]]
    task = adatune.task.create(name, args, tgt)
    small = args[-1] == "small"
    configs = _valid_configs(task)
    assert len(configs) >= 16
    tiles = set()
    for i in configs:
        cfg = task.config_space.get(i)
        rows, vecs = _register_tile(task, cfg)
        cols = cfg["tile_f" if name.startswith("conv2d") else "tile_x"].size[-1]
        assert cols % lanes == 0, f"config {i}: {cols} columns are not whole {lanes}-lane vectors"
        assert rows * vecs + vecs + 1 <= registers, f"config {i}: {rows}x{vecs} tile spills"
        if not small:  # enough independent accumulators, no more loads than FMAs per step
            assert rows * vecs >= _x86.FMA_CHAINS and rows + vecs <= rows * vecs, f"config {i}: {rows}x{vecs}"
        if name.startswith("conv2d"):
            parallel = cfg["tile_f"].size[0] * (
                1 if cfg["pack_kernel"].val == "outer" else cfg["tile_y"].size[0] * cfg["tile_x"].size[0]
            )
        else:
            batch = args[0] if name.startswith("batch") else 1
            parallel = batch * cfg["tile_y"].size[0] * cfg["tile_x"].size[0]
            assert cfg["pack_b"].val == "global" or cfg["tile_y"].size[0] == 1
        assert parallel >= tgt["num-cores"], f"config {i}: {parallel} parallel chunks for {tgt['num-cores']} cores"
        tiles.add((rows, vecs))
    if not small:  # the space offers the large tiles the wider register file allows
        assert max(r * v for r, v in tiles) >= (16 if registers == 32 else 8)


def test_avx2_and_avx512_spaces_differ_where_the_isas_do() -> None:
    """dense-1024: on AVX2 the 4x16 and 2x32 fp32 tiles (8 accumulators of 16 ymm); on AVX-512 tiles up
    to 16 accumulators of 32 zmm, none of which would fit 16 registers."""

    def tiles(tgt: dict) -> set[tuple[int, int]]:
        task = adatune.task.create("dense.x86", (1024, 1024, 1024, "float32"), tgt)
        return {
            (task.config_space.get(i)["tile_y"].size[-1], task.config_space.get(i)["tile_x"].size[-1])
            for i in _valid_configs(task)
        }

    assert tiles(AVX2) == {(4, 16), (2, 32)}
    wide = tiles(AVX512[0])
    assert {(8, 32), (4, 64)} <= wide and all(c % 16 == 0 for _, c in wide)
    assert any(r * c // 16 + c // 16 + 1 > 16 for r, c in wide)


def test_gemm_cache_tiles_fit_l2() -> None:
    """A cache tile's A and B panels fit L2 over the reduction they sum: the whole K, or its ``k_block``; a
    block is offered only to tiles whose whole-K panels would not fit."""
    task = adatune.task.create("dense.x86", (1024, 1024, 1024, "float32"), AVX2)
    l2 = adatune.target.cpu_info(task.target).l2_bytes
    blocked = 0
    for i in _valid_configs(task):
        cfg = task.config_space.get(i)
        y, x, depth = cfg["tile_y"].size, cfg["tile_x"].size, cfg["k_block"].val
        panels = y[1] * y[2] + x[1] * x[2]
        assert panels * depth * 4 <= l2 or y[1] * x[1] == 1
        if depth < 1024:
            blocked += 1
            assert panels * 1024 * 4 > l2 and 1024 % depth == 0
    assert blocked > 0


def test_gemm_k_blocks_only_deep_reductions_in_the_pruned_space() -> None:
    """BERT's FFN2 (K = 3072) gets a 512-deep block; K = 768 and AutoTVM's unpruned space keep their knobs."""
    assert _gemm.k_blocks(3072) == [512] and _gemm.k_blocks(1024) == [512]
    assert _gemm.k_blocks(768) == [] and _gemm.k_blocks(64) == []
    ffn2 = adatune.task.create("dense.x86", (128, 3072, 768, "float32"), AVX2).config_space
    assert ffn2.space_map["k_block"].entities[0].val == 3072  # the first value: the unblocked GEMM
    qkv = adatune.task.create("dense.x86", (128, 768, 768, "float32"), AVX2).config_space
    unpruned = adatune.task.create("dense.x86", (128, 3072, 768, "float32", "autotvm"), AVX2).config_space
    assert "k_block" not in qkv.space_map and "k_block" not in unpruned.space_map


@pytest.mark.parametrize("args", [(128, 6144, 32, "float32"), (62, 8192, 48, "float32")], ids=["deep", "padded"])
def test_blocked_gemm_matches_numpy(args: tuple) -> None:
    """Configs summing K in blocks (their accumulators in a tile buffer) compute the same product, with the
    local padding of an awkward row count too (62 rows); K deep enough that whole-K panels miss any L2."""
    task = adatune.task.create("dense.x86", args, HOST)
    space = task.config_space
    blocked = [int(i) for i in space.valid_indices() if space.get(int(i))["k_block"].val < args[1]]
    assert blocked, "no blocked config in the space"
    for index in np.random.default_rng(0).choice(blocked, size=min(3, len(blocked)), replace=False):
        _run_against_numpy(task, task.instantiate(int(index))[0], f"blocked config {index}", atol=1e-3)


def test_a_record_written_before_a_knob_was_added_still_decodes() -> None:
    """A record's entity without ``k_block`` (written before the knob existed) reads as the unblocked config it
    was, and a record whose entity contradicts the space is still refused."""
    task = adatune.task.create("dense.x86", (128, 3072, 32, "float32"), HOST)
    space = task.config_space
    unblocked = next(int(i) for i in space.valid_indices() if space.get(int(i))["k_block"].val == 3072)
    entity = {n: e.to_json() for n, e in space.get(unblocked)._entity_map.items() if n != "k_block"}
    cfg = task.candidate_from_json({"kind": "knob", "index": unblocked, "entity": entity})
    assert cfg.index == unblocked and cfg["k_block"].val == 3072
    entity["order"] = "ji" if entity["order"] == "ij" else "ij"
    with pytest.raises(ValueError, match="order"):
        task.candidate_from_json({"kind": "knob", "index": unblocked, "entity": entity})


@pytest.mark.parametrize(
    "name,args,tile",
    [
        ("dense.x86", (16, 32, 96, "float32"), "tile_x"),
        ("conv2d_nchw.x86", (1, 8, 6, 6, 48, 3, 3, 1, 1, "float32"), "tile_f"),
    ],
    ids=["dense", "conv2d"],
)
def test_three_vector_register_tiles_are_vectorised_as_power_of_two_vectors(name: str, args: tuple, tile: str) -> None:
    """A config whose register tile is three vectors wide runs one vector at a time (LLVM widens a ``<24 x float>``
    loop, and such configs of BERT's dense GEMM ran 2.4-9.2x slower that way) and computes the same product."""
    task = adatune.task.create(name, args, HOST)
    lanes = adatune.target.cpu_info(task.target).lanes("float32")
    space = task.config_space
    wide = [int(i) for i in space.valid_indices() if space.get(int(i))[tile].size[-1] == 3 * lanes]
    assert wide, f"no config of {name}{args} has a three-vector register tile"
    for index in np.random.default_rng(0).choice(wide, size=min(2, len(wide)), replace=False):
        sch = task.instantiate(int(index))[0]
        widths = {int(x) for x in re.findall(r"T\.vectorized\((?:T\.int\d+\()?(\d+)", sch.mod.script())}
        assert lanes in widths and all(w & (w - 1) == 0 for w in widths), widths  # a padded input row may be shorter
        _run_against_numpy(task, sch, f"config {index}", atol=1e-3)


@pytest.mark.parametrize("tgt,wide", [(AVX2, "ymm"), (AVX512[0], "zmm")], ids=["avx2", "avx512"])
def test_good_config_compiles_to_the_isas_vector_registers(tgt: dict, wide: str) -> None:
    task = adatune.task.create("dense.x86", (64, 48, 96, "float32"), tgt)
    lib = tvm.tirx.build(task.instantiate(_good_config(task))[0].mod, task.target)
    asm = lib.inspect_source("asm")
    assert "vfmadd" in asm and wide in asm
    if wide == "ymm":
        assert "zmm" not in asm


# -- AutoTVM's unpruned spaces (space="autotvm") ---------------------------------------------------------
UNPRUNED_CASES = [
    ("dense.x86", (24, 20, 7, "float32")),
    ("batch_matmul.x86", (2, 32, 32, 32, "NT", "float32")),
    ("conv2d_nchw.x86", (1, 16, 14, 14, 32, 3, 3, 2, 1, "float32")),
]


@pytest.mark.parametrize("name,args", UNPRUNED_CASES, ids=[n for n, _ in UNPRUNED_CASES])
def test_autotvm_space_keeps_every_factorisation_and_its_configs_compute_correctly(name: str, args: tuple) -> None:
    pruned = adatune.task.create(name, args, HOST)
    task = adatune.task.create(name, (*args, "autotvm"), HOST)
    space, small = task.config_space, pruned.config_space
    assert not space.has_filters and len(space) == space.range_length  # nothing filtered out
    assert list(space.space_map) == list(small.space_map)  # the same knobs...
    for knob, values in space.space_map.items():  # ...each with every value the pruned space has, and more
        assert {str(e) for e in small.space_map[knob].entities} <= {str(e) for e in values.entities}
    assert len(space) >= 4 * len(small)
    split = space.space_map["tile_y"]
    extent = args[1] if name.startswith("batch") else (args[0] if name.startswith("dense") else None)
    if extent is not None:  # a 3-way split keeps every ordered factorisation of the extent
        assert len(split) == sum(1 for a in range(1, extent + 1) for b in range(1, extent + 1) if extent % (a * b) == 0)
    assert task.workload_key != pruned.workload_key  # records of the two spaces never mix
    for index in space.sample(np.random.default_rng(3), 3):  # configs the pruned space leaves out, too
        _run_against_numpy(task, task.instantiate(index)[0], f"unpruned config {index}")


@pytest.mark.parametrize("name,args", [CUDA_CASES[0], CUDA_CASES[2]], ids=["dense.cuda", "conv2d_nchw.cuda"])
def test_cuda_autotvm_space_drops_the_launch_filters(name: str, args: tuple) -> None:
    pruned = adatune.task.create(name, args, CUDA)
    task = adatune.task.create(name, (*args, "autotvm"), CUDA)
    assert pruned.config_space.has_filters and not task.config_space.has_filters
    assert len(task.config_space) > len(pruned.config_space)
    task.instantiate(int(task.config_space.sample(np.random.default_rng(0), 1)[0]))  # applies without error


def test_unknown_space_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="space must be one of .*'autotvm'.*got 'huge'"):
        adatune.task.create("dense.x86", (16, 16, 16, "float32", "huge"), HOST)
    with pytest.raises(ValueError, match="space must be one of"):
        adatune.task.create("dense.x86", (16, 16, 16, "float32", "small"), HOST)  # small is conv2d's alone


def test_workload_specs_ask_for_the_unpruned_space() -> None:
    w = workloads.get("dense:M=64,N=64,K=64,space=autotvm")
    assert w.name == "dense:M=64,N=64,K=64,space=autotvm" and w.space == "autotvm" and w.cuda
    assert w.task_args(HOST)[-1] == w.task_args(CUDA)[-1] == "autotvm"
    assert workloads.get("batch_matmul:B=2,M=8,N=8,K=8,space=autotvm").task_args(HOST)[-1] == "autotvm"
    with pytest.raises(ValueError, match="space=small exists for conv2d only"):
        workloads.get("dense:M=64,N=64,K=64,space=small")
    task = w.create_task(HOST)
    assert len(task.space) == task.config_space.range_length > 10_000
