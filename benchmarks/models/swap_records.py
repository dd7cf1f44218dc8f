"""One run with some tasks' records taken from another: an A/B of those layers alone, every other kernel the same.

A fresh tuning run moves every layer of a model, so its A/B against an earlier run mixes the change under test with
tuning noise in all the others. This assembles a ``benchmarks.models`` run directory from ``--base`` (its results
and records) plus the records of ``--donor`` whose task is ``--template`` with the given ``--arg INDEX=VALUE``
arguments, and the donor's import settings (its Winograd tile table), so ``run_ab --a BASE --b OUT`` times the base
model against itself with only those layers swapped. Used for ResNet-18's 512@7x7 layers as Winograd F(2x2):

    python -m benchmarks.models.swap_records --base benchmarks/results/models_zen3_resnet18_winograd_seed0 \\
        --donor benchmarks/results/models_zen3_resnet18_winograd_small_seed0 --template conv2d_winograd.x86 \\
        --arg 6=2 --out benchmarks/results/models_zen3_resnet18_winograd_seed0_f2_swap
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from adatune.models import MODEL_PREFIX

from .run_ab import run_config


def _arg(spec: str) -> tuple[int, int]:
    try:
        index, value = (int(x) for x in spec.split("="))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"an argument filter is INDEX=VALUE (integers), got {spec!r}") from err
    return index, value


def swapped(record: dict[str, Any], template: str, args: list[tuple[int, int]]) -> bool:
    """The record's task is ``template`` (the middle of ``model/<template>/<hash>``) with ``args`` as given."""
    name, task_args = record["task"]
    if not name.startswith(MODEL_PREFIX) or name[len(MODEL_PREFIX) :].split("/")[0] != template:
        return False
    return all(i < len(task_args) and task_args[i] == v for i, v in args)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.models.swap_records", description=__doc__)
    ap.add_argument("--base", required=True, help="the run whose records and results are kept")
    ap.add_argument("--donor", required=True, help="the run the swapped tasks' records come from")
    ap.add_argument("--template", required=True, help="template of the swapped tasks, e.g. conv2d_winograd.x86")
    ap.add_argument("--arg", type=_arg, nargs="*", default=[], help="INDEX=VALUE filters on the task's arguments")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    _, _, base_log, _ = run_config(a.base)
    _, _, donor_log, _ = run_config(a.donor)
    with open(os.path.join(a.base, "results.json"), encoding="utf-8") as f:
        results = json.load(f)
    with open(os.path.join(a.donor, "results.json"), encoding="utf-8") as f:
        donor_meta = json.load(f)["meta"]
    results["meta"]["winograd_tiles"] = donor_meta.get("winograd_tiles")
    results["meta"]["swap_note"] = (
        f"{a.base}'s results and records with the records of {a.template} tasks with arguments {a.arg} taken from "
        f"{a.donor}: the same kernels as the base everywhere else, for an A/B of those layers alone"
    )
    with open(donor_log, encoding="utf-8") as f:
        moved = [line for line in f if swapped(json.loads(line), a.template, a.arg)]
    if not moved:
        raise SystemExit(f"{a.donor} has no records of {a.template} tasks with arguments {a.arg}")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    with open(base_log, encoding="utf-8") as f, open(os.path.join(a.out, os.path.basename(base_log)), "w") as out:
        out.writelines(f.readlines() + moved)
    print(f"{len(moved)} records of {a.template} {a.arg} from {a.donor} added to {a.base}'s in {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
