"""Re-time every scheme's best kernels side by side on the GPU machine, with cuBLAS/cuDNN between passes.

A tuning round times each scheme's candidates in its own run, minutes apart; the final comparison should not rest on
that. ``make_retime`` exports, per workload, the union of each scheme's ``top`` fastest logged kernels as one batch and
a run.sh that times that batch and the PyTorch reference in ``passes`` alternating passes; ``retime_table`` reports each
scheme's best kernel (the median over passes of its per-pass median) beside PyTorch's.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
from collections.abc import Sequence

from adatune import records
from adatune.cuda_export import export_batch, write_reference
from adatune.measure.device_limits import profile
from adatune.templates import workloads

from .rounds import log_path, rounds, safe, script_header, task_for, write_round

__all__ = ["ingest_retime", "make_retime", "retime_table"]

RETIME_FLAGS = "--number 100 --repeat 10 --jobs 12"


def make_retime(
    state: str, names: Sequence[str], schemes: Sequence[str], top: int, passes: int, arch: str, device_profile: str
) -> str:
    """Export the re-timing round (``round-<k>`` with a ``retime.json`` naming which kernels are whose)."""
    if top < 1 or passes < 1:
        raise ValueError(f"top and passes must be at least 1, got {top} and {passes}")
    k = (rounds(state) or [0])[-1] + 1
    root = os.path.join(state, f"round-{k}")
    limits = profile(device_profile)
    picked: dict[str, dict[str, list[str]]] = {}
    shapes: dict[str, list] = {}
    lines = script_header(k)
    for name in names:
        task, wl = task_for(name, arch), safe(name)
        best: dict[str, object] = {}
        picked[wl] = {}
        for s in schemes:
            log = log_path(state, name, s)
            found = records.load_from_file(log) if os.path.exists(log) else []
            recs = sorted((r for r in found if r.result.ok), key=lambda r: r.cost)
            picked[wl][s] = [r.key for r in recs[:top]]
            for r in recs[:top]:
                best.setdefault(r.key, task.candidate_from_json(r.config))
        if not best:
            raise ValueError(f"no measured kernels of {name} in {state}/logs: run tuning rounds first")
        spec = workloads.get(name)
        shapes[wl] = [spec.op, list(spec.task_args(task.target))]
        os.makedirs(os.path.join(root, wl), exist_ok=True)
        write_reference(task, os.path.join(root, wl, "reference.npz"))
        export_batch(task, list(best.values()), os.path.join(root, wl, "best"), limits, reference="../reference.npz")
    for p in range(1, passes + 1):  # kernels, then PyTorch, alternating: a slow minute hits both
        for wl in picked:
            lines += [
                f'mkdir -p "$OUT/{wl}"',
                f'python3 "$HERE/cupy_runner.py" "$HERE/{wl}/best" --out "$OUT/{wl}/pass-{p}.jsonl" {RETIME_FLAGS}',
            ]
        lines.append(f'python3 "$HERE/torch_reference.py" "$HERE" --out "$OUT/torch_reference-{p}.json"')
    write_round(root, shapes, lines)
    with open(os.path.join(root, "retime.json"), "w") as f:
        json.dump({"top": top, "passes": passes, "picked": picked}, f, indent=1)
    return root


def ingest_retime(state: str, k: int, results: str) -> list[str]:
    """Copy re-timing round ``k``'s pass files from ``results`` to ``<state>/retime/round-<k>``."""
    root = os.path.join(state, f"round-{k}")
    if not os.path.exists(os.path.join(root, "retime.json")):
        raise ValueError(f"round {k} in {state} is not a re-timing round")
    dest = os.path.join(state, "retime", f"round-{k}")
    os.makedirs(dest, exist_ok=True)
    shutil.copyfile(os.path.join(root, "retime.json"), os.path.join(dest, "retime.json"))
    copied = []
    for dirpath, _, files in os.walk(results):
        for file in files:
            if file.startswith(("pass-", "torch_reference-")) or file == "gpu_env.txt":
                rel = os.path.relpath(os.path.join(dirpath, file), results)
                os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
                shutil.copyfile(os.path.join(dirpath, file), os.path.join(dest, rel))
                copied.append(rel)
    return sorted(copied)


def retime_table(state: str, k: int) -> str:
    """Markdown: per workload, each scheme's best re-timed kernel and PyTorch's, in GFLOPS and as a ratio."""
    dest = os.path.join(state, "retime", f"round-{k}")
    with open(os.path.join(dest, "retime.json")) as f:
        meta = json.load(f)
    torch: dict[str, list[float]] = {}
    for p in range(1, meta["passes"] + 1):
        path = os.path.join(dest, f"torch_reference-{p}.json")
        if os.path.exists(path):
            with open(path) as f:
                for wl, sec in json.load(f)["seconds"].items():
                    torch.setdefault(wl, []).append(float(sec))
    rows = [
        f"Re-timed round {k}: each scheme's {meta['top']} fastest logged kernels, {meta['passes']} passes "
        "alternating with PyTorch (median over passes of each kernel's median; CUDA graphs, float32, no TF32).",
        "",
        "| workload | scheme | best kernel us (passes) | GFLOPS | vs PyTorch | PyTorch us (passes) |",
        "|---|---|---|---|---|---|",
    ]
    for wl, by_scheme in meta["picked"].items():
        per_key: dict[str, list[float]] = {}
        flop = 0.0
        for p in range(1, meta["passes"] + 1):
            path = os.path.join(dest, wl, f"pass-{p}.jsonl")
            for r in records.load_from_file(path) if os.path.exists(path) else []:
                flop = float(r.input.task.flop)
                if r.result.ok:
                    per_key.setdefault(r.key, []).append(r.cost)
        ref = statistics.median(torch[wl]) if wl in torch else None
        shown_ref = f"{ref * 1e6:.2f} ({', '.join(f'{t * 1e6:.2f}' for t in torch[wl])})" if ref else "not measured"
        for scheme, keys in by_scheme.items():
            costs = {key: statistics.median(per_key[key]) for key in keys if key in per_key}
            if not costs:
                rows.append(f"| {wl} | {scheme} | not measured | | | {shown_ref} |")
                continue
            key = min(costs, key=lambda k: costs[k])
            best, spread = costs[key], f"{min(per_key[key]) * 1e6:.2f}-{max(per_key[key]) * 1e6:.2f}"
            ratio = f"{ref / best:.2f}x" if ref else ""
            rows.append(
                f"| {wl} | {scheme} | {best * 1e6:.2f} ({spread}) | {flop / best / 1e9:.0f} | {ratio} | {shown_ref} |"
            )
    return "\n".join(rows) + "\n"
