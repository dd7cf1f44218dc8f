"""The DietCode probes' shared timing: each variant checked against numpy before it is timed, the knob template's
per-shape best and the kernels compiled for one T timed beside the micro-kernels, and the table saying where a log
holds no template kernel."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

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


def test_tail_probe_kernels_compute_every_column_and_its_table_is_written(tmp_path: Path) -> None:
    import numpy as np
    import tvm

    from adatune import target as _target
    from adatune.dietcode import DynamicWorkload, MicroKernel
    from benchmarks.dietcode import tail_probe

    tgt = _target.host()
    wl = DynamicWorkload("scores", "bmm_nt", (2, 16))
    rng = np.random.default_rng(0)
    body = MicroKernel.from_key("cpu:16x64x4/8x32")
    for w in tail_probe.tail_widths(tgt):
        with tgt:
            lib = tvm.compile(tail_probe.tail_schedule(2, 16, body, w).mod, target=tgt)
        for t in (1, 7, 31, 32, 33, 40, 63, 64, 70):  # below, at and past the body's 32 columns, several tails
            a, b = wl.random_inputs(t, rng)
            c = tvm.runtime.tensor(np.full((2, t, t), np.nan, "float32"))
            lib["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c, t)
            np.testing.assert_allclose(c.numpy(), wl.reference(a, b), rtol=1e-4, atol=1e-4, err_msg=f"w={w} T={t}")
    with pytest.raises(ValueError, match="must divide"):
        tail_probe.tail_schedule(2, 16, body, 24)
    out = tmp_path / "out"
    argv = ["--bodies", "cpu:16x64x4/8x32", "--kernels", "cpu:16x64x4/8x32", "--t", "5", "40", "--rounds", "1"]
    assert tail_probe.main([*argv, "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "tail_probe.csv").open()))
    assert [r["T"] for r in rows] == ["5", "40"]
    assert all(float(r["torch_us"]) > 0 and float(r["cpu:16x64x4/8x32_vs_torch"]) > 0 for r in rows)
    table = (out / "summary.md").read_text()
    assert "| 40 |" in table and "Best tail kernel over best shipped kernel" in table
