"""Templates used by the tests: adatune.testing's small tunable matmul, empty space and faulty kernel under
``test/`` names (the suite's recorded logs use them), and a CUDA copy kernel."""

from __future__ import annotations

import tvm
from tvm import te

import adatune
from adatune.testing import MODES, register_templates

__all__ = ["MODES", "matmul"]

# one definition of each: adatune.testing's templates, registered again under the names the suite's records use
_REGISTERED = register_templates({"matmul": "test/matmul", "empty": "test/empty", "faulty": "test/faulty"})
matmul = _REGISTERED["matmul"]  # called directly under apply_history_best: instantiated with the best record

if "test/gpu_copy" not in adatune.task.registered_templates():

    @adatune.template("test/gpu_copy")
    def gpu_copy(n: int):
        """A CUDA copy kernel with a block-size knob (compiles with nvcc; runs only on a GPU)."""
        cfg = adatune.get_config()
        A = te.placeholder((n,), "float32", name="A")
        B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
        sch = tvm.s_tir.Schedule(te.create_prim_func([A, B]))
        (i,) = sch.get_loops(sch.get_sblock("B"))
        cfg.define_split("tile", n, num_outputs=2, max_factor=256)
        bx, tx = cfg["tile"].apply(sch, i)
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        return sch, [A, B]
