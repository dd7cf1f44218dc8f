"""``python -m benchmarks.trace_search``: trace search against TVM's own MetaSchedule on four CPU workloads.

Arms, all with the same trial budget and seeds: stock ``ms.tune_tir`` (XGB, evolutionary search, LocalRunner),
``ms.tune_tir`` with each of adatune's plug-ins alone (``ms+builder``: FastBuilder, ``ms+runner``: AdaptiveRunner,
``ms+cost-model``: RFEICostModel, ``ms+search``: ContextualEvolutionarySearch) and with all four (``ms-adatune``),
``TraceSearchTuner`` with XGB and with RFEI + contextual exploration + the adaptive evaluator, and on dense and
batch-matmul (which have knob templates) the knob tuners XGBTuner and RFEITuner.

Measurement: the noise gate probes the host before the first arm and after the last; seeds are interleaved (seed s of
every arm before seed s+1, the arm order rotating); when a workload's arms are done, every arm's best program is
re-timed in turns (``--retime-rounds`` rounds, the median), so best latencies compare programs, not minutes of the run.

Full run (4 workloads, every arm, 32 trials, 1 seed; expect most of an hour on a 2-core machine)::

    python -m benchmarks.trace_search

Smoke run::

    python -m benchmarks.trace_search --trials 4 --per-iter 4 --batch 4 --out /tmp/trace-search-smoke
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import sys
import tempfile
import time
from typing import Any

import adatune
from adatune.target import size_tvm_thread_pool

from .._common import load_now, run_meta
from ..noise_gate import NoiseGate
from .report import plot, summarise, write_markdown, write_results
from .run import ARMS, ArmResult, RunConfig, retime, run_arm
from .workloads import WORKLOADS, make


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.trace_search",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=list(WORKLOADS))
    p.add_argument(
        "--arms",
        nargs="*",
        default=list(ARMS),
        choices=list(ARMS),
        help="ms+<plug-in>: stock tune_tir with that one adatune plug-in (builder, runner, cost-model, search)",
    )
    p.add_argument("--trials", type=int, default=32, help="measured candidates per arm")
    p.add_argument("--seeds", type=int, nargs="*", default=[0])
    p.add_argument("--per-iter", type=int, default=16, help="ms trials per iteration = adatune plan size")
    p.add_argument("--batch", type=int, default=8, help="adatune measurement batch")
    p.add_argument("--number", type=int, default=5, help="runs per timing (stock runners)")
    p.add_argument("--repeat", type=int, default=3, help="timings per candidate (stock runners)")
    p.add_argument("--min-converge-coef", type=float, default=0.1, help="adaptive evaluator's CoV threshold")
    p.add_argument("--n-parallel", type=int, default=2, help="build processes")
    p.add_argument("--timeout", type=float, default=30.0, help="build and run timeout per candidate (s)")
    p.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="start no arm after this many minutes (the ones left are listed as skipped in the summary)",
    )
    p.add_argument(
        "--retime-rounds", type=int, default=7, help="rounds of the common re-timing of every arm's best, in turns"
    )
    p.add_argument("--out", default="benchmarks/results/trace_search")
    p.add_argument(
        "--resummarise",
        action="store_true",
        help="measure nothing: rewrite OUT's summary.md from its results.json (after the report changed)",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def resummarise(out: str) -> int:
    """Rewrite ``out``'s summary from its results.json with today's report (the figures are kept as they are)."""
    with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
        stored = json.load(f)
    missing = {"own_best": math.inf, "best": math.inf, "build_per_candidate": math.nan}  # stored as null
    results = [
        ArmResult(
            **{
                **run,
                "curve": [tuple(point) for point in run["curve"]],
                **{k: v if run[k] is None else run[k] for k, v in missing.items()},
            }
        )
        for run in stored["runs"]
    ]
    rows = summarise(results)
    figures = sorted(f for f in os.listdir(out) if f.endswith(".png"))
    write_results(os.path.join(out, "results.json"), stored["meta"], results, rows)
    write_markdown(os.path.join(out, "summary.md"), stored["meta"], rows, figures)
    print(f"rewrote {out}/summary.md from its results.json")
    return 0


def main(argv: list[str] | None = None) -> int:
    size_tvm_thread_pool()  # kernels timed in this process get every core, as in adatune's workers
    args = _parser().parse_args(argv)
    if args.resummarise:
        return resummarise(args.out)
    if args.trials < 1 or args.per_iter < 1 or args.batch < 1 or not args.seeds:
        print("trials, per-iter and batch must be positive and at least one seed given", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    os.makedirs(args.out, exist_ok=True)
    cfg = RunConfig(
        trials=args.trials,
        per_iter=args.per_iter,
        batch=args.batch,
        number=args.number,
        repeat=args.repeat,
        min_converge_coef=args.min_converge_coef,
        n_parallel=args.n_parallel,
        timeout=args.timeout,
        work_dir=tempfile.mkdtemp(prefix="adatune-trace-search-"),  # meta_schedule logs, not results
    )
    started, t0 = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), time.perf_counter()
    load_before = load_now()
    target = adatune.target.host()
    host = adatune.target.describe_host()
    import tvm.s_tir.tensor_intrin  # noqa: F401 - pay MetaSchedule's one-off import before any arm's clock

    results: list[ArmResult] = []
    skipped: list[str] = []
    gate = NoiseGate()  # the probe before every arm and after the common re-timing

    def write(figures: bool) -> list[str]:
        """Results so far as JSON and summary (after every arm: a run cut off keeps them), plots at the end."""
        rows = summarise(results)
        meta = {
            **run_meta("benchmarks.trace_search", argv, started, t0, load_before),
            "host": f"{platform.node()} ({host['model']}, ISA {host.get('isa')}, {os.cpu_count()} CPUs)",
            "target": str(target),
            "tvm": tvm.__version__,
            "trials": args.trials,
            "seeds": args.seeds,
            "config": vars(cfg),
            "skipped": skipped,
            "noise_gate": gate.to_json() if gate.readings else None,
            "noise_sentence": gate.sentence() if gate.readings else None,
            "retime_rounds": args.retime_rounds,
        }
        write_results(os.path.join(args.out, "results.json"), meta, results, rows)
        made = plot(args.out, results, rows) if figures and results else []
        write_markdown(os.path.join(args.out, "summary.md"), meta, rows, made)
        return made

    gate.probe("before")
    for name in args.workloads:
        if args.max_minutes is not None and time.perf_counter() - t0 > 60 * args.max_minutes:
            skipped += [f"{name} (all arms)"]
            continue
        wl = make(name, target)
        arms = [a for a in args.arms if not (a.startswith("knob") and wl.knob_task is None)]
        bests: list[tuple[ArmResult, Any]] = []
        for k, seed in enumerate(args.seeds):
            for arm in arms[k % len(arms) :] + arms[: k % len(arms)]:  # the arm order rotates with the seed
                if args.max_minutes is not None and time.perf_counter() - t0 > 60 * args.max_minutes:
                    skipped.append(f"{name} {arm} seed {seed}")
                    continue
                res, best = run_arm(arm, wl, seed, cfg)
                results.append(res)
                if best is not None:
                    bests.append((res, best))
                print(
                    f"{name:>20} seed {seed} {arm:>11}: {res.trials:3d} trials, own best "
                    f"{res.own_best * 1e3:9.4f} ms, build {res.build_per_candidate:.3f} s/cand, wall {res.wall:6.1f} s"
                    + (f"  ERROR {res.error}" if res.error else ""),
                    flush=True,
                )
                write(figures=False)
        for (res, _), (sec, ok) in zip(bests, retime([m for _, m in bests], wl, rounds=args.retime_rounds)):
            res.best, res.correct = sec, ok
            print(f"{name:>20} seed {res.seed} {res.arm:>11}: re-timed {sec * 1e3:9.4f} ms, correct {ok}", flush=True)
        write(figures=False)
    gate.probe("after")
    figures = write(figures=True)
    print(f"wrote {args.out}/results.json, summary.md and {len(figures)} figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
