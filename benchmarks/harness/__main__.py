"""Command line of the harness: the ``replay``, ``hardware``, ``evaluator`` and ``evaluator-rules`` studies."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
import time
from collections.abc import Sequence
from typing import Any

from adatune.measure.evaluator import ADATUNE_PAPER

from .._common import command_line, load_now, open_text, sweep_log, write_json, write_summary
from ..noise_gate import NoiseGate
from .evaluator_rules import evaluator_rules_study, evaluator_rules_summary
from .evaluator_study import evaluator_study, evaluator_summary
from .report import write_report
from .run import RunSpec, hardware_study, host_record, replay_study
from .schemes import BASELINE, SCHEMES, check_schemes

REPLAY_SCHEMES = ["XGB+SA", "RFEI+SA", "RFEI+CSA", "RFEI+CSA+AE", "RL", "SA+AS", "RL+AS"]


def add_run_args(p: argparse.ArgumentParser, schemes: Sequence[str], out: str, baseline: str = BASELINE) -> None:
    """Flags every study that tunes takes (the ablation and ReLeASE presets reuse them with their defaults)."""
    p.add_argument("--schemes", nargs="+", default=list(schemes), help=f"from: {', '.join(SCHEMES)}")
    p.add_argument("--baseline", default=baseline)
    p.add_argument("--seeds", type=int, default=20, help="how many seeds: first-seed .. first-seed+N-1")
    p.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="the first seed (a confirmatory study takes seeds no earlier study used)",
    )
    p.add_argument("--trials", type=int, default=256, help="measurements per run")
    p.add_argument("--plan-size", type=int, default=32, help="measurements between model refits")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--num-threads", type=int, default=1, help="threads of each cost model / agent")
    p.add_argument("--target-fraction", type=float, default=0.95)
    p.add_argument("--title", default=None)
    p.add_argument("--out", default=out)
    p.add_argument("-v", "--verbose", action="store_true")


def add_hardware_args(p: argparse.ArgumentParser, workloads: Sequence[str]) -> None:
    p.add_argument("--workloads", nargs="+", default=list(workloads))
    p.add_argument("--budget", type=float, default=60.0, help="tuner-clock seconds per run")
    p.add_argument("--number", type=int, default=10)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--min-converge-coef", type=float, default=0.1)
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--n-parallel", type=int, default=2)
    p.add_argument("--space", choices=["knob", "trace"], default="knob", help="the workload's knob or trace task")
    p.add_argument(
        "--paper",
        action="store_true",
        help="the AdaTune paper's evaluator: number=50 repeat=10 (n=500), micro-batches of 50, deciding from 3; "
        "the common re-measurement then runs n=500 too",
    )


def _meta(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    return {
        "mode": mode,
        "command": "python -m benchmarks."
        + shlex.join([os.path.basename(os.path.dirname(sys.argv[0]))] + sys.argv[1:]),
        "host": host_record(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "load_before": load_now(),  # other work on the machine, reported beside the numbers
        "args": {k: v for k, v in vars(args).items() if k != "func"},
    }


def _hardware_evaluator(args: argparse.Namespace) -> dict[str, Any]:
    """The runner settings of a hardware study: the flags, or the paper's n=500 preset with ``--paper``."""
    if getattr(args, "paper", False):
        # the flag's default coefficient is the paper's (0.1); a given one is kept
        return ADATUNE_PAPER | {"min_converge_coef": args.min_converge_coef, "common_repeat": ADATUNE_PAPER["repeat"]}
    return {
        "number": args.number,
        "repeat": args.repeat,
        "min_converge_coef": args.min_converge_coef,
        "common_repeat": 3 * args.repeat,
    }


def run_tuning(args: argparse.Namespace, mode: str, default_title: str) -> dict[str, Any]:
    """Run a replay or hardware study from parsed flags and write its report."""
    schemes = check_schemes(args.schemes)
    if args.baseline not in schemes:
        raise ValueError(f"the baseline {args.baseline!r} must be one of the schemes run ({', '.join(schemes)})")
    coef = getattr(args, "min_converge_coef", 0.1)
    spec = RunSpec(args.trials, None, args.plan_size, args.batch_size, args.num_threads, coef)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    meta = _meta(args, mode) | {"schemes": schemes, "baseline": args.baseline, "target_fraction": args.target_fraction}
    os.makedirs(args.out, exist_ok=True)

    def save(done: list[dict[str, Any]]) -> None:
        """What is measured so far, so a killed study keeps it (the report overwrites this file at the end)."""
        write_json(
            os.path.join(args.out, "results.json"), {"meta": meta, "studies": done, "stats": [], "partial": True}, None
        )

    if mode == "replay":
        studies = replay_study(args.sweeps, schemes, seeds, spec, on_seed=save)
    else:
        spec.n_trial, spec.time_budget = 100_000, args.budget
        evaluator = _hardware_evaluator(args)
        meta["evaluator"] = evaluator
        gate = NoiseGate()
        gate.probe("before")
        studies = hardware_study(
            args.workloads,
            schemes,
            seeds,
            spec,
            evaluator,
            args.timeout,
            args.n_parallel,
            getattr(args, "space", "knob"),
            on_run=save,
        )
        gate.probe("after")
        meta["noise_gate"], meta["noise_sentence"] = gate.to_json(), gate.sentence()
    meta["load_after"] = load_now()
    return write_report(args.out, args.title or default_title, meta, studies)


def _load_results(folder: str) -> dict[str, Any]:
    """A study folder's ``results.json``, or its committed ``results.json.gz`` (large replays are stored gzipped)."""
    for path in (os.path.join(folder, name) for name in ("results.json", "results.json.gz")):
        if os.path.exists(path):
            with open_text(path) as f:
                return json.load(f)
    raise FileNotFoundError(f"{folder} holds neither results.json nor results.json.gz")


def combine(
    inputs: Sequence[str], out: str, title: str, fraction: float | None, baseline: str | None = None
) -> dict[str, Any]:
    """Pool studies written by separate runs into one report (each study keeps its commands and host). ``baseline``:
    another scheme of the runs to pair every scheme with (an ablation read against its own parent arm)."""
    parts = [_load_results(folder) for folder in inputs]
    if not parts:
        raise ValueError("report needs at least one input folder")
    modes = {p["meta"]["mode"] for p in parts}
    if len(modes) != 1:
        raise ValueError(f"cannot pool studies of different modes: {sorted(modes)}")
    meta = dict(parts[0]["meta"])
    meta["schemes"] = list(dict.fromkeys(s for p in parts for s in p["meta"]["schemes"]))
    meta["command"] = " ; ".join(p["meta"]["command"] for p in parts)
    meta["parts"] = [{"folder": d, "command": p["meta"]["command"]} for d, p in zip(inputs, parts)]
    if fraction is not None:
        meta["target_fraction"] = fraction
    if baseline is not None:
        if baseline not in meta["schemes"]:
            raise ValueError(f"the baseline {baseline!r} must be one of the schemes run ({', '.join(meta['schemes'])})")
        meta["baseline"] = baseline
    studies: list[dict[str, Any]] = []
    replays: dict[tuple[str, str], dict[str, Any]] = {}
    for p in parts:
        for st in p["studies"]:
            st.setdefault("host", p["meta"]["host"])
            if st.get("mode") == "hardware":  # studies written before the budget was recorded in them
                st.setdefault("time_budget", p["meta"]["args"].get("budget"))
            key = (os.path.basename(str(st.get("log"))), str(st.get("workload_key")))
            if st.get("mode") != "replay" or key not in replays:
                studies.append(st)
                if st.get("mode") == "replay":
                    replays[key] = st
                continue
            # the same table replayed by another run: a replay depends only on the table and the seed, so its
            # runs pair with this one's by seed (a (scheme, seed) both runs hold is kept once, from the first)
            first = replays[key]
            have = {(r["scheme"], r["seed"]) for r in first["runs"]}
            first["runs"] = first["runs"] + [r for r in st["runs"] if (r["scheme"], r["seed"]) not in have]
    return write_report(out, title, meta, studies)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.harness", description=__doc__)
    sub = p.add_subparsers(dest="mode", required=True)
    rp = sub.add_parser("replay", help="schemes x seeds over recorded sweeps (ReplayRunner)")
    rp.add_argument("--sweeps", nargs="+", default=["benchmarks/data/*.jsonl*"], help="sweep logs (globs)")
    rp.add_argument("--min-converge-coef", type=float, default=0.1, help="AE schemes' evaluator (replayed)")
    add_run_args(rp, REPLAY_SCHEMES, "benchmarks/results/replay")
    hp = sub.add_parser("hardware", help="schemes x seeds with real measurement under a time budget")
    add_run_args(hp, ["XGB+SA", "RFEI+CSA", "RFEI+CSA+AE"], "benchmarks/results/hardware")
    add_hardware_args(hp, ["bmm-bert-nt"])
    ep = sub.add_parser("evaluator", help="AE vs DE vs a fixed-30-run control on the same configs")
    ep.add_argument("--workloads", nargs="+", default=["bmm-bert-nt", "dense-bert-qkv"])
    ep.add_argument("--sweep-dir", default="benchmarks/data", help="top configs are taken from <workload>.jsonl(.gz)")
    ep.add_argument("--n-random", type=int, default=16)
    ep.add_argument("--n-top", type=int, default=8)
    ep.add_argument("--number", type=int, default=10)
    ep.add_argument("--repeat", type=int, default=10)
    ep.add_argument("--min-converge-coef", type=float, default=0.1)
    ep.add_argument("--micro-batch", type=int, default=10)
    ep.add_argument("--min-micro-batches", type=int, default=3)
    ep.add_argument(
        "--paper",
        action="store_true",
        help="the AdaTune paper's evaluator: number=50 repeat=10 (n=500), micro-batches of 50, deciding from 3",
    )
    ep.add_argument("--seed", type=int, default=0)
    ep.add_argument("--timeout", type=float, default=60.0, help="seconds one candidate's timing may take")
    ep.add_argument("--confirm-repeats", type=int, default=5)
    ep.add_argument("--out", default="benchmarks/results/evaluator")
    ep.add_argument("-v", "--verbose", action="store_true")
    cp = sub.add_parser("report", help="one report over the results.json of several studies (pooled statistics)")
    cp.add_argument("--inputs", nargs="+", required=True, help="folders holding results.json")
    cp.add_argument("--title", default="Replay: search schemes over recorded sweeps")
    cp.add_argument("--target-fraction", type=float, default=None, help="default: the studies' own")
    cp.add_argument("--baseline", default=None, help="pair every scheme with this one (default: the runs' own)")
    cp.add_argument("--out", required=True)
    cp.add_argument("-v", "--verbose", action="store_true")
    xp = sub.add_parser("evaluator-rules", help="the evaluator's stopping rules replayed on recorded micro-batches")
    xp.add_argument("--sweep", required=True, help="a sweep timed in micro-batches (--number 50 --repeat 10)")
    xp.add_argument("--min-converge-coef", type=float, default=0.1)
    xp.add_argument("--min-batches", type=int, default=10, help="configs with fewer recorded batches are left out")
    xp.add_argument("--out", required=True)
    xp.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(message)s")
    logging.getLogger("benchmarks").setLevel(logging.INFO)
    if args.mode == "report":
        combine(args.inputs, args.out, args.title, args.target_fraction, args.baseline)
        with open(os.path.join(args.out, "summary.md"), encoding="utf-8") as f:
            print(f.read())
        return
    if args.mode == "evaluator-rules":
        study = evaluator_rules_study(args.sweep, args.min_converge_coef, args.min_batches)
        rules_meta = {"command": command_line("benchmarks.harness", argv)}
        os.makedirs(args.out, exist_ok=True)
        write_json(os.path.join(args.out, "results.json"), {"meta": rules_meta, "study": study})
        write_summary(args.out, evaluator_rules_summary(rules_meta, study), echo=True)
        return
    if args.mode == "evaluator":
        if args.paper:
            paper = ADATUNE_PAPER
            args.number, args.repeat, args.micro_batch = paper["number"], paper["repeat"], paper["micro_batch"]
            args.min_micro_batches = paper["min_micro_batches"]
        sweeps = {w: log for w in args.workloads if os.path.exists(log := sweep_log(args.sweep_dir, w))}
        meta = _meta(args, "evaluator")
        gate = NoiseGate()
        gate.probe("before")
        os.makedirs(args.out, exist_ok=True)
        studies: list[dict[str, Any]] = []

        def save() -> None:
            meta["load_after"] = load_now()
            meta["noise_gate"], meta["noise_sentence"] = gate.to_json(), gate.sentence()
            write_json(os.path.join(args.out, "results.json"), {"meta": meta, "studies": studies}, indent=None)
            with open(os.path.join(args.out, "summary.md"), "w", encoding="utf-8") as f:
                f.write(evaluator_summary(meta, studies))

        for wl in args.workloads:  # written after each workload, so a cut-off run keeps what it measured
            studies += evaluator_study(
                [wl],
                sweeps,
                args.n_random,
                args.n_top,
                args.number,
                args.repeat,
                args.min_converge_coef,
                args.micro_batch,
                args.confirm_repeats,
                seed=args.seed,
                timeout=args.timeout,
                min_micro_batches=args.min_micro_batches,
            )
            save()
        gate.probe("after")
        save()
        print(evaluator_summary(meta, studies))
        return
    res = run_tuning(args, args.mode, f"{args.mode} study")
    with open(os.path.join(args.out, "summary.md"), encoding="utf-8") as f:
        print(f.read())
    print("plots:", ", ".join(res["plots"]))


if __name__ == "__main__":
    main()
