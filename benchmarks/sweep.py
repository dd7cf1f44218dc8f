"""Exhaustive sweep: measure every valid config of a workload's space with the project's own runner.

The log feeds ``ReplayRunner``, so strategies can be compared in trials over many seeds quickly. Each config is timed
``--repeat`` times (replays rank by their median). Every session (one invocation) is framed by the noise gate: the probe
and the load are read before, every ``--probe-every`` seconds and after it, and appended with the host to
``<out>.gate.json`` (``<out>`` without ``.jsonl`` or ``.jsonl.gz``); ``python -m benchmarks.tabular`` refuses a sweep in
which some config's last record is not from a session that passed the gate. Re-running resumes: configs already in the
log are skipped; ``--remeasure-ungated`` measures again those whose last record is ungated. ``--max-seconds`` stops
after the batch that crosses the limit (so one run holds the shared benchmark lock for a bounded time);
``--max-configs`` measures a seeded uniform subset only (replays then search that subset; say so in any summary).

On a host that runs at two speeds in spells of seconds (``host_state``) a long session seldom passes the gate, so each
batch is placed in the host's state (on by default; ``--no-host-state``): built once, then run between two probe
readings, after waiting up to ``--wait-fast`` seconds for a fast one, and run again (up to ``--state-tries`` runs) while
a reading around it is slow. The session stores every batch's readings and lines; a batch run between fast readings
counts as gated when the session's fast readings are steady (``HostStates.steady``), whatever its before/after verdict.

    flock /tmp/bench.lock nice -n 5 python -m benchmarks.sweep --workload conv2d-resnet18-L6-small \
        --out benchmarks/data/conv2d-resnet18-L6-small.jsonl --max-seconds 840
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Iterable

import numpy as np

import adatune
from adatune.measure import MeasureInput, MeasureOption, MeasureResult
from adatune.records import save_to_file
from adatune.target import to_json as target_json
from adatune.templates.workloads import get as get_workload

from ._common import load_records, open_text, run_meta, sweep_log, sweep_stem, write_json
from .harness.run import host_record
from .host_state import STATE_TOLERANCE, FastWatch, HostStates, state_probe
from .noise_gate import NoiseGate, drift_passes


def sweep_indices(n_space: int, is_valid: Callable[[int], bool], max_configs: int | None, seed: int) -> list[int]:
    """Valid indices in order, or a seeded uniform subset of ``max_configs`` of them (sorted)."""
    valid = [i for i in range(n_space) if is_valid(i)]
    if max_configs is None or max_configs >= len(valid):
        return valid
    if max_configs < 1:
        raise ValueError(f"--max-configs must be positive, got {max_configs}")
    pick = np.random.default_rng(seed).choice(len(valid), size=max_configs, replace=False)
    return sorted(valid[k] for k in pick)


def measure_in_fast_state(
    option: MeasureOption, inputs: list[MeasureInput], watch: FastWatch, tries: int, wait_seconds: float
) -> tuple[list[MeasureResult], list[float], int]:
    """Build a batch once, run it between two fast readings (waiting up to ``wait_seconds`` for one) and again (up to
    ``tries`` runs) while a reading around it is slow: the last run's results and readings, and the run count."""
    if tries < 1:
        raise ValueError(f"--state-tries must be at least 1, got {tries}")
    builds = option.builder.build(inputs, option.runner.device_limits(inputs[0].task.target))
    runs = 0
    while True:
        runs += 1
        before = watch.wait_fast(wait_seconds)
        results = option.runner.run(inputs, builds)
        after = watch.read()
        if runs >= tries or (watch.is_fast(before) and watch.is_fast(after)):
            return list(results), [before, after], runs


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.sweep", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--workload", default="conv2d-resnet18-L6-small", help="a workload name or spec")
    p.add_argument("--out", default=None, help="the sweep log, .jsonl or .jsonl.gz (default: benchmarks/data)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--number", type=int, default=3)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--max-configs", type=int, default=None, help="measure a seeded uniform subset of this size")
    p.add_argument("--subset-seed", type=int, default=0)
    p.add_argument("--max-seconds", type=float, default=None, help="stop after the batch crossing this time")
    p.add_argument("--probe-every", type=float, default=600.0, help="seconds between noise-gate probes")
    p.add_argument(
        "--remeasure-ungated",
        action="store_true",
        help="measure again every config whose last record is not from a session that passed the noise gate "
        "(the new records are appended; readers use a config's last record)",
    )
    p.add_argument(
        "--no-host-state",
        dest="host_state",
        action="store_false",
        help="run each batch once, without the probe read around it (a session then counts only by its gate)",
    )
    p.add_argument(
        "--state-tries",
        type=int,
        default=4,
        help="runs of a built batch at most, until both readings around it are fast",
    )
    p.add_argument("--wait-fast", type=float, default=20.0, help="seconds to wait for a fast reading before a run")
    p.add_argument("--state-scan", type=float, default=20.0, help="seconds of probe readings before the first batch")
    args = p.parse_args()
    out = args.out or sweep_log("benchmarks/data", args.workload)
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    task = get_workload(args.workload).create_task(adatune.target.host())
    if not isinstance(task, adatune.task.Task):
        raise TypeError(f"{args.workload}: sweeps enumerate knob spaces, got a {type(task).__name__}")
    space = task.config_space
    records = list(load_records(out)) if os.path.exists(out) else []
    check_same_host(records, target_json(task.target), out)
    if args.remeasure_ungated:
        gated = gated_keys(records, load_sessions(out))
        done = {r.key for r in records if r.key in gated}
    else:
        done = {r.key for r in records}
    wanted = sweep_indices(space.range_length, space.is_index_valid, args.max_configs, args.subset_seed)
    todo = [i for i in wanted if str(i) not in done]
    first_line = len(records)
    print(f"{task}: {len(space)} valid, {len(wanted)} wanted, {len(todo)} to measure -> {out}", flush=True)
    t0, t_perf = time.time(), time.perf_counter()
    started, load_before = time.strftime("%Y-%m-%d %H:%M:%S %Z"), list(os.getloadavg())
    gate = NoiseGate()
    gate.probe("before")  # before the builder and runner pools start: their start-up would be in the reading
    option = adatune.measure_option(adatune.LocalBuilder(), adatune.LocalRunner(number=args.number, repeat=args.repeat))
    watch = FastWatch(state_probe(timer=gate.compute_timer)) if args.host_state else None
    if watch is not None:
        watch.scan(args.state_scan)
    batches: list[list[int]] = []  # per batch: first line, configs, runs
    brackets: list[list[float]] = []  # per batch: the probe readings just before and after its last run
    n_done = 0
    try:
        for start in range(0, len(todo), args.batch):
            inputs = [MeasureInput(task, space.get(i)) for i in todo[start : start + args.batch]]
            if watch is None:
                results = list(option.measure(inputs))
            else:
                results, around, runs = measure_in_fast_state(option, inputs, watch, args.state_tries, args.wait_fast)
                batches.append([first_line + n_done, len(inputs), runs])
                brackets.append(around)
            append_records(out, zip(inputs, results))
            n_done += len(inputs)
            elapsed = time.time() - t0
            print(f"{start + len(inputs)}/{len(todo)} measured, {elapsed:.0f} s", flush=True)
            if time.time() - gate.readings[-1].at >= args.probe_every:
                print(f"probe robust CV {gate.probe(f'after {n_done}').robust_cv:.1%}", flush=True)
            if args.max_seconds is not None and elapsed >= args.max_seconds:
                print(f"stopping at --max-seconds {args.max_seconds:.0f}; re-run to resume", flush=True)
                break
    finally:
        option.close()
        gate.probe("after")
        session = run_meta("benchmarks.sweep", None, started, t_perf, load_before)
        session |= {
            "host": host_record(),
            "measured": n_done,
            "first_line": first_line,  # this session's records are lines [first_line, first_line + measured)
            "noise_gate": gate.to_json(),
        }
        if watch is not None:
            session["host_state"] = {
                "tolerance": STATE_TOLERANCE,
                "batches": batches,
                "brackets_s": brackets,
                "readings": len(watch.readings),
            }
        append_session(out, session)
        print(gate.sentence(), flush=True)
        if brackets:
            states = HostStates(brackets)
            print(
                f"{states.sentence()} Batches in the fast state: {len(states.rounds_in('fast'))} of "
                f"{len(brackets)}; gated: {states.steady('fast')}.",
                flush=True,
            )


def append_records(sweep: str, pairs: Iterable[tuple[MeasureInput, MeasureResult]]) -> None:
    """Append pairs to a sweep log; a gzipped log gets a gzip member per call, so a killed run leaves it readable."""
    if not sweep.endswith(".gz"):
        save_to_file(sweep, pairs)
        return
    with open_text(sweep, "a") as f:
        save_to_file(f, pairs)


def check_same_host(records: list, target: dict, sweep: str) -> None:
    """A sweep is one machine's table: refuse to add records made for another target (a session on another CPU
    resuming it would mix two machines' speeds into one ranking)."""
    other = {json.dumps(r.target, sort_keys=True) for r in records} - {json.dumps(target, sort_keys=True)}
    if other:
        raise SystemExit(
            f"{sweep} was measured for {sorted(other)[0]}, this host's target is {json.dumps(target, sort_keys=True)}:"
            " a sweep holds one machine's timings; write this host's to another --out"
        )


def gate_path(sweep: str) -> str:
    """Where a sweep's sessions and their noise-gate readings are kept, beside the sweep log."""
    return sweep_stem(sweep) + ".gate.json"


def load_sessions(sweep: str) -> list[dict]:
    """The sessions recorded for a sweep log (none for a sweep that predates the gate)."""
    path = gate_path(sweep)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return list(json.load(f))


def session_lines(sessions: list[dict], n_lines: int) -> list[tuple[int, int, bool]]:
    """``(first line, end line, passed)`` of each session's records. Sessions without a range measured the lines just
    before the first session with one (or the log's end), in order; anything before them predates the gate."""
    out: list[tuple[int, int, bool]] = []
    legacy = [s for s in sessions if "first_line" not in s]
    end = next((int(s["first_line"]) for s in sessions if "first_line" in s), n_lines)
    start = end - sum(int(s["measured"]) for s in legacy)
    for s in sessions:
        if "first_line" in s:
            first = int(s["first_line"])
        else:
            first, start = start, start + int(s["measured"])
        out.append((first, first + int(s["measured"]), session_passed(s)))
    return out


def session_passed(session: dict) -> bool:
    """A session's gate verdict, re-checked by today's drift rule (every reading against the first)."""
    gate = session["noise_gate"]
    return bool(gate["passed"]) and ("readings" not in gate or drift_passes(gate["readings"]))


def fast_batch_lines(session: dict) -> list[tuple[int, int]]:
    """The line ranges of a session's batches that ran between fast probe readings, when those readings are
    steady (``HostStates.steady``); none for a session without the host state or with unsteady fast readings."""
    hs = session.get("host_state")
    if not hs or not hs["brackets_s"]:
        return []
    states = HostStates(hs["brackets_s"], tolerance=hs.get("tolerance", STATE_TOLERANCE))
    if not states.steady("fast"):
        return []
    return [(first, first + n) for first, n, _ in (hs["batches"][i] for i in states.rounds_in("fast"))]


def gated_keys(records: list, sessions: list[dict]) -> set[str]:
    """Keys whose last record comes from a session that passed the gate or a fast-state batch (``fast_batch_lines``)."""
    ranges = [(a, b) for a, b, ok in session_lines(sessions, len(records)) if ok]
    ranges += [r for s in sessions for r in fast_batch_lines(s)]
    last = {str(r.key): n for n, r in enumerate(records)}
    return {key for key, n in last.items() if any(a <= n < b for a, b in ranges)}


def append_session(sweep: str, session: dict) -> None:
    write_json(gate_path(sweep), load_sessions(sweep) + [session])


if __name__ == "__main__":
    main()
