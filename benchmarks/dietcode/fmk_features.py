"""Which inputs let f_MK predict unseen micro-kernels: the kernel program's features or the 12 hand-made ones.

Replays DietCode record logs (no timing): for each log, the measured kernels are split into folds; the joint
cost model (``MicroKernelCostModel``, identical but for ``features``) is fitted on the other folds' (kernel, T,
seconds) and predicts the held-out kernels at every measured T. Per T it scores the Spearman rank correlation
of predicted and measured seconds and the top-1 regret (measured seconds of the predicted-best held-out
kernel over the held-out best). Repeated over seeds (fold shuffles); intervals are 2.5-97.5% bootstrap over
(seed, log) means.

    python -m benchmarks.dietcode.fmk_features --logs benchmarks/results/dietcode/all-ops/records_*.jsonl \\
        --out benchmarks/results/dietcode/fmk_features

``--measure qkv scores ...`` first measures ``--kernels`` random micro-kernels of each BERT workload at
``--shapes`` sampled T on this host (a DietCode run whose every pick is random, so the data do not favour the
model either feature set would have chosen) into ``OUT/records_<workload>.jsonl``, then replays those logs.
That step times kernels: run it alone on the machine.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import time
from collections import defaultdict
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

import adatune  # noqa: E402
from adatune.dietcode import FEATURE_KINDS, DynamicWorkload, MicroKernelCostModel, MicroKernelSpace  # noqa: E402
from adatune.dietcode._task import static_k  # noqa: E402

from .._common import load_now, run_meta, write_csv, write_summary  # noqa: E402

__all__ = ["read_log", "cross_validate", "main"]


def read_log(path: str) -> tuple[DynamicWorkload, MicroKernelSpace, dict[str, Any], dict[tuple[str, int], float]]:
    """(workload, its micro-kernel space, kernels by key, median seconds by (kernel key, T)) of a DietCode
    record log, from per-T records (``dietcode/...``) or range records (``dietcode-range/...``, each T in
    ``extra.points``; records over other T than the first's, as ``verify`` logs, are skipped)."""
    seconds: dict[tuple[str, int], float] = {}
    configs: dict[str, Any] = {}
    wl_json = target = None
    sampled: tuple[int, ...] | None = None  # the tuning rounds' sampled T (the first range record's)
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            name, args = rec["task"]
            if not str(name).startswith("dietcode"):
                continue
            wl_json, target = args[0], rec["target"]
            res = rec["result"]
            if res.get("error_no", 0) != 0:
                continue
            key = rec["key"]
            configs[key] = rec["config"]
            if str(name).startswith("dietcode-range/"):
                sampled = sampled or tuple(args[1])
                if tuple(args[1]) != sampled:  # ``verify``'s timings of the deployed kernels at every T: not
                    continue  # what the tuner's model and vote saw
                for point in res.get("extra", {}).get("points", []):
                    seconds[(key, int(point["at"][0]))] = float(np.median(point["costs"]))
            else:
                seconds[(key, int(args[1]))] = float(np.median(res["costs"]))
    if wl_json is None:
        raise ValueError(f"{path} holds no DietCode records")
    wl = DynamicWorkload.from_json(wl_json)
    tgt = adatune.target.create(target)
    space = MicroKernelSpace(tgt, wl.dtype, static_k(wl), kind=wl.kind)
    kernels = {}
    for key, cfg in configs.items():
        try:
            kernels[key] = space.decode(cfg)
        except ValueError:  # a kernel the space no longer holds (older logs): left out, as it cannot be deployed
            continue
    return wl, space, kernels, {(k, t): s for (k, t), s in seconds.items() if k in kernels}


def cross_validate(
    model: MicroKernelCostModel, kernels: dict[str, Any], seconds: dict[tuple[str, int], float], seed: int,
    folds: int,
) -> dict[str, float]:  # fmt: skip
    """Mean over T of Spearman and top-1 regret on held-out kernels, ``folds``-fold by kernel; ``model`` is refitted
    (seeded with ``seed``) per fold and keeps its feature rows across calls, so each kernel is featurised once."""
    keys = sorted(kernels)
    rng = np.random.default_rng(seed)
    order = [keys[int(i)] for i in rng.permutation(len(keys))]
    ts = sorted({t for _, t in seconds})
    model.seed = seed
    pred: dict[tuple[str, int], float] = {}
    for fold in range(folds):
        held = set(order[fold::folds])
        train = [(k, t, s) for (k, t), s in seconds.items() if k not in held]
        model.fit([kernels[k] for k, _, _ in train], [t for _, t, _ in train], [s for _, _, s in train])
        test = sorted(held)
        p = model.predict([kernels[k] for k in test], ts)
        for i, k in enumerate(test):
            for j, t in enumerate(ts):
                pred[(k, t)] = float(p[i, j])
    rhos, regrets = [], []
    for t in ts:
        ks = [k for k in keys if (k, t) in seconds]
        got = np.array([seconds[(k, t)] for k in ks])
        want = np.array([pred[(k, t)] for k in ks])
        rhos.append(float(spearmanr(got, want).statistic))
        regrets.append(float(got[int(np.argmin(want))] / got.min()))
    return {"spearman": float(np.mean(rhos)), "top1_regret": float(np.mean(regrets))}


def _measure_random(name: str, kernels: int, shapes: int, out: str) -> str:
    """``kernels`` random micro-kernels of BERT's ``name`` GEMM timed at ``shapes`` T; the log's path."""
    from adatune.dietcode import DietCodeTuner, bert_workloads

    log = os.path.join(out, f"records_{name}.jsonl")
    if os.path.exists(log):
        os.remove(log)
    per_round = 8
    tuner = DietCodeTuner(
        bert_workloads()[name], n_shapes=shapes, rounds=-(-kernels // per_round), kernels_per_round=per_round,
        explore=1.0, seed=0, log_file=log, features="hand", search="exhaustive",
    )  # fmt: skip
    start = time.perf_counter()
    tuner.tune()
    print(f"{name}: {kernels} random kernels x {shapes} T measured in {time.perf_counter() - start:.0f} s", flush=True)
    return log


def _interval(xs: list[float], rng: np.random.Generator) -> list[float]:
    boots = [float(np.mean(rng.choice(xs, size=len(xs)))) for _ in range(2000)]
    return [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.dietcode.fmk_features", description=__doc__)
    ap.add_argument("--logs", nargs="*", default=[], help="DietCode record logs (globs allowed)")
    ap.add_argument("--measure", nargs="*", default=[], help="BERT workloads to measure random kernels of first")
    ap.add_argument("--kernels", type=int, default=96, help="random micro-kernels measured per workload")
    ap.add_argument("--shapes", type=int, default=8, help="sampled T per workload")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--folds", type=int, default=4)
    args = ap.parse_args(argv)
    t0, started, load_before = time.perf_counter(), time.strftime("%Y-%m-%dT%H:%M:%S%z"), load_now()
    os.makedirs(args.out, exist_ok=True)
    measured = [_measure_random(name, args.kernels, args.shapes, args.out) for name in args.measure]
    paths = sorted({p for pattern in args.logs for p in glob.glob(pattern)} | set(measured))
    if not paths:
        raise SystemExit(f"no log matches {args.logs}")
    rows: list[dict[str, Any]] = []
    for path in paths:
        wl, space, kernels, seconds = read_log(path)
        models = {features: MicroKernelCostModel(space, wl, 0, features) for features in FEATURE_KINDS}
        for seed in range(args.seeds):
            for features in FEATURE_KINDS:
                score = cross_validate(models[features], kernels, seconds, seed, args.folds)
                mcpu = str(space.target.attrs.get("mcpu", ""))
                rows.append({"log": os.path.basename(path), "workload": wl.name, "mcpu": mcpu,
                             "kernels": len(kernels), "seed": seed, "features": features, **score})  # fmt: skip
    rng = np.random.default_rng(0)
    summary: dict[str, dict[str, Any]] = defaultdict(dict)
    for features in FEATURE_KINDS:
        for metric in ("spearman", "top1_regret"):
            xs = [r[metric] for r in rows if r["features"] == features]
            summary[features][metric] = {"mean": float(np.mean(xs)), "ci95": _interval(xs, rng)}
    os.makedirs(args.out, exist_ok=True)
    write_csv(os.path.join(args.out, "folds.csv"), rows)
    meta = run_meta("benchmarks.dietcode.fmk_features", argv, started, t0, load_before)
    meta["host"] = adatune.target.describe_host()  # the replaying host; each log's own mcpu is in its rows
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "summary": summary, "rows": rows}, f, indent=1)
    _plot(args.out, rows)
    _markdown(args.out, meta, summary, rows)
    return dict(summary)


def _plot(out: str, rows: list[dict[str, Any]]) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    wls = list(dict.fromkeys(r["workload"] for r in rows))
    for ax, metric in zip(axes, ("spearman", "top1_regret")):
        for n, features in enumerate(FEATURE_KINDS):
            sel = [[r[metric] for r in rows if r["workload"] == w and r["features"] == features] for w in wls]
            means = [float(np.mean(xs)) for xs in sel]
            ax.bar(np.arange(len(wls)) + 0.4 * n, means, width=0.4, label=features)
        ax.set_xticks(np.arange(len(wls)) + 0.2, wls, rotation=30)
        ax.set_title({"spearman": "Spearman (held-out kernels, higher is better)",
                      "top1_regret": "top-1 regret (lower is better)"}[metric], fontsize=9)  # fmt: skip
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "fmk_features.png"), dpi=110)
    plt.close(fig)


def _markdown(out: str, meta: dict[str, Any], summary: dict[str, dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    lines = [
        "# f_MK's features: the kernel's program vs 12 hand-made ones (held-out kernels, replayed logs)",
        "",
        f"Command: `{meta['command']}` (no timing: replays committed measurements; wall {meta['wall_s']:.0f} s).",
        f"Logs: {', '.join(sorted({r['log'] for r in rows}))}; hosts (mcpu): "
        f"{', '.join(sorted({r['mcpu'] for r in rows}))}; {len({r['seed'] for r in rows})} seeds of fold shuffles.",
        "",
        "| features | Spearman (mean over T) | 95% CI | top-1 regret | 95% CI |",
        "|---|---|---|---|---|",
    ]
    for features, s in summary.items():
        sp, rg = s["spearman"], s["top1_regret"]
        lines.append(f"| {features} | {sp['mean']:.3f} | [{sp['ci95'][0]:.3f}, {sp['ci95'][1]:.3f}] | "
                     f"{rg['mean']:.3f} | [{rg['ci95'][0]:.3f}, {rg['ci95'][1]:.3f}] |")  # fmt: skip
    lines += ["", "Per workload (mean over seeds):", "", "| workload | kernels | features | Spearman | top-1 regret |",
              "|---|---|---|---|---|"]  # fmt: skip
    for wl in dict.fromkeys(r["workload"] for r in rows):
        for features in FEATURE_KINDS:
            sel = [r for r in rows if r["workload"] == wl and r["features"] == features]
            lines.append(f"| {wl} | {sel[0]['kernels']} | {features} | {np.mean([r['spearman'] for r in sel]):.3f} | "
                         f"{np.mean([r['top1_regret'] for r in sel]):.3f} |")  # fmt: skip
    lines += ["", "![f_MK features](fmk_features.png)", ""]
    write_summary(out, lines)


if __name__ == "__main__":
    main()
