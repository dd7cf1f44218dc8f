"""Probe (not a test): a dense DietCode micro-kernel with its weight hot in cache or cold, as in a model.

A 12-layer model calls each dense GEMM with 12 distinct weights, so each call reads its weight from memory; a
tuning measurement calls one kernel on one weight, which stays in cache. This times each given micro-kernel at
one T both ways (one weight; ``--weights`` distinct weights in turn), in alternating rounds, and prints the
medians. It located why the dynamic BERT module's GEMMs ran ~25% below their standalone speed::

    python -m benchmarks.dietcode.cold_weights --dims 3072 768 768 3072 --t 128 \\
        --kernels cpu:64x96x4/8x32 cpu:32x64x4/4x64 --out benchmarks/results/dietcode/cold_weights/<name>.txt
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from typing import Any

import numpy as np
import tvm

import adatune
from adatune.dietcode import DynamicWorkload, weight_panel
from adatune.dietcode._task import MicroKernelTask
from adatune.reference import time_callable
from adatune.target import describe_host, size_tvm_thread_pool


def _hot_and_cold(f: Any, a: Any, bs: list[Any], c: Any, rounds: int) -> dict[str, list[float]]:
    """Seconds per call with one weight and with every weight in turn, in alternating rounds (a slow minute hits
    both)."""
    turn = itertools.cycle(bs)
    times: dict[str, list[float]] = {"hot": [], "cold": []}
    for _ in range(rounds):
        times["hot"].append(time_callable(lambda: f(a, bs[0], c), 20))
        times["cold"].append(time_callable(lambda: f(a, next(turn), c), 2 * len(bs)))
    return times


def probe(dims: list[tuple[int, int]], kernels: list[str], t: int, weights: int, rounds: int) -> list[str]:
    tgt = adatune.target.host()
    lines = []
    for k, n in dims:
        wl = DynamicWorkload(f"dense_{k}x{n}", "dense", (k, n), (1, max(t, 2)), b_panel=weight_panel(tgt, "float32", n))
        task = MicroKernelTask(wl, t, tgt)
        rng = np.random.default_rng(0)
        a_spec, b_spec, c_spec = task.arg_specs
        a = tvm.runtime.tensor(rng.standard_normal(a_spec.shape).astype("float32"))
        bs = [tvm.runtime.tensor(rng.standard_normal(b_spec.shape).astype("float32")) for _ in range(weights)]
        c = tvm.runtime.tensor(np.zeros(c_spec.shape, "float32"))
        for key in kernels:
            f = tvm.tirx.build(task.scheduled_module(task.space.get(key)), tgt)["main"]  # a key of the space
            times = _hot_and_cold(f, a, bs, c, rounds)
            gf = {w: task.flop / float(np.median(v)) / 1e9 for w, v in times.items()}
            lines.append(
                f"dense K={k} N={n} T={t} {key}: hot {gf['hot']:.0f} GFLOPS, cold ({weights} weights) "
                f"{gf['cold']:.0f} GFLOPS, cold/hot {gf['cold'] / gf['hot']:.2f}"
            )
            print(lines[-1])
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--dims", type=int, nargs="+", default=[3072, 768, 768, 3072], help="K N pairs")
    ap.add_argument("--kernels", nargs="+", default=["cpu:64x96x4/8x32", "cpu:32x64x4/4x64"])
    ap.add_argument("--t", type=int, default=128)
    ap.add_argument("--weights", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", help="text file for the lines printed, with the host")
    args = ap.parse_args(argv)
    if len(args.dims) % 2:
        print("error: --dims takes K N pairs", file=sys.stderr)
        return 2
    size_tvm_thread_pool()
    dims = list(zip(args.dims[::2], args.dims[1::2]))
    lines = probe(dims, args.kernels, args.t, args.weights, args.rounds)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        host = describe_host()
        head = f"host: {host['model']} ({host['mcpu']}, {host['isa']}, {host['cores']} cores)"
        with open(args.out, "w") as f:
            f.write(
                "\n".join(
                    [
                        head,
                        "command: python -m benchmarks.dietcode.cold_weights " + " ".join(argv or sys.argv[1:]),
                        *lines,
                    ]
                )
                + "\n"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
