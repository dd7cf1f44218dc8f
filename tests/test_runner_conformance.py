"""adatune.testing's runner check on the local runner and, over a loopback RPC fleet, on RPCRunner: every
candidate comes back with its own error kind (ok, wrong answer, hang, build failure; a crash locally) and its
build's seconds."""

from __future__ import annotations

import pytest

import adatune
from adatune.testing import check_runner


def test_local_runner_conforms():
    runner = adatune.LocalRunner(timeout=3, check_correctness=True)
    try:
        check_runner(runner, modes=("ok", "wrong", "hang", "build_fail", "crash"))
    finally:
        runner.close()


def test_rpc_runner_conforms():
    """A crashing kernel takes a TVM rpc_server out of the fleet, so "crash" is left to the server-loss test."""
    pytest.importorskip("tornado", reason="tvm's RPC tracker needs tornado (dev extra)")
    from adatune.measure.rpc_fleet import LoopbackFleet

    with LoopbackFleet(n_servers=1, key="adatune-runner-conformance", start_timeout=150) as fleet:
        runner = adatune.RPCRunner(fleet.key, fleet.host, fleet.port, timeout=3, check_correctness=True)
        try:
            check_runner(runner)
        finally:
            runner.close()
