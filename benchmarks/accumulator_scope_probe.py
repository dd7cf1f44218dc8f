"""Register tiles' accumulators in TVM's "local" scope against "global" (``templates._x86.ACCUMULATOR_SCOPE``).

TVM 0.27 puts a CPU allocation on the stack only when its scope is "global" and its size a constant under 1 KiB;
a "local" buffer, however small, comes from the workspace pool: an allocation and a free around every iteration of
the parallel loop that holds it, the tile zeroed and written back through heap memory. Each kernel here is built
twice, once per scope, everything else equal, checked against a plain host build (templates) or numpy (DietCode),
and the two builds are timed in turns (``--rounds`` rounds, the order reversed every other round, each reading one
``time_evaluator`` call of >= 30 ms); a ratio is the median of the per-round ratios, so a change of the host's
state between rounds cancels. The noise gate frames the run. Cases: DietCode's scores kernels (``--kernels``,
generic at ``--t`` and aligned at the T of those their version serves) and the best config of each of the first
``--tasks`` tasks of each template log (``--logs``; their own shapes). Builds here go through TVM's default
pipeline (``build_with``), so the scope is compared without adatune's stack pass (``parallel_stack_probe`` times
that one). Run alone::

    python -m benchmarks.accumulator_scope_probe --out benchmarks/results/accumulator_scope_probe_zen1
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import tvm

import adatune
from adatune import records
from adatune.dietcode import DynamicWorkload, MicroKernel, schedule_microkernel
from adatune.dietcode._schedule import alignment
from adatune.measure._reference import plain_host_outputs
from adatune.templates import _x86

from ._common import write_csv, write_summary
from .noise_gate import gated_run, interleaved

SCOPES = ("local", "global")
SCORES = DynamicWorkload("scores", "bmm_nt", (12, 64), (1, 128))
KERNELS = ["cpu:8x64x4/4x16/unroll64", "cpu:12x72x8/3x24/column/unroll64", "cpu:8x24x1/4x24/column/unroll64/tail8"]
LOGS = [
    "benchmarks/results/models_zen1_bert_split_seed0/records_bert-base_rfei-ae.jsonl",
    "benchmarks/results/models_zen1_resnet18_winograd_seed0/records_resnet18_rfei-ae.jsonl",
]


@contextlib.contextmanager
def accumulator_scope(scope: str) -> Iterator[None]:
    """Schedules built inside use ``scope`` for their register tiles (the probe's one switch)."""
    saved = _x86.ACCUMULATOR_SCOPE
    _x86.ACCUMULATOR_SCOPE = scope
    try:
        yield
    finally:
        _x86.ACCUMULATOR_SCOPE = saved


Case = tuple[str, Callable[[], Any], list[Any], list[np.ndarray]]  # name, build, args, expected outputs


def dietcode_cases(kernels: list[str], ts: list[int]) -> Iterator[Case]:
    rng = np.random.default_rng(0)
    for key in kernels:
        mk = MicroKernel.from_key(key)
        unit = alignment(SCORES, mk)
        for t in ts:
            for align in (1, unit) if unit > 1 and t % unit == 0 else (1,):
                a, b = SCORES.random_inputs(t, rng)
                c = np.zeros(SCORES.shapes(t)[2], np.float32)
                name = f"scores {key}{'@align' if align > 1 else ''} T={t}"

                def build(mk: MicroKernel = mk, align: int = align) -> Any:
                    return schedule_microkernel(SCORES, mk, align).mod

                yield name, build, [a, b, c, t], [SCORES.reference(a, b)]


def template_cases(logs: list[str], n_tasks: int) -> Iterator[Case]:
    rng = np.random.default_rng(0)
    for log in logs:
        best = list(records.pick_best(records.load_from_file(log)).values())[:n_tasks]
        for rec in best:
            task = rec.create_task()
            inputs = [rng.uniform(-1, 1, s.shape).astype(s.dtype) for s in task.arg_specs if not s.is_output]
            want = plain_host_outputs(task, inputs)
            it = iter(inputs)
            args = [np.zeros(s.shape, s.dtype) if s.is_output else next(it) for s in task.arg_specs]

            def build(task: Any = task, config: Any = rec.input.config) -> Any:
                return task.scheduled_module(config)

            yield f"{task.name} {list(rec.args)}", build, args, want


def _seconds(fn: Any, tensors: list[Any]) -> float:
    """One ``time_evaluator`` reading of a build, in seconds."""
    return float(fn(*tensors).mean)


def probe(
    cases: list[Case],
    rounds: int,
    switch: Callable[[str], contextlib.AbstractContextManager[None]] = accumulator_scope,
    variants: tuple[str, str] = SCOPES,
    build_with: Callable[[Any, Any], Any] = lambda mod, target: tvm.compile(mod, target=target),
) -> list[dict[str, Any]]:
    """Each case built once per variant (``switch(variant)`` around its schedule and ``build_with``), checked, then
    the two builds timed in turns; a row per case with the second variant's speed against the first."""
    target = adatune.target.host()
    dev = tvm.cpu()
    first, second = variants
    timed = []
    for name, build, args, want in cases:
        tensors = [tvm.runtime.tensor(x, dev) if isinstance(x, np.ndarray) else x for x in args]
        outs = [i for i, x in enumerate(args) if isinstance(x, np.ndarray)][-len(want) :]
        fns = {}
        for variant in variants:
            with switch(variant):
                lib = build_with(build(), target)
            module = getattr(lib, "mod", lib)
            module["main"](*tensors)
            for i, w in zip(outs, want):
                np.testing.assert_allclose(tensors[i].numpy(), w, rtol=1e-3, atol=1e-3, err_msg=f"{name} {variant}")
            fns[variant] = module.time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=30)
        timed.append((name, tensors, fns))
    rows = []
    for name, tensors, fns in timed:
        t = interleaved({v: functools.partial(_seconds, fns[v], tensors) for v in variants}, rounds)
        ratio = statistics.median(a / b for a, b in zip(t[first], t[second]))
        rows.append(
            {
                "case": name,
                f"{first}_us": statistics.median(t[first]) * 1e6,
                f"{second}_us": statistics.median(t[second]) * 1e6,
                f"{second}_speed_vs_{first}": ratio,
                "rounds_s": t,
            }
        )
        a_us, b_us = rows[-1][f"{first}_us"], rows[-1][f"{second}_us"]
        print(f"{name}: {first} {a_us:.1f} us, {second} {b_us:.1f} us, {ratio:.3f}x")
    return rows


def write(out: str, rows: list[dict[str, Any]], meta: dict[str, Any], gate: Any, title: str, rounds: int,
          variants: tuple[str, str]) -> None:  # fmt: skip
    """results.json, cases.csv and summary.md under ``out``."""
    first, second = variants
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    write_csv(os.path.join(out, "cases.csv"), [{k: v for k, v in r.items() if k != "rounds_s"} for r in rows])
    ratios = [r[f"{second}_speed_vs_{first}"] for r in rows]
    host = meta["host"]
    lines = [
        f"# {title}",
        "",
        f"Command: `{meta['command']}`; started {meta['started']}, wall {meta['wall_s']:.0f} s.  ",
        f"Host: {host['model']} ({host['isa']}, {host['cores']} cores); load before {meta['load_before']}.  ",
        f"{rounds} rounds, both builds of a case in each (the order reversed every other round); a ratio is the "
        f'median of per-round ratios (> 1: the "{second}" build faster). Every build\'s output matched its reference.',
        "",
        gate.sentence(),
        "",
        f"Geometric mean over the {len(rows)} cases: {float(np.exp(np.mean(np.log(ratios)))):.3f}x; range "
        f"{min(ratios):.3f}-{max(ratios):.3f}x; faster in {sum(x > 1 for x in ratios)} of {len(rows)}.",
        "",
        f"| case | {first} (us) | {second} (us) | {second}'s speed vs {first} |",
        "|---|---:|---:|---:|",
    ]
    for r in rows:
        a_us, b_us, speed = r[f"{first}_us"], r[f"{second}_us"], r[f"{second}_speed_vs_{first}"]
        lines.append(f"| {r['case']} | {a_us:.1f} | {b_us:.1f} | {speed:.3f}x |")
    write_summary(out, lines, echo=True)


def arguments(prog: str, doc: str | None, argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=f"python -m {prog}", description=doc)
    ap.add_argument("--kernels", nargs="*", default=KERNELS, help="DietCode scores micro-kernel keys")
    ap.add_argument("--t", nargs="+", type=int, default=[16, 49, 64, 96, 100, 128])
    ap.add_argument("--logs", nargs="*", default=LOGS, help="template tuning logs; each task's best config")
    ap.add_argument("--tasks", type=int, default=4, help="tasks per log (first in the log's order)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--out", required=True)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = arguments("benchmarks.accumulator_scope_probe", __doc__, argv)
    cases = [*dietcode_cases(args.kernels, args.t), *template_cases(args.logs, args.tasks)]
    rows, meta, gate = gated_run("benchmarks.accumulator_scope_probe", argv, lambda: probe(cases, args.rounds))
    title = 'Register tiles\' accumulators in the "local" scope against "global", in turns'
    write(args.out, rows, meta, gate, title, args.rounds, SCOPES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
