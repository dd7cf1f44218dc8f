"""Probe (not a test): does a model task's kernel time depend on the values it reads?

A tuning measurement feeds every kernel uniform(-1, 1) inputs. BERT-base's FFN1 dense with its exact-erf GELU
epilogue measured 5.69 ms that way, and 3.71 ms per call inside the model (``benchmarks/results/models_xeon``): a
dense over K = 768 such inputs makes pre-activations with a standard deviation of about 9, where the exact erf
(the only data-dependent step) runs slower than at the model's small activations. This builds a task's best
recorded config from a log and times it on the measurement's inputs and on the first input scaled down, in
alternating rounds::

    python -m benchmarks.models.input_range_probe \\
        --log benchmarks/results/models_xeon/records_bert-base_rfei-ae.jsonl --task 0ec4b8a1d8b6ce37
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
import tvm

import adatune
import adatune.models as am
from adatune.records import load_from_file
from adatune.reference import time_callable
from adatune.target import describe_host, size_tvm_thread_pool

from ..noise_gate import interleaved


def main(argv: list[str] | None = None) -> int:
    size_tvm_thread_pool()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="bert-base")
    ap.add_argument("--log", required=True)
    ap.add_argument("--task", required=True, help="the end of the task's name (its hash)")
    ap.add_argument("--scales", type=float, nargs="+", default=[1.0, 0.05], help="factors on the first input")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    model = am.load_builtin(args.model)
    matches = [t for t in am.extract_tasks(model) if t.task_name.endswith(args.task)]
    if len(matches) != 1:
        ap.error(f"{len(matches)} tasks of {args.model} end with {args.task!r}")
    task = matches[0].task
    measured = [
        (float(np.median(r.costs)), i.config)
        for i, r in load_from_file(args.log)
        if i.task.name == task.name and r.error_no == 0
    ]
    best = min(measured, key=lambda c: c[0], default=None)
    if best is None:
        ap.error(f"no record of {task.name} in {args.log}")
    tgt = adatune.target.host()
    with tgt:
        lib = tvm.compile(task.scheduled_module(best[1]), target=tgt)
    rng = np.random.default_rng(0)
    dev = tvm.cpu()
    timers = {}
    for scale in args.scales:
        tensors = [
            tvm.runtime.tensor(
                np.zeros(s.shape, s.dtype)
                if s.is_output
                else (rng.uniform(-1, 1, s.shape) * (scale if i == 0 else 1.0)).astype(s.dtype),
                dev,
            )
            for i, s in enumerate(task.arg_specs)
        ]
        timers[f"first input x{scale:g}"] = lambda tensors=tensors: time_callable(lambda: lib["main"](*tensors), 20)
    times = interleaved(timers, args.rounds)
    host = describe_host()
    print(
        f"{task.name} on {host['model']} ({host['isa']}, {host['cores']} cores); best recorded {best[0] * 1e3:.3f} ms"
    )
    for name, secs in times.items():
        print(f"  {name}: {statistics.median(secs) * 1e3:.3f} ms (rounds {min(secs) * 1e3:.3f}-{max(secs) * 1e3:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
