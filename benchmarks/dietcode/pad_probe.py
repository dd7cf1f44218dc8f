"""A/B probe (not a test): where a DietCode micro-kernel makes the padded copy of A.

With T symbolic every x86 micro-kernel pads A's rows to a multiple of its tile height (``pad_einsum``). The
copy was placed inside each parallel tile, so it was made again for every column tile: N / nt times per call,
element by element behind a guard (FFN2 at T = 128 with 96-wide tiles: 8 copies of a 1.5 MB operand), and the
output went through a padded tile and a guarded copy. ``tile`` is that earlier schedule, ``a-once`` makes A's copy
once per call (rows in parallel, before the GEMM), ``direct`` writes the accumulators' real rows straight to C,
``a-once+direct`` does both, ``crop-once`` (bmm_nt, whose T x T output is padded on both axes) crops the padded
output into C once per call instead of in every tile; each row names the variant ``schedule_microkernel`` now
ships. Each kernel is timed
every way at each T in alternating rounds (a slow minute hits all), framed by the noise gate; dense weights
pre-packed as a model ships them. Run alone on the machine::

    python -m benchmarks.dietcode.pad_probe --out benchmarks/results/dietcode/pad_probe
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import shlex
import statistics
import sys
import time
from typing import Any

import numpy as np
import tvm

import adatune  # noqa: F401 - sizes TVM's thread pool to the physical cores before it starts
from adatune import target as _target
from adatune.dietcode import DynamicWorkload, MicroKernel, weight_panel
from adatune.dietcode._schedule import _schedule_cpu, pad_places
from adatune.target import describe_host, one_blas_thread, size_tvm_thread_pool, tvm_main_thread

from .._common import load_now, write_csv, write_summary
from ..noise_gate import NoiseGate, interleaved

# variant -> (where A's padded copy is made, where the output is cropped): adatune.dietcode._schedule's places
VARIANTS: dict[str, tuple[str, str]] = {
    "tile": ("tile", "tile"),  # the earlier schedule
    "a-once": ("call", "tile"),
    "direct": ("tile", "direct"),
    "a-once+direct": ("call", "direct"),
    "crop-once": ("tile", "call"),  # bmm_nt: the padded T x T output cropped once per call, not per tile
    "crop-once-serial": ("tile", "call-serial"),  # the same on one thread (no second parallel launch)
}
# (kind, dims, kernels): BERT-base's dense GEMMs and attention GEMMs, with tiles of the shipped x86 space
DEFAULT_CASES: list[tuple[str, tuple[int, int], list[str]]] = [
    ("dense", (768, 2304), ["cpu:64x96x4/8x32", "cpu:32x64x4/4x64"]),
    ("dense", (3072, 768), ["cpu:64x96x4/8x32", "cpu:32x64x4/4x64"]),
    ("dense", (768, 3072), ["cpu:64x96x4/8x32", "cpu:16x32x8/8x16"]),
    (
        "bmm_nt",
        (12, 64),
        [
            "cpu:32x32x4/8x16",
            "cpu:64x32x8/4x16",
            "cpu:40x16x8/5x16",
            "cpu:2x4x4/2x4",
            "cpu:12x16x4/6x16",
            "cpu:96x32x4/6x16/column",
        ],
    ),
    ("bmm_nn", (12, 64), ["cpu:32x64x4/8x32"]),
]


def variants_of(wl: DynamicWorkload) -> list[str]:
    """The variants a workload can take: bmm_nt pads its columns too, so its output is cropped (per tile or once
    per call), never written directly; the once-per-call crop is probed on bmm_nt only."""
    if wl.kind == "bmm_nt":
        return [v for v, (_, crop) in VARIANTS.items() if crop != "direct"]
    return [v for v, (_, crop) in VARIANTS.items() if not crop.startswith("call")]


def shipped_variant(wl: DynamicWorkload, mk: MicroKernel) -> str:
    """The variant ``schedule_microkernel`` makes for ``mk`` on ``wl``."""
    places = pad_places(wl, mk)
    return next(v for v in variants_of(wl) if VARIANTS[v] == places)


def probe_workload(name: str, kind: str, dims: tuple[int, int], tgt: Any) -> DynamicWorkload:
    """The workload a probe times: dense weights pre-packed in the target's panels, as a model ships them."""
    wl = DynamicWorkload(name, kind, dims)
    if kind == "dense":
        wl = dataclasses.replace(wl, b_panel=weight_panel(tgt, wl.dtype, dims[1]))
    return wl


def time_variants(
    wl: DynamicWorkload,
    libs: dict[str, Any],
    t: int,
    rng: np.random.Generator,
    rounds: int,
    label: str,
    static_libs: dict[str, Any] | None = None,
    fixed_libs: dict[str, Any] | None = None,
) -> dict[str, float]:
    """Median seconds of each compiled variant at ``T = t``, each checked against numpy first, timed in
    alternating rounds (one ``time_evaluator`` reading of >= 30 ms per variant per round). Built for this T alone,
    timed in the same turns: ``static_libs`` (a knob template's, called ``(A, B, C)`` with B as ``[K, N]``) and
    ``fixed_libs`` (micro-kernels with T bound, called ``(A, B, C)`` with B as the kernels take it)."""
    dev = tvm.cpu(0)
    a, b = wl.random_inputs(t, rng)
    with one_blas_thread():
        want = wl.reference(a, b)
    c = tvm.runtime.tensor(np.zeros(wl.shapes(t)[2], wl.dtype), dev)
    call = [tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c, t]  # b comes packed (b_panel)
    plain = [call[0], tvm.runtime.tensor(wl.unpack_b(b), dev), c] if static_libs else []  # the template's B: [K, N]
    timers = {}
    runs = (
        [(v, lib, call) for v, lib in libs.items()]
        + [(v, lib, call[:3]) for v, lib in (fixed_libs or {}).items()]
        + [(v, lib, plain) for v, lib in (static_libs or {}).items()]
    )
    for v, lib, args in runs:
        c.copyfrom(np.full(wl.shapes(t)[2], np.nan, wl.dtype))  # a variant that wrote nothing must not pass
        lib["main"](*args)
        np.testing.assert_allclose(c.numpy(), want, rtol=1e-3, atol=1e-3, err_msg=f"{label} {v} T={t}")
        module = getattr(lib, "mod", lib)  # tvm.compile's Executable, or a runtime module
        f = module.time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=30)
        timers[v] = functools.partial(_placed, f, args)
    return {v: statistics.median(x) for v, x in interleaved(timers, rounds).items()}


def _placed(evaluator: Any, args: list[Any]) -> float:
    """One reading with the caller off TVM's worker CPU (``adatune.target.tvm_main_thread``)."""
    with tvm_main_thread():
        return float(evaluator(*args).mean)


def open_gate() -> tuple[NoiseGate, list[float], str]:
    """A probe's start: its noise gate with the first reading taken, the load before and the start time."""
    load_before, started = load_now(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    gate = NoiseGate()
    gate.probe("before")
    return gate, load_before, started


def probe_meta(prog: str, argv: Any, started: str, load_before: list[float], gate: NoiseGate) -> dict[str, Any]:
    """A probe's results.json ``meta``: the command that reproduces it, the host, the load and the noise gate."""
    return {
        "command": f"python -m {prog} " + shlex.join(sys.argv[1:] if argv is None else argv),
        "host": describe_host(),
        "started": started,
        "load_before": load_before,
        "load_after": load_now(),
        "noise_gate": gate.to_json(),
    }


def write_probe_data(
    out: str,
    prog: str,
    rows: list[dict],
    gate: NoiseGate,
    load_before: list[float],
    started: str,
    argv: Any,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A probe's rows as ``<name>.csv`` and ``results.json`` (``meta``, ``rows`` and ``extra``) under ``out``, the
    CSV named after the probe's module; returns the meta, whose command and host each summary's header quotes."""
    os.makedirs(out, exist_ok=True)
    write_csv(os.path.join(out, prog.rsplit(".", 1)[-1] + ".csv"), rows)
    meta = probe_meta(prog, argv, started, load_before, gate)
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "rows": rows} | (extra or {}), f, indent=1)
    return meta


def probe_header(
    title: str, meta: dict[str, Any], started: str, load_before: list[float], gate: NoiseGate, each: str
) -> list[str]:
    """A probe summary's first lines: title, command, host and load, how a cell was timed (``each``: what one
    reading times) and the noise gate's verdict."""
    host = meta["host"]
    return [
        f"# {title}",
        "",
        f"Command: `{meta['command']}`  ",
        f"Host: {host['model']} ({host['isa']}, {host['cores']} cores); started {started}; 1-minute load "
        f"{load_before[0]:.2f} before, {meta['load_after'][0]:.2f} after. Each cell: median of alternating rounds, "
        f"each round one `time_evaluator` reading (>= 30 ms) of each {each}.",
        "",
        gate.sentence(),
        "",
    ]


def build(wl: DynamicWorkload, mk: MicroKernel, variant: str, tgt: Any) -> Any:
    """The variant's compiled library."""
    sch = tvm.s_tir.Schedule(wl.prim_func(packed=False))
    a_pad, crop = VARIANTS[variant]
    _schedule_cpu(sch, wl, mk, a_pad=a_pad, crop=crop)
    with tgt:
        return tvm.compile(sch.mod, target=tgt)


def main(argv: list[str] | None = None) -> int:
    size_tvm_thread_pool()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--t", nargs="+", type=int, default=[8, 33, 64, 100, 128])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--kinds", nargs="+", default=None, help="GEMM kinds to probe (default: all)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    tgt = _target.host()
    rng = np.random.default_rng(0)
    gate, load_before, started = open_gate()
    rows = []
    for kind, dims, keys in DEFAULT_CASES:
        if args.kinds and kind not in args.kinds:
            continue
        wl = probe_workload(f"{kind}_{dims[0]}x{dims[1]}", kind, dims, tgt)
        for key in keys:
            mk = MicroKernel.from_key(key)
            libs = {v: build(wl, mk, v, tgt) for v in variants_of(wl)}
            shipped = shipped_variant(wl, mk)
            for t in args.t:
                med = time_variants(wl, libs, t, rng, args.rounds, key)
                row = {"workload": wl.name, "kernel": key, "T": t, "shipped": shipped}
                row |= {f"{v}_ms": med[v] * 1e3 for v in libs} | {"old_over_shipped": med["tile"] / med[shipped]}
                rows.append(row)
                print(
                    f"{wl.name:>16} {key:20s} T={t:>3}: "
                    + ", ".join(f"{v} {med[v] * 1e3:8.4f} ms" for v in libs)
                    + f", old/shipped ({shipped}) {row['old_over_shipped']:.3f}",
                    flush=True,
                )
    gate.probe("after")
    print(gate.sentence())
    if args.out:
        _write(args.out, rows, gate, load_before, started, argv)
    return 0


def _write(out: str, rows: list[dict], gate: NoiseGate, load_before: list[float], started: str, argv: Any) -> None:
    ratios = [r["old_over_shipped"] for r in rows]
    geo = float(np.exp(np.mean(np.log(ratios))))
    extra = {"geomean_old_over_shipped": geo}
    meta = write_probe_data(out, "benchmarks.dietcode.pad_probe", rows, gate, load_before, started, argv, extra)
    title = "Where a DietCode micro-kernel pads A: in every tile, or once per call"
    lines = probe_header(title, meta, started, load_before, gate, "variant") + [
        "Variants (where A's padded copy is made / where the output is cropped): `tile` (in every tile / from a "
        "padded tile: the earlier schedule), `a-once` (once per call / tile), `direct` (tile / the accumulators "
        "write the real rows straight to C), `a-once+direct` (both), `crop-once` (bmm_nt only: the padded output "
        "cropped into C once per call, rows in parallel). `shipped`: what `schedule_microkernel` now makes for "
        "that GEMM kind; bmm_nt pads its columns too, so its output is never written directly.",
        "",
        "| workload | kernel | T | " + " | ".join(f"{v} (ms)" for v in VARIANTS) + " | shipped | old / shipped |",
        "|---|---|---:|" + "---:|" * len(VARIANTS) + "---|---:|",
    ]
    for r in rows:
        cells = " | ".join(f"{r[f'{v}_ms']:.4f}" if f"{v}_ms" in r else "-" for v in VARIANTS)
        lines.append(
            f"| {r['workload']} | `{r['kernel']}` | {r['T']} | {cells} | {r['shipped']} | {r['old_over_shipped']:.3f} |"
        )
    lines += [
        "",
        f"Geomean old / shipped over the {len(rows)} cells: {geo:.3f} (> 1: the shipped schedule is faster); "
        f"faster in {sum(x > 1 for x in ratios)} of {len(ratios)} cells.",
        "",
    ]
    write_summary(out, lines)


if __name__ == "__main__":
    raise SystemExit(main())
