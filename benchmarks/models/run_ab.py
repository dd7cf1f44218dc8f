"""Two ways of tuning the same model, compared by their tuned models timed in the same turns.

For each seed, two ``benchmarks.models`` runs of one model (A and B: e.g. NCHW against ``--conv-layout auto``, or
hot against ``--cache-flush`` tuning) are built from their logs, each with the layout and fast-math setting it
was tuned with, checked against each other's outputs, and timed in turns with onnxruntime and PyTorch:
``--rounds`` rounds, each engine once per round (the order reversed every other round, a pause after each),
framed by the noise gate. Runs tuned at different times on a noisy host cannot be compared by their own final
latencies; here every ratio comes from latencies taken together. Ratios over seeds: geometric mean with a
Student-t 95% interval on the log ratios. Without ``--b`` the A runs alone are timed with the engines.

The gate's probe is also timed before every engine of a round and after the last (``benchmarks.host_state``),
so every ratio is also reported per host state: the 2-core Zen 4 host alternates within seconds between a
state in which two-thread TVM kernels run at full speed and one in which they run up to 1.9x slower while
onnxruntime barely moves, and a ratio over all rounds mixes the two in whatever proportion the run saw.

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
from collections.abc import Iterable
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import adatune  # noqa: E402
import adatune.models as am  # noqa: E402
from adatune.models._latency import compiled_latency  # noqa: E402

from .._common import load_now, run_meta, settled  # noqa: E402
from ..host_state import STATES, HostStates, interleaved_with_state, state_probe  # noqa: E402
from ..noise_gate import NoiseGate, Timer  # noqa: E402
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


def compare(runs: dict[str, str], rounds: int, repeats: int, probe: Timer) -> dict[str, Any]:
    """Build each labelled run's tuned model, check their outputs agree, and time them with the engines in turns,
    the probe around every engine (``host_state``)."""
    labels = list(runs)
    configs = {k: run_config(d) for k, d in runs.items()}
    names = {c[0] for c in configs.values()}
    if len(names) != 1:
        raise ValueError(f"the runs tuned different models: {sorted(names)}")
    name, arm = configs[labels[0]][0], configs[labels[0]][1]
    logs = {k: c[2] for k, c in configs.items()}
    models = {k: tuned_model(name, c[3], c[2]) for k, c in configs.items()}
    a = labels[0]
    inputs = models[a].random_inputs(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned tasks use their fallback in both builds alike
        built = {k: am.build(m, logs[k], log_target(logs[k])) for k, m in models.items()}
    outs = {k: c.run(*inputs)[0] for k, c in built.items()}
    diff = max((float(np.abs(outs[a] - outs[k]).max()) for k in labels[1:]), default=0.0)
    if diff > 1e-3 * max(1.0, float(np.abs(outs[a]).max())):
        raise RuntimeError(f"{name}: the builds of {', '.join(labels)} disagree by {diff}")
    timers = {k: (lambda c=c: settled(compiled_latency(c, inputs, repeats))) for k, c in built.items()}
    for fw in ENGINES:
        timers[fw] = lambda fw=fw: settled(am.framework_latency(models[a], fw, inputs, repeats) or math.nan)
    times, probes = interleaved_with_state(timers, rounds, probe)
    states = HostStates(probes)
    result: dict[str, Any] = {
        "model": name,
        "arm": arm,
        "labels": labels,
        "runs": runs,
        "max_abs_diff": diff,
        "rounds_s": times,
        "host_state": states.to_json(),
        "median_s": {k: statistics.median(v) for k, v in times.items()},
    }
    result |= ratios(times, range(rounds), labels)
    result["by_state"] = {
        s: {"rounds": idx, "steady": states.steady(s), **ratios(times, idx, labels)}
        for s in STATES
        if (idx := states.rounds_in(s))
    }
    return result


def ratios(times: dict[str, list[float]], rounds: Iterable[int], labels: list[str]) -> dict[str, Any]:
    """Medians over ``rounds`` and the ratios between them: B's speed over A's, each engine's latency over each
    label's (> 1: the tuned model is faster), with a t-interval over the rounds' paired ratios."""
    idx = list(rounds)
    med = {k: statistics.median(times[k][i] for i in idx) for k in times}

    def paired(num: str, den: str) -> dict[str, float]:
        g, lo, hi = ratio_interval([times[num][i] / times[den][i] for i in idx])
        return {"median_ratio": med[num] / med[den], "geomean": g, "lo": lo, "hi": hi}

    out: dict[str, Any] = {"median_s": med, "vs": {fw: {k: paired(fw, k) for k in labels} for fw in ENGINES}}
    if len(labels) == 2:
        out["b_speedup"] = paired(labels[0], labels[1])
    return out


def _ratio_keys(labels: list[str]) -> list[tuple[str, Any]]:
    """(column name, getter) of the ratios a summary shows: B over A, then every label against each engine."""
    keys: list[tuple[str, Any]] = []
    if len(labels) == 2:
        keys.append((f"{labels[1]} / {labels[0]} speed", lambda r: r["b_speedup"]))
    for k in labels:
        keys += [(f"{k} vs {fw}", lambda r, k=k, fw=fw: r["vs"][fw][k]) for fw in ENGINES]
    return keys


def _markdown(meta: dict[str, Any], results: list[dict[str, Any]], gate: NoiseGate) -> list[str]:
    labels = results[0]["labels"]
    host = meta["host"]
    keys = _ratio_keys(labels)
    header = " | ".join(f"{k} (ms)" for k in [*labels, *ENGINES]) + " | " + " | ".join(n for n, _ in keys) + " |"
    lines = [
        f"# {results[0]['model']}: tuned as {' and as '.join(labels)}, timed in turns with the engines",
        "",
        f"Command: `{meta['command']}`; started {meta['started']}, wall {meta['wall_s']:.0f} s.  ",
        f"Host: {host['model']} ({host['isa']}, {host['cores']} cores); load before {meta['load_before']}.  ",
        f"{gate.sentence()}",
        "",
        "Ratios > 1: the second name is faster (an engine's latency over a tuned model's). Median latency over "
        "the rounds; a ratio's interval is a t-interval over the rounds' paired ratios (per seed) or over the "
        "seeds' ratios (combined).",
        "",
        "## All rounds",
        "",
        "| runs | " + header,
        "|---|" + "---:|" * (len(labels) + len(ENGINES) + len(keys)),
    ]
    for r in results:
        runs = " / ".join(os.path.basename(r["runs"][k]) for k in labels)
        ms = " | ".join(f"{r['median_s'][k] * 1e3:.2f}" for k in [*labels, *ENGINES])
        lines.append(f"| {runs} | {ms} | " + " | ".join(_cell(get(r)) for _, get in keys) + " |")
    lines += ["", *_over_seeds(results, keys, None), "", "## By host state", ""]
    for i, r in enumerate(results):
        lines.append(f"- seed {i}: {HostStates(r['host_state']['round_probes_s']).sentence()}")
    lines += [
        "",
        "| runs | state | rounds | gated | " + header,
        "|---|---|---:|---|" + "---:|" * (len(labels) + len(ENGINES) + len(keys)),
    ]
    for r in results:
        runs = " / ".join(os.path.basename(r["runs"][k]) for k in labels)
        for state, sr in r["by_state"].items():
            ms = " | ".join(f"{sr['median_s'][k] * 1e3:.2f}" for k in [*labels, *ENGINES])
            cells = " | ".join(_cell(get(sr)) for _, get in keys)
            gated = "yes" if sr["steady"] else "no"
            lines.append(f"| {runs} | {state} | {len(sr['rounds'])} | {gated} | {ms} | {cells} |")
    lines.append("")
    for state in ("fast", "slow"):
        lines += _over_seeds(results, keys, state)
    lines.append("")
    return lines


def _cell(ratio: dict[str, float]) -> str:
    if math.isnan(ratio["lo"]):
        return f"{ratio['median_ratio']:.3f}x"
    return f"{ratio['median_ratio']:.3f}x [{ratio['lo']:.3f}, {ratio['hi']:.3f}]"


def _over_seeds(results: list[dict[str, Any]], keys: list[tuple[str, Any]], state: str | None) -> list[str]:
    """Each ratio over the seeds (geometric mean of the seeds' median ratios, t-interval): from all rounds, or
    from the rounds in ``state``; a state's line says whether it was gated (steady in every seed)."""
    runs = results if state is None else [r["by_state"][state] for r in results if state in r["by_state"]]
    if not runs:
        return [f"- {state} state: no round in any seed"]
    if state is None:
        head = "all rounds"
    else:
        gated = len(runs) == len(results) and all(r["steady"] for r in runs)
        verdict = "gated" if gated else "not gated: claims nothing"
        head = f"{state} state ({len(runs)} of {len(results)} seeds; {verdict})"
    lines = []
    for name, get in keys:
        g, lo, hi = ratio_interval([get(r)["median_ratio"] for r in runs])
        interval = f"95% t-interval [{lo:.3f}, {hi:.3f}]" if len(runs) > 1 else "one seed: no interval"
        lines.append(f"- {head}, {name}: geometric mean {g:.3f}x over {len(runs)} seeds, {interval}")
    return lines


def _plot(out: str, results: list[dict[str, Any]]) -> str:
    keys = [*results[0]["labels"], *ENGINES]
    marker = {"fast": "o", "slow": "x", "mixed": "^"}
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, r in enumerate(results):
        states = r["host_state"]["round_states"]
        for j, k in enumerate(keys):
            for state in marker:
                ys = [t * 1e3 for t, s in zip(r["rounds_s"][k], states) if s == state]
                x = [i * (len(keys) + 1) + j] * len(ys)
                label = f"{k}" if i == 0 and state == "fast" else None
                ax.scatter(x, ys, s=12, color=f"C{j}", marker=marker[state], label=label)
    ax.set_xticks([i * (len(keys) + 1) + 1.5 for i in range(len(results))], [f"seed {i}" for i in range(len(results))])
    ax.set_ylabel("latency per inference (ms), every round")
    ax.set_title(f"{results[0]['model']}: every round (o fast state, x slow, ^ mixed)")
    ax.legend(fontsize=8)
    path = os.path.join(out, "run_ab.png")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.models.run_ab", description=__doc__)
    ap.add_argument("--a", nargs="+", required=True, help="benchmarks.models output dirs, one per seed")
    ap.add_argument("--b", nargs="+", help="the same seeds tuned the other way (omit to time A with the engines)")
    ap.add_argument("--labels", nargs="+", default=["A", "B"], help="names of the ways (one per --a/--b given)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.b is not None and len(args.a) != len(args.b):
        ap.error("give one B run per A run")
    labels = args.labels[: 1 if args.b is None else 2]
    if len(set(labels)) != (1 if args.b is None else 2) or len(args.labels) > 2:
        ap.error("give one label per way (two with --b), all different")
    adatune.target.size_tvm_thread_pool()
    t0, started, load_before = time.perf_counter(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), load_now()
    gate = NoiseGate()
    gate.probe("before")
    probe = state_probe()
    pairs = zip(args.a, args.b) if args.b is not None else ((a,) for a in args.a)
    results = [compare(dict(zip(labels, dirs)), args.rounds, args.repeats, probe) for dirs in pairs]
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
