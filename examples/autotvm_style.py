"""The user's contract, exactly as an AutoTVM script writes it (run by `make test`, so it cannot drift).

The one changed line is the import: `import adatune as autotvm` instead of `from tvm import autotvm`. A template
with knobs, a task, a measure option with the adaptive evaluator, a tuner with callbacks, the records read back
as AutoTVM's (inp, res) pairs and their best picked to a file, the best config applied and the kernel checked
against numpy. Not AutoTVM: `min_converge_coef` (AdaTune's adaptive evaluator), `RFEITuner` (AdaTune's tuner)
and `autotvm.target.host()` (TVM 0.27 targets are JSON dicts; "llvm" also means this host).
"""

import os
import sys
import tempfile

import numpy as np
import tvm
from tvm import te

import adatune as autotvm

N = int(os.environ.get("EXAMPLE_N", "64"))
TRIALS = int(os.environ.get("EXAMPLE_TRIALS", "24"))


@autotvm.template("example/matmul")
def matmul(N, L, M, dtype):
    A = te.placeholder((N, L), dtype, name="A")
    B = te.placeholder((L, M), dtype, name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = tvm.s_tir.Schedule(te.create_prim_func([A, B, C]))
    cfg = autotvm.get_config()
    i, j, kk = sch.get_loops(sch.get_sblock("C"))
    cfg.define_split("tile_i", N, num_outputs=2)
    cfg.define_split("tile_j", sch.get(j), num_outputs=2, policy="power2", max_factor=64)
    cfg.define_knob("vec", [0, 1])
    io, ii = cfg["tile_i"].apply(sch, i)
    jo, ji = cfg["tile_j"].apply(sch, j)
    sch.reorder(io, jo, kk, ii, ji)
    if cfg["vec"].val:
        sch.vectorize(ji)
    return sch, [A, B, C]


def main() -> int:
    target = autotvm.target.host()
    task = autotvm.task.create("example/matmul", args=(N, N, N, "float32"), target=target)
    print(task)
    log = os.path.join(tempfile.mkdtemp(), "matmul.jsonl")
    option = autotvm.measure_option(
        builder=autotvm.LocalBuilder(), runner=autotvm.LocalRunner(number=5, repeat=3), min_converge_coef=0.1
    )
    tuner = autotvm.tuner.RFEITuner(task, plan_size=8)
    tuner.tune(
        n_trial=TRIALS,
        measure_option=option,
        callbacks=[autotvm.callback.progress_bar(TRIALS), autotvm.callback.log_to_file(log)],
    )
    option.close()
    print("best config:", tuner.best_config, f"{tuner.best_flops / 1e9:.2f} GFLOPS")

    pairs = [(inp, res) for inp, res in autotvm.record.load_from_file(log)]  # AutoTVM's unpacking
    assert len(pairs) == TRIALS, f"expected {TRIALS} records, got {len(pairs)}"
    best_log = log + ".best"
    autotvm.record.pick_best(log, best_log)  # AutoTVM's: the best record of each workload, to another file
    assert len(list(autotvm.record.load_from_file(best_log))) == 1

    with autotvm.apply_history_best(best_log):
        with target:
            sch, args = matmul(N, N, N, "float32")  # instantiated with the best config
    lib = tvm.tirx.build(sch.mod, target)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((N, N), "float32"), rng.standard_normal((N, N), "float32")
    dev = tvm.cpu()
    c = tvm.runtime.tensor(np.zeros((N, N), "float32"), dev)
    lib(tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)
    print("the best kernel matches numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
