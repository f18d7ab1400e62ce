"""A serve group's admission through the multi-node store (`serve --store`).

Models no vLLM file (vLLM 0.30.0 and 0.33.0 share the cap only within one
node, through a `RawArray`). Each API server process of a node admits
through `queueref.runtime.store.redis_store.RedisAdmissionStore`; its global index is the
node's base (allocated in the store by node name) plus its local index, and
every decision is recorded as an `AdmissionEvent` under that global index,
with the node name in the request id, so the records of several nodes merge
into one trace (ADM-STORE-8).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from queueref.admission.protocol import TokenRule
from queueref.admission.tracker import child_request_ids
from queueref.errors import MaxQueuedTokensError, QueueOverflowError
from queueref.runtime.store.redis_config import (
    StoreConfig,
    StoreFailurePolicy,
    StoreProtocol,
    redact_url,
)
from queueref.runtime.store.redis_scripts import StoreError
from queueref.runtime.store.redis_store import RedisAdmissionStore, StoreDecision
from queueref.trace.events import AdmissionEvent, EventKind

Recorder = Callable[[AdmissionEvent], None]


@dataclass(frozen=True)
class NodeStore:
    """What every server process of one node needs to reach the store."""

    url: str
    deployment: str
    node: str
    base: int  # the global index of this node's server 0
    total_servers: int  # N: every server of the deployment, on every node
    protocol: StoreProtocol = StoreProtocol.SLOTS
    lease_ms: int = 3000
    failure: StoreFailurePolicy = StoreFailurePolicy.CLOSED
    sentinel_master: str | None = None  # ADM-FAULT-3: the URL names a Sentinel
    replicas: int = 0  # ADM-FAULT-3: WAIT for this many replicas after each write

    def config(self, local_index: int) -> StoreConfig:
        return StoreConfig(
            self.url,
            self.deployment,
            self.total_servers,
            self.base + local_index,
            self.protocol,
            self.lease_ms,
            self.failure,
            sentinel_master=self.sentinel_master,
            replicas=self.replicas,
        )

    def __repr__(self) -> str:  # ADM-STORE-7: the password never shows
        return (
            f"NodeStore(url={redact_url(self.url)!r}, deployment={self.deployment!r}, "
            f"node={self.node!r}, base={self.base}, total_servers={self.total_servers}, "
            f"protocol={self.protocol.value!r})"
        )


class _Stamp:
    """Called just before a slot write: the `t_before` of its record (ADM-EV-5)."""

    at: float | None = None

    def __call__(self) -> None:
        self.at = time.monotonic()


class StoreFront:
    """One server's admission through the store, recording every decision (ADM-EV-3).

    With a token limit the request's prompt tokens go through the store too
    (ADM-STORE-10): admitted with the request, out at its prefill or its end,
    recorded as the local front records them (`tokens`, `token_view`,
    `prefill_done`), so `check-trace --max-num-queued-tokens` judges the merged trace.
    """

    def __init__(
        self,
        node: NodeStore,
        local_index: int,
        cap: int | None,
        record: Recorder | None,
        max_num_queued_tokens: int | None = None,
        token_rule: TokenRule | str = TokenRule.GE,
    ) -> None:
        if cap is None:
            raise ValueError("ADM-STORE-8: admission through the store needs a request cap")
        self.node = node
        self.store = RedisAdmissionStore(
            node.config(local_index), cap, max_num_queued_tokens, token_rule
        )
        self.server = node.base + local_index
        self._record = record
        self._tokens_on = max_num_queued_tokens is not None
        # request id -> [n, prompt tokens p, internal ids whose prefill is done]
        self._held: dict[str, tuple[int, int, set[str]]] = {}
        self.last_view = 0
        self.last_token_view = 0
        self._heartbeats: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Register with the store and renew the lease every lease/3 (ADM-STORE-4).

        A store that cannot be reached now is no reason not to serve (ADM-STORE-5):
        the heartbeats write the count once it answers. A deployment with another
        server count refuses this server (ValueError, ADM-STORE-7).
        """
        with contextlib.suppress(StoreError):
            await self.store.start()
        self._heartbeats = asyncio.create_task(self.store.run_heartbeats())

    async def close(self) -> None:
        if self._heartbeats is not None:
            self._heartbeats.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeats
            self._heartbeats = None
        await self.store.close()

    def _emit(
        self,
        kind: EventKind,
        request_id: str,
        n: int,
        view: int | None,
        before: float | None = None,
        tokens: int | None = None,
        token_view: int | None = None,
    ) -> None:
        if self._record is not None:
            self._record(
                AdmissionEvent(
                    time.monotonic(), self.server, kind, request_id, n, view, before,
                    tokens, token_view,
                )
            )  # fmt: skip

    async def admit(self, request_id: str, n: int, num_prompt_tokens: int = 1) -> list[str]:
        """Admit `request_id` with `n` slots (and n * p tokens), or raise
        `QueueOverflowError`, `MaxQueuedTokensError` or `StoreUnavailableError` (all 503)."""
        prompt = num_prompt_tokens if self._tokens_on else None

        def stamp(decision: StoreDecision) -> None:
            # ADM-EV-3: stamped after the decision, before the own slot is written.
            kind: EventKind = "admit" if decision.admitted else "reject"
            view = None if decision.by_tokens else decision.view
            self._emit(kind, request_id, n, view, None, prompt, decision.token_view)

        weight = n * num_prompt_tokens if self._tokens_on else 0
        decision = await self.store.admit(n, on_decision=stamp, tokens=weight)
        if decision.view is not None:
            self.last_view = decision.view
        if decision.token_view is not None:
            self.last_token_view = decision.token_view
        if decision.by_tokens:
            raise MaxQueuedTokensError(
                queued_tokens=decision.token_view, limit=self.store.token_limit
            )
        if not decision.admitted:
            raise QueueOverflowError(view=decision.view, n=n, limit=self.store.cap)
        self._held[request_id] = (n, num_prompt_tokens, set())
        return child_request_ids(request_id, n)

    async def prefill_done(self, request_id: str) -> None:
        """The prefill of every internal request of `request_id` is done: its tokens leave."""
        held = self._held.get(request_id)
        if held is None or not self._tokens_on:
            return
        n, prompt, done = held
        for internal in child_request_ids(request_id, n):
            if internal in done:
                continue
            done.add(internal)
            stamp = _Stamp()
            await self.store.release_tokens(prompt, before_write=stamp)
            self._emit("prefill_done", internal, 1, None, stamp.at, prompt)

    async def _depart(self, kind: EventKind, request_id: str) -> None:
        n, prompt, done = self._held.pop(request_id, (0, 0, set()))
        if n == 0:
            return
        queued = (n - len(done)) * prompt if self._tokens_on else 0
        stamps: list[float] = []
        await self.store.release(
            n, before_write=lambda: stamps.append(time.monotonic()), tokens=queued
        )
        self._emit(kind, request_id, n, None, stamps[0] if stamps else None)

    async def finish(self, request_id: str) -> None:
        await self._depart("finish", request_id)

    async def abort(self, request_id: str) -> None:
        await self._depart("abort", request_id)
