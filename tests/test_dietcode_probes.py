"""The DietCode probes' shared timing: each variant checked against numpy before it is timed, the knob template's
per-shape best and the kernels compiled for one T timed beside the micro-kernels, and the table saying where a log
holds no template kernel."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from benchmarks.dietcode import kernel_probe

COMMITTED = Path(__file__).parent.parent / "benchmarks/results/dietcode/zen4_paper_search/static_scores.jsonl"


def test_kernel_probe_times_the_static_template_beside_the_kernels(tmp_path: Path) -> None:
    log = tmp_path / "static.jsonl"  # the committed per-shape log, T = 5 only
    lines = [line for line in COMMITTED.read_text().splitlines() if json.loads(line)["task"][1][1] == 5]
    log.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    kernels = ["cpu:8x16x1/8x16", "cpu:8x16x1/8x16/unroll64"]
    argv = ["--workload", "scores", "--kernels", *kernels, "--t", "5", "7", "--rounds", "1"]
    assert kernel_probe.main([*argv, "--static-log", str(log), "--specialise", "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "kernel_probe.csv").open()))
    assert [r["T"] for r in rows] == ["5", "7"]
    assert float(rows[0]["static_us"]) > 0 and not rows[1]["static_us"]  # the log tuned T = 5 only
    assert all(float(r[f"{k}{at}_us"]) > 0 for r in rows for k in kernels for at in ("", "@T"))  # T bound too
    table = (out / "summary.md").read_text()
    assert "| `cpu:8x16x1/8x16/unroll64@T` | `static` | fastest |" in table
    assert table.rstrip().splitlines()[-1].count(" - ") == 1
