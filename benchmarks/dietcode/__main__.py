"""``python -m benchmarks.dietcode``: DietCode against static tuning and the vendor libraries on BERT's dynamic GEMMs.

Per workload, in one run: per-shape tuning of the sampled T (``--sampled``), the largest shape's kernel padded to every
T, buckets of 16, torch and numpy, and one DietCode run for the whole range; then the latency of every T in the range
for each. Writes results.json, summary.md and one latency-vs-T PNG per workload to ``--out``.

All six GEMMs take the better part of half an hour on a 2-core machine (run it under the bench lock)::

    flock /tmp/bench.lock .venv/bin/python -m benchmarks.dietcode --workloads qkv

Smoke run (a minute or two)::

    python -m benchmarks.dietcode --workloads attn_out --t-range 1 24 --sampled 5 24 --bucket 8 \
        --static-trials 2 --dietcode-rounds 1 --dietcode-per-round 2 --dietcode-shapes 3 --out /tmp/dietcode-smoke
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import tvm

import adatune
from adatune.dietcode import FEATURE_KINDS, SEARCHES, DietCodeResult, DynamicWorkload, bert_workloads, validate_range
from adatune.measure.vendor_reference import physical_cores
from adatune.target import size_tvm_thread_pool

from .._common import load_now, run_meta
from ..host_state import state_probe
from ..noise_gate import NoiseGate
from .report import plot, summarise, write_markdown, write_results
from .retime import RetimeStates, retime
from .run import (
    ARMS,
    DISPATCH_COSTS_OPTION,
    ArmResult,
    BenchConfig,
    Retimer,
    StaticTuner,
    run_dietcode,
    run_vendor,
    serve_padded,
)

SAMPLED = [5, 24, 43, 62, 81, 100, 119, 128]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.dietcode", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    names = list(bert_workloads())
    p.add_argument(
        "--workloads", nargs="*", default=names, metavar="NAME",
        help=f"BERT-base's GEMMs ({', '.join(names)}) and any named by --gemm",
    )  # fmt: skip
    p.add_argument(
        "--gemm", action="append", default=[], metavar="NAME=KIND:A:B", type=_gemm_spec,
        help="a dynamic GEMM besides BERT's, run when --workloads names it: dense:K:N (T x K by K x N), bmm_nt:H:D "
        "(H heads, T x D by its transpose) or bmm_nn:H:D (H heads, T x T by T x D)",
    )  # fmt: skip
    p.add_argument("--arms", nargs="*", default=list(ARMS), choices=list(ARMS))
    p.add_argument("--t-range", nargs=2, type=int, default=[1, 128], metavar=("LO", "HI"))
    p.add_argument("--sampled", nargs="*", type=int, default=SAMPLED, help="T of the per-shape tuning")
    p.add_argument("--bucket", type=int, default=16, help="bucket width of the bucketing arm")
    p.add_argument("--static-trials", type=int, default=16, help="XGBTuner trials per static shape (the cap)")
    p.add_argument(
        "--static-converge", type=int, default=None,
        help="per-shape tuning stops after this many trials without improvement (run to convergence)",
    )  # fmt: skip
    p.add_argument("--dietcode-shapes", type=int, default=8)
    p.add_argument("--dietcode-rounds", type=int, default=3)
    p.add_argument("--dietcode-per-round", type=int, default=8, help="micro-kernels measured per round")
    p.add_argument("--dietcode-max-kernels", type=int, default=None, help="cap on deployed kernels (default none)")
    p.add_argument("--dietcode-search", default="evolutionary", choices=list(SEARCHES))
    p.add_argument("--dietcode-features", default="program", choices=list(FEATURE_KINDS))
    p.add_argument(
        "--verify-dispatch", action="store_true",
        help="DietCodeTuner(verify=True): time the deployed kernels at every T and give each T the fastest",
    )  # fmt: skip
    p.add_argument("--dispatch-tolerance", type=float, default=0.01, help="predicted loss allowed for fewer kernels")
    p.add_argument(
        "--dispatch-costs",
        default=DISPATCH_COSTS_OPTION.default,
        choices=DISPATCH_COSTS_OPTION.choices,
        help=DISPATCH_COSTS_OPTION.doc,
    )
    p.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds of every arm at every T")
    p.add_argument(
        "--no-host-state", dest="host_state", action="store_false",
        help="do not read the probe around every timing (no fast-state latencies, no re-timing passes)",
    )  # fmt: skip
    p.add_argument(
        "--state-passes", type=int, default=2,
        help="further passes over the T where an arm is still short of timings in the host's fast state",
    )  # fmt: skip
    p.add_argument("--repeat", type=int, default=3, help="time_evaluator repeats per timing of a TVM kernel")
    p.add_argument("--min-repeat-ms", type=int, default=10)
    p.add_argument("--vendor-repeats", type=int, default=15)
    p.add_argument(
        "--vendor-threads", type=int, default=0, help="threads of torch and numpy's BLAS (0: all physical cores)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=30.0, help="build and run timeout per static candidate (s)")
    p.add_argument("--n-parallel", type=int, default=2, help="build processes of the static tuner")
    p.add_argument("--out", default="benchmarks/results/dietcode")
    return p


def _config(args: argparse.Namespace) -> BenchConfig:
    lo, hi = validate_range(tuple(args.t_range))
    sampled = sorted(set(args.sampled))
    if not sampled or any(not lo <= t <= hi for t in sampled) or args.bucket < 1 or args.static_trials < 1:
        raise ValueError(f"sampled T must lie in [{lo}, {hi}]; bucket and static trials must be positive")
    return BenchConfig(
        (lo, hi), sampled, args.bucket, args.static_trials, args.dietcode_shapes, args.dietcode_rounds,
        args.dietcode_per_round, args.dietcode_max_kernels, args.repeat, args.min_repeat_ms, args.vendor_repeats,
        args.vendor_threads, args.seed, args.timeout, args.n_parallel, args.static_converge, args.dietcode_search,
        args.dietcode_features, args.dispatch_tolerance, args.rounds, args.dispatch_costs, args.host_state,
        args.state_passes, args.verify_dispatch, list(args.gemm),
    )  # fmt: skip


def _gemm_spec(text: str) -> tuple[str, str, int, int]:
    """``NAME=KIND:A:B`` as (name, kind, A, B), or the reason it is not one."""
    name, _, spec = text.partition("=")
    parts = spec.split(":")
    if not name or len(parts) != 3 or parts[0] not in ("dense", "bmm_nt", "bmm_nn"):
        raise argparse.ArgumentTypeError(f"expected NAME=dense:K:N, NAME=bmm_nt:H:D or NAME=bmm_nn:H:D, got {text!r}")
    try:
        a, b = int(parts[1]), int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError(f"the dims of {text!r} must be integers") from None
    if a < 1 or b < 1:
        raise argparse.ArgumentTypeError(f"the dims of {text!r} must be positive")
    return name, parts[0], a, b


def workloads(t_range: tuple[int, int], gemms: list[tuple[str, str, int, int]]) -> dict[str, DynamicWorkload]:
    """BERT-base's dynamic GEMMs and the ``--gemm`` ones, by name, over ``t_range``."""
    out = bert_workloads(t_range)
    for name, kind, a, b in gemms:
        if name in out:
            raise ValueError(f"--gemm {name!r}: that name is taken (BERT's GEMMs: {', '.join(bert_workloads())})")
        out[name] = DynamicWorkload(name, kind, (a, b), t_range)
    return out


def _run_workload(
    name: str,
    arms: list[str],
    cfg: BenchConfig,
    out: str,
    failed: list[str],
    gates: dict[str, NoiseGate],
    states: dict[str, RetimeStates],
) -> list[ArmResult]:
    wl = workloads(cfg.t_range, cfg.gemms)[name]
    target = adatune.target.host()
    lo, hi = cfg.t_range
    static = StaticTuner(wl, cfg, target, os.path.join(out, f"static_{name}.jsonl"))
    logs = [os.path.join(out, f"records_{name}{sfx}.jsonl") for sfx in ("", "_verified")]
    for log in (static.log_file, *logs):
        if log and os.path.exists(log):  # the records beside results.json are this run's alone
            os.remove(log)
    buckets = sorted({min(hi, b) for b in range(cfg.bucket, hi + cfg.bucket, cfg.bucket) if b >= lo} | {hi})
    sampled = sorted(set(cfg.sampled) | {hi})  # the top must be tuned for every T to have a kernel
    timed: list[tuple[ArmResult, Retimer]] = []
    tuned: dict[str, tuple[DietCodeResult, float]] = {}  # each DietCode arm's result and tuning seconds
    try:
        for arm in arms:
            try:
                timed.append(_run_arm(name, arm, cfg, out, static, sampled, buckets, tuned))
            except Exception as err:  # noqa: BLE001 - an arm that cannot serve the range must not lose the others
                failed.append(f"{name} {arm}: {type(err).__name__}: {err}")
                print(f"{name:>9} {arm:>15}: FAILED {type(err).__name__}: {err}", flush=True)
        static.close()
        gate = gates[name] = NoiseGate()  # the probe frames the interleaved pass the latencies come from
        gate.probe("before")
        # after the worker pools have stopped; the probe read around every timing too (the host's two speeds)
        probe = state_probe(timer=gate.compute_timer) if cfg.host_state else None
        found = retime(timed, cfg.rounds, probe=probe, extra_passes=cfg.state_passes)
        gate.probe("after")
        print(f"{name:>9} noise gate: {gate.sentence()}", flush=True)
        if found is not None:
            ts = list(range(lo, hi + 1))
            states[name] = found
            print(f"{name:>9} {found.sentence(ts)}", flush=True)
    finally:
        static.close()
    for res, _ in timed:
        lat = [res.latency[t] for t in sorted(res.latency)]
        print(
            f"{name:>9} {res.arm:>15}: tuning {res.tuning_seconds:7.1f} s, latency {min(lat) * 1e3:8.3f} .. "
            f"{max(lat) * 1e3:8.3f} ms over T in [{lo}, {hi}]",
            flush=True,
        )
    return [res for res, _ in timed]


def _run_arm(
    name: str,
    arm: str,
    cfg: BenchConfig,
    out: str,
    static: StaticTuner,
    sampled: list[int],
    buckets: list[int],
    tuned: dict[str, tuple[DietCodeResult, float]],
) -> tuple[ArmResult, Retimer]:
    hi = cfg.t_range[1]
    if arm == "per-shape":
        return serve_padded(static, arm, sampled, sampled)
    if arm == "padded-largest":
        return serve_padded(static, arm, [hi], [hi])
    if arm == "buckets":
        return serve_padded(static, arm, buckets, buckets)
    if arm in ("torch", "numpy"):
        return run_vendor(static.wl, arm, cfg)
    suffix = "" if arm == "dietcode" else f"_{arm.removeprefix('dietcode-')}"
    result, retimer, res = run_dietcode(
        static.wl, cfg, static.target, os.path.join(out, f"records_{name}{suffix}.jsonl"), arm
    )
    tuned[arm] = (res, result.tuning_seconds)
    return result, retimer


def main(argv: list[str] | None = None) -> int:
    size_tvm_thread_pool()  # kernels timed in this process get every core, as in adatune's workers
    args = _parser().parse_args(argv)
    try:
        cfg = _config(args)
        known = workloads(cfg.t_range, cfg.gemms)
        if unknown := [n for n in args.workloads if n not in known]:
            raise ValueError(
                f"unknown workload(s) {unknown}: BERT's are {list(bert_workloads())}, add others by --gemm"
            )
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    started, t0 = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), time.perf_counter()
    load_before = load_now()
    results: list[ArmResult] = []
    failed: list[str] = []
    gates: dict[str, NoiseGate] = {}
    states: dict[str, RetimeStates] = {}
    ts = list(range(cfg.t_range[0], cfg.t_range[1] + 1))

    def write(figures: bool) -> list[str]:
        """Results so far (after every workload, so a run cut off keeps them); plots at the end."""
        rows = summarise(results)
        meta = {
            **run_meta("benchmarks.dietcode", argv, started, t0, load_before),
            "host": adatune.target.describe_host(),
            "target": str(adatune.target.host()),
            "tvm": tvm.__version__,
            "t_range": list(cfg.t_range),
            "sampled": cfg.sampled,
            "bucket": cfg.bucket,
            "static_trials": cfg.static_trials,
            "static_converge": cfg.static_converge,
            "rounds": cfg.rounds,
            "noise_gate": {name: gate.to_json() for name, gate in gates.items()},
            "noise_sentence": {name: gate.sentence() for name, gate in gates.items()},
            "host_state": {name: st.to_json() for name, st in states.items()},
            "host_state_sentence": {name: st.sentence(ts) for name, st in states.items()},
            "host_state_gated": {name: st.gated(ts) for name, st in states.items()},
            "vendor_threads": cfg.vendor_threads or physical_cores(),
            "dietcode": {
                "shapes": cfg.dietcode_shapes,
                "rounds": cfg.dietcode_rounds,
                "per_round": cfg.dietcode_per_round,
                "max_kernels": cfg.dietcode_max_kernels,
                "search": cfg.dietcode_search,
                "features": cfg.dietcode_features,
                "dispatch_tolerance": cfg.dispatch_tolerance,
                "dispatch_costs": cfg.dispatch_costs,
                "verify": cfg.dietcode_verify,
            },
            "config": vars(args),
            "failed": failed,
        }
        write_results(os.path.join(args.out, "results.json"), meta, results, rows)
        made = plot(args.out, results) if figures else []
        write_markdown(os.path.join(args.out, "summary.md"), meta, results, rows, made)
        return made

    for name in args.workloads:
        results += _run_workload(name, args.arms, cfg, args.out, failed, gates, states)
        write(figures=False)
    figures = write(figures=True)
    print(f"wrote {args.out}/results.json, summary.md and {len(figures)} figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
