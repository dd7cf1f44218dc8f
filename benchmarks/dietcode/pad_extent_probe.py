"""A/B probe (not a test): what a DietCode micro-kernel pads a T axis to, its tile or its register tile.

DietCode's local padding rounds T up to a multiple of the micro-kernel's tile: a 24 x 48 tile serves T = 49 with a
72 x 96 output (2.9x the real work) and a 16 x 128 tile serves T = 49 with 64 x 128. On x86 the schedule now
pads a T axis only to the register tile (``mr`` rows, ``nr`` columns); the last, part-full tile runs just the
register tiles that hold real rows or columns, behind a guard per register tile outside the vector loops
(``adatune.dietcode._schedule.padding_units``). ``tile`` is the earlier padding, ``register`` the shipped one;
both are the same schedule otherwise, timed in alternating rounds (a slow minute hits both), framed by the noise
gate, dense weights pre-packed as a model ships them. T are taken at and between tile multiples, so the cost of
the guards (where padding to the tile wastes nothing) shows beside the saving. Run alone on the machine::

    python -m benchmarks.dietcode.pad_extent_probe --out benchmarks/results/dietcode/pad_extent_probe
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import tvm  # noqa: E402

import adatune  # noqa: F401, E402 - sizes TVM's thread pool to the physical cores before it starts
from adatune import target as _target  # noqa: E402
from adatune.dietcode import DynamicWorkload, MicroKernel  # noqa: E402
from adatune.dietcode._schedule import PAD_TO, _schedule_cpu  # noqa: E402
from adatune.target import size_tvm_thread_pool  # noqa: E402

from .._common import (
    write_summary,
)
from ..noise_gate import NoiseGate  # noqa: E402
from .pad_probe import open_gate, probe_header, probe_workload, time_variants, write_probe_data  # noqa: E402

# (name, kind, dims, kernels): BERT-base's GEMMs with kernels the Zen 3 runs deployed (results/dietcode)
DEFAULT_CASES: list[tuple[str, str, tuple[int, int], list[str]]] = [
    (
        "scores",
        "bmm_nt",
        (12, 64),
        ["cpu:24x48x4/6x16/column", "cpu:80x64x4/5x16/column", "cpu:16x128x4/2x32", "cpu:12x16x1/6x16/column"],
    ),
    ("context", "bmm_nn", (12, 64), ["cpu:40x64x2/5x16", "cpu:80x64x2/5x16"]),
    ("qkv", "dense", (768, 2304), ["cpu:48x16x8/6x16", "cpu:40x16x4/5x16"]),
    ("ffn2", "dense", (3072, 768), ["cpu:24x16x8/6x16"]),
]


def build(wl: DynamicWorkload, mk: MicroKernel, pad_to: str, tgt: Any) -> Any:
    """``mk`` on ``wl`` with its T axes padded to ``pad_to`` (``PAD_TO``), compiled."""
    sch = tvm.s_tir.Schedule(wl.prim_func(packed=False))
    _schedule_cpu(sch, wl, mk, pad_to=pad_to)
    with tgt:
        return tvm.compile(sch.mod, target=tgt)


def main(argv: list[str] | None = None) -> int:
    size_tvm_thread_pool()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--t", nargs="+", type=int, default=[16, 25, 48, 49, 66, 80, 96, 100, 128])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--workloads", nargs="+", default=None, help="case names to probe (default: all)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    tgt = _target.host()
    rng = np.random.default_rng(0)
    gate, load_before, started = open_gate()
    rows = []
    for name, kind, dims, keys in DEFAULT_CASES:
        if args.workloads and name not in args.workloads:
            continue
        wl = probe_workload(name, kind, dims, tgt)
        for key in keys:
            mk = MicroKernel.from_key(key)
            libs = {v: build(wl, mk, v, tgt) for v in PAD_TO}
            for t in args.t:
                med = time_variants(wl, libs, t, rng, args.rounds, key)
                _, m, n, k = wl.gemm_extents(t)
                at_multiple = m % mk.mt == 0 and n % mk.nt == 0 and k % mk.kt == 0
                row = {"workload": name, "kernel": key, "T": t, "tile_multiple": at_multiple}
                row |= {f"{v}_ms": med[v] * 1e3 for v in PAD_TO} | {"tile_over_register": med["tile"] / med["register"]}
                rows.append(row)
                print(
                    f"{name:>8} {key:26s} T={t:>3}: tile {med['tile'] * 1e3:8.4f} ms, register "
                    f"{med['register'] * 1e3:8.4f} ms, tile/register {row['tile_over_register']:.3f}",
                    flush=True,
                )
    gate.probe("after")
    print(gate.sentence())
    if args.out:
        _write(args.out, rows, gate, load_before, started, argv)
    return 0


def _geo(xs: list[float]) -> float:
    return float(np.exp(np.mean(np.log(xs)))) if xs else float("nan")


def _plot(path: str, rows: list[dict]) -> None:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for kernel in dict.fromkeys(f"{r['workload']} {r['kernel']}" for r in rows):
        rs = [r for r in rows if f"{r['workload']} {r['kernel']}" == kernel]
        ax.plot([r["T"] for r in rs], [r["tile_over_register"] for r in rs], marker="o", label=kernel)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("T")
    ax.set_ylabel("latency padded to the tile / to the register tile")
    ax.set_title("What a T axis is padded to (> 1: register-tile padding is faster)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _write(out: str, rows: list[dict], gate: NoiseGate, load_before: list[float], started: str, argv: Any) -> None:
    between = [r["tile_over_register"] for r in rows if not r["tile_multiple"]]
    at = [r["tile_over_register"] for r in rows if r["tile_multiple"]]
    summary = {"geomean_between_multiples": _geo(between), "geomean_at_multiples": _geo(at)}
    meta = write_probe_data(
        out, "benchmarks.dietcode.pad_extent_probe", rows, gate, load_before, started, argv, summary
    )
    _plot(os.path.join(out, "pad_extent_probe.png"), rows)
    title = "What a DietCode micro-kernel pads a T axis to: its tile, or its register tile"
    lines = probe_header(title, meta, started, load_before, gate, "variant") + [
        "`tile`: T padded to a multiple of the tile (DietCode's local padding, the earlier schedule); `register`: "
        "to a multiple of the register tile, the last tile skipping the register tiles past T (shipped). "
        "`at multiple`: T is a multiple of the tile on every T axis, where `tile` pads nothing.",
        "",
        "| workload | kernel | T | at multiple | tile (ms) | register (ms) | tile / register |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | `{r['kernel']}` | {r['T']} | {'yes' if r['tile_multiple'] else ''} | "
            f"{r['tile_ms']:.4f} | {r['register_ms']:.4f} | {r['tile_over_register']:.3f} |"
        )
    lines += [
        "",
        f"Geomean tile / register between tile multiples: {summary['geomean_between_multiples']:.3f} over "
        f"{len(between)} cells (register faster in {sum(x > 1 for x in between)}); at tile multiples: "
        f"{summary['geomean_at_multiples']:.3f} over {len(at)} cells (the guards' cost).",
        "",
    ]
    write_summary(out, lines)


if __name__ == "__main__":
    raise SystemExit(main())
