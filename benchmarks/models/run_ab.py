"""NCHW against channel-blocked (NCHW[x]c) convolutions: tuned models of each layout, timed in the same turns.

For each seed, two tuning logs of the same model (one from a ``benchmarks.models`` run in NCHW, one from a run
with ``--conv-layout``) are built into two models, checked against each other's outputs, and timed in turns with
onnxruntime and PyTorch: ``--rounds`` rounds, each engine once per round (the order reversed every other round,
a pause after each), framed by the noise gate. Tuning runs of two layouts cannot be compared by their own final
latencies (they ran at different times on a noisy host); here every ratio comes from latencies taken together.
The ratio over seeds is a geometric mean with a Student-t 95% interval on the log ratios.

    python -m benchmarks.models.layout_ab --nchw RUN0 RUN1 RUN2 --blocked RUN0' RUN1' RUN2' --out DIR
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

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import adatune  # noqa: E402
import adatune.models as am  # noqa: E402
from adatune.models._latency import compiled_latency  # noqa: E402

from .._common import load_now, run_meta, settled  # noqa: E402
from ..noise_gate import NoiseGate, interleaved  # noqa: E402
from .seeds import ratio_interval  # noqa: E402

ENGINES = ("onnxruntime", "pytorch")


def _run_config(run_dir: str) -> tuple[str, str, str, dict[str, Any]]:
    """(model, arm, log path, config) of a ``benchmarks.models`` output directory with one model and arm."""
    with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as f:
        data = json.load(f)
    run = data["models"][0]
    arm = run["arms"][0]["arm"]
    log = os.path.join(run_dir, f"records_{run['model']}_{arm}.jsonl")
    if not os.path.isfile(log):
        raise ValueError(f"{run_dir}: no tuning log {os.path.basename(log)}")
    return run["model"], arm, log, data["meta"]["config"]


def _target_of(log: str) -> Any:
    with open(log, encoding="utf-8") as f:
        return adatune.target.create(json.loads(f.readline())["target"])


def compare(nchw_dir: str, blocked_dir: str, rounds: int, repeats: int) -> dict[str, Any]:
    name, arm, nchw_log, _ = _run_config(nchw_dir)
    name_b, _, blocked_log, config = _run_config(blocked_dir)
    if name_b != name:
        raise ValueError(f"{nchw_dir} tuned {name}, {blocked_dir} tuned {name_b}")
    layout = am.resolve_conv_layout(config.get("conv_layout", "NCHW"), _target_of(blocked_log))
    models = {"NCHW": am.load_builtin(name), layout: am.load_builtin(name, conv_layout=layout)}
    logs = {"NCHW": nchw_log, layout: blocked_log}
    inputs = models["NCHW"].random_inputs(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned tasks use their fallback in both builds alike
        built = {k: am.build(m, logs[k], _target_of(logs[k])) for k, m in models.items()}
    outs = {k: c.run(*inputs)[0] for k, c in built.items()}
    diff = float(np.abs(outs["NCHW"] - outs[layout]).max())
    if diff > 1e-3 * max(1.0, float(np.abs(outs["NCHW"]).max())):
        raise RuntimeError(f"{name}: the NCHW and {layout} builds disagree by {diff}")
    timers = {k: (lambda c=c: settled(compiled_latency(c, inputs, repeats))) for k, c in built.items()}
    for fw in ENGINES:
        timers[fw] = functools.partial(
            lambda fw: settled(am.framework_latency(models["NCHW"], fw, inputs, repeats)), fw
        )
    times = interleaved(timers, rounds)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "model": name,
        "arm": arm,
        "layout": layout,
        "runs": {"NCHW": nchw_dir, layout: blocked_dir},
        "max_abs_diff": diff,
        "rounds_s": times,
        "median_s": med,
        "blocked_speedup": med["NCHW"] / med[layout],
        "vs": {fw: {k: med[fw] / med[k] for k in ("NCHW", layout)} for fw in ENGINES},
    }


def _markdown(meta: dict[str, Any], results: list[dict[str, Any]], gate: NoiseGate) -> list[str]:
    layout = results[0]["layout"]
    host = meta["host"]
    lines = [
        f"# ResNet-style convolutions: NCHW against {layout}, timed in the same turns",
        "",
        f"Command: `{meta['command']}`; started {meta['started']}, wall {meta['wall_s']:.0f} s.  ",
        f"Host: {host['model']} ({host['isa']}, {host['cores']} cores); load before {meta['load_before']}.  ",
        f"{gate.sentence()}",
        "",
        f"| seed runs | NCHW (ms) | {layout} (ms) | onnxruntime (ms) | PyTorch (ms) | {layout} / NCHW speed |"
        f" NCHW vs ort | {layout} vs ort |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        m = {k: v * 1e3 for k, v in r["median_s"].items()}
        lines.append(
            f"| {os.path.basename(r['runs']['NCHW'])} / {os.path.basename(r['runs'][layout])} | {m['NCHW']:.2f} | "
            f"{m[layout]:.2f} | {m['onnxruntime']:.2f} | {m['pytorch']:.2f} | {r['blocked_speedup']:.3f}x | "
            f"{r['vs']['onnxruntime']['NCHW']:.3f}x | {r['vs']['onnxruntime'][layout]:.3f}x |"
        )
    lines.append("")
    for label, ratios in (
        (f"{layout} / NCHW speed", [r["blocked_speedup"] for r in results]),
        (f"{layout} vs onnxruntime", [r["vs"]["onnxruntime"][layout] for r in results]),
        ("NCHW vs onnxruntime", [r["vs"]["onnxruntime"]["NCHW"] for r in results]),
        (f"{layout} vs PyTorch", [r["vs"]["pytorch"][layout] for r in results]),
    ):
        g, lo, hi = ratio_interval(ratios)
        lines.append(
            f"- {label}: geometric mean {g:.3f}x over {len(ratios)} seeds, 95% t-interval [{lo:.3f}, {hi:.3f}]"
        )
    lines.append("")
    return lines


def _plot(out: str, results: list[dict[str, Any]]) -> str:
    layout = results[0]["layout"]
    fig, ax = plt.subplots(figsize=(7, 4))
    keys = ["NCHW", layout, "onnxruntime", "pytorch"]
    for i, r in enumerate(results):
        for j, k in enumerate(keys):
            ys = [t * 1e3 for t in r["rounds_s"][k]]
            ax.scatter([i * (len(keys) + 1) + j] * len(ys), ys, s=10, color=f"C{j}", label=k if i == 0 else None)
    ax.set_xticks([i * (len(keys) + 1) + 1.5 for i in range(len(results))], [f"seed {i}" for i in range(len(results))])
    ax.set_ylabel("latency per inference (ms), every round")
    ax.set_title(f"{results[0]['model']}: NCHW vs {layout}, interleaved")
    ax.legend()
    path = os.path.join(out, "layout_ab.png")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.models.layout_ab", description=__doc__)
    ap.add_argument("--nchw", nargs="+", required=True, help="benchmarks.models output dirs tuned in NCHW")
    ap.add_argument("--blocked", nargs="+", required=True, help="the same seeds tuned with --conv-layout")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if len(args.nchw) != len(args.blocked):
        ap.error("give one blocked run per NCHW run")
    adatune.target.size_tvm_thread_pool()
    t0, started, load_before = time.perf_counter(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), load_now()
    gate = NoiseGate()
    gate.probe("before")
    results = [compare(a, b, args.rounds, args.repeats) for a, b in zip(args.nchw, args.blocked)]
    gate.probe("after")
    meta = run_meta("benchmarks.models.layout_ab", argv, started, t0, load_before) | {
        "host": adatune.target.describe_host(),
        "noise_gate": gate.to_json(),
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    lines = _markdown(meta, results, gate)
    lines.append(f"![rounds]({os.path.basename(_plot(args.out, results))})")
    with open(os.path.join(args.out, "summary.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
