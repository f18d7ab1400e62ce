"""The token limit through the multi-node store (ADM-STORE-10), against a real redis-server.

Every test starts its own server on a free loopback port and stops it by its PID.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import redis

from queueref.oracle import check_admission_trace
from queueref.runtime.http.group import HttpServers
from queueref.runtime.http.store import NodeStore
from queueref.runtime.loadgen import run_builtin
from queueref.runtime.store.redis_config import StoreConfig, StoreProtocol, allocate_node
from queueref.runtime.store.redis_server import RedisServer
from queueref.runtime.store.redis_store import RedisAdmissionStore, StoreUnavailableError
from queueref.trace.files import read_trace_folder

pytestmark = pytest.mark.multiprocess


def pair(
    server: RedisServer, protocol: StoreProtocol, limit: int, rule: str, deployment: str
) -> list[RedisAdmissionStore]:
    return [
        RedisAdmissionStore(
            StoreConfig(server.url, deployment, 2, i, protocol, lease_ms=400), 10, limit, rule
        )
        for i in range(2)
    ]


@pytest.mark.parametrize("protocol", list(StoreProtocol))
@pytest.mark.parametrize("rule", ["ge", "fits"])
def test_ADM_STORE_10_the_token_rule_on_the_global_queued_tokens(
    server: RedisServer, protocol: StoreProtocol, rule: str
) -> None:
    """ADM-STORE-10: every protocol (the script too) reads the other server's queued tokens
    and decides the token rule on the sum: ge admits iff queued < Mt, fits iff queued + t
    <= Mt; a token rejection reports the token view and changes no count."""

    async def scenario() -> None:
        for other in range(0, 9, 2):
            for tokens in (1, 3, 6):
                a, b = pair(server, protocol, 8, rule, f"t{rule}{other}{tokens}")
                await a.start()
                await b.start()
                b.tokens = other
                await b.heartbeat()
                decision = await a.admit(1, tokens=tokens)
                fits = other < 8 if rule == "ge" else other + tokens <= 8
                assert decision.admitted == fits, (other, tokens, decision)
                assert decision.view == 0 and decision.token_view == other
                assert decision.by_tokens == (not fits)
                assert (a.count, a.tokens) == ((1, tokens) if fits else (0, 0))
                await a.close()
                await b.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("protocol", list(StoreProtocol))
def test_ADM_STORE_10_tokens_leave_at_the_prefill_and_with_the_lease(
    server: RedisServer, protocol: StoreProtocol
) -> None:
    """ADM-STORE-10: a prefill takes the tokens out of the store (the other server sees
    room again); a dead server's tokens stop counting when its lease lapses; the request
    limit decides first (a request rejection reads no token view)."""

    async def scenario() -> None:
        a, b = pair(server, protocol, 4, "ge", "leave")
        await a.start()
        await b.start()
        assert (await b.admit(1, tokens=4)).admitted
        refused = await a.admit(1, tokens=1)
        assert refused.by_tokens and refused.token_view == 4
        await b.release_tokens(4)
        assert (await a.admit(1, tokens=2)).token_view == 0
        await b.release(1)
        assert (b.count, b.tokens) == (0, 0)
        a.cap = 1
        first = await a.admit(1, tokens=1)
        assert not first.admitted and not first.by_tokens and first.token_view is None
        client = redis.Redis.from_url(server.url)
        assert client.get("queueref:{leave}:tokens:0") == b"2"
        client.close()
        await a.close()
        await b.close()
        c = pair(server, protocol, 4, "ge", "lapse")
        await c[0].start()
        assert (await c[0].admit(1, tokens=4)).admitted
        await c[0].close()  # no more heartbeats: its lease lapses after 400 ms
        await c[1].start()
        assert (await c[1].admit(1, tokens=1)).by_tokens
        await asyncio.sleep(0.6)
        assert (await c[1].admit(1, tokens=1)).token_view == 0
        await c[1].close()

    asyncio.run(scenario())


def test_ADM_STORE_10_bad_tokens_and_garbage_tokens(server: RedisServer) -> None:
    """ADM-STORE-10, ADM-STORE-6: bad token arguments name the problem and change nothing;
    a garbage tokens key is a store failure under the policy (closed: 503)."""

    async def scenario() -> None:
        a, b = pair(server, StoreProtocol.SLOTS, 4, "ge", "bad")
        with pytest.raises(ValueError, match="max_num_queued_tokens"):
            RedisAdmissionStore(StoreConfig(server.url, "x", 1, 0), 1, -1)
        await a.start()
        await b.start()
        with pytest.raises(ValueError, match="tokens must be an int >= 0"):
            await a.admit(1, tokens=-1)
        with pytest.raises(ValueError, match=r"tokens must be an int in \[0, 0\]"):
            await a.release_tokens(1)
        assert (a.count, a.tokens) == (0, 0)
        client = redis.Redis.from_url(server.url)
        client.set("queueref:{bad}:tokens:1", b"-3")
        client.close()
        with pytest.raises(StoreUnavailableError):
            await a.admit(1, tokens=1)
        await a.close()
        await b.close()

    asyncio.run(scenario())


@pytest.mark.e2e
@pytest.mark.parametrize("protocol", list(StoreProtocol))
def test_ADM_STORE_10_two_nodes_share_one_token_limit(
    server: RedisServer, protocol: StoreProtocol, tmp_path: Path
) -> None:
    """ADM-STORE-10: two serve groups of one server share Mt = 8 through one Redis under
    load with 4-token prompts: the merged trace has token rejections and prefills, no
    forbidden decision, and the queued tokens within their bound (OB-TOK-1 over N = 2,
    one server's for the script)."""
    nodes = []
    for name in ("a", "b"):
        base = allocate_node(server.url, f"tok-{protocol.value}", name, 1, 2)
        nodes.append(NodeStore(server.url, f"tok-{protocol.value}", name, base, 2, protocol))
    groups = [
        HttpServers(1, 4, "check-then-write", service_time_ms=200, trace_dir=tmp_path / "t",
                    store=node, max_num_queued_tokens=8, token_rule="ge")
        for node in nodes
    ]  # fmt: skip
    body = json.dumps({"prompt": "one two three four"}).encode()
    try:
        for group in groups:
            group.start()

        async def load() -> int:
            reports = await asyncio.gather(*(run_builtin(g.url, 6, 2.0, body=body) for g in groups))
            return sum(r.ok for r in reports)

        ok = asyncio.run(load())
    finally:
        for group in groups:
            group.close()
    events = read_trace_folder(tmp_path / "t", 2).events
    mode = "locked" if protocol is StoreProtocol.SCRIPT else "check-then-write"
    report = check_admission_trace(events, 2, 4, 1, mode=mode, max_num_queued_tokens=8)
    assert not report.violations, report.violations[:3]
    assert ok > 5 and report.counts.get("prefill_done", 0) == report.counts["admit"]
    assert any(e.event == "reject" and e.token_view is not None for e in events)
    assert report.token_bound == (8 - 1 + (4 if mode == "locked" else 2 * 4))
    assert report.token_bound_holds and report.ok
