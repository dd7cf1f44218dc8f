"""RPCRunner on a loopback fleet (a tracker and two CPU servers on 127.0.0.1): the local runner's error kinds
over RPC, candidates spread over both servers, and a tuning run that loses a server mid-batch and still ends
with every candidate recorded and a correct best config."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
import tvm
from fixture_templates import MODES

import adatune
from adatune.measure import BuildResult, MeasureErrorNo, MeasureInput, RPCRunner
from adatune.measure.rpc_fleet import LoopbackFleet
from adatune.records import load_from_file
from adatune.tuners import RandomTuner

pytest.importorskip("tornado", reason="tvm's RPC tracker needs tornado (dev extra)")

RUN_TIMEOUT_S = 4.0


@pytest.fixture(scope="module")
def fleet() -> Iterator[LoopbackFleet]:
    with LoopbackFleet(n_servers=2, key="adatune-test-cpu", start_timeout=150) as f:
        yield f


@pytest.fixture(scope="module")
def runner(fleet: LoopbackFleet) -> Iterator[RPCRunner]:
    """One runner (its two worker processes start once) with the adaptive evaluator and the correctness check."""
    r = RPCRunner(
        fleet.key,
        fleet.host,
        fleet.port,
        timeout=RUN_TIMEOUT_S,
        number=100,
        repeat=20,
        min_converge_coef=0.02,
        micro_batch=100,
        check_correctness=True,
    )
    yield r
    r.close()


@pytest.fixture(scope="module")
def option(runner: RPCRunner) -> Iterator[adatune.measure.MeasureOption]:
    """Builder and runner shared by the tests below (each pool pays `import tvm` once)."""
    opt = adatune.measure_option(adatune.LocalBuilder(timeout=10, n_parallel=1), runner)
    yield opt
    opt.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="key"):
        RPCRunner("")
    with pytest.raises(ValueError, match="port"):
        RPCRunner("k", port=70000)
    with pytest.raises(ValueError, match="n_parallel"):
        RPCRunner("k", n_parallel=0)
    with pytest.raises(ValueError, match="min_converge_coef"):
        RPCRunner("k", min_converge_coef=-1.0)


@pytest.mark.parametrize(
    "err, lost",
    [
        # TVM 0.27's local endpoint raises a closed channel as a plain InternalError; these are its words
        # (the first seen in CI when a server was killed between two messages of a copy)
        (
            tvm.error.InternalError(
                "Check failed: (HandleUntilReturnEvent(true, [](ffi::PackedArgs) {}) == RPCCode::kReturn) is false: "
            ),
            True,
        ),
        (tvm.error.InternalError("Check failed: (code == RPCCode::kReturn) is false: code=kShutdown"), True),
        (tvm.error.InternalError("Socket SockChannel::Send Error:Broken pipe"), True),
        (tvm.error.InternalError("Channel closes before we get needed bytes"), True),
        (tvm.error.RPCSessionTimeoutError("session timed out"), True),  # the server ended it
        (ConnectionResetError("Connection reset by peer"), True),
        # raised on the server by a live session: the kernel's or the loader's own error, whatever its words
        (tvm.error.RPCError("Error caught from RPC call:\nInvalid compute.shape[0] on argument #1"), False),
        (tvm.error.RPCError("Error caught from RPC call:\nSocket address in the kernel's message"), False),
        (tvm.error.InternalError("Check failed: (n_dims == 2) is false: wrong rank"), False),
        (RuntimeError("Socket"), False),  # not TVM's RPC error type: never read by its words
    ],
)
def test_a_dead_session_is_told_by_tvm_error_types(err: Exception, lost: bool) -> None:
    from adatune.measure._remote import is_session_lost

    assert is_session_lost(err) is lost


def test_no_tracker_or_no_server_of_the_key_fails_fast(fleet: LoopbackFleet, matmul_task) -> None:
    inp = MeasureInput(matmul_task, matmul_task.config_space.get(0))
    build = BuildResult(b"never loaded", time_cost=0.5)
    res = RPCRunner("no-such-key", fleet.host, fleet.port).run([inp], [build])[0]
    assert res.error_no == MeasureErrorNo.RUNTIME_DEVICE
    assert "no-such-key" in res.error_msg and fleet.key in res.error_msg
    assert res.build_time == 0.5
    res = RPCRunner(fleet.key, "127.0.0.1", _free_port()).run([inp], [build])[0]
    assert res.error_no == MeasureErrorNo.RUNTIME_DEVICE and "cannot reach the RPC tracker" in res.error_msg


def test_error_kinds_match_the_local_runner(option: adatune.measure.MeasureOption, runner: RPCRunner) -> None:
    """ok / wrong answer / hang over RPC (a crashing kernel takes a TVM rpc_server out of the fleet, so it is
    not measured here: that is what the server-loss test checks)."""
    task = adatune.task.create("test/faulty", (64,), adatune.target.host())
    modes = ["ok", "wrong", "hang", "build_fail"]
    batch = option.measure([MeasureInput(task, task.config_space.get(MODES.index(m))) for m in modes])
    kinds = dict(zip(modes, (r.error_no for r in batch.results)))
    assert kinds == {
        "ok": MeasureErrorNo.NO_ERROR,
        "wrong": MeasureErrorNo.WRONG_ANSWER,
        "hang": MeasureErrorNo.RUN_TIMEOUT,
        "build_fail": MeasureErrorNo.COMPILE_HOST,
    }, [r.error_msg[:200] for r in batch.results]
    ok, wrong, hang = batch.results[0], batch.results[1], batch.results[2]
    assert ok.costs and ok.cv is not None and ok.runs <= runner.eval_config.cap_runs
    assert "differs from the reference" in wrong.error_msg
    assert f"{RUN_TIMEOUT_S:g} s" in hang.error_msg
    assert all(r.extra["rpc_server"].startswith("127.0.0.1:") for r in batch.results[:3])


def _output_matches_numpy(task: adatune.task.TuningTask, candidate: object) -> bool:
    """Build the candidate here and compare its output with numpy's A @ B."""
    lib = tvm.tirx.build(task.scheduled_module(candidate), task.target)
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, task.arg_specs[0].shape).astype("float32")
    b = rng.uniform(-1, 1, task.arg_specs[1].shape).astype("float32")
    args = [tvm.runtime.tensor(x) for x in (a, b, np.zeros(task.arg_specs[2].shape, "float32"))]
    lib["main"](*args)
    return bool(np.allclose(args[2].numpy(), a @ b, rtol=1e-4, atol=1e-4))


def _has_loaded_a_candidate(pid: int) -> bool:
    """Whether a server's session process has a candidate's library loaded: its connection is made and the
    check and the timing (at least ~15 ms here) come next. A kill as soon as the session appears could land
    in the connection instead, which the worker retries on the other server, losing nothing to record."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return "candidate" in f.read()
    except OSError:  # the session ended meanwhile
        return False


def test_tuning_survives_a_server_killed_mid_run(
    fleet: LoopbackFleet, option: adatune.measure.MeasureOption, tmp_path
) -> None:
    """Runs last: it kills server 0 while that server is measuring a candidate of the second batch.

    128^3 rather than a smaller GEMM: the kill must land inside one candidate's measurement (at least three
    micro-batches of 100 runs, ~60 ms here); with 64^3 (~8 ms) a killer thread delayed by a loaded CI machine
    killed the server after its candidate had finished, and nothing was lost to record. The killer waits for
    the candidate's library to be loaded on the server (see ``_has_loaded_a_candidate``)."""
    task = adatune.task.create("dense.x86", (128, 128, 128, "float32"), adatune.target.host())
    victim = fleet.server_address(0)
    killed = threading.Event()
    batches: list[list[str]] = []

    def kill_when_serving() -> None:
        before = fleet.sessions(0)  # a session of the first batch may still be closing
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if any(_has_loaded_a_candidate(pid) for pid in fleet.sessions(0) - before):
                fleet.kill_server(0)
                killed.set()
                return
            time.sleep(0.002)

    killer = threading.Thread(target=kill_when_serving, daemon=True)

    def after_batch(tuner: object, inputs: object, results: list) -> None:
        batches.append([r.extra.get("rpc_server", "") for r in results])
        if len(batches) == 1:  # the first batch ran on both servers; lose one during the second
            killer.start()

    log = str(tmp_path / "rpc.jsonl")
    tuner = RandomTuner(task, seed=0)
    t0 = time.monotonic()
    tuner.tune(
        n_trial=12, measure_option=option, batch_size=4, callbacks=[after_batch, adatune.callback.log_to_file(log)]
    )
    killer.join(timeout=5)
    assert time.monotonic() - t0 < 300, "tuning hung"
    assert killed.is_set(), "server 0 never took a candidate of the second batch"

    records = list(load_from_file(log))
    assert len(records) == 12 and len({r.key for r in records}) == 12  # none lost
    assert set(batches[0]) == {victim, fleet.server_address(1)}  # spread over both servers
    failed = [r.result for r in records if r.result.error_no != MeasureErrorNo.NO_ERROR]
    on_victim = [res for res in failed if res.extra.get("rpc_server", victim) == victim]
    assert on_victim, "the killed server's in-flight candidate was not recorded as an error"
    for res in failed:
        # the loss surfaces as a dead session (RUNTIME_DEVICE) or, when the worker is still waiting on the dead
        # socket, as the worker's own deadline (RUN_TIMEOUT); on a starved machine a candidate of the surviving
        # server may also run past its deadline (RUN_TIMEOUT), never as a lost server
        assert res.error_no in (MeasureErrorNo.RUNTIME_DEVICE, MeasureErrorNo.RUN_TIMEOUT), res.error_msg
        if res.error_no == MeasureErrorNo.RUNTIME_DEVICE:
            assert res.extra.get("rpc_server", victim) == victim and "lost RPC server" in res.error_msg
    assert set(batches[2]) == {fleet.server_address(1)}  # the rest ran on the server still alive
    ok = [r.result for r in records if r.result.ok]
    assert ok and all(r.cv is not None and r.runs <= 2000 for r in ok)
    assert tuner.best_config is not None and tuner.best_flops > 0
    assert _output_matches_numpy(task, tuner.best_config)
