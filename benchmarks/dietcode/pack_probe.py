"""A/B probe (not a test): DietCode's x86 micro-kernel as shipped against the static template's B packing.

The static x86 template (``adatune.templates._x86.schedule_gemm``) packs B into ``[j // nr, k, j % nr]``
panels, either once per call in parallel ("global") or per parallel tile ("tile"). This probe applies the
same packing to a dense micro-kernel (local padding kept: guards only in the A/C tiles, the compute loop
unguarded, T symbolic) and times each variant at a few T, so the choice in ``adatune/dietcode/_schedule.py``
rests on a measurement. Run under the bench lock::

    flock /tmp/bench.lock python -m benchmarks.dietcode.pack_probe --kernels cpu:40x32x8/5x16 --t 128 5
"""

from __future__ import annotations

import argparse

import numpy as np
import tvm

import adatune  # noqa: F401 - sizes TVM's thread pool to the physical cores before it starts
from adatune import target as _target
from adatune.dietcode import DynamicWorkload, MicroKernelSpace, schedule_microkernel
from adatune.dietcode._space import MicroKernel
from adatune.target import one_blas_thread

VARIANTS = ("shipped", "global", "tile")


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
    p.add_argument("--t", nargs="+", type=int, default=[128, 5])
    p.add_argument("--dims", nargs=2, type=int, default=[768, 2304], metavar=("K", "N"))
    args = p.parse_args()
    wl = DynamicWorkload("probe", "dense", tuple(args.dims))
    tgt = _target.host()
    space = MicroKernelSpace(tgt, static_k=args.dims[0])
    dev = tvm.cpu(0)
    rng = np.random.default_rng(0)
    print(f"target {tgt}; TVM threads {tvm.get_global_func('runtime.NumThreads')()}")
    for key in args.kernels:
        mk = space.get(key)
        for variant in VARIANTS:
            sch = schedule_microkernel(wl, mk) if variant == "shipped" else packed_schedule(wl, mk, variant)
            with tgt:
                lib = tvm.compile(sch.mod, target=tgt)
            cells = []
            for t in args.t:
                a, b = wl.random_inputs(t, rng)
                c = tvm.runtime.tensor(np.zeros(wl.shapes(t)[2], wl.dtype), dev)
                call = [tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c, t]
                lib["main"](*call)
                with one_blas_thread():  # BLAS workers left spinning would share the cores with the timed kernel
                    ref = wl.reference(a, b)
                np.testing.assert_allclose(c.numpy(), ref, rtol=1e-3, atol=1e-3)
                res = lib.mod.time_evaluator("main", dev, number=5, repeat=5, min_repeat_ms=40)(*call)
                cells.append(f"T={t}: {np.median(res.results) * 1e3:.3f} ms")
            print(f"{key:22s} {variant:8s} " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
