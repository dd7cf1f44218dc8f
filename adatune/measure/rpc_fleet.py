"""A loopback RPC fleet: a tracker (a thread of this process) and ``n`` CPU servers (child processes) on 127.0.0.1,
for tests, benchmarks and trying ``RPCRunner`` on one machine. ``close()`` (or ``with`` exit) ends every process
started here.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from types import TracebackType

import psutil
from tvm.rpc import base as rpc_base
from tvm.rpc.tracker import PopenTrackerServerState

from .. import target as _target
from ._tracker import count_servers, tracker_socket, tracker_summary

__all__ = ["LoopbackFleet"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kill_tree(proc: subprocess.Popen) -> None:
    try:
        parent = psutil.Process(proc.pid)
        for child in parent.children(recursive=True):
            child.kill()
        parent.kill()
    except psutil.NoSuchProcess:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


class LoopbackFleet:
    """Start a tracker and ``n_servers`` servers of ``key``; ``start_timeout`` bounds the wait until all
    servers are registered (``TimeoutError`` otherwise, with the processes' log)."""

    def __init__(self, n_servers: int = 2, key: str = "loopback-cpu", start_timeout: float = 120.0):
        if n_servers < 1:
            raise ValueError(f"a fleet needs at least one server, got n_servers={n_servers}")
        self.key = key
        self.host = "127.0.0.1"
        self.port = 0
        self.tracker: PopenTrackerServerState | None = None
        self.servers: list[subprocess.Popen] = []
        self.server_ports: list[int] = []
        fd, self.log_path = tempfile.mkstemp(prefix="adatune-rpc-fleet-", suffix=".log")
        os.close(fd)
        self._log = open(self.log_path, "w")  # noqa: SIM115 - kept open while the processes run
        try:
            self._start(n_servers, start_timeout)
        except BaseException:
            self.close()
            raise

    def _spawn(self, *args: str) -> subprocess.Popen:
        """A server process; its kernels get every physical core, as ``LocalRunner``'s worker does."""
        env = {**os.environ, **_target.tvm_thread_env()}
        return subprocess.Popen([sys.executable, "-m", *args], stdout=self._log, stderr=self._log, env=env)

    def _start(self, n_servers: int, start_timeout: float) -> None:
        deadline = time.monotonic() + start_timeout
        # the tracker is pure Python: a thread here saves a process paying `import tvm` (servers retry it every 5 s)
        port = _free_port()
        self.tracker = PopenTrackerServerState(self.host, port, port + 1, silent=True)
        self.port = int(self.tracker.port)
        for _ in range(n_servers):
            port = _free_port()
            self.server_ports.append(port)
            self.servers.append(
                self._spawn(
                    "tvm.exec.rpc_server",
                    "--host",
                    self.host,
                    "--port",
                    str(port),
                    "--port-end",
                    str(port + 1),
                    "--tracker",
                    f"{self.host}:{self.port}",
                    "--key",
                    self.key,
                )
            )
        while self.registered() < n_servers:
            self._check_alive(deadline, f"{n_servers} servers did not register")
            time.sleep(0.3)

    def _check_alive(self, deadline: float, what: str) -> None:
        dead = [p.args for p in self.servers if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            self._log.flush()
            with open(self.log_path) as f:
                tail = f.read()[-3000:]
            reason = f"exited: {dead}" if dead else "timed out"
            raise TimeoutError(f"loopback RPC fleet: {what} ({reason}); log:\n{tail}")

    def registered(self) -> int:
        """Servers of the key a client can get now: connected to the tracker and offered to it (``queue_info``:
        ``free``). A server reports its key before it offers itself, and counting the first alone let a client ask in
        between and find no server; a busy server is offered again when its session ends."""
        try:
            summary = tracker_summary(self.host, self.port, timeout=2.0)
        except OSError:
            return 0
        free = int(summary.get("queue_info", {}).get(self.key, {}).get("free", 0))
        return min(count_servers(summary, self.key), free)

    def server_address(self, i: int) -> str:
        return f"{self.host}:{self.server_ports[i]}"

    def sessions(self, i: int) -> set[int]:
        """Process ids of the sessions server ``i`` is serving now (its listener forks one per session)."""
        try:
            listeners = psutil.Process(self.servers[i].pid).children()
            return {p.pid for listener in listeners for p in listener.children(recursive=True)}
        except psutil.Error:  # a process of its tree ended while it was being listed
            return set()

    def kill_server(self, i: int) -> None:
        """Kill server ``i`` and the session it is serving (like a board losing power)."""
        _kill_tree(self.servers[i])

    def close(self) -> None:
        for proc in self.servers:
            _kill_tree(proc)
        self.servers = []
        if self.tracker is not None:
            self._stop_tracker(self.tracker)
            self.tracker = None
        if not self._log.closed:
            self._log.close()

    def _stop_tracker(self, state: PopenTrackerServerState) -> None:
        """Stop the tracker thread the way TVM's ``Tracker.terminate`` does (its stop key over the socket)."""
        sock = tracker_socket(self.host, self.port, 5.0)
        try:
            rpc_base.sendjson(sock, [rpc_base.TrackerCode.STOP, state.stop_key])
            rpc_base.recvjson(sock)
        finally:
            sock.close()
        state.thread.join(timeout=10)

    def __enter__(self) -> LoopbackFleet:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
        if exc_type is None and os.path.exists(self.log_path):  # keep the log when something went wrong
            os.remove(self.log_path)
