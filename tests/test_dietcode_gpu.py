"""DietCode's GPU study without a GPU: shape-generic CUDA kernels exported with a grid per T, the standalone
runner's phases and crash bookkeeping on a fake device, and the report's replay table and reference arms."""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest
import tvm

from adatune.dietcode import MicroKernelSpace
from adatune.dietcode._range_task import RangeTask, seconds_at
from adatune.dietcode._schedule import schedule_microkernel
from adatune.dietcode._workloads import DynamicWorkload
from adatune.measure import MeasureErrorNo
from adatune.measure.device_limits import profile
from benchmarks.gpu import dietcode_report as report
from benchmarks.gpu.dietcode_export import export_workload, kernel_grid

CUDA = tvm.target.Target({"kind": "cuda", "arch": "sm_90"})
RUNNER = os.path.join(os.path.dirname(__file__), "..", "adatune", "cuda_export", "cupy_runner.py")


def _space(kind: str) -> MicroKernelSpace:
    return MicroKernelSpace(CUDA, device_limits=profile("h200"), kind=kind)


@pytest.mark.parametrize(
    ("kind", "dims"), [("dense", (96, 160)), ("bmm_nt", (3, 64)), ("bmm_nn", (2, 48))], ids=["dense", "nt", "nn"]
)
def test_grid_at_every_t_counts_the_tiles_of_that_t(kind: str, dims: tuple[int, int]) -> None:
    wl = DynamicWorkload("w", kind, dims, (1, 40))
    mk = _space(kind).kernels[137]
    grid, block = kernel_grid(schedule_microkernel(wl, mk), [1, 5, 17, 40])
    assert block == [mk.nt // mk.nr, mk.mt // mk.mr, 1]
    for t, g in zip([1, 5, 17, 40], grid):
        batch, rows, cols, _ = wl.gemm_extents(t)
        assert g == batch * math.ceil(rows / mk.mt) * math.ceil(cols / mk.nt)


def test_export_bundles_kernels_under_one_preamble_and_nvcc_builds_them(tmp_path: os.PathLike) -> None:
    wl = DynamicWorkload("w", "dense", (64, 96), (1, 8))
    keys = [k.key for k in _space("dense").kernels[::250]]
    data = export_workload(wl, CUDA, "h200", per_module=2, keys=keys)
    assert [k["key"] for k in data["kernels"]] == keys and data["ts"] == list(range(1, 9))
    assert len(data["modules"]) == math.ceil(len(keys) / 2)
    for k in data["kernels"]:
        assert "error" not in k and len(k["grid"]) == 8
        src = data["modules"][k["module"]]
        assert src.count(f" {k['name']}(") == 2  # declared and defined, renamed from main_kernel
        assert "main_kernel" not in src and "int T)" in src
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    path = os.path.join(tmp_path, "m.cu")
    with open(path, "w") as f:
        f.write(data["modules"][0])
    subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-o", path + ".cubin", path], check=True, capture_output=True)


# ---------------------------------------------------------------------- the standalone runner on a fake GPU
@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    fake_cupy = types.ModuleType("cupy")
    fake_cupy.RawModule = lambda path: types.SimpleNamespace(get_function=lambda name: name)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    spec = importlib.util.spec_from_file_location("cupy_runner_under_test", RUNNER)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, mod)  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    with open(RUNNER) as f:
        assert "adatune" not in "".join(line for line in f if line.startswith(("import", "from")))
    return mod


def _batch(tmp_path: os.PathLike, n: int) -> str:
    """A batch of ``n`` fake kernels of one dense workload, T in [1, 6], seeds sampling {1, 3, 6} and {1, 4, 6}."""
    out = os.fspath(tmp_path)
    wl = DynamicWorkload("w", "dense", (8, 8), (1, 6))
    kernels = [{"key": f"cuda:k{i}", "index": i, "module": 0, "name": f"k{i}", "grid": [1] * 6, "block": [32, 1, 1]}
               for i in range(n)]  # fmt: skip
    with gzip.open(os.path.join(out, "w.json.gz"), "wt") as f:
        json.dump({"workload": wl.to_json(), "ts": list(range(1, 7)), "kernels": kernels, "modules": ["x"]}, f)
    plan = {"workloads": ["w"], "sampled": {"0": [1, 3, 6], "1": [1, 4, 6]}, "phase1_ts": [1, 3, 4, 6]}
    with open(os.path.join(out, "plan.json"), "w") as f:
        json.dump(plan, f)
    return out


def _fake_bench(mod: types.ModuleType, crash_at: tuple[str, int] | None = None) -> type:
    class FakeBench:
        """Kernel ``k<i>`` takes (i + 1) * T microseconds, except k2, which is wrong everywhere."""

        def __init__(self, wl: list, args: argparse.Namespace):
            self.args, self.t_lo, self.calls = args, 1, []

        def at(self, t: int) -> None:
            self.t = t

        def cublas(self) -> float:
            return 3e-6 * self.t

        def workspace(self, nbytes: int) -> None:
            self.ws_bytes = nbytes

        def kernel(self, launches: list[tuple[str, int, list[int], list[str]]]) -> tuple[int, list[float]]:
            fn = launches[0][0]
            if crash_at == (fn, self.t):
                os._exit(9)  # what an illegal address does to the process
            if fn == "k2":
                return mod.WRONG_ANSWER, []
            return mod.NO_ERROR, [(int(fn[1:]) + 1) * self.t * 1e-6] * self.args.repeat

    return FakeBench


def _args(tmp_path: os.PathLike, **kw: object) -> argparse.Namespace:
    work = os.path.join(tmp_path, "work")
    os.makedirs(work, exist_ok=True)
    base = {"budget": 60.0, "p1_share": 0.7, "top": 2, "repeat": 3, "remaining": 1, "work": work}
    return argparse.Namespace(**{**base, **kw})


def test_runner_phases_time_every_kernel_then_the_best_at_every_t(
    runner: types.ModuleType, tmp_path: os.PathLike
) -> None:
    batch = _batch(tmp_path, 5)
    runner.GemmBench = _fake_bench(runner)
    args = _args(tmp_path)
    runner.run_workload(batch, "w", {0: "m.cubin"}, args, start=__import__("time").time())
    out = os.path.join(tmp_path, "out")
    runner.merge(argparse.Namespace(**vars(args), out=out), ["w"], {"workloads": {}})
    z = np.load(os.path.join(out, "results.npz"))
    err, secs = z["w/p1_error"], z["w/p1_seconds"]
    assert err.shape == (5, 4) and np.all(err[2] == runner.WRONG_ANSWER)
    assert np.all(err[[0, 1, 3, 4]] == runner.NO_ERROR)
    assert secs[4, 3, 0] == pytest.approx(5 * 6e-6)  # k4 at T = 6 (phase-1 column 3)
    assert list(z["w/p2_kernels"]) == [0, 1]  # the two fastest at every phase-1 T; the wrong one never
    assert np.all(z["w/p2_error"] == runner.NO_ERROR) and z["w/p2_seconds"].shape == (2, 6, 3)
    assert z["w/cublas_p2"][5, 0] == pytest.approx(18e-6)


def test_runner_records_a_kernel_that_kills_its_process_and_resumes_after_it(
    runner: types.ModuleType, tmp_path: os.PathLike
) -> None:
    batch = _batch(tmp_path, 4)
    args = _args(tmp_path)
    runner.GemmBench = _fake_bench(runner, crash_at=("k1", 3))
    pid = os.fork()
    if pid == 0:  # the child dies on k1 at T = 3, as run_workload's process would
        runner.run_workload(batch, "w", {0: "m.cubin"}, args, start=__import__("time").time())
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 9
    with open(os.path.join(args.work, "w.progress")) as f:
        row, col = f.read().split()
    with open(os.path.join(args.work, "w.progress.phase")) as f:
        phase = f.read().strip()
    with open(os.path.join(args.work, "w.crashed"), "a") as f:  # what main() writes before it starts again
        f.write(f"crash {phase} {row} {col}\n")
    runner.GemmBench = _fake_bench(runner)
    runner.run_workload(batch, "w", {0: "m.cubin"}, args, start=__import__("time").time())
    with np.load(os.path.join(args.work, "w.npz")) as z:
        err = z["p1_error"]
    assert err[1, 1] == runner.RUNTIME_DEVICE  # k1 at T = 3, recorded as the crash
    assert err[1, 0] == runner.NO_ERROR and np.all(err[3] == runner.NO_ERROR)  # before it kept, after it resumed


# ---------------------------------------------------------------------- the report
def _data(wl: DynamicWorkload, keys: list[str], ts1: list[int]) -> dict:
    n, ts = len(keys), list(range(wl.t_range[0], wl.t_range[1] + 1))
    rate = np.arange(1, n + 1, dtype=np.float64)[:, None]
    p1 = np.repeat((rate * np.asarray(ts1))[..., None], 3, axis=2) * 1e-6
    p1_err = np.zeros((n, len(ts1)), dtype=np.int8)
    p1_err[1, 0] = MeasureErrorNo.WRONG_ANSWER
    p1_err[2, :] = -1  # never timed
    p2_rows = [0, 3]
    p2 = np.repeat((rate[p2_rows] * np.asarray(ts))[..., None], 3, axis=2) * 1e-6
    d = {
        "workload": wl.to_json(),
        "keys": keys,
        "p1": p1,
        "p1_err": p1_err,
        "p2_keys": [keys[i] for i in p2_rows],
        "p2": p2,
        "p2_err": np.zeros((2, len(ts)), dtype=np.int8),
        "cublas_p2": np.full((len(ts), 2), 2e-6),
        "ts": ts,
        "ts1": ts1,
    }
    d["p1_med"] = np.where(p1_err == 0, np.median(p1, axis=2), np.nan)
    d["p2_med"] = np.median(p2, axis=2)
    return d


def test_replay_table_serves_each_sampled_t_and_the_gpu_errors() -> None:
    wl = DynamicWorkload("w", "dense", (64, 96), (1, 8))
    task = RangeTask(wl, [2, 8], CUDA, _space("dense"))
    keys = [k.key for k in task.space.kernels[:4]]
    d = _data(wl, keys, [2, 5, 8])
    table = report.replay_table(task, d, d["ts1"])
    assert (task.workload_key, keys[2]) not in table  # not timed: the replay reports it as unknown
    assert table[(task.workload_key, keys[1])].error_no == MeasureErrorNo.WRONG_ANSWER
    ok = table[(task.workload_key, keys[3])]
    assert seconds_at(ok) == {2: pytest.approx(8e-6), 8: pytest.approx(32e-6)}


def test_reference_arms_and_the_dietcode_latency_come_from_the_right_cells() -> None:
    wl = DynamicWorkload("w", "dense", (64, 96), (1, 8))
    keys = [k.key for k in _space("dense").kernels[:4]]
    d = _data(wl, keys, [2, 5, 8])
    arms = report.arms(d)
    assert arms["per_shape_best"][4] == pytest.approx(5e-6)  # T = 5: kernel 0 at 1 us per T
    assert np.all(arms["padded_largest"] == pytest.approx(8e-6))  # the best at T = 8, run at 8
    assert arms["bucket16"][0] == pytest.approx(8e-6)  # one bucket up to 16, capped at the range's top
    lat = report.dietcode_latency(d, [keys[3]] * 4 + [keys[1]] * 4)
    assert lat[0] == pytest.approx(4e-6)  # phase 2's timing of kernel 3 at T = 1
    assert lat[4] == pytest.approx(10e-6)  # kernel 1 is not in phase 2: phase 1's timing at its T = 5
    assert np.isnan(lat[6])  # and at T = 7 it was never timed


def test_runner_calls_every_launch_of_a_kernel_and_times_the_kernels_asked_for_at_every_t(
    runner: types.ModuleType, tmp_path: os.PathLike
) -> None:
    batch = _batch(tmp_path, 5)
    path = os.path.join(batch, "w.json.gz")
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    two = data["kernels"][3]  # k3: its parts, then their sum (a split-K kernel)
    two["launches"] = [
        {"name": "k3", "grid": [4] * 6, "block": [32, 1, 1], "params": ["A_ptr", "B_ptr", "C_pad_rf_ptr", "T"]},
        {"name": "k3_1", "grid": [1] * 6, "block": [128, 1, 1], "params": ["C_ptr", "C_pad_rf_ptr", "T"]},
    ]
    two["workspace"] = 4096
    with gzip.open(path, "wt") as f:
        json.dump(data, f)
    seen: list = []
    fake = _fake_bench(runner)

    class Recording(fake):  # type: ignore[misc, valid-type]
        def kernel(self, launches: list) -> tuple[int, list[float]]:
            seen.append([(fn, grid, params) for fn, grid, _, params in launches])
            return super().kernel(launches)

    runner.GemmBench = Recording
    keys = os.path.join(tmp_path, "p2.json")
    with open(keys, "w") as f:
        json.dump({"w": ["cuda:k4"]}, f)  # the slowest kernel, which --top 2 alone would not time everywhere
    args = _args(tmp_path, p2_keys=keys)
    runner.run_workload(batch, "w", {0: "m.cubin"}, args, start=__import__("time").time())
    assert [("k3", 4, ["A_ptr", "B_ptr", "C_pad_rf_ptr", "T"]), ("k3_1", 1, ["C_ptr", "C_pad_rf_ptr", "T"])] in seen
    with np.load(os.path.join(args.work, "w.npz")) as z:
        assert list(z["p2_kernels"]) == [0, 1, 4]
        assert np.all(z["p2_error"][2] == runner.NO_ERROR)


def test_runner_killed_by_sigterm_keeps_what_its_workloads_saved(
    runner: types.ModuleType, tmp_path: os.PathLike
) -> None:
    batch = _batch(tmp_path, 3)
    runner.GemmBench = _fake_bench(runner)
    args = _args(tmp_path)
    runner.run_workload(batch, "w", {0: "m.cubin"}, args, start=__import__("time").time())  # its scratch file
    out = os.path.join(tmp_path, "out")
    handler = runner.merge_on_term(argparse.Namespace(**vars(args), out=out), ["w"], {"workloads": {}})
    with pytest.raises(SystemExit) as stop:
        handler(15, None)
    assert stop.value.code == 128 + 15
    z = np.load(os.path.join(out, "results.npz"))
    assert z["w/p1_error"].shape == (3, 4) and np.all(z["w/p1_error"][:2] == runner.NO_ERROR)
    assert np.all(z["w/p1_error"][2] == runner.WRONG_ANSWER)  # the fake's k2, recorded as such
    with open(os.path.join(out, "meta.json")) as f:
        assert json.load(f)["stopped_by_signal"] == 15


def test_the_tuner_takes_more_rounds_on_a_gpu_unless_told() -> None:
    from adatune.dietcode import DietCodeTuner
    from adatune.dietcode._tune import CPU_ROUNDS, CUDA_ROUNDS
    from adatune.target import host

    wl = DynamicWorkload("w", "dense", (64, 96), (1, 8))
    assert DietCodeTuner(wl, CUDA, n_shapes=2).n_rounds == CUDA_ROUNDS == 12
    assert DietCodeTuner(wl, host(), n_shapes=2).n_rounds == CPU_ROUNDS == 3
    assert DietCodeTuner(wl, CUDA, n_shapes=2, rounds=2).n_rounds == 2
