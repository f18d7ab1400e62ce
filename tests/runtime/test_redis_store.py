"""The multi-node store against a real redis-server on loopback (marked `multiprocess`).

Every test starts its own server on a free loopback port and stops it by its
PID. The specs are in `specs/multi-node.md`.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from redis_workers import admission_worker, fill_and_hang_worker, read_ready

from queueref.errors import AdmissionRejected
from queueref.oracle import check_admission_trace
from queueref.runtime.store.redis_config import StoreConfig, StoreProtocol, redact_url
from queueref.runtime.store.redis_scripts import MAX_COUNT, StoreCorruptError, parse_count
from queueref.runtime.store.redis_server import RedisServer
from queueref.runtime.store.redis_store import RedisAdmissionStore, StoreUnavailableError
from queueref.trace.events import AdmissionEvent, read_jsonl

pytestmark = pytest.mark.multiprocess

SPAWN = multiprocessing.get_context("spawn")
PROTOCOLS = list(StoreProtocol)


def config(
    server: RedisServer, index: int, num: int, protocol: StoreProtocol, **kwargs: Any
) -> StoreConfig:
    return StoreConfig(
        server.url,
        kwargs.pop("deployment", "test"),
        num,
        index,
        protocol,
        **kwargs,
    )


def stores(
    server: RedisServer, num: int, protocol: StoreProtocol, cap: int, **kwargs: object
) -> list[RedisAdmissionStore]:
    return [
        RedisAdmissionStore(config(server, i, num, protocol, **kwargs), cap) for i in range(num)
    ]


async def started(group: list[RedisAdmissionStore]) -> list[RedisAdmissionStore]:
    for store in group:
        await store.start()
    return group


async def closed(group: list[RedisAdmissionStore]) -> None:
    for store in group:
        await store.close()


# ---------------------------------------------------------------------------
# ADM-STORE-1: the protocols' decisions
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ADM_STORE_1_one_at_a_time_the_cap_is_exact(
    server: RedisServer, protocol: StoreProtocol
) -> None:
    """ADM-STORE-1: without overlap every protocol admits exactly up to M, across servers."""

    async def scenario() -> None:
        group = await started(stores(server, 3, protocol, cap=4))
        decisions = [await group[i % 3].admit(1) for i in range(6)]
        assert [d.admitted for d in decisions] == [True, True, True, True, False, False]
        assert [d.view for d in decisions] == [0, 1, 2, 3, 4, 4]
        assert [s.count for s in group] == [2, 1, 1]
        await group[0].release(2)
        assert (await group[2].admit(2)).admitted
        assert not (await group[1].admit(1)).admitted
        await closed(group)

    asyncio.run(scenario())


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ADM_STORE_1_decision_is_the_protocol_rule(
    server: RedisServer, protocol: StoreProtocol
) -> None:
    """ADM-STORE-1: every protocol (the Lua script too) admits iff view + n <= M, and reads
    the sum of the other servers' counts plus its own."""

    async def scenario() -> None:
        for cap in range(0, 4):
            group = await started(stores(server, 2, protocol, cap, deployment=f"grid{cap}"))
            for other in range(0, 4):
                group[1].count = other
                await group[1].heartbeat()
                for n in range(1, 4):
                    decision = await group[0].admit(n)
                    assert decision.view == other
                    assert decision.admitted == (other + n <= cap), (cap, other, n)
                    if decision.admitted:
                        await group[0].release(n)
            await closed(group)

    asyncio.run(scenario())


def test_ADM_STORE_1_bad_arguments_name_the_problem(server: RedisServer) -> None:
    """ADM-STORE-1: bad arguments raise ValueError naming the argument; nothing changes."""
    with pytest.raises(ValueError, match="redis:// or rediss://"):
        StoreConfig("http://127.0.0.1:1/0", "d", 2, 0)
    with pytest.raises(ValueError, match="deployment name"):
        StoreConfig(server.url, "no spaces", 2, 0)
    with pytest.raises(ValueError, match="server_index 2 is not below num_servers 2"):
        StoreConfig(server.url, "d", 2, 2)
    with pytest.raises(ValueError, match="num_servers must be an int >= 1"):
        StoreConfig(server.url, "d", True, 0)
    with pytest.raises(ValueError, match="'sockets'"):
        StoreConfig(server.url, "d", 2, 0, "sockets")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_num_queued_reqs"):
        RedisAdmissionStore(StoreConfig(server.url, "d", 2, 0), -1)

    async def scenario() -> None:
        (store,) = await started(stores(server, 1, StoreProtocol.SLOTS, cap=2))
        for bad in (0, -1, True, 1.0):
            with pytest.raises(ValueError, match="n must be an int >= 1"):
                await store.admit(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"n must be an int in \[1, 0\]"):
            await store.release(1)
        assert store.count == 0
        await store.close()

    asyncio.run(scenario())


# ---------------------------------------------------------------------------
# ADM-STORE-2 / OB-BROKEN-1: one check at a time per server
# ---------------------------------------------------------------------------


def test_ADM_STORE_2_unserialised_checks_overshoot_serialised_do_not(server: RedisServer) -> None:
    """ADM-STORE-2: two overlapping checks of one server (N = 1, M = 1) both read 0 and
    would both admit: total 2 = M + (N*K - 1)*min(M, W) with K = 2 (OB-BROKEN-1). Through
    `admit`, which holds the server's lock, exactly one of them is admitted."""

    async def scenario() -> None:
        (store,) = await started(stores(server, 1, StoreProtocol.SLOTS, cap=1))
        views = await asyncio.gather(store.read_view(), store.read_view())
        assert list(views) == [0, 0]  # each alone would admit: 0 + 1 <= 1, twice
        decisions = await asyncio.gather(*(store.admit(1) for _ in range(5)))
        assert sum(d.admitted for d in decisions) == 1
        assert store.count == 1
        await store.close()

    asyncio.run(scenario())


# ---------------------------------------------------------------------------
# Real processes: the bound of each protocol in the records
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ADM_STORE_3_processes_keep_each_protocols_bound(
    server: RedisServer, protocol: StoreProtocol, tmp_path: Path
) -> None:
    """ADM-STORE-3: 4 real processes, M = 3, W = 2: slots and snapshot stay within
    M + (N-1)*min(M, W) with every decision allowed by check-then-write; the script
    never has more than M admitted."""
    num, cap, max_n = 4, 3, 2
    traces = [tmp_path / f"server-{i}.jsonl" for i in range(num)]
    workers = [
        SPAWN.Process(
            target=admission_worker,
            args=(config(server, i, num, protocol), cap, max_n, 1.5, i, str(traces[i])),
        )
        for i in range(num)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    events: list[AdmissionEvent] = sorted(
        (event for trace in traces for event in read_jsonl(trace)), key=lambda e: e.t
    )
    admitted = sum(e.event == "admit" for e in events)
    assert admitted > 10 and sum(e.event == "reject" for e in events) > 0
    mode = "locked" if protocol is StoreProtocol.SCRIPT else "check-then-write"
    report = check_admission_trace(events, num, cap, max_n, mode=mode)
    assert not report.violations, report.violations
    assert report.ok, report
    assert report.bound == (cap if mode == "locked" else cap + (num - 1) * min(cap, max_n))
    # Every server released everything: the store holds 0 for each of them.
    client = redis.Redis.from_url(server.url)
    counts = [client.get(f"queueref:{{test}}:count:{i}") for i in range(num)]
    assert counts == [b"0"] * num
    client.close()


# ---------------------------------------------------------------------------
# ADM-STORE-4 / OB-LEASE-1: leases for dead and paused servers
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ADM_STORE_4_a_killed_servers_capacity_returns_after_one_lease(
    server: RedisServer, protocol: StoreProtocol, tmp_path: Path
) -> None:
    """ADM-STORE-4: server 0 fills the cap and is killed with SIGKILL; server 1 is refused
    while the lease runs and admitted once it has expired."""
    lease_ms, cap = 400, 3
    ready = tmp_path / "ready.json"
    hang = SPAWN.Process(
        target=fill_and_hang_worker,
        args=(config(server, 0, 2, protocol, lease_ms=lease_ms), cap, str(ready)),
    )
    hang.start()
    try:
        assert read_ready(ready)["count"] == cap
        os.kill(hang.pid or 0, signal.SIGKILL)
        killed = time.monotonic()
    finally:
        hang.join(timeout=10)

    async def scenario() -> float:
        store = RedisAdmissionStore(config(server, 1, 2, protocol, lease_ms=lease_ms), cap)
        await store.start()
        first = await store.admit(1)
        assert not first.admitted and first.view == cap  # the dead server's count still counts
        while not (await store.admit(1)).admitted:
            await asyncio.sleep(0.02)
            assert time.monotonic() - killed < 5
        back = time.monotonic() - killed
        await store.close()
        return back

    back = asyncio.run(scenario())
    assert back <= lease_ms / 1000 + 1.0
    if protocol is StoreProtocol.SCRIPT:  # the script deletes the expired count
        assert redis.Redis.from_url(server.url).get("queueref:{test}:count:0") is None


def test_OB_LEASE_1_a_paused_server_adds_at_most_its_dropped_count(
    server: RedisServer, tmp_path: Path
) -> None:
    """OB-LEASE-1: server 0 holds 2 of M = 2 and is paused (SIGSTOP) past its lease;
    server 1 sees it as dead and admits 2 -- the true total is M + 2, the dropped count.
    After SIGCONT server 0's next heartbeat writes its count back and server 1 is refused."""
    lease_ms, cap = 300, 2
    ready = tmp_path / "ready.json"
    hang = SPAWN.Process(
        target=fill_and_hang_worker,
        args=(config(server, 0, 2, StoreProtocol.SLOTS, lease_ms=lease_ms), cap, str(ready)),
    )
    hang.start()
    try:
        assert read_ready(ready)["count"] == cap
        os.kill(hang.pid or 0, signal.SIGSTOP)

        async def scenario() -> None:
            store = RedisAdmissionStore(
                config(server, 1, 2, StoreProtocol.SLOTS, lease_ms=lease_ms), cap
            )
            await store.start()
            assert not (await store.admit(1)).admitted
            await asyncio.sleep(lease_ms / 1000 + 0.2)
            assert (await store.admit(1)).admitted
            assert (await store.admit(1)).admitted
            assert not (await store.admit(1)).admitted
            assert store.count + cap == cap + 2  # the overshoot is exactly the dropped count
            os.kill(hang.pid or 0, signal.SIGCONT)
            await asyncio.sleep(lease_ms / 1000)  # one renewal period of server 0 and more
            refused = await store.admit(1)
            assert not refused.admitted and refused.view == cap + 2  # healed
            await store.close()

        asyncio.run(scenario())
    finally:
        os.kill(hang.pid or 0, signal.SIGKILL)
        hang.join(timeout=10)


# ---------------------------------------------------------------------------
# ADM-STORE-5: Redis stopped mid-run
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ADM_STORE_5_store_down_closed_rejects_open_admits_its_share(
    server: RedisServer, protocol: StoreProtocol
) -> None:
    """ADM-STORE-5: with the store stopped, `closed` answers every request with a 503
    rejection, `open` admits against floor(M / N); neither crashes; when Redis returns
    (empty: no persistence) the absolute counts are written back at the next heartbeat."""

    async def scenario() -> None:
        shut = await started(stores(server, 2, protocol, cap=5, deployment="c", timeout_s=0.3))
        opened = await started(
            stores(server, 2, protocol, cap=5, deployment="o", failure="open", timeout_s=0.3)
        )
        assert (await shut[0].admit(2)).admitted and (await opened[0].admit(1)).admitted
        server.stop()
        with pytest.raises(StoreUnavailableError) as refused:
            await shut[1].admit(1)
        assert isinstance(refused.value, AdmissionRejected) and refused.value.http_status == 503
        assert shut[1].count == 0
        # open: server 0 holds 1, its share is floor(5 / 2) = 2: one more, then refused
        first, second = await opened[0].admit(1), await opened[0].admit(1)
        assert (first.admitted, first.degraded, second.admitted) == (True, True, False)
        await shut[0].release(1)  # the write fails quietly and stays pending
        assert not await shut[0].heartbeat()
        server.start()
        assert await shut[0].heartbeat() and await opened[0].heartbeat()
        assert (await shut[1].admit(4)).view == 1  # server 0's absolute count is back
        assert not (await shut[1].admit(1)).admitted
        assert (await opened[1].admit(1)).view == 2
        await closed(shut + opened)

    asyncio.run(scenario())


# ---------------------------------------------------------------------------
# ADM-STORE-6: what the store holds is validated
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("garbage", [b"abc", b"-5", b"1" * 20, b"1.5", str(MAX_COUNT + 1).encode()])
def test_ADM_STORE_6_a_corrupt_count_is_never_admitted_through(
    server: RedisServer, protocol: StoreProtocol, garbage: bytes
) -> None:
    """ADM-STORE-6: a count that no server writes (negative, not an int, absurd) is an error
    answered by the failure policy -- never a negative sum or an overflow that admits."""

    async def scenario() -> None:
        shut = await started(stores(server, 2, protocol, cap=3, deployment="c"))
        opened = await started(stores(server, 2, protocol, cap=3, deployment="o", failure="open"))
        client = redis.Redis.from_url(server.url)
        for deployment in ("c", "o"):
            client.set(f"queueref:{{{deployment}}}:count:1", garbage)
            client.set(f"queueref:{{{deployment}}}:hb:1", 1, px=60_000)
        client.close()
        with pytest.raises(StoreUnavailableError):
            await shut[0].admit(1)
        decision = await opened[0].admit(1)
        assert decision.degraded and decision.view is None and opened[0].count == 1
        await closed(shut + opened)

    asyncio.run(scenario())


def test_ADM_STORE_6_parse_count() -> None:
    """ADM-STORE-6: only a decimal int in [0, MAX_COUNT] is a count; a missing key is 0."""
    assert parse_count(None) == 0 and parse_count(b"17") == 17
    for bad in (b"", b"-1", b"+1", b" 1", b"0x1", b"1e3", str(MAX_COUNT + 1).encode()):
        with pytest.raises(StoreCorruptError):
            parse_count(bad)


# ---------------------------------------------------------------------------
# ADM-STORE-7: who may touch the cap
# ---------------------------------------------------------------------------


def test_ADM_STORE_7_the_password_is_never_shown() -> None:
    secret = "s3cr3t-pw"
    guarded = RedisServer(password=secret)
    guarded.start()
    try:
        cfg = StoreConfig(guarded.url, "d", 1, 0, StoreProtocol.SNAPSHOT)
        assert secret in guarded.url and secret not in repr(cfg)
        assert redact_url(guarded.url) == f"redis://default:***@127.0.0.1:{guarded.port}/0"

        async def scenario() -> None:
            store = RedisAdmissionStore(cfg, 2)
            assert secret not in repr(store)
            await store.start()
            assert (await store.admit(1)).admitted
            guarded.stop()
            with pytest.raises(StoreUnavailableError) as refused:
                await store.admit(1)
            assert secret not in str(refused.value)
            await store.close()
            wrong = RedisAdmissionStore(
                StoreConfig(guarded.url.replace(secret, "wrong-pw"), "d", 1, 0), 2
            )
            guarded.start()
            with pytest.raises(Exception) as failed:
                await wrong.start()
            assert "wrong-pw" not in str(failed.value) and secret not in str(failed.value)
            await wrong.close()

        asyncio.run(scenario())
    finally:
        guarded.close()


def test_ADM_STORE_7_deployments_never_share_a_cap(server: RedisServer) -> None:
    """ADM-STORE-7: keys live under the deployment name; a server started with another
    server count than its deployment's is refused."""

    async def scenario() -> None:
        a = await started(stores(server, 2, StoreProtocol.SNAPSHOT, cap=1, deployment="a"))
        b = await started(stores(server, 2, StoreProtocol.SNAPSHOT, cap=1, deployment="b"))
        assert (await a[0].admit(1)).admitted and (await b[1].admit(1)).admitted
        assert not (await a[1].admit(1)).admitted
        stray = RedisAdmissionStore(config(server, 0, 3, StoreProtocol.SLOTS, deployment="a"), 1)
        with pytest.raises(ValueError, match="has 2 servers in the store.*started with 3"):
            await stray.start()
        await closed([*a, *b, stray])

    asyncio.run(scenario())
