"""A client of TVM's RPC tracker: its summary and a session with a free server of a key. Unlike TVM's own client, which
retries for a minute and waits for delayed ACKs, it fails within a given time and sends each request in one write."""

from __future__ import annotations

import json
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

from tvm.rpc import base as rpc_base

__all__ = ["Tracker", "tracker_summary", "count_servers", "registered_keys"]


@dataclass(frozen=True)
class Tracker:
    """Where to ask for servers: the tracker's address, the servers' key and the requests' priority."""

    host: str
    port: int
    key: str
    priority: int = 1

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def tracker_socket(host: str, port: int, timeout: float) -> socket.socket:
    """A connection to the tracker that fails within ``timeout``."""
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
    """The tracker's ``summary()``: ``queue_info`` (per key, its free servers and pending requests; a key appears once a
    server or a client named it) and ``server_info`` (``{"key": "server:KEY", "addr": ...}`` per server)."""
    sock = tracker_socket(host, port, timeout)
    try:
        code, value = _ask(sock, [rpc_base.TrackerCode.SUMMARY])
    finally:
        sock.close()
    if code != rpc_base.TrackerCode.SUCCESS:
        raise ConnectionError(f"tracker {host}:{port} refused a summary: {value!r}")
    return dict(value)


def registered_keys(summary: dict) -> list[str]:
    """Keys of the servers connected to the tracker, one entry per server."""
    return [s["key"].removeprefix("server:") for s in summary.get("server_info", []) if "key" in s]


def count_servers(summary: dict, key: str) -> int:
    """Servers connected under ``key`` (busy or free) in a tracker summary."""
    return registered_keys(summary).count(key)


def request_session(tracker: Tracker, session_timeout: float, wait_limit: float) -> tuple[Any, str, float]:
    """Connect to a free server of the key (waiting at most ``wait_limit`` s): the session, its ``host:port`` and the
    connection's seconds. A server gone before the connection is skipped and the request repeated."""
    from tvm import rpc

    last_err: Exception | None = None
    deadline = time.monotonic() + wait_limit
    for _ in range(3):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock = tracker_socket(tracker.host, tracker.port, left)
        try:
            code, value = _ask(sock, [rpc_base.TrackerCode.REQUEST, tracker.key, "", tracker.priority])
        finally:
            sock.close()
        if code != rpc_base.TrackerCode.SUCCESS:
            raise ConnectionError(f"tracker {tracker} refused the request for key {tracker.key!r}: {value!r}")
        url, server_port, matchkey = value
        try:
            t_connect = time.perf_counter()
            sess = rpc.connect(url, server_port, matchkey, session_timeout)
            return sess, f"{url}:{server_port}", time.perf_counter() - t_connect
        except Exception as err:  # noqa: BLE001 - the server died after the tracker matched it
            last_err = err
            time.sleep(0.5)  # let the tracker see the dead server's connection close before asking again
    raise ConnectionError(f"no server of key {tracker.key!r} could be connected within {wait_limit:g} s: {last_err}")
