"""The command line, end to end on a real (tiny) tuning run."""
from __future__ import annotations

import subprocess
import sys

from adatune.cli import main


def test_workloads_lists_builtins(capsys):
    assert main(["workloads"]) == 0
    out = capsys.readouterr().out
    for name in ("dense-1024", "bmm-bert-nt", "conv2d-resnet18-L6"):
        assert name in out


def test_tune_then_best_then_resume(tmp_path):
    log = str(tmp_path / "out.jsonl")
    def cmd(trials: int) -> list[str]:
        return [sys.executable, "-m", "adatune.cli", "tune", "--workload", "dense-bert-qkv", "--tuner", "random",
                "--trials", str(trials), "--log", log, "--number", "1", "--repeat", "1"]

    first = subprocess.run(cmd(6), capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "best:" in first.stdout and "GFLOPS" in first.stdout
    assert sum(1 for _ in open(log)) == 6
    # asking for 10 trials with 6 in the log measures only 4 more
    second = subprocess.run(cmd(10), capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "resuming: 6 configs" in second.stdout
    assert sum(1 for _ in open(log)) == 10
    assert main(["best", log]) == 0


def test_unknown_workload_is_named():
    proc = subprocess.run([sys.executable, "-m", "adatune.cli", "tune", "--workload", "nope", "--trials", "1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "unknown workload 'nope'" in proc.stderr
