"""Export every CUDA micro-kernel of BERT's six dynamic GEMMs for a GPU machine without TVM.

DietCode's kernels are shape-generic: one build serves every T (T is the kernel's last, scalar argument) and only the
launch grid follows T. So each kernel is exported once, as TVM's CUDA source, with its block and its grid over the
range. The sources share TVM's preamble; they are bundled per workload into modules of ``--per-module`` kernels (renamed
``k<index>``) so nvcc builds a few dozen modules there instead of thousands. Written (``--out``, gzip JSON):

- ``plan.json``: target, device profile, the T the tuner samples for each seed (phase 1 measures every kernel at their
  union), the range, and the workloads;
- ``<workload>.json.gz``: the kernels (key, block, grid per T, module index) and the modules' sources;
- ``cupy_runner.py`` and the rule file it loads: adatune's one standalone GPU runner (``copy_runner``).

Run there: ``python BATCH/cupy_runner.py plan BATCH --out $OUT``; here, ``python -m benchmarks.gpu.dietcode_report``.
"""

from __future__ import annotations

import argparse
import dataclasses
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

from adatune.cuda_export import cupy_runner
from adatune.cuda_export._kernel import parse_kernels
from adatune.dietcode import MicroKernel
from adatune.dietcode._cost import sample_shapes
from adatune.dietcode._schedule import schedule_microkernel, split_k_error
from adatune.dietcode._task import microkernel_space
from adatune.dietcode._workloads import DynamicWorkload, bert_workloads
from adatune.measure.device_limits import profile

__all__ = ["export_workload", "kernel_grid", "kernel_launches", "main", "workspace_bytes"]

_DECL = re.compile(r'extern\s+"C"\s+__global__')
_MAIN = re.compile(r"\bmain_kernel(_\d+)?\b")


def kernel_launches(sch: tvm.s_tir.Schedule, ts: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """``(grid_x at each T of ts, block)`` of each kernel of a scheduled shape-generic function, in the order TVM
    emits them (one per loop nest under the root; a split-K kernel has two). Only ``blockIdx.x`` may vary."""
    t_var = sch.mod["main"].params[-1]
    nests: dict[int, list[tuple[str, Any]]] = {}
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        loops = [sch.get(loop) for loop in sch.get_loops(block)]
        nest = nests.setdefault(hash(loops[0]), [])  # blocks under one outermost loop: one kernel
        nest.extend(
            (str(loop.thread_binding.thread_tag), loop.extent) for loop in loops if loop.thread_binding is not None
        )
    out = []
    for found in nests.values():
        extents = {tag: ext for tag, ext in found if not tag.startswith("vthread")}  # virtual: inside a thread
        bad = sorted(set(extents) - {"blockIdx.x", "threadIdx.x", "threadIdx.y", "threadIdx.z"})
        if bad:
            raise ValueError(f"the kernel binds {bad}; the exporter launches blockIdx.x grids only")
        block = [int(extents.get(f"threadIdx.{a}", 1)) for a in "xyz"]  # ValueError if a thread extent follows T
        grid = []
        for t in ts:
            ana = tvm.sym.Analyzer()
            ana.bind(t_var, tvm.tirx.IntImm("int32", int(t)))
            grid.append(int(ana.simplify(extents["blockIdx.x"])))
        out.append((grid, block))
    return out


def kernel_grid(sch: tvm.s_tir.Schedule, ts: Sequence[int]) -> tuple[list[int], list[int]]:
    """``(grid_x at each T of ts, block)`` of a one-kernel shape-generic function."""
    launches = kernel_launches(sch, ts)
    if len(launches) != 1:
        raise ValueError(f"the function launches {len(launches)} kernels; use kernel_launches")
    return launches[0]


def workspace_bytes(sch: tvm.s_tir.Schedule, t: int) -> dict[str, int]:
    """``{kernel parameter: bytes at T = t}``: buffers TVM's host code allocates between kernels (split-K's parts)."""
    func = sch.mod["main"]
    ana = tvm.sym.Analyzer()
    ana.bind(func.params[-1], tvm.tirx.IntImm("int32", int(t)))
    out = {}
    for buf in func.body.block.alloc_buffers:
        if buf.scope() == "global":
            n = 1
            for dim in buf.shape:
                n *= int(ana.simplify(dim))
            out[f"{buf.name.replace('.', '_')}_ptr"] = n * tvm.DataType(buf.dtype).bits // 8  # as TVM names it
    return out


def _split_source(source: str) -> tuple[str, str]:
    """(TVM's preamble, the kernels' declarations and definitions) of a function's source."""
    m = _DECL.search(source)
    if m is None:
        raise ValueError("expected a CUDA kernel in TVM's source")
    return source[: m.start()], source[m.start() :]


def export_workload(
    wl: DynamicWorkload,
    target: tvm.target.Target,
    limits_name: str,
    per_module: int,
    keys: Sequence[str] = (),
    split_k: Sequence[int] = (1,),
    interleave: Sequence[bool] = (False,),
    smem: Sequence[str] = ("",),
) -> dict:
    """Every micro-kernel of ``wl``'s CUDA space (or those of ``keys``) as source bundles, blocks and grids over
    its T range; ``split_k``, ``interleave``: the space's CUDA options (``MicroKernelSpace``)."""
    space = microkernel_space(wl, target, split_k, profile(limits_name), interleave, smem)
    chosen = [space.get(k) for k in keys] if keys else space.kernels
    lo, hi = wl.t_range
    ts = list(range(lo, hi + 1))
    preamble: str | None = None
    bodies: list[str] = []
    kernels: list[dict[str, Any]] = []
    t0 = time.time()
    for mk in chosen:
        entry: dict[str, Any] = {"key": mk.key}
        try:
            sch = schedule_microkernel(wl, mk)
            with tvm.transform.PassContext(config={"tirx.disable_cse_tir": True}):  # T stays the only scalar
                with target:
                    lib = tvm.tirx.build(sch.mod, target)
            source = next(str(m.inspect_source("")) for m in lib.imports)
            found = parse_kernels(source)
            launches = kernel_launches(sch, ts)
            workspace = workspace_bytes(sch, ts[-1])
            if len(found) != len(launches):
                raise ValueError(f"{len(found)} kernels in the source, {len(launches)} loop nests bound to threads")
            for _, _, params in found:
                if not {"T", "C_ptr"} & set(params) or set(params) - {"A_ptr", "B_ptr", "C_ptr", "T"} - set(workspace):
                    raise ValueError(f"unexpected kernel parameters {params}")
            pre, body = _split_source(source)
            if preamble is None:
                preamble = pre
            elif pre != preamble:
                raise ValueError("TVM's preamble differs from the other kernels'")
            index = len(bodies)
            entry["launches"] = [
                {"name": name.replace("main_kernel", f"k{index}"), "grid": grid, "block": block, "params": params}
                for (name, _, params), (grid, block) in zip(found, launches)
            ]
            entry["grid"], entry["block"] = launches[0]
            entry["workspace"] = sum(workspace.values())
            entry["index"] = index
            bodies.append(_MAIN.sub(rf"k{index}\1", body))
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


def best_keys(results: str, name: str, top: int) -> list[str]:
    """The kernels among the ``top`` fastest at any phase-1 T of an earlier run (the runner's plan mode's
    ``results.npz``), in the space's order: where a new option (split-K) is tried on kernels known to be good."""
    with np.load(os.path.join(results, "results.npz")) as z:
        keys = [str(k) for k in z[f"{name}/keys"]]
        ok = z[f"{name}/p1_error"] == 0
        med = np.where(ok, np.nanmedian(np.where(ok[..., None], z[f"{name}/p1_seconds"], np.inf), axis=2), np.inf)
    picked = {int(i) for col in range(med.shape[1]) for i in np.argsort(med[:, col])[:top] if np.isfinite(med[i, col])}
    return [keys[i] for i in sorted(picked)]


def _one(job: dict[str, Any]) -> tuple[str, int, int, float]:
    wl = DynamicWorkload.from_json(job["workload"])
    split_k, interleave, smem, also = job["split_k"], job["interleave"], job["smem"], job["also"]
    keys: list[str] = []
    if job["from_run"]:  # each split that applies (split_k_error: none where the reduction follows T)
        base = [MicroKernel.from_key(k) for k in best_keys(job["from_run"], wl.name, job["from_top"])]
        variants = [
            dataclasses.replace(k, split_k=s, interleave=v, smem=m)
            for m in smem
            for v in interleave
            for s in split_k
            for k in base
        ]
        keys = [k.key for k in variants if not split_k_error(wl, k)]
    keys += [k for k in also if k not in keys]  # exactly these kernels (with --from-run, as well)
    target = tvm.target.Target(job["target"])
    data = export_workload(wl, target, job["profile"], job["per_module"], keys, split_k, interleave, smem)
    out = job["out"]
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
    p.add_argument("--split-k", default="1", help="split-K parts the space offers (comma separated, SPLIT_K)")
    p.add_argument("--interleave", action="store_true", help="the space's kernels also with interleaved threads")
    p.add_argument(
        "--smem", default="", help="shared-memory layouts the space offers (comma separated, SMEM_LAYOUTS; '' as read)"
    )
    p.add_argument("--from-run", default="", help="an earlier run's results: export only its best kernels ...")
    p.add_argument("--from-top", type=int, default=4, help="... the top N at any phase-1 T, with each --split-k")
    p.add_argument("--also-keys", default="", help="JSON {workload: [key]}: exported as well (alone: only these)")
    args = p.parse_args(argv)
    also: dict[str, list[str]] = {}
    if args.also_keys:
        with open(args.also_keys) as f:
            also = json.load(f)
    split_k = [int(s) for s in args.split_k.split(",")]
    interleave = [False, True] if args.interleave else [False]
    smem = args.smem.split(",")
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
        "split_k": split_k,
        "interleave": interleave,
        "smem": smem,
        "from_run": {"results": args.from_run, "top": args.from_top} if args.from_run else None,
    }
    with open(os.path.join(args.out, "plan.json"), "w") as f:
        json.dump(plan, f, indent=1)
    cupy_runner.copy_runner(args.out)
    jobs = [
        {"out": args.out, "workload": wls[n].to_json(), "target": target, "profile": args.device_profile,
         "per_module": args.per_module, "split_k": split_k, "interleave": interleave, "smem": smem,
         "from_run": args.from_run, "from_top": args.from_top, "also": also.get(n, [])}
        for n in names
    ]  # fmt: skip
    with ProcessPoolExecutor(args.jobs) as pool:
        for name, n, errors, secs in pool.map(_one, jobs):
            print(f"{name}: {n} kernels, {errors} not exported, {secs:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
