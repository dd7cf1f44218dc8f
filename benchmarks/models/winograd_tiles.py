"""Which Winograd tile a convolution's output map wants: one 3x3 stride-1 layer as a one-layer model (conv + bias
+ ReLU, batch 1), imported direct and as Winograd F(m x m, 3 x 3) for each ``--tiles`` m, each tuned alike
(``tune_model``, ``--budget-s`` seconds, its best re-timed by ``confirm``), built, checked against PyTorch, then
timed in ``--rounds`` turns with onnxruntime and PyTorch (the order reversed every other round), the noise gate
framing the whole run. Each build is timed hot (repeated calls) and cold (``_copies`` separate builds called in
turn, their kernels together at least twice the L3): in a whole model the other layers' weights have evicted a
layer's, so cold is what a model sees, and a larger transformed kernel costs more there. Per layer the speed of
each variant is the median over rounds of the direct build's latency over the variant's in the same round and
timing, so a change of the host's state between rounds cancels. ``--from-logs DIR`` builds from an earlier run's
records instead of tuning.

The transformed kernel of F(m x m) is ``(m+2)^2 / 9`` times the direct one and is read once per call, for
``ceil(H/m)^2`` output tiles: on small maps the larger tile stops paying. This is the measurement behind
``adatune.models._winograd.WINOGRAD_TILE_BY_MAP``.

    python -m benchmarks.models.winograd_tiles --layers 512x7 256x14 --tiles 2 4 --budget-s 150 \\
        --out benchmarks/results/winograd_small_maps

Writes results.json, summary.md and winograd_tiles.png under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
import warnings
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import tvm  # noqa: E402

import adatune  # noqa: E402
import adatune.models as am  # noqa: E402
from adatune.target import size_tvm_thread_pool  # noqa: E402

from .._common import load_now, run_meta, settled, write_summary  # noqa: E402
from ..noise_gate import NoiseGate, interleaved  # noqa: E402


def _layer(spec: str) -> tuple[int, int]:
    """``"512x7"`` -> (channels in and out, map height and width)."""
    try:
        channels, size = (int(x) for x in spec.split("x"))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"a layer is CHANNELSxMAP, e.g. 512x7, got {spec!r}") from err
    if channels < 1 or size < 3:
        raise argparse.ArgumentTypeError(f"a layer needs >= 1 channel and a map of >= 3x3, got {spec!r}")
    return channels, size


def _net(channels: int, seed: int) -> Any:
    import torch

    class Conv(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(channels, channels, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.conv(x))

    torch.manual_seed(seed)
    return Conv().eval()


def _variant(name: str, net: Any, example: tuple, tile: int | None, args: argparse.Namespace) -> dict[str, Any]:
    """Import ``net`` direct (``tile`` None) or with every eligible convolution as F(tile x tile), tune (or take
    ``--from-logs``' records), build."""
    model = am.from_torch(net, example, name=name, winograd=((1, tile),) if tile else False)
    kinds = [t.kind for t in am.extract_tasks(model)]
    log = os.path.join(args.out, f"records_{name}.jsonl")
    t0 = time.perf_counter()
    if args.from_logs:
        shutil.copyfile(os.path.join(args.from_logs, f"records_{name}.jsonl"), log)
        trials = sum(1 for _ in open(log, encoding="utf-8"))  # one record a line
    else:
        if os.path.exists(log):
            os.remove(log)  # a fresh tuning run: the budget is the compared quantity
        summary = am.tune_model(model, log, time_budget=args.budget_s, seed=args.seed, progress=False, confirm=4)
        trials = int(sum(summary.trials))
    tune_s = 0.0 if args.from_logs else time.perf_counter() - t0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a task without a record falls back, and says so
        copies = [am.build(model, log) for _ in range(_copies(int(net.conv.in_channels)))]
    compiled, x = copies[0], model.random_inputs(args.seed)
    np.testing.assert_allclose(compiled.run(*x)[0], model.reference(*x)[0], rtol=1e-3, atol=1e-3)
    print(f"{name}: tasks {kinds}, {trials} records, tuned {tune_s:.0f} s", flush=True)
    return {"name": name, "tile": tile, "tasks": kinds, "trials": trials, "tune_s": tune_s, "model": model,
            "compiled": compiled, "copies": copies, "inputs": x}  # fmt: skip


#: cold timing streams at least this many bytes of direct kernels per pass (twice the 32 MiB L3 of the hosts here)
COLD_BYTES = 64 << 20
#: at most this many copies of a build (a small layer's kernels may then fit L3 together; said in the summary)
MAX_COPIES = 16


def _copies(channels: int) -> int:
    """Builds of each variant called in turn for cold timing: enough that their direct kernels exceed
    ``COLD_BYTES``, so each call finds its weights evicted by the others' as a layer of a whole model does."""
    return min(MAX_COPIES, -(-COLD_BYTES // (channels * channels * 9 * 4)))


def _cold_latency(copies: list[Any], inputs: list, repeats: int) -> float:
    """Median seconds of one inference when ``copies`` (separate builds, each with its own weights) run one after
    another, so no call finds its weights in the caches while the thread pool stays as busy as in a model."""
    args = [tvm.runtime.tensor(a, tvm.cpu()) for a in inputs]
    fns, times = [c.main for c in copies], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for fn in fns:
            fn(*args)
        times.append((time.perf_counter() - t0) / len(fns))
    return statistics.median(times)


def _one_layer(channels: int, size: int, tiles: list[int], args: argparse.Namespace) -> dict[str, Any]:
    import torch

    net, example = _net(channels, args.seed), (torch.randn(1, channels, size, size),)
    label = f"{channels}@{size}x{size}"
    names = {m: f"{label}-{'direct' if m is None else f'F{m}'}" for m in [None, *tiles]}
    variants = [_variant(name, net, example, m, args) for m, name in names.items()]
    timers = {}
    for v in variants:
        timers[f"{v['name']} hot"] = lambda v=v: settled(am.compiled_latency(v["compiled"], v["inputs"], args.repeats))
        timers[f"{v['name']} cold"] = lambda v=v: settled(_cold_latency(v["copies"], v["inputs"], args.repeats))
    first = variants[0]
    for fw in am.FRAMEWORKS:  # hot: the engines' own timing (their caches are not flushed)
        timers[f"{fw} hot"] = lambda fw=fw: settled(
            am.framework_latency(first["model"], fw, first["inputs"], args.repeats) or float("nan")
        )
    rounds_s = interleaved(timers, args.rounds)
    rows = []
    for name, seconds in rounds_s.items():
        variant, mode = name.rsplit(" ", 1)
        per_round = [d / s for d, s in zip(rounds_s[f"{first['name']} {mode}"], seconds)]
        own = next((v for v in variants if v["name"] == variant), None)  # None: an engine, not a variant
        rows.append({
            "variant": variant, "timing": mode, "tile": own["tile"] if own else None,
            "engine": "adatune" if own else variant, "trials": own["trials"] if own else 0,
            "tune_s": own["tune_s"] if own else 0.0, "median_ms": statistics.median(seconds) * 1e3,
            "speed_vs_direct": statistics.median(per_round), "rounds_faster_than_direct": sum(r > 1 for r in per_round),
        })  # fmt: skip
        print(f"  {name}: {rows[-1]['median_ms']:.3f} ms, {rows[-1]['speed_vs_direct']:.3f}x direct", flush=True)
    return {"layer": label, "channels": channels, "map": size, "copies": len(first["copies"]), "rows": rows,
            "rounds_s": rounds_s}  # fmt: skip


def _summary(out: str, meta: dict[str, Any], layers: list[dict[str, Any]]) -> None:
    lines = [
        "# Winograd tiles by output map: one convolution layer direct and as F(m x m, 3 x 3)",
        "",
        f"Command: `{meta['command']}`  ",
        f"Host: {meta['host'].get('model', '?')} ({meta['host'].get('isa', '?')}), target `{meta['target']}`, "
        f"started {meta['started']}, {meta['wall_s'] / 60:.0f} min in all; 1-minute load {meta['load_before'][0]:.2f} "
        f"before, {meta['load_after'][0]:.2f} after.  ",
        meta["noise_sentence"],
        "",
        "Each variant tuned alone for the same budget, then all timed in turns, hot (repeated calls, the weights "
        "staying in the caches) and cold (separate builds of it, each with its own weights, called one after "
        "another, so each call's weights have been evicted by the others' as in a whole model; builds per variant: "
        + ", ".join(f"{x['layer']} {x.get('copies', 1)}" for x in layers)
        + "); the engines hot. Speed vs direct: median over rounds of the direct build's latency over the variant's "
        "in that round, in the same timing (> 1: faster than direct).",
        "",
        "| layer | variant | timing | records | latency (ms, median) | speed vs direct | rounds faster |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for layer in layers:
        n = len(next(iter(layer["rounds_s"].values())))
        for r in layer["rows"]:
            lines.append(
                f"| {layer['layer']} | {r['variant']} | {r.get('timing', 'hot')} | {r['trials'] or ''} | "
                f"{r['median_ms']:.3f} | "
                f"{r['speed_vs_direct']:.3f}x | {r['rounds_faster_than_direct']} of {n} |"
            )
    lines += ["", "![winograd_tiles.png](winograd_tiles.png)"]
    write_summary(out, lines)
    fig, axes = plt.subplots(1, len(layers), figsize=(5 * len(layers), 3.5), squeeze=False)
    for ax, layer in zip(axes[0], layers):
        names = list(layer["rounds_s"])
        ax.boxplot([np.array(layer["rounds_s"][n]) * 1e3 for n in names])
        ax.set_xticks(range(1, len(names) + 1), [n.split("-")[-1] for n in names], rotation=40, fontsize=7)
        ax.set_ylabel("latency per round (ms)")
        ax.set_title(layer["layer"])
    fig.tight_layout()
    fig.savefig(os.path.join(out, "winograd_tiles.png"), dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    size_tvm_thread_pool()
    ap = argparse.ArgumentParser(prog="python -m benchmarks.models.winograd_tiles", description=__doc__)
    ap.add_argument("--layers", type=_layer, nargs="+", default=[(512, 7)], help="CHANNELSxMAP, e.g. 512x7 256x14")
    ap.add_argument("--tiles", type=int, nargs="+", default=[2, 4], help="Winograd output tiles m to compare")
    ap.add_argument("--budget-s", type=float, default=150.0, help="tuning seconds per variant")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--repeats", type=int, default=30, help="timed inferences per engine and round")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--from-logs", help="build from this directory's records (an earlier run's) instead of tuning")
    ap.add_argument("--out", default="benchmarks/results/winograd_tiles")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    started, t0, load_before = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), time.perf_counter(), load_now()
    common = {"host": adatune.target.describe_host(), "target": str(adatune.target.host())}
    gate = NoiseGate()
    gate.probe("before")
    layers: list[dict[str, Any]] = []

    def write(**extra: Any) -> dict[str, Any]:
        meta = {**run_meta("benchmarks.models.winograd_tiles", argv, started, t0, load_before), **common, **extra}
        with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "layers": layers}, f, indent=1)
        return meta

    for channels, size in args.layers:
        layers.append(_one_layer(channels, size, args.tiles, args))
        write()  # after every layer: a killed run keeps what it measured
    gate.probe("after")
    meta = write(noise_gate=gate.to_json(), noise_sentence=gate.sentence())
    _summary(args.out, meta, layers)
    print(meta["noise_sentence"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
