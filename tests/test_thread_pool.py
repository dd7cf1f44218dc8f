"""Every object adatune hands back that runs kernels in the caller's process sizes TVM's thread pool as
``CompiledModel`` does: a user timing or serving it gets every usable core without calling
``adatune.target.size_tvm_thread_pool()`` first (TVM alone starts half the logical CPUs on x86)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from adatune import target

_BUILD = (
    "import numpy as np, tvm\n"
    "from tvm import te\n"
    "A = te.placeholder((64,), 'float32', name='A')\n"
    "B = te.compute((64,), lambda i: A[i] * 2.0, name='B')\n"
    "lib = tvm.tirx.build(tvm.IRModule({'main': te.create_prim_func([A, B])}), adatune.target.host())\n"
    "args = [tvm.runtime.tensor(np.ones(64, 'float32')), tvm.runtime.tensor(np.zeros(64, 'float32'))]\n"
)

USES = {
    "apply_history_best": (
        "from adatune.testing import register_templates\n"
        "matmul = register_templates({'matmul': 'pool/matmul'})['matmul']\n"
        "with adatune.apply_history_best([]), adatune.target.host():\n"
        "    sch, tensors = matmul(16, 16, 16, 'float32')\n"
        "lib = tvm.tirx.build(sch.mod, adatune.target.host())\n"
        "import numpy as np\n"
        "lib['main'](*[tvm.runtime.tensor(np.ones([int(s) for s in t.shape], str(t.dtype))) for t in tensors])\n"
    ),
    "time_fn_for": _BUILD + "adatune.measure.evaluator.time_fn_for(lib, tvm.cpu(), args, False)(1, 1, 0)\n",
    "check_correctness_reference": (
        "from adatune.testing import MATMUL\n"
        "from adatune.measure._expected_outputs import ReferenceData\n"
        "refs = ReferenceData()\n"
        "refs.path(adatune.task.create(MATMUL, (16, 16, 16, 'float32'), adatune.target.host()))\n"
        "refs.close()\n"
    ),
}


@pytest.mark.parametrize("use", sorted(USES))
def test_kernels_adatune_runs_or_returns_get_every_usable_core(use: str) -> None:
    """In a fresh interpreter without TVM_NUM_THREADS / OMP_NUM_THREADS: after the use, the environment sizes the
    pool and TVM's pool in this process runs one thread per usable physical core."""
    code = (
        "import json, os, tvm, adatune, adatune.measure.evaluator\n"
        f"{USES[use]}"
        "print(json.dumps([os.environ.get('TVM_NUM_THREADS'), tvm.runtime.num_threads()]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    variable, threads = json.loads(out.stdout.strip().splitlines()[-1])
    assert variable == str(target._usable_cores())
    assert threads == target._usable_cores()
