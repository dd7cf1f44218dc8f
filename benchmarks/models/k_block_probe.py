"""Why FFN2's GEMM wanted blocks of K: the same GEMM scheduled with and without ``k_block``, timed in turns.

BERT-base's FFN2 (``M = 128, K = 3072, N = 768``) with B pre-packed in 16-column panels, as a model's constant
weight is: a few cache tilings of the x86 GEMM template's schedule (``templates._gemm.schedule_gemm``), each once
over the whole K and once summing K in blocks, built once and timed in ``--rounds`` rounds (the order reversed
every other round), hot and with the caches flushed before each run (``time_fn_for``, the runner's adapter). Ratios
are medians of per-round ratios against the first variant (the narrow tile the template's L2 rule left tuning
before ``k_block``), so a change of the host's state between rounds cancels; the noise gate frames the run.

    python -m benchmarks.models.k_block_probe --out benchmarks/results/k_block_probe_zen3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from typing import Any

import numpy as np
import tvm
from tvm import te

import adatune
from adatune.evaluator import time_fn_for

from .._common import write_csv, write_summary
from ..noise_gate import gated_run

NR = 16  # columns per pre-packed panel of B
# (rows split, columns split): the narrow tile tuning picked under the whole-K L2 rule, then taller tiles
TILINGS = (([16, 2, 4], [48, 1, 16]), ([1, 32, 4], [24, 2, 16]), ([2, 16, 4], [8, 6, 16]))


def gemm(m: int, k: int, n: int) -> tvm.tirx.PrimFunc:
    a = te.placeholder((m, k), "float32", name="A")
    bp = te.placeholder((n // NR, k, NR), "float32", name="Bp")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * bp[j // NR, r, j % NR], axis=r), name="C")
    return te.create_prim_func([a, bp, c])


def schedule(func: Any, rows: list[int], cols: list[int], k: int, kc: int, step: int) -> Any:
    """The template's loop nest: parallel tiles / (``kb``) / cache tiles / k / register tile, accumulators in
    registers over the whole K (``kc == k``) or a tile buffer summed over blocks of ``kc``."""
    sch = tvm.s_tir.Schedule(func)
    block = sch.get_sblock("C")
    i, j, r = sch.get_loops(block)
    i0, i1, i2 = sch.split(i, rows)
    j0, j1, j2 = sch.split(j, cols)
    if kc < k:
        kb, k0, k1 = sch.split(r, [None, kc // step, step])
        sch.reorder(i0, j0, kb, i1, j1, k0, k1, i2, j2)
        acc = sch.cache_write(block, 0, "global")
        sch.reverse_compute_at(acc, j0)
        _, vec = sch.split(sch.get_loops(acc)[-1], [None, cols[-1]])
        first = kb
    else:
        k0, k1 = sch.split(r, [None, step])
        sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
        acc = sch.cache_write(block, 0, "local")
        sch.reverse_compute_at(acc, j1)
        vec = sch.get_loops(acc)[-1]
        first = k0
    sch.parallel(sch.fuse(i0, j0))
    sch.unroll(i2)
    sch.unroll(k1)
    sch.vectorize(j2)
    sch.vectorize(vec)
    sch.decompose_reduction(block, first)
    return sch


def probe(m: int, k: int, n: int, blocks: list[int], rounds: int) -> list[dict[str, Any]]:
    target = adatune.target.host()
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (m, k)).astype("float32")
    bp = rng.uniform(-1, 1, (n // NR, k, NR)).astype("float32")
    want = a @ bp.transpose(1, 0, 2).reshape(k, n)
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(x, dev) for x in (a, bp, np.zeros((m, n), "float32"))]
    variants: dict[str, dict[str, Any]] = {}
    for rows, cols in TILINGS:
        for kc in [k, *blocks]:
            name = f"{rows[1] * rows[2]}x{cols[1] * cols[2]} tile ({rows}/{cols}), " + (
                "whole K" if kc == k else f"K in blocks of {kc}"
            )
            lib = tvm.compile(schedule(gemm(m, k, n), rows, cols, k, kc, 8).mod, target=target)
            lib(*args)
            np.testing.assert_allclose(args[2].numpy(), want, rtol=1e-3, atol=1e-2, err_msg=name)
            variants[name] = {
                "hot": time_fn_for(lib.mod, dev, args, cache_flush=False, func_name="main"),
                "cold": time_fn_for(lib.mod, dev, args, cache_flush=True, func_name="main"),
                "times": {"hot": [], "cold": []},
            }
    names = list(variants)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            v = variants[name]
            v["times"]["hot"].append(statistics.median(v["hot"](5, 3, 0)))
            v["times"]["cold"].append(statistics.median(v["cold"](1, 9, 0)))
    base = variants[names[0]]["times"]
    flop = 2.0 * m * k * n
    rows_out = []
    for name in names:
        t = variants[name]["times"]
        row: dict[str, Any] = {"variant": name}
        for mode in ("hot", "cold"):
            med = statistics.median(t[mode])
            row[f"{mode}_ms"] = med * 1e3
            row[f"{mode}_gflops"] = flop / med / 1e9
            row[f"{mode}_speed_vs_first"] = statistics.median(b / x for b, x in zip(base[mode], t[mode]))
        row["rounds_s"] = t
        rows_out.append(row)
    return rows_out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.models.k_block_probe", description=__doc__)
    ap.add_argument("--shape", type=int, nargs=3, default=[128, 3072, 768], metavar=("M", "K", "N"))
    ap.add_argument("--blocks", type=int, nargs="+", default=[384, 512], help="K-block sizes besides the whole K")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    m, k, n = args.shape
    rows, meta, gate = gated_run(
        "benchmarks.models.k_block_probe", argv, lambda: probe(m, k, n, args.blocks, args.rounds)
    )
    started, load_before = meta["started"], meta["load_before"]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "variants": rows}, f, indent=1)
    write_csv(os.path.join(args.out, "variants.csv"), [{k: v for k, v in r.items() if k != "rounds_s"} for r in rows])
    host = meta["host"]
    m, k, n = args.shape
    lines = [
        f"# A {m}x{k}x{n} GEMM (B pre-packed) over the whole K and in blocks of K, in turns",
        "",
        f"Command: `{meta['command']}`; started {started}, wall {meta['wall_s']:.0f} s.  ",
        f"Host: {host['model']} ({host['isa']}, {host['cores']} cores); load before {load_before}.  ",
        f"{args.rounds} rounds, every variant hot and with the caches flushed in each (the order reversed every other "
        "round); speed ratios are medians of per-round ratios against the first variant. Every variant's output "
        "matched numpy.",
        "",
        gate.sentence(),
        "",
        "| variant | hot ms | hot GFLOP/s | hot speed vs first | cold ms | cold GFLOP/s | cold speed vs first |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['hot_ms']:.3f} | {r['hot_gflops']:.1f} | {r['hot_speed_vs_first']:.2f}x | "
            f"{r['cold_ms']:.3f} | {r['cold_gflops']:.1f} | {r['cold_speed_vs_first']:.2f}x |"
        )
    write_summary(args.out, lines, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
