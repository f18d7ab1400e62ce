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

from queueref.admission import protocol
from queueref.admission.protocol import TokenRule
from queueref.errors import AdmissionRejected
from queueref.runtime.store.redis_config import (
    StoreConfig,
    StoreFailurePolicy,
    StoreProtocol,
    redact_url,
)
from queueref.runtime.store.redis_connect import async_client
from queueref.runtime.store.redis_scripts import (
    ADMIT_SCRIPT,
    MAX_COUNT,
    WRITE_SCRIPT,
    StoreCorruptError,
    StoreError,
    heartbeat_live,
    parse_count,
)
from queueref.validators import is_int_at_least

__all__ = ["RedisAdmissionStore", "StoreDecision", "StoreUnavailableError"]


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
    """What one check decided: `view` is the global count it read (None when degraded).

    With a token limit `token_view` is the global queued tokens it read (None when the
    request limit rejected first, or degraded); `by_tokens` a rejection by the token limit.
    """

    admitted: bool
    view: int | None
    degraded: bool = False
    token_view: int | None = None
    by_tokens: bool = False


class RedisAdmissionStore:
    """One API server's handle on the deployment's counters in Redis.

     The store keeps this server's own unfinished count (`count`) and writes it
     as an absolute value after every change, so a write lost while the store
     was down, or a count dropped by an expired lease, heals at the next write
    . Every command goes through one lock.
    """

    def __init__(
        self,
        config: StoreConfig,
        max_num_queued_reqs: int,
        max_num_queued_tokens: int | None = None,
        token_rule: TokenRule | str = TokenRule.GE,
    ) -> None:
        if not is_int_at_least(max_num_queued_reqs, 0):
            raise ValueError(
                f"ADM-STORE-1: max_num_queued_reqs must be an int >= 0, got {max_num_queued_reqs!r}"
            )
        if max_num_queued_tokens is not None and not is_int_at_least(max_num_queued_tokens, 0):
            raise ValueError(
                "ADM-STORE-10: max_num_queued_tokens must be None or an int >= 0, "
                f"got {max_num_queued_tokens!r}"
            )
        self.config = config
        self.cap = max_num_queued_reqs
        self.token_limit = max_num_queued_tokens
        self.token_rule = TokenRule(token_rule)
        self.count = 0
        self.tokens = 0  # the own queued prompt tokens (ADM-STORE-10)
        self._lock = asyncio.Lock()
        # The optional [store] dependency, imported only when a store is used.
        self._client: Any = async_client(config.url, config.sentinel_master, config.timeout_s)
        self._script: Any = self._client.register_script(ADMIT_SCRIPT)
        cfg = config
        self._count_keys = [cfg.count_key(i) for i in range(cfg.num_servers)]
        self._heartbeat_keys = [cfg.heartbeat_key(i) for i in range(cfg.num_servers)]
        self._token_keys = (
            [cfg.tokens_key(i) for i in range(cfg.num_servers)]
            if self.token_limit is not None
            else []
        )

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
        """One check's reads: the global count of the live servers (see `read_views`)."""
        return (await self.read_views())[0]

    async def read_views(self) -> tuple[int, int | None]:
        """One check's reads: the global count and queued tokens of the live servers.

        The own slot counts with this server's own count (it is frozen during
        the check, which holds the lock). Not serialised: `admit` holds the lock.
        The tokens are None without a token limit; with one, each server's count
        and tokens are read together, in one MGET (ADM-STORE-10).

        :raises StoreError: unreachable, or a corrupt count
        """
        cfg = self.config
        num = cfg.num_servers
        tokens_on = self.token_limit is not None
        try:
            check, token_check = protocol.Check(1), protocol.Check(1)
            if cfg.protocol is StoreProtocol.SNAPSHOT:
                raw = await self._client.mget(
                    self._count_keys + self._heartbeat_keys + self._token_keys
                )
                rows = [(raw[i], raw[num + i], raw[2 * num + i] if tokens_on else None)
                        for i in range(num)]  # fmt: skip
            else:
                rows = []
                for index in range(num):
                    if index == cfg.server_index:
                        rows.append((None, None, None))
                        continue
                    keys = [self._count_keys[index], self._heartbeat_keys[index]]
                    got = await self._client.mget(keys + self._token_keys[index : index + 1])
                    rows.append((got[0], got[1], got[2] if tokens_on else None))
            for index, (count, heartbeat, queued) in enumerate(rows):
                check = check.read(self._slot_value(index, count, heartbeat))
                token_check = token_check.read(self._tokens_value(index, queued, heartbeat))
        except Exception as error:
            raise self._unavailable(error) from None
        return check.view, token_check.view if tokens_on else None

    def _tokens_value(self, index: int, queued: bytes | None, heartbeat: bytes | None) -> int:
        if index == self.config.server_index:
            return self.tokens
        value = parse_count(queued)
        return value if heartbeat_live(heartbeat) else 0

    def _slot_value(self, index: int, count: bytes | None, heartbeat: bytes | None) -> int:
        if index == self.config.server_index:
            return self.count
        value = parse_count(count)
        # ADM-STORE-4: an expired lease reads as 0; ADM-STORE-6: a garbage heartbeat is an error.
        return value if heartbeat_live(heartbeat) else 0

    async def admit(
        self,
        n: int = 1,
        on_decision: Callable[[StoreDecision], None] | None = None,
        tokens: int = 0,
    ) -> StoreDecision:
        """Check and, if admitted, add `n` (and `tokens`) to the own counts and write them.

        Under the lock, so one check at a time per server: then the records of
        real servers keep each protocol's bound. The request limit decides
        first; with a token limit, the token rule on the global queued tokens
        then (ADM-STORE-10). When the store fails: `closed` raises
        `StoreUnavailableError`; `open` decides against `fallback_cap` (and
        floor(Mt / N)) with the own counts. `on_decision(decision)` runs right
        after the decision and before the own slot is written (the stamp of an
        admission record, ADM-EV-3); with `script` decision and write are one
        step, so it runs after both.

        :raises ValueError: n is not an int >= 1, tokens not an int >= 0
        :raises StoreUnavailableError: the store failed and the policy is closed
        """
        if not is_int_at_least(n, 1):
            raise ValueError(f"ADM-STORE-1: n must be an int >= 1, got {n!r}")
        if not is_int_at_least(tokens, 0):
            raise ValueError(f"ADM-STORE-10: tokens must be an int >= 0, got {tokens!r}")
        # ADM-STORE-2: one check at a time per server; ADM-STORE-3 rests on it.
        async with self._lock:
            try:
                if self.config.protocol is StoreProtocol.SCRIPT:
                    # The script decides and writes the own counts in one atomic step.
                    decision = await self._run_script(n, tokens)
                else:
                    decision = self._decide(n, tokens, *await self.read_views())
            except StoreError:
                decision = self._degraded(n, tokens)
                if on_decision is not None:
                    on_decision(decision)
                return decision
            if on_decision is not None:
                on_decision(decision)
            if decision.admitted:
                self.count += n
                self.tokens += tokens
                if self.config.protocol is not StoreProtocol.SCRIPT:
                    # A failed write is retried, absolute, at the next write or heartbeat.
                    with contextlib.suppress(StoreError):
                        await self._write_locked()
            return decision

    def _decide(self, n: int, tokens: int, view: int, token_view: int | None) -> StoreDecision:
        if not protocol.admits_check_then_write(view, n, self.cap):
            return StoreDecision(False, view)
        if self.token_limit is None or token_view is None:
            return StoreDecision(True, view)
        fits = protocol.admits_tokens(self.token_rule, token_view, tokens, self.token_limit)
        return StoreDecision(fits, view, token_view=token_view, by_tokens=not fits)

    async def _run_script(self, n: int, tokens: int) -> StoreDecision:
        cfg = self.config
        limit = -1 if self.token_limit is None else self.token_limit
        args = [cfg.num_servers, cfg.server_index, n, self.cap, self.count, cfg.lease_ms,
                MAX_COUNT, limit, tokens, self.tokens, self.token_rule.value]  # fmt: skip
        keys = self._count_keys + self._heartbeat_keys + self._token_keys
        try:
            if cfg.replicas == 0:
                admitted, view, token_view = await self._script(keys=keys, args=args)
            else:
                async with self._client.pipeline(transaction=False) as pipe:
                    await self._script(keys=keys, args=args, client=pipe)
                    (admitted, view, token_view), acked = await self._waited(pipe)
                # A decision whose write may not survive a failover is not made (closed:
                # 503); the store's higher count heals at the next heartbeat.
                self._check_replicated(acked)
        except StoreError:
            raise
        except Exception as error:
            if "QUEUEREF_CORRUPT" in str(error):
                raise StoreCorruptError(
                    "ADM-STORE-6: a count, heartbeat or tokens key is not an int in [0, MAX_COUNT]"
                ) from None
            raise self._unavailable(error) from None
        if self.token_limit is None or int(admitted) == 0:
            return StoreDecision(int(admitted) == 1, int(view))
        by_tokens = int(admitted) == 2
        return StoreDecision(
            not by_tokens, int(view), token_view=int(token_view), by_tokens=by_tokens
        )

    def _degraded(self, n: int, tokens: int) -> StoreDecision:
        # ADM-STORE-5: closed rejects (503); open admits against floor(M / N) (and
        # floor(Mt / N)), the own counts only.
        if self.config.failure is StoreFailurePolicy.CLOSED:
            raise StoreUnavailableError()
        admitted = protocol.admits_check_then_write(self.count, n, self.fallback_cap)
        if admitted and self.token_limit is not None:
            share = self.token_limit // self.config.num_servers
            admitted = protocol.admits_tokens(self.token_rule, self.tokens, tokens, share)
        if admitted:
            self.count += n
            self.tokens += tokens
        return StoreDecision(admitted, None, degraded=True)

    async def release(
        self, n: int = 1, before_write: Callable[[], None] | None = None, tokens: int = 0
    ) -> None:
        """A request of weight `n` (with `tokens` still queued) finished or was aborted:
        write the smaller counts.

        A failing store leaves the write pending; it is retried (absolute) at
        the next write or heartbeat.

        :raises ValueError: n is not an int in [1, count], tokens not in [0, own tokens]
        """
        if not is_int_at_least(n, 1) or n > self.count:
            raise ValueError(f"ADM-STORE-1: n must be an int in [1, {self.count}], got {n!r}")
        await self.release_tokens(tokens, before_write, requests=n)

    async def release_tokens(
        self, tokens: int, before_write: Callable[[], None] | None = None, requests: int = 0
    ) -> None:
        """A prefill is done: `tokens` leave the own queued tokens, written (ADM-STORE-10).

        :raises ValueError: tokens is not an int in [0, own tokens]
        """
        if not is_int_at_least(tokens, 0) or tokens > self.tokens:
            raise ValueError(
                f"ADM-STORE-10: tokens must be an int in [0, {self.tokens}], got {tokens!r}"
            )
        async with self._lock:
            self.count -= requests
            self.tokens -= tokens
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
        keys = [self._count_keys[own], self._heartbeat_keys[own], *self._token_keys[own : own + 1]]
        try:
            if cfg.replicas == 0:
                async with self._client.pipeline(transaction=True) as pipe:
                    pipe.set(keys[0], self.count)
                    pipe.set(keys[1], 1, px=cfg.lease_ms)
                    if len(keys) == 3:
                        pipe.set(keys[2], self.tokens)
                    await pipe.execute()
                return
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.eval(WRITE_SCRIPT, len(keys), *keys, self.count, cfg.lease_ms, self.tokens)
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
        # ADM-FAULT-3: a write on fewer replicas than asked may be lost in a failover.
        if acked < self.config.replicas:
            raise StoreError(
                f"ADM-FAULT-3: a write reached {acked} of {self.config.replicas} replica(s)"
            )

    async def run_heartbeats(self) -> None:
        """Renew the lease every lease/3 until cancelled."""
        while True:
            await asyncio.sleep(self.config.lease_ms / 3000)
            await self.heartbeat()
