"""The wire format against vLLM 0.30.0's rules (E2E-SRV-2, E2E-SRV-5).

The expected bodies are written here from vLLM 0.30.0's source, not computed
by queueref: `create_error_response` in
`vllm/entrypoints/serve/exception_handling/error_response.py` names a
`GracefulHTTPError` `HTTPStatus(exc.http_status).phrase` with `param` None
and the exception's message; a `VLLMValidationError` is "BadRequestError",
400, `param` its `parameter`, message `str(exc)` (which appends
"(parameter=..., value=...)"); `handlers/validation.py` names a
`RequestValidationError` `HTTPStatus.BAD_REQUEST.phrase` ("Bad Request"),
`param` the cleaned `loc`; `handlers/http.py` names an `HTTPException` by its
phrase. vLLM 0.33.0's `error_response.py` is the same for these cases.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import pytest

from queueref.errors import MaxQueuedTokensError, QueueOverflowError
from queueref.runtime.http.wire import (
    BadRequest,
    busy_body,
    is_busy_body,
    parse_completion_body,
    status_body,
)


def vllm_error(message: str, error_type: str, code: int, param: str | None) -> dict[str, Any]:
    """vLLM 0.30.0's `ErrorResponse(error=ErrorInfo(...)).model_dump()`, field by field."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def same_fields(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert list(ours) == ["error"] and set(ours["error"]) == set(theirs["error"])
    for key in ("message", "type", "param", "code"):
        assert ours["error"][key] == theirs["error"][key], key
    assert json.loads(json.dumps(ours)) == theirs


@pytest.mark.parametrize("error", [QueueOverflowError(), MaxQueuedTokensError()])
def test_503_body_is_vllms(error: Exception) -> None:
    """E2E-SRV-2: type "Service Unavailable" (HTTPStatus(503).phrase), param null, code 503."""
    message = str(getattr(error, "message", error))
    same_fields(busy_body(message), vllm_error(message, "Service Unavailable", 503, None))
    assert is_busy_body(json.dumps(busy_body(QueueOverflowError().message)).encode())
    old_shape = vllm_error(QueueOverflowError().message, "ServiceUnavailableError", 503, None)
    assert not is_busy_body(json.dumps(old_shape).encode())


def test_token_503_is_a_busy_body() -> None:
    """E2E-SRV-8: the token rejection's body is a documented 503; another message is not."""
    assert is_busy_body(json.dumps(busy_body(MaxQueuedTokensError().message)).encode())
    assert not is_busy_body(json.dumps(busy_body("The server is on fire.")).encode())


JSON = "application/json"

BAD_BODIES = [
    # (content type, body, vLLM 0.30.0's answer)
    (
        JSON,
        b'{"prompt": "hi", "n": 0}',
        vllm_error("n must be at least 1, got 0.", "BadRequestError", 400, None),
    ),
    (
        JSON,
        b'{"prompt": "hi", "n": -1}',
        vllm_error("n must be at least 1, got -1.", "BadRequestError", 400, None),
    ),
    (
        JSON,
        b'{"prompt": "hi", "n": 1000000000}',
        vllm_error(
            "n must be at most 16384, got 1000000000. To increase this limit, set the "
            "VLLM_MAX_N_SEQUENCES environment variable.",
            "BadRequestError",
            400,
            None,
        ),
    ),
    (
        JSON,
        b'{"prompt": "hi", "max_tokens": 0}',
        vllm_error(
            "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)",
            "BadRequestError",
            400,
            "max_tokens",
        ),
    ),
    (
        JSON,
        b'{"n": 2}',
        vllm_error(
            "Either prompt or prompt_embeds must be provided and non-empty. (parameter=prompt)",
            "BadRequestError",
            400,
            "prompt",
        ),
    ),
]


@pytest.mark.parametrize(("content_type", "raw", "expected"), BAD_BODIES)
def test_value_errors_are_vllms_bad_request_error(
    content_type: str, raw: bytes, expected: dict[str, Any]
) -> None:
    """E2E-SRV-5: VLLMValidationError: 400, "BadRequestError", its parameter, str(exc)."""
    with pytest.raises(BadRequest) as caught:
        parse_completion_body(content_type, raw)
    same_fields(caught.value.body, expected)
    assert caught.value.status == 400


SCHEMA_ERRORS = [
    (JSON, b'{"prompt": "hi", "n": "abc"}', "body.n"),
    (JSON, b'{"prompt": "hi", "n": 1.5}', "body.n"),
    (JSON, b'{"prompt": "hi", "n": true}', "body.n"),
    (JSON, b'{"prompt": "hi", "max_tokens": "many"}', "body.max_tokens"),
    (JSON, b'{"prompt": 5}', "body.prompt"),
    (JSON, b"[1, 2]", "body"),
    (JSON, b"", "body"),
    (JSON, b'{"prompt": "hi"', "body.15"),
    (JSON, b"not json", "body.0"),
    ("text/plain", b'{"prompt": "hi"}', "body"),
]


@pytest.mark.parametrize(("content_type", "raw", "param"), SCHEMA_ERRORS)
def test_schema_errors_are_vllms_bad_request(content_type: str, raw: bytes, param: str) -> None:
    """E2E-SRV-5: RequestValidationError: 400, "Bad Request" (the phrase), param the loc."""
    with pytest.raises(BadRequest) as caught:
        parse_completion_body(content_type, raw)
    body = caught.value.body
    expected = vllm_error(body["error"]["message"], "Bad Request", 400, param)
    same_fields(body, expected)
    assert body["error"]["message"] and "\n" not in body["error"]["message"]


def test_framework_errors_are_the_status_phrase() -> None:
    """E2E-SRV-5: HTTPException: message and type are the phrase, param null."""
    same_fields(
        status_body(HTTPStatus.METHOD_NOT_ALLOWED),
        vllm_error("Method Not Allowed", "Method Not Allowed", 405, None),
    )
    same_fields(status_body(HTTPStatus.NOT_FOUND), vllm_error("Not Found", "Not Found", 404, None))


@pytest.mark.parametrize(
    ("raw", "slots", "tokens"),
    [
        (b'{"prompt": "hello there", "n": 3, "max_tokens": 8}', 3, 2),
        (b'{"prompt": [1, 2, 3, 4]}', 1, 4),
        (b'{"prompt_token_ids": [5, 6], "n": 2}', 2, 2),
        (b'{"prompt": ["a b", "c"], "n": 2}', 4, 2),
        (b'{"prompt": "x", "n": 16384}', 16384, 1),
    ],
)
def test_good_bodies_give_the_real_n(raw: bytes, slots: int, tokens: int) -> None:
    """E2E-SRV-5: n per prompt is what admission takes; the prompt's tokens are counted."""
    body = parse_completion_body("application/json; charset=utf-8", raw)
    assert (body.slots, body.num_prompt_tokens) == (slots, tokens)
