"""What the CUDA micro-kernel options buy on a GPU, from a ``dietcode_runner`` run of an options batch.

    python -m benchmarks.gpu.dietcode_options --batch BATCH --results DIR --out DIR [--chosen PER_T_CSV]

The batch (``dietcode_export --from-run EARLIER --from-top N --split-k 1,2,4,8 --interleave``, or any batch whose
kernels carry options, ``--smem ,kmajor,kmajor-pad`` too) holds kernels plain and with CUDA options: split into
parts of their reduction, interleaved threads, B's shared tile k-major. Phase 1 timed every one of them and cuBLAS
at the same T, so at each of those T the best of each group (``GROUPS``) is exact and the groups compare in one
pass. ``--chosen``: a ``dietcode_report``'s ``per_t.csv``; the kernels its replayed tuner deploys (exported with
``--also-keys`` and timed at every T of the range by ``dietcode_runner --p2-keys``) are then judged against cuBLAS
at every T, not only where an earlier phase 2 happened to time them. Writes ``results.json``, ``options.csv``,
``deployed.csv``, ``summary.md`` and ``options.png``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from adatune.dietcode import MicroKernel
from benchmarks.gpu.dietcode_report import NOT_MEASURED, OK, geomean_finite, load
from benchmarks.models.seeds import ratio_interval

__all__ = ["GROUPS", "LABELS", "group_best", "main"]

#: option groups: which kernels each may use (a group a batch has no kernels of beyond plain's equals plain)
GROUPS: dict[str, Callable[[MicroKernel], bool]] = {
    "plain": lambda k: k.split_k == 1 and not k.interleave and not k.smem,
    "interleave": lambda k: k.split_k == 1 and not k.smem,
    "split_k": lambda k: not k.interleave and not k.smem,
    "kmajor": lambda k: k.split_k == 1 and not k.interleave and k.smem in ("", "kmajor"),
    "kmajor_pad": lambda k: k.split_k == 1 and not k.interleave and k.smem in ("", "kmajor-pad"),
    "both": lambda k: True,
}
#: the summary's column of each group
LABELS = {
    "plain": "plain",
    "interleave": "+interleave",
    "split_k": "+split-K",
    "kmajor": "+B k-major",
    "kmajor_pad": "+B k-major, padded",
    "both": "any",
}


def group_best(keys: Sequence[str], med: np.ndarray) -> dict[str, np.ndarray]:
    """Best seconds at each column of ``med`` (NaN where a kernel failed or was not timed) among each group's
    kernels (NaN where none was timed)."""
    kernels = [MicroKernel.from_key(k) for k in keys]
    out = {}
    for name, member in GROUPS.items():
        rows = [i for i, k in enumerate(kernels) if member(k)]
        with warnings.catch_warnings():  # a column no kernel of the group was timed at is NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            out[name] = np.nanmin(med[rows], axis=0) if rows else np.full(med.shape[1], np.nan)
    return out


def layout_pairs(keys: Sequence[str], med: np.ndarray) -> dict[str, dict[str, float]]:
    """Each shared-memory layout against the same kernel as read (all its other fields equal): per kernel, the
    geometric mean over the columns of ``med`` of as-read seconds / layout seconds (> 1: the layout is faster);
    their median, 10th and 90th percentiles and how many kernels pair up."""
    kernels = [MicroKernel.from_key(k) for k in keys]
    rows = {k.key: i for i, k in enumerate(kernels)}
    out = {}
    for layout in sorted({k.smem for k in kernels} - {""}):
        ratios = []
        for i, k in enumerate(kernels):
            j = rows.get(dataclasses.replace(k, smem="").key)
            if k.smem == layout and j is not None:
                r = med[j] / med[i]
                if np.isfinite(r).any():
                    ratios.append(float(np.exp(np.nanmean(np.log(r)))))
        if ratios:
            q10, q50, q90 = np.quantile(ratios, [0.1, 0.5, 0.9])
            out[layout] = {"kernels": len(ratios), "median": float(q50), "q10": float(q10), "q90": float(q90)}
    return out


def _chosen(path: str) -> dict[tuple[str, int], dict[int, str]]:
    out: dict[tuple[str, int], dict[int, str]] = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            if row["features"] == "program":
                out.setdefault((row["workload"], int(row["seed"])), {})[int(row["T"])] = row["kernel"]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    p.add_argument("--batch", required=True)
    p.add_argument("--results", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--chosen", default="", help="a dietcode_report's per_t.csv: its deployed kernels at every T")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    plan, data, meta = load(args.batch, args.results)
    ts1 = list(plan["phase1_ts"])
    chosen = _chosen(args.chosen) if args.chosen else {}
    report: dict[str, Any] = {"device": meta.get("nvidia_smi", ""), "plan": plan, "workloads": {}}
    option_rows, deployed_rows = [], []
    curves: dict[str, dict[str, Any]] = {}
    for name, d in data.items():
        keys, ts, med1 = d["keys"], d["ts"], d["p1_med"]
        cub1 = np.nanmedian(d["cublas_p1"], axis=1)
        best = group_best(keys, med1)
        for c, t in enumerate(ts1):
            option_rows.append([name, t, cub1[c]] + [best[g][c] for g in GROUPS])
        kernels = [MicroKernel.from_key(k) for k in keys]
        winners = [kernels[int(np.nanargmin(med1[:, c]))] for c in range(len(ts1))]
        w: dict[str, Any] = {
            "kernels": len(keys),
            "wrong_or_failed_cells": int(((d["p1_err"] != OK) & (d["p1_err"] != NOT_MEASURED)).sum()),
            "cublas_drift_median": float(np.nanmedian(np.abs(np.log(d["cublas_p1"][:, 1] / d["cublas_p1"][:, 0])))),
            "speed_vs_cublas_phase1": {g: geomean_finite(cub1 / best[g]) for g in GROUPS},
            "min_speed_vs_cublas_phase1": {g: float(np.nanmin(cub1 / best[g])) for g in GROUPS},
            "split_k_of_the_best": {str(t): k.split_k for t, k in zip(ts1, winners)},
            "best_kernel": {str(t): k.key for t, k in zip(ts1, winners)},
            "layout_vs_as_read": layout_pairs(keys, med1),
        }
        p2_keys = d["p2_keys"]
        med2 = d["p2_med"] if d["p2_med"] is not None else np.full((0, len(ts)), np.nan)
        cub2 = np.nanmedian(d["cublas_p2"], axis=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            best2 = np.nanmin(med2, axis=0) if len(p2_keys) else np.full(len(ts), np.nan)
        w["speed_vs_cublas_all_t_best_timed"] = geomean_finite(cub2 / best2)
        curves[name] = {
            "ts": ts,
            "best": cub2 / best2,
            "ts1": ts1,
            "plain": cub1 / best["plain"],
            "both": cub1 / best["both"],
        }
        per_seed = []
        for (wname, seed), by_t in sorted(chosen.items()):
            if wname != name:
                continue
            lat = np.array(
                [med2[p2_keys.index(by_t[t])][ts.index(t)] if by_t.get(t) in p2_keys else np.nan for t in ts]
            )
            speed = cub2 / lat
            per_seed.append(geomean_finite(speed))
            curves[name].setdefault("deployed", {})[seed] = speed
            for t, s, k in zip(ts, speed, (by_t.get(t, "") for t in ts)):
                deployed_rows.append([name, seed, t, k, s])
            w.setdefault("deployed", {})[str(seed)] = {
                "speed_vs_cublas_all_t": geomean_finite(speed),
                "min_speed_vs_cublas": float(np.min(speed[np.isfinite(speed)])) if np.isfinite(speed).any() else None,
                "ts_at_or_above_0.9": int((speed >= 0.9).sum()),
                "ts_not_timed": int((~np.isfinite(speed)).sum()),
            }
        if per_seed:
            gm, lo, hi = ratio_interval(per_seed)
            w["deployed_speed_vs_cublas_all_t"] = {"geomean": gm, "ci95": [lo, hi], "per_seed": per_seed}
        report["workloads"][name] = w
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(report, f, indent=1, default=float)
    with open(os.path.join(args.out, "options.csv"), "w", newline="") as f:
        csv.writer(f).writerows([["workload", "T", "cublas_s"] + [f"best_{g}_s" for g in GROUPS]] + option_rows)
    with open(os.path.join(args.out, "deployed.csv"), "w", newline="") as f:
        csv.writer(f).writerows([["workload", "seed", "T", "kernel", "speed_vs_cublas"]] + deployed_rows)
    _summary(args, report)
    _plot(curves, os.path.join(args.out, "options.png"))
    print(open(os.path.join(args.out, "summary.md")).read())
    return 0


def _summary(args: argparse.Namespace, report: dict) -> None:
    lines = [
        "# CUDA micro-kernel options on the GPU (best of each group vs cuBLAS)",
        "",
        f"Device: `{report['device'].strip().splitlines()[-1] if report['device'].strip() else '?'}`",
        "",
        f"Command: `python -m benchmarks.gpu.dietcode_options --batch {args.batch} --results {args.results} "
        f"--out {args.out}" + (f" --chosen {args.chosen}`" if args.chosen else "`"),
        "",
        "Speed = cuBLAS seconds / kernel seconds (> 1: faster than cuBLAS), geometric mean over the phase-1 T "
        f"({len(report['plan']['phase1_ts'])} T in [1, 128], every kernel of the batch and cuBLAS timed there in "
        "one pass); in brackets the worst T. Groups: the batch's kernels plain, with interleaved threads, with "
        "split-K, with B's shared tile k-major (`smem`), padded or not, with any option. "
        "`deployed`: the replayed tuner's kernels (`--chosen`, program features, seeds "
        "0-2) timed at every T of the range, geometric mean over seeds and 95% t interval.",
        "",
        "| GEMM | kernels | " + " | ".join(LABELS[g] for g in GROUPS) + " | best timed, all T | "
        "deployed (--chosen), all T | cuBLAS drift |",
        "|---|---|" + "---|" * len(GROUPS) + "---|---|---|",
    ]
    for name, w in report["workloads"].items():
        s, m = w["speed_vs_cublas_phase1"], w["min_speed_vs_cublas_phase1"]
        dep = w.get("deployed_speed_vs_cublas_all_t")
        dep_txt = f"{dep['geomean']:.3f} [{dep['ci95'][0]:.3f}, {dep['ci95'][1]:.3f}]" if dep else "-"
        lines.append(
            f"| {name} | {w['kernels']} | "
            + " | ".join(f"{s[g]:.3f} ({m[g]:.2f})" for g in GROUPS)
            + f" | {w['speed_vs_cublas_all_t_best_timed']:.3f} | {dep_txt} | {100 * w['cublas_drift_median']:.2f}% |"
        )
    pairs = [(n, lay, p) for n, w in report["workloads"].items() for lay, p in w["layout_vs_as_read"].items()]
    if pairs:
        lines += [
            "",
            "Each shared-memory layout against the same kernel as read: per kernel, geometric mean over the phase-1 "
            "T of as-read seconds / layout seconds (> 1: the layout is faster); median over kernels [10th, 90th "
            "percentile].",
            "",
            "| GEMM | layout | kernels | speed-up, median [q10, q90] |",
            "|---|---|---|---|",
        ]
        lines += [f"| {n} | {lay} | {p['kernels']} | {p['median']:.2f} [{p['q10']:.2f}, {p['q90']:.2f}] |"
                  for n, lay, p in pairs]  # fmt: skip
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def _plot(curves: dict[str, dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(curves)
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        c = curves[name]
        ax.plot(c["ts"], c["best"], lw=1.2, label="best timed (any option)")
        ax.plot(c["ts1"], c["plain"], "o", ms=3, label="best plain (phase-1 T)")
        ax.plot(c["ts1"], c["both"], "s", ms=3, mfc="none", label="best with options (phase-1 T)")
        for seed, speed in sorted(c.get("deployed", {}).items()):
            ax.plot(c["ts"], speed, lw=0.8, alpha=0.6, label=f"deployed, seed {seed}")
        ax.axhline(1.0, color="k", lw=0.6)
        ax.axhline(0.9, color="k", lw=0.4, ls=":")
        ax.set_title(name)
        ax.set_xlabel("T")
    axes[0][0].set_ylabel("speed vs cuBLAS")
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
