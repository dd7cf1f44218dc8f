"""AutoTVM's ``autotvm.record`` spelling of ``adatune.records``, with AutoTVM's ``pick_best(in_file, out_file)``.

``adatune.records.best_records(records, target)`` returns the best record per workload; AutoTVM's writes the
best record of each (target, workload) of ``in_file`` to ``out_file``, which is what an AutoTVM script run
with ``import adatune as autotvm`` expects of ``autotvm.record.pick_best``.
"""

from __future__ import annotations

import json
import os
from typing import IO

from . import records
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
    """Write the fastest valid record of each (target, workload) in ``in_file`` to ``out_file``, in log order
    (AutoTVM's ``pick_best``). A kept line carries its workload's stored form when ``in_file`` had it on
    another line, so the picked log stands alone as the full one does."""
    if isinstance(in_file, (str, os.PathLike)):
        with open(in_file, encoding="utf-8") as f:
            lines = f.read().splitlines()
    else:
        lines = in_file.read().splitlines()
    groups: dict[tuple[str, str], list[tuple[Record, int]]] = {}
    stored: dict[str, dict] = {}  # workload key -> its stored form, from whichever line held it
    for lineno, line in enumerate(lines):
        try:
            rec = decode(line)
        except (ValueError, KeyError, TypeError):  # blank or corrupt (load_from_file warns of those)
            continue
        if '"workload"' in line:
            form = json.loads(line).get("workload")
            if isinstance(form, dict):
                stored.setdefault(rec.workload_key, form)
        if rec.result.ok:
            groups.setdefault((json.dumps(rec.target, sort_keys=True), rec.workload_key), []).append((rec, lineno))
    kept = []
    for group in groups.values():  # the one rule of ``adatune.records.best_records`` (confirmations included)
        winner = next(iter(records.best_records(r for r, _ in group).values()), None)
        kept += [i for r, i in group if r is winner]
    out, written = [], set()
    for i in sorted(kept):
        line, wkey = lines[i], decode(lines[i]).workload_key
        if wkey in stored and wkey not in written and '"workload"' not in line:
            line = json.dumps({**json.loads(line), "workload": stored[wkey]}, separators=(",", ":"))
        written.add(wkey)
        out.append(line + "\n")
    text = "".join(out)
    if isinstance(out_file, (str, os.PathLike)):
        with open(out_file, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        out_file.write(text)
        out_file.flush()
