"""A/B probe (not a test): several DietCode micro-kernels on one GEMM, timed against each other in turns.

For a question of the space rather than of the schedule: would a kernel the space does not hold (say a register
tile one vector wide, whose columns pad to 8 lanes instead of 16) serve some T better than the kernel deployed
there? Each kernel is built with the shipped schedule (any valid key, in the space or not), checked against numpy
at every T, and timed in alternating rounds with the others (a slow minute hits all), framed by the noise gate.
``--static-log`` adds the knob template's per-shape best at each probed T that a per-shape tuning log holds
(``static_scores.jsonl`` of a ``benchmarks.dietcode`` run), timed in the same turns: what a shape-generic kernel
gives up against one built for its T; ``--specialise`` adds each kernel compiled with T bound to the probed T
(``<key>@T``: the same schedule with constant extents), which separates what the symbolic extent costs from the
rest of that difference; ``--aligned`` adds each kernel's aligned version (``<key>@align``: compiled once for
every T that is a multiple of its ``alignment``, which leaves the T axis it pads most unpadded) at the probed T it
serves, which is what a deployed module runs there. Run alone on the machine::

    python -m benchmarks.dietcode.kernel_probe --workload scores --kernels cpu:6x64x4/6x16/column \\
        cpu:24x8x4/12x8/column --out benchmarks/results/dietcode/kernel_probe
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import tvm

import adatune  # noqa: F401 - sizes TVM's thread pool to the physical cores before it starts
from adatune import records
from adatune import target as _target
from adatune.dietcode import DynamicWorkload, MicroKernel, schedule_microkernel
from adatune.dietcode._schedule import _schedule_cpu, alignment
from adatune.target import size_tvm_thread_pool

from .._common import write_summary
from ..noise_gate import NoiseGate
from .pad_extent_probe import DEFAULT_CASES
from .pad_probe import open_gate, probe_header, probe_workload, time_variants, write_probe_data

WORKLOADS = {name: (kind, dims) for name, kind, dims, _ in DEFAULT_CASES}


def main(argv: list[str] | None = None) -> int:
    size_tvm_thread_pool()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="scores")
    p.add_argument("--kernels", nargs="+", required=True, help="micro-kernel keys, e.g. cpu:24x8x4/12x8/column")
    p.add_argument("--t", nargs="+", type=int, default=[48, 49, 56, 64, 65, 68, 72, 80, 81, 88, 96, 100, 112, 128])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument(
        "--static-log",
        default=None,
        help="a per-shape tuning log of the knob template (benchmarks.dietcode's static_<workload>.jsonl): its best "
        "config at each probed T it holds is timed in the same turns, as `static`",
    )
    p.add_argument("--specialise", action="store_true", help="also time each kernel compiled for the probed T alone")
    p.add_argument(
        "--aligned", action="store_true", help="also time each kernel's aligned version at the probed T it serves"
    )
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    tgt = _target.host()
    kind, dims = WORKLOADS[args.workload]
    wl = probe_workload(args.workload, kind, dims, tgt)
    libs = {}
    for key in args.kernels:
        with tgt:
            libs[key] = tvm.compile(schedule_microkernel(wl, MicroKernel.from_key(key)).mod, target=tgt)
    aligned = {}  # key@align -> (its alignment, the version compiled for T a multiple of it)
    for key in args.kernels if args.aligned else []:
        u = alignment(wl, MicroKernel.from_key(key))
        if u > 1 and any(t % u == 0 for t in args.t):
            with tgt:
                lib = tvm.compile(schedule_microkernel(wl, MicroKernel.from_key(key), u).mod, target=tgt)
            aligned[f"{key}@align"] = (u, lib)
    rng = np.random.default_rng(0)
    statics = static_bests(args.static_log, kind, tgt, args.t) if args.static_log else {}  # built before the gate
    bound = (
        {t: {f"{key}@T": specialised(wl, key, t, tgt) for key in args.kernels} for t in args.t}
        if args.specialise
        else {}
    )
    gate, load_before, started = open_gate()
    rows = []
    for t in args.t:
        static = {"static": statics[t]} if t in statics else {}
        fixed = bound.get(t, {})
        serving = libs | {v: lib for v, (u, lib) in aligned.items() if t % u == 0}
        med = time_variants(wl, serving, t, rng, args.rounds, args.workload, static, fixed)
        best = min(med, key=lambda k: med[k])
        rows.append({"T": t} | {f"{k}_us": v * 1e6 for k, v in med.items()} | {"fastest": best})
        print(f"T={t:>3}: " + ", ".join(f"{k} {v * 1e6:8.1f} us" for k, v in med.items()) + f"; fastest {best}")
    gate.probe("after")
    print(gate.sentence())
    if args.out:
        _write(args.out, rows, args.kernels, gate, load_before, started, argv)
    return 0


def specialised(wl: DynamicWorkload, key: str, t: int, tgt: Any) -> Any:
    """Micro-kernel ``key`` scheduled as shipped on the workload with ``T`` bound to ``t`` (constant extents)."""
    func = wl.prim_func(packed=False)
    sch = tvm.s_tir.Schedule(func.specialize({func.params[3]: t}))
    _schedule_cpu(sch, wl, MicroKernel.from_key(key))
    with tgt:
        return tvm.compile(sch.mod, target=tgt)


def static_bests(log: str, kind: str, tgt: Any, ts: list[int]) -> dict[int, Any]:
    """T -> the knob template's best config in ``log`` built for that T (the per-shape arm's kernel), for the T in
    ``ts`` only."""
    out = {}
    for rec in records.pick_best(records.load_from_file(log)).values():
        t = int(rec.args[0] if kind == "dense" else rec.args[1])  # dense (T, K, N); batch_matmul (H, T, ...)
        if t in ts:
            out[t] = tvm.tirx.build(rec.create_task().scheduled_module(rec.input.config), tgt)
    return out


def _write(
    out: str, rows: list[dict], kernels: list[str], gate: NoiseGate, load_before: list[float], started: str, argv: Any
) -> None:
    meta = write_probe_data(out, "benchmarks.dietcode.kernel_probe", rows, gate, load_before, started, argv)
    title = "DietCode micro-kernels on one GEMM, timed in turns"
    lines = probe_header(title, meta, started, load_before, gate, "kernel (µs per call)")
    extra = [f"{k}@align" for k in kernels] + [f"{k}@T" for k in kernels] + ["static"]  # aligned, per-T builds
    columns = kernels + [k for k in extra if any(f"{k}_us" in r for r in rows)]
    lines += [
        "| T | " + " | ".join(f"`{k}`" for k in columns) + " | fastest |",
        "|---:|" + "---:|" * len(columns) + "---|",
    ]
    for r in rows:
        cells = [f"{r[f'{k}_us']:.1f}" if f"{k}_us" in r else "-" for k in columns]
        lines.append(f"| {r['T']} | " + " | ".join(cells) + f" | `{r['fastest']}` |")
    write_summary(out, lines)


if __name__ == "__main__":
    raise SystemExit(main())
