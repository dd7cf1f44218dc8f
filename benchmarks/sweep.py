"""Exhaustive sweep: measure every config of a (small) workload's space with the project's own runner.

The log feeds ``ReplayRunner``, so strategies can be compared in trials over many seeds quickly.
Re-running resumes: configs already in the log are skipped.

    python -m benchmarks.sweep --workload conv2d-resnet18-L6-small --out benchmarks/data/conv2d-resnet18-L6-small.jsonl
"""

from __future__ import annotations

import argparse
import os
import time

import adatune
from adatune.measure import MeasureInput
from adatune.records import load_from_file, save_to_file
from adatune.workloads import get as get_workload


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", default="conv2d-resnet18-L6-small")
    p.add_argument("--out", default=None)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--number", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    out = args.out or f"benchmarks/data/{args.workload}.jsonl"
    os.makedirs(os.path.dirname(out), exist_ok=True)
    task = get_workload(args.workload).create_task(adatune.target.host())
    done = {r.config_index for r in load_from_file(out)} if os.path.exists(out) else set()
    todo = [i for i in range(len(task.config_space)) if i not in done and task.config_space.is_index_valid(i)]
    print(f"{task}: {len(done)} done, {len(todo)} to measure -> {out}")
    option = adatune.measure_option(adatune.LocalBuilder(), adatune.LocalRunner(number=args.number, repeat=args.repeat))
    t0 = time.time()
    for start in range(0, len(todo), args.batch):
        inputs = [MeasureInput(task, task.config_space.get(i)) for i in todo[start : start + args.batch]]
        save_to_file(out, zip(inputs, option.measure(inputs)))
        n = start + len(inputs)
        print(f"{n}/{len(todo)} measured, {time.time() - t0:.0f} s", flush=True)
    option.close()


if __name__ == "__main__":
    main()
