"""Tables, latency-vs-T figures, JSON and the summary of a DietCode benchmark run."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import numpy as np

from .._common import geomean, load_sentence, pyplot, save_figure, write_json
from .run import DIETCODE_ARMS, ArmResult

plt = pyplot()

__all__ = ["goals", "summarise", "write_results", "write_markdown", "plot"]


def summarise(results: list[ArmResult]) -> list[dict[str, Any]]:
    """Per (workload, arm): tuning seconds, mean and geometric-mean latency over T, and the geometric mean
    of its latency over DietCode's at each T (> 1: slower than DietCode)."""
    dietcode = {r.workload: r for r in results if r.arm == "dietcode"}
    rows = []
    for r in results:
        ts = sorted(r.latency)
        lat = [r.latency[t] for t in ts]
        dc = dietcode.get(r.workload)
        ratio = geomean([r.latency[t] / dc.latency[t] for t in ts if t in dc.latency]) if dc else math.nan
        rows.append(
            {
                "workload": r.workload,
                "arm": r.arm,
                "tuning_s": r.tuning_seconds,
                "mean_latency_ms": float(np.mean(lat)) * 1e3,
                "geomean_latency_ms": geomean(lat) * 1e3,
                "vs_dietcode": ratio,
                "latency_at_max_ms": r.latency[ts[-1]] * 1e3,
            }
        )
    return rows


def _label(goal_row: dict[str, Any]) -> str:
    """A goals row's workload, with the arm when it is not the plain DietCode run."""
    arm = goal_row.get("arm", "dietcode")
    return goal_row["workload"] + ("" if arm == "dietcode" else f" ({arm})")


def _num(row: dict[str, Any], key: str, fmt: str = ".2f", unit: str = "") -> str:
    return format(row[key], fmt) + unit if key in row else "n/a"


def goals(results: list[ArmResult]) -> list[dict[str, Any]]:
    """Per workload, DietCode's goals as measured: DietCode's speed over torch's (geomean over T and the worst
    T), its latency over converged per-shape kernels at the T they were tuned for, and its tuning time over
    per-shape tuning extrapolated to every T of the range (per-shape seconds per shape x range size)."""
    out = []
    for dc in (r for r in results if r.arm in DIETCODE_ARMS):
        arms = {r.arm: r for r in results if r.workload == dc.workload}
        row: dict[str, Any] = {"workload": dc.workload, "arm": dc.arm}
        torch_ = arms.get("torch")
        if torch_ is not None:
            speed = {t: torch_.latency[t] / dc.latency[t] for t in dc.latency if t in torch_.latency}
            worst = min(speed, key=lambda t: speed[t])
            row |= {"speed_vs_torch_geomean": geomean(list(speed.values())), "speed_vs_torch_worst": speed[worst],
                    "worst_t": worst, "t_below_0_9": sorted(t for t, v in speed.items() if v < 0.9)}  # fmt: skip
        per_shape = arms.get("per-shape")
        if per_shape is not None:
            own = [int(t) for t in per_shape.extra.get("kernels_at", [])]
            row["vs_per_shape_at_tuned_t"] = geomean([dc.latency[t] / per_shape.latency[t] for t in own])
            full = per_shape.tuning_seconds / max(1, len(own)) * len(dc.latency)
            row |= {"per_shape_tuning_s_extrapolated": full, "tuning_time_share": dc.tuning_seconds / full}
        if "latency_fast" in dc.extra:
            row["fast_state"] = _fast_goals(dc, torch_, per_shape)
        out.append(row)
    return out


def _fast_goals(dc: ArmResult, torch_: ArmResult | None, per_shape: ArmResult | None) -> dict[str, Any]:
    """The goals from each arm's timings in the host's fast state (``retime.retime`` with a probe), over the T
    that have them (``t_resolved`` of ``t_total``)."""
    fast = {int(t): v for t, v in dc.extra["latency_fast"].items()}
    row: dict[str, Any] = {"t_resolved": len(fast), "t_total": len(dc.latency)}
    if torch_ is not None and "latency_fast" in torch_.extra:
        other = {int(t): v for t, v in torch_.extra["latency_fast"].items()}
        speed = {t: other[t] / fast[t] for t in fast if t in other}
        row["t_resolved"] = len(speed)  # T where both arms have fast timings
        if speed:
            worst = min(speed, key=lambda t: speed[t])
            row |= {"speed_vs_torch_geomean": geomean(list(speed.values())), "speed_vs_torch_worst": speed[worst],
                    "worst_t": worst, "t_below_0_9": sorted(t for t, v in speed.items() if v < 0.9)}  # fmt: skip
    if per_shape is not None and "latency_fast" in per_shape.extra:
        other = {int(t): v for t, v in per_shape.extra["latency_fast"].items()}
        own = [int(t) for t in per_shape.extra.get("kernels_at", []) if int(t) in fast and int(t) in other]
        if own:
            row["vs_per_shape_at_tuned_t"] = geomean([fast[t] / other[t] for t in own])
    return row


def write_results(path: str, meta: dict[str, Any], results: list[ArmResult], rows: list[dict[str, Any]]) -> None:
    write_json(path, {"meta": meta, "summary": rows, "goals": goals(results), "arms": [asdict(r) for r in results]})


def plot(out: str, results: list[ArmResult]) -> list[str]:
    """One figure per workload: latency of every arm against T (log y)."""
    figures = []
    for wl in dict.fromkeys(r.workload for r in results):
        fig, ax = plt.subplots(figsize=(9, 4.5))
        for r in results:
            if r.workload != wl:
                continue
            ts = sorted(r.latency)
            style = "-" if r.arm in DIETCODE_ARMS else "--" if r.arm in ("torch", "numpy") else ":"
            ax.plot(ts, [r.latency[t] * 1e3 for t in ts], style, label=f"{r.arm} (tuning {r.tuning_seconds:.0f} s)")
        ax.set_xlabel("T (tokens)")
        ax.set_ylabel("latency (ms)")
        ax.set_yscale("log")
        ax.set_title(f"{wl}: latency for every T")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        name = f"latency_{wl}.png"
        save_figure(fig, out, name)
        figures.append(name)
    return figures


def write_markdown(
    path: str, meta: dict[str, Any], results: list[ArmResult], rows: list[dict[str, Any]], figures: list[str]
) -> None:
    host = meta["host"]
    lines = [
        "# DietCode: one tuning run for a dynamic-shape GEMM vs per-shape, padded and bucketed static kernels",
        "",
        f"Command: `{meta['command']}`  ",
        f"Started {meta['started']}, wall {meta['wall_s']:.0f} s. TVM {meta['tvm']}, target `{meta['target']}`.  ",
        f"CPU: {host['model']} ({host['isa']}, {host['fp32_lanes']} fp32 lanes, {host['vector_registers']} vector "
        f"registers, L2 {host['l2_bytes'] >> 10} KiB, {host['cores']} cores), LLVM {host['llvm_version']}.  ",
        load_sentence(meta, host["cores"]) + " Arms were tuned one after another (each timed once right after), "
        f"then every arm was timed again at every T, interleaved ({meta.get('rounds', '?')} rounds per T, order "
        "reversed every other round); the median of those rounds is the latency.",
        "",
        f"T range {meta['t_range']}; per-shape tuning at T in {meta['sampled']} (XGBTuner on the x86 knob template, "
        f"at most {meta['static_trials']} trials per shape"
        + (
            f", stopped after {meta['static_converge']} trials without improvement"
            if meta.get("static_converge")
            else ""
        )
        + "; worker processes started before the clock); "
        + (f"buckets of {meta['bucket']}; " if "buckets" in meta.get("config", {}).get("arms", ["buckets"]) else "")
        + "DietCode: "
        f"{meta['dietcode']['shapes']} sampled shapes, {meta['dietcode']['rounds']} rounds of "
        f"{meta['dietcode']['per_round']} micro-kernels ({meta['dietcode'].get('search', 'enumerated')} search, "
        f"f_MK on {meta['dietcode'].get('features', 'hand')} features), kernels deployed: "
        + (
            f"at most {meta['dietcode']['max_kernels']}"
            if meta["dietcode"]["max_kernels"]
            else f"as the dispatch tolerance {meta['dietcode'].get('dispatch_tolerance', '?')} needs"
        )
        # runs before the option existed voted on predictions everywhere
        + f"; the T vote on {meta['dietcode'].get('dispatch_costs', 'predicted')} costs (`dispatch_costs`).",
        f"torch and numpy run on {meta['vendor_threads']} thread(s); TVM kernels on the target's "
        f"{host['cores']} cores.",
        "Padded arms run the kernel of T' >= T (pad/crop copies not counted, which favours them). `vs_dietcode`: "
        "geometric mean over T of arm latency / DietCode latency (> 1: slower).",
        "Weights: DietCode's dense kernels take the weight pre-packed in panels (packed once, as a model does with "
        "its constant weights; not timed); the static template packs B inside every call (its `pack_b` knob) and "
        "torch/numpy take it as [K, N].",
        "",
        "| workload | arm | tuning (s) | mean latency (ms) | geomean latency (ms) | vs DietCode "
        "| latency at T max (ms) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['workload']} | {row['arm']} | {row['tuning_s']:.1f} | {row['mean_latency_ms']:.3f} | "
            f"{row['geomean_latency_ms']:.3f} | {row['vs_dietcode']:.2f} | {row['latency_at_max_ms']:.3f} |"
        )
    for name, sentence in meta.get("noise_sentence", {}).items():
        lines += ["", f"{name}, framing the interleaved pass: {sentence}"]
    lines += ["", "## Goals as measured", "", "| workload | speed vs torch (geomean over T) | worst T (speed) | "
              "T below 0.9x | latency vs per-shape at its tuned T (geomean) | tuning time vs per-shape for every T |",
              "|---|---:|---:|---|---:|---:|"]  # fmt: skip
    for g in goals(results):
        worst = f"T={g['worst_t']} ({g['speed_vs_torch_worst']:.2f}x)" if "worst_t" in g else "n/a"
        below = ", ".join(map(str, g.get("t_below_0_9", []))) or "none"
        speed, vs_static = _num(g, "speed_vs_torch_geomean", unit="x"), _num(g, "vs_per_shape_at_tuned_t", unit="x")
        lines.append(f"| {_label(g)} | {speed} | {worst} | {below} | {vs_static} | "
                     f"{_num(g, 'tuning_time_share', '.3f')} |")  # fmt: skip
    fast_rows = [g for g in goals(results) if "fast_state" in g]
    if fast_rows:
        lines += [
            "",
            "The same goals from each arm's timings in the host's fast state (the probe readings just before and "
            "after a timing within 10% of the run's fast reference), T where an arm had too few left out and counted:",
            "",
            "| workload | T resolved | speed vs torch (geomean) | worst T (speed) | T below 0.9x "
            "| latency vs per-shape at its tuned T | host state |",
            "|---|---:|---:|---:|---|---:|---|",
        ]
        for g in fast_rows:
            f = g["fast_state"]
            worst = f"T={f['worst_t']} ({f['speed_vs_torch_worst']:.2f}x)" if "worst_t" in f else "n/a"
            below = ", ".join(map(str, f.get("t_below_0_9", []))) or "none"
            gate = meta.get("host_state_gated", {}).get(g["workload"])
            verdict = "gated" if gate else "not gated" if gate is not None else "n/a"
            lines.append(f"| {_label(g)} | {f['t_resolved']} of {f['t_total']} | "
                         f"{_num(f, 'speed_vs_torch_geomean', unit='x')} | {worst} | {below} | "
                         f"{_num(f, 'vs_per_shape_at_tuned_t', unit='x')} | {verdict} |")  # fmt: skip
        for name, sentence in meta.get("host_state_sentence", {}).items():
            lines += ["", f"{name}: {sentence}"]
    gaps = [(r, t, why) for r in results for t, why in r.extra.get("unavailable", {}).items()]
    if gaps:
        lines += ["", "Static shapes the knob template could not serve (their T went to the next tuned kernel up):"]
        lines += [f"- {r.workload} {r.arm}, T={t}: {why}" for r, t, why in gaps]
    for r in results:
        if r.arm not in DIETCODE_ARMS:
            continue
        e = r.extra
        lines += [
            "",
            f"## {r.workload}: the DietCode run" + ("" if r.arm == "dietcode" else f" ({r.arm})"),
            f"- measured {e['measured_kernels']} micro-kernels x {len(e['sampled_shapes'])} shapes "
            f"{e['sampled_shapes']} ({e['measurements']} measurements, {e['failed_measurements']} failed); search "
            f"{e['search_seconds']:.1f} s, plus compiling the deployed module "
            f"{r.tuning_seconds - e['search_seconds']:.1f} s",
            f"- fitted occupancy constant k = {e['k_occupancy']:.3f}; deployed kernels {e['kernels']}; decision tree "
            f"with {e['tree_leaves']} leaves; one call of the compiled C dispatcher through ctypes: "
            f"{e['dispatch_call_seconds'] * 1e6:.2f} us",
            f"- every T in the range checked against numpy before timing: {len(r.latency)} of {len(r.latency)} correct",
        ]
        if e.get("trees_tried"):
            lines.append(
                f"- every T voted over all {e['measured_kernels']} measured kernels ({e['votes_distinct']} distinct "
                f"winners); trees tried (leaves, kernels, predicted loss): "
                + ", ".join(f"({a}, {b}, {c:.1%})" for a, b, c in e["trees_tried"])
                + f"; deployed at predicted loss {e['predicted_dispatch_loss']:.2%}"
            )
        if e.get("verification"):
            v = e["verification"]
            lines.append(
                f"- verified: the {v['kernels_timed']} deployed kernels timed at every T through the runner "
                f"({v['seconds']:.1f} s, in the tuning time); {v['t_changed']} T changed kernel, "
                f"{v['kernels_kept']} kernels kept"
            )
        if e.get("versions"):
            v = e["versions"]
            lines.append(
                f"- aligned versions timed against their kernels at the aligned T they serve ({v['seconds']:.1f} s, in "
                "the tuning time): "
                + "; ".join(
                    f"{key} at multiples of {k['align']}: "
                    + (f"{k['ratio']:.2f}x its time at T {k['ts']}" if k["ratio"] is not None else "not timed")
                    + (", kept" if k["kept"] else ", dropped")
                    for key, k in v["kernels"].items()
                )
            )
        if e.get("b_panel"):
            w = e["b_panel"]
            lines.append(f"- weight pre-packed in {w}-column panels ([N / {w}, K, {w}])")
        per_shape = next((x for x in results if x.workload == r.workload and x.arm == "per-shape"), None)
        if per_shape is not None:
            n = len(per_shape.extra["kernels_at"])
            full = per_shape.tuning_seconds / n * len(r.latency)
            lines.append(
                f"- per-shape tuning took {per_shape.tuning_seconds:.0f} s for {n} shapes; at that rate tuning every "
                f"one of the {len(r.latency)} T would take about {full:.0f} s (computed, not run)"
            )
        lines += ["", "```c", e["dispatcher_c"].rstrip(), "```"]
    if meta.get("failed"):
        lines += ["", "## Arms that failed", ""] + [f"- {f}" for f in meta["failed"]]
    lines += ["", "## Figures", ""] + [f"![{f}]({f})" for f in figures]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
