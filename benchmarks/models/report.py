"""results.json, tasks.csv, one latency-vs-tuning-time PNG per model, and summary.md."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from .._common import pyplot, save_figure, write_csv, write_json, write_summary
from .run import ModelRun

plt = pyplot()

__all__ = ["plot", "time_to_latency", "write_markdown", "write_results"]


def write_results(out: str, meta: dict[str, Any], runs: list[ModelRun]) -> None:
    write_json(os.path.join(out, "results.json"), {"meta": meta, "models": [dataclasses.asdict(r) for r in runs]})
    rows = [{"model": r.model, "arm": a.arm, **t} for r in runs for a in r.arms for t in a.tasks]
    write_csv(os.path.join(out, "tasks.csv"), rows)


def plot(out: str, runs: list[ModelRun]) -> list[str]:
    figures = []
    for r in runs:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for a in r.arms:
            curve = [(s / 60, est * 1e3) for s, _, est in a.estimated_curve if est is not None]
            if curve:
                ax.plot(*zip(*curve), "--", alpha=0.6, label=f"{a.arm}: estimated (sum of task bests)")
            pts = [(c["tuning_s"] / 60, c["measured_s"] * 1e3) for c in a.checkpoints]
            ax.plot(*zip(*pts), "o-", label=f"{a.arm}: measured end to end")
        for engine, style in (("pytorch", ":"), ("onnxruntime", "-.")):
            v = r.final.get(engine) or r.baselines.get(engine)
            if v:
                ax.axhline(v * 1e3, linestyle=style, color="k", label=f"{engine} {v * 1e3:.1f} ms")
        ax.set_yscale("log")
        ax.set_xlabel("tuning wall-clock (min)")
        ax.set_ylabel("latency (ms, batch 1)")
        ax.set_title(f"{r.model}: untuned TVM {r.baselines['untuned-tvm'] * 1e3:.0f} ms")  # type: ignore[operator]
        ax.legend(fontsize=7)
        path = save_figure(fig, out, f"latency_{r.model}.png")
        figures.append(os.path.basename(path))
    return figures


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 1e3:.2f}"


def _time_to_reach(curve: list[tuple[float, int, float | None]], level: float) -> float | None:
    return next((s for s, _, est in curve if est is not None and est <= level), None)


def time_to_latency(checkpoints: list[dict[str, Any]], level: float) -> float | None:
    """Tuning seconds at the first checkpoint whose re-timed latency is at or below ``level``."""
    return next((c["tuning_s"] for c in checkpoints if c.get("retimed_s") and c["retimed_s"] <= level), None)


def write_markdown(out: str, meta: dict[str, Any], runs: list[ModelRun], figures: list[str]) -> None:
    host = meta["host"]
    lines = [
        "# Whole models: adatune against untuned TVM, PyTorch and onnxruntime",
        "",
        f"Command: `{meta['command']}`  ",
        f"Host: {host.get('model')} (LLVM mcpu {host.get('mcpu')}, ISA {host.get('isa')}, {host.get('cores')} cores), "
        f"TVM {meta['tvm']}, torch {meta['torch']}, onnxruntime {meta['onnxruntime']}; started {meta['started']}, "
        f"{meta['wall_s'] / 60:.0f} min in all. One seed: these are single runs, not confidence intervals.",
        "",
        "Latency is the median of repeated batch-1 inferences in this process (PyTorch eager and onnxruntime on all "
        "physical cores). The final table measures every engine again after tuning, in turns: each round times "
        "every engine once (order reversed every other round, a pause after each); the table gives the median of "
        "the rounds and their range.",
        "",
        meta.get("noise_sentence", "Noise gate: not recorded."),
        "",
    ]
    for r in runs:
        lines += [f"## {r.model} ({r.n_tasks} tasks, extracted in {r.extract_s:.0f} s)", ""]
        lines += [
            "| engine | latency (ms) | rounds' range (ms) | vs onnxruntime | vs PyTorch | tuning (min) | trials |",
            "|---|---|---|---|---|---|---|",
        ]
        ort, pt = r.final.get("onnxruntime"), r.final.get("pytorch")
        rows: list[tuple[str, float | None, str, str]] = [("untuned TVM", r.baselines["untuned-tvm"], "-", "-")]
        rows += [(fw, r.final.get(fw), "-", "-") for fw in ("pytorch", "onnxruntime")]
        for a in r.arms:
            trials = str(a.checkpoints[-1]["trials"]) if a.checkpoints else "-"
            rows.append((f"adatune {a.arm}", r.final.get(a.arm), f"{a.tuning_s / 60:.1f}", trials))
        for name, v, tmin, trials in rows:
            rel_ort = f"{ort / v:.2f}x" if v and ort else "-"
            rel_pt = f"{pt / v:.2f}x" if v and pt else "-"
            key = {"adatune " + a.arm: a.arm for a in r.arms}.get(name, name)
            spread = r.final_rounds.get(key)
            span = f"{min(spread) * 1e3:.2f}-{max(spread) * 1e3:.2f}" if spread else "-"
            lines.append(f"| {name} | {_ms(v)} | {span} | {rel_ort} | {rel_pt} | {tmin} | {trials} |")
        lines += ["", "(x > 1: faster than that engine.)", ""]
        for a in r.arms:
            cps = ", ".join(
                f"{c['tuning_s'] / 60:.1f} min: {c['measured_s'] * 1e3:.2f} ms"
                + (f" (re-timed in turns {c['retimed_s'] * 1e3:.2f})" if c.get("retimed_s") else "")
                for c in a.checkpoints
            )
            lines.append(f"- {a.arm} checkpoints (tuning time: latency measured then): {cps}")
            for fw in ("onnxruntime", "pytorch"):
                level = r.final.get(fw)
                if level:
                    reached = time_to_latency(a.checkpoints, level)
                    lines.append(
                        f"  - reached {fw}'s latency ({level * 1e3:.2f} ms): "
                        + (f"by {reached / 60:.1f} min of tuning" if reached is not None else "at no checkpoint")
                        + " (checkpoints re-timed in turns with it)"
                    )
        for arm, b in r.breakdown.items():
            lines.append(
                f"- {arm}, where the time goes (`am.kernel_breakdown`: every VM call timed): end to end "
                f"{b['end_to_end_s'] * 1e3:.2f} ms = kernels {b['kernels_s'] * 1e3:.2f} ms (their isolated bests "
                f"x calls: {b['sum_of_task_bests_s'] * 1e3:.2f} ms) + VM builtins {b['builtins_s'] * 1e3:.2f} ms + "
                f"outside calls {b['outside_s'] * 1e3:.2f} ms"
            )
        base = next((a for a in r.arms if a.arm == "xgb"), None)
        other = next((a for a in r.arms if a.arm != "xgb"), None)
        if base and other and base.estimated_curve and base.estimated_curve[-1][2] is not None:
            level = base.estimated_curve[-1][2]
            t = _time_to_reach(other.estimated_curve, level)
            lines.append(
                f"- {other.arm} reached xgb's final estimated latency ({level * 1e3:.2f} ms) "
                + (
                    f"after {t / 60:.1f} min of tuning ({t / base.tuning_s:.2f} of xgb's {base.tuning_s / 60:.1f} min)"
                    if t is not None
                    else "not within its budget"
                )
                + "."
            )
        lines.append("")
        last = r.arms[-1].arm if r.arms else None
        in_model = {t["task"]: t.get("in_model_ms") for t in r.breakdown.get(last or "", {}).get("tasks", [])}
        top = sorted(
            (t for a in r.arms[-1:] for t in a.tasks if t["weighted_ms"] is not None),
            key=lambda t: -t["weighted_ms"],
        )[:8]
        if top:
            lines += [
                f"Largest tasks after {last} (weighted ms = weight x isolated best; in model: the same functions "
                "timed inside the compiled model, per inference; all tasks in tasks.csv):",
                "",
                "| task | kind | weight | GFLOP | trials | best ms | weighted ms | in model ms |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for row in top:
                inside = in_model.get(row["task"])
                lines.append(
                    f"| {row['task']} | {row['kind']} | {row['weight']} | {row['gflop']:.3f} | {row['trials']} | "
                    f"{row['best_ms']:.3f} | {row['weighted_ms']:.3f} | {'-' if inside is None else f'{inside:.3f}'} |"
                )
            lines.append("")
    lines += [f"![{f}]({f})" for f in figures]
    write_summary(out, lines)
