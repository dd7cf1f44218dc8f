"""A/B probe (not a test): where DietCode's attention-scores micro-kernel (``bmm_nt``) packs K^T.

``B`` of ``S = Q @ K^T`` is ``[batch, T, D]``, read along ``j`` per k step, so the kernel packs it into
``[batch, T / nr, D, nr]`` panels. Variants: ``tile`` packs each tile's panel inside the tile (the earlier
schedule: every row tile packs it again) and ``shipped`` packs all of B once per call in parallel (what
``adatune/dietcode/_schedule.py`` does now). Run under the bench lock::

    flock /tmp/bench.lock python -m benchmarks.dietcode.nt_pack_probe --kernels cpu:24x16x1/6x16 cpu:6x16x2/6x16
"""

from __future__ import annotations

import argparse

import numpy as np
import tvm

import adatune  # noqa: F401 - sizes TVM's thread pool to the physical cores before it starts
from adatune import target as _target
from adatune.dietcode import DynamicWorkload, MicroKernel, schedule_microkernel
from adatune.target import one_blas_thread


def per_tile_schedule(wl: DynamicWorkload, mk: MicroKernel) -> tvm.s_tir.Schedule:
    """The bmm_nt micro-kernel with each tile packing its own k-major panel of B."""
    sch = tvm.s_tir.Schedule(wl.prim_func())
    blk = sch.get_sblock("C")
    n, i, j, k = sch.get_loops(blk)
    sch.pad_einsum(blk, [1, mk.mt, mk.nt, mk.kt])
    names = {sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))}
    n, i, j, k = sch.get_loops(blk)
    io, iio, iii = sch.split(i, [None, mk.mt // mk.mr, mk.mr])
    jo, jio, jii = sch.split(j, [None, mk.nt // mk.nr, mk.nr])
    ko, ki = sch.split(k, [None, mk.kt])
    sch.reorder(n, io, jo, jio, iio, ko, ki, iii, jii)
    acc = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(acc, iio)
    panel = sch.get_sblock("B_pad") if "B_pad" in names else sch.cache_read(blk, 1, "global")
    sch.compute_at(panel, jo)
    sch.transform_layout(panel, ("write", 0), lambda b, jj, kk: (b, kk, jj))
    if "A_pad" in names:
        sch.compute_at(sch.get_sblock("A_pad"), jo)
    if "C_pad" in names:
        sch.reverse_compute_at(sch.get_sblock("C_pad"), jo)
    sch.parallel(sch.fuse(n, io, jo))
    sch.unroll(iii)
    sch.unroll(ki)
    sch.vectorize(jii)
    sch.vectorize(sch.get_loops(acc)[-1])
    sch.decompose_reduction(blk, ko)
    return sch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernels", nargs="+", required=True, help="micro-kernel keys, e.g. cpu:24x16x1/6x16")
    p.add_argument("--t", nargs="+", type=int, default=[8, 32, 64, 128])
    p.add_argument("--dims", nargs=2, type=int, default=[12, 64], metavar=("HEADS", "D"))
    args = p.parse_args()
    wl = DynamicWorkload("probe", "bmm_nt", tuple(args.dims))
    tgt = _target.host()
    dev = tvm.cpu(0)
    rng = np.random.default_rng(0)
    print(f"target {tgt}; TVM threads {tvm.get_global_func('runtime.NumThreads')()}")
    for key in args.kernels:
        tile, reg = key.split(":")[1].split("/")
        mt, nt, kt = (int(x) for x in tile.split("x"))
        mr, nr = (int(x) for x in reg.split("x"))
        mk = MicroKernel("cpu", mt, nt, kt, mr, nr)
        for variant in ("tile", "shipped"):
            sch = per_tile_schedule(wl, mk) if variant == "tile" else schedule_microkernel(wl, mk)
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
                res = lib.mod.time_evaluator("main", dev, number=1, repeat=5, min_repeat_ms=40)(*call)
                cells.append(f"T={t}: {np.median(res.results) * 1e3:.4f} ms")
            print(f"{key:22s} {variant:8s} " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
