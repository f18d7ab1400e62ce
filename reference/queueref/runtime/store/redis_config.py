"""Where a deployment's counters live: the store's configuration and node allocation.

Apart from the client (`queueref.runtime.store.redis_store`): the URL (its password never
shown, ADM-STORE-7), the deployment, the protocol, the lease and the failure
policy of one server (`StoreConfig`), and the allocation of a node's global
indices by name (`allocate_node`, ADM-STORE-8). `specs/multi-node.md`.
Models no vLLM file (vLLM 0.30.0 and 0.33.0 share counters within one node only).
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from enum import StrEnum

from queueref.runtime.store.redis_connect import sync_client
from queueref.runtime.store.redis_scripts import (
    ALLOCATE_SCRIPT,
    StoreError,
    count_key,
    heartbeat_key,
    key_prefix,
    tokens_key,
)
from queueref.validators import is_int_at_least

_DEPLOYMENT = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class StoreProtocol(StrEnum):
    """How a check reads the counters in the store."""

    SLOTS = "slots"
    SNAPSHOT = "snapshot"
    SCRIPT = "script"


class StoreFailurePolicy(StrEnum):
    """What a server does when the store cannot answer."""

    CLOSED = "closed"  # reject every request: 503
    OPEN = "open"  # admit against the server's share floor(M / N) of the cap


def redact_url(url: str) -> str:
    """The store URL with its password replaced by `***`."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    netloc = f"{user}:***@{host}{port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


@dataclass(frozen=True)
class StoreConfig:
    """Where the counters live and how this server reads them.

    `url` is `redis://[user:password@]host:port/db` (or `rediss://` for TLS);
    keys live under `deployment`, so two deployments on one Redis never share
    a cap.
    """

    url: str
    deployment: str
    num_servers: int
    server_index: int
    protocol: StoreProtocol = StoreProtocol.SLOTS
    lease_ms: int = 3000
    failure: StoreFailurePolicy = StoreFailurePolicy.CLOSED
    timeout_s: float = 0.5
    # ADM-FAULT-3: the URL names a Sentinel that names the primary of this master.
    sentinel_master: str | None = None
    # ADM-FAULT-3: WAIT for this many replicas after every write; fewer is a failed write.
    replicas: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or urllib.parse.urlsplit(self.url).scheme not in (
            "redis",
            "rediss",
        ):
            raise ValueError("ADM-STORE-7: the store URL must start with redis:// or rediss://")
        if not isinstance(self.deployment, str) or not _DEPLOYMENT.fullmatch(self.deployment):
            raise ValueError(
                "ADM-STORE-7: the deployment name must be 1-64 of A-Z a-z 0-9 _ . -, "
                f"got {self.deployment!r}"
            )
        for name, value, low in (
            ("num_servers", self.num_servers, 1),
            ("server_index", self.server_index, 0),
            ("lease_ms", self.lease_ms, 1),
            ("replicas", self.replicas, 0),
        ):
            if not is_int_at_least(value, low):
                raise ValueError(f"ADM-STORE-1: {name} must be an int >= {low}, got {value!r}")
        if self.server_index >= self.num_servers:
            raise ValueError(
                f"ADM-STORE-1: server_index {self.server_index} is not below "
                f"num_servers {self.num_servers}"
            )
        if self.sentinel_master is not None and not _DEPLOYMENT.fullmatch(
            str(self.sentinel_master)
        ):
            raise ValueError(
                "ADM-FAULT-3: the Sentinel master name must be 1-64 of A-Z a-z 0-9 _ . -, "
                f"got {self.sentinel_master!r}"
            )
        object.__setattr__(self, "protocol", StoreProtocol(self.protocol))
        object.__setattr__(self, "failure", StoreFailurePolicy(self.failure))

    def count_key(self, index: int) -> str:
        return count_key(self.deployment, index)

    def heartbeat_key(self, index: int) -> str:
        return heartbeat_key(self.deployment, index)

    def tokens_key(self, index: int) -> str:
        return tokens_key(self.deployment, index)

    @property
    def servers_key(self) -> str:
        return f"{key_prefix(self.deployment)}:servers"

    def __repr__(self) -> str:
        return (
            f"StoreConfig(url={redact_url(self.url)!r}, deployment={self.deployment!r}, "
            f"num_servers={self.num_servers}, server_index={self.server_index}, "
            f"protocol={self.protocol.value!r}, lease_ms={self.lease_ms}, "
            f"failure={self.failure.value!r}, sentinel_master={self.sentinel_master!r}, "
            f"replicas={self.replicas})"
        )


def allocate_node(
    url: str,
    deployment: str,
    node: str,
    node_servers: int,
    total: int,
    sentinel_master: str | None = None,
) -> int:
    """The global index of a node's server 0: node `node` owns `node_servers` slots.

    Allocated in the store by name, atomically, so nodes started anywhere get
    disjoint slots and a restarted node gets its own back (ADM-STORE-8).

    :raises ValueError: a bad name or count, or no room left for the node
    :raises StoreError: the store cannot be reached
    """
    if not isinstance(node, str) or not _DEPLOYMENT.fullmatch(node):
        raise ValueError(
            f"ADM-STORE-8: the node name must be 1-64 of A-Z a-z 0-9 _ . -, got {node!r}"
        )
    config = StoreConfig(url, deployment, total, 0, sentinel_master=sentinel_master)
    if not is_int_at_least(node_servers, 1):
        raise ValueError(f"ADM-STORE-8: node_servers must be an int >= 1, got {node_servers!r}")
    client = sync_client(url, sentinel_master, 2.0)
    prefix = key_prefix(config.deployment)
    try:
        base, _ = client.eval(
            ALLOCATE_SCRIPT, 2, f"{prefix}:nodes", f"{prefix}:next_base", node, node_servers, total
        )
    except Exception as error:
        raise StoreError(
            f"the store {redact_url(url)} is unavailable ({type(error).__name__})"
        ) from None
    finally:
        client.close()
    if int(base) < 0:
        raise ValueError(
            f"ADM-STORE-8: deployment {deployment!r} has no room for node {node!r} "
            f"with {node_servers} servers (total {total})"
        )
    return int(base)
