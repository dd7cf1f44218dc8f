"""Weights packed at build time vs in every call: one tuned model compiled both ways, timed in turns.

The same records (the committed model-benchmark logs by default) build each model twice: ``prepack=True``
(constant weights packed once by ``FoldConstant``, ``adatune.models.prepack_weights``) and ``prepack=False``
(each conv/dense kernel whose config packs its whole weight repacks it in every call). Both must give the same
outputs; then they are timed in alternation for ``--rounds`` rounds (median of ``--repeats`` inferences per
round), framed by the noise gate. The records name their target (the logs were tuned on Zen 3, AVX2); the
models are compiled for that target, which this host runs too.

    python -m benchmarks.models.prepack_ab --out benchmarks/results/models/prepack_ab
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import time
import warnings
from typing import Any

import numpy as np

import adatune
import adatune.models as am
from adatune.models._latency import compiled_latency

from .._common import load_now, run_meta, write_summary
from ..noise_gate import NoiseGate, interleaved
from .run_ab import log_target

LOGS = {"resnet18": "records_resnet18_xgb.jsonl", "bert-base": "records_bert-base_xgb.jsonl"}


def run(name: str, log: str, rounds: int, repeats: int) -> dict[str, Any]:
    model = am.load_builtin(name)
    target = log_target(log)
    inputs = model.random_inputs(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tasks without a record use their fallback in both builds alike
        arms = {
            "prepacked": am.build(model, log, target),
            "packed per call": am.build(model, log, target, prepack=False),
        }
    outs = {arm: c.run(*inputs)[0] for arm, c in arms.items()}
    diff = float(np.abs(outs["prepacked"] - outs["packed per call"]).max())
    if diff > 1e-4 * max(1.0, float(np.abs(outs["prepacked"]).max())):
        raise RuntimeError(f"{name}: the two builds disagree by {diff}")
    gate = NoiseGate()
    gate.probe("before")
    timers = {arm: functools.partial(compiled_latency, c, inputs, repeats) for arm, c in arms.items()}
    times = interleaved(timers, rounds)
    gate.probe("after")
    ratios = [b / a for a, b in zip(times["prepacked"], times["packed per call"])]
    return {
        "model": name,
        "log": os.path.basename(log),
        "target": str(target),
        "prepacked_functions": len(arms["prepacked"].prepacked),
        "max_abs_diff": diff,
        "median_s": {arm: statistics.median(ts) for arm, ts in times.items()},
        "rounds_s": times,
        "speedup_median": statistics.median(ratios),
        "speedup_range": [min(ratios), max(ratios)],
        "noise_gate": gate.to_json(),
        "noise_sentence": gate.sentence(),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.models.prepack_ab", description=__doc__)
    ap.add_argument("--models", nargs="*", default=list(LOGS), choices=list(LOGS))
    ap.add_argument("--logs-dir", default="benchmarks/results/models")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", default="benchmarks/results/models/prepack_ab")
    args = ap.parse_args(argv)
    t0, started, load_before = time.perf_counter(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), load_now()
    results = [run(m, os.path.join(args.logs_dir, LOGS[m]), args.rounds, args.repeats) for m in args.models]
    meta = run_meta("benchmarks.models.prepack_ab", argv, started, t0, load_before) | {
        "host": adatune.target.describe_host()
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    host = meta["host"]
    lines = [
        "# Constant weights packed at build time vs in every call",
        "",
        f"Command: `{meta['command']}`; started {started}, wall {meta['wall_s']:.0f} s.  ",
        f"Host: {host['model']} ({host['isa']}, {host['cores']} cores); models compiled for the logs' target.",
        f"{args.rounds} interleaved rounds, each the median of {args.repeats} inferences per build.",
        "",
        "| model | functions prepacked | prepacked (ms) | packed per call (ms) | speedup (median of rounds) | range |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in results:
        med = r["median_s"]
        lines.append(
            f"| {r['model']} | {r['prepacked_functions']} | {med['prepacked'] * 1e3:.2f} | "
            f"{med['packed per call'] * 1e3:.2f} | {r['speedup_median']:.3f}x | "
            f"{r['speedup_range'][0]:.3f}-{r['speedup_range'][1]:.3f} |"
        )
    lines += [""] + [f"- {r['model']}: {r['noise_sentence']}" for r in results] + [""]
    write_summary(args.out, lines, echo=True)


if __name__ == "__main__":
    main()
