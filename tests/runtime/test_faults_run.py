"""Faults with real parts: namespaces, Redis, Sentinel, serve nodes (E2E-FAULT-1, E2E-FAULT-2).

Marked `faults` (and `multiprocess`): `make faults` runs them as root, `make
test` does not. Every test checks that nothing it started is left: no
process, no namespace, no link.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import redis

from queueref.runtime.faults.parts import (
    NetnsRedis,
    SentinelRedis,
    ServeNode,
    leftovers,
    ports_in_use,
    still_running,
)
from queueref.runtime.faults.runs import Sizes, run_fault
from queueref.runtime.store.redis_config import StoreProtocol, allocate_node
from queueref.runtime.store.redis_server import RedisServer

pytestmark = [pytest.mark.faults, pytest.mark.multiprocess]


def test_E2E_FAULT_1_a_failed_run_leaves_no_namespace_or_process() -> None:
    """E2E-FAULT-1: a namespace with Redis, partitioned, then an error: close() in the
    finally leaves no namespace, link or process behind."""
    made = NetnsRedis(2)
    with pytest.raises(RuntimeError, match="in the middle"):
        try:
            made.start()
            assert made.namespace in leftovers()
            client = redis.Redis.from_url(made.url(1), socket_timeout=1)
            assert client.ping()
            made.cut(0)
            cut = redis.Redis.from_url(made.url(0), socket_timeout=0.3, socket_connect_timeout=0.3)
            with pytest.raises(redis.RedisError):
                cut.ping()  # node 0's link is down; node 1's still answers
            assert client.ping()
            client.close()
            raise RuntimeError("a failure in the middle of a run")
        finally:
            made.close()
    assert made.namespace not in leftovers() and made.host_side(0) not in leftovers()
    assert still_running() == []


def test_E2E_FAULT_2_kill_9_reaches_the_whole_node(tmp_path: Path) -> None:
    """E2E-FAULT-2: SIGKILL of a node's process group kills the serve parent and its
    workers; nothing of the node is left."""
    server = RedisServer()
    server.start()
    node = ServeNode(
        "solo", server.url, tmp_path / "trace", ["--servers", "2", "--store-servers", "2"]
    )
    try:
        node.start()
        node.signal(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while still_running() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert still_running() == []
    finally:
        node.close()
        server.close()


def test_E2E_FAULT_2_sentinel_failover_promotes_the_replica() -> None:
    """E2E-FAULT-2, ADM-FAULT-2: a forced failover makes the replica the primary the
    Sentinel names, and a client through the Sentinel writes to it; it takes less than
    serve's default lease (3 s), so the leases outlive it."""
    made = SentinelRedis()
    try:
        made.start()
        before = made.primary_port()
        assert allocate_node(made.url, "d", "a", 1, 2, sentinel_master=made.MASTER) == 0
        began = time.monotonic()
        made.failover()
        assert time.monotonic() - began < 3.0
        assert made.primary_port() != before
        # The allocation was replicated before the failover: the new primary keeps it.
        assert allocate_node(made.url, "d", "a", 1, 2, sentinel_master=made.MASTER) == 0
        assert allocate_node(made.url, "d", "b", 1, 2, sentinel_master=made.MASTER) == 1
    finally:
        made.close()
    assert still_running() == []


@pytest.mark.parametrize("fault", ["partition", "redis-restart"])
def test_E2E_FAULT_3_one_fault_under_load(fault: str) -> None:
    """E2E-FAULT-3: a partition and a restart under load (slots): within the bound plus the
    model's overshoot, no record lost, the store recovered within one lease; nothing left."""
    scenario = run_fault(fault, StoreProtocol.SLOTS, Sizes(load_s=5.0))
    assert scenario.details["ok"] > 5 and scenario.details["rejected"] > 0, scenario
    assert scenario.passed, scenario
    assert still_running() == [] and leftovers() == [] and ports_in_use() == []
