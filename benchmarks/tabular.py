"""Tabular benchmark: a complete, low-noise sweep of one large space, and the gates a study on it must pass.

A replay study can only show a search method's gain where the space leaves room for one. Before any study runs on a
sweep, this checks (and writes down, so the gates are pre-registered, not fitted to a result):

- **quality**: the sweep is complete (every valid config of the task's space recorded), every config ranks by the median
  of at least ``--min-repeats`` repeats, and every config's last record comes from a sweep session that passed the noise
  gate (``<sweep>.gate.json``, written by ``benchmarks.sweep``; records of failed sessions may stay once re-measured);
  ``--confirm K`` re-times the sweep's top K configs round-robin (one repeat of each per round, with the probe before
  and after) to check that the sweep's optimum is still the best, within ``--confirm-tolerance``;
- **room to search**, per target fraction f of the optimum, with G the configs at or above f x optimum among N valid:
  random search needs ``E_random = (N + 1) / (G + 1)`` measurements in expectation; it must be at least
  ``--min-random-plans`` (10) plan sizes. An oracle that measures the random first plan and then the optimum needs
  ``E_oracle = E[min(T, P + 1)]`` (T: random search's first hit, P: the plan size); ``E_random / E_oracle`` bounds what
  any scheme sharing the first plan can gain over random search, and must be at least ``--min-ceiling`` (3x). The
  study's own ceiling (baseline measurements / E_oracle) is lower; the replay harness reports it after the study.

    python -m benchmarks.tabular --sweep benchmarks/data/bmm-bert-nt-autotvm.jsonl.gz --plan-size 64 \\
        --confirm 8 --out benchmarks/results/tabular/bmm-bert-nt-autotvm
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import time
from typing import Any

import numpy as np

import adatune
from adatune.measure import MeasureInput
from adatune.records import group_by_workload

from ._common import load_now, load_records, pyplot, run_meta, save_figure, write_json, write_summary
from .harness.run import host_record
from .noise_gate import NoiseGate
from .sweep import gated_keys, load_sessions, session_passed

__all__ = ["expected_random", "expected_oracle", "room_gates"]

FRACTIONS = (0.95, 0.99)


def expected_random(n: int, good: int) -> float:
    """Expected draws without replacement from ``n`` items until one of ``good`` is drawn."""
    return (n + 1) / (good + 1)


def expected_oracle(n: int, good: int, plan: int) -> float:
    """Expected measurements of an oracle that measures a random first plan of ``plan``, then a good config:
    E[min(T, plan + 1)] = sum over t = 0..plan of P(T > t), T the first good draw."""
    total, p_none = 0.0, 1.0  # p_none: P(no good config among the first t draws)
    for t in range(plan + 1):
        total += p_none
        p_none *= max(n - good - t, 0) / (n - t) if n - t > 0 else 0.0
    return total


def room_gates(
    flops: np.ndarray, plan: int, min_random_plans: float, min_ceiling: float, fractions: tuple[float, ...] = FRACTIONS
) -> list[dict[str, Any]]:
    """The room-to-search gates at each target fraction of the best throughput in ``flops``."""
    n, best = len(flops), float(flops.max())
    rows = []
    for f in fractions:
        good = int((flops >= f * best).sum())
        e_rand, e_orc = expected_random(n, good), expected_oracle(n, good, plan)
        rows.append(
            {
                "fraction": f,
                "good": good,
                "n": n,
                "expected_random": e_rand,
                "random_plans": e_rand / plan,
                "expected_oracle": e_orc,
                "oracle_ceiling": e_rand / e_orc,
                "random_gate": e_rand >= min_random_plans * plan,
                "ceiling_gate": e_rand / e_orc >= min_ceiling,
            }
        )
    return rows


def confirm_top(task: Any, records: list[Any], k: int, rounds: int, number: int) -> dict[str, Any]:
    """Re-time the sweep's top ``k`` configs round-robin, ``rounds`` times, framed by the probe."""
    ranked = sorted((r for r in records if r.result.ok), key=lambda r: r.result.cost)[:k]
    gate = NoiseGate()
    gate.probe("before confirm")
    option = adatune.measure_option(adatune.LocalBuilder(), adatune.LocalRunner(number=number, repeat=1))
    costs: dict[str, list[float]] = {str(r.key): [] for r in ranked}
    try:
        inputs = [MeasureInput(task, task.space.decode(r.config)) for r in ranked]
        for rnd in range(rounds):
            order = inputs if rnd % 2 == 0 else inputs[::-1]
            for inp, res in zip(order, option.measure(order)):
                costs[str(inp.config.key)].append(res.cost if res.ok else math.inf)
    finally:
        option.close()
    gate.probe("after confirm")
    medians = {key: float(np.median(c)) for key, c in costs.items()}
    best_key = min(medians, key=lambda key: medians[key])
    sweep_best = str(ranked[0].key)
    return {
        "k": len(ranked),
        "rounds": rounds,
        "sweep_rank": [str(r.key) for r in ranked],
        "sweep_cost": {str(r.key): r.result.cost for r in ranked},
        "confirmed_cost": medians,
        "confirmed_best": best_key,
        "sweep_best_over_confirmed_best": medians[sweep_best] / medians[best_key],
        "noise_gate": gate.to_json(),
        "noise_sentence": gate.sentence(),
    }


def remeasured(in_order: list[Any], flop: float, target: float = 0.95) -> dict[str, Any] | None:
    """Configs measured more than once (``benchmarks.sweep --remeasure-ungated``): how their last record, the
    one the table uses, compares with their first (Spearman, the spread of last / first time), and whether the
    configs at or above ``target`` x the optimum are the same under the first records as under the last."""
    from scipy.stats import spearmanr

    first: dict[str, Any] = {}
    last: dict[str, Any] = {}
    for r in in_order:
        if r.result.ok:
            first.setdefault(str(r.key), r)
            last[str(r.key)] = r
    again = [k for k in last if last[k] is not first[k]]
    if not again:
        return None
    a = np.asarray([first[k].result.cost for k in again])
    b = np.asarray([last[k].result.cost for k in again])
    ratio = b / a

    def top(table: dict[str, Any]) -> set[str]:
        best = min(r.result.cost for r in table.values())
        return {k for k, r in table.items() if best / r.result.cost >= target}

    return {
        "n": len(again),
        "spearman": float(spearmanr(a, b).statistic),
        "ratio_median": float(np.median(ratio)),
        "ratio_p10_p90": [float(np.percentile(ratio, 10)), float(np.percentile(ratio, 90))],
        "target": target,
        "top_first": sorted(top(first)),
        "top_last": sorted(top(last)),
        "optimum_gflops_first": flop / min(r.result.cost for r in first.values()) / 1e9,
    }


def _plot(out: str, name: str, flops: np.ndarray, gates: list[dict[str, Any]]) -> str:
    plt = pyplot()

    rel = np.sort(flops / flops.max())[::-1]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(np.arange(1, len(rel) + 1), rel, lw=1.5)
    ax.set_xscale("log")
    for g in gates:
        ax.axhline(g["fraction"], ls="--", lw=0.8, color="grey")
        ax.text(1.2, g["fraction"] + 0.01, f"{g['fraction']:.0%}: {g['good']} configs", fontsize=8)
    ax.set_xlabel("configs, fastest first (rank)")
    ax.set_ylabel("throughput / optimum")
    ax.set_title(f"{name}: {len(rel)} configs")
    path = save_figure(fig, out, "ranked_throughput.png", dpi=120)
    return path


def _summary(res: dict[str, Any]) -> list[str]:
    q, host = res["quality"], res["host"]
    lines = [
        f"# Tabular benchmark: {res['workload']}",
        "",
        f"Host: {host.get('cpu_model', '?')} (LLVM mcpu {host.get('mcpu', '?')}, ISA {host.get('isa', '?')}); "
        f"sweep log `{res['sweep']}`. Command: `{res['meta']['command']}`.",
        "",
        "## Quality",
        "",
        f"- complete: {q['recorded']} of {q['valid']} valid configs recorded ({'yes' if q['complete'] else 'NO'}); "
        f"errors by kind: {q['errors'] or 'none'}",
        f"- repeats per config: at least {q['min_repeats_seen']} (needed {q['min_repeats']}; ranked by the median)",
        f"- sweep sessions: {q['sessions']}, noise gate passed in {q['sessions_passed']}"
        + ("" if q["sessions"] else " (no gate record: the sweep predates the gate)")
        + f"; configs whose last record is not from a passing session: {q.get('ungated_records', 'n/a')}",
    ]
    for s in res["session_sentences"]:
        lines.append(f"  - {s}")
    c = res.get("confirm")
    if c:
        lines.append(
            f"- confirmation: the sweep's top {c['k']} re-timed round-robin {c['rounds']} times; the sweep's best is "
            f"{c['sweep_best_over_confirmed_best']:.3f}x the re-timed best's time "
            f"({'confirmed' if q['confirmed'] else 'NOT confirmed'}, tolerance {res['args']['confirm_tolerance']:.0%})"
        )
        lines.append(f"  - {c['noise_sentence']}")
    rm = res.get("remeasured")
    if rm:
        lo, hi = rm["ratio_p10_p90"]
        same = rm["top_first"] == rm["top_last"]
        lines.append(
            f"- re-measured: {rm['n']} configs measured again (their last record is the one used): Spearman "
            f"{rm['spearman']:.3f} between first and last, last / first time median {rm['ratio_median']:.3f} "
            f"(10-90%: {lo:.3f}-{hi:.3f}); configs at >= {rm['target']:.0%} of the optimum: "
            f"{len(rm['top_first'])} under the first records, {len(rm['top_last'])} under the last"
            + (" (the same configs)" if same else f" ({len(set(rm['top_first']) & set(rm['top_last']))} in both)")
            + f"; optimum under the first records {rm['optimum_gflops_first']:.1f} GFLOPS"
        )
    lines += [
        f"- **quality gate: {'passed' if q['passed'] else 'FAILED'}**",
        "",
        f"## Room to search (plan size {res['args']['plan_size']})",
        "",
        f"Optimum {res['optimum_gflops']:.1f} GFLOPS; median config {res['median_gflops']:.1f} GFLOPS.",
        "",
        "| target | configs at or above | E[random] | in plans | E[oracle] | oracle ceiling | random gate "
        "| ceiling gate |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for g in res["room"]:
        lines.append(
            f"| {g['fraction']:.0%} | {g['good']} of {g['n']} | {g['expected_random']:.0f} | {g['random_plans']:.1f} "
            f"| {g['expected_oracle']:.1f} | {g['oracle_ceiling']:.2f}x | {'pass' if g['random_gate'] else 'fail'} "
            f"| {'pass' if g['ceiling_gate'] else 'fail'} |"
        )
    if res["study_warranted"]:
        verdict = "run the study"
    elif res["room_to_search"]:
        verdict = (
            "the space leaves room to search, but the table's fidelity to the machine is not certified (quality "
            "gate failed): a study on it compares strategies on this table; claims about the hardware wait for "
            "the failed sessions to be re-measured"
        )
    else:
        verdict = "a study here cannot show the papers' gains: not run"
    return [*lines, "", f"**Verdict: {verdict}.**"]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.tabular", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sweep", required=True, help="a sweep log written by benchmarks.sweep (.jsonl or .jsonl.gz)")
    p.add_argument("--plan-size", type=int, default=64)
    p.add_argument("--min-repeats", type=int, default=5)
    p.add_argument("--min-random-plans", type=float, default=10.0)
    p.add_argument("--min-ceiling", type=float, default=3.0)
    p.add_argument("--confirm", type=int, default=0, help="re-time the top K configs (0: skip)")
    p.add_argument("--confirm-rounds", type=int, default=15)
    p.add_argument("--confirm-number", type=int, default=10)
    p.add_argument("--confirm-tolerance", type=float, default=0.02)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    t0, started, load_before = time.perf_counter(), time.strftime("%Y-%m-%d %H:%M:%S %Z"), load_now()
    groups = group_by_workload(load_records(args.sweep))
    if len(groups) != 1:
        raise ValueError(f"{args.sweep}: a tabular benchmark is one workload's sweep, found {len(groups)}")
    in_order = next(iter(groups.values()))
    records = list({str(r.key): r for r in in_order}.values())  # the last record of a key
    task = records[0].create_task()
    ok = [r for r in records if r.result.ok]
    flops = np.asarray([r.result.flops(task.flop) for r in ok])
    errors = collections.Counter(r.result.error_no.name for r in records if not r.result.ok)
    sessions = load_sessions(args.sweep)
    quality: dict[str, Any] = {
        "valid": int(task.space.size),
        "recorded": len(records),
        "complete": len(records) >= int(task.space.size),
        "errors": dict(errors),
        "min_repeats": args.min_repeats,
        "min_repeats_seen": min(len(r.result.costs) for r in ok),
        "sessions": len(sessions),
        "sessions_passed": sum(session_passed(s) for s in sessions),
        "ungated_records": len(records) - len(gated_keys(in_order, sessions)),
    }
    res: dict[str, Any] = {"workload": str(task), "sweep": args.sweep, "args": vars(args), "host": host_record()}
    if args.confirm:
        res["confirm"] = confirm_top(task, records, args.confirm, args.confirm_rounds, args.confirm_number)
        tol = 1 + args.confirm_tolerance
        quality["confirmed"] = res["confirm"]["sweep_best_over_confirmed_best"] <= tol and bool(
            res["confirm"]["noise_gate"]["passed"]
        )
    res["remeasured"] = remeasured(in_order, task.flop)
    quality["passed"] = (
        quality["complete"]
        and quality["min_repeats_seen"] >= args.min_repeats
        and quality["sessions"] > 0
        and quality["ungated_records"] == 0
        and quality.get("confirmed", True)
    )
    res["quality"] = quality
    res["session_sentences"] = [
        f"{s['started']}: {s['measured']} configs; probe robust CV "
        + ", ".join(f"{r['robust_cv']:.1%}" for r in s["noise_gate"]["readings"])
        + f"; drift {s['noise_gate']['drift']:.3f}x; {'passed' if s['noise_gate']['passed'] else 'FAILED'}"
        for s in sessions
    ]
    res["optimum_gflops"], res["median_gflops"] = float(flops.max()) / 1e9, float(np.median(flops)) / 1e9
    res["room"] = room_gates(flops, args.plan_size, args.min_random_plans, args.min_ceiling)
    res["room_to_search"] = any(g["random_gate"] and g["ceiling_gate"] for g in res["room"])
    res["study_warranted"] = quality["passed"] and res["room_to_search"]
    res["meta"] = run_meta("benchmarks.tabular", argv, started, t0, load_before)
    os.makedirs(args.out, exist_ok=True)
    res["plot"] = _plot(args.out, task.name, flops, res["room"])
    write_json(os.path.join(args.out, "results.json"), res, default=str)
    write_summary(args.out, _summary(res), echo=True)


if __name__ == "__main__":
    main()
