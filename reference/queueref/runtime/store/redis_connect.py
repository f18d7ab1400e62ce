"""How a store server reaches Redis: one primary by URL, or the primary a Sentinel names.

With `sentinel_master` the URL names a Sentinel (`redis://[user:pw@]host:port/db`,
the password being the data nodes'); every new connection asks it for the
current primary, so after a failover the client follows the promoted replica
(ADM-FAULT-3). Models no vLLM file.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

#: Sentinel's port when the URL names none.
SENTINEL_PORT = 26379


def _sentinel_parts(url: str) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    parts = urllib.parse.urlsplit(url)
    db = parts.path.strip("/")
    target = {
        "username": parts.username,
        "password": parts.password,
        "db": int(db) if db.isdigit() else 0,
    }
    return [(parts.hostname or "127.0.0.1", parts.port or SENTINEL_PORT)], target


def async_client(url: str, sentinel_master: str | None, timeout_s: float) -> Any:
    """A `redis.asyncio.Redis` that retries a command once on a fresh connection."""
    import redis.asyncio
    from redis.asyncio.retry import Retry
    from redis.asyncio.sentinel import Sentinel
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    options: dict[str, Any] = {
        "socket_timeout": timeout_s,
        "socket_connect_timeout": timeout_s,
        # One retry on a fresh connection: after Redis restarts, or a failover, the
        # pooled connection is dead. Every command is safe to repeat: reads, and
        # writes of absolute counts (the script too sets, never adds).
        "retry": Retry(NoBackoff(), 1),
        "retry_on_error": [RedisConnectionError],
    }
    if sentinel_master is None:
        return redis.asyncio.Redis.from_url(url, **options)
    sentinels, target = _sentinel_parts(url)
    make: Any = Sentinel  # redis-py's asyncio Sentinel is not annotated
    found = make(sentinels, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
    return found.master_for(sentinel_master, **target, **options)


def sync_client(url: str, sentinel_master: str | None, timeout_s: float) -> Any:
    """A blocking `redis.Redis` to the primary (node allocation, the fault runs' poller)."""
    import redis
    from redis.sentinel import Sentinel

    options = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s}
    if sentinel_master is None:
        return redis.Redis.from_url(url, **options)
    sentinels, target = _sentinel_parts(url)
    sentinel: Any = Sentinel
    return sentinel(sentinels, **options).master_for(sentinel_master, **target, **options)
