"""Round-by-round GPU tuning where the GPU machine has no TVM.

    python -m benchmarks.gpu round  --state benchmarks/results/gpu --n 32      # here: next candidates, exported
    bash benchmarks/results/gpu/round-1/run.sh $OUT                          # there: CuPy runner + PyTorch
    python -m benchmarks.gpu ingest --state benchmarks/results/gpu --round 1 --results <files from $OUT>
    python -m benchmarks.gpu report --state benchmarks/results/gpu             # GFLOPS per scheme and round

Each scheme keeps its own records log (``logs/<workload>/<scheme>.jsonl``); ``round`` recreates the scheme's
tuner, resumes it from that log and exports its ``next_batch``, so every scheme searches as it would locally.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from adatune import records, workloads
from adatune import target as _target
from adatune.cuda_export import cupy_runner, export_batch, write_reference
from adatune.devices import profile
from adatune.tuners import create_tuner

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


def _task(workload: str, arch: str):  # noqa: ANN202
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
    lines = [
        "#!/bin/sh",
        f"# round {k}: run on the GPU machine (python3 with numpy and CuPy; PyTorch for the reference)",
        "# usage: sh run.sh [OUT_DIR]   (results go under OUT_DIR, default this folder)",
        "set -e",
        'HERE="$(cd "$(dirname "$0")" && pwd)"',
        'OUT="${1:-$HERE}"',
    ]
    shapes = {}
    for name in names:
        task = _task(name, arch)
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
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "shapes.json"), "w") as f:
        json.dump(shapes, f, indent=1)
    shutil.copyfile(cupy_runner.__file__, os.path.join(root, "cupy_runner.py"))
    shutil.copyfile(torch_reference.__file__, os.path.join(root, "torch_reference.py"))
    lines.append(
        'python3 "$HERE/torch_reference.py" "$HERE" --out "$OUT/torch_reference.json" || echo "no PyTorch reference"'
    )
    with open(os.path.join(root, "run.sh"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return root


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


def report(state: str) -> str:
    """Markdown: per workload and scheme, trials, valid trials and best GFLOPS; PyTorch's for reference."""
    logs = os.path.join(state, "logs")
    refs: dict[str, float] = {}
    for k in rounds(state):
        path = os.path.join(state, f"round-{k}", "torch_reference.json")
        if os.path.exists(path):
            with open(path) as f:
                refs.update(json.load(f)["seconds"])
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


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.splitlines()[0] if __doc__ else "")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("round", help="export each scheme's next candidates as a new round")
    r.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    r.add_argument("--schemes", default=",".join(SCHEMES))
    r.add_argument("--n", type=int, default=32)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--device-profile", default="h100")
    i = sub.add_parser("ingest", help="append a measured round's records to the schemes' logs")
    i.add_argument("--round", type=int, required=True)
    i.add_argument("--results", help="folder the GPU machine wrote (default: the round's folder)")
    sub.add_parser("report", help="Markdown table of the logs")
    for q in (r, i, sub.choices["report"]):
        q.add_argument("--state", default="benchmarks/results/gpu")
        q.add_argument("--arch", default="sm_90")
    args = p.parse_args(argv)
    try:
        if args.command == "round":
            root = make_round(
                args.state,
                args.workloads.split(","),
                args.schemes.split(","),
                args.n,
                args.arch,
                args.seed,
                args.device_profile or None,
            )
            print(f"exported {root}; on the GPU machine: sh {root}/run.sh OUT_DIR")
        elif args.command == "ingest":
            for where, n in ingest(args.state, args.round, args.results).items():
                print(f"{where}: {n} records added")
        else:
            text = report(args.state)
            os.makedirs(args.state, exist_ok=True)
            with open(os.path.join(args.state, "summary.md"), "w") as f:
                f.write(text)
            print(text, end="")
    except (ValueError, KeyError, FileExistsError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
