"""Logs stand alone: a log written by one process recreates every task in a fresh one.

One fresh process tunes a few trials of each kind of task into one log: a knob template in an importable module,
a knob template defined in that script, a trace task from a PrimFunc registered nowhere (``from_module``), a
small model's fused task and a DietCode range task. Fresh processes then apply the best record, resume (nothing
measured twice), print the best with ``adatune best`` and build the model, none having created the task first
(one process takes the four kinds in turn, each recreated from the log alone).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

KERNELS = """
import tvm
from tvm import te
import adatune


@adatune.template("standalone/scale")
def scale(n, m):
    a = te.placeholder((n, m), "float32", name="A")
    b = te.compute((n, m), lambda i, j: a[i, j] * 2.0, name="B")
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, b]))
    cfg = adatune.get_config()
    _, j = sch.get_loops(sch.get_sblock("B"))
    cfg.define_split("tile_j", m, num_outputs=2)
    cfg["tile_j"].apply(sch, j)
    return sch, [a, b]


def small_model():
    import torch
    from torch import nn
    import adatune.models as am

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 16), nn.ReLU()).eval()
    return am.from_torch(net, (torch.randn(1, 16),), name="small")


def matmul():  # a PrimFunc no registry knows
    a, b = te.placeholder((16, 16), name="A"), te.placeholder((16, 16), name="B")
    k = te.reduce_axis((0, 16), name="k")
    return te.create_prim_func([a, b, te.compute((16, 16), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k))])
"""

TUNE = """
import sys
import tvm
from tvm import te
import adatune
import adatune.models as am
from adatune.dietcode import DietCodeTuner, DynamicWorkload
from adatune.trace import TraceTask
from adatune.tuners import RandomTuner
from adatune.tuners._trace import TraceSearchTuner
import standalone_kernels

log, host = sys.argv[1], adatune.target.host()
option = adatune.measure_option(adatune.LocalBuilder(n_parallel=1), adatune.LocalRunner(number=1, repeat=1))
to_log = [adatune.callback.log_to_file(log)]


@adatune.template("standalone/script-scale")  # defined in this script: no other process can import it
def script_scale(n):
    a = te.placeholder((n,), "float32", name="A")
    b = te.compute((n,), lambda i: a[i] * 3.0, name="B")
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, b]))
    adatune.get_config().define_knob("unused", [0, 1])
    return sch, [a, b]


RandomTuner(adatune.task.create("standalone/scale", (16, 16), host), seed=0).tune(3, option, callbacks=to_log)
RandomTuner(adatune.task.create("standalone/script-scale", (16,), host), seed=0).tune(2, option, callbacks=to_log)
trace = TraceTask.from_module(standalone_kernels.matmul(), host)
TraceSearchTuner(trace, plan_size=3, population_size=8, genetic_num_iters=1, seed=0).tune(
    3, option, batch_size=3, callbacks=to_log
)
model = standalone_kernels.small_model()
am.tune_model(model, log, n_trial=3, round_trials=3, progress=False, option=option)
wl = DynamicWorkload("sa_context", "bmm_nn", (2, 16), (1, 16))
DietCodeTuner(wl, host, n_shapes=2, rounds=1, kernels_per_round=3, max_kernels=2, seed=1).tune(
    measure_option=option, callbacks=to_log
)
option.close()
"""

CHECK = """
import json
import sys
import adatune
from adatune.records import load_from_file
from adatune.tuners import RandomTuner

WATCHED = ("standalone", "adatune.dietcode", "adatune.models")
log, prefixes = sys.argv[1], sys.argv[2:]
option = adatune.measure_option(adatune.LocalBuilder(n_parallel=1), adatune.LocalRunner(number=1, repeat=1))
loaded = {}
for prefix in prefixes:
    before = sorted(m for m in sys.modules if m.startswith(WATCHED))
    mine = [r for r in load_from_file(log) if r.task_name.startswith(prefix)]
    mine = [r for r in mine if r.workload_key == mine[0].workload_key]  # its first task (a DietCode log's rounds)
    best = min((r for r in mine if r.result.ok), key=lambda r: r.cost)
    task = best.create_task()  # on its recorded target, from what the log stored
    assert task.name == best.task_name
    cand = adatune.apply_history_best(log).query(task.target, task.workload)
    assert cand.key == best.key, (cand.key, best.key)
    tvm_mod = task.scheduled_module(cand)  # the best record's program, for a task this process never made
    if prefix.startswith("trace/"):
        from adatune.tuners._trace import TraceSearchTuner
        tuner = TraceSearchTuner(task, plan_size=2, population_size=8, genetic_num_iters=1, seed=1)
    else:
        tuner = RandomTuner(task, seed=1)
    measured = {r.key for r in mine}
    assert tuner.load_history(load_from_file(log)) == len(measured)
    tuner.tune(2, option, batch_size=2, callbacks=[adatune.callback.log_to_file(log)])
    keys = [r.key for r in load_from_file(log) if r.workload_key == task.workload_key]
    assert len(keys) == len(set(keys)) == len(measured) + 2, keys  # two new, none again
    after = sorted(m for m in sys.modules if m.startswith(WATCHED))
    loaded[prefix] = sorted(set(after) - set(before))  # what recreating this kind of task imported
option.close()
print(json.dumps(loaded))
"""

# each kind with the module its records name, in an order where none of them is loaded before its own turn (the
# trace task's PrimFunc is registered nowhere: recreating it imports none of them)
KINDS = [
    ("trace/rules/ir-", None),
    ("standalone/scale", "standalone_kernels"),  # imported from the module the log names
    ("dietcode-range/", "adatune.dietcode"),
    ("model/dense.x86/", "adatune.models"),  # adatune.models imports adatune.dietcode: after it
]


def _run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log of every kind of task, written by a fresh process; the folder holds the kernels' module."""
    folder = tmp_path_factory.mktemp("standalone")
    (folder / "standalone_kernels.py").write_text(textwrap.dedent(KERNELS))
    (folder / "tune.py").write_text(TUNE)
    (folder / "check.py").write_text(CHECK)
    _run(["tune.py", "all.jsonl"], folder, timeout=600)
    return folder


def test_a_fresh_process_applies_and_resumes_every_kind(tuned: Path) -> None:
    """One fresh process takes each kind in turn (they share its builder and runner) and records what recreating
    each task imported."""
    import json

    out = _run(["check.py", "all.jsonl", *[prefix for prefix, _ in KINDS]], tuned).stdout
    loaded = json.loads(out.strip().splitlines()[-1])
    for prefix, module in KINDS:
        if module is not None:
            assert module in loaded[prefix], (prefix, loaded)
        else:
            assert loaded[prefix] == [], (prefix, loaded)


def test_adatune_best_prints_the_best_of_every_task(tuned: Path) -> None:
    out = _run(["-m", "adatune.cli", "best", "all.jsonl"], tuned).stdout
    for name in ("standalone/scale", "standalone/script-scale", "trace/rules/ir-", "model/dense.x86/"):
        assert name in out, out
    # one line per task: the four above and each DietCode range task (the rounds', and the aligned T where a deployed
    # kernel and its aligned version were timed against each other)
    assert "dietcode-range/bmm_nn" in out and out.count("records)") == 4 + out.count("dietcode-range/bmm_nn"), out


def test_a_model_builds_from_its_log_in_a_fresh_process(tuned: Path) -> None:
    code = (
        "import numpy as np, adatune.models as am, standalone_kernels\n"
        "m = standalone_kernels.small_model()\n"
        "compiled = am.build(m, 'all.jsonl')\n"
        "assert set(compiled.applied.values()) == {'record'}, compiled.applied\n"
        "x = m.random_inputs(0)\n"
        "np.testing.assert_allclose(compiled.run(*x)[0], m.reference(*x)[0], rtol=1e-4, atol=1e-4)\n"
    )
    _run(["-c", code], tuned)


def test_a_template_defined_in_a_script_is_named_with_how_to_register_it(tuned: Path) -> None:
    code = (
        "import adatune\n"
        "rec = next(r for r in adatune.load_from_file('all.jsonl') if r.task_name == 'standalone/script-scale')\n"
        "try:\n"
        "    rec.create_task()\n"
        "except KeyError as err:\n"
        "    print(err.args[0])\n"
    )
    out = _run(["-c", code], tuned).stdout
    assert "'standalone/script-scale'" in out and "tune.py" in out and "import that module" in out, out
