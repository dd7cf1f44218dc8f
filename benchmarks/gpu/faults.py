"""Faults planted in a real exported batch, to check on the GPU machine that the runner survives them.

``python -m benchmarks.gpu.faults SRC_BATCH DEST`` copies an exported batch (its manifest, kernels and runner;
the reference it names is copied beside it) and plants one fault in each of its first kernels after the first:
an illegal address, a hang, a source NVRTC rejects, and a clobbered output. ``sh DEST/run.sh OUT`` there runs
the batch with 4 children compiling at once and prints each record's error kind: the planted ones must come back
as RUNTIME_DEVICE (4), RUN_TIMEOUT (7), COMPILE_DEVICE (3) and WRONG_ANSWER (5), every other kernel measured.
The fake launcher of the test suite exercises the same paths without a GPU; this is the real thing.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable

__all__ = ["FAULTS", "make_fault_batch"]


def _kernel_body(source: str) -> int:
    """Index just past the opening brace of ``main_kernel``'s definition (the source declares it first)."""
    head = source.index('extern "C" __global__', source.index("main_kernel") + len("main_kernel"))
    return source.index("{", source.index("main_kernel(", head)) + 1


def _at_start(code: str) -> Callable[[str], str]:
    return lambda s: s[: _kernel_body(s)] + code + s[_kernel_body(s) :]


def _at_end(code: str) -> Callable[[str], str]:
    return lambda s: s[: s.rindex("}")] + code + s[s.rindex("}") :]


#: (error kind expected, edit of the kernel's source); the hang spins on an atomic the compiler must keep
FAULTS: list[tuple[int, Callable[[str], str]]] = [
    (4, _at_start("\n  if (threadIdx.x == 0) { ((float*)0x10)[blockIdx.x] = 1.0f; }\n")),
    (7, _at_start("\n  while (atomicAdd((int*)C_ptr, 0) != 0x7fffffff) { }\n")),
    (3, _at_start("\n  this_is_not_cuda;\n")),
    (
        5,
        _at_end(
            "\n  __syncthreads();\n  if (threadIdx.x == 0 && threadIdx.y == 0 && blockIdx.x == 0 && blockIdx.y == 0)"
            " { C_ptr[0] = 12345.0f; }\n"
        ),
    ),  # fmt: skip
]

RUN_SH = """#!/bin/sh
# planted faults: each record's key, error kind and message; see benchmarks/gpu/faults.py
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$HERE}"
python3 "$HERE/batch/cupy_runner.py" "$HERE/batch" --out "$OUT/faults.jsonl" --number 20 --repeat 5 \\
    --jobs 4 --timeout 15
python3 -c 'import json,sys; [print(r["key"], r["result"]["error_no"], (r["result"].get("error_msg") or "")[:90]) \
for r in map(json.loads, open(sys.argv[1]))]' "$OUT/faults.jsonl"
"""


def make_fault_batch(src: str, dest: str) -> dict[str, int]:
    """Copy batch ``src`` to ``dest/batch`` with the faults planted; returns {kernel key: expected error kind}."""
    with open(os.path.join(src, "manifest.json")) as f:
        manifest = json.load(f)
    runnable = [c for c in manifest["candidates"] if "source" in c]
    if len(runnable) < len(FAULTS) + 1:
        raise ValueError(f"{src} has {len(runnable)} runnable kernels; faults need at least {len(FAULTS) + 1}")
    shutil.copytree(src, os.path.join(dest, "batch"))
    ref = os.path.normpath(os.path.join(src, manifest["reference"]))
    shutil.copyfile(ref, os.path.normpath(os.path.join(dest, "batch", manifest["reference"])))
    expected = {}
    for cand, (kind, plant) in zip(runnable[1:], FAULTS):
        path = os.path.join(dest, "batch", cand["source"])
        with open(path) as f:
            source = f.read()
        with open(path, "w") as f:
            f.write(plant(source))
        expected[cand["key"]] = kind
    with open(os.path.join(dest, "run.sh"), "w") as f:
        f.write(RUN_SH)
    with open(os.path.join(dest, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    return expected


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python -m benchmarks.gpu.faults SRC_BATCH DEST", file=sys.stderr)
        raise SystemExit(2)
    print(make_fault_batch(sys.argv[1], sys.argv[2]))
