"""One admission cap across several nodes: the per-server counters in a real Redis.

Models no vLLM file: vLLM's counters (vLLM PR #54746, in vLLM 0.30.0 and
0.33.0) are a `multiprocessing.RawArray`, which shares the cap among the API
servers of one node only. Here each API server of a deployment, on whatever
host, owns one counter key in one Redis; the semantics are in
`specs/multi-node.md`.

Three protocols (ADM-STORE-1):

* `slots`: the server's own key holds its absolute unfinished count, written
  only by that server; a check reads the keys one server at a time, in index
  order (one round trip per server). Each key is a single-writer atomic
  register, so this is the fine-grained model of `specs/overshoot-bound.md`
  and inherits its bound M + (N-1)*min(M, W).
* `snapshot`: one `MGET` of every key -- the atomic-snapshot model, the same
  bound, one round trip.
* `script`: a Lua script that sums, compares and writes atomically inside
  Redis -- admission is linearizable, so the admitted total never exceeds M,
  with none of write-then-check's spurious rejections.

Each server serialises everything it sends (ADM-STORE-2): one check at a
time, writes in order, on one lock. With K unserialised checks in one process
the bound would degrade to M + (N*K - 1)*min(M, W) (OB-BROKEN-1).

Leases (ADM-STORE-4): every write also renews the server's heartbeat key
with a lease; a check ignores the count of a server whose heartbeat expired
(`script` deletes it), so a dead server's capacity comes back after one lease.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from queueref.admission import AdmissionRejected
from queueref.models import protocol
from queueref.redis_config import (
    StoreConfig,
    StoreFailurePolicy,
    StoreProtocol,
    allocate_node,
    redact_url,
)
from queueref.redis_connect import async_client
from queueref.redis_scripts import (
    ADMIT_SCRIPT,
    MAX_COUNT,
    WRITE_SCRIPT,
    StoreCorruptError,
    StoreError,
    heartbeat_live,
    parse_count,
)
from queueref.validators import is_int_at_least

# Re-exported: the configuration moved to `redis_config`, the key layout and its
# validation to `redis_scripts` (issue 25).
__all__ = [
    "MAX_COUNT",
    "RedisAdmissionStore",
    "StoreConfig",
    "StoreCorruptError",
    "StoreDecision",
    "StoreError",
    "StoreFailurePolicy",
    "StoreProtocol",
    "StoreUnavailableError",
    "allocate_node",
    "parse_count",
    "redact_url",
]


class StoreUnavailableError(AdmissionRejected):
    """Rejected because the store cannot be read and the policy is `closed`.

    An `AdmissionRejected`, so the HTTP layer answers it as vLLM answers a
    full queue: 503 with vLLM's error body.
    """

    def __init__(self) -> None:
        super().__init__(
            "The server is busy: the admission store is unavailable. Please try again later."
        )


@dataclass(frozen=True)
class StoreDecision:
    """What one check decided: `view` is the global count it read (None when degraded)."""

    admitted: bool
    view: int | None
    degraded: bool = False


class RedisAdmissionStore:
    """One API server's handle on the deployment's counters in Redis.

     The store keeps this server's own unfinished count (`count`) and writes it
     as an absolute value after every change, so a write lost while the store
     was down, or a count dropped by an expired lease, heals at the next write
    . Every command goes through one lock.
    """

    def __init__(self, config: StoreConfig, max_num_queued_reqs: int) -> None:
        if not is_int_at_least(max_num_queued_reqs, 0):
            raise ValueError(
                f"ADM-STORE-1: max_num_queued_reqs must be an int >= 0, got {max_num_queued_reqs!r}"
            )
        self.config = config
        self.cap = max_num_queued_reqs
        self.count = 0
        self._lock = asyncio.Lock()
        # The optional [store] dependency, imported only when a store is used.
        self._client: Any = async_client(config.url, config.sentinel_master, config.timeout_s)
        self._script: Any = self._client.register_script(ADMIT_SCRIPT)
        cfg = config
        self._count_keys = [cfg.count_key(i) for i in range(cfg.num_servers)]
        self._heartbeat_keys = [cfg.heartbeat_key(i) for i in range(cfg.num_servers)]

    def __repr__(self) -> str:
        return f"RedisAdmissionStore({self.config!r}, cap={self.cap})"

    @property
    def fallback_cap(self) -> int:
        """Under `open`, a degraded server admits against floor(M / N)."""
        return self.cap // self.config.num_servers

    async def start(self) -> None:
        """Register this server: the deployment's server count must agree.

        :raises ValueError: the deployment was started with another server count
        :raises StoreError: the store cannot be reached
        """
        async with self._lock:
            try:
                await self._client.set(self.config.servers_key, self.config.num_servers, nx=True)
                raw = await self._client.get(self.config.servers_key)
            except Exception as error:
                raise self._unavailable(error) from None
            if parse_count(raw) != self.config.num_servers:
                raise ValueError(
                    f"ADM-STORE-7: deployment {self.config.deployment!r} has "
                    f"{raw.decode(errors='replace')} servers in the store, this server was "
                    f"started with {self.config.num_servers}"
                )
            await self._write_locked()

    async def close(self) -> None:
        await self._client.aclose()

    def _unavailable(self, error: BaseException) -> StoreError:
        if isinstance(error, StoreError):
            return error
        # redis-py's messages name host and port, never the password; the URL is redacted.
        return StoreError(
            f"the store {redact_url(self.config.url)} is unavailable ({type(error).__name__})"
        )

    async def read_view(self) -> int:
        """One check's reads: the global count of the live servers.

        The own slot counts with this server's own count (it is frozen during
        the check, which holds the lock). Not serialised: `admit` holds the lock.

        :raises StoreError: unreachable, or a corrupt count
        """
        cfg = self.config
        try:
            check = protocol.Check(1)
            if cfg.protocol is StoreProtocol.SNAPSHOT:
                raw = await self._client.mget(self._count_keys + self._heartbeat_keys)
                values = list(zip(raw[: cfg.num_servers], raw[cfg.num_servers :], strict=True))
                for index, (count, heartbeat) in enumerate(values):
                    check = check.read(self._slot_value(index, count, heartbeat))
            else:
                for index in range(cfg.num_servers):
                    if index == cfg.server_index:
                        check = check.read(self.count)
                        continue
                    count, heartbeat = await self._client.mget(
                        self._count_keys[index], self._heartbeat_keys[index]
                    )
                    check = check.read(self._slot_value(index, count, heartbeat))
        except Exception as error:
            raise self._unavailable(error) from None
        return check.view

    def _slot_value(self, index: int, count: bytes | None, heartbeat: bytes | None) -> int:
        if index == self.config.server_index:
            return self.count
        value = parse_count(count)
        # ADM-STORE-4: an expired lease reads as 0; ADM-STORE-6: a garbage heartbeat is an error.
        return value if heartbeat_live(heartbeat) else 0

    async def admit(
        self, n: int = 1, on_decision: Callable[[bool, int | None], None] | None = None
    ) -> StoreDecision:
        """Check and, if admitted, add `n` to the own count and write it.

        Under the lock, so one check at a time per server: then
        the records of real servers keep each protocol's bound.
        When the store fails: `closed` raises `StoreUnavailableError`; `open`
        decides against `fallback_cap` with the own count. `on_decision(admitted,
        view)` runs right after the decision and before the own slot is written
        (the stamp of an admission record, ADM-EV-3); with `script` decision and
        write are one step, so it runs after both.

        :raises ValueError: n is not an int >= 1
        :raises StoreUnavailableError: the store failed and the policy is closed
        """
        if not is_int_at_least(n, 1):
            raise ValueError(f"ADM-STORE-1: n must be an int >= 1, got {n!r}")
        # ADM-STORE-2: one check at a time per server; ADM-STORE-3 rests on it.
        async with self._lock:
            try:
                if self.config.protocol is StoreProtocol.SCRIPT:
                    # The script decides and writes the own count in one atomic step.
                    admitted, view = await self._run_script(n)
                else:
                    view = await self.read_view()
                    admitted = protocol.admits_check_then_write(view, n, self.cap)
            except StoreError:
                decision = self._degraded(n)
                if on_decision is not None:
                    on_decision(decision.admitted, None)
                return decision
            if on_decision is not None:
                on_decision(admitted, view)
            if admitted:
                self.count += n
                if self.config.protocol is not StoreProtocol.SCRIPT:
                    # A failed write is retried, absolute, at the next write or heartbeat.
                    with contextlib.suppress(StoreError):
                        await self._write_locked()
            return StoreDecision(admitted, view)

    async def _run_script(self, n: int) -> tuple[bool, int]:
        cfg = self.config
        args = [cfg.num_servers, cfg.server_index, n, self.cap, self.count, cfg.lease_ms, MAX_COUNT]
        keys = self._count_keys + self._heartbeat_keys
        try:
            if cfg.replicas == 0:
                admitted, view = await self._script(keys=keys, args=args)
            else:
                async with self._client.pipeline(transaction=False) as pipe:
                    await self._script(keys=keys, args=args, client=pipe)
                    (admitted, view), acked = await self._waited(pipe)
                # A decision whose write may not survive a failover is not made (closed:
                # 503); the store's higher count heals at the next heartbeat.
                self._check_replicated(acked)
        except StoreError:
            raise
        except Exception as error:
            if "QUEUEREF_CORRUPT" in str(error):
                raise StoreCorruptError(
                    "ADM-STORE-6: a count or heartbeat key is not an int in [0, MAX_COUNT]"
                ) from None
            raise self._unavailable(error) from None
        return bool(admitted), int(view)

    def _degraded(self, n: int) -> StoreDecision:
        # ADM-STORE-5: closed rejects (503); open admits against floor(M / N), own count only.
        if self.config.failure is StoreFailurePolicy.CLOSED:
            raise StoreUnavailableError()
        admitted = protocol.admits_check_then_write(self.count, n, self.fallback_cap)
        if admitted:
            self.count += n
        return StoreDecision(admitted, None, degraded=True)

    async def release(self, n: int = 1, before_write: Callable[[], None] | None = None) -> None:
        """A request of weight `n` finished or was aborted: write the smaller count.

        A failing store leaves the write pending; it is retried (absolute) at
        the next write or heartbeat.

        :raises ValueError: n is not an int in [1, count]
        """
        if not is_int_at_least(n, 1) or n > self.count:
            raise ValueError(f"ADM-STORE-1: n must be an int in [1, {self.count}], got {n!r}")
        async with self._lock:
            self.count -= n
            if before_write is not None:
                before_write()  # the `t_before` stamp of a departure record (ADM-EV-5)
            with contextlib.suppress(StoreError):
                await self._write_locked()

    async def heartbeat(self) -> bool:
        """Renew the lease (and write a pending count); False when the store failed."""
        async with self._lock:
            try:
                await self._write_locked()
            except StoreError:
                return False
            return True

    async def _write_locked(self) -> None:
        cfg = self.config
        own = cfg.server_index
        keys = (self._count_keys[own], self._heartbeat_keys[own])
        try:
            if cfg.replicas == 0:
                async with self._client.pipeline(transaction=True) as pipe:
                    pipe.set(keys[0], self.count)
                    pipe.set(keys[1], 1, px=cfg.lease_ms)
                    await pipe.execute()
                return
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.eval(WRITE_SCRIPT, 2, *keys, self.count, cfg.lease_ms)
                _, acked = await self._waited(pipe)
        except Exception as error:
            raise self._unavailable(error) from None
        self._check_replicated(acked)

    async def _waited(self, pipe: Any) -> tuple[Any, int]:
        """Run `pipe` (one write) and then WAIT on its connection: (its answer, replicas)."""
        # Half the command timeout, so WAIT answers before the socket gives up.
        pipe.execute_command("WAIT", self.config.replicas, max(1, int(self.config.timeout_s * 500)))
        answer, acked = await pipe.execute()
        return answer, int(acked)

    def _check_replicated(self, acked: int) -> None:
        # FAULT-SPEC-3: a write on fewer replicas than asked may be lost in a failover.
        if acked < self.config.replicas:
            raise StoreError(
                f"FAULT-SPEC-3: a write reached {acked} of {self.config.replicas} replica(s)"
            )

    async def run_heartbeats(self) -> None:
        """Renew the lease every lease/3 until cancelled."""
        while True:
            await asyncio.sleep(self.config.lease_ms / 3000)
            await self.heartbeat()
