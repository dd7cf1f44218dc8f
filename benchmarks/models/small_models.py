"""The three small models beyond the zoo (``adatune.testing.small_models``), tuned briefly, against PyTorch eager.

Issue 19's goal: "the three small test models correct; their tuned latency at or below PyTorch eager's". Per
model and seed: import through Relax, tune every task for ``--budget-s`` seconds (gradient scheduler, XGB on knob
tasks, trace search on the rest), build from the log, check the outputs against PyTorch, then time the compiled
model and PyTorch eager (all physical cores, inference mode) in ``--rounds`` turns (the order reversed every other
round, a pause after each engine for its spinning threads), the noise gate framing the whole run. Per seed the
speed ratio is PyTorch's median latency over adatune's; over seeds the geometric mean with a Student-t 95%
interval. The models are tiny (16x16 images, 12 tokens), so per-call overhead is part of what is compared.

    python -m benchmarks.models.small_models --seeds 0 1 2 --budget-s 40 --out benchmarks/results/small_models_zen4

Writes results.json, summary.md and small_models.png under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import adatune  # noqa: E402
import adatune.models as am  # noqa: E402
from adatune.target import size_tvm_thread_pool  # noqa: E402

from .._common import load_now, run_meta, settled, write_summary  # noqa: E402
from ..noise_gate import NoiseGate, interleaved  # noqa: E402
from .seeds import ratio_interval  # noqa: E402


def _one(name: str, seed: int, budget_s: float, rounds: int, repeats: int, out: str) -> dict[str, Any]:
    import torch

    from adatune.testing.small_models import SMALL_MODELS

    cls, shape = SMALL_MODELS[name]
    torch.manual_seed(seed)
    net = cls().eval()
    model = am.from_torch(net, (torch.randn(*shape),), name=name)
    log = os.path.join(out, f"records_{name}_seed{seed}.jsonl")
    if os.path.exists(log):
        os.remove(log)  # a fresh tuning run per seed: the budget is the measured quantity
    t0 = time.perf_counter()
    summary = am.tune_model(model, log, time_budget=budget_s, seed=seed, progress=False)
    tune_s = time.perf_counter() - t0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tasks left without a record fall back, and say so
        compiled = am.build(model, log)
    x = model.random_inputs(seed)
    np.testing.assert_allclose(compiled.run(*x)[0], model.reference(*x)[0], rtol=1e-4, atol=1e-4)
    timers = {  # as benchmarks.models.run_ab times its engines
        "adatune": lambda: settled(am.compiled_latency(compiled, x, repeats)),
        "pytorch": lambda: settled(am.framework_latency(model, "pytorch", x, repeats) or float("nan")),
    }
    rounds_s = interleaved(timers, rounds)
    ada, pt = statistics.median(rounds_s["adatune"]), statistics.median(rounds_s["pytorch"])
    print(f"{name} seed {seed}: adatune {ada * 1e3:.4f} ms, PyTorch {pt * 1e3:.4f} ms, {pt / ada:.2f}x", flush=True)
    return {
        "model": name,
        "seed": seed,
        "tune_s": tune_s,
        "trials": int(sum(summary.trials)),
        "applied": dict(compiled.applied),
        "rounds_s": rounds_s,
        "adatune_ms": ada * 1e3,
        "pytorch_ms": pt * 1e3,
        "speed_vs_pytorch": pt / ada,
    }


def _write(out: str, meta: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "runs": runs}, f, indent=1)


def _summary(out: str, meta: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    names = list(dict.fromkeys(r["model"] for r in runs))
    lines = [
        "# Small models beyond the zoo against PyTorch eager",
        "",
        f"Command: `{meta['command']}`  ",
        f"Host: {meta['host'].get('model', '?')} ({meta['host'].get('isa', '?')}), started {meta['started']}, "
        f"{meta['wall_s'] / 60:.0f} min in all.  ",
        meta["noise_sentence"],
        "",
        "| model | seed | trials | adatune (ms) | PyTorch eager (ms) | speed vs PyTorch |",
        "|---|---|---|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r['model']} | {r['seed']} | {r['trials']} | {r['adatune_ms']:.4f} | {r['pytorch_ms']:.4f} | "
            f"{r['speed_vs_pytorch']:.2f}x |"
        )
    lines.append("")
    for n in names:
        ratios = [r["speed_vs_pytorch"] for r in runs if r["model"] == n]
        g, lo, hi = ratio_interval(ratios)
        lines.append(
            f"- {n}: geometric mean {g:.2f}x PyTorch eager over {len(ratios)} seed(s), 95% t [{lo:.2f}, {hi:.2f}]"
        )
    lines += [
        "",
        "(x > 1: adatune faster; medians of the rounds, engines in turns.)",
        "",
        "![small_models.png](small_models.png)",
    ]
    write_summary(out, lines)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for i, n in enumerate(names):
        ratios = [r["speed_vs_pytorch"] for r in runs if r["model"] == n]
        ax.scatter([i] * len(ratios), ratios, color="C0")
    ax.axhline(1.0, color="grey", lw=1, ls="--")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("speed vs PyTorch eager (x)")
    ax.set_title("small models, one point per seed")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "small_models.png"), dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    size_tvm_thread_pool()
    ap = argparse.ArgumentParser(prog="python -m benchmarks.models.small_models", description=__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--budget-s", type=float, default=40.0, help="tuning seconds per model and seed")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--repeats", type=int, default=50, help="timed inferences per engine and round")
    ap.add_argument("--out", default="benchmarks/results/small_models")
    args = ap.parse_args(argv)
    from adatune.testing.small_models import SMALL_MODELS

    os.makedirs(args.out, exist_ok=True)
    started, t0, load_before = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), time.perf_counter(), load_now()
    host = adatune.target.describe_host()
    gate = NoiseGate()
    gate.probe("before")
    runs: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    for seed in args.seeds:  # seed s of every model before seed s + 1
        for name in SMALL_MODELS:
            runs.append(_one(name, seed, args.budget_s, args.rounds, args.repeats, args.out))
            meta = {**run_meta("benchmarks.models.small_models", argv, started, t0, load_before), "host": host}
            _write(args.out, meta, runs)  # after every model: a killed run keeps what it measured
    gate.probe("after")
    meta = {**run_meta("benchmarks.models.small_models", argv, started, t0, load_before), "host": host}
    meta["noise_gate"], meta["noise_sentence"] = gate.to_json(), gate.sentence()
    _write(args.out, meta, runs)
    _summary(args.out, meta, runs)
    print(meta["noise_sentence"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
