"""``python -m benchmarks.models``: ResNet-18 and BERT-base end to end, in one run.

Per model: task extraction; untuned TVM (TVM's own pipeline, no schedule), PyTorch eager and onnxruntime on all
physical cores; then each arm (``xgb``: XGBTuner with the deterministic evaluator; ``rfei-ae``: RFEITuner with
the adaptive evaluator, ``min_converge_coef=0.1``; ``trace``, not run by default: every task by trace search with
XGBoost, the knob templates unused) tunes every task under the same wall-clock budget with the gradient task
scheduler, the model is compiled and timed at ``--checkpoints`` points along the way, and at the
end every engine is timed again back to back. Writes results.json, tasks.csv (per-task breakdown),
latency_<model>.png and summary.md to ``--out``.

The default (10 minutes per arm and model) takes under an hour; run it under the lock::

    flock /tmp/bench.lock .venv/bin/python -m benchmarks.models

Smoke run::

    python -m benchmarks.models --models resnet18 --budget-min 1 --checkpoints 1 --out /tmp/models-smoke
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time

import tvm

import adatune
from adatune.models import BUILTIN_MODELS
from adatune.models._winograd import WINOGRAD_TILE_BY_MAP, describe_tiles
from adatune.target import size_tvm_thread_pool

from .._common import load_now
from ..noise_gate import NoiseGate
from .report import plot, write_markdown, write_results
from .run import ARMS, DEFAULT_ARMS, ModelRun, run_model


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.models", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", nargs="*", default=["resnet18", "bert-base"], choices=list(BUILTIN_MODELS))
    p.add_argument("--arms", nargs="*", default=DEFAULT_ARMS, choices=list(ARMS), help="trace: trace search only")
    p.add_argument("--budget-min", type=float, default=10.0, help="tuning wall-clock per arm and model (minutes)")
    p.add_argument("--checkpoints", type=int, default=3, help="compile-and-time points along each arm's budget")
    p.add_argument("--repeats", type=int, default=30, help="timed inferences per latency")
    p.add_argument("--rounds", type=int, default=5, help="rounds of the final comparison (engines in turns)")
    p.add_argument("--untuned-repeats", type=int, default=2, help="timed inferences of untuned TVM (slow)")
    p.add_argument("--number", type=int, default=10, help="runs per repeat of a candidate's measurement")
    p.add_argument("--repeat", type=int, default=10, help="repeats of a candidate's measurement (AE: the cap)")
    p.add_argument("--fast-math", action="store_true", help="import with TVM's fast erf/exp/tanh (tested bound)")
    p.add_argument("--conv-layout", default="NCHW", help="NCHW or channel-blocked (NCHW8c; auto: the SIMD width)")
    p.add_argument(
        "--winograd",
        action="store_true",
        help=f"3x3 stride-1 NCHW convolutions as Winograd, {describe_tiles()}, kernels transformed once",
    )
    p.add_argument("--cache-flush", action="store_true", help="tune with the CPU caches flushed before every run")
    p.add_argument("--confirm", type=int, default=0, help="at checkpoints, re-time each task's N fastest (0: off)")
    p.add_argument("--tuning-cache", default=None, help="each arm starts from a copy of this tuning cache")
    p.add_argument("--transfer", action="store_true", help="with --tuning-cache: XGB tuners learn from its workloads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="benchmarks/results/models")
    return p


def main(argv: list[str] | None = None) -> int:
    size_tvm_thread_pool()  # kernels timed in this process get every core, as in adatune's workers
    args = _parser().parse_args(argv)
    if args.budget_min <= 0 or min(args.checkpoints, args.repeats, args.untuned_repeats, args.rounds) < 1:
        print("budget, checkpoints and repeats must be positive", file=sys.stderr)
        return 2
    if args.confirm < 0:
        print("--confirm must be >= 0 (0: off)", file=sys.stderr)
        return 2
    import onnxruntime
    import torch

    os.makedirs(args.out, exist_ok=True)
    started, t0 = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), time.perf_counter()
    meta = {
        "command": "python -m benchmarks.models " + shlex.join(sys.argv[1:] if argv is None else argv),
        "host": adatune.target.describe_host(),
        "target": str(adatune.target.host()),
        "tvm": tvm.__version__,
        "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__,
        "config": vars(args),
        # the tile table the run's Winograd convolutions took (run_ab re-imports the model with it)
        "winograd_tiles": [list(t) for t in WINOGRAD_TILE_BY_MAP] if args.winograd else None,
        "started": started,
        "wall_s": 0.0,
        "load_before": load_now(),
    }
    gate = NoiseGate()
    gate.probe("before")  # the gate frames the whole run: tuning measures candidates, checkpoints time models
    runs: list[ModelRun] = []

    def save(partial: ModelRun | None = None) -> None:  # after every arm, so a killed run keeps what it measured
        meta["wall_s"] = time.perf_counter() - t0
        write_results(args.out, meta, runs + ([partial] if partial is not None else []))

    for name in args.models:
        runs.append(
            run_model(
                name,
                args.arms,
                args.budget_min * 60,
                args.checkpoints,
                args.out,
                args.repeats,
                args.untuned_repeats,
                args.number,
                args.repeat,
                args.seed,
                args.rounds,
                on_progress=save,
                fast_math=args.fast_math,
                conv_layout=args.conv_layout,
                winograd=args.winograd,
                cold=args.cache_flush,
                confirm=args.confirm,
                tuning_cache=args.tuning_cache,
                transfer=args.transfer,
            )
        )
        save()
    gate.probe("after")
    meta["noise_gate"], meta["noise_sentence"], meta["load_after"] = gate.to_json(), gate.sentence(), load_now()
    print(meta["noise_sentence"])
    save()
    figures = plot(args.out, runs)
    write_markdown(args.out, meta, runs, figures)
    print(f"wrote {args.out}/results.json, tasks.csv, summary.md and {len(figures)} figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
