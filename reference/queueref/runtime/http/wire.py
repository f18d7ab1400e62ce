"""The HTTP wire format of the completion endpoint: request bodies and error bodies.

Shared by the server (`queueref.runtime.http.app`) and the client (`queueref.runtime.loadgen`),
so neither imports the other. Models how vLLM 0.30.0's OpenAI-compatible
server reads a `/v1/completions` body (`CompletionRequest` in
`vllm/entrypoints/openai/completion/protocol.py`, `SamplingParams._verify_args`
in `vllm/sampling_params.py`) and how it answers errors
(`vllm/entrypoints/serve/exception_handling/`: `create_error_response` in
`error_response.py`, the handlers in `handlers/http.py` and
`handlers/validation.py`; unchanged for these cases in 0.33.0). Every error
body is `{"error": {"message", "type", "param", "code"}}` (E2E-SRV-5):

* a `GracefulHTTPError` (`QueueOverflowError`, `MaxQueuedTokensError`):
  503, `type` `HTTPStatus(503).phrase` = `"Service Unavailable"`, `param` null;
* a `VLLMValidationError` (n < 1, n > 16384, max_tokens < 1, no prompt): 400,
  `type` `"BadRequestError"`, `param` its `parameter`;
* a `RequestValidationError` (not JSON, not an object, a field of the wrong
  type): 400, `type` `HTTPStatus(400).phrase` = `"Bad Request"`, `param` the
  cleaned `loc` (e.g. `body.n`);
* an `HTTPException` (a wrong method, an unknown path): its status, `message`
  and `type` its phrase, `param` null.

Deliberate divergences from vLLM 0.30.0:

* The `message` of a schema error is queueref's one line, not pydantic's
  rendering of its error list; `type`, `code` and `param` follow vLLM.
* `n` and `max_tokens` must be JSON integers: pydantic's lax mode also takes
  `"3"`, `3.0` and `true`.
* `prompt_token_ids` (a list of token ids) is accepted in place of `prompt`
  (queueref's: vLLM 0.30.0 reads token ids from `prompt` only).
* A batch of P prompts is admitted as one request of `n * P` slots, all or
  nothing; vLLM admits each prompt on its own.
* A body over `MAX_BODY_BYTES` is refused with 413; vLLM sets no such limit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Final, TypeGuard

from queueref.validators import is_int

#: The paths of the completion endpoint (E2E-SRV-2).
COMPLETION_PATHS: Final = ("/v1/completions", "/v1/chat/completions")

#: vLLM 0.30.0's default `VLLM_MAX_N_SEQUENCES`: the largest `n` it accepts.
MAX_N: Final = 16384

#: The largest request body read (E2E-SRV-5); a longer one is answered 413.
MAX_BODY_BYTES: Final = 1 << 20

#: The `type` of a 503: `HTTPStatus(503).phrase`, as vLLM 0.30.0's `create_error_response`
#: names a `GracefulHTTPError` (E2E-SRV-2).
BUSY_ERROR_TYPE: Final = HTTPStatus.SERVICE_UNAVAILABLE.phrase

#: The `type` of a value check that fails (`VLLMValidationError` in vLLM 0.30.0).
VALUE_ERROR_TYPE: Final = "BadRequestError"

#: The `type` of a body that breaks the request schema (`RequestValidationError`).
SCHEMA_ERROR_TYPE: Final = HTTPStatus.BAD_REQUEST.phrase

#: The body the load generator sends (E2E-LOAD-1).
REQUEST_BODY: Final = b'{"model": "queueref-simulated", "prompt": "hello", "max_tokens": 16}'


def error_body(
    message: str, error_type: str, code: int, param: str | None = None
) -> dict[str, Any]:
    """vLLM's `ErrorResponse` as JSON data (E2E-SRV-5)."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def busy_body(message: str) -> dict[str, Any]:
    """The JSON body of a 503 (E2E-SRV-2): vLLM 0.30.0's answer to a `GracefulHTTPError`."""
    return error_body(message, BUSY_ERROR_TYPE, HTTPStatus.SERVICE_UNAVAILABLE.value)


def status_body(status: HTTPStatus) -> dict[str, Any]:
    """The body of a framework error (405, 404, 413): message and type are the phrase."""
    return error_body(status.phrase, status.phrase, status.value)


def is_busy_body(body: bytes) -> bool:
    """Whether `body` is a documented 503 body: busy or backlog, try again (E2E-SRV-2)."""
    try:
        record = json.loads(body)
    except (ValueError, RecursionError):
        return False
    if not isinstance(record, dict) or set(record) != {"error"}:
        return False
    error = record["error"]
    if not isinstance(error, dict) or set(error) != {"message", "type", "param", "code"}:
        return False
    if error["code"] != 503 or error["type"] != BUSY_ERROR_TYPE or error["param"] is not None:
        return False
    message = error["message"]
    # ADM-ERR-1: the request limit says "busy", the token limit "backlog"; both "try again".
    return (
        isinstance(message, str)
        and ("busy" in message or "backlog" in message)
        and "try again" in message
    )


class BadRequest(ValueError):
    """A completion body vLLM would refuse with 400 (E2E-SRV-5); `body` is the answer."""

    def __init__(self, message: str, error_type: str, param: str | None) -> None:
        super().__init__(message)
        self.status = HTTPStatus.BAD_REQUEST
        self.body = error_body(message, error_type, self.status.value, param)


def _schema(message: str, param: str) -> BadRequest:
    return BadRequest(message, SCHEMA_ERROR_TYPE, param)


def _value(message: str, parameter: str | None = None, value: object = None) -> BadRequest:
    # vLLM 0.30.0's VLLMValidationError.__str__ appends "(parameter=..., value=...)".
    extras = [f"parameter={parameter}"] if parameter is not None else []
    if value is not None:
        extras.append(f"value={value}")
    text = f"{message} ({', '.join(extras)})" if extras else message
    return BadRequest(text, VALUE_ERROR_TYPE, parameter)


def _is_token_list(value: object) -> TypeGuard[list[int]]:
    return isinstance(value, list) and all(is_int(t) and t >= 0 for t in value)


@dataclass(frozen=True)
class CompletionBody:
    """What admission needs from a completion request (E2E-SRV-5)."""

    n: int
    num_prompts: int
    num_prompt_tokens: int
    max_tokens: int | None

    @property
    def slots(self) -> int:
        """The slots the request takes: `n` per prompt."""
        return self.n * self.num_prompts


def _prompts(record: dict[str, Any]) -> tuple[int, int]:
    """(number of prompts, prompt tokens of the largest) of `prompt` / `prompt_token_ids`."""
    if "prompt_token_ids" in record and record.get("prompt") is None:
        ids = record["prompt_token_ids"]
        if not _is_token_list(ids) or not ids:
            raise _schema(
                "prompt_token_ids must be a non-empty list of token ids >= 0",
                "body.prompt_token_ids",
            )
        return 1, len(ids)
    prompt = record.get("prompt")
    if isinstance(prompt, str):
        return 1, max(1, len(prompt.split()))
    if _is_token_list(prompt):
        return 1, len(prompt)
    if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
        return len(prompt), max(max(1, len(p.split())) for p in prompt)
    if isinstance(prompt, list) and all(_is_token_list(p) for p in prompt):
        return len(prompt), max(1, max(len(p) for p in prompt))
    raise _schema(
        "prompt must be a string, a list of strings, a list of token ids or a list of lists "
        "of token ids",
        "body.prompt",
    )


def parse_completion_body(content_type: str | None, raw: bytes) -> CompletionBody:
    """The fields of a `/v1/completions` body, or `BadRequest` as vLLM 0.30.0 answers it.

    E2E-SRV-5: the checks run in vLLM's order; the first that fails is the answer.
    """
    if content_type is not None:
        media = content_type.split(";")[0].strip().lower()
        if media != "application/json" and not media.endswith("+json"):
            raise _schema(f"the body must be JSON (Content-Type {media!r})", "body")
    if not raw.strip():
        raise _schema("the request body is missing", "body")
    try:
        record = json.loads(raw)
    except json.JSONDecodeError as error:
        raise _schema(f"JSON decode error: {error.msg}", f"body.{error.pos}") from None
    except (ValueError, RecursionError):
        raise _schema("JSON decode error", "body") from None
    if not isinstance(record, dict):
        raise _schema("the body must be a JSON object", "body")
    # The order of vLLM 0.30.0: the model's before-validators (a prompt is given), then
    # the field types, then SamplingParams' value checks (n first, then max_tokens).
    if record.get("prompt_token_ids") is None and record.get("prompt") in (None, "", []):
        raise _value("Either prompt or prompt_embeds must be provided and non-empty.", "prompt")
    n = record.get("n", 1)
    if not is_int(n):
        raise _schema(f"n must be an integer, got {type(n).__name__}", "body.n")
    max_tokens = record.get("max_tokens", 16)
    if max_tokens is not None and not is_int(max_tokens):
        raise _schema(
            f"max_tokens must be an integer or null, got {type(max_tokens).__name__}",
            "body.max_tokens",
        )
    num_prompts, num_tokens = _prompts(record)
    if n < 1:
        raise _value(f"n must be at least 1, got {n}.")
    if n > MAX_N:
        raise _value(
            f"n must be at most {MAX_N}, got {n}. To increase this limit, set the "
            "VLLM_MAX_N_SEQUENCES environment variable."
        )
    if max_tokens is not None and max_tokens < 1:
        raise _value(f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens", max_tokens)
    return CompletionBody(n, num_prompts, num_tokens, max_tokens)
