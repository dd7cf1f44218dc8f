"""Two ways of tuning the same model, compared by their tuned models timed in the same turns.

For each seed, two ``benchmarks.models`` runs of one model (A and B: e.g. NCHW against ``--conv-layout auto``, or
hot against ``--cache-flush`` tuning) are built from their logs, each with the layout and fast-math setting it
was tuned with, checked against each other's outputs, and timed in turns with onnxruntime and PyTorch:
``--rounds`` rounds, each engine once per round (the order reversed every other round, a pause after each),
framed by the noise gate. Runs tuned at different times on a noisy host cannot be compared by their own final
latencies; here every ratio comes from latencies taken together. Ratios over seeds: geometric mean with a
Student-t 95% interval on the log ratios.

    python -m benchmarks.models.run_ab --a RUN0 RUN1 --b RUN0' RUN1' --labels NCHW NCHW8c --out DIR
"""

from __future__ import annotations

import argparse
import json
import math
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


def run_config(run_dir: str) -> tuple[str, str, str, dict[str, Any]]:
    """(model, arm, log path, config) of a ``benchmarks.models`` output directory with one model and arm."""
    with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as f:
        data = json.load(f)
    run = data["models"][0]
    arm = run["arms"][0]["arm"]
    log = os.path.join(run_dir, f"records_{run['model']}_{arm}.jsonl")
    if not os.path.isfile(log):
        raise ValueError(f"{run_dir}: no tuning log {os.path.basename(log)}")
    return run["model"], arm, log, data["meta"]["config"]


def log_target(log: str) -> Any:
    with open(log, encoding="utf-8") as f:
        return adatune.target.create(json.loads(f.readline())["target"])


def tuned_model(name: str, config: dict[str, Any], log: str) -> am.Model:
    """The model as a run tuned it: its layout and fast-math setting from the run's config."""
    layout = am.resolve_conv_layout(config.get("conv_layout", "NCHW"), log_target(log))
    winograd = bool(config.get("winograd"))
    return am.load_builtin(name, fast_math=bool(config.get("fast_math")), conv_layout=layout, winograd=winograd)


def compare(a_dir: str, b_dir: str, labels: tuple[str, str], rounds: int, repeats: int) -> dict[str, Any]:
    a, b = labels
    name, arm, a_log, a_config = run_config(a_dir)
    name_b, _, b_log, b_config = run_config(b_dir)
    if name_b != name:
        raise ValueError(f"{a_dir} tuned {name}, {b_dir} tuned {name_b}")
    models = {a: tuned_model(name, a_config, a_log), b: tuned_model(name, b_config, b_log)}
    logs = {a: a_log, b: b_log}
    inputs = models[a].random_inputs(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned tasks use their fallback in both builds alike
        built = {k: am.build(m, logs[k], log_target(logs[k])) for k, m in models.items()}
    outs = {k: c.run(*inputs)[0] for k, c in built.items()}
    diff = float(np.abs(outs[a] - outs[b]).max())
    if diff > 1e-3 * max(1.0, float(np.abs(outs[a]).max())):
        raise RuntimeError(f"{name}: the {a} and {b} builds disagree by {diff}")
    timers = {k: (lambda c=c: settled(compiled_latency(c, inputs, repeats))) for k, c in built.items()}
    for fw in ENGINES:
        timers[fw] = lambda fw=fw: settled(am.framework_latency(models[a], fw, inputs, repeats) or math.nan)
    times = interleaved(timers, rounds)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "model": name,
        "arm": arm,
        "labels": [a, b],
        "runs": {a: a_dir, b: b_dir},
        "max_abs_diff": diff,
        "rounds_s": times,
        "median_s": med,
        "b_speedup": med[a] / med[b],
        "vs": {fw: {k: med[fw] / med[k] for k in (a, b)} for fw in ENGINES},
    }


def _markdown(meta: dict[str, Any], results: list[dict[str, Any]], gate: NoiseGate) -> list[str]:
    a, b = results[0]["labels"]
    host = meta["host"]
    lines = [
        f"# {results[0]['model']}: tuned as {a} against tuned as {b}, timed in the same turns",
        "",
        f"Command: `{meta['command']}`; started {meta['started']}, wall {meta['wall_s']:.0f} s.  ",
        f"Host: {host['model']} ({host['isa']}, {host['cores']} cores); load before {meta['load_before']}.  ",
        f"{gate.sentence()}",
        "",
        f"| runs | {a} (ms) | {b} (ms) | onnxruntime (ms) | PyTorch (ms) | {b} / {a} speed | {a} vs ort | {b} vs ort |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        m = {k: v * 1e3 for k, v in r["median_s"].items()}
        lines.append(
            f"| {os.path.basename(r['runs'][a])} / {os.path.basename(r['runs'][b])} | {m[a]:.2f} | {m[b]:.2f} | "
            f"{m['onnxruntime']:.2f} | {m['pytorch']:.2f} | {r['b_speedup']:.3f}x | "
            f"{r['vs']['onnxruntime'][a]:.3f}x | {r['vs']['onnxruntime'][b]:.3f}x |"
        )
    lines.append("")
    for label, ratios in (
        (f"{b} / {a} speed", [r["b_speedup"] for r in results]),
        (f"{a} vs onnxruntime", [r["vs"]["onnxruntime"][a] for r in results]),
        (f"{b} vs onnxruntime", [r["vs"]["onnxruntime"][b] for r in results]),
        (f"{b} vs PyTorch", [r["vs"]["pytorch"][b] for r in results]),
    ):
        g, lo, hi = ratio_interval(ratios)
        interval = f"95% t-interval [{lo:.3f}, {hi:.3f}]" if len(ratios) > 1 else "one seed: no interval"
        lines.append(f"- {label}: geometric mean {g:.3f}x over {len(ratios)} seeds, {interval}")
    lines.append("")
    return lines


def _plot(out: str, results: list[dict[str, Any]]) -> str:
    a, b = results[0]["labels"]
    fig, ax = plt.subplots(figsize=(7, 4))
    keys = [a, b, "onnxruntime", "pytorch"]
    for i, r in enumerate(results):
        for j, k in enumerate(keys):
            ys = [t * 1e3 for t in r["rounds_s"][k]]
            ax.scatter([i * (len(keys) + 1) + j] * len(ys), ys, s=10, color=f"C{j}", label=k if i == 0 else None)
    ax.set_xticks([i * (len(keys) + 1) + 1.5 for i in range(len(results))], [f"seed {i}" for i in range(len(results))])
    ax.set_ylabel("latency per inference (ms), every round")
    ax.set_title(f"{results[0]['model']}: {a} vs {b}, interleaved")
    ax.legend()
    path = os.path.join(out, "run_ab.png")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.models.run_ab", description=__doc__)
    ap.add_argument("--a", nargs="+", required=True, help="benchmarks.models output dirs, one per seed")
    ap.add_argument("--b", nargs="+", required=True, help="the same seeds tuned the other way")
    ap.add_argument("--labels", nargs=2, default=["A", "B"], help="names of the two ways")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if len(args.a) != len(args.b) or args.labels[0] == args.labels[1]:
        ap.error("give one B run per A run, and two different labels")
    adatune.target.size_tvm_thread_pool()
    t0, started, load_before = time.perf_counter(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), load_now()
    gate = NoiseGate()
    gate.probe("before")
    labels = (args.labels[0], args.labels[1])
    results = [compare(a, b, labels, args.rounds, args.repeats) for a, b in zip(args.a, args.b)]
    gate.probe("after")
    meta = run_meta("benchmarks.models.run_ab", argv, started, t0, load_before) | {
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
