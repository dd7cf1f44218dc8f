"""Export every CUDA micro-kernel of BERT's six dynamic GEMMs for a GPU machine without TVM.

DietCode's kernels are shape-generic: one build serves every T (T is the kernel's last, scalar argument) and only
the launch grid follows T. So each kernel is exported once, as TVM's CUDA source, with its block and its grid
at every T of the range (the scheduled PrimFunc's ``blockIdx.x`` extent evaluated at each T). The sources share
TVM's preamble; they are bundled per workload into modules of ``--per-module`` kernels (renamed ``k<index>``) so
that nvcc builds a few dozen modules there instead of thousands. Written (``--out``, gzip JSON, ~2 MB):

- ``plan.json``: target, device profile, the T the tuner samples for each seed (phase 1 measures every kernel at
  their union), the range, and the workloads;
- ``<workload>.json.gz``: the kernels (key, block, grid per T, module index) and the modules' sources.

Run there: ``python benchmarks/gpu/dietcode_runner.py BATCH --out $OUT`` (``dietcode_runner``'s docstring);
then here ``python -m benchmarks.gpu.dietcode_report``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import tvm

from adatune.cuda_export._kernel import parse_kernels
from adatune.devices import profile
from adatune.dietcode import MicroKernelSpace
from adatune.dietcode._cost import sample_shapes
from adatune.dietcode._schedule import schedule_microkernel
from adatune.dietcode._workloads import DynamicWorkload, bert_workloads
from adatune.measure._worker import thread_bindings

__all__ = ["export_workload", "kernel_grid", "main"]

_DECL = re.compile(r'extern\s+"C"\s+__global__')


def kernel_grid(sch: tvm.s_tir.Schedule, ts: Sequence[int]) -> tuple[list[int], list[int]]:
    """``(grid_x at each T of ts, block)`` of a scheduled shape-generic kernel (only ``blockIdx.x`` may vary)."""
    t_var = sch.mod["main"].params[-1]
    extents = dict(thread_bindings(sch.mod))
    bad = sorted(set(extents) - {"blockIdx.x", "threadIdx.x", "threadIdx.y", "threadIdx.z"})
    if bad:
        raise ValueError(f"the kernel binds {bad}; the exporter launches blockIdx.x grids only")
    block = [int(extents.get(f"threadIdx.{a}", 1)) for a in "xyz"]  # ValueError if a thread extent follows T
    grid = []
    for t in ts:
        ana = tvm.sym.Analyzer()
        ana.bind(t_var, tvm.tirx.IntImm("int32", int(t)))
        grid.append(int(ana.simplify(extents["blockIdx.x"])))
    return grid, block


def _split_source(source: str) -> tuple[str, str]:
    """(TVM's preamble, the kernel's declaration and definition) of a one-kernel source."""
    m = _DECL.search(source)
    if m is None or len(parse_kernels(source)) != 1:
        raise ValueError("expected exactly one CUDA kernel in TVM's source")
    body = source[m.start() :]
    if body.count("main_kernel") != 2:
        raise ValueError("the kernel's source names main_kernel other than in its declaration and definition")
    return source[: m.start()], body


def export_workload(
    wl: DynamicWorkload, target: tvm.target.Target, limits_name: str, per_module: int, keys: Sequence[str] = ()
) -> dict:
    """Every micro-kernel of ``wl``'s CUDA space (or those of ``keys``) as source bundles, blocks and grids over
    its T range."""
    space = MicroKernelSpace(target, wl.dtype, device_limits=profile(limits_name), kind=wl.kind)
    chosen = [space.get(k) for k in keys] if keys else space.kernels
    lo, hi = wl.t_range
    ts = list(range(lo, hi + 1))
    preamble, bodies, kernels = None, [], []
    t0 = time.time()
    for mk in chosen:
        entry: dict[str, Any] = {"key": mk.key}
        try:
            sch = schedule_microkernel(wl, mk)
            with tvm.transform.PassContext(config={"tirx.disable_cse_tir": True}):  # T stays the only scalar
                with target:
                    lib = tvm.tirx.build(sch.mod, target)
            source = next(str(m.inspect_source("")) for m in lib.imports)
            params = parse_kernels(source)[0][2]
            if params != ["A_ptr", "B_ptr", "C_ptr", "T"]:
                raise ValueError(f"unexpected kernel parameters {params}")
            pre, body = _split_source(source)
            if preamble is None:
                preamble = pre
            elif pre != preamble:
                raise ValueError("TVM's preamble differs from the other kernels'")
            entry["grid"], entry["block"] = kernel_grid(sch, ts)
            entry["index"] = len(bodies)
            bodies.append(body.replace("main_kernel", f"k{len(bodies)}"))
        except Exception as err:  # noqa: BLE001 - recorded; the runner skips it
            entry["error"] = f"{type(err).__name__}: {err}"
        kernels.append(entry)
    modules = [(preamble or "") + "\n".join(bodies[i : i + per_module]) for i in range(0, len(bodies), per_module)]
    for entry in kernels:
        if "index" in entry:
            entry["module"], entry["name"] = entry["index"] // per_module, f"k{entry['index']}"
    return {
        "workload": wl.to_json(),
        "name": wl.name,
        "ts": ts,
        "kernels": kernels,
        "modules": modules,
        "export_seconds": time.time() - t0,
    }


def _one(args: tuple[str, Any, str, str, int]) -> tuple[str, int, int, float]:
    out, wl_json, target_json, limits_name, per_module = args
    wl = DynamicWorkload.from_json(wl_json)
    data = export_workload(wl, tvm.target.Target(json.loads(target_json)), limits_name, per_module)
    with gzip.open(os.path.join(out, f"{wl.name}.json.gz"), "wt") as f:
        json.dump(data, f)
    errors = sum("error" in k for k in data["kernels"])
    return wl.name, len(data["kernels"]), errors, data["export_seconds"]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    p.add_argument("--out", required=True)
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--device-profile", default="h200")
    p.add_argument("--workloads", default="qkv,attn_out,ffn1,ffn2,scores,context")
    p.add_argument("--seeds", type=int, default=3, help="tuning seeds whose sampled T phase 1 measures")
    p.add_argument("--n-shapes", type=int, default=8, help="T the tuner samples (DietCodeTuner's n_shapes)")
    p.add_argument("--per-module", type=int, default=64)
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    target = {"kind": "cuda", "arch": args.arch}
    wls = bert_workloads()
    names = args.workloads.split(",")
    unknown = [n for n in names if n not in wls]
    if unknown:
        p.error(f"unknown workloads {unknown}; choose from {sorted(wls)}")
    t_range = wls[names[0]].t_range
    sampled = {s: sample_shapes(t_range, args.n_shapes, np.random.default_rng(s)) for s in range(args.seeds)}
    plan = {
        "target": target,
        "device_profile": args.device_profile,
        "t_range": list(t_range),
        "n_shapes": args.n_shapes,
        "sampled": {str(s): v for s, v in sampled.items()},
        "phase1_ts": sorted({t for v in sampled.values() for t in v}),
        "workloads": names,
    }
    with open(os.path.join(args.out, "plan.json"), "w") as f:
        json.dump(plan, f, indent=1)
    jobs = [(args.out, wls[n].to_json(), json.dumps(target), args.device_profile, args.per_module) for n in names]
    with ProcessPoolExecutor(args.jobs) as pool:
        for name, n, errors, secs in pool.map(_one, jobs):
            print(f"{name}: {n} kernels, {errors} not exported, {secs:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
