"""How far ``adatune.vector_math``'s libmvec calls stray from the exact functions, in float32 ulp.

Per function (exp, erf, tanh, log) and per vector width the target offers, an elementwise kernel over 65,536
inputs spread over the function's useful range is built through the pipeline and compared with float64 numpy /
scipy; TVM's default build (scalar calls) is the reference row. No timing: the figures are the bounds the tests
and the README quote.

    python -m benchmarks.vector_math_accuracy --out benchmarks/results/vector_math_accuracy
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tvm
from scipy.special import erf
from tvm import te

import adatune
import adatune.vector_math as vm

from ._common import load_now, run_meta, write_summary

# name -> (TE function, float64 reference, input range; log's drawn log-uniformly)
FUNCS: dict[str, tuple[Callable[[Any], Any], Callable[[np.ndarray], np.ndarray], tuple[float, float]]] = {
    "exp": (te.exp, np.exp, (-87.0, 88.0)),
    "erf": (te.erf, erf, (-6.0, 6.0)),
    "tanh": (te.tanh, np.tanh, (-12.0, 12.0)),
    "log": (te.log, np.log, (1e-30, 1e6)),
}


def inputs(name: str, n: int) -> np.ndarray:
    lo, hi = FUNCS[name][2]
    rng = np.random.default_rng(0)
    if name == "log":
        return np.exp(rng.uniform(np.log(lo), np.log(hi), n)).astype("float32")
    return rng.uniform(lo, hi, n).astype("float32")


def max_ulp(name: str, x: np.ndarray, lanes: int, target: tvm.target.Target, enabled: bool) -> float:
    """The largest error over ``x`` in ulp of the float32 result, built ``lanes`` wide (1: scalar)."""
    a = te.placeholder(x.shape, name="A")
    out = te.compute(x.shape, lambda i: FUNCS[name][0](a[i]), name="out")
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, out]))
    if lanes > 1:
        _, inner = sch.split(sch.get_loops(sch.get_sblock("out"))[0], [None, lanes])
        sch.vectorize(inner)
    lib, _ = vm.compile_module(sch.mod, target, enabled)
    got = tvm.runtime.tensor(np.zeros_like(x))
    lib["main"](tvm.runtime.tensor(x), got)
    ref = FUNCS[name][1](x.astype(np.float64))
    ulp = np.spacing(np.abs(ref.astype(np.float32))).astype(np.float64)
    return float(np.max(np.abs(got.numpy().astype(np.float64) - ref) / ulp))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.vector_math_accuracy", description=__doc__)
    ap.add_argument("--n", type=int, default=65536, help="inputs per function")
    ap.add_argument("--out", default="benchmarks/results/vector_math_accuracy")
    args = ap.parse_args(argv)
    started, t0, load_before = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), time.perf_counter(), load_now()
    target = adatune.target.host()
    widths = sorted(vm.lane_variants(target))
    if not widths:
        raise SystemExit("this host has no libmvec variants for its target: nothing to measure")
    rows = []
    for name in FUNCS:
        x = inputs(name, args.n)
        row: dict[str, Any] = {"function": name, "range": FUNCS[name][2]}
        row |= {f"libmvec_{w}_lanes": max_ulp(name, x, w, target, True) for w in widths}
        row["tvm_scalar"] = max_ulp(name, x, 1, target, False)
        rows.append(row)
        print(row, flush=True)
    meta = run_meta("benchmarks.vector_math_accuracy", argv, started, t0, load_before)
    meta |= {"host": adatune.target.describe_host(), "glibc": os.confstr("CS_GNU_LIBC_VERSION"), "n": args.n}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    lines = [
        "# libmvec through adatune.vector_math: largest error in float32 ulp",
        "",
        f"Command: `{meta['command']}`  ",
        f"Host: {meta['host']['model']} ({meta['host']['isa']}); {meta['glibc']}; {args.n} inputs per function "
        "(uniform over the range, log-uniform for log), against float64 numpy/scipy.",
        "",
        "| function | range | " + " | ".join(f"libmvec {w} lanes" for w in widths) + " | TVM default (scalar) |",
        "|---|---|" + "---:|" * (len(widths) + 1),
    ]
    for r in rows:
        cells = " | ".join(f"{r[f'libmvec_{w}_lanes']:.2f}" for w in widths)
        lines.append(f"| {r['function']} | {r['range']} | {cells} | {r['tvm_scalar']:.2f} |")
    write_summary(args.out, lines, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
