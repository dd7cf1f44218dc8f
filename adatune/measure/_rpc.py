"""``RPCRunner``: time built candidates on remote devices through a TVM RPC tracker.

A tracker (``python -m tvm.exec.rpc_tracker``) hands out the servers (``python -m tvm.exec.rpc_server
--tracker HOST:PORT --key KEY``) registered under a key. Each candidate's shared library (``BuildResult.artifact``)
is uploaded to a free server of the key, loaded, optionally checked against the reference and timed there with
the same evaluators as ``LocalRunner`` (``adatune.evaluator``). ``n_parallel`` local workers (default: one per
server of the key) each hold one server at a time, so a batch is spread over all servers in parallel.

A server that dies mid-run costs only the candidates it was running: they come back as ``RUNTIME_DEVICE``
errors naming the server, and the tracker hands the rest of the batch to the servers still alive. A kernel
that outlives ``timeout`` is ended by the server (its session timeout) and recorded as ``RUN_TIMEOUT``.
"""

from __future__ import annotations

import copy
import json
import socket
import struct
import time
import traceback
from collections.abc import Sequence
from typing import Any

from tvm.rpc import base as rpc_base
from tvm.support.popen_pool import PopenPoolExecutor

from ..devices import DeviceLimits, limits_of_tvm_device
from ..evaluator import EvaluatorConfig
from . import _worker
from ._runner import _KIND, LocalRunner, Runner, _device_type
from ._types import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult

__all__ = ["RPCRunner", "tracker_summary", "count_servers"]

#: error kinds only the RPC path has, on top of the local runner's
_RPC_KIND = {
    **_KIND,
    "server_lost": MeasureErrorNo.RUNTIME_DEVICE,
    "no_server": MeasureErrorNo.RUNTIME_DEVICE,
    "run_timeout": MeasureErrorNo.RUN_TIMEOUT,
}

#: seconds the worker gets beyond the kernel timeout and the wait for a server (connect, upload, load)
_TRANSFER_SLACK = 10.0


def _tracker_socket(host: str, port: int, timeout: float) -> socket.socket:
    """A connection to the tracker that fails within ``timeout`` (TVM's own client retries for a minute)."""
    sock = socket.create_connection((host, port), timeout=timeout)
    # small messages go out at once (Nagle's algorithm would wait for the peer's delayed ACK, ~40 ms)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.sendall(struct.pack("<i", rpc_base.RPC_TRACKER_MAGIC))
        magic = struct.unpack("<i", rpc_base.recvall(sock, 4))[0]
    except Exception:
        sock.close()
        raise
    if magic != rpc_base.RPC_TRACKER_MAGIC:
        sock.close()
        raise ConnectionError(f"{host}:{port} is not a TVM RPC tracker")
    return sock


def _ask(sock: socket.socket, message: list) -> Any:
    """One request/answer with the tracker: the request in one write, and quick ACKs for the answer (the
    tracker writes its length and its body separately, which the delayed ACK would hold back ~40 ms)."""
    body = json.dumps(message).encode("utf-8")
    sock.sendall(struct.pack("<i", len(body)) + body)
    if hasattr(socket, "TCP_QUICKACK"):  # Linux
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
    return rpc_base.recvjson(sock)


def tracker_summary(host: str, port: int, timeout: float = 5.0) -> dict:
    """The tracker's ``summary()``: free/pending counts per key and every registered server."""
    sock = _tracker_socket(host, port, timeout)
    try:
        code, value = _ask(sock, [rpc_base.TrackerCode.SUMMARY])
    finally:
        sock.close()
    if code != rpc_base.TrackerCode.SUCCESS:
        raise ConnectionError(f"tracker {host}:{port} refused a summary: {value!r}")
    return dict(value)


def count_servers(summary: dict, key: str) -> int:
    """Servers registered under ``key`` (busy or free) in a tracker summary."""
    return sum(1 for s in summary.get("server_info", []) if s.get("key") == f"server:{key}")


def _request_session(
    host: str, port: int, key: str, priority: int, session_timeout: float, wait_limit: float
) -> tuple[Any, str, float]:
    """Ask the tracker for a free server of ``key`` (waiting at most ``wait_limit`` s) and connect to it.

    Returns the session, the server's ``host:port`` and the seconds the connection took; a server that
    vanished between the tracker's answer and the connection is skipped (the tracker drops it and the
    request is repeated)."""
    from tvm import rpc

    last_err: Exception | None = None
    deadline = time.monotonic() + wait_limit
    for _ in range(3):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock = _tracker_socket(host, port, left)
        try:
            code, value = _ask(sock, [rpc_base.TrackerCode.REQUEST, key, "", priority])
        finally:
            sock.close()
        if code != rpc_base.TrackerCode.SUCCESS:
            raise ConnectionError(f"tracker {host}:{port} refused the request for key {key!r}: {value!r}")
        url, server_port, matchkey = value
        try:
            t_connect = time.perf_counter()
            sess = rpc.connect(url, server_port, matchkey, session_timeout)
            return sess, f"{url}:{server_port}", time.perf_counter() - t_connect
        except Exception as err:  # noqa: BLE001 - the server died after the tracker matched it
            last_err = err
            time.sleep(0.5)  # let the tracker see the dead server's connection close before asking again
    raise ConnectionError(f"no server of key {key!r} could be connected within {wait_limit:g} s: {last_err}")


def _is_session_lost(err: Exception) -> bool:
    """The session ended under a call: its process died (a crashing kernel takes a TVM rpc_server down with
    it, so that looks the same as a server killed or powered off) or the connection broke.

    TVM says so in several ways: a socket or connection error, an EOF, "Channel closes before we get needed
    bytes", or, when the channel closed cleanly between two messages, a failed check that the reply to a
    call or a copy was a return (``HandleUntilReturnEvent(...) == RPCCode::kReturn`` in rpc_endpoint.cc).
    """
    text = str(err)
    return any(k in text for k in _SESSION_LOST_MARKS)


_SESSION_LOST_MARKS = ("kShutdown", "Socket", "socket", "onnection", "EOF", "Channel closes", "HandleUntilReturnEvent")


def measure_remote(
    tracker: tuple[str, int, str, int],
    session_timeout: float,
    wait_limit: float,
    artifact: bytes,
    suffix: str,
    device_type: str,
    arg_specs: list,
    ref_path: str | None,
    check_correctness: bool,
    eval_cfg: EvaluatorConfig,
    rtol: float,
    atol: float,
    cooldown: float,
) -> dict:
    """Runs in a local worker process: get a server, upload, load, check and time one candidate there.

    Returns plain data: ``costs``/``runs``/``cv`` or ``error``/``msg``, plus ``server``, ``wait`` (seconds
    until the tracker named a free server), ``time`` (seconds from holding the server to the result) and
    ``stages`` (seconds spent connecting to the server, uploading, loading, preparing the arguments and the
    check, and timing)."""
    from ..evaluator import evaluate, time_fn_for

    host, port, key, priority = tracker
    t_wait = time.perf_counter()
    try:
        sess, server, connect = _request_session(host, port, key, priority, session_timeout, wait_limit)
    except Exception as err:  # noqa: BLE001
        return {"error": "no_server", "msg": f"no RPC server for key {key!r} at tracker {host}:{port}: {err}"}
    t_stage = time.perf_counter()
    t0 = t_stage - connect  # the server is held from the connection on
    stages: dict[str, float] = {"connect": connect}
    out: dict = {"server": server, "wait": t0 - t_wait, "stages": stages}
    stage = "uploading the library to"
    try:
        name = f"candidate{suffix}"
        sess.upload(bytearray(artifact), name)
        stages["upload"], t_stage = time.perf_counter() - t_stage, time.perf_counter()
        stage = "loading the library on"
        module = sess.load_module(name)
        stages["load"], t_stage = time.perf_counter() - t_stage, time.perf_counter()
        stage = "running on"
        dev = sess.device(device_type, 0)
        if not dev.exist:
            return {**out, "error": "runtime_device", "msg": f"server {server} (key {key!r}) has no {device_type}"}
        ref = _worker._load_reference(ref_path) if ref_path else {}
        args, outputs = _worker.make_arguments(arg_specs, ref, dev)
        if check_correctness and ref:
            module[module.entry_name](*args)
            dev.sync()
            mismatch = _worker.output_mismatch(args, ref, outputs, rtol, atol, where=f" on {server}")
            if mismatch:
                return {**out, "error": "wrong_answer", "msg": mismatch}
        stages["prepare"], t_stage = time.perf_counter() - t_stage, time.perf_counter()
        outcome = evaluate(time_fn_for(module, dev, args, eval_cfg.enable_cpu_cache_flush), eval_cfg)
        stages["evaluate"] = time.perf_counter() - t_stage
    except Exception as err:  # noqa: BLE001 - every remote failure is a result
        text = f"{type(err).__name__}: {err}"
        # a session that "times out" well before its timeout was cut off by its server dying, not by the kernel
        if "RPCSessionTimeoutError" in text and time.perf_counter() - t0 >= 0.9 * session_timeout:
            kind, msg = "run_timeout", f"run did not finish within {session_timeout:g} s on {server}"
        elif _is_session_lost(err) or "RPCSessionTimeoutError" in text:
            kind = "server_lost"
            msg = f"lost RPC server {server} (key {key!r}) while {stage} it (the server or its session died): {text}"
        elif stage == "loading the library on":
            kind, msg = "compile_host", f"loading the library on {server} failed: {text}"
        else:
            kind, msg = "runtime_device", f"{text} on {server}\n{traceback.format_exc()}"
        return {**out, "error": kind, "msg": msg[-4000:], "time": time.perf_counter() - t0}
    finally:
        if cooldown > 0:
            time.sleep(cooldown)  # the server rests before its next candidate
    return {**out, "costs": outcome.costs, "runs": outcome.runs, "cv": outcome.cv, "time": time.perf_counter() - t0}


class RPCRunner(Runner):
    """Measure on the servers a TVM RPC tracker at ``host:port`` holds under ``key``.

    Timing options, correctness check and tolerances are those of ``LocalRunner`` (same meaning, same
    defaults). ``priority`` is the tracker's request priority; ``timeout`` bounds one candidate's session
    on its server; ``request_timeout`` bounds the wait for a free server; ``n_parallel`` is how many
    candidates are in flight (None: one per server registered when the first batch runs).
    """

    def __init__(
        self,
        key: str,
        host: str = "127.0.0.1",
        port: int = 9190,
        priority: int = 1,
        timeout: float = 10.0,
        number: int = 5,
        repeat: int = 3,
        min_repeat_ms: float = 0.0,
        cooldown_interval: float = 0.0,
        enable_cpu_cache_flush: bool = False,
        check_correctness: bool = False,
        min_converge_coef: float | None = None,
        micro_batch: int = 50,
        min_micro_batches: int = 3,
        rtol: float | None = None,
        atol: float | None = None,
        n_parallel: int | None = None,
        request_timeout: float = 60.0,
    ):
        if not isinstance(key, str) or not key:
            raise ValueError(f"RPCRunner needs the servers' key (a non-empty string), got {key!r}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"RPCRunner port must be the tracker's TCP port (1-65535), got {port!r}")
        if n_parallel is not None and (
            isinstance(n_parallel, bool) or not isinstance(n_parallel, int) or n_parallel < 1
        ):
            raise ValueError(f"RPCRunner n_parallel must be an integer >= 1 or None, got {n_parallel!r}")
        if request_timeout <= 0:
            raise ValueError(f"RPCRunner request_timeout must be positive, got {request_timeout}")
        # the local runner owns the timing options, reference data and tolerances; its worker never starts
        self.local = LocalRunner(
            number,
            repeat,
            min_repeat_ms,
            timeout,
            cooldown_interval,
            enable_cpu_cache_flush,
            check_correctness,
            min_converge_coef,
            micro_batch,
            min_micro_batches,
            rtol,
            atol,
        )
        self.key, self.host, self.port, self.priority = key, str(host), int(port), int(priority)
        self.n_parallel = n_parallel
        self.request_timeout = float(request_timeout)
        self._pool: PopenPoolExecutor | None = None
        self._limits: dict[str, DeviceLimits | None] = {}

    @property
    def timeout(self) -> float:
        return self.local.timeout

    @property
    def eval_config(self) -> EvaluatorConfig:
        return self.local.eval_config

    def with_min_converge_coef(self, coef: float | None) -> RPCRunner:
        other = copy.copy(self)
        other.local = self.local.with_min_converge_coef(coef)
        other._pool, other._limits = None, {}
        return other

    def servers(self) -> int:
        """Servers registered under this runner's key now (ConnectionError when the tracker is unreachable)."""
        return count_servers(tracker_summary(self.host, self.port), self.key)

    def device_limits(self, target: object) -> DeviceLimits | None:
        """The limits of a CUDA device behind the key, read from one of its servers (None: no CUDA there)."""
        kind = getattr(getattr(target, "kind", None), "name", None)
        if kind != "cuda":
            return None
        if kind not in self._limits:
            try:
                sess, _, _ = _request_session(self.host, self.port, self.key, self.priority, 30.0, self.request_timeout)
                dev = sess.cuda(0)
                self._limits[kind] = limits_of_tvm_device(dev) if dev.exist else None
            except Exception:  # noqa: BLE001 - no server reachable: the builder checks nothing
                self._limits[kind] = None
        return self._limits[kind]

    def _ensure_pool(self) -> PopenPoolExecutor:
        if self._pool is None:
            workers = self.n_parallel or max(1, self.servers())
            # a worker may wait for a server, then runs one candidate, then the server may rest
            limit = self.request_timeout + self.timeout + self.local.cooldown_interval + _TRANSFER_SLACK
            self._pool = PopenPoolExecutor(max_workers=workers, timeout=limit, initializer=_worker.warm_up)
        return self._pool

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        results: list[MeasureResult | None] = [None] * len(inputs)
        todo = []
        for k, build in enumerate(builds[: len(inputs)]):
            if build.error_no != MeasureErrorNo.NO_ERROR:
                results[k] = MeasureResult(
                    (), build.error_no, build.time_cost, time.time(), build.error_msg, build_time=build.time_cost
                )
            else:
                todo.append(k)
        if todo:
            unusable = self._no_servers_reason()
            jobs = []
            for k in todo:
                if unusable:
                    results[k] = _error(builds[k], MeasureErrorNo.RUNTIME_DEVICE, unusable, 0.0)
                else:
                    jobs.append((k, time.perf_counter(), self._submit(inputs[k], builds[k])))
            for k, t0, fut in jobs:
                results[k] = self._collect(fut, builds[k], t0)
        return [r for r in results if r is not None]

    def _no_servers_reason(self) -> str:
        """Why no candidate of this batch can run (empty when at least one server of the key is registered)."""
        try:
            summary = tracker_summary(self.host, self.port)
        except (OSError, ConnectionError) as err:
            return f"cannot reach the RPC tracker at {self.host}:{self.port}: {err}"
        if count_servers(summary, self.key) == 0:
            keys = sorted(summary.get("queue_info", {}))
            return (
                f"no RPC server with key {self.key!r} is registered at tracker {self.host}:{self.port} "
                f"(keys there: {', '.join(keys) or 'none'})"
            )
        return ""

    def _submit(self, inp: MeasureInput, build: BuildResult) -> Any:
        task = inp.task
        local = self.local
        ref = local.reference_path(task) if local.check_correctness else None
        return self._ensure_pool().submit(
            measure_remote,
            (self.host, self.port, self.key, self.priority),
            self.timeout,
            self.request_timeout,
            build.artifact,
            build.suffix,
            _device_type(task),
            [s.to_json() for s in task.arg_specs],
            ref,
            local.check_correctness,
            local.eval_config,
            *local.tolerances(task),
            local.cooldown_interval,
        )

    def _collect(self, fut: Any, build: BuildResult, t0: float) -> MeasureResult:
        try:
            out = fut.result()
        except TimeoutError:
            return _error(build, MeasureErrorNo.RUN_TIMEOUT, "no result from the RPC worker in time", t0)
        except ChildProcessError as err:
            return _error(build, MeasureErrorNo.RUNTIME_DEVICE, f"the RPC worker process died ({err})", t0)
        except Exception as err:  # noqa: BLE001
            return _error(build, MeasureErrorNo.UNKNOWN_ERROR, f"{type(err).__name__}: {err}", t0)
        extra = {"rpc_key": self.key, **({"rpc_server": out["server"]} if "server" in out else {})}
        if "wait" in out:
            extra["rpc_wait"] = round(float(out["wait"]), 6)
        if out.get("stages"):
            extra["rpc_stages"] = {k: round(float(v), 6) for k, v in out["stages"].items()}
        run_time = float(out.get("time", 0.0))
        if "error" in out:
            kind = _RPC_KIND.get(out["error"], MeasureErrorNo.UNKNOWN_ERROR)
            return MeasureResult(
                (),
                kind,
                build.time_cost + run_time,
                time.time(),
                out["msg"],
                build_time=build.time_cost,
                run_time=run_time,
                extra=extra,
            )
        return MeasureResult(
            tuple(out["costs"]),
            MeasureErrorNo.NO_ERROR,
            build.time_cost + run_time,
            time.time(),
            build_time=build.time_cost,
            run_time=run_time,
            runs=int(out["runs"]),
            cv=out["cv"],
            extra=extra,
        )

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self.local.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return f"RPCRunner(key={self.key!r}, tracker={self.host}:{self.port}, n_parallel={self.n_parallel})"


def _error(build: BuildResult, kind: MeasureErrorNo, msg: str, t0: float) -> MeasureResult:
    """An error result; ``t0`` is when its run began (0: it never began)."""
    run_time = time.perf_counter() - t0 if t0 else 0.0
    return MeasureResult(
        (), kind, build.time_cost + run_time, time.time(), msg, build_time=build.time_cost, run_time=run_time
    )
