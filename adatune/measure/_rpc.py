"""``RPCRunner``: time built candidates on remote devices through a TVM RPC tracker.

Each candidate's library is uploaded to a free server of the tracker's key, loaded, checked and timed there with
``LocalRunner``'s code and ``RunnerConfig`` (``_remote``); ``n_parallel`` workers (default one per server) spread a
batch over all servers. A server that dies costs only its candidates (``RUNTIME_DEVICE`` errors naming it), and a
kernel that outlives ``timeout`` is ended by the server's session timeout (``RUN_TIMEOUT``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tvm.support.popen_pool import PopenPoolExecutor

from . import _worker
from ._config import with_options_signature
from ._remote import measure_remote
from ._runner import WorkerRunner, build_failure
from ._tracker import Tracker, count_servers, registered_keys, request_session, tracker_summary
from ._types import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult, RunOutcome
from .device_limits import DeviceLimits, limits_of_tvm_device

__all__ = ["RPCRunner"]

#: seconds the worker gets beyond the kernel timeout and the wait for a server (connect, upload, load)
_TRANSFER_SLACK = 10.0


class RPCRunner(WorkerRunner):
    """Measure on the servers a TVM RPC tracker at ``host:port`` holds under ``key``. ``options`` are ``LocalRunner``'s
    (``timeout`` bounding one candidate's session); ``request_timeout`` bounds the wait for a free server;
    ``n_parallel``: candidates in flight (None: one per server registered at the first batch).
    """

    worker_clock = True

    @with_options_signature
    def __init__(
        self,
        key: str,
        host: str = "127.0.0.1",
        port: int = 9190,
        priority: int = 1,
        timeout: float = 10.0,
        *,
        n_parallel: int | None = None,
        request_timeout: float = 60.0,
        **options: Any,
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
        super().__init__(timeout=timeout, **options)
        self.tracker = Tracker(str(host), int(port), key, int(priority))
        self.n_parallel = n_parallel
        self.request_timeout = float(request_timeout)
        self._limits: dict[str, DeviceLimits | None] = {}

    key = property(lambda self: self.tracker.key)
    host = property(lambda self: self.tracker.host)
    port = property(lambda self: self.tracker.port)
    priority = property(lambda self: self.tracker.priority)

    def servers(self) -> int:
        """Servers registered under this runner's key now (ConnectionError when the tracker is unreachable)."""
        return count_servers(tracker_summary(self.host, self.port), self.key)

    def device_limits(self, target: object) -> DeviceLimits | None:
        """For CUDA targets: the named profile's limits when one was given, else those of the device behind the
        key, read from one of its servers (None: no CUDA there)."""
        kind = getattr(getattr(target, "kind", None), "name", None)
        if kind != "cuda" or self.config.profile_limits is not None:
            return self.config.profile_limits if kind == "cuda" else None
        if kind not in self._limits:
            try:
                sess, _, _ = request_session(self.tracker, 30.0, self.request_timeout)
                dev = sess.cuda(0)
                self._limits[kind] = limits_of_tvm_device(dev) if dev.exist else None
            except Exception:  # noqa: BLE001 - no server reachable: the builder checks nothing
                self._limits[kind] = None
        return self._limits[kind]

    def _ensure_pool(self) -> PopenPoolExecutor:
        if self._pool is None:
            workers = self.n_parallel or max(1, self.servers())
            # a worker may wait for a server, then runs one candidate, then the server may rest
            limit = self.request_timeout + self.timeout + self.config.cooldown_interval + _TRANSFER_SLACK
            self._pool = PopenPoolExecutor(max_workers=workers, timeout=limit, initializer=_worker.warm_up)
        return self._pool

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        todo = [k for k, b in enumerate(builds[: len(inputs)]) if b.error_no == MeasureErrorNo.NO_ERROR]
        unusable = self._no_servers_reason() if todo else ""
        jobs = {}
        for k in [] if unusable else todo:
            req = self.request(inputs[k], builds[k])
            fut = self._ensure_pool().submit(measure_remote, self.tracker, self.request_timeout, req, self.config)
            jobs[k] = (time.perf_counter(), fut)
        results = []
        for k, build in enumerate(builds[: len(inputs)]):
            if k in jobs:
                t0, fut = jobs[k]
                late = "no result from the RPC worker in time"
                res = self.collect(fut, build, t0, late=late, died="the RPC worker process died")
                res.extra = {"rpc_key": self.key, **res.extra}
            elif build.error_no == MeasureErrorNo.NO_ERROR:  # no server to run it on
                res = RunOutcome(MeasureErrorNo.RUNTIME_DEVICE, unusable).result(build)
            else:
                res = build_failure(build)
            results.append(res)
        return results

    def _no_servers_reason(self) -> str:
        """Why no candidate of this batch can run (empty when at least one server of the key is registered)."""
        try:
            summary = tracker_summary(self.host, self.port)
        except OSError as err:
            return f"cannot reach the RPC tracker at {self.tracker}: {err}"
        keys = registered_keys(summary)
        if self.key not in keys:
            return (
                f"no RPC server with key {self.key!r} is registered at tracker {self.tracker} "
                f"(keys there: {', '.join(sorted(set(keys))) or 'none'})"
            )
        return ""

    def __repr__(self) -> str:
        return f"RPCRunner(key={self.key!r}, tracker={self.tracker}, n_parallel={self.n_parallel})"
