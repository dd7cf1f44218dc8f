"""Importing adatune changes nothing in the host process: no environment writes, and no scikit-learn or xgboost
loaded until something uses them (TVM imports torch itself: that one is TVM's choice, checked here too)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = ("sklearn", "xgboost", "forestci", "joblib", "threadpoolctl", "matplotlib", "onnx", "onnxruntime")


def _fresh(code: str) -> dict:
    """Run ``code`` in a fresh interpreter (no TVM_NUM_THREADS / OMP_NUM_THREADS) and return its JSON output."""
    env = {k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _loaded_after(statement: str) -> dict:
    return _fresh(
        "import json, os, sys\n"
        "before = dict(os.environ)\n"
        f"{statement}\n"
        "changed = {k: v for k, v in os.environ.items() if before.get(k) != v}\n"
        "removed = sorted(set(before) - set(os.environ))\n"
        f"heavy = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
        "print(json.dumps({'changed': changed, 'removed': removed, 'heavy': heavy, 'torch': 'torch' in sys.modules}))"
    )


def test_import_adatune_writes_no_environment_and_loads_no_learning_library() -> None:
    got = _loaded_after("import adatune")
    assert got["changed"] == {} and got["removed"] == []
    assert got["heavy"] == []
    assert got["torch"] == _loaded_after("import tvm")["torch"]  # torch only if TVM loads it by itself


def test_heavy_libraries_load_when_used() -> None:
    """The lazy imports still work: the DietCode dispatcher's fit loads scikit-learn."""
    got = _loaded_after("import adatune.dietcode\nadatune.dietcode.ShapeDispatcher.fit([1, 2, 3, 4], 'aabb')")
    assert "sklearn" in got["heavy"]
