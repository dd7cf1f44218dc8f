"""Probe (not a test): dense DietCode micro-kernels reading their weight packed in panels of different widths.

A dense layer's weight is packed once, as ``[N / W, K, W]``, and every micro-kernel of the layer reads that one
layout, so ``W`` must suit register tiles of every width. This times each given kernel at each T on
``--weights`` distinct (cold) weights, as a 12-layer model calls it, for each panel width in alternating rounds:
``lcm`` (the least common multiple of the space's register-tile widths, the layout before this probe), ``tile``
(the kernel's own register-tile width) and ``vector`` (one SIMD vector, what ``weight_panel`` now returns). Each
kernel is checked against numpy in each layout before it is timed::

    python -m benchmarks.dietcode.panel_probe --out benchmarks/results/dietcode/panel_probe/output.txt
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
from typing import Any

import numpy as np
import tvm

import adatune
from adatune.dietcode import DynamicWorkload, MicroKernel, microkernel_func
from adatune.dietcode._space import _register_tiles
from adatune.reference import time_callable
from adatune.target import cpu_info, describe_host, size_tvm_thread_pool

from .._common import load_now
from ..noise_gate import NoiseGate

#: (K, N) of BERT-base's dense layers and kernels the dynamic BERT and six-GEMM runs deployed on Zen 4 (AVX-512)
DEFAULT_CASES = [
    "768x768:cpu:16x256x2/4x64,cpu:64x192x4/8x32,cpu:4x192x4/2x64",
    "3072x768:cpu:16x64x1/8x32,cpu:8x64x2/8x32",
    "768x3072:cpu:16x96x8/8x32,cpu:80x96x4/10x32",
]


def _widths(tgt: Any, mk: MicroKernel) -> dict[str, int]:
    info = cpu_info(tgt)
    lanes = info.lanes("float32")
    return {"lcm": math.lcm(*(v * lanes for _, v in _register_tiles(info))), "tile": mk.nr, "vector": lanes}


def _kernel(tgt: Any, k: int, n: int, t: int, mk: MicroKernel, w: int, weights: int) -> tuple[Any, ...]:
    """The kernel built for panel width ``w`` at ``T = t``, checked against numpy, with its arguments (``weights``
    packed B)."""
    wl = DynamicWorkload(f"dense_{k}x{n}", "dense", (k, n), (1, 128), b_panel=w)
    func = microkernel_func(wl, mk)
    f = tvm.tirx.build(tvm.IRModule({"main": func.specialize({func.params[3]: t})}), tgt)["main"]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((t, k)).astype("float32")
    raw = [rng.standard_normal((k, n)).astype("float32") for _ in range(weights)]
    c = tvm.runtime.tensor(np.zeros((t, n), "float32"))
    bs = [tvm.runtime.tensor(wl.pack_b(b)) for b in raw]
    f(tvm.runtime.tensor(a), bs[0], c)
    np.testing.assert_allclose(c.numpy(), a @ raw[0], rtol=1e-3, atol=1e-3)
    return f, tvm.runtime.tensor(a), bs, c


def probe(cases: list[str], ts: list[int], weights: int, rounds: int) -> list[str]:
    tgt = adatune.target.host()
    lines = []
    for case in cases:
        dims, keys = case.split(":", 1)
        k, n = (int(x) for x in dims.split("x"))
        for key, t in itertools.product(keys.split(","), ts):
            mk = MicroKernel.from_key(key)
            widths = _widths(tgt, mk)
            built = {w: _kernel(tgt, k, n, t, mk, w, weights) for w in sorted(set(widths.values()))}
            times: dict[int, list[float]] = {w: [] for w in built}
            for _ in range(rounds):  # every width once a round: a slow minute hits all alike
                for w, (f, a, bs, c) in built.items():
                    call = lambda f=f, a=a, turn=itertools.cycle(bs), c=c: f(a, next(turn), c)  # noqa: E731
                    times[w].append(time_callable(call, 2 * weights))
            ms = {name: float(np.median(times[w])) * 1e3 for name, w in widths.items()}
            lines.append(
                f"K={k} N={n} T={t} {key}: "
                + "  ".join(f"{name} (W={widths[name]}) {v:.3f} ms" for name, v in ms.items())
                + f"  lcm/vector {ms['lcm'] / ms['vector']:.2f}x  tile/vector {ms['tile'] / ms['vector']:.2f}x"
            )
            print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--cases", nargs="+", default=DEFAULT_CASES, help="KxN:kernel,kernel,...")
    ap.add_argument("--t", type=int, nargs="+", default=[1, 16, 64, 128])
    ap.add_argument("--weights", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", help="text file for the lines printed, with the host and the noise gate")
    args = ap.parse_args(argv)
    size_tvm_thread_pool()
    load_before = load_now()
    gate = NoiseGate()
    gate.probe("before")
    lines = probe(args.cases, args.t, args.weights, args.rounds)
    gate.probe("after")
    print(gate.sentence())
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        host = describe_host()
        head = [
            f"host: {host['model']} ({host['mcpu']}, {host['isa']}, {host['cores']} cores); "
            f"load before {load_before}, after {load_now()}",
            "command: python -m benchmarks.dietcode.panel_probe " + " ".join(argv or sys.argv[1:]),
            f"each cell: median over {args.rounds} alternating rounds of ms per call, {args.weights} weights in turn",
        ]
        with open(args.out, "w") as f:
            f.write("\n".join([*head, *lines, gate.sentence()]) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
