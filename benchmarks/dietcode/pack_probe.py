"""A/B probe (not a test): where a DietCode micro-kernel reads its B operand from.

Dense GEMMs (``--kind dense``), each variant a micro-kernel with local padding (guards only in the A/C tiles, T
symbolic):

- ``row-major``: B as ``[K, N]`` (a register tile's k loop strides N floats per step);
- ``prepacked``: B given pre-packed in ``weight_panel`` panels ``[N / W, K, W]`` (what DietCode ships for
  dense workloads: a model packs its constant weights once, untimed);
- ``global`` / ``tile``: B packed inside every call into ``[j // nr, k, j % nr]`` panels, once in parallel or
  per parallel tile, as the static x86 template (``adatune.templates._gemm.schedule_gemm``) does.

The attention scores GEMM (``--kind bmm_nt``, ``S = Q @ K^T``, B = K read along ``j``): ``tile`` packs each
tile's k-major panel inside the tile (the earlier schedule: every row tile packs it again), ``shipped`` packs
all of B once per call in parallel (the space's ``pack=""`` kernels), ``column`` packs each column tile's panel
inside it with row tiles serial under parallel column tiles (the space's ``pack="column"`` kernels).

Times each at a few T so the choices in ``adatune/dietcode/_schedule.py`` rest on a measurement. Run under the
bench lock::

    flock /tmp/bench.lock python -m benchmarks.dietcode.pack_probe --kernels cpu:6x32x4/6x16 --dims 3072 768
    flock /tmp/bench.lock python -m benchmarks.dietcode.pack_probe --kind bmm_nt --kernels cpu:24x16x1/6x16
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable

import numpy as np
import tvm

import adatune  # noqa: F401 - sizes TVM's thread pool to the physical cores before it starts
from adatune import target as _target
from adatune.dietcode import DynamicWorkload, MicroKernel, schedule_microkernel, weight_panel
from adatune.dietcode._schedule import _tile_split, padding_units
from adatune.dietcode._space import PACK_COLUMN
from adatune.target import one_blas_thread, size_tvm_thread_pool

VARIANTS = {"dense": ("row-major", "prepacked", "global", "tile"), "bmm_nt": ("tile", "shipped", "column")}
DEFAULT_DIMS = {"dense": (768, 2304), "bmm_nt": (12, 64)}


def _tiled(wl: DynamicWorkload, mk: MicroKernel) -> tuple[tvm.s_tir.Schedule, Callable[[], None], dict]:
    """The micro-kernel's loop skeleton with B left unpacked: returns the schedule, a ``finish()`` that
    parallelises, unrolls, vectorises and decomposes, and the loops and blocks a variant places B's panel at."""
    sch = tvm.s_tir.Schedule(wl.prim_func(packed=False))
    blk = sch.get_sblock("C")
    *batch, i, j, k = sch.get_loops(blk)
    sch.pad_einsum(blk, [1] * len(batch) + list(padding_units(wl, mk)))  # padded as the shipped schedule pads
    names = {sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))}
    *batch, i, j, k = sch.get_loops(blk)
    io, iio, iii = _tile_split(sch, i, mk.mt, mk.mr)
    jo, jio, jii = _tile_split(sch, j, mk.nt, mk.nr)
    ko, ki = sch.split(k, [None, mk.kt])
    sch.reorder(*batch, io, jo, jio, iio, ko, ki, iii, jii)
    acc = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(acc, iio)
    panel = sch.get_sblock("B_pad") if "B_pad" in names else sch.cache_read(blk, 1, "global")
    if "A_pad" in names:
        sch.compute_at(sch.get_sblock("A_pad"), jo)
    if "C_pad" in names:
        sch.reverse_compute_at(sch.get_sblock("C_pad"), jo)
    outer = sch.fuse(*batch, io, jo)
    sch.parallel(outer)

    def finish() -> None:
        sch.unroll(iii)
        sch.unroll(ki)
        sch.vectorize(jii)  # vectorize before decompose_reduction, or TIR rejects it
        sch.vectorize(sch.get_loops(acc)[-1])
        sch.decompose_reduction(blk, ko)

    return sch, finish, {"panel": panel, "outer": outer}


def variant_schedule(wl: DynamicWorkload, mk: MicroKernel, variant: str) -> tvm.s_tir.Schedule:
    """One probe variant (see the module docstring) of ``mk`` on ``wl``."""
    if variant in ("row-major", "prepacked", "shipped"):
        return schedule_microkernel(wl, mk)
    if variant == "column":
        return schedule_microkernel(wl, dataclasses.replace(mk, pack=PACK_COLUMN))
    sch, finish, at = _tiled(wl, mk)
    nr = mk.nr
    if wl.kind == "dense":
        sch.transform_layout(at["panel"], ("write", 0), lambda kk, jj: (jj // nr, kk, jj % nr))
        if variant == "tile":
            sch.compute_at(at["panel"], at["outer"])
        else:
            sch.parallel(sch.get_loops(at["panel"])[0])
    else:  # bmm_nt "tile": each tile packs its own k-major panel
        sch.compute_at(at["panel"], at["outer"])
        sch.transform_layout(at["panel"], ("write", 0), lambda b, jj, kk: (b, kk, jj))
    finish()
    return sch


def main() -> None:
    size_tvm_thread_pool()  # kernels timed in this process get every core, as in adatune's workers
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", choices=sorted(VARIANTS), default="dense")
    p.add_argument("--kernels", nargs="+", required=True, help="micro-kernel keys, e.g. cpu:40x32x8/5x16")
    p.add_argument("--t", nargs="+", type=int, default=None, help="T to time (dense: 1 16 64 128; bmm_nt: 8 32 64 128)")
    p.add_argument("--dims", nargs=2, type=int, default=None, help="K N (dense) or HEADS D (bmm_nt)")
    args = p.parse_args()
    ts = args.t or ([1, 16, 64, 128] if args.kind == "dense" else [8, 32, 64, 128])
    wl = DynamicWorkload("probe", args.kind, tuple(args.dims or DEFAULT_DIMS[args.kind]))
    tgt = _target.host()
    packed = wl
    if wl.kind == "dense":
        panel = weight_panel(tgt, wl.dtype, wl.dims[1])
        if not panel:
            raise SystemExit(f"no weight panel width divides N={wl.dims[1]} on {tgt}")
        packed = dataclasses.replace(wl, b_panel=panel)
    dev = tvm.cpu(0)
    rng = np.random.default_rng(0)
    print(f"target {tgt}; TVM threads {tvm.get_global_func('runtime.NumThreads')()}; {wl}; packed: {packed}")
    for key in args.kernels:
        mk = MicroKernel.from_key(key)
        for variant in VARIANTS[args.kind]:
            given_wl = packed if variant == "prepacked" else wl
            with tgt:
                lib = tvm.compile(variant_schedule(given_wl, mk, variant).mod, target=tgt)
            cells = []
            for t in ts:
                a, b = wl.random_inputs(t, rng)
                c = tvm.runtime.tensor(np.zeros(wl.shapes(t)[2], wl.dtype), dev)
                given = packed.pack_b(b) if variant == "prepacked" else b
                call = [tvm.runtime.tensor(a, dev), tvm.runtime.tensor(given, dev), c, t]
                lib["main"](*call)
                with one_blas_thread():  # BLAS workers left spinning would share the cores with the timed kernel
                    ref = wl.reference(a, b)
                np.testing.assert_allclose(c.numpy(), ref, rtol=1e-3, atol=1e-3)
                res = lib.mod.time_evaluator("main", dev, number=1, repeat=5, min_repeat_ms=40)(*call)
                cells.append(f"T={t}: {np.median(res.results) * 1e3:.4f} ms")
            print(f"{key:22s} {variant:9s} " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
