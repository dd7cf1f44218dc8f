"""Build time per candidate: meta_schedule's stock ``LocalBuilder`` against adatune's ``FastBuilder``.

The same ``--n`` post-processed candidates (random samples of TVM's rule-made design spaces for one workload,
through ``adatune.trace``) go to each builder: the first ``--per-call`` of them one ``build`` call each (as a
tuner that measures as soon as it can calls it), then all of them in one call (one ``ms.tune_tir`` iteration).
Builders, all with ``--workers`` processes:

* ``stock``: ``ms.builder.LocalBuilder()``, TVM's defaults (``default_build`` imports the tensor intrinsics in
  every fresh build process, and every ``build`` call starts fresh processes);
* ``stock-no-intrin``: the same LocalBuilder with an ``f_build`` that skips that import (fresh processes still);
* ``fast``: ``adatune.meta_schedule.FastBuilder``, a warm pool kept between calls; its pool is started inside
  the first timed call, so that start-up is in its numbers.

Every artifact is loaded and run against numpy, so a fast build that produced nothing usable would fail here.
Writes ``results.json`` and ``summary.md`` under ``--out``. Run it under the shared timing lock::

    flock /tmp/bench.lock .venv/bin/python -m benchmarks.ms_builders
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shlex
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.builder import BuilderInput

import adatune
import adatune.trace
from adatune.meta_schedule import FastBuilder

BUILDERS = ("fast", "stock-no-intrin", "stock")  # fast first: a run cut off in the slow stock keeps it


def build_without_intrinsics(mod: tvm.IRModule, target: tvm.target.Target, _params: Any) -> Any:
    """TVM's ``default_build`` minus its ``import tvm.s_tir.tensor_intrin`` (nothing here tensorizes)."""
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    return tvm.tirx.build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod), target)


def _make_builder(name: str, workers: int, timeout: float) -> Any:
    if name == "stock":
        return ms.builder.LocalBuilder(max_workers=workers, timeout_sec=timeout)
    if name == "stock-no-intrin":
        return ms.builder.LocalBuilder(max_workers=workers, timeout_sec=timeout, f_build=build_without_intrinsics)
    return FastBuilder(max_workers=workers, timeout_sec=timeout)


def _candidates(workload: str, n: int, seed: int) -> tuple[adatune.trace.TraceTask, list[tvm.IRModule]]:
    wl = adatune.workloads.get(workload)
    knob = wl.create_task(adatune.target.host())
    task = adatune.task.create(adatune.trace.RULES_PREFIX + knob.name, knob.args, knob.target)
    assert isinstance(task, adatune.trace.TraceTask)
    cands = task.space.random_candidates(np.random.default_rng(seed), n)
    if len(cands) < n:
        raise RuntimeError(f"{workload}: only {len(cands)} distinct candidates, asked for {n}")
    return task, [c.mod for c in cands]


def _checker(task: adatune.trace.TraceTask) -> Callable[[str], None]:
    """Loads an artifact, runs it on fixed random inputs and compares with the unscheduled program's output."""
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    specs = task.arg_specs
    inputs = [rng.uniform(-1, 1, s.shape).astype(s.dtype) for s in specs if not s.is_output]

    def run(lib: Any) -> list[np.ndarray]:
        it = iter(inputs)
        args = [tvm.runtime.tensor(np.zeros(s.shape, s.dtype) if s.is_output else next(it), dev) for s in specs]
        lib["main"](*args)
        return [a.numpy() for a, s in zip(args, specs) if s.is_output]

    expected = run(tvm.tirx.build(task.unscheduled_module(), task.target))

    def check(artifact: str) -> None:
        for got, want in zip(run(tvm.runtime.load_module(artifact)), expected):
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)

    return check


def _timed_build(builder: Any, inputs: list[BuilderInput]) -> tuple[float, list[str], list[str]]:
    """(wall seconds of one ``build`` call, artifact paths, error messages)."""
    t0 = time.perf_counter()
    results = builder.build(inputs)
    seconds = time.perf_counter() - t0
    errors = [" ".join(r.error_msg.split())[:200] for r in results if r.error_msg]
    return seconds, [r.artifact_path for r in results if not r.error_msg], errors


def measure(
    name: str, mods: list[tvm.IRModule], per_call_n: int, target: Any, workers: int, timeout: float, check: Any
) -> dict:
    """Build seconds of builder ``name``: one call per candidate for the first ``per_call_n`` of ``mods``,
    then one call with all of them. Every artifact is checked; failed builds (timeouts) are counted."""
    builder = _make_builder(name, workers, timeout)
    per_call: list[float] = []
    artifacts: list[str] = []
    errors: list[str] = []
    try:
        for mod in mods[:per_call_n]:
            seconds, paths, errs = _timed_build(builder, [BuilderInput(mod, target)])
            per_call.append(seconds)
            artifacts, errors = artifacts + paths, errors + errs
            print(f"  {name}: candidate {len(per_call)}/{per_call_n} in {seconds:.3f} s {errs or ''}", flush=True)
        batch, paths, errs = _timed_build(builder, [BuilderInput(m, target) for m in mods])
        artifacts, errors = artifacts + paths, errors + errs
        print(f"  {name}: batch of {len(mods)} in {batch:.2f} s, {len(errs)} failed", flush=True)
    finally:
        if isinstance(builder, FastBuilder):
            builder.shutdown()
    for path in artifacts:
        check(path)
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    return {
        "per_call_seconds": per_call,
        "per_call_mean": statistics.fmean(per_call),
        "per_call_median": statistics.median(per_call),
        "batch_seconds": batch,
        "batch_per_candidate": batch / len(mods),
        "artifacts_checked": len(artifacts),
        "failed_builds": len(errors),
        "first_error": errors[0] if errors else None,
    }


def _per_call_ratio(r: dict, fast: dict | None) -> float:
    """Mean per-call seconds over FastBuilder's on the same first candidates (its pool start included)."""
    k = len(r["per_call_seconds"])
    if not fast or len(fast["per_call_seconds"]) < k:
        return float("nan")
    return r["per_call_mean"] / statistics.fmean(fast["per_call_seconds"][:k])


def _started(run: tuple[str, str]) -> str:
    return run[1]


def write_summary(path: str, meta: dict, results: dict[str, dict]) -> None:
    fast = results.get("fast")
    runs = {(r["run"]["command"], r["run"]["started"]) for r in results.values() if "run" in r}
    runs.add((meta["command"], meta["started"]))
    lines = [
        "# meta_schedule builders: stock LocalBuilder vs adatune FastBuilder",
        "",
        *[f"- `{cmd}` (under `flock /tmp/bench.lock`), started {when}" for cmd, when in sorted(runs, key=_started)],
        "",
        f"Host: {meta['cpu']} ({meta['cores']} cores), TVM {meta['tvm']}. The machine was shared with other "
        "agents' builds and tests while this ran (1-minute load average of the last run "
        f"{meta['load_before'][0]:.1f} before, {meta['load_after'][0]:.1f} after), so the seconds are noisy and "
        "the builders, run one after another, did not see identical load.",
        f"Candidates: {meta['n']} distinct post-processed samples of TVM's rule-made design spaces for "
        f"`{meta['workload']}` (seed {meta['seed']}), the same modules for every builder; {meta['workers']} build "
        "processes each. Every artifact built was loaded and its output matched the unscheduled program's.",
        "",
        "| builder | per-call n | per-call mean (s/cand) | per-call median | batch of N (s/cand) | "
        "per-call ratio vs fast | batch ratio vs fast | failed builds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        ratio_batch = r["batch_per_candidate"] / fast["batch_per_candidate"] if fast else float("nan")
        lines.append(
            f"| {name} | {len(r['per_call_seconds'])} | {r['per_call_mean']:.3f} | {r['per_call_median']:.3f} | "
            f"{r['batch_per_candidate']:.3f} | {_per_call_ratio(r, fast):.1f}x | {ratio_batch:.1f}x | "
            f"{r['failed_builds']} |"
        )
    failed = [f"- {name}: {r['first_error']}" for name, r in results.items() if r["first_error"]]
    lines += ["", "First build error per builder (a failed build's seconds still count):", *failed] if failed else []
    lines += [
        "",
        "Per call: one `build` call per candidate for the first n candidates, in sequence (a fresh LocalBuilder "
        "pool each call; FastBuilder's pool starts inside its first call, which is included; the ratio compares "
        f"the same first candidates). Batch: one call with all {meta['n']} candidates (one `ms.tune_tir` "
        "iteration of that size).",
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def _write(
    args: argparse.Namespace,
    argv: list[str] | None,
    started: str,
    t0: float,
    load_before: tuple[float, float, float],
    results: dict[str, dict],
) -> None:
    host = adatune.target.describe_host()
    meta = {
        "command": "python -m benchmarks.ms_builders " + shlex.join(sys.argv[1:] if argv is None else argv),
        "cpu": host["model"],
        "cores": host["cores"],
        "host": host,
        "tvm": tvm.__version__,
        "workload": args.workload,
        "n": args.n,
        "per_call_n": args.per_call,
        "seed": args.seed,
        "workers": args.workers,
        "timeout": args.timeout,
        "started": started,
        "wall_s": time.perf_counter() - t0,
        "load_before": list(load_before),
        "load_after": list(os.getloadavg()),
    }
    if "fast" in results:
        for r in results.values():
            r["per_call_ratio_vs_fast"] = _per_call_ratio(r, results["fast"])
            r["batch_ratio_vs_fast"] = r["batch_per_candidate"] / results["fast"]["batch_per_candidate"]
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    write_summary(os.path.join(args.out, "summary.md"), meta, results)


def _earlier_results(args: argparse.Namespace) -> dict[str, dict]:
    """Results of a previous run into ``--out`` on the same candidates (one lock slot per builder if needed)."""
    path = os.path.join(args.out, "results.json")
    if not os.path.isfile(path):
        return {}
    with open(path) as f:
        earlier = json.load(f)
    meta = earlier["meta"]
    if (meta["workload"], meta["n"], meta["seed"]) != (args.workload, args.n, args.seed):
        print(f"{path}: another workload, n or seed; not merged", file=sys.stderr)
        return {}
    kept = {name: r for name, r in earlier["results"].items() if name not in args.builders}
    for r in kept.values():
        r["run"] = r.get("run", {"command": meta["command"], "started": meta["started"]})
    return kept


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ms_builders", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=20, help="candidates (all built in one call per builder)")
    p.add_argument("--per-call", type=int, default=5, help="of them, built one call each first")
    p.add_argument("--workload", default="dense-1024", help="an adatune workload with a knob template")
    p.add_argument("--builders", nargs="*", default=list(BUILDERS), choices=BUILDERS)
    p.add_argument("--workers", type=int, default=2, help="build processes per builder")
    p.add_argument("--timeout", type=float, default=300.0, help="build timeout per candidate (s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="benchmarks/results/ms_builders")
    p.add_argument(
        "--merge",
        action="store_true",
        help="keep the other builders' results already in --out/results.json (same workload, n and seed)",
    )
    args = p.parse_args(argv)
    if args.n < 1 or args.workers < 1 or args.timeout <= 0 or not 1 <= args.per_call <= args.n:
        p.error("--n and --workers must be at least 1, --per-call in 1..n and --timeout positive")
    os.makedirs(args.out, exist_ok=True)
    started, t0 = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), time.perf_counter()
    load_before = os.getloadavg()
    importlib.import_module("tvm.s_tir.tensor_intrin")  # the main process's one-off import, outside the clocks

    task, mods = _candidates(args.workload, args.n, args.seed)
    check = _checker(task)
    results: dict[str, dict] = _earlier_results(args) if args.merge else {}
    for name in args.builders:
        print(f"{name}:", flush=True)
        results[name] = measure(name, mods, args.per_call, task.target, args.workers, args.timeout, check)
        _write(args, argv, started, t0, load_before, results)  # after every builder: a cut-off run keeps them
    for name, r in results.items():
        print(f"{name:>16}: {r['per_call_mean']:.3f} s/cand per call, {r['batch_per_candidate']:.3f} s/cand batched")
    print(f"wrote {args.out}/results.json and summary.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
