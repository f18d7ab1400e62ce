"""Bad input and garbage in the store (ADM-STORE-6, ADM-STORE-8, ADM-FAULT-3).

A real redis-server on loopback, started per test and stopped by its PID.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
import redis

from queueref.runtime.store.redis_config import StoreConfig, StoreFailurePolicy, StoreProtocol
from queueref.runtime.store.redis_scripts import StoreCorruptError, heartbeat_live
from queueref.runtime.store.redis_server import RedisServer, free_port
from queueref.runtime.store.redis_store import RedisAdmissionStore, StoreUnavailableError

pytestmark = pytest.mark.multiprocess


@pytest.mark.parametrize("protocol", list(StoreProtocol))
@pytest.mark.parametrize("garbage", [b"-1", b"abc", b"1.5", b""])
def test_ADM_STORE_6_a_garbage_heartbeat_is_a_store_failure(
    server: RedisServer, protocol: StoreProtocol, garbage: bytes
) -> None:
    """ADM-STORE-6: a heartbeat no server writes (negative, not an int) is a failure of the
    store under the policy -- closed rejects with 503, open admits against its share --
    never read as a live (or dead) lease. The count beside it is valid (2 of M = 2)."""

    async def scenario() -> None:
        made = {
            policy: [
                RedisAdmissionStore(
                    StoreConfig(
                        server.url, policy, 2, i, protocol, failure=StoreFailurePolicy(policy)
                    ),
                    2,
                )
                for i in range(2)
            ]
            for policy in ("closed", "open")
        }
        for group in made.values():
            for store in group:
                await store.start()
        client = redis.Redis.from_url(server.url)
        for policy in made:
            client.set(f"queueref:{{{policy}}}:count:1", b"2")
            client.set(f"queueref:{{{policy}}}:hb:1", garbage, px=60_000)
        client.close()
        with pytest.raises(StoreUnavailableError):
            await made["closed"][0].admit(1)
        assert made["closed"][0].count == 0
        decision = await made["open"][0].admit(1)
        # Degraded: its share floor(2 / 2) = 1, its own count only -- not the garbage lease.
        assert decision.degraded and decision.view is None and decision.admitted
        for group in made.values():
            for store in group:
                await store.close()

    asyncio.run(scenario())


def test_ADM_STORE_6_heartbeat_live() -> None:
    """ADM-STORE-6: a missing heartbeat is an expired lease, a decimal int a live one;
    anything else is corrupt."""
    assert heartbeat_live(b"1") and not heartbeat_live(None)
    for bad in (b"-1", b"x", b"1.0", b" 1"):
        with pytest.raises(StoreCorruptError, match="heartbeat key"):
            heartbeat_live(bad)


def test_ADM_STORE_8_an_unreachable_store_at_start_up_is_one_line_without_the_password() -> None:
    """ADM-STORE-8: `serve --store` with nothing listening at the URL exits 2 with one line
    on stderr that names the URL, its password shown as ***."""
    port = free_port()
    url = f"redis://app:hunter2-secret@127.0.0.1:{port}/0"
    done = subprocess.run(
        [sys.executable, "-m", "queueref", "serve", "--port", "0", "--servers", "1",
         "--duration", "1s", "--store", url, "--node", "a", "--store-servers", "2"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"redis://app:***@127.0.0.1:{port}/0" in lines[0]
    assert "hunter2-secret" not in done.stderr + done.stdout


def test_FAULT_SPEC_3_bad_sentinel_or_replica_options_name_the_problem() -> None:
    """ADM-FAULT-3: a bad Sentinel master name or replica count is a ValueError naming it."""
    with pytest.raises(ValueError, match="Sentinel master name"):
        StoreConfig("redis://127.0.0.1:1/0", "d", 1, 0, sentinel_master="no spaces")
    with pytest.raises(ValueError, match="replicas must be an int >= 0"):
        StoreConfig("redis://127.0.0.1:1/0", "d", 1, 0, replicas=-1)
    config = StoreConfig("redis://u:pw-x@127.0.0.1:1/0", "d", 1, 0, sentinel_master="m")
    assert "pw-x" not in repr(config) and "sentinel_master='m'" in repr(config)


def test_FAULT_SPEC_3_wait_without_a_replica_is_a_failed_write(server: RedisServer) -> None:
    """ADM-FAULT-3: with --store-replicas 1 and no replica, WAIT reaches 0 replicas: the
    write counts as failed (heartbeat False), a script admission is refused (closed), and
    a slots admission is made but its write stays pending."""

    async def scenario() -> None:
        script = RedisAdmissionStore(
            StoreConfig(server.url, "w", 1, 0, StoreProtocol.SCRIPT, replicas=1, timeout_s=0.2), 2
        )
        slots = RedisAdmissionStore(
            StoreConfig(server.url, "v", 1, 0, StoreProtocol.SLOTS, replicas=1, timeout_s=0.2), 2
        )
        assert not await script.heartbeat()
        with pytest.raises(StoreUnavailableError):
            await script.admit(1)
        assert script.count == 0
        assert (await slots.admit(1)).admitted and slots.count == 1
        await script.close()
        await slots.close()

    asyncio.run(scenario())
