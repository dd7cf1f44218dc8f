"""A/B probe (not a test): bmm NT kernels whose last columns run a narrower register tile, against the shipped ones.

An x86 micro-kernel pads a T axis to its register tile: on the attention scores GEMM (``[B, T, D] x [B, T, D]^T``,
both output axes T) an 8 x 32 tile computes 72 x 96 outputs at T = 70. The lever the last closing notes named was
a kernel whose body runs the ``mr x nr`` register tile over the columns up to the last multiple of ``nr`` and whose
last columns run an ``mr x w`` tile (``w`` one vector or half of one), padded to ``w`` only: 72 x 72 at T = 70.
This probe builds that kernel outside the library, as a TVMScript program with two GEMM blocks (body and tail),
each with its own accumulators in registers and its own padded copy of A, B packed once per call in ``w``-wide
panels and the two padded outputs cropped into C once per call, rows in parallel; and times it, interleaved with
the shipped kernels and PyTorch, with the gate's probe read around every measurement (``benchmarks/host_state.py``).
Run alone on the machine::

    python -m benchmarks.dietcode.tail_probe --out benchmarks/results/dietcode/zen4_tail_probe
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
from typing import Any

import numpy as np
import torch
import tvm
from tvm.script import tirx as T

import adatune  # noqa: F401 - sizes TVM's thread pool to the physical cores before it starts
from adatune import target as _target
from adatune.dietcode import MicroKernel, schedule_microkernel
from adatune.reference import time_callable
from adatune.target import cpu_info, size_tvm_thread_pool

from .._common import write_csv, write_summary
from ..host_state import HostStates, interleaved_with_state, state_probe
from .pad_probe import _placed, open_gate, probe_meta, probe_workload

BODIES = ["cpu:128x128x4/8x32/unroll64", "cpu:112x128x4/14x32/unroll64"]
SHIPPED = [
    "cpu:128x128x4/8x32/column/crop-tile/unroll64",
    "cpu:108x48x2/27x8/column/unroll64",
    "cpu:108x64x4/27x16/column/unroll64",
    "cpu:52x32x8/13x8/column/unroll64",
]
#: T between multiples of the register tiles, where the scores kernels fell below 0.9x PyTorch in the 2026-11-27 run
DEFAULT_T = [33, 36, 40, 52, 65, 66, 70, 73, 98, 100]


def tail_func(heads: int, depth: int, mr: int, nr: int, tail: int) -> tvm.tirx.PrimFunc:
    """``C[n] = A[n] @ B[n]^T`` for symbolic ``t``: rows padded to ``mr``, columns to ``tail``; block ``C_body``
    computes the columns up to the last multiple of ``nr`` of the padded extent, ``C_tail`` the rest (under ``nr``),
    as ``[n, v, i, lane]`` with ``tail`` lanes per vector ``v``, so its register tile has a constant width."""

    def rows(t: Any) -> Any:  # TVMScript calls these at parse time (a name bound inside the function would be a Let)
        return (t + mr - 1) // mr * mr

    def cols(t: Any) -> Any:
        return (t + tail - 1) // tail * tail

    def body(t: Any) -> Any:
        return cols(t) // nr * nr

    @T.prim_func(s_tir=True)
    def func(a: T.handle, b: T.handle, c: T.handle, t: T.int32):
        T.func_attr({"tirx.noalias": True})  # without it LLVM kept the accumulators in memory (2x slower)
        A = T.match_buffer(a, (heads, t, depth), "float32")
        B = T.match_buffer(b, (heads, t, depth), "float32")
        C = T.match_buffer(c, (heads, t, t), "float32")
        with T.sblock("root"):
            A_pad = T.sblock_alloc_buffer((heads, rows(t), depth), "float32")
            A_padt = T.sblock_alloc_buffer((heads, rows(t), depth), "float32")
            B_pad = T.sblock_alloc_buffer((heads, cols(t), depth), "float32")
            C_body = T.sblock_alloc_buffer((heads, rows(t), body(t)), "float32")
            C_tail = T.sblock_alloc_buffer((heads, cols(t) % nr // tail, rows(t), tail), "float32")
            for n, i, k in T.grid(heads, rows(t), depth):
                with T.sblock("A_pad"):
                    vn, vi, vk = T.axis.remap("SSS", [n, i, k])
                    A_pad[vn, vi, vk] = T.if_then_else(vi < t, A[vn, vi, vk], T.float32(0))
            for n, i, k in T.grid(heads, rows(t), depth):
                with T.sblock("A_padt"):
                    vn, vi, vk = T.axis.remap("SSS", [n, i, k])
                    A_padt[vn, vi, vk] = T.if_then_else(vi < t, A[vn, vi, vk], T.float32(0))
            for n, j, k in T.grid(heads, cols(t), depth):
                with T.sblock("B_pad"):
                    vn, vj, vk = T.axis.remap("SSS", [n, j, k])
                    B_pad[vn, vj, vk] = T.if_then_else(vj < t, B[vn, vj, vk], T.float32(0))
            for n, i, j, k in T.grid(heads, rows(t), body(t), depth):
                with T.sblock("C_body"):
                    vn, vi, vj, vk = T.axis.remap("SSSR", [n, i, j, k])
                    with T.init():
                        C_body[vn, vi, vj] = T.float32(0)
                    C_body[vn, vi, vj] = C_body[vn, vi, vj] + A_pad[vn, vi, vk] * B_pad[vn, vj, vk]
            for n, v, i, j, k in T.grid(heads, cols(t) % nr // tail, rows(t), tail, depth):
                with T.sblock("C_tail"):
                    vn, vv, vi, vj, vk = T.axis.remap("SSSSR", [n, v, i, j, k])
                    with T.init():
                        C_tail[vn, vv, vi, vj] = T.float32(0)
                    C_tail[vn, vv, vi, vj] = (
                        C_tail[vn, vv, vi, vj] + A_padt[vn, vi, vk] * B_pad[vn, body(t) + vv * tail + vj, vk]
                    )
            for n, i, j in T.grid(heads, t, T.min(body(t), t)):
                with T.sblock("C_crop_body"):
                    vn, vi, vj = T.axis.remap("SSS", [n, i, j])
                    C[vn, vi, vj] = C_body[vn, vi, vj]
            for n, i, j in T.grid(heads, t, t - T.min(body(t), t)):
                with T.sblock("C_crop_tail"):
                    vn, vi, vj = T.axis.remap("SSS", [n, i, j])
                    C[vn, vi, body(t) + vj] = C_tail[vn, vj // tail, vi, vj % tail]

    return func


def tail_schedule(heads: int, depth: int, body: MicroKernel, tail: int) -> tvm.s_tir.Schedule:
    """``tail_func`` scheduled as the shipped x86 kernels are: tiles of ``body.mt x body.nt``, ``body.mr x body.nr``
    accumulators (``body.mr x tail`` in the tail) kept in registers over the ``kt``-unrolled reduction, tiles in
    parallel, A's padded copy made in each row tile."""
    mt, nt, kt, mr, nr = body.mt, body.nt, body.kt, body.mr, body.nr
    if nr % tail:
        raise ValueError(f"a tail of {tail} lanes must divide the body's register tile ({body})")
    sch = tvm.s_tir.Schedule(tail_func(heads, depth, mr, nr, tail))
    pack = sch.get_sblock("B_pad")  # k-major panels of ``tail`` columns: a body tile reads nr / tail of them
    sch.transform_layout(pack, ("write", 0), lambda n, jj, kk: (n, jj // tail, kk, jj % tail))
    sch.parallel(sch.fuse(*sch.get_loops(pack)[:2]))
    blk = sch.get_sblock("C_body")
    n, i, j, k = sch.get_loops(blk)
    regs, iii = sch.split(i, [None, mr])
    io, iio = sch.split(regs, [None, mt // mr])
    regs, jii = sch.split(j, [None, nr])
    jo, jio = sch.split(regs, [None, nt // nr])
    ko, ki = sch.split(k, [None, kt])
    sch.reorder(n, io, jo, jio, iio, ko, ki, iii, jii)
    acc = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(acc, iio)
    sch.compute_at(sch.get_sblock("A_pad"), jo)
    sch.parallel(sch.fuse(n, io, jo))
    sch.unroll(iii)
    sch.unroll(ki)
    for loop in (jii, sch.get_loops(acc)[-1]):  # one contiguous vector from each panel per k step
        panels, lanes = sch.split(loop, [None, tail])
        sch.unroll(panels)
        sch.vectorize(lanes)
    sch.decompose_reduction(blk, ko)
    blk = sch.get_sblock("C_tail")
    n, v, i, j, k = sch.get_loops(blk)
    regs, iii = sch.split(i, [None, mr])
    io, iio = sch.split(regs, [None, mt // mr])
    ko, ki = sch.split(k, [None, kt])
    sch.reorder(n, io, v, iio, ko, ki, iii, j)
    acc = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(acc, iio)
    sch.compute_at(sch.get_sblock("A_padt"), io)
    sch.parallel(sch.fuse(n, io))
    sch.unroll(iii)
    sch.unroll(ki)
    sch.vectorize(j)
    sch.vectorize(sch.get_loops(acc)[-1])
    sch.decompose_reduction(blk, ko)
    for crop in ("C_crop_body", "C_crop_tail"):
        sch.parallel(sch.fuse(*sch.get_loops(sch.get_sblock(crop))[:-1]))
    if body.unroll:
        root = sch.get_sblock("root")
        sch.annotate(root, "pragma_auto_unroll_max_step", body.unroll)
        sch.annotate(root, "pragma_unroll_explicit", 1)
    return sch


def tail_widths(tgt: Any) -> list[int]:
    """One vector of the target's fp32 lanes and half of one (where that is at least 8 lanes)."""
    lanes = cpu_info(tgt).lanes("float32")
    return sorted({lanes} | ({lanes // 2} if lanes // 2 >= 8 else set()))


def _torch_timer(a: np.ndarray, b: np.ndarray) -> Any:
    ta, tb = torch.from_numpy(a), torch.from_numpy(b).transpose(-1, -2)

    def read() -> float:
        with torch.inference_mode():
            return time_callable(functools.partial(torch.matmul, ta, tb), repeats=30, warmup_s=0.02)

    return read


def main(argv: list[str] | None = None) -> int:
    size_tvm_thread_pool()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bodies", nargs="+", default=BODIES, help="micro-kernel keys whose tiles the tail kernels use")
    p.add_argument("--kernels", nargs="+", default=SHIPPED, help="shipped micro-kernel keys timed beside them")
    p.add_argument("--t", nargs="+", type=int, default=DEFAULT_T)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--threads", type=int, default=2, help="PyTorch's intra-op threads (TVM runs on the target's)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    tgt = _target.host()
    wl = probe_workload("scores", "bmm_nt", (12, 64), tgt)
    heads, depth = wl.dims
    libs: dict[str, Any] = {}
    with tgt:
        for key in args.bodies:
            for w in tail_widths(tgt):
                sch = tail_schedule(heads, depth, MicroKernel.from_key(key), w)
                libs[f"{key}+tail{w}"] = tvm.compile(sch.mod, target=tgt)
        for key in args.kernels:
            libs[key] = tvm.compile(schedule_microkernel(wl, MicroKernel.from_key(key)).mod, target=tgt)
    gate, load_before, started = open_gate()
    probe = state_probe(timer=gate.compute_timer)  # the gate's probe kernel, built once
    rng = np.random.default_rng(0)
    rows, states_json = [], {}
    for t in args.t:
        a, b = wl.random_inputs(t, rng)
        want = wl.reference(a, b)
        dev = tvm.cpu(0)
        c = tvm.runtime.tensor(np.zeros(wl.shapes(t)[2], wl.dtype), dev)
        call = [tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c, t]
        timers = {"torch": _torch_timer(a, b)}
        for name, lib in libs.items():
            c.copyfrom(np.full(wl.shapes(t)[2], np.nan, wl.dtype))  # a kernel that wrote nothing must not pass
            lib["main"](*call)
            np.testing.assert_allclose(c.numpy(), want, rtol=1e-3, atol=1e-3, err_msg=f"{name} T={t}")
            ev = getattr(lib, "mod", lib).time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=30)
            timers[name] = functools.partial(_placed, ev, call)
        times, probes, orders = interleaved_with_state(timers, args.rounds, probe)
        states = HostStates(probes, orders)
        states_json[t] = states.to_json()
        row: dict[str, Any] = {"T": t}
        row.update({f"{name}_us": statistics.median(secs) * 1e6 for name, secs in times.items()})
        for name in libs:  # PyTorch's time over the kernel's, round by round, over all rounds and fast ones
            ratios = [a / b for a, b in zip(times["torch"], times[name])]
            row[f"{name}_vs_torch"] = statistics.median(ratios)
            fast = states.rounds_in("fast", [name, "torch"])
            if fast:
                row[f"{name}_vs_torch_fast"] = statistics.median(ratios[r] for r in fast)
                row[f"{name}_fast_rounds"] = len(fast)
        rows.append(row)
        best = max((n for n in libs), key=lambda n: row[f"{n}_vs_torch"])
        print(f"T={t:>3}: torch {row['torch_us']:.1f} us; best {best} {row[f'{best}_vs_torch']:.2f}x", flush=True)
    gate.probe("after")
    print(gate.sentence())
    if args.out:
        _write(args.out, rows, list(libs), gate, load_before, started, argv, states_json)
    return 0


def _write(
    out: str,
    rows: list[dict],
    names: list[str],
    gate: Any,
    load_before: list[float],
    started: str,
    argv: Any,
    states: dict[int, Any],
) -> None:
    os.makedirs(out, exist_ok=True)
    write_csv(os.path.join(out, "tail_probe.csv"), rows)
    meta = probe_meta("benchmarks.dietcode.tail_probe", argv, started, load_before, gate)
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "rows": rows, "host_states": states}, f, indent=1)
    host = meta["host"]
    tails = [n for n in names if "+tail" in n]
    shipped = [n for n in names if "+tail" not in n]

    def best(row: dict, group: list[str], suffix: str) -> tuple[str, float]:
        have = [n for n in group if f"{n}{suffix}" in row]
        if not have:
            return "-", float("nan")
        n = max(have, key=lambda k: row[f"{k}{suffix}"])
        return n, row[f"{n}{suffix}"]

    lines = [
        "# bmm NT kernels with a narrower register tile on their last columns, against the shipped kernels",
        "",
        f"Command: `{meta['command']}`  ",
        f"Host: {host['model']} ({host['isa']}, {host['cores']} cores); started {started}; 1-minute load "
        f"{load_before[0]:.2f} before, {meta['load_after'][0]:.2f} after. Each kernel and PyTorch timed in "
        "alternating rounds (one reading of >= 30 ms each per round), the gate's probe read before every reading "
        "and after each round; "
        "a ratio is the median over rounds of PyTorch's time over the kernel's in the same round, and in the fast "
        "state over the rounds where the probe readings around both were fast. Every kernel was checked against "
        "numpy at every T first.",
        "",
        gate.sentence(),
        "",
        "| T | PyTorch (us) | best tail kernel | its speed vs PyTorch (fast state) | best shipped kernel "
        "| its speed vs PyTorch (fast state) | tail / shipped |",
        "|---:|---:|---|---:|---|---:|---:|",
    ]
    gains = []
    for r in rows:
        tn, tv = best(r, tails, "_vs_torch")
        sn, sv = best(r, shipped, "_vs_torch")
        tf = r.get(f"{tn}_vs_torch_fast")
        sf = r.get(f"{sn}_vs_torch_fast")
        gains.append(tv / sv)
        lines.append(
            f"| {r['T']} | {r['torch_us']:.1f} | `{tn}` | {tv:.2f}x"
            + (f" ({tf:.2f}x)" if tf else "")
            + f" | `{sn}` | {sv:.2f}x"
            + (f" ({sf:.2f}x)" if sf else "")
            + f" | {tv / sv:.2f} |"
        )
    lines += [
        "",
        f"Best tail kernel over best shipped kernel, per T: geomean {float(np.exp(np.mean(np.log(gains)))):.3f}, "
        f"range {min(gains):.2f}-{max(gains):.2f}. Per-kernel times and ratios: `tail_probe.csv`.",
    ]
    write_summary(out, lines)


if __name__ == "__main__":
    raise SystemExit(main())
