"""A/B probe (not a test): where a DietCode dense micro-kernel reads its weight B from.

Variants, each a dense micro-kernel with local padding (guards only in the A/C tiles, T symbolic):

- ``row-major``: B as ``[K, N]`` (a register tile's k loop strides N floats per step);
- ``prepacked``: B given pre-packed in ``weight_panel`` panels ``[N / W, K, W]`` (what DietCode ships for
  dense workloads: a model packs its constant weights once, untimed);
- ``global`` / ``tile``: B packed inside every call into ``[j // nr, k, j % nr]`` panels, once in parallel or
  per parallel tile, as the static x86 template (``adatune.templates._x86.schedule_gemm``) does.

Times each at a few T so the choice in ``adatune/dietcode/_schedule.py`` rests on a measurement. Run under
the bench lock::

    flock /tmp/bench.lock python -m benchmarks.dietcode.pack_probe --kernels cpu:6x32x4/6x16 --dims 3072 768
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import tvm

import adatune  # noqa: F401 - sizes TVM's thread pool to the physical cores before it starts
from adatune import target as _target
from adatune.dietcode import DynamicWorkload, MicroKernelSpace, schedule_microkernel, weight_panel
from adatune.dietcode._space import MicroKernel
from adatune.target import one_blas_thread

VARIANTS = ("row-major", "prepacked", "global", "tile")


def packed_schedule(wl: DynamicWorkload, mk: MicroKernel, pack: str) -> tvm.s_tir.Schedule:
    """The shipped dense micro-kernel with B packed into nr-wide panels, per call ("global") or per tile."""
    if wl.kind != "dense":
        raise ValueError(f"the probe packs dense workloads only, got {wl.kind!r}")
    sch = tvm.s_tir.Schedule(wl.prim_func())
    blk = sch.get_sblock("C")
    i, j, k = sch.get_loops(blk)
    sch.pad_einsum(blk, [mk.mt, mk.nt, mk.kt])
    names = {sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))}
    i, j, k = sch.get_loops(blk)
    io, iio, iii = sch.split(i, [None, mk.mt // mk.mr, mk.mr])
    jo, jio, jii = sch.split(j, [None, mk.nt // mk.nr, mk.nr])
    ko, ki = sch.split(k, [None, mk.kt])
    sch.reorder(io, jo, jio, iio, ko, ki, iii, jii)
    acc = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(acc, iio)
    panel = sch.get_sblock("B_pad") if "B_pad" in names else sch.cache_read(blk, 1, "global")
    nr = mk.nr
    sch.transform_layout(panel, ("write", 0), lambda kk, jj: (jj // nr, kk, jj % nr))
    if "A_pad" in names:
        sch.compute_at(sch.get_sblock("A_pad"), jo)
    if "C_pad" in names:
        sch.reverse_compute_at(sch.get_sblock("C_pad"), jo)
    outer = sch.fuse(io, jo)
    sch.parallel(outer)
    if pack == "tile":
        sch.compute_at(panel, outer)
    else:
        sch.parallel(sch.get_loops(panel)[0])
    sch.unroll(iii)
    sch.unroll(ki)
    sch.vectorize(jii)
    sch.vectorize(sch.get_loops(acc)[-1])
    sch.decompose_reduction(blk, ko)
    return sch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernels", nargs="+", required=True, help="micro-kernel keys, e.g. cpu:40x32x8/5x16")
    p.add_argument("--t", nargs="+", type=int, default=[1, 16, 64, 128])
    p.add_argument("--dims", nargs=2, type=int, default=[768, 2304], metavar=("K", "N"))
    args = p.parse_args()
    wl = DynamicWorkload("probe", "dense", tuple(args.dims))
    tgt = _target.host()
    panel = weight_panel(tgt, wl.dtype, wl.dims[1])
    if not panel:
        raise SystemExit(f"no weight panel width divides N={wl.dims[1]} on {tgt}")
    packed = dataclasses.replace(wl, b_panel=panel)
    space = MicroKernelSpace(tgt, static_k=args.dims[0])
    dev = tvm.cpu(0)
    rng = np.random.default_rng(0)
    print(f"target {tgt}; TVM threads {tvm.get_global_func('runtime.NumThreads')()}; weight panel {panel}")
    for key in args.kernels:
        mk = space.get(key)
        for variant in VARIANTS:
            if variant in ("row-major", "prepacked"):
                sch = schedule_microkernel(packed if variant == "prepacked" else wl, mk)
            else:
                sch = packed_schedule(wl, mk, variant)
            with tgt:
                lib = tvm.compile(sch.mod, target=tgt)
            cells = []
            for t in args.t:
                a, b = wl.random_inputs(t, rng)
                c = tvm.runtime.tensor(np.zeros(wl.shapes(t)[2], wl.dtype), dev)
                given = packed.pack_b(b) if variant == "prepacked" else b
                call = [tvm.runtime.tensor(a, dev), tvm.runtime.tensor(given, dev), c, t]
                lib["main"](*call)
                with one_blas_thread():  # BLAS workers left spinning would share the cores with the timed kernel
                    ref = wl.reference(a, b)
                np.testing.assert_allclose(c.numpy(), ref, rtol=1e-3, atol=1e-3)
                res = lib.mod.time_evaluator("main", dev, number=5, repeat=5, min_repeat_ms=40)(*call)
                cells.append(f"T={t}: {np.median(res.results) * 1e3:.3f} ms")
            print(f"{key:22s} {variant:8s} " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
