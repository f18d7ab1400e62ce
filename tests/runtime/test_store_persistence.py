"""Redis restarted, with and without persistence (ADM-FAULT-1, OB-FAULT-2).

A real redis-server on loopback, started per test and stopped by its PID.
"""

from __future__ import annotations

import asyncio

import pytest

from queueref.runtime.store.redis_config import StoreConfig, StoreProtocol
from queueref.runtime.store.redis_server import RedisServer
from queueref.runtime.store.redis_store import RedisAdmissionStore

pytestmark = pytest.mark.multiprocess


@pytest.mark.parametrize("persistent", [True, False])
def test_ADM_FAULT_1_a_restart_keeps_the_counts_only_with_persistence(persistent: bool) -> None:
    """ADM-FAULT-1, OB-FAULT-2: server 0 holds the cap (2 of M = 2) and Redis restarts.
    With appendonly and appendfsync always the count survives: server 1 is refused at once,
    before any heartbeat (only an outage). Without persistence it is gone: server 1 is
    admitted into room that is not free -- the overshoot OB-FAULT-2 bounds -- until server
    0's next write shows its count again."""
    server = RedisServer(persistent=persistent)
    server.start()
    try:

        async def scenario() -> None:
            stores = [
                RedisAdmissionStore(
                    StoreConfig(server.url, "p", 2, i, StoreProtocol.SNAPSHOT, lease_ms=60_000),
                    2,
                )
                for i in range(2)
            ]
            for store in stores:
                await store.start()
            assert (await stores[0].admit(2)).admitted
            server.stop()
            server.start()
            after = await stores[1].admit(1)
            if persistent:
                assert not after.admitted and after.view == 2
            else:
                assert after.admitted and after.view == 0  # the dropped count
                assert await stores[0].heartbeat()  # the absolute count written again
                healed = await stores[1].admit(1)
                assert not healed.admitted and healed.view == 3
            for store in stores:
                await store.close()

        asyncio.run(scenario())
    finally:
        server.close()


def test_ADM_FAULT_1_start_returns_once_the_append_only_file_is_loaded() -> None:
    """ADM-FAULT-1: a restarted persistent Redis answers LOADING until it has read its
    append-only file back; `start()` returns only after that, so the first command after
    a restart is answered (before, it could meet BusyLoadingError under load)."""
    import redis

    server = RedisServer(persistent=True)
    server.start()
    try:
        client = redis.Redis.from_url(server.url)
        pipe = client.pipeline(transaction=False)
        for i in range(300_000):
            pipe.set(f"k{i}", i)
        pipe.execute()
        client.close()
        server.stop()
        server.start()
        client = redis.Redis.from_url(server.url)
        assert client.get("k299999") == b"299999"  # no BusyLoadingError
        client.close()
    finally:
        server.close()
