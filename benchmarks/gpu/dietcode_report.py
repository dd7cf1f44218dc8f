"""DietCode on a GPU, from the timings the standalone runner took there: the tuner replayed here, judged at every T.

    python -m benchmarks.gpu.dietcode_report --batch BATCH --results DIR --out DIR [--seeds 0,1,2]

For each workload and seed, ``DietCodeTuner`` (evolutionary search on the joint model, f_MK on the kernels' program
features, or the 12 hand-made features as the baseline arm) runs its rounds with a ``ReplayRunner`` serving the phase-1
timings of the kernels it proposes at the T its seed samples (every kernel was timed there, so what was measured does
not steer the search). Its dispatcher then picks a kernel for every T of the range, and that kernel's phase-2 timing at
that T is its latency (missing outside phase 2's set). Arms at each T: cuBLAS (PyTorch, TF32 off, median of the readings
around the T's kernels), the per-shape best (the best of the whole space at phase-1 T, of phase 2's kernels elsewhere),
padding to the largest T (T = 128's best kernel) and buckets of 16 (each bucket's best at its top T).
``--dispatch-costs`` is the tuner's: the sampled T vote on their measured seconds or on the model's predictions; each
seed's 8 sampled T are also its tuning data, so the held-out column (the phase-1 T that seed did not sample) is the fair
comparison of the two. Writes ``results.json``, ``per_t.csv``, ``summary.md`` and ``dietcode_gpu.png``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from benchmarks._common import pyplot, save_figure
from benchmarks.models.seeds import ratio_interval

__all__ = ["main"]

WRONG, NOT_MEASURED, OK = 5, -1, 0


def geomean_finite(xs: Any) -> float:
    a = np.asarray(xs, dtype=np.float64)
    a = a[np.isfinite(a)]
    return float(np.exp(np.log(a).mean())) if len(a) else float("nan")


def load(batch: str, results: str, only: Sequence[str] = ()) -> tuple[dict, dict[str, dict], dict]:
    with open(os.path.join(batch, "plan.json")) as f:
        plan = json.load(f)
    with open(os.path.join(results, "meta.json")) as f:
        meta = json.load(f)
    z = np.load(os.path.join(results, "results.npz"))
    out: dict[str, dict] = {}
    for name in plan["workloads"]:
        if f"{name}/p1_seconds" not in z.files or (only and name not in only):
            continue
        with gzip.open(os.path.join(batch, f"{name}.json.gz"), "rt") as f:
            data = json.load(f)
        keys = [str(k) for k in z[f"{name}/keys"]]
        p1 = z[f"{name}/p1_seconds"]
        p1_err = z[f"{name}/p1_error"]
        p2_rows = z[f"{name}/p2_kernels"]
        out[name] = {
            "workload": data["workload"],
            "keys": keys,
            "p1": p1,
            "p1_err": p1_err,
            "p1_med": np.where(p1_err == OK, np.nanmedian(p1, axis=2), np.nan),
            "p2_keys": [keys[int(i)] for i in p2_rows],
            "p2": z[f"{name}/p2_seconds"],
            "p2_err": z[f"{name}/p2_error"],
            "cublas_p1": z[f"{name}/cublas_p1"],
            "cublas_p2": z[f"{name}/cublas_p2"],
            "ts": data["ts"],
        }
        d = out[name]
        d["p2_med"] = np.where(d["p2_err"] == OK, np.nanmedian(d["p2"], axis=2), np.nan) if len(p2_rows) else None
    return plan, out, meta


def tuners_kernels(d: dict, smem: Sequence[str] | None = None) -> dict:
    """``d`` without the kernels the replayed tuner's space does not hold (the arms are judged within it too):
    interleaved ones (an option batch may time them beside its layouts) and, given ``smem``, other smem layouts'."""
    from adatune.dietcode import MicroKernel

    def held(key: str) -> bool:
        k = MicroKernel.from_key(key)
        return not k.interleave and (smem is None or k.smem in smem)

    p1_rows = [i for i, k in enumerate(d["keys"]) if held(k)]
    p2_rows = [i for i, k in enumerate(d["p2_keys"]) if held(k)]
    out = dict(d, keys=[d["keys"][i] for i in p1_rows], p2_keys=[d["p2_keys"][i] for i in p2_rows])
    for field in ("p1", "p1_err", "p1_med"):
        out[field] = d[field][p1_rows]
    for field in ("p2", "p2_err") + (("p2_med",) if d["p2_med"] is not None else ()):
        out[field] = d[field][p2_rows]
    if not p2_rows:  # phase 2 timed none of this space's kernels: as a run without phase 2
        out["p2_med"] = None
    return out


def replay_table(task: Any, d: dict, ts1: list[int]) -> dict:
    """``(workload key, kernel key) -> MeasureResult`` for ``task``'s sampled T, from phase 1."""
    from adatune.measure import MeasureErrorNo, MeasureResult

    cols = [ts1.index(t) for t in task.ts]
    table = {}
    for row, key in enumerate(d["keys"]):
        errs = d["p1_err"][row, cols]
        if np.any(errs == NOT_MEASURED):
            continue  # not timed there: the replay answers "not in the table", as a failed measurement
        if np.any(errs != OK):
            code = MeasureErrorNo(int(errs[errs != OK][0]))
            table[(task.workload_key, key)] = MeasureResult((), code, 0.0, 0.0, f"{code.name} on the GPU")
            continue
        points = [{"at": [t], "costs": [float(c) for c in d["p1"][row, col]]} for t, col in zip(task.ts, cols)]
        total = float(sum(np.sum(p["costs"]) for p in points))
        costs = tuple(float(np.median(p["costs"])) for p in points)
        table[(task.workload_key, key)] = MeasureResult(
            costs, MeasureErrorNo.NO_ERROR, total, 0.0, run_time=total, runs=len(points) * 3, extra={"points": points}
        )
    return table


def tune_replayed(
    d: dict,
    target: Any,
    seed: int,
    features: str,
    rounds: int,
    per_round: int,
    dispatch_costs: str = "measured",
    split_k: tuple[int, ...] = (1,),
    smem: tuple[str, ...] = ("",),
) -> dict:
    """One replayed tuning run: the kernel its dispatcher picks at every T, and what it measured and deployed."""
    from adatune.dietcode import DietCodeTuner
    from adatune.dietcode._workloads import DynamicWorkload
    from adatune.measure import ReplayRunner, measure_option

    wl = DynamicWorkload.from_json(d["workload"])
    tuner = DietCodeTuner(
        wl, target, rounds=rounds, kernels_per_round=per_round, seed=seed, features=features,
        dispatch_costs=dispatch_costs, split_k=split_k, smem=smem,
    )  # fmt: skip
    missing = set(d["keys"]) ^ {k.key for k in tuner.kernels}
    if missing:
        raise ValueError(f"{wl.name}: the exported space and this space differ in {len(missing)} kernels")
    table = replay_table(tuner.task, d, d["ts1"])
    t0 = time.time()
    tuner.tune(measure_option=measure_option(runner=ReplayRunner(table)))
    res = tuner.result()
    return {
        "chosen": [res.kernel_for(t).key for t in d["ts"]],
        "deployed": [k.key for k in res.kernels],
        "measured": len({m.kernel.key for m in res.measurements}),
        "shapes": list(res.shapes),
        "replay_seconds": time.time() - t0,
    }


def _job(job: tuple) -> tuple:
    """A pool worker: ``(name, features, seed, tune_replayed's dict or an error string)``."""
    batch, results, ts1, name, target, seed, feat, rounds, per_round, dispatch_costs, smem = job
    plan, data, _ = load(batch, results, [name])
    d = tuners_kernels(data[name], smem)
    d["ts1"] = ts1
    try:
        split_k = tuple(plan.get("split_k", [1]))  # the exported space's (batches before split-K: none)
        return name, feat, seed, tune_replayed(d, target, seed, feat, rounds, per_round, dispatch_costs, split_k, smem)
    except Exception as err:  # noqa: BLE001 - one arm failing is reported, not fatal
        return name, feat, seed, f"{type(err).__name__}: {err}"


def arms(d: dict) -> dict[str, np.ndarray]:
    """Seconds at every T of the range for the reference arms (NaN where not measured)."""
    ts, ts1 = d["ts"], d["ts1"]
    n = len(ts)
    cub = np.nanmedian(d["cublas_p2"], axis=1)
    best = np.full(n, np.nan)
    if d["p2_med"] is not None:
        with np.errstate(all="ignore"):
            best = np.nanmin(np.where(np.isfinite(d["p2_med"]), d["p2_med"], np.inf), axis=0)
        best[~np.isfinite(best)] = np.nan
    for col, t in enumerate(ts1):  # the whole space was timed at phase-1 T
        whole = np.nanmin(d["p1_med"][:, col]) if np.isfinite(d["p1_med"][:, col]).any() else np.nan
        best[ts.index(t)] = np.nanmin([whole, best[ts.index(t)]])
    hi = ts1.index(max(ts1))
    padded = np.full(n, np.nanmin(d["p1_med"][:, hi]))
    bucket = np.array([best[min(n - 1, int(math.ceil(t / 16) * 16) - ts[0])] for t in ts])
    return {"cublas": cub, "per_shape_best": best, "padded_largest": padded, "bucket16": bucket}


def dietcode_latency(d: dict, chosen: list[str]) -> np.ndarray:
    """Measured seconds of the kernel chosen at each T (phase 2's timing; phase 1's at its T; else NaN)."""
    lat = np.full(len(d["ts"]), np.nan)
    row = {k: i for i, k in enumerate(d["p2_keys"])}
    for j, t in enumerate(d["ts"]):
        key = chosen[j]
        if key in row and d["p2_med"] is not None:
            lat[j] = d["p2_med"][row[key], j]
        elif t in d["ts1"]:
            lat[j] = d["p1_med"][d["keys"].index(key), d["ts1"].index(t)]
    return lat


def run_metrics(
    d: dict, ref: dict[str, np.ndarray], chosen: list[str], lat: np.ndarray, sampled: Sequence[int] = ()
) -> dict[str, Any]:
    """A replayed run against cuBLAS and the per-shape best: first at the phase-1 T, where every kernel and cuBLAS were
    timed together, and at those of them the run did not sample (``held_out``: no timing there reached the tuner), then
    over every T of the range where phase 2 timed the chosen kernel (``missing_ts``: how many it did not)."""
    cub1 = np.nanmedian(d["cublas_p1"], axis=1)
    rows = {k: i for i, k in enumerate(d["keys"])}
    lat1 = np.array([d["p1_med"][rows[chosen[d["ts"].index(t)]], c] for c, t in enumerate(d["ts1"])])
    best1 = np.nanmin(d["p1_med"], axis=0)
    speed1 = cub1 / lat1
    speed = ref["cublas"] / lat
    held = np.array([t not in set(sampled) for t in d["ts1"]])
    return {
        "geomean_speed_vs_cublas_held_out": geomean_finite(speed1[held]),
        "geomean_vs_per_shape_best_held_out": geomean_finite((lat1 / best1)[held]),
        "ts_held_out": int(held.sum()),
        "geomean_speed_vs_cublas": geomean_finite(speed1),
        "min_speed_vs_cublas": float(np.nanmin(speed1)),
        "ts_at_or_above_0.9": int(np.sum(speed1 >= 0.9)),
        "ts_evaluated": len(d["ts1"]),
        "geomean_vs_per_shape_best": geomean_finite(lat1 / best1),
        "geomean_speed_vs_cublas_all_t": geomean_finite(speed),
        "min_speed_vs_cublas_all_t": float(np.nanmin(speed)),
        "missing_ts": int(np.sum(~np.isfinite(lat))),
    }


def reuse(out_dir: str, dispatch_costs: str) -> dict[tuple[str, str, int], dict]:
    """The replayed runs an earlier report wrote (its per-T choices and run facts), keyed (workload, features, seed);
    it must have voted on the same costs (reports older than the option voted on predictions)."""
    with open(os.path.join(out_dir, "results.json")) as f:
        old = json.load(f)
    theirs = old["tuning"].get("dispatch_costs", "predicted")
    if theirs != dispatch_costs:
        raise ValueError(f"{out_dir} voted on {theirs} costs; pass --dispatch-costs {theirs} to reuse its runs")
    chosen: dict[tuple[str, str, int], list[str]] = {}
    with open(os.path.join(out_dir, "per_t.csv")) as f:
        for row in csv.DictReader(f):
            chosen.setdefault((row["workload"], row["features"], int(row["seed"])), []).append(row["kernel"])
    done = {}
    for name, w in old["workloads"].items():
        for tag, run in w["runs"].items():
            feat, seed = tag.split("/")
            if "error" in run or (name, feat, int(seed)) not in chosen:
                continue
            done[(name, feat, int(seed))] = {
                "chosen": chosen[(name, feat, int(seed))],
                "deployed": run["deployed"],
                "measured": run["kernels_measured"],
                "shapes": run["sampled_ts"],
                "replay_seconds": run["replay_seconds"],
            }
    return done


def random_trials_to(d: dict, within: float = 1.05) -> float:
    """Mean over phase-1 T of the expected kernels a per-shape random search draws (without replacement) before
    one within ``within`` of that T's best in the whole space: what tuning each shape to convergence costs."""
    out = []
    for col in range(d["p1_med"].shape[1]):
        v = d["p1_med"][:, col]
        v = v[np.isfinite(v)]
        if len(v):
            m = int(np.sum(v <= within * v.min()))
            out.append((len(v) + 1) / (m + 1))
    return float(np.mean(out)) if out else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.dietcode.run import DISPATCH_COSTS_OPTION as dispatch_costs

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    p.add_argument("--batch", required=True)
    p.add_argument("--results", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--features", default="program,hand")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--per-round", type=int, default=8)
    p.add_argument("--workloads", default="")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument(
        "--smem", default=None, help="the tuner's shared-memory layouts (comma separated; default: the batch's)"
    )
    p.add_argument("--reuse", default="", help="an earlier --out of this report: its runs' choices, not re-tuned")
    p.add_argument(
        "--dispatch-costs", default=dispatch_costs.default, choices=dispatch_costs.choices, help=dispatch_costs.doc
    )
    args = p.parse_args(argv)
    plan, data, meta = load(args.batch, args.results)
    smem = tuple(args.smem.split(",")) if args.smem is not None else tuple(plan.get("smem", [""]))
    data = {name: tuners_kernels(d, smem) for name, d in data.items()}
    names = [n for n in (args.workloads.split(",") if args.workloads else plan["workloads"]) if n in data]
    seeds = [int(s) for s in args.seeds.split(",")]
    feats = args.features.split(",")
    os.makedirs(args.out, exist_ok=True)
    target = plan["target"]
    report: dict[str, Any] = {
        "device": meta.get("nvidia_smi", ""),
        "plan": plan,
        "runner": meta.get("args", {}),
        "tuning": {
            "rounds": args.rounds,
            "kernels_per_round": args.per_round,
            "n_shapes": plan["n_shapes"],
            "dispatch_costs": args.dispatch_costs,
            "smem": list(smem),
        },
        "workloads": {},
    }
    rows = []
    costs = args.dispatch_costs
    jobs = [
        (args.batch, args.results, list(plan["phase1_ts"]), n, target, s, f, args.rounds, args.per_round, costs, smem)
        for n in names
        for f in feats
        for s in seeds
    ]
    done = reuse(args.reuse, args.dispatch_costs) if args.reuse else {}
    jobs = [j for j in jobs if (j[3], j[6], j[5]) not in done]
    with ProcessPoolExecutor(args.jobs) as pool:
        for name, feat, seed, run in pool.map(_job, jobs):
            done[(name, feat, seed)] = run
            speed = "failed: " + run if isinstance(run, str) else f"{len(run['deployed'])} kernels deployed"
            print(f"{name} {feat} seed {seed}: {speed}", flush=True)
    for name in names:
        d = data[name]
        d["ts1"] = list(plan["phase1_ts"])
        ref = arms(d)
        cub = ref["cublas"]
        cols1 = [d["ts"].index(t) for t in d["ts1"]]
        key_row = {k: i for i, k in enumerate(d["keys"])}
        cub1 = np.nanmedian(d["cublas_p1"], axis=1)
        w: dict[str, Any] = {
            "kernels": len(d["keys"]),
            "wrong": int(np.sum(np.any(d["p1_err"] == WRONG, axis=1))),
            "phase1_cells": int(np.sum(d["p1_err"] != NOT_MEASURED)),
            "phase2_kernels": len(d["p2_keys"]),
            "phase2_ts": int(np.sum(np.isfinite(np.nanmedian(d["cublas_p2"], axis=1)))),
            "random_trials_within_5pct": random_trials_to(d),
            "cublas_drift_median": float(np.nanmedian(np.abs(d["cublas_p2"][:, 1] / d["cublas_p2"][:, 0] - 1))),
            "replay_spread_median": float(np.nanmedian(np.nanmax(d["p1"], 2) / np.nanmin(d["p1"], 2) - 1)),
            "arms": {
                k: {
                    "geomean_speed_vs_cublas": geomean_finite(cub1 / v[cols1]),
                    "geomean_speed_vs_cublas_all_t": geomean_finite(cub / v),
                }
                for k, v in ref.items()
                if k != "cublas"
            },
            "runs": {},
        }
        for feat in feats:
            for seed in seeds:
                run = done[(name, feat, seed)]
                if isinstance(run, str):
                    w["runs"][f"{feat}/{seed}"] = {"error": run}
                    continue
                lat = dietcode_latency(d, run["chosen"])
                w["runs"][f"{feat}/{seed}"] = {
                    **run_metrics(d, ref, run["chosen"], lat, run["shapes"]),
                    "kernels_deployed": len(run["deployed"]),
                    "kernels_measured": run["measured"],
                    "sampled_ts": run["shapes"],
                    "replay_seconds": run["replay_seconds"],
                    "deployed": run["deployed"],
                }
                for j, t in enumerate(d["ts"]):
                    at1 = d["p1_med"][key_row[run["chosen"][j]], d["ts1"].index(t)] if t in d["ts1"] else np.nan
                    rows.append([name, feat, seed, t, lat[j], run["chosen"][j], cub[j], ref["per_shape_best"][j],
                                 ref["padded_largest"][j], ref["bucket16"][j], at1])  # fmt: skip
            ok = [w["runs"][f"{feat}/{s}"] for s in seeds if "error" not in w["runs"][f"{feat}/{s}"]]
            if ok:
                for metric in (
                    "speed_vs_cublas",
                    "vs_per_shape_best",
                    "speed_vs_cublas_all_t",
                    "speed_vs_cublas_held_out",
                    "vs_per_shape_best_held_out",
                ):
                    w[f"{feat}_{metric}"] = ratio_interval([r[f"geomean_{metric}"] for r in ok])
        report["workloads"][name] = w
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(report, f, indent=1, default=float)
    with open(os.path.join(args.out, "per_t.csv"), "w", newline="") as f:
        cw = csv.writer(f)
        cw.writerow(["workload", "features", "seed", "T", "dietcode_s", "kernel", "cublas_s", "per_shape_best_s",
                     "padded_largest_s", "bucket16_s", "dietcode_phase1_s"])  # fmt: skip
        cw.writerows(rows)
    write_summary(report, args)
    plot(rows, names, list(plan["phase1_ts"]), os.path.join(args.out, "dietcode_gpu.png"))
    return 0


def write_summary(report: dict, args: argparse.Namespace) -> None:
    lines = [
        "# DietCode on the GPU (replayed tuning on measured timings)",
        "",
        f"Device: `{report['device'].strip().splitlines()[-1] if report['device'] else '?'}`",
        "",
        f"Command: `python -m benchmarks.gpu.dietcode_report --batch {args.batch} --results {args.results} "
        f"--out {args.out} --seeds {args.seeds} --rounds {args.rounds} --per-round {args.per_round} "
        f"--dispatch-costs {args.dispatch_costs}" + (f" --smem '{args.smem}'" if args.smem is not None else "") + "`",
        "",
        "Speed = cuBLAS seconds / DietCode seconds (> 1: DietCode faster); geometric mean over the seeds of each "
        "seed's geomean, with its 95% t interval on the log scale. Main columns: the T at which phase 1 timed every "
        "kernel of the space and cuBLAS in "
        "one pass (each seed sampled 8 of them for tuning; the others are held out), so every choice is timed and "
        "the per-shape best is exact. `all T`: the range, where phase 2 timed the chosen kernel (the mean number "
        "of T it did not is `missing`). `held out`: the phase-1 T a seed did not sample (11 of 19 for seeds 0-2), "
        f"where no timing reached its tuner. Sampled T vote on {args.dispatch_costs} costs. Reference arms "
        "(seed-free): speed vs cuBLAS at the same T.",
        "",
        "| workload | DietCode vs cuBLAS | hand-feature f_MK | latency / per-shape best | held out: vs cuBLAS | "
        "held out: / per-shape best | worst T (seed 0) | "
        "T >= 0.9x (seed 0) | kernels deployed (seed 0) | all T (missing) | padded to 128 | buckets of 16 | "
        "per-shape best | random per-shape trials to 5% | cuBLAS drift | replay spread |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def ci(v: Any) -> str:
        return f"{v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]" if v else "-"

    for name, w in report["workloads"].items():
        s0 = w["runs"].get("program/0", {})
        a = w["arms"]
        runs = [r for k, r in w["runs"].items() if k.startswith("program/") and "error" not in r]
        missing = np.mean([r["missing_ts"] for r in runs]) if runs else float("nan")
        lines.append(
            f"| {name} | {ci(w.get('program_speed_vs_cublas'))} | {ci(w.get('hand_speed_vs_cublas'))} | "
            f"{ci(w.get('program_vs_per_shape_best'))} | {ci(w.get('program_speed_vs_cublas_held_out'))} | "
            f"{ci(w.get('program_vs_per_shape_best_held_out'))} | {s0.get('min_speed_vs_cublas', float('nan')):.3f} | "
            f"{s0.get('ts_at_or_above_0.9', '-')} of {s0.get('ts_evaluated', '-')} | "
            f"{s0.get('kernels_deployed', '-')} | "
            f"{ci(w.get('program_speed_vs_cublas_all_t'))} ({missing:.0f}) | "
            f"{a['padded_largest']['geomean_speed_vs_cublas']:.3f} | {a['bucket16']['geomean_speed_vs_cublas']:.3f} | "
            f"{a['per_shape_best']['geomean_speed_vs_cublas']:.3f} | {w['random_trials_within_5pct']:.0f} | "
            f"{w['cublas_drift_median']:.3%} | {w['replay_spread_median']:.3%} |"
        )
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def plot(rows: list, names: list[str], ts1: list[int], path: str) -> None:
    """Latency over T per GEMM (seed 0, program features): lines where phase 2 timed the arm, DietCode's choice also
    as dots at the phase-1 T, where every kernel was timed (its line has gaps where phase 2 did not time it)."""
    fig, axes = pyplot().subplots(2, (len(names) + 1) // 2, figsize=(5 * ((len(names) + 1) // 2), 8), squeeze=False)
    for ax, name in zip(axes.flat, names):
        r = [x for x in rows if x[0] == name and x[1] == "program" and x[2] == 0]
        if not r:
            continue
        ts = [x[3] for x in r]
        for col, label in ((6, "cuBLAS"), (4, "DietCode (seed 0)"), (7, "per-shape best"), (8, "padded to 128")):
            ax.plot(ts, [x[col] * 1e6 for x in r], label=label, lw=1)
        dots = [x for x in r if x[3] in ts1]
        ax.plot([x[3] for x in dots], [x[10] * 1e6 for x in dots], "o", ms=3, color="C1", label="DietCode, phase-1 T")
        ax.set_title(name)
        ax.set_xlabel("T")
        ax.set_ylabel("us")
    axes.flat[0].legend(fontsize=8)
    save_figure(fig, os.path.dirname(path), os.path.basename(path))


if __name__ == "__main__":
    sys.exit(main())
