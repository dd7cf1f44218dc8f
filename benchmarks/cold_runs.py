"""How the runner's warm-up changes what a tuner sees: cold first runs against the steady state.

A tuning run loads each candidate's library into its runner worker and times it at once. On the Zen 3 host a
freshly loaded depthwise convolution read 0.28-0.32 ms for its first ~15 runs and 0.14-0.16 ms after, so the
default runner (number=5, repeat=3: 15 runs) ranked it on its cold runs and trace search kept a slower program
(``benchmarks/results/no_template_ops/zen3_generic_candidate``). This benchmark measures that through the real
``LocalBuilder`` and ``LocalRunner``, candidates of one task built once, then per round and in turns:

- ``series``: ``number=1, repeat=60`` with no warm-up: each candidate's first 60 single runs after its load;
  the median of the last 30 is its steady time, the mean of the first 15 over it its cold ratio;
- one arm per ``--warmups`` value (ms): the default runner (number=5, repeat=3) with that ``warmup_ms``; its
  median cost over the steady time says how far the tuner's reading is from the kernel's speed;
- ``reference``: number=5, repeat=3 after a 300 ms warm-up, the ranking the arms are compared with.

Per arm: the median ratio to the steady time (with its spread over candidates and rounds), Kendall's tau of the
arm's ranking against the reference's per round, how often the arm's fastest is the reference's, and the
runner's wall-clock per candidate (what the warm-up costs). The noise gate frames the run.

    python -m benchmarks.cold_runs --op depthwise-conv --candidates 12 --rounds 5 \\
        --out benchmarks/results/cold_runs/<name>
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

import numpy as np
from scipy import stats

import adatune
from adatune.measure import LocalBuilder, LocalRunner, MeasureInput
from adatune.trace import RULE_SETS

from . import no_template_ops
from ._common import load_now, load_sentence, run_meta, write_csv, write_summary
from .noise_gate import NoiseGate

#: knob-template tasks this benchmark can take beside the operators without a template
KNOB_TASKS: dict[str, tuple[str, tuple[Any, ...]]] = {
    "dense-1024": ("dense.x86", (1024, 1024, 1024, "float32")),
    "dense-bert-qkv": ("dense.x86", (128, 2304, 768, "float32")),
}
SERIES_RUNS = 60
COLD_RUNS = 15
REFERENCE_WARMUP_MS = 300.0


def make_task(op: str, target: Any) -> Any:
    if op in KNOB_TASKS:
        name, args = KNOB_TASKS[op]
        return adatune.task.create(name, args, target)
    if op not in no_template_ops.SHAPES:
        raise SystemExit(f"unknown op {op!r}: one of {sorted([*KNOB_TASKS, *no_template_ops.SHAPES])}")
    shape = no_template_ops.SHAPES[op][0]
    return adatune.task.create(RULE_SETS["packed"].prefix + f"no-template/{op}", shape, target)


def arms(warmups: list[float]) -> dict[str, LocalRunner]:
    """The runners, each with its own worker process (kept across rounds, as a tuning run keeps it)."""
    out = {"series": LocalRunner(number=1, repeat=SERIES_RUNS, warmup_ms=0.0, timeout=60)}
    for w in warmups:
        out[f"warmup-{w:g}ms"] = LocalRunner(warmup_ms=w, timeout=60)
    out["reference"] = LocalRunner(warmup_ms=REFERENCE_WARMUP_MS, timeout=60)
    return out


def measure(op: str, args: argparse.Namespace) -> tuple[list[dict], dict[str, Any]]:
    target = adatune.target.host()
    task = make_task(op, target)
    rng = np.random.default_rng(args.seed)
    cands = task.space.random_candidates(rng, args.candidates)
    inputs = [MeasureInput(task, c) for c in cands]
    builder = LocalBuilder()
    builds = builder.build(inputs)
    builder.close()
    ok = [i for i, b in enumerate(builds) if b.error_no == 0]
    inputs, builds, cands = [inputs[i] for i in ok], [builds[i] for i in ok], [cands[i] for i in ok]
    runners = arms(args.warmups)
    names = list(runners)
    rows: list[dict] = []
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            t0 = time.perf_counter()
            results = runners[name].run(inputs, builds)
            wall = time.perf_counter() - t0
            for k, res in enumerate(results):
                row = {"op": op, "round": r, "arm": name, "candidate": k, "error": int(res.error_no)}
                if res.ok:
                    costs = [float(c) for c in res.costs]
                    row |= {"cost": float(np.median(costs)), "run_time": res.run_time, "runs": res.runs}
                    if name == "series":
                        steady = float(np.median(costs[-30:]))
                        row |= {"steady": steady, "cold_ratio": float(np.mean(costs[:COLD_RUNS])) / steady}
                        row["series"] = costs
                row["arm_wall_s"] = wall
                rows.append(row)
        print(f"{op}: round {r + 1}/{args.rounds} done", flush=True)
    for runner in runners.values():
        runner.close()
    return rows, {
        "candidates": [str(c) for c in cands],
        "space_size": len(task.space) if hasattr(task.space, "__len__") else None,
    }


def summarise(rows: list[dict], warm_arms: list[str]) -> list[dict[str, Any]]:
    """Per op and arm: ratio to the steady time, ranking agreement with the reference, wall-clock."""
    out = []
    for op in dict.fromkeys(r["op"] for r in rows):
        mine = [r for r in rows if r["op"] == op and "cost" in r]
        steady = {(r["round"], r["candidate"]): r["steady"] for r in mine if r["arm"] == "series"}
        cold = [r["cold_ratio"] for r in mine if r["arm"] == "series"]
        ref = {(r["round"], r["candidate"]): r["cost"] for r in mine if r["arm"] == "reference"}
        rounds = sorted({r["round"] for r in mine})
        for arm in [*warm_arms, "reference"]:
            costs = {(r["round"], r["candidate"]): r["cost"] for r in mine if r["arm"] == arm}
            ratios = [c / steady[k] for k, c in costs.items() if k in steady]
            taus, top1 = [], []
            for rnd in rounds:
                keys = sorted(k for k in costs if k[0] == rnd and k in ref)
                if len(keys) < 3:
                    continue
                a, b = [costs[k] for k in keys], [ref[k] for k in keys]
                taus.append(float(stats.kendalltau(a, b).statistic))
                top1.append(int(np.argmin(a) == np.argmin(b)))
            per_cand = [r["run_time"] for r in mine if r["arm"] == arm]
            out.append(
                {
                    "op": op,
                    "arm": arm,
                    "ratio_to_steady_median": statistics.median(ratios) if ratios else None,
                    "ratio_to_steady_p90": float(np.quantile(ratios, 0.9)) if ratios else None,
                    "kendall_tau_median": statistics.median(taus) if taus else None,
                    "kendall_tau_min": min(taus) if taus else None,
                    "same_fastest": f"{sum(top1)}/{len(top1)}",
                    "seconds_per_candidate": statistics.median(per_cand) if per_cand else None,
                    "cold_ratio_median": statistics.median(cold) if cold else None,
                    "cold_ratio_max": max(cold) if cold else None,
                }
            )
    return out


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = list(dict.fromkeys(r["op"] for r in rows))
    fig, axes = plt.subplots(1, len(ops), figsize=(5 * len(ops), 3.6), squeeze=False)
    for ax, op in zip(axes[0], ops):
        series = [r for r in rows if r["op"] == op and r["arm"] == "series" and "series" in r]
        for r in series:
            ax.plot(np.asarray(r["series"]) / r["steady"], color="C0" if r["round"] == 0 else "C1", alpha=0.35, lw=0.8)
        ax.axvline(COLD_RUNS, color="grey", ls=":", lw=0.8)
        ax.axhline(1.0, color="black", lw=0.6)
        ax.set_yscale("log")
        ax.set_xlabel("run after the library was loaded")
        ax.set_ylabel("run time / steady (median of runs 31-60)")
        ax.set_title(f"{op}: round 1 (blue), later rounds (orange)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(out: str, result: dict[str, Any]) -> None:
    os.makedirs(out, exist_ok=True)
    rows = result["rows"]
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    write_csv(os.path.join(out, "rows.csv"), [{k: v for k, v in r.items() if k != "series"} for r in rows])
    write_csv(os.path.join(out, "summary.csv"), result["summary"])
    plot(rows, os.path.join(out, "cold_series.png"))
    meta, host, gate = result["meta"], result["meta"]["host"], NoiseGate.from_json(result["noise_gate"])
    lines = [
        "# Cold first runs and the runner's warm-up",
        "",
        f"`{meta['command']}`, started {meta['started']}, {meta['wall_s'] / 60:.1f} min.",
        f"Host: {host['model']} ({host['isa']}, {host['cores']} cores). " + load_sentence(meta, host["cores"]),
        "",
        gate.sentence(),
        "",
        f"{result['candidates_per_op']} candidates per operator (seed {result['seed']}), {result['rounds']} rounds; "
        f"each candidate's steady time is the median of its runs 31-60 after its library was loaded (arm `series`, "
        f"no warm-up); its cold ratio is the mean of its first {COLD_RUNS} runs over that. The arms time every "
        "candidate as the default runner does (number=5, repeat=3) after the stated warm-up; `reference` after "
        f"{REFERENCE_WARMUP_MS:g} ms. Kendall's tau and the fastest candidate compare each arm's ranking with the "
        "reference's in the same round.",
        "",
        "| op | arm | cost / steady (median, p90) | Kendall tau vs reference (median, min) | same fastest "
        "| s per candidate | cold ratio (median, max) |",
        "|---|---|---|---|---|---|---|",
    ]

    def num(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    for s in result["summary"]:
        lines.append(
            f"| {s['op']} | {s['arm']} | {num(s['ratio_to_steady_median'], '.2f')}, "
            f"{num(s['ratio_to_steady_p90'], '.2f')} | {num(s['kendall_tau_median'], '.2f')}, "
            f"{num(s['kendall_tau_min'], '.2f')} | {s['same_fastest']} | {num(s['seconds_per_candidate'], '.3f')} "
            f"| {num(s['cold_ratio_median'], '.2f')}, {num(s['cold_ratio_max'], '.2f')} |"
        )
    if not gate.passed:
        lines += ["", "The noise gate failed: the figures are as measured, and no claim rests on them."]
    lines += ["", "![per-run times after load](cold_series.png)"]
    write_summary(out, lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", nargs="+", default=["depthwise-conv"])
    p.add_argument("--candidates", type=int, default=12)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmups", type=float, nargs="+", default=[0.0, 10.0], help="warm-ups (ms) of the arms")
    p.add_argument("--out", default="benchmarks/results/cold_runs/latest")
    args = p.parse_args(argv)
    if args.candidates < 3 or args.rounds < 1:
        raise SystemExit("need at least 3 candidates and 1 round")
    started, t0, load_before = time.strftime("%Y-%m-%d %H:%M:%S"), time.perf_counter(), load_now()
    gate = NoiseGate()
    print(gate.probe("before").robust_cv, flush=True)
    rows, spaces = [], {}
    for op in args.ops:
        got, spaces[op] = measure(op, args)
        rows += got
    gate.probe("after")
    warm_arms = [f"warmup-{w:g}ms" for w in args.warmups]
    result = {
        "meta": run_meta("benchmarks.cold_runs", argv, started, t0, load_before)
        | {"host": adatune.target.describe_host()},
        "noise_gate": gate.to_json(),
        "candidates_per_op": args.candidates,
        "rounds": args.rounds,
        "seed": args.seed,
        "spaces": spaces,
        "summary": summarise(rows, warm_arms),
        "rows": rows,
    }
    write(args.out, result)
    print(open(os.path.join(args.out, "summary.md"), encoding="utf-8").read())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
