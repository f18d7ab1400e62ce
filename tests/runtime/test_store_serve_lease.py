"""A `serve --store` server renews its lease while it holds requests (ADM-STORE-4).

Real processes, real HTTP on loopback, a real redis-server started for the test.
Found by `make faults`: serve never renewed the lease, so a node holding requests
longer than the lease dropped out of the others' view and they over-admitted.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import redis

from queueref.runtime.http.group import HttpServers
from queueref.runtime.http.store import NodeStore
from queueref.runtime.loadgen import run_builtin
from queueref.runtime.store.redis_config import StoreProtocol, allocate_node
from queueref.runtime.store.redis_server import RedisServer

pytestmark = [pytest.mark.multiprocess, pytest.mark.e2e]


def post(url: str) -> int:
    request = urllib.request.Request(
        url,
        data=json.dumps({"prompt": "hi"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


@pytest.mark.parametrize("protocol", list(StoreProtocol))
def test_ADM_STORE_4_a_busy_node_keeps_its_lease(protocol: StoreProtocol, tmp_path: Path) -> None:
    """ADM-STORE-4: node a holds the cap (2 of M = 2) with requests of 3 s, three times its
    lease of 0.6 s; its servers renew the lease every lease/3, so 1.5 s in its heartbeat is
    live, its count still reads 2, and node b is refused (503)."""
    server = RedisServer()
    server.start()
    deployment = f"lease-{protocol.value}"
    groups: list[HttpServers] = []
    try:
        for name, service in (("a", 3000.0), ("b", 10.0)):
            base = allocate_node(server.url, deployment, name, 1, 2)
            store = NodeStore(server.url, deployment, name, base, 2, protocol, lease_ms=600)
            groups.append(HttpServers(1, 2, "check-then-write", service_time_ms=service, jitter=0.0,
                                      trace_dir=tmp_path / "t", store=store))  # fmt: skip
        for group in groups:
            group.start()
        holder = threading.Thread(
            target=lambda: asyncio.run(run_builtin(groups[0].url, 2, 0.2)), daemon=True
        )
        holder.start()
        time.sleep(1.5)
        client = redis.Redis.from_url(server.url)
        base_a = groups[0].store.base if groups[0].store else 0
        beat = client.get(f"queueref:{{{deployment}}}:hb:{base_a}")
        count = client.get(f"queueref:{{{deployment}}}:count:{base_a}")
        client.close()
        assert beat is not None and count == b"2", (beat, count)
        assert post(groups[1].url) == 503
        holder.join(timeout=10)
    finally:
        for group in groups:
            group.close()
        server.close()
