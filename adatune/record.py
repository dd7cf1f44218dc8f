"""AutoTVM's ``autotvm.record`` spelling of ``adatune.records``, with AutoTVM's ``pick_best(in_file, out_file)``.

``adatune.records.pick_best(records, target)`` returns the best record per workload; AutoTVM's writes the
best record of each (target, workload) of ``in_file`` to ``out_file``, which is what an AutoTVM script run
with ``import adatune as autotvm`` expects of ``autotvm.record.pick_best``.
"""

from __future__ import annotations

import json
import os
from typing import IO

from .records import (
    Record,
    decode,
    encode,
    load_from_buffer,
    load_from_file,
    measure_str_key,
    save_to_file,
)

__all__ = [
    "Record",
    "encode",
    "decode",
    "load_from_file",
    "load_from_buffer",
    "save_to_file",
    "measure_str_key",
    "pick_best",
]


def pick_best(in_file: str | os.PathLike | IO[str], out_file: str | os.PathLike | IO[str]) -> None:
    """Write the fastest valid record of each (target, workload) in ``in_file`` to ``out_file``, in log order,
    each line as it was written (AutoTVM's ``pick_best``)."""
    if isinstance(in_file, (str, os.PathLike)):
        with open(in_file, encoding="utf-8") as f:
            lines = f.read().splitlines()
    else:
        lines = in_file.read().splitlines()
    best: dict[tuple[str, str], tuple[float, int]] = {}
    for lineno, line in enumerate(lines):
        try:
            rec = decode(line)
        except (ValueError, KeyError, TypeError):  # blank or corrupt (load_from_file warns of those)
            continue
        if rec.result.ok:
            key = (json.dumps(rec.target, sort_keys=True), rec.workload_key)
            if key not in best or rec.mean_cost < best[key][0]:
                best[key] = (rec.mean_cost, lineno)
    text = "".join(lines[i] + "\n" for i in sorted(i for _, i in best.values()))
    if isinstance(out_file, (str, os.PathLike)):
        with open(out_file, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        out_file.write(text)
        out_file.flush()
