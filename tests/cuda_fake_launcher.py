"""A stand-in for ``cupy_runner.CupyLauncher`` on machines without a GPU: numpy arrays play device memory, a
dense kernel is computed with numpy from its parameter names, and each kernel (by the SHA-1 of its source)
behaves as told: correct with a given time per run, wrong, an illegal address, a segfault, a hang, or an
NVRTC error. Imports only numpy, so the runner's child processes start fast."""

from __future__ import annotations

import faulthandler
import hashlib
import os
import re
import signal
import time
from typing import Any

import numpy as np


def source_id(source: str) -> str:
    return hashlib.sha1(source.encode()).hexdigest()


class FakeLauncher:
    def __init__(self, behaviours: dict[str, str], device: int = 0, gpu_log: str | None = None):
        self.behaviours = behaviours
        self.device_name = f"fake{device}"
        self.gpu_log = gpu_log  # each launch/timing appends "pid start end" here, to check the GPU is never shared

    def _used(self, start: float) -> None:
        if self.gpu_log:
            with open(self.gpu_log, "a") as f:
                f.write(f"{os.getpid()} {start!r} {time.monotonic()!r}\n")

    def compile(self, source: str, name: str) -> tuple[str, list[str], str]:
        what = self.behaviours.get(source_id(source), "ok:1e-5")
        if what == "nvrtc":
            raise RuntimeError("CompileException: nvrtc: error: identifier 'foo' is undefined")
        head = re.search(r"\b" + re.escape(name) + r"\s*\(([^)]*)\)", source)
        assert head is not None, name
        params = [p.strip().split()[-1] for p in head.group(1).split(",")]
        return what, params, source

    def to_device(self, array: np.ndarray) -> np.ndarray:
        return np.array(array, copy=True)

    def to_host(self, handle: np.ndarray) -> np.ndarray:
        return np.array(handle, copy=True)

    def launch(self, kernel: Any, grid: Any, block: Any, args: list, shared_mem: int) -> None:
        start = time.monotonic()
        what, params, _ = kernel
        if what == "illegal":
            raise RuntimeError("CUDADriverError: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")
        if what == "segv":
            faulthandler.disable()  # a forked child inherits pytest's handler, whose stack dump is noise here
            os.kill(os.getpid(), signal.SIGSEGV)
        if what == "hang":
            time.sleep(3600)
        by_name = dict(zip(params, args))
        out = by_name["C_ptr"]
        out[...] = by_name["A_ptr"] @ by_name["B_ptr"] + (1.0 if what == "wrong" else 0.0)
        time.sleep(0.05)  # long enough for two children sharing the GPU to overlap in the log
        self._used(start)

    def synchronize(self) -> None:
        pass

    def time(self, kernel: Any, grid: Any, block: Any, args: list, shared_mem: int, number: int, repeat: int) -> list:
        what, _, source = kernel
        per_run = float(what.split(":")[1])
        rng = np.random.default_rng(int(source_id(source)[:8], 16))
        return [per_run * (1.0 + 0.02 * rng.standard_normal()) for _ in range(repeat)]
