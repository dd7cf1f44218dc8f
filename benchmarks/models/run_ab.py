"""Two ways of tuning the same model, compared by their tuned models timed in the same turns.

For each seed, two ``benchmarks.models`` runs of one model (A and B: e.g. NCHW against ``--conv-layout auto``, or hot
against ``--cache-flush`` tuning) are built from their logs, each with the layout and fast-math setting it was tuned
with, checked against each other, and timed in turns with onnxruntime and PyTorch: ``--rounds`` rounds, each engine once
per round (order reversed every other round, a pause after each), framed by the noise gate. Runs tuned at different
times on a noisy host cannot be compared by their final latencies, so every ratio comes from latencies taken together.
Ratios over seeds: geometric mean with a Student-t 95% interval. Without ``--b`` only the A runs are timed.

The gate's probe is also timed before every engine of a round and after the last (``benchmarks.host_state``), so every
ratio is also reported per host state: on some hosts multi-threaded TVM kernels alternate between full speed and much
slower spells while the other engines barely move, and a ratio over all rounds mixes the two.

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
from collections.abc import Callable
from typing import Any

import numpy as np

import adatune
import adatune.models as am
from adatune.models import compiled_latency

from .._common import geomean_interval, load_now, pyplot, run_meta, save_figure, settled, write_json, write_summary
from ..host_state import STATES, HostStates, State, interleaved_with_state, state_probe
from ..noise_gate import NoiseGate, Timer

plt = pyplot()

ENGINES = ("onnxruntime", "pytorch")


def run_config(run_dir: str) -> tuple[str, str, str, dict[str, Any]]:
    """(model, arm, log path, config) of a ``benchmarks.models`` output directory with one model and arm; the
    config carries the run's Winograd tile table (``winograd_tiles``) where its meta recorded one."""
    with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as f:
        data = json.load(f)
    run = data["models"][0]
    arm = run["arms"][0]["arm"]
    log = os.path.join(run_dir, f"records_{run['model']}_{arm}.jsonl")
    if not os.path.isfile(log):
        raise ValueError(f"{run_dir}: no tuning log {os.path.basename(log)}")
    return run["model"], arm, log, dict(data["meta"]["config"], winograd_tiles=data["meta"].get("winograd_tiles"))


def log_target(log: str) -> Any:
    with open(log, encoding="utf-8") as f:
        return adatune.target.create(json.loads(f.readline())["target"])


#: the Winograd tiles of runs recorded before the table was (14x14 maps and larger, F(4x4, 3x3))
WINOGRAD_TILES_BEFORE = ((196, 4),)


def run_winograd(config: dict[str, Any]) -> Any:
    """A run's ``winograd`` option as it tuned with it: False, or its tile table (a Winograd run that recorded no
    table used ``WINOGRAD_TILES_BEFORE``; rebuilt with today's default, its 7x7 layers would find no records)."""
    if not config.get("winograd"):
        return False
    return tuple(tuple(t) for t in config.get("winograd_tiles") or WINOGRAD_TILES_BEFORE)


def tuned_model(name: str, config: dict[str, Any], log: str) -> am.Model:
    """The model as a run tuned it: its layout, fast-math setting and Winograd tiles from the run's config."""
    layout = am.resolve_conv_layout(config.get("conv_layout", "NCHW"), log_target(log))
    winograd = run_winograd(config)
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
    times, probes, orders = interleaved_with_state(timers, rounds, probe)
    states = HostStates(probes, orders)
    result: dict[str, Any] = {
        "model": name,
        "arm": arm,
        "labels": labels,
        "runs": runs,
        "max_abs_diff": diff,
        "rounds_s": times,
        "host_state": states.to_json(),
    }
    result |= ratios(times, labels, lambda names: list(range(rounds)))
    result["by_state"] = {s: state_ratios(times, labels, states, s) for s in STATES}
    return result


def state_ratios(times: dict[str, list[float]], labels: list[str], states: HostStates, state: State) -> dict[str, Any]:
    """``ratios`` from the rounds in which the probe read ``state`` around the measurements named."""

    def rounds_of(names: list[str]) -> list[int]:
        return states.rounds_in(state, names)

    return ratios(times, labels, rounds_of, states, state)


def ratios(
    times: dict[str, list[float]],
    labels: list[str],
    rounds_of: Callable[[list[str]], list[int]],
    states: HostStates | None = None,
    state: State | None = None,
) -> dict[str, Any]:
    """Medians and ratios over the rounds ``rounds_of`` gives: each timer's median over its rounds, B's speed over A's
    and each engine's latency over each label's (> 1: the tuned model is faster), each ratio with a t-interval over its
    rounds' paired ratios, its round count and, with ``states``, whether ``state`` is steady around that pair."""
    med = {k: statistics.median(times[k][i] for i in idx) if (idx := rounds_of([k])) else math.nan for k in times}

    def paired(num: str, den: str) -> dict[str, Any]:
        idx = rounds_of([num, den])
        out: dict[str, Any] = {"rounds": len(idx)}
        if states is not None and state is not None:
            out["steady"] = states.steady(state, [num, den])
        if not idx:
            return out | {"median_ratio": math.nan, "geomean": math.nan, "lo": math.nan, "hi": math.nan}
        g, lo, hi = geomean_interval([times[num][i] / times[den][i] for i in idx])
        num_med, den_med = (statistics.median(times[k][i] for i in idx) for k in (num, den))
        return out | {"median_ratio": num_med / den_med, "geomean": g, "lo": lo, "hi": hi}

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
        hs = r["host_state"]
        lines.append(f"- seed {i}: {HostStates(hs['round_probes_s'], hs['round_orders']).sentence()}")
    lines += [
        "",
        "A ratio counts in a state from the rounds in which the probe read that state before and after both of its "
        "measurements; cells give the geometric mean of those rounds' ratios, its t-interval, the number of rounds "
        "and whether the state was steady around the pair (gated: >= 5 rounds, probe robust CV <= 3%).",
        "",
        "| runs | state | " + header,
        "|---|---|" + "---:|" * (len(labels) + len(ENGINES) + len(keys)),
    ]
    for r in results:
        runs = " / ".join(os.path.basename(r["runs"][k]) for k in labels)
        for state in STATES:
            sr = r["by_state"][state]
            ms = " | ".join(f"{sr['median_s'][k] * 1e3:.2f}" for k in [*labels, *ENGINES])
            cells = " | ".join(_cell(get(sr)) for _, get in keys)
            lines.append(f"| {runs} | {state} | {ms} | {cells} |")
    lines.append("")
    for state in ("fast", "slow"):
        lines += _over_seeds(results, keys, state)
    lines.append("")
    return lines


def _cell(ratio: dict[str, Any]) -> str:
    if math.isnan(ratio["geomean"]):
        return "-"
    text = f"{ratio['geomean']:.3f}x"
    if not math.isnan(ratio["lo"]):
        text += f" [{ratio['lo']:.3f}, {ratio['hi']:.3f}]"
    if "steady" in ratio:
        text += f" ({ratio['rounds']}, {'gated' if ratio['steady'] else 'not gated'})"
    return text


def _over_seeds(results: list[dict[str, Any]], keys: list[tuple[str, Any]], state: str | None) -> list[str]:
    """Each ratio over the seeds (geometric mean of the seeds' ratios, t-interval over the seeds): from all
    rounds, or from each seed's rounds in ``state``; a state's line says whether every seed was gated on it."""
    lines = []
    for name, get in keys:
        per_seed = [get(r if state is None else r["by_state"][state]) for r in results]
        used = [p for p in per_seed if not math.isnan(p["geomean"])]
        if not used:
            lines.append(f"- {state} state, {name}: no round in any seed")
            continue
        g, lo, hi = geomean_interval([p["geomean"] for p in used])
        interval = f"95% t-interval [{lo:.3f}, {hi:.3f}]" if len(used) > 1 else "one seed: no interval"
        if state is None:
            head = "all rounds"
        else:
            gated = len(used) == len(results) and all(p["steady"] for p in used)
            verdict = "gated" if gated else "not gated: claims nothing"
            head = f"{state} state ({len(used)} of {len(results)} seeds; {verdict})"
        lines.append(f"- {head}, {name}: geometric mean {g:.3f}x over {len(used)} seeds, {interval}")
    return lines


def _plot(out: str, results: list[dict[str, Any]]) -> str:
    keys = [*results[0]["labels"], *ENGINES]
    marker = {"fast": "o", "slow": "x", "mixed": "^"}
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, r in enumerate(results):
        states = HostStates(r["host_state"]["round_probes_s"], r["host_state"]["round_orders"])
        for j, k in enumerate(keys):
            for state in marker:
                rounds = set(states.rounds_in(state, [k]))  # type: ignore[arg-type]
                ys = [t * 1e3 for n, t in enumerate(r["rounds_s"][k]) if n in rounds]
                label = k if i == 0 and state == "fast" else None
                ax.scatter(
                    [i * (len(keys) + 1) + j] * len(ys), ys, s=12, color=f"C{j}", marker=marker[state], label=label
                )
    ax.set_xticks([i * (len(keys) + 1) + 1.5 for i in range(len(results))], [f"seed {i}" for i in range(len(results))])
    ax.set_ylabel("latency per inference (ms), every round")
    ax.set_title(f"{results[0]['model']}: every measurement (o fast state, x slow, ^ mixed)")
    ax.legend(fontsize=8)
    path = save_figure(fig, out, "run_ab.png", dpi=120)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.models.run_ab", description=__doc__)
    ap.add_argument("--a", nargs="+", help="benchmarks.models output dirs, one per seed")
    ap.add_argument("--b", nargs="+", help="the same seeds tuned the other way (omit to time A with the engines)")
    ap.add_argument("--labels", nargs="+", default=None, help="names of the ways (one per --a/--b given)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--out", required=True)
    ap.add_argument("--report", action="store_true", help="re-write OUT's summary from its results.json (no timing)")
    args = ap.parse_args(argv)
    if args.report:
        return report(args.out)
    if not args.a:
        ap.error("--a is required (or --report)")
    args.labels = args.labels or ["A", "B"]
    if args.b is not None and len(args.a) != len(args.b):
        ap.error("give one B run per A run")
    labels = args.labels[: 1 if args.b is None else 2]
    if len(set(labels)) != (1 if args.b is None else 2) or len(args.labels) > 2:
        ap.error("give one label per way (two with --b), all different")
    adatune.target.size_tvm_thread_pool()
    t0, started, load_before = time.perf_counter(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), load_now()
    gate = NoiseGate()
    gate.probe("before")
    probe = state_probe(timer=gate.compute_timer)
    pairs = zip(args.a, args.b) if args.b is not None else ((a,) for a in args.a)
    results = [compare(dict(zip(labels, dirs)), args.rounds, args.repeats, probe) for dirs in pairs]
    gate.probe("after")
    meta = run_meta("benchmarks.models.run_ab", argv, started, t0, load_before) | {
        "host": adatune.target.describe_host(),
        "noise_gate": gate.to_json(),
    }
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "results.json"), {"meta": meta, "results": results})
    _write_summary(args.out, meta, results, gate)
    return 0


def _write_summary(out: str, meta: dict[str, Any], results: list[dict[str, Any]], gate: NoiseGate) -> None:
    lines = _markdown(meta, results, gate)
    lines.append(f"![rounds]({os.path.basename(_plot(out, results))})")
    write_summary(out, lines, echo=True)


def report(out: str) -> int:
    """Recompute every ratio from a results.json's rounds and probe readings and rewrite its summary. Runs stored
    without ``host_state`` get no state table; runs stored before the round orders were kept get them back (labels, then
    the engines, reversed every other round, as ``compare`` times them)."""
    path = os.path.join(out, "results.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    for r in data["results"]:
        hs = r.get("host_state")
        if hs is None:
            raise ValueError(f"{path}: stored before the host state was recorded; nothing to re-compute")
        times, labels = r["rounds_s"], r["labels"]
        order = [*labels, *ENGINES]
        orders = hs.get("round_orders") or [order if i % 2 == 0 else order[::-1] for i in range(len(times[labels[0]]))]
        states = HostStates(hs["round_probes_s"], orders)
        r["host_state"] = states.to_json()
        every_round = list(range(len(orders)))

        def all_rounds(_names: list[str], idx: list[int] = every_round) -> list[int]:
            return idx

        r |= ratios(times, labels, all_rounds)
        r["by_state"] = {s: state_ratios(times, labels, states, s) for s in STATES}
    write_json(path, data)
    _write_summary(out, data["meta"], data["results"], NoiseGate.from_json(data["meta"]["noise_gate"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
