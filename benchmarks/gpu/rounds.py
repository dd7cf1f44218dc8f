"""Round-by-round GPU tuning: export each scheme's next candidates, ingest what the GPU machine measured, and report."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass

from adatune import records
from adatune import target as _target
from adatune.cuda_export import cupy_runner, export_batch, write_reference
from adatune.measure.device_limits import profile
from adatune.templates import workloads
from adatune.tuners import create_tuner

from .._common import pyplot, save_figure
from . import torch_reference


@dataclass(frozen=True)
class Scheme:
    """A tuner and the evaluator its candidates are timed with on the GPU machine."""

    tuner: str
    min_converge_coef: float | None = None


SCHEMES = {
    "xgb": Scheme("xgb"),
    "rfei": Scheme("rfei"),
    "rfei-ae": Scheme("rfei", 0.1),
    "release": Scheme("release"),
}
DEFAULT_WORKLOADS = ("dense-1024", "bmm-bert-nt", "conv2d-resnet18-L6")
# timing on the GPU machine: the deterministic schemes spend the whole cap, the adaptive one stops early
RUNNER_FLAGS = "--number 20 --repeat 5 --micro-batch 10 --jobs 12"


def safe(name: str) -> str:
    """A workload name or spec as a folder name."""
    return re.sub(r"[^\w.-]", "_", name)


def log_path(state: str, workload: str, scheme: str) -> str:
    return os.path.join(state, "logs", safe(workload), f"{scheme}.jsonl")


def rounds(state: str) -> list[int]:
    found = [re.fullmatch(r"round-(\d+)", d) for d in os.listdir(state)] if os.path.isdir(state) else []
    return sorted(int(m.group(1)) for m in found if m)


def task_for(workload: str, arch: str):  # noqa: ANN202
    return workloads.get(workload).create_task(_target.cuda(arch))


def make_round(
    state: str, names: Sequence[str], schemes: Sequence[str], n: int, arch: str, seed: int, device_profile: str | None
) -> str:
    """Export each (workload, scheme)'s next ``n`` candidates into a new ``round-<k>`` folder with its run.sh."""
    for s in schemes:
        if s not in SCHEMES:
            raise ValueError(f"unknown scheme {s!r}: choose from {', '.join(SCHEMES)}")
    k = (rounds(state) or [0])[-1] + 1
    root = os.path.join(state, f"round-{k}")
    limits = profile(device_profile) if device_profile else None
    lines = script_header(k)
    shapes = {}
    for name in names:
        task = task_for(name, arch)
        wl = workloads.get(name)
        shapes[safe(name)] = [wl.op, list(wl.task_args(task.target))]
        os.makedirs(os.path.join(root, safe(name)), exist_ok=True)
        write_reference(task, os.path.join(root, safe(name), "reference.npz"))  # one copy for every scheme
        for s in schemes:
            scheme = SCHEMES[s]
            tuner = create_tuner(scheme.tuner, task, seed=seed + k)
            log = log_path(state, name, s)
            if os.path.exists(log):
                tuner.load_history(records.load_from_file(log))
            cands = tuner.next_batch(n)
            if not cands:
                continue
            rel = os.path.join(safe(name), s)
            export_batch(task, cands, os.path.join(root, rel), limits, reference="../reference.npz")
            flags = RUNNER_FLAGS + (
                f" --min-converge-coef {scheme.min_converge_coef}" if scheme.min_converge_coef else ""
            )
            lines += [
                f'mkdir -p "$OUT/{rel}"',
                f'python3 "$HERE/cupy_runner.py" "$HERE/{rel}" --out "$OUT/{rel}/results.jsonl" {flags}',
            ]
    lines.append(
        'python3 "$HERE/torch_reference.py" "$HERE" --out "$OUT/torch_reference.json" || echo "no PyTorch reference"'
    )
    write_round(root, shapes, lines)
    return root


def script_header(k: int) -> list[str]:
    """The first lines of round ``k``'s run.sh."""
    return [
        "#!/bin/sh",
        f"# round {k}: run on the GPU machine (python3 with numpy and CuPy; PyTorch for the reference)",
        "# usage: sh run.sh [OUT_DIR]   (results go under OUT_DIR, default this folder)",
        "set -e",
        'HERE="$(cd "$(dirname "$0")" && pwd)"',
        'OUT="${1:-$HERE}"',
    ]


def write_round(root: str, shapes: dict, lines: list[str]) -> None:
    """The round's shapes.json, run.sh and the two standalone scripts it runs."""
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "shapes.json"), "w") as f:
        json.dump(shapes, f, indent=1)
    cupy_runner.copy_runner(root)
    shutil.copyfile(torch_reference.__file__, os.path.join(root, "torch_reference.py"))
    with open(os.path.join(root, "run.sh"), "w") as f:
        f.write("\n".join(lines) + "\n")


def ingest(state: str, k: int, results: str | None) -> dict[str, int]:
    """Append round ``k``'s result records to each scheme's log (keys already there are skipped)."""
    root = os.path.join(state, f"round-{k}")
    if not os.path.isdir(root):
        raise ValueError(f"no round {k} in {state}")
    src = results or root
    added: dict[str, int] = {}
    for wl in sorted(os.listdir(root)):
        if not os.path.isdir(os.path.join(root, wl)):
            continue
        for scheme in sorted(os.listdir(os.path.join(root, wl))):
            found = os.path.join(src, wl, scheme, "results.jsonl")
            if not os.path.exists(found):
                continue
            log = os.path.join(state, "logs", wl, f"{scheme}.jsonl")
            known = {r.key for r in records.load_from_file(log)} if os.path.exists(log) else set()
            os.makedirs(os.path.dirname(log), exist_ok=True)
            fresh = [r for r in records.load_from_file(found) if r.key not in known]
            with open(found) as f, open(log, "a") as out:
                by_key = {json.loads(line)["key"]: line for line in f if line.strip()}
                for r in fresh:
                    out.write(by_key[r.key].rstrip("\n") + "\n")
            added[f"{wl}/{scheme}"] = len(fresh)
    ref = os.path.join(src, "torch_reference.json")
    if os.path.exists(ref) and os.path.abspath(ref) != os.path.abspath(os.path.join(root, "torch_reference.json")):
        shutil.copyfile(ref, os.path.join(root, "torch_reference.json"))
    return added


def torch_seconds(state: str) -> dict[str, float]:
    """PyTorch's seconds per workload, the latest tuning round's reading of each."""
    refs: dict[str, float] = {}
    for k in rounds(state):
        path = os.path.join(state, f"round-{k}", "torch_reference.json")
        if os.path.exists(path):
            with open(path) as f:
                refs.update(json.load(f)["seconds"])
    return refs


def report(state: str) -> str:
    """Markdown: per workload and scheme, trials, valid trials and best GFLOPS; PyTorch's for reference."""
    logs = os.path.join(state, "logs")
    refs = torch_seconds(state)
    rows = ["| workload | scheme | trials | valid | best GFLOPS | PyTorch GFLOPS |", "|---|---|---|---|---|---|"]
    for wl in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        for file in sorted(os.listdir(os.path.join(logs, wl))):
            recs = list(records.load_from_file(os.path.join(logs, wl, file)))
            if not recs:
                continue
            flop = float(recs[0].input.task.flop)
            valid = [r for r in recs if r.result.ok]
            best = max((r.result.flops(flop) for r in valid), default=0.0)
            ref = f"{flop / refs[wl] / 1e9:.1f}" if wl in refs else "not yet measured"
            shown = f"{best / 1e9:.1f}" if valid else "not yet measured"
            rows.append(f"| {wl} | {file[: -len('.jsonl')]} | {len(recs)} | {len(valid)} | {shown} | {ref} |")
    if len(rows) == 2:
        rows.append("| (all) | (all) | 0 | 0 | not yet measured | not yet measured |")
    return "\n".join(rows) + "\n"


def plot(state: str) -> str | None:
    """``tuning.png``: best-so-far GFLOPS against trials, a panel per workload, PyTorch's as a dashed line."""
    logs = os.path.join(state, "logs")
    names = sorted(os.listdir(logs)) if os.path.isdir(logs) else []
    if not names:
        return None
    refs = torch_seconds(state)
    fig, axes = pyplot().subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
    for ax, wl in zip(axes[0], names):
        flop = 0.0
        for file in sorted(os.listdir(os.path.join(logs, wl))):
            recs = list(records.load_from_file(os.path.join(logs, wl, file)))
            if not recs:
                continue
            flop = float(recs[0].input.task.flop)
            best, curve = 0.0, []
            for r in recs:
                best = max(best, r.result.flops(flop) / 1e9 if r.result.ok else 0.0)
                curve.append(best)
            ax.plot(range(1, len(curve) + 1), curve, label=file[: -len(".jsonl")])
        if wl in refs and flop:
            ax.axhline(flop / refs[wl] / 1e9, ls="--", color="k", label="PyTorch (cuBLAS/cuDNN)")
        ax.set(title=wl, xlabel="trials", ylabel="best GFLOPS so far")
        ax.legend(fontsize=8)
    return save_figure(fig, state, "tuning.png")
