"""A/B probe (not a test): a register tile whose width is not a power of two, vectorised whole or split.

A register tile three vectors wide (24 fp32 lanes on AVX2, 48 on AVX-512) was vectorised as one ``<24 x float>``
loop, which LLVM legalises by widening to the next power of two; ``adatune.templates._x86.vectorize_columns`` now
splits it into power-of-two vectors (the outer loop unrolled). ``whole`` is the earlier code, ``split`` the shipped
one. Each DietCode micro-kernel (``--kernels`` on ``--workload``) and each sampled config of a knob template whose
register tile is three vectors wide (``--template``/``--template-args``/``--configs``) is built both ways, checked
against numpy and timed in alternating rounds, framed by the noise gate. Run alone on the machine::

    python -m benchmarks.dietcode.vector_split_probe --workload scores --kernels cpu:8x96x8/4x24 \\
        cpu:24x72x4/3x24/column --template dense.x86 --template-args 128 768 768 \\
        --out benchmarks/results/dietcode/zen1_three_vector_probe
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
from collections.abc import Iterator
from typing import Any

import numpy as np
import tvm

import adatune
import adatune.dietcode._schedule as dietcode_schedule
import adatune.templates._gemm as gemm_template
from adatune import target as _target
from adatune.dietcode import MicroKernel, schedule_microkernel
from adatune.target import size_tvm_thread_pool, tvm_main_thread
from adatune.templates import _x86

from .._common import write_summary
from ..noise_gate import NoiseGate, interleaved
from .kernel_probe import WORKLOADS
from .pad_probe import open_gate, probe_header, probe_workload, time_variants, write_probe_data

WAYS = ("whole", "split")


def _whole(sch: Any, loop: Any, width: int) -> None:
    sch.vectorize(loop)


@contextlib.contextmanager
def vectorised(way: str) -> Iterator[None]:
    """Schedules made inside vectorise a tile's columns ``way``: ``whole`` (one loop, as before) or ``split``."""
    if way not in WAYS:
        raise ValueError(f"way must be one of {WAYS}, got {way!r}")
    users = (_x86, gemm_template, dietcode_schedule)  # every module that calls it by name
    shipped = [m.vectorize_columns for m in users]
    if way == "whole":
        for m in users:
            m.vectorize_columns = _whole  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for m, f in zip(users, shipped):
            m.vectorize_columns = f  # type: ignore[attr-defined]


def _compile(mod: tvm.IRModule, tgt: Any) -> Any:
    with tgt:
        return tvm.compile(mod, target=tgt)


def probe_kernels(args: argparse.Namespace, tgt: Any, rng: np.random.Generator) -> list[dict[str, Any]]:
    kind, dims = WORKLOADS[args.workload]
    wl = probe_workload(args.workload, kind, dims, tgt)
    libs = {}
    for key in args.kernels:
        for way in WAYS:
            with vectorised(way):
                libs[f"{key} {way}"] = _compile(schedule_microkernel(wl, MicroKernel.from_key(key)).mod, tgt)
    rows = []
    for t in args.t:
        med = time_variants(wl, libs, t, rng, args.rounds, args.workload)
        for key in args.kernels:
            whole, split = med[f"{key} whole"], med[f"{key} split"]
            rows.append({"case": f"{args.workload} T={t}", "candidate": key, "whole_us": whole * 1e6,
                         "split_us": split * 1e6, "whole_over_split": whole / split})  # fmt: skip
            print(f"{args.workload} T={t} {key}: whole {whole * 1e6:.1f} us, split {split * 1e6:.1f} us")
    return rows


def probe_template(args: argparse.Namespace, tgt: Any, rng: np.random.Generator) -> list[dict[str, Any]]:
    targs = (*args.template_args, "float32")
    task = adatune.task.create(args.template, targs, tgt)
    if not isinstance(task, adatune.task.Task):
        raise SystemExit(f"{args.template} is not a knob template (a {type(task).__name__})")
    lanes = _target.cpu_info(task.target).lanes("float32")
    tile = "tile_f" if args.template.startswith("conv2d") else "tile_x"
    space = task.config_space
    wide = [int(i) for i in space.valid_indices() if space.get(int(i))[tile].size[-1] == 3 * lanes]
    if not wide:
        raise SystemExit(f"no config of {args.template}{targs} has a register tile three vectors wide")
    picked = [int(i) for i in rng.choice(wide, size=min(args.configs, len(wide)), replace=False)]
    libs = {}
    for index in picked:
        for way in WAYS:
            with vectorised(way):
                libs[(index, way)] = _compile(task.instantiate(index)[0].mod, tgt)
    data_rng = np.random.default_rng(1)
    host = [
        np.zeros(s.shape, s.dtype) if s.is_output else data_rng.uniform(-1, 1, s.shape).astype(s.dtype)
        for s in task.arg_specs
    ]
    want = task.reference_outputs([a for a, s in zip(host, task.arg_specs) if not s.is_output])
    dev = tvm.cpu(0)
    tensors = [tvm.runtime.tensor(a, dev) for a in host]
    timers = {}
    for (index, way), lib in libs.items():
        lib["main"](*tensors)
        assert want is not None
        np.testing.assert_allclose(tensors[-1].numpy(), want[0], rtol=1e-3, atol=1e-3, err_msg=f"{index} {way}")
        ev = lib.mod.time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=30)
        timers[f"{index} {way}"] = functools.partial(_reading, ev, tensors)
    med = {k: statistics.median(v) for k, v in interleaved(timers, args.rounds).items()}
    rows = []
    for index in picked:
        whole, split = med[f"{index} whole"], med[f"{index} split"]
        rows.append({"case": f"{args.template}{tuple(args.template_args)}", "candidate": str(space.get(index)),
                     "whole_us": whole * 1e6, "split_us": split * 1e6, "whole_over_split": whole / split})  # fmt: skip
        print(f"{args.template} config {index}: whole {whole * 1e6:.1f} us, split {split * 1e6:.1f} us")
    return rows


def _reading(evaluator: Any, tensors: list[Any]) -> float:
    with tvm_main_thread():
        return float(evaluator(*tensors).mean)


def main(argv: list[str] | None = None) -> int:
    size_tvm_thread_pool()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="scores")
    p.add_argument("--kernels", nargs="*", default=[], help="DietCode micro-kernel keys, e.g. cpu:8x96x8/4x24")
    p.add_argument("--t", nargs="+", type=int, default=[37, 96, 128])
    p.add_argument("--template", default=None, help="a knob template, e.g. dense.x86 or conv2d_nchw.x86")
    p.add_argument("--template-args", nargs="*", type=int, default=[], help="its integer arguments (float32)")
    p.add_argument("--configs", type=int, default=5, help="three-vector configs of the template sampled")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    tgt = _target.host()
    rng = np.random.default_rng(0)
    gate, load_before, started = open_gate()
    rows = probe_kernels(args, tgt, rng) if args.kernels else []
    rows += probe_template(args, tgt, rng) if args.template else []
    gate.probe("after")
    print(gate.sentence())
    if args.out:
        _write(args.out, rows, gate, load_before, started, argv)
    return 0


def _write(out: str, rows: list[dict], gate: NoiseGate, load_before: list[float], started: str, argv: Any) -> None:
    meta = write_probe_data(out, "benchmarks.dietcode.vector_split_probe", rows, gate, load_before, started, argv)
    title = "Register tiles three vectors wide: vectorised whole (before) or split into power-of-two vectors"
    each = "build (µs per call); every build checked against numpy first"
    lines = probe_header(title, meta, started, load_before, gate, each) + [
        "| case | candidate | whole (µs) | split (µs) | whole / split |",
        "|---|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | `{r['candidate']}` | {r['whole_us']:.1f} | {r['split_us']:.1f} | "
            f"{r['whole_over_split']:.2f}x |"
        )
    write_summary(out, lines)


if __name__ == "__main__":
    raise SystemExit(main())
