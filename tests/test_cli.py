"""The command line: workload specs, tuner options, one-line usage errors that write nothing, and a real
(tiny) tuning run whose log ``adatune best`` reads and a second run resumes."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

import adatune
from adatune.cli import _describe, main
from adatune.templates import workloads
from adatune.tuners import TUNER_NAMES
from adatune.tuners._registry import tuner_specs

TINY = "dense:M=16,N=16,K=16"


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err and err.startswith("adatune")
    return err.strip()


# -- workload specs -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, builtin",
    [
        ("dense:M=128,N=3072,K=768", "dense-bert-ffn1"),
        ("dense:M=128,N=768,K=3072", "dense-bert-ffn2"),
        ("batch_matmul:B=12,M=128,N=128,K=64,layout=NT", "bmm-bert-nt"),
        ("batch_matmul:B=12,M=128,N=64,K=128", "bmm-bert-av"),
        ("conv2d:N=1,CI=64,H=56,W=56,CO=64,KH=3,KW=3,stride=1,pad=1", "conv2d-resnet18-L2"),
        ("conv2d_nchw:N=1,CI=3,H=224,W=224,CO=64,KH=7,KW=7,stride=2,pad=3,dtype=float32", "conv2d-resnet18-L1"),
    ],
)
def test_spec_describes_the_same_operator_as_the_builtin(spec: str, builtin: str) -> None:
    w, ref = workloads.get(spec), workloads.get(builtin)
    assert (w.op, w.args, w.flop) == (ref.op, ref.args, ref.flop)
    assert workloads.get(w.name) == w  # the canonical name parses back to the same workload


def test_spec_canonical_names_and_options() -> None:
    w = workloads.get(" dense: K=16 , N=8, M=4 ")
    assert w.name == "dense:M=4,N=8,K=16" and w.args == (4, 16, 8, "float32") and w.flop == 2 * 4 * 8 * 16
    assert workloads.get("dense:M=4,N=8,K=16,dtype=float64").args[-1] == "float64"
    assert workloads.get("batch_matmul:B=2,M=3,N=4,K=5").args == (2, 3, 4, 5, "NN", "float32")
    small = workloads.get("conv2d:N=1,CI=128,H=28,W=28,CO=128,KH=3,KW=3,stride=1,pad=1,space=small")
    assert small.space == "small" and not small.cuda and small.name.endswith(",space=small")
    assert small.args == workloads.get("conv2d-resnet18-L6-small").args
    assert "[12,128,64] @ [12,128,64]^T" in workloads.get("batch_matmul:B=12,M=128,N=128,K=64,layout=NT").description


@pytest.mark.parametrize(
    "spec, message",
    [
        ("matmul:M=1,N=1,K=1", "unknown operator 'matmul'; use dense, batch_matmul, conv2d"),
        ("dense:M=1,N=2", "missing K (format: dense:M=128,N=3072,K=768)"),
        ("dense:", "'' is not key=value"),
        ("dense:M=1,N=2,K", "'K' is not key=value"),
        ("dense:M=1,N=2,K=0", "K=0 must be a positive integer"),
        ("dense:M=1,N=2,K=2.5", "K=2.5 must be a positive integer"),
        ("dense:M=1,N=2,K=3,B=4", "unknown key 'B' for dense; keys: M, N, K, dtype"),
        ("dense:M=1,M=2,N=2,K=3", "M is given twice"),
        ("dense:M=1,N=2,K=3,dtype=int8", "dtype=int8 must be one of float16, float32, float64"),
        ("batch_matmul:B=1,M=1,N=1,K=1,layout=TN", "layout=TN must be one of NN, NT"),
        ("conv2d:N=1,CI=1,H=2,W=2,CO=1,KH=5,KW=5,stride=1,pad=0", "a 5x5 kernel does not fit the 2x2 input"),
        ("conv2d:N=1,CI=1,H=8,W=8,CO=1,KH=1,KW=1,stride=1,pad=-1", "pad=-1 must be a non-negative integer"),
    ],
)
def test_bad_specs_are_named(spec: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        workloads.get(spec)
    assert message in str(err.value) and repr(spec) in str(err.value)


def test_unknown_name_is_a_key_error_with_a_plain_message() -> None:
    with pytest.raises(KeyError) as err:
        workloads.get("dense-2048")
    assert str(err.value).startswith("unknown workload 'dense-2048': use a built-in name (dense-1024")


# -- listing and help -----------------------------------------------------------------------------------------
def test_workloads_lists_builtins_and_spec_formats(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workloads"]) == 0
    out = capsys.readouterr().out
    for name in ("dense-1024", "bmm-bert-nt", "conv2d-resnet18-L6", *workloads.SPEC_FORMATS.values()):
        assert name in out


@pytest.mark.parametrize("argv", [["--help"], ["tune", "--help"]])
def test_help_lists_every_tuner_and_option(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    out = capsys.readouterr().out
    for spec in tuner_specs():
        assert f"\n  {spec.name} " in out
        for opt in spec.options:
            assert f"{opt.name}={opt.type_name()} (default" in out
    assert "dense:M=128,N=3072,K=768" in out


def test_tuners_markdown_has_a_row_per_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tuners", "--markdown"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == sum(max(1, len(s.options)) for s in tuner_specs())
    assert all(line.replace("\\|", "").count("|") == 7 for line in rows)  # escaped pipes keep 6 cells
    assert [line.split("`")[1] for line in rows if line.startswith("| `")] == list(TUNER_NAMES)


# -- usage errors: one line, exit 2, nothing written ----------------------------------------------------------
@pytest.mark.parametrize(
    "extra, message",
    [
        (["--workload", "nope"], "adatune tune: unknown workload 'nope'"),
        (["--workload", "dense:M=1,N=2"], "missing K"),
        (["--workload", "dense:M=1,N=2,K=x"], "K=x must be a positive integer"),
        (["--workload", TINY, "--tuner", "annealing"], "unknown tuner 'annealing': choose from xgb, xgb-rank"),
        (["--workload", TINY, "-o", "bogus=1"], "unknown option 'bogus' for tuner 'xgb': valid options: plan_size"),
        (["--workload", TINY, "-o", "n_trees=5"], "unknown option 'n_trees' for tuner 'xgb'"),
        (["--workload", TINY, "--tuner", "rfei", "--option", "n_trees=many"], "option n_trees=many: expected int"),
        (["--workload", TINY, "--tuner", "rfei", "-o", "contextual=maybe"], "contextual=maybe: expected true|false"),
        (["--workload", TINY, "-o", "plan_size"], "argument -o/--option: expected KEY=VALUE, got 'plan_size'"),
        (["--workload", TINY, "-o", "plan_size=4", "-o", "plan_size=8"], "option plan_size is given twice"),
        (["--workload", TINY, "--tuner", "release", "-o", "cost_model=xgb"], "expected a Python object"),
        (["--workload", TINY, "--trials", "0"], "argument --trials: must be a positive integer, got '0'"),
        (["--workload", TINY, "--trials", "-3"], "argument --trials: must be a positive integer, got '-3'"),
        (["--workload", TINY, "--trials", "ten"], "argument --trials: must be a positive integer, got 'ten'"),
        (["--workload", TINY, "--target", "gpu"], "unknown target 'gpu': use llvm (this CPU), cuda, or a JSON dict"),
        (["--workload", TINY, "--target", '{"kind": "nokind"}'], "target: invalid target"),
        (["--workload", TINY, "--target", "cuda", "--arch", "80"], "CUDA arch must look like 'sm_80'"),
        (["--workload", "conv2d-resnet18-L6-small", "--target", "cuda"], "is defined for CPUs only"),
        (["--workload", TINY, "--min-converge-coef", "-1"], "argument --min-converge-coef: must be a positive"),
        (["--workload", TINY, "--target", "cuda", "--device-profile", "gtx"], "unknown device profile 'gtx'"),
        ([], "the following arguments are required: --workload"),
        (["--workload", "dense-1024", "--confirm", "0"], "--confirm: must be a positive integer, got '0'"),
    ],
)
def test_tune_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    log = tmp_path / "out.jsonl"
    assert main(["tune", "--log", str(log), *extra]) == 2
    assert message in _one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []


def test_tune_log_in_a_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "no" / "out.jsonl"
    assert main(["tune", "--workload", TINY, "--log", str(log)]) == 2
    assert f"log {log}: folder {log.parent} does not exist" in _one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []


def test_tune_refuses_a_log_that_is_not_a_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "notes.txt"
    log.write_text('these are my notes\n{"v": 7}\n')
    assert main(["tune", "--workload", TINY, "--tuner", "random", "--trials", "2", "--log", str(log)]) == 2
    assert f"log {log}: not an adatune log" in _one_line_error(capsys)
    assert log.read_text() == 'these are my notes\n{"v": 7}\n'


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: d / "missing.jsonl", "no such file"),
        (lambda d: d, "is a directory"),
        (lambda d: (d / "bad.jsonl", (d / "bad.jsonl").write_bytes(b"\xff\xfe\x00garbage"))[0], "cannot read it"),
        (lambda d: (d / "bad.jsonl", (d / "bad.jsonl").write_text("[1, 2]\nnot json\n"))[0], "not an adatune log"),
    ],
)
def test_best_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], make, message: str) -> None:
    path = make(tmp_path)
    assert main(["best", str(path)]) == 2
    assert f"adatune best: log {path}: {message}" in _one_line_error(capsys)


def test_usage_error_in_a_subprocess_has_no_traceback(tmp_path: Path) -> None:
    log = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "adatune.cli", "tune", "--workload", "nope", "--trials", "1", "--log", str(log)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("adatune tune: unknown workload 'nope'") and proc.stderr.count("\n") == 1
    assert not log.exists()


# -- a real run -----------------------------------------------------------------------------------------------
def test_tune_a_spec_then_best_then_resume_with_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """8 random trials of a spec workload (outputs checked against numpy), ``best`` reads the log, then an
    xgb run with options asks for 12 and measures only the 4 that are missing."""
    log = tmp_path / "out.jsonl"
    common = [
        "tune",
        "--workload",
        TINY,
        "--log",
        str(log),
        "--number",
        "1",
        "--repeat",
        "1",
        "--check-correctness",
        "--n-parallel",
        "1",
    ]
    assert main([*common, "--tuner", "random", "--trials", "8"]) == 0
    out = capsys.readouterr().out
    assert "Task(dense.x86, args=(16, 16, 16, 'float32')" in out and "tuner: random" in out
    assert "best:" in out and "GFLOPS" in out
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 8 and all(r["task"] == ["dense.x86", [16, 16, 16, "float32"]] for r in lines)
    assert any(r["result"]["error_no"] == 0 for r in lines)

    assert main(["best", str(log)]) == 0
    best = capsys.readouterr().out
    assert best.startswith("dense.x86(16, 16, 16, 'float32') on llvm/") and "(8 records)" in best

    assert main([*common, "--tuner", "xgb", "--trials", "12", "-o", "plan_size=4", "-o", "num_threads=1"]) == 0
    out = capsys.readouterr().out
    assert "tuner: xgb plan_size=4 num_threads=1" in out and "resuming: 8 configs" in out
    keys = [json.loads(line)["key"] for line in log.read_text().splitlines()]
    assert len(keys) == 12 and len(set(keys)) == 12

    with log.open("a") as f:  # a run killed mid-write leaves a truncated line: skipped, counted on one line
        f.write('{"v": 2, "target"')
    assert main(["best", str(log)]) == 0
    captured = capsys.readouterr()
    assert "(12 records)" in captured.out
    assert "skipped 1 corrupt line(s), first" in captured.err and captured.err.count("\n") == 1


def test_best_describes_other_candidate_kinds() -> None:
    assert _describe({"kind": "knob", "index": 7, "entity": {"tile": [2, 8]}}, "7") == "config 7: {'tile': [2, 8]}"
    assert _describe({"index": 7, "entity": {}}, "7") == "config 7: {}"  # version-1 records have no kind
    assert _describe({"kind": "trace", "decisions": [1, 2]}, "a1b2") == "trace a1b2"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["model-tasks", "nope"], "adatune model-tasks: ONNX model file 'nope' does not exist"),
        (["compile-model", "missing.onnx", "-o", "out.so"], "ONNX model file 'missing.onnx' does not exist"),
        (["tune-model", "resnet18"], "the following arguments are required: --log"),
        (["tune-model", "resnet18", "--log", "r.jsonl"], "give a budget: --budget 2000, --budget 30m"),
        (["tune-model", "resnet18", "--log", "r.jsonl", "--budget", "30x"], "--budget wants a positive trial"),
        (["tune-model", "resnet18", "--log", "r.jsonl", "--budget", "5", "--n-trial", "5"], "not both"),
        (["tune-model", "resnet18", "--log", "r.jsonl", "--budget", "5", "--confirm", "-1"], "--confirm must be >= 0"),
    ],
)
def test_model_commands_usage_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in _one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []


def test_tune_model_passes_confirm_and_its_budget_to_tune_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``adatune tune-model ... --confirm 3`` reaches ``tune_model(confirm=3)``; without it, confirmation is off;
    ``--no-templates`` passes the model's table with every task on trace search."""
    import adatune.models.cli as model_cli

    seen: list[dict] = []

    def fake_tune_model(model: object, log: str, **kwargs: object) -> object:
        seen.append({"model": model, "log": log, **kwargs})
        return types.SimpleNamespace(trials=[2, 3], estimated_latency=1e-3)

    monkeypatch.setattr(model_cli, "load_model", lambda args: "the model")
    monkeypatch.setattr(model_cli, "tune_model", fake_tune_model)
    monkeypatch.setattr(model_cli, "extract_tasks", lambda model, templates=True: (model, templates))
    log = str(tmp_path / "m.jsonl")
    assert main(["tune-model", "resnet18", "--log", log, "--budget", "30m", "--confirm", "3"]) == 0
    assert main(["tune-model", "resnet18", "--log", log, "--budget", "40"]) == 0
    assert main(["tune-model", "resnet18", "--log", log, "--budget", "40", "--no-templates"]) == 0
    assert [(s["model"], s["log"], s["confirm"]) for s in seen[:2]] == [("the model", log, 3), ("the model", log, 0)]
    assert [s["tasks"] for s in seen] == [None, None, ("the model", False)]
    assert (seen[0]["n_trial"], seen[0]["time_budget"]) == (None, 1800.0)
    assert (seen[1]["n_trial"], seen[1]["time_budget"]) == (40, None)
    assert "5 trials; estimated latency 1.000 ms" in capsys.readouterr().out


def test_tune_with_confirm_logs_the_re_timings_and_best_reads_them(tmp_path: Path) -> None:
    """``--confirm 2 --confirm-rounds 2``: after 4 trials the 2 fastest are re-timed twice each; the re-timings
    are in the log, marked, and ``best_records`` returns one of them."""
    log = tmp_path / "out.jsonl"
    argv = ["tune", "--workload", TINY, "--log", str(log), "--number", "1", "--repeat", "1", "--n-parallel", "1"]
    assert main([*argv, "--tuner", "random", "--trials", "4", "--confirm", "2", "--confirm-rounds", "2"]) == 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    marked = [r for r in lines if "confirm" in r["result"].get("extra", {})]
    assert len(lines) == 8 and len(marked) == 4 and len({r["key"] for r in marked}) == 2
    picked = adatune.best_records(adatune.load_from_file(str(log)))
    assert len(picked) == 1 and "confirm" in next(iter(picked.values())).result.extra
