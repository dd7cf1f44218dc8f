"""Command-line functions for whole models, for ``adatune/cli.py`` to wire as ``tune-model``, ``model-tasks`` and
``compile-model``. Each takes parsed ``argparse`` arguments and returns an exit status."""

from __future__ import annotations

import argparse
import sys

from ._build import build
from ._extract import extract_tasks, format_task_table, model_tasks
from ._frontend import Model, from_onnx, load_builtin
from ._latency import LatencyTable, latency_table
from ._scheduler import STRATEGIES, tune_model
from ._winograd import describe_tiles
from ._zoo import BUILTIN_MODELS

__all__ = [
    "add_model_arguments",
    "add_tune_arguments",
    "add_compile_arguments",
    "parse_budget",
    "load_model",
    "model_tasks_main",
    "tune_model_main",
    "compile_model_main",
]


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help=f"built-in ({', '.join(BUILTIN_MODELS)}) or a path to an .onnx file")
    parser.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=D0,D1,...",
        help="static shape of an ONNX input (repeatable)",
    )
    parser.add_argument(
        "--conv-layout",
        default="NCHW",
        metavar="NCHW|NCHW<b>c|auto",
        help="convolutions in the model's NCHW or channel-blocked (NCHW8c; auto: the SIMD width), kernels blocked once",
    )
    parser.add_argument(
        "--winograd",
        action="store_true",
        help=f"3x3 stride-1 NCHW convolutions as Winograd, {describe_tiles()}, kernels transformed once",
    )


def add_tune_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--log", required=True, help="records log (appended; an existing one resumes)")
    parser.add_argument(
        "--budget",
        default=None,
        metavar="N|DURATION",
        help="one budget: trials over all tasks (2000) or wall-clock of this run (90s, 30m, 1.5h)",
    )
    parser.add_argument("--n-trial", type=int, default=None, help="total trials over all tasks")
    parser.add_argument("--time-budget", type=float, default=None, help="seconds for this run")
    parser.add_argument("--strategy", choices=STRATEGIES, default="gradient")
    parser.add_argument("--tuner", default="xgb", help="tuner of knob tasks (any registered tuner)")
    parser.add_argument("--trace-cost-model", default="xgb", choices=("xgb", "rfei"))
    parser.add_argument(
        "--no-templates",
        action="store_true",
        help="every task by trace search, the knob templates unused (compile applies the log either way)",
    )
    parser.add_argument("--round-trials", type=int, default=8)
    parser.add_argument(
        "--confirm",
        type=int,
        default=0,
        metavar="N",
        help="after the budget, re-time each task's N fastest candidates in turns and keep the fastest by their "
        "median (0: off; the best of single noisy readings is biased low)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cache",
        default=None,
        metavar="DIR",
        help="a tuning cache shared across models and runs: its records start the log, workloads it holds are not "
        "measured again, new records go to it (adatune cache ls|show|prune)",
    )
    parser.add_argument(
        "--transfer", action="store_true", help="with --cache: XGB tuners also learn from other workloads' records"
    )


def add_compile_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--log", default=None, help="records log (none: every task gets its fallback schedule)")
    parser.add_argument("-o", "--output", required=True, help="the deployable shared library to write")
    parser.add_argument(
        "--bench", action="store_true", help="then print its latency beside PyTorch's and onnxruntime's, measured now"
    )
    parser.add_argument("--bench-repeats", type=int, default=30, help="timed inferences per engine for --bench")


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_budget(text: str) -> tuple[int | None, float | None]:
    """``--budget``: a trial count (``2000``) or a duration (``90s``, ``30m``, ``1.5h``) -> (n_trial, seconds)."""
    value = text.strip().lower()
    try:
        if value[-1:] in _UNITS:
            seconds = float(value[:-1]) * _UNITS[value[-1]]
            if seconds > 0:
                return None, seconds
        elif int(value) > 0:
            return int(value), None
    except ValueError:
        pass
    raise ValueError(f"--budget wants a positive trial count (2000) or a duration (90s, 30m, 1.5h), got {text!r}")


def load_model(args: argparse.Namespace) -> Model:
    """The model named on the command line (ValueError with the reason when it cannot be loaded)."""
    layout, winograd = getattr(args, "conv_layout", "NCHW"), bool(getattr(args, "winograd", False))
    if args.model in BUILTIN_MODELS:
        return load_builtin(args.model, conv_layout=layout, winograd=winograd)
    shapes = {}
    for item in args.shape:
        name, _, dims = item.partition("=")
        if not name or not dims:
            raise ValueError(f"--shape wants NAME=D0,D1,..., got {item!r}")
        shapes[name] = [int(d) for d in dims.split(",")]
    return from_onnx(args.model, shapes, conv_layout=layout, winograd=winograd)


def model_tasks_main(args: argparse.Namespace) -> int:
    print(format_task_table(model_tasks(load_model(args))))
    return 0


def tune_model_main(args: argparse.Namespace) -> int:
    n_trial, time_budget = args.n_trial, args.time_budget
    if args.budget is not None:
        if n_trial is not None or time_budget is not None:
            raise ValueError("give --budget or --n-trial/--time-budget, not both")
        n_trial, time_budget = parse_budget(args.budget)
    if n_trial is None and time_budget is None:
        raise ValueError("give a budget: --budget 2000, --budget 30m, --n-trial or --time-budget")
    if args.confirm < 0:
        raise ValueError(f"--confirm must be >= 0 (0: off), got {args.confirm}")
    model = load_model(args)
    summary = tune_model(
        model,
        args.log,
        n_trial=n_trial,
        time_budget=time_budget,
        strategy=args.strategy,
        tuner=args.tuner,
        trace_cost_model=args.trace_cost_model,
        round_trials=args.round_trials,
        seed=args.seed,
        confirm=args.confirm,
        tasks=extract_tasks(model, templates=False) if args.no_templates else None,
        cache=args.cache,
        transfer=args.transfer,
    )
    est = summary.estimated_latency
    print(
        f"{sum(summary.trials)} trials; estimated latency "
        + (f"{est * 1e3:.3f} ms" if est is not None else "n/a (some tasks have no valid measurement)")
    )
    return 0


def compile_model_main(args: argparse.Namespace) -> int:
    if args.bench_repeats < 1:
        raise ValueError(f"--bench-repeats must be positive, got {args.bench_repeats}")
    compiled = build(load_model(args), args.log)
    print(compiled.export_library(args.output))
    if args.bench:
        print(format_latency_table(latency_table(compiled, repeats=args.bench_repeats), args.bench_repeats))
    return 0


def format_latency_table(table: LatencyTable, repeats: int) -> str:
    """``compile-model --bench``'s lines: each engine's median and adatune's speed-up over it, or why it could not
    run the model."""
    ours, lines = table["adatune"], []
    for engine, seconds in table.items():
        if seconds is None:
            lines.append(f"{engine:>12}: n/a ({table.unavailable.get(engine, 'the model cannot run there')})")
        else:
            ratio = "" if engine == "adatune" or not ours else f"  (adatune is {seconds / ours:.2f}x faster)"
            lines.append(f"{engine:>12}: {seconds * 1e3:9.3f} ms median of {repeats}{ratio}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m adatune.models.cli``) with the three subcommands."""
    parser = argparse.ArgumentParser(prog="adatune-models")
    sub = parser.add_subparsers(dest="cmd", required=True)
    add_tune_arguments(sub.add_parser("tune-model", help="tune every task of a model under one budget"))
    add_model_arguments(sub.add_parser("model-tasks", help="the model's task table"))
    add_compile_arguments(sub.add_parser("compile-model", help="compile with the best records into one .so"))
    args = parser.parse_args(argv)
    try:
        return {"tune-model": tune_model_main, "model-tasks": model_tasks_main, "compile-model": compile_model_main}[
            args.cmd
        ](args)
    except ValueError as err:
        print(f"adatune: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
