"""`serve --vllm-version`: each release's answers on the wire (E2E-SRV-10).

The expected bodies are written out here from each release's wheel, not
computed by queueref: `QueueOverflowError` and `MaxQueuedTokensError` in
`vllm/exceptions.py` (the same text in 0.30.0, 0.31.0 and 0.32.0),
`_raise_if_error`'s `GenerationError("Internal server error")` in
`vllm/entrypoints/generate/base/serving.py`, `EngineDeadError`'s message in
`vllm/v1/engine/exceptions.py`, and `create_error_response` in
`vllm/entrypoints/serve/exception_handling/error_response.py` (a
`GracefulHTTPError` is typed by its status phrase, a `GenerationError`
"InternalServerError", from 0.32.0 a `RetryableRequestError`
"ServiceUnavailableError"; from 0.33.0 an `EngineDeadError` answers its
`CLIENT_MESSAGE`), and 0.33.0's paused engine (`_reject_add_while_paused` in
`vllm/v1/engine/core.py`). `tests/upstream/test_wire_bodies.py` checks the
same table against the installed releases' own code.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from queueref.admission.protocol import Protocol
from queueref.runtime.http.app import CompletionApp
from queueref.runtime.http.releases import VLLM_RELEASES, release_answers
from queueref.runtime.servers import ServerSpec

BUSY = (
    "The engine is currently busy and cannot accept new requests. "
    "Please try again later or on a different instance."
)
BACKLOG = (
    "The engine has reached its prefill token backlog limit. "
    "Please try again later or on a different instance."
)
DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."
DEAD_0_33 = "The server had an error while processing your request."
PAUSED = "Generation is paused. Please retry after it resumes."


def vllm_error(message: str, error_type: str, code: int) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def app(
    version: str | None,
    cap: int | None = 4,
    tokens: int | None = None,
    paused: list[int] | None = None,
) -> CompletionApp:
    api = ServerSpec(0, 1, None, cap, tokens, Protocol.CHECK_THEN_WRITE).build()
    release = release_answers(version) if version is not None else None
    return CompletionApp(api, service_time_ms=0.0, release=release, paused=paused)


def call(
    target: CompletionApp, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """One request through the ASGI app, in process: (status, body)."""
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)  # the client stays connected
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    pairs = [(b"content-type", b"application/json")] + [
        (k.encode(), v.encode()) for k, v in (headers or {}).items()
    ]
    path, _, query = path.partition("?")
    method = "GET" if path in ("/metrics", "/is_paused") else "POST"
    scope = {
        "type": "http",
        "path": path,
        "method": method,
        "headers": pairs,
        "query_string": query.encode(),
    }
    asyncio.run(target(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


REQUEST = b'{"prompt": "a b c", "max_tokens": 4}'


@pytest.mark.parametrize("version", VLLM_RELEASES)
def test_a_full_queue_and_a_token_backlog_answer_with_the_releases_words(version: str) -> None:
    """E2E-SRV-10: 503, "Service Unavailable", vLLM's own message of that release."""
    status, body = call(app(version, cap=0), "/v1/completions", REQUEST)
    assert (status, json.loads(body)) == (503, vllm_error(BUSY, "Service Unavailable", 503))
    backlog = app(version, cap=None, tokens=0)
    status, body = call(backlog, "/v1/completions", REQUEST)
    assert (status, json.loads(body)) == (503, vllm_error(BACKLOG, "Service Unavailable", 503))


def test_without_a_version_the_wording_stays_queuerefs() -> None:
    """E2E-SRV-2: no --vllm-version, queueref's message (busy ... try again)."""
    status, body = call(app(None, cap=0), "/v1/completions", REQUEST)
    error = json.loads(body)["error"]
    assert status == 503 and error["type"] == "Service Unavailable" and error["message"] != BUSY
    assert "busy" in error["message"] and "try again" in error["message"]


@pytest.mark.parametrize("version", [*VLLM_RELEASES, None])
def test_a_failed_request_is_answered_as_the_release_answers_and_gives_its_slots_back(
    version: str | None,
) -> None:
    """E2E-SRV-10: finish_reason "error" is 500 "Internal server error"; a dead engine 500."""
    target = app(version)
    status, body = call(target, "/v1/completions", REQUEST, {"x-queueref-fault": "error"})
    expected = vllm_error("Internal server error", "InternalServerError", 500)
    assert (status, json.loads(body)) == (500, expected)
    status, body = call(target, "/v1/completions", REQUEST, {"x-queueref-fault": "engine-dead"})
    dead = DEAD_0_33 if version == "0.33.0" else DEAD
    assert (status, json.loads(body)) == (500, vllm_error(dead, "InternalServerError", 500))
    assert target.api.tracker.get_num_unfinished_requests() == 0
    assert (target.admitted, target.aborted) == (2, 2)


def test_an_unknown_fault_is_a_bad_request_and_admits_nothing() -> None:
    """E2E-SRV-10: a fault queueref cannot simulate is 400, never admitted."""
    target = app("0.32.0")
    status, body = call(target, "/v1/completions", REQUEST, {"x-queueref-fault": "fire"})
    assert status == 400 and "x-queueref-fault must be one of error, engine-dead" in body.decode()
    assert target.admitted == 0 and target.bad_requests == 1


def test_the_rejection_counter_appears_with_0_32_0() -> None:
    """E2E-SRV-9, E2E-SRV-10: vllm:admission_rejections is in /metrics from 0.32.0 on."""
    for version, shown in (("0.30.0", False), ("0.31.0", False), ("0.32.0", True), (None, True)):
        target = app(version, cap=0)
        call(target, "/v1/completions", REQUEST)
        _, text = call(target, "/metrics")
        line = 'vllm:admission_rejections_total{model_name="queueref-simulated",'
        assert (line + 'reason="max_num_queued_reqs"} 1' in text.decode()) is shown, version


def test_retryable_is_known_from_0_32_0() -> None:
    """E2E-SRV-10: RetryableRequestError, 503 "ServiceUnavailableError", from 0.32.0 on."""
    assert [release_answers(v).retryable is not None for v in VLLM_RELEASES] == [
        False,
        False,
        True,
        True,
    ]
    retryable = release_answers("0.32.0").retryable
    assert retryable is not None
    assert retryable.body() == vllm_error(
        "Request failed; please retry", "ServiceUnavailableError", 503
    )
    with pytest.raises(
        ValueError, match="--vllm-version must be one of 0.30.0, 0.31.0, 0.32.0, 0.33.0, got '0.29"
    ):
        release_answers("0.29.0")


def test_a_paused_0_33_group_admits_then_answers_503_until_resumed() -> None:
    """E2E-SRV-10: /pause?mode=wait on one server pauses the group (one flag, as one engine)."""
    flag = [0]
    first, second = app("0.33.0", paused=flag), app("0.33.0", paused=flag)
    assert call(first, "/pause?mode=wait") == (200, b'{"status": "paused"}')
    assert json.loads(call(second, "/is_paused")[1]) == {"is_paused": True}
    status, body = call(second, "/v1/completions", REQUEST)
    assert (status, json.loads(body)) == (503, vllm_error(PAUSED, "ServiceUnavailableError", 503))
    assert (second.admitted, second.aborted) == (1, 1)  # admitted first, then the engine refused
    assert second.api.tracker.get_num_unfinished_requests() == 0
    full = app("0.33.0", cap=0, paused=flag)  # the admission check still comes first
    status, body = call(full, "/v1/completions", REQUEST)
    assert (status, json.loads(body)) == (503, vllm_error(BUSY, "Service Unavailable", 503))
    assert call(second, "/resume") == (200, b'{"status": "resumed"}')
    assert call(first, "/v1/completions", REQUEST)[0] == 200


def test_pause_modes_queueref_does_not_simulate_and_older_releases_are_refused() -> None:
    """E2E-SRV-10: abort/keep (and no mode) are 400; before 0.33.0 there is no /pause here."""
    paused = app("0.33.0")
    for query in ("", "?mode=abort", "?mode=keep"):
        status, body = call(paused, "/pause" + query)
        assert status == 400 and "mode=wait only" in json.loads(body)["error"]
    assert json.loads(call(paused, "/is_paused")[1]) == {"is_paused": False}
    for version in ("0.32.0", None):
        assert call(app(version), "/pause?mode=wait")[0] == 404
