"""The remote side of ``RPCRunner``: a local worker holds a free server, uploads the library, checks and times it
there with ``LocalRunner``'s code and returns a typed ``RunOutcome``; a dead session (server killed, connection
broken) is told apart from the kernel's own errors by TVM's error types."""

from __future__ import annotations

import time
import traceback

from tvm.error import InternalError, RPCError, RPCSessionTimeoutError

from . import _worker
from ._config import RunnerConfig
from ._tracker import Tracker, request_session
from ._types import MeasureErrorNo, RunOutcome, RunRequest

__all__ = ["measure_remote", "is_session_lost"]

#: How TVM 0.27's local RPC endpoint words a closed channel, raised as a plain ``InternalError`` with no type of its own
#: (so only that type's messages are read): a socket error, an EOF, "Channel closes before we get needed bytes", or, for
#: a channel closed cleanly between two messages, a failed check that the reply to a call or a copy was a return
#: (``code=kShutdown``, ``HandleUntilReturnEvent(...) == RPCCode::kReturn`` in rpc_endpoint.cc).
_CLOSED_CHANNEL_MARKS = (
    "kShutdown",
    "SockChannel",
    "Socket",
    "onnection",
    "EOF",
    "Channel closes",
    "HandleUntilReturnEvent",
)


def is_session_lost(err: BaseException) -> bool:
    """Whether ``err`` means the RPC session ended under a call: its server died (a crashing kernel takes a TVM
    rpc_server down with it, as a kill or power-off would), ended it (``RPCSessionTimeoutError``) or the connection
    broke. Any other ``RPCError`` came from a live session: the kernel's or the loader's own error."""
    if isinstance(err, RPCSessionTimeoutError):
        return True
    if isinstance(err, RPCError):
        return False
    if isinstance(err, (OSError, EOFError)):
        return True
    return isinstance(err, InternalError) and any(mark in str(err) for mark in _CLOSED_CHANNEL_MARKS)


def measure_remote(tracker: Tracker, wait_limit: float, req: RunRequest, config: RunnerConfig) -> RunOutcome:
    """Runs in a local worker process: get a server (waiting at most ``wait_limit`` s), upload, load, check and time one
    candidate there. ``extra``: ``rpc_server``, ``rpc_wait`` (seconds until a server was named) and ``rpc_stages``
    (seconds per stage); ``seconds`` runs from holding the server to the result."""
    t_wait = time.perf_counter()
    try:
        sess, server, connect = request_session(tracker, config.timeout, wait_limit)
    except Exception as err:  # noqa: BLE001
        return RunOutcome(
            MeasureErrorNo.RUNTIME_DEVICE, f"no RPC server for key {tracker.key!r} at tracker {tracker}: {err}"
        )
    t_stage = time.perf_counter()
    t0 = t_stage - connect  # the server is held from the connection on
    stages: dict[str, float] = {"connect": round(connect, 6)}
    extra = {"rpc_server": server, "rpc_wait": round(t0 - t_wait, 6), "rpc_stages": stages}

    def stage_done(name: str) -> None:
        nonlocal t_stage
        stages[name], t_stage = round(time.perf_counter() - t_stage, 6), time.perf_counter()

    stage = "uploading the library to"
    try:
        name = f"candidate{req.suffix}"
        sess.upload(bytearray(req.artifact), name)
        stage_done("upload")
        stage = "loading the library on"
        module = sess.load_module(name)
        stage_done("load")
        stage = "running on"
        dev = sess.device(req.device_type, 0)
        if not dev.exist:
            msg = f"server {server} (key {tracker.key!r}) has no {req.device_type}"
            out = RunOutcome(MeasureErrorNo.RUNTIME_DEVICE, msg)
        else:
            out = _worker.check_and_time(module, dev, req, config, f" on {server}", stage_done)
            stage_done("evaluate")
    except Exception as err:  # noqa: BLE001 - every remote failure is a result
        out = _remote_error(err, stage, server, tracker.key, time.perf_counter() - t0, config.timeout)
    out.seconds, out.extra = time.perf_counter() - t0, {**extra, **out.extra}
    time.sleep(config.cooldown_interval)  # the server rests before its next candidate
    return out


def _remote_error(err: Exception, stage: str, server: str, key: str, elapsed: float, timeout: float) -> RunOutcome:
    text = f"{type(err).__name__}: {err}"
    # a session that "times out" well before its timeout was cut off by its server dying, not by the kernel
    if isinstance(err, RPCSessionTimeoutError) and elapsed >= 0.9 * timeout:
        return RunOutcome(MeasureErrorNo.RUN_TIMEOUT, f"run did not finish within {timeout:g} s on {server}")
    if is_session_lost(err):
        lost = f"lost RPC server {server} (key {key!r}) while {stage} it (the server or its session died): {text}"
        return RunOutcome(MeasureErrorNo.RUNTIME_DEVICE, lost)
    if stage == "loading the library on":
        return RunOutcome(MeasureErrorNo.COMPILE_HOST, f"loading the library on {server} failed: {text}")
    return RunOutcome(MeasureErrorNo.RUNTIME_DEVICE, f"{text} on {server}\n{traceback.format_exc()}")
