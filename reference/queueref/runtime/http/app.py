"""The ASGI app of one API server: completions, metrics, health (E2E-SRV-2, E2E-SRV-3).

Models the completion route of vLLM 0.30.0's OpenAI-compatible server
(`vllm/entrypoints/openai/api_server.py`): the body is read as
`queueref.runtime.http.wire` states, the request is admitted with its real `n`
(`AsyncLLM.check_admission(n)`) and its prompt length, answered 503 with vLLM's body when the
queue is full, and aborted when its client disconnects (vLLM 0.30.0's
`with_cancellation` in `vllm/entrypoints/serve/utils/api_utils.py` races the
handler against `http.disconnect` and cancels it, which aborts the request).

Deliberate divergences from vLLM: the engine is simulated (an admitted
request is held for the service time, with jitter; its prefill is done after
`prefill_ms`, then it is finished); the app is plain ASGI, not FastAPI.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
from collections.abc import Awaitable, Callable, MutableSequence
from http import HTTPStatus
from typing import Any

from queueref.admission.front import APIServer
from queueref.admission.shared_stats import SharedAdmissionStats
from queueref.errors import AdmissionRejected
from queueref.runtime.http.metrics import (
    MODEL_NAME,
    REJECTION_REASONS,
    RejectionCounts,
    family,
    rejection_reason,
)
from queueref.runtime.http.releases import (
    FAULT_HEADER,
    FAULTS,
    VLLM_RELEASES,
    ErrorAnswer,
    ReleaseAnswers,
    release_answers,
)
from queueref.runtime.http.render import RENDER_FAULT, ClientGone, Preflight, RenderFailed
from queueref.runtime.http.store import StoreFront
from queueref.runtime.http.wire import (
    COMPLETION_PATHS,
    MAX_BODY_BYTES,
    BadRequest,
    busy_body,
    error_body,
    parse_completion_body,
    status_body,
)

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: The method each path answers; any other method is 405 (E2E-SRV-5).
_METHODS = {**{path: "POST" for path in COMPLETION_PATHS}, "/metrics": "GET", "/health": "GET"}

#: The pause routes of vLLM 0.33.0 (E2E-SRV-10), served with `--vllm-version 0.33.0` only.
_PAUSE_METHODS = {"/pause": "POST", "/resume": "POST", "/is_paused": "GET"}


class CompletionApp:
    """The ASGI app of one API server (E2E-SRV-2, E2E-SRV-3, E2E-SRV-5, E2E-SRV-6).

    `POST /v1/completions` parses the body (400 for a bad one), admits the
    request with its `n` (check + registration, no await between:
    ADM-FRONT-1), holds it for the service time, finishes every child and
    answers 200; a rejection answers 503 with `busy_body`; a client that
    disconnects while its request is held gets it aborted at once.
    `GET /metrics` is Prometheus text; `GET /health` answers 200.
    """

    def __init__(
        self,
        api: APIServer,
        *,
        service_time_ms: float,
        prefill_ms: float = 0.0,
        jitter: float = 0.2,
        display: SharedAdmissionStats | None = None,
        global_view: SharedAdmissionStats | None = None,
        mode: str = "check-then-write",
        seed: int | None = None,
        id_prefix: str | None = None,
        restarts: Callable[[], list[dict[str, int]]] | None = None,
        store: StoreFront | None = None,
        rejections: RejectionCounts | None = None,
        release: ReleaseAnswers | None = None,
        paused: MutableSequence[int] | None = None,
        preflight: Preflight | None = None,
    ) -> None:
        self._api = api
        self.preflight = preflight  # serve --render-ms: vLLM's whole admission path (E2E-REN-2)
        self._release = release  # serve --vllm-version: answer as that release (E2E-SRV-10)
        # E2E-SRV-10: one pause flag for the group, as vLLM's API servers share one engine.
        self._paused = paused if paused is not None else [0]
        self._methods = {**_METHODS, **(_PAUSE_METHODS if self._pausable else {})}
        # E2E-SRV-9: one array shared by the servers of a group; alone, a server's own.
        self._rejections = (
            rejections
            if rejections is not None
            else RejectionCounts([0] * len(REJECTION_REASONS), 1, 0)
        )
        self._store = store  # serve --store: admission through the multi-node store
        self._service = service_time_ms / 1000.0
        self._prefill = prefill_ms / 1000.0
        self._jitter = jitter
        self._display = display
        self._global = global_view
        self._mode = mode
        self._ids = itertools.count()
        self._random = random.Random(seed)
        self._prefix = id_prefix if id_prefix is not None else f"cmpl-{api.server_index}"
        self._restarts = restarts
        self.admitted = 0
        self.rejected = 0
        self.aborted = 0
        self.bad_requests = 0

    async def startup(self) -> None:
        """With a store: register and start the lease renewals (ADM-STORE-4)."""
        if self._store is not None:
            await self._store.start()

    async def shutdown(self) -> None:
        if self._store is not None:
            await self._store.close()

    @property
    def api(self) -> APIServer:
        """The server's admission front."""
        return self._api

    def _mirror(self) -> None:
        """Local mode: show this server's count in its display slot (never read by admission)."""
        if self._display is not None:
            self._display.set_num_requests(self._api.tracker.get_num_unfinished_requests())
            self._display.set_num_queued_tokens(self._api.tracker.get_num_queued_tokens())

    def global_running(self) -> int:
        """The global count read from the shared counters (the own count without them)."""
        if self._store is not None:
            return self._store.last_view  # the global count the last check read
        if self._global is not None:
            return self._global.get_num_requests()
        return self._api.tracker.get_num_unfinished_requests()

    def global_queued_tokens(self) -> int:
        """The global queued prompt tokens from the shared counters (the own without them)."""
        if self._store is not None:
            return self._store.last_token_view  # the queued tokens the last check read
        if self._global is not None:
            return self._global.get_num_queued_tokens()
        return self._api.controller.read_queued_tokens()

    def metrics_text(self) -> str:
        """Prometheus text of this server's and the global counts (E2E-SRV-3, E2E-SRV-9)."""
        index = str(self._api.server_index)
        own = {"server": index}
        vllm_labels = {"model_name": MODEL_NAME, "server": index}
        limit = self._api.controller.max_num_queued_reqs
        token_limit = self._api.controller.max_num_queued_tokens
        unfinished = self._api.tracker.get_num_unfinished_requests()
        rule = self._api.controller.token_rule.value
        lines = [
            # E2E-SRV-9: vLLM's name keeps vLLM's meaning (requests in the engine), per server.
            *family(
                "vllm:num_requests_running",
                "gauge",
                "Number of requests in model execution batches, of THIS server's simulated "
                "engine only (per server; not the deployment's count, which is "
                "queueref:global_num_requests_running).",
                [(vllm_labels, unfinished)],
            ),
            *family(
                "queueref:num_requests_running",
                "gauge",
                "This server's own unfinished requests: the count it writes into its slot.",
                [(own, unfinished)],
            ),
            *family(
                "queueref:global_num_requests_running",
                "gauge",
                "The global count admission reads: the sum of every server's slot "
                "(the same on every server; in local mode a display admission never reads).",
                [(own, self.global_running())],
            ),
            *family(
                "queueref:max_num_queued_reqs",
                "gauge",
                "The cap M.",
                [({"mode": self._mode}, limit if limit is not None else -1)],
            ),
            *family(
                "queueref:num_queued_tokens",
                "gauge",
                "Prompt tokens of this server still in prefill.",
                [(own, self._api.tracker.get_num_queued_tokens())],
            ),
            *family(
                "queueref:global_num_queued_tokens",
                "gauge",
                "Sum of counter 1 of every server's slot.",
                [(own, self.global_queued_tokens())],
            ),
            *family(
                "queueref:max_num_queued_tokens",
                "gauge",
                "The token cap Mt (-1: none).",
                [
                    (
                        {"mode": self._mode, "rule": rule},
                        token_limit if token_limit is not None else -1,
                    )
                ],
            ),
            *family(
                "queueref:requests",
                "counter",
                "Outcomes of this server's completion requests.",
                [
                    ({"server": index, "outcome": outcome}, count)
                    for outcome, count in (
                        ("admitted", self.admitted),
                        ("rejected", self.rejected),
                        ("aborted", self.aborted),
                        ("bad_request", self.bad_requests),
                    )
                ],
            ),
        ]
        if self._release is None or self._release.rejection_metric:
            lines += self._rejection_lines()  # E2E-SRV-10: from vLLM 0.32.0 on
        if self._restarts is not None:
            # E2E-SRV-7: the parent's restarts of every slot (a shared array, so any server tells).
            lines += family(
                "queueref:server_restarts",
                "counter",
                "Restarts of a server slot by the parent.",
                [
                    ({"server": str(slot), "reason": reason}, count)
                    for slot, counts in enumerate(self._restarts())
                    for reason, count in sorted(counts.items())
                ],
            )
        return "\n".join(lines) + "\n"

    def _rejection_lines(self) -> list[str]:
        """E2E-SRV-9: vLLM 0.32.0's rejection counter, summed over every server."""
        totals = self._rejections.totals()
        reasons = REJECTION_REASONS if self._store is not None else REJECTION_REASONS[:2]
        return family(
            "vllm:admission_rejections",
            "counter",
            "Number of admission attempts rejected by a queue limit, by reason "
            "(every server's, as vLLM's multiprocess registry sums them).",
            [({"model_name": MODEL_NAME, "reason": reason}, totals[reason]) for reason in reasons],
        )

    async def _answer(
        self,
        send: Send,
        status: int,
        body: bytes,
        content_type: bytes = b"application/json",
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
        await send(
            {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}
        )
        await send({"type": "http.response.body", "body": body})

    async def _error(self, send: Send, status: HTTPStatus, body: dict[str, Any]) -> None:
        await self._answer(send, status.value, json.dumps(body).encode())

    async def _read_body(self, receive: Receive) -> bytes | None:
        """The request body, or None when it is over `MAX_BODY_BYTES` (the rest is drained)."""
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size <= MAX_BODY_BYTES:
                chunks.append(chunk)
            more = bool(message.get("more_body", False))
        return b"".join(chunks) if size <= MAX_BODY_BYTES else None

    @staticmethod
    async def _disconnected(receive: Receive) -> None:
        """Returns when the client hangs up (E2E-SRV-6)."""
        while (await receive())["type"] != "http.disconnect":
            pass

    async def complete(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Parse, admit with the real n, hold, finish, answer (E2E-SRV-2, E2E-SRV-5, E2E-SRV-6)."""
        raw = await self._read_body(receive)
        if raw is None:
            self.bad_requests += 1
            await self._error(
                send,
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                status_body(HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
            )
            return
        headers = dict(scope.get("headers") or [])
        content_type = headers.get(b"content-type")
        try:
            body = parse_completion_body(
                content_type.decode("latin-1") if content_type is not None else None, raw
            )
        except BadRequest as bad:
            self.bad_requests += 1
            await self._error(send, bad.status, bad.body)
            return
        fault = headers.get(FAULT_HEADER.encode(), b"").decode("latin-1")
        faults = (*FAULTS, RENDER_FAULT) if self.preflight is not None else FAULTS
        if fault and fault not in faults:  # E2E-SRV-10, E2E-REN-3: a fault not simulated
            self.bad_requests += 1
            message = f"{FAULT_HEADER} must be one of {', '.join(faults)}, got {fault!r}"
            await self._error(send, HTTPStatus.BAD_REQUEST, error_body(message, "Bad Request", 400))
            return
        request_id = f"{self._prefix}-{next(self._ids)}"
        try:
            # ADM-FRONT-1: check + registration in one synchronous step, with the real n.
            if self.preflight is not None:  # E2E-REN-2: preflight, render, registration
                ids = await self.preflight.admit_body(request_id, body, fault, receive)
            elif self._store is not None:
                ids = await self._store.admit(request_id, body.slots, body.num_prompt_tokens)
            else:
                ids = self._api.admit(request_id, body.slots, body.num_prompt_tokens)
        except AdmissionRejected as rejection:
            # E2E-SRV-2: a rejected request gets 503 and vLLM's JSON error body.
            self.rejected += 1
            self._rejections.add(rejection_reason(rejection))
            await self._error(send, HTTPStatus(rejection.http_status), self._busy(rejection))
            return
        except RenderFailed as broken:  # E2E-REN-3: vLLM answers a render error with a 500
            await self._error(send, HTTPStatus.INTERNAL_SERVER_ERROR, broken.body())
            return
        self.admitted += 1
        self._mirror()
        answers = self._release or release_answers(VLLM_RELEASES[0])
        if fault or (self._pausable and self._paused[0]):
            # E2E-SRV-10: the engine fails the request at once (a fault, or vLLM 0.33.0's
            # engine rejecting new work while paused); its slots are given back.
            failure = answers.fault(fault) if fault else answers.paused
            assert failure is not None
            await self._fail(request_id, failure, send)
            return
        finished = False
        gone = asyncio.ensure_future(self._disconnected(receive))
        try:
            spread = self._jitter * self._service
            hold = max(0.0, self._service + self._random.uniform(-spread, spread))
            # E2E-SRV-8: the prompt tokens leave the count when the prefill is done.
            prefill = min(self._prefill, hold)
            done, _ = await asyncio.wait({gone}, timeout=prefill)
            if gone in done:
                raise ClientGone  # E2E-SRV-6: abort at once, as vLLM cancels the handler
            if self._store is None:
                for rid in ids:
                    self._api.prefill_done(rid)
                self._mirror()
            else:  # ADM-STORE-10: the tokens leave the store's count
                await self._store.prefill_done(request_id)
            done, _ = await asyncio.wait({gone}, timeout=hold - prefill)
            if gone in done:
                raise ClientGone
            if self._store is not None:
                await self._store.finish(request_id)
            else:
                for rid in ids:
                    self._api.finish(rid)
            finished = True
            self._mirror()
        finally:
            gone.cancel()
            if not finished:
                # Client gone, or cancelled by a shutdown: give the slots back, as an abort.
                if self._store is not None:
                    await self._store.abort(request_id)
                else:
                    self._api.abort(request_id)
                self.aborted += 1
                self._mirror()
        answer = json.dumps(
            {
                "id": request_id,
                "object": "text_completion",
                "created": int(time.time()),
                "model": "queueref-simulated",
                "choices": [
                    {"index": i, "text": "", "finish_reason": "length"} for i in range(body.slots)
                ],
            }
        ).encode()
        await self._answer(send, 200, answer)

    def _busy(self, rejection: AdmissionRejected) -> dict[str, Any]:
        """E2E-SRV-2, E2E-SRV-10: the 503 body, in the chosen release's words if one is."""
        reason = rejection_reason(rejection)
        if self._release is None or reason == REJECTION_REASONS[2]:
            return busy_body(rejection.message)
        answers = self._release
        return (
            answers.queue_full if reason == REJECTION_REASONS[0] else answers.token_backlog
        ).body()

    @property
    def _pausable(self) -> bool:
        return self._release is not None and self._release.paused is not None

    async def _fail(self, request_id: str, answer: ErrorAnswer, send: Send) -> None:
        """E2E-SRV-10: a request the engine failed: aborted, answered as the release answers."""
        if self._store is not None:
            await self._store.abort(request_id)
        else:
            self._api.abort(request_id)
        self.aborted += 1
        self._mirror()
        await self._error(send, answer.status, answer.body())

    async def _pause_route(self, scope: Scope, send: Send) -> None:
        """E2E-SRV-10: vLLM 0.33.0's /pause (mode=wait only), /resume and /is_paused."""
        path = scope.get("path", "")
        if path == "/is_paused":
            await self._answer(send, 200, json.dumps({"is_paused": bool(self._paused[0])}).encode())
            return
        if path == "/resume":
            self._paused[0] = 0
            await self._answer(send, 200, b'{"status": "resumed"}')
            return
        query = scope.get("query_string", b"").decode("latin-1")
        if "mode=wait" not in query.split("&"):
            # abort and keep (and vLLM's default, abort) are not simulated: say so.
            message = "queueref simulates POST /pause?mode=wait only (in-flight requests finish)"
            await self._answer(send, 400, json.dumps({"error": message}).encode())
            return
        self._paused[0] = 1
        await self._answer(send, 200, b'{"status": "paused"}')

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await self.startup()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await self.shutdown()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path = scope.get("path", "")
        method = scope.get("method", "GET")
        try:
            if path not in self._methods:
                await self._read_body(receive)
                await self._error(send, HTTPStatus.NOT_FOUND, status_body(HTTPStatus.NOT_FOUND))
            elif method != self._methods[path]:
                # E2E-SRV-5: as Starlette answers a route's wrong method in vLLM 0.30.0.
                await self._read_body(receive)
                self.bad_requests += 1
                status = HTTPStatus.METHOD_NOT_ALLOWED
                await self._answer(
                    send,
                    status.value,
                    json.dumps(status_body(status)).encode(),
                    extra=[(b"allow", self._methods[path].encode())],
                )
            elif path in COMPLETION_PATHS:
                await self.complete(scope, receive, send)
            elif path in _PAUSE_METHODS:
                await self._read_body(receive)
                await self._pause_route(scope, send)
            elif path == "/metrics":
                await self._read_body(receive)
                await self._answer(
                    send, 200, self.metrics_text().encode(), b"text/plain; version=0.0.4"
                )
            else:
                await self._read_body(receive)
                await self._answer(send, 200, b"{}")
        except ClientGone:
            return  # nobody to answer; a held request was already aborted
