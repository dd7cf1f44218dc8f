"""The runner contract, on real kernels that fail in real ways (``adatune.testing/faulty``): each candidate
comes back as its own result with its error kind, builds' seconds carried into the results, and the runner
keeps measuring after a crash. Public API only, so any ``Runner`` (local, RPC, yours) can be checked."""

from __future__ import annotations

from collections.abc import Sequence

from .. import target as _target
from ..measure import Builder, LocalBuilder, MeasureErrorNo, MeasureInput, Runner
from ..measure import measure_option as _measure_option
from ..task import Task, create
from ._templates import FAULTY, MODES

__all__ = ["EXPECTED_ERRORS", "check_runner"]

#: the error kind each faulty mode must be reported as (``wrong`` only when the runner checks correctness)
EXPECTED_ERRORS = {
    "ok": MeasureErrorNo.NO_ERROR,
    "build_fail": MeasureErrorNo.COMPILE_HOST,
    "crash": MeasureErrorNo.RUNTIME_DEVICE,
    "hang": MeasureErrorNo.RUN_TIMEOUT,
    "wrong": MeasureErrorNo.WRONG_ANSWER,
    "instantiate_fail": MeasureErrorNo.INSTANTIATION_ERROR,
    "slow_build": MeasureErrorNo.BUILD_TIMEOUT,
}


def check_runner(
    runner: Runner,
    builder: Builder | None = None,
    modes: Sequence[str] = ("ok", "wrong", "hang", "build_fail"),
    check_correctness: bool | None = None,
) -> None:
    """Measure one faulty-kernel candidate per mode (``MODES``; ``hang`` costs the runner's timeout) in one
    batch and check each result. ``check_correctness`` says whether a wrong answer must be caught (default:
    the runner's ``config.check_correctness``). With ``"crash"`` among the modes, an ``ok`` candidate
    measured after the batch must still be timed (the runner recovers). The runner is left open."""
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"unknown faulty modes {unknown}: choose from {MODES}")
    if check_correctness is None:
        check_correctness = bool(getattr(getattr(runner, "config", None), "check_correctness", False))
    task = create(FAULTY, (64,), _target.host())
    assert isinstance(task, Task)
    inputs = [MeasureInput(task, task.config_space.get(MODES.index(m))) for m in modes]
    own_builder = builder is None
    option = _measure_option(builder if builder is not None else LocalBuilder(n_parallel=1), runner)
    try:
        batch = option.measure(inputs)
        assert len(batch.results) == len(inputs), f"{len(inputs)} candidates measured, {len(batch.results)} results"
        for mode, res in zip(modes, batch.results):
            want = EXPECTED_ERRORS[mode]
            if mode == "wrong" and not check_correctness:
                want = MeasureErrorNo.NO_ERROR
            assert res.error_no == want, (
                f"candidate {mode!r}: {res.error_no.name}, expected {want.name} ({res.error_msg[:300]!r})"
            )
            assert res.all_cost > 0, f"candidate {mode!r} cost the tuner no time (all_cost={res.all_cost})"
            if want == MeasureErrorNo.NO_ERROR:
                assert res.costs and all(c > 0 for c in res.costs), f"candidate {mode!r} timed as {res.costs}"
                assert res.error_msg == "", f"candidate {mode!r} succeeded with a message: {res.error_msg[:200]!r}"
            else:
                assert res.error_msg, f"candidate {mode!r} failed ({res.error_no.name}) without saying why"
            if mode not in ("instantiate_fail", "slow_build"):
                assert res.build_time > 0, f"candidate {mode!r}: its build's seconds are not carried (build_time=0)"
        if "crash" in modes:
            ok = option.measure([MeasureInput(task, task.config_space.get(MODES.index("ok")))]).results[0]
            assert ok.ok, f"after a crash the runner measured a correct kernel as {ok.error_no.name}: {ok.error_msg}"
    finally:
        if own_builder:
            option.builder.close()
