"""Command line: ``adatune tune``, ``best``, ``report``, ``cache``, ``workloads``, ``tuners``. Every user mistake
(unknown workload, tuner, option or target, bad trial count, unreadable log) ends in one line on stderr and exit
code 2, before anything is measured or written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

__all__ = ["UsageError", "build_parser", "main"]

USAGE_EXIT = 2


class UsageError(Exception):
    """A mistake in the command line or its inputs: reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse reports its errors as one line (no usage dump), through ``UsageError``."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _key_value(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _target(name: str, arch: str) -> Any:  # a tvm.target.Target
    from . import target

    if name == "llvm":
        return target.host()
    if name == "cuda":
        return target.cuda(arch)
    if not name.lstrip().startswith("{"):
        raise ValueError(
            f"unknown target {name!r}: use llvm (this CPU), cuda, or a JSON dict such as "
            '\'{"kind": "llvm", "mcpu": "znver3"}\''
        )
    return target.create(name)


def _read_log(path: str) -> list[Any]:
    """The records of ``path``; UsageError when it is missing, unreadable or holds no adatune record at all.
    Corrupt lines among good ones are skipped and counted in one line on stderr."""
    from .records import load_from_file

    if not os.path.isfile(path):
        raise UsageError(f"log {path}: {'is a directory' if os.path.isdir(path) else 'no such file'}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            records = list(load_from_file(path))
        except (OSError, UnicodeDecodeError) as err:
            raise UsageError(f"log {path}: cannot read it ({err.__class__.__name__}: {err})") from None
    skipped = [str(w.message) for w in caught if "corrupt record" in str(w.message)]
    if skipped and not records:
        raise UsageError(f"log {path}: not an adatune log ({skipped[0].split(': ', 1)[-1]})")
    if skipped:
        print(f"{path}: skipped {len(skipped)} corrupt line(s), first {skipped[0]}", file=sys.stderr)
    return records


def _check_log_writable(path: str) -> None:
    """The log must be appendable or creatable; checked without creating it, so a failed run leaves nothing."""
    if os.path.exists(path):
        if not os.access(path, os.W_OK):
            raise UsageError(f"log {path}: not writable")
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"log {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"log {path}: folder {folder} is not writable")


def _describe(config: dict, key: str) -> str:
    """A candidate as one line: a knob config's index and entity, else its kind and key."""
    if config.get("kind", "knob") == "knob" and "entity" in config:
        return f"config {config.get('index', key)}: {config['entity']}"
    return f"{config.get('kind', 'candidate')} {key}"


def cmd_workloads(args: argparse.Namespace) -> int:
    from .templates.workloads import SPEC_FORMATS, get, list_workloads

    for name in list_workloads():
        print(f"{name:28s} {get(name).description}")
    print("\nany other shape as a spec (dtype=float32 by default):")
    for spec in SPEC_FORMATS.values():
        print(f"  {spec}")
    return 0


def cmd_tuners(args: argparse.Namespace) -> int:
    from .tuners.docs import markdown_table, plain_text

    print(markdown_table() if args.markdown else plain_text(), end="\n" if not args.markdown else "")
    return 0


def _prepare_tune(args: argparse.Namespace) -> tuple[Any, Any, Any, list, Any]:
    """Everything ``tune`` needs, checked before anything runs: workload, target, task, tuner, history."""
    from . import measure_option
    from .measure import LocalBuilder, LocalRunner
    from .templates.workloads import get as get_workload
    from .tuners import create_tuner
    from .tuners._registry import get_tuner_spec

    options: dict[str, str] = {}
    for key, value in args.option:
        if key in options:
            raise UsageError(f"option {key} is given twice")
        options[key] = value
    try:
        args.tuner_options = get_tuner_spec(args.tuner).resolve(options)
        wl = get_workload(args.workload)
    except (KeyError, ValueError) as err:
        raise UsageError(str(err)) from None
    try:
        tgt = _target(args.target, args.arch)
    except ValueError as err:
        raise UsageError(str(err) if str(err).startswith("unknown target") else f"target: {err}") from None
    history = _read_log(args.log) if args.log and os.path.exists(args.log) else []
    if args.log:
        _check_log_writable(args.log)
    try:
        task = wl.create_task(tgt)
        tuner = create_tuner(args.tuner, task, seed=args.seed, **options)
        option = measure_option(
            LocalBuilder(timeout=args.build_timeout, n_parallel=args.n_parallel),
            LocalRunner(
                number=args.number,
                repeat=args.repeat,
                timeout=args.run_timeout,
                check_correctness=args.check_correctness,
                device_profile=args.device_profile,
            ),
            min_converge_coef=args.min_converge_coef,
        )
    except (ValueError, TypeError) as err:
        raise UsageError(str(err).splitlines()[0] if str(err) else repr(err)) from None
    return wl, task, tuner, history, option


def cmd_tune(args: argparse.Namespace) -> int:
    from . import callback

    wl, task, tuner, history, option = _prepare_tune(args)
    print(f"{task}\ntarget: {task.target}")
    print(" ".join([f"tuner: {args.tuner}"] + [f"{k}={v}" for k, v in args.tuner_options.items()]))
    resumed = tuner.load_history(history) if history else 0
    if resumed:
        print(f"resuming: {resumed} configs already measured in {args.log}; they will not be measured again")
    remaining = max(0, args.trials - resumed)
    callbacks = [callback.progress_bar(remaining, prefix=wl.name)]
    if args.log:
        callbacks.append(callback.log_to_file(args.log))
    try:
        tuner.tune(remaining, option, early_stopping=args.early_stopping, callbacks=callbacks)
        if args.confirm:  # the leaders re-timed in turns: the best of single noisy readings is biased low
            tuner.confirm(option, top=args.confirm, rounds=args.confirm_rounds, callbacks=callbacks[1:])
    finally:
        option.close()
    if tuner.best_config is None:
        print("no valid config was found", file=sys.stderr)
        return 1
    best = tuner.best_config
    print(
        f"best: {tuner.best_flops / 1e9:.1f} GFLOPS ({tuner.best_result.cost * 1e3:.3f} ms), "
        f"{_describe(best.to_json(), str(best.key))}"
    )
    print(f"trials: {len(tuner.trials)}, tuning clock: {tuner.clock:.1f} s")
    if args.reference:
        from .measure.vendor_reference import measure_reference

        for lib, gflops in measure_reference(wl).items():
            print(f"reference {lib}: {gflops:.1f} GFLOPS -> adatune reaches {tuner.best_flops / 1e9 / gflops:.2f}x")
    return 0


def cmd_best(args: argparse.Namespace) -> int:
    from .records import best_records

    recs = _read_log(args.log)
    best = best_records(recs)
    if not best:
        print(f"{args.log}: no valid record", file=sys.stderr)
        return 1
    for key, r in best.items():
        n = sum(1 for x in recs if x.workload_key == key)
        device = r.target.get("mcpu", r.target.get("arch"))
        print(
            f"{r.task_name}{tuple(r.args)} on {r.target.get('kind')}/{device}: {r.cost * 1e3:.4f} ms, "
            f"{_describe(r.config, r.key)} ({n} records)"
        )
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .records.report import report, weights_from_csv

    records = _read_log(args.log)  # a missing or unreadable log is a usage error, as for ``best``
    try:
        weights = weights_from_csv(args.weights, args.model) if args.weights else None
        rep = report(args.log, weights=weights, model=args.model, records=records)
    except (OSError, ValueError, KeyError) as err:
        raise UsageError(f"{args.log}: {err}") from None
    print(rep.text())
    if args.output:
        print(f"figure: {rep.plot(args.output)}")
    return 0


def _epilog() -> str:
    from .templates.workloads import SPEC_FORMATS
    from .tuners.docs import plain_text

    specs = "\n".join(f"  {s}" for s in SPEC_FORMATS.values())
    return (
        f"workloads: a built-in name (adatune workloads) or a spec, dtype optional (default float32):\n{specs}\n\n"
        f"{plain_text()}"
    )


def build_parser() -> argparse.ArgumentParser:
    from .tuners import TUNER_NAMES

    epilog = _epilog()
    raw = argparse.RawDescriptionHelpFormatter
    p = _Parser(
        prog="adatune", description="Auto-tune tensor programs on TVM 0.27.", epilog=epilog, formatter_class=raw
    )
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    sub.add_parser("workloads", help="list the built-in workloads").set_defaults(fn=cmd_workloads)
    tn = sub.add_parser("tuners", help="list the tuners and their options")
    tn.add_argument("--markdown", action="store_true", help="as the Markdown table of docs/tuners.md")
    tn.set_defaults(fn=cmd_tuners)
    t = sub.add_parser("tune", help="tune a built-in workload or a workload spec", epilog=epilog, formatter_class=raw)
    t.add_argument("--workload", required=True, help="built-in name or spec, e.g. dense:M=128,N=3072,K=768")
    t.add_argument("--tuner", default="xgb", help=", ".join(TUNER_NAMES))
    t.add_argument(
        "-o",
        "--option",
        type=_key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a tuner option (repeatable), e.g. -o plan_size=32; listed below",
    )
    t.add_argument("--trials", type=_positive_int, default=200)
    t.add_argument("--log", help="JSON-lines log; an existing log is resumed")
    t.add_argument("--target", default="llvm", help="llvm (this CPU), cuda, or a JSON target dict")
    t.add_argument("--arch", default="sm_80", help="CUDA arch for --target cuda")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--number", type=_positive_int, default=5)
    t.add_argument("--repeat", type=_positive_int, default=3)
    t.add_argument(
        "--min-converge-coef", type=_positive_float, default=None, help="enable AdaTune's adaptive evaluator"
    )
    t.add_argument("--check-correctness", action="store_true")
    t.add_argument("--early-stopping", type=_positive_int, default=None)
    t.add_argument(
        "--confirm",
        type=_positive_int,
        default=None,
        metavar="N",
        help="after tuning, re-time the N fastest configs in turns and keep the fastest by their median",
    )
    t.add_argument("--confirm-rounds", type=_positive_int, default=3, help="rounds of --confirm")
    t.add_argument("--n-parallel", type=_positive_int, default=2, help="build workers")
    t.add_argument("--build-timeout", type=_positive_float, default=30.0)
    t.add_argument("--run-timeout", type=_positive_float, default=10.0)
    t.add_argument("--reference", action="store_true", help="also time PyTorch/numpy on the same shape")
    t.add_argument(
        "--device-profile",
        default=None,
        help="check CUDA candidates against this GPU's per-block limits before building: h100, h200, a100, v100, t4",
    )
    t.set_defaults(fn=cmd_tune)
    b = sub.add_parser("best", help="show the best record of each workload in a log")
    b.add_argument("log")
    b.set_defaults(fn=cmd_best)
    r = sub.add_parser("report", help="best-so-far, errors and (for a model) latency of a tuning log")
    r.add_argument("log")
    r.add_argument("-o", "--output", help="write the figure to this PNG")
    r.add_argument("--weights", help="a task table (CSV with task, weight columns) making the log a model log")
    r.add_argument("--model", help="the model whose weights to use, when tasks belong to several")
    r.set_defaults(fn=cmd_report)
    c = sub.add_parser("cache", help="a tuning cache: ls (per target), show [PATTERN] (per workload), prune --keep K")
    c.add_argument("action", choices=("ls", "show", "prune"))
    c.add_argument("pattern", nargs="?", default="", help="show: only tasks whose name holds this")
    c.add_argument("--dir", default=None, help="the cache directory (default: $ADATUNE_CACHE_DIR, ~/.cache/adatune)")
    c.add_argument("--keep", type=_positive_int, default=32, help="prune: fastest valid records kept per workload")
    c.set_defaults(fn=cmd_cache)
    _add_model_commands(sub)
    return p


def cmd_cache(args: argparse.Namespace) -> int:
    from .records.cache import TuningCache

    try:
        cache = TuningCache(args.dir)
        if args.action == "prune":
            before, after = cache.prune(args.keep)
            print(f"{cache.path}: {before} records, {after} kept ({args.keep} per workload and target)")
            return 0
        entries = cache.entries()
    except (OSError, ValueError) as err:
        raise UsageError(str(err)) from None
    if not entries:
        print(f"{cache.path}: empty")
        return 0
    if args.action == "ls":
        targets: dict[str, list[Any]] = {}
        for e in entries:
            targets.setdefault(e.target, []).append(e)
        for tgt, group in targets.items():
            print(f"{_short_target(tgt)}: {len(group)} workloads, {sum(e.records for e in group)} records")
        return 0
    for e in entries:
        if args.pattern in e.task_name:
            best = f"{e.best_seconds * 1e3:.4f} ms" if e.best_seconds is not None else "no valid record"
            print(f"{_short_target(e.target)}  {e.task_name}: {best} ({e.valid}/{e.records} valid)")
    return 0


def _short_target(text: str) -> str:
    d = json.loads(text)
    return f"{d.get('kind')}/{d.get('mcpu', d.get('arch', 'generic'))}"


def _model_command(name: str) -> Callable[[argparse.Namespace], int]:
    """A whole-model command whose bad input (a ValueError naming it) becomes a usage error."""

    def run(args: argparse.Namespace) -> int:
        from .models import cli as model_cli

        try:
            return int(getattr(model_cli, name)(args))
        except (ValueError, FileNotFoundError) as err:
            raise UsageError(str(err).splitlines()[0] if str(err) else repr(err)) from None

    return run


def _add_model_commands(sub: Any) -> None:
    from .models import cli as model_cli

    tm = sub.add_parser("tune-model", help="tune every task of a model (resnet18, bert-base, .onnx) under one budget")
    model_cli.add_tune_arguments(tm)
    tm.set_defaults(fn=_model_command("tune_model_main"))
    mt = sub.add_parser("model-tasks", help="a model's task table (weight, FLOPs, space kind)")
    model_cli.add_model_arguments(mt)
    mt.set_defaults(fn=_model_command("model_tasks_main"))
    cm = sub.add_parser("compile-model", help="compile a model with its best records into one .so")
    model_cli.add_compile_arguments(cm)
    cm.set_defaults(fn=_model_command("compile_model_main"))


def main(argv: Sequence[str] | None = None) -> int:
    command = "adatune"
    try:
        args = build_parser().parse_args(argv)
        command = f"adatune {args.cmd}"
        return int(args.fn(args))
    except UsageError as err:
        message = " ".join(str(err).split())  # one line, whatever the message held
        print(message if message.startswith("adatune") else f"{command}: {message}", file=sys.stderr)
        return USAGE_EXIT
    except KeyboardInterrupt:
        print("adatune: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
