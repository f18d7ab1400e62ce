"""What each vLLM release answers on the completion endpoint when it cannot serve a request.

`serve --vllm-version V` answers as release V does; without it `serve`
answers admission rejections with queueref's wording (`queueref.runtime.http.wire`).
Every entry below was read from the release's wheel (`vllm/exceptions.py`,
`vllm/v1/engine/exceptions.py`, `create_error_response` in
`vllm/entrypoints/serve/exception_handling/error_response.py`, the handlers
in `handlers/vllm_error.py`, `_raise_if_error` in
`vllm/entrypoints/generate/base/serving.py`, `vllm/v1/metrics/loggers.py`),
and `tests/upstream/test_wire_bodies.py` compares it with the installed
release's own error builder under `make upstream`:

* a full request queue (`QueueOverflowError`) and a token backlog
  (`MaxQueuedTokensError`): `GracefulHTTPError`s, 503, `type` "Service
  Unavailable", vLLM's messages, the same in 0.30.0 to 0.33.0;
* a request the engine finishes with `finish_reason` "error" (a KV load
  failure, say): `_raise_if_error` raises `GenerationError("Internal server
  error")`, 500 "InternalServerError", in 0.30.0 to 0.32.0;
* the engine core dead (`EngineDeadError`): 500 "InternalServerError" with
  its fixed message, in 0.30.0 to 0.32.0 (vLLM then also stops the server;
  queueref's server keeps serving);
* `RetryableRequestError` (0.32.0 and later): 503 "ServiceUnavailableError",
  default message "Request failed; please retry". In 0.32.0 only the pooling
  endpoints raise it (an output with a retryable error); a completion
  finished with "error" is still the 500 above;
* `vllm:admission_rejections` (the `/metrics` counter of rejections by
  reason) exists from 0.32.0.

vLLM 0.33.0 (read from its wheel) keeps the admission and "error" answers,
and changes two:

* a dead engine's answer hides the log message: `create_error_response`
  answers `EngineDeadError` with its `CLIENT_MESSAGE`, "The server had an
  error while processing your request." (500, "InternalServerError");
* `pause_generation` (`POST /pause`, routed only with
  `VLLM_SERVER_DEV_MODE=1`, in `vllm/entrypoints/rl/online/api_router.py`)
  in mode `abort` or `wait` makes the engine core reject each new request
  on arrival (`_reject_add_while_paused` in `vllm/v1/engine/core.py`: a
  retryable `RequestError`, "Generation is paused. Please retry after it
  resumes."), which the output processor turns into a
  `RetryableRequestError`: 503, "ServiceUnavailableError", until
  `POST /resume`. The request was admitted first, so a full queue still
  answers with `QueueOverflowError`. (0.30.0 to 0.32.0 also pause, but queue
  the new requests instead: queueref simulates the 0.33.0 pause only.)
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Final

from queueref.runtime.http.wire import error_body

#: The releases `serve --vllm-version` answers as.
VLLM_RELEASES: Final = ("0.30.0", "0.31.0", "0.32.0", "0.33.0")

#: `header: value` of a completion request that makes the simulated engine fail it.
FAULT_HEADER: Final = "x-queueref-fault"

#: The faults a request can ask for: the engine finishes it with "error", or dies.
FAULTS: Final = ("error", "engine-dead")


@dataclass(frozen=True)
class ErrorAnswer:
    """One error answer of a release: its status, `type` and message (`param` is null)."""

    status: HTTPStatus
    error_type: str
    message: str

    def body(self) -> dict[str, Any]:
        """vLLM's `ErrorResponse` of this answer, as JSON data."""
        return error_body(self.message, self.error_type, self.status.value)


@dataclass(frozen=True)
class ReleaseAnswers:
    """A release's answers on the completion endpoint (E2E-SRV-10)."""

    version: str
    queue_full: ErrorAnswer
    token_backlog: ErrorAnswer
    generation_error: ErrorAnswer
    engine_dead: ErrorAnswer
    retryable: ErrorAnswer | None  # how `create_error_response` answers it; None: no such error
    rejection_metric: bool  # `vllm:admission_rejections` in /metrics
    paused: ErrorAnswer | None = None  # a new request while paused; None: not simulated

    def fault(self, name: str) -> ErrorAnswer:
        """The answer to a request that asked for fault `name` (one of `FAULTS`)."""
        return self.generation_error if name == "error" else self.engine_dead


_BUSY = HTTPStatus.SERVICE_UNAVAILABLE
_QUEUE_FULL = ErrorAnswer(
    _BUSY,
    _BUSY.phrase,
    "The engine is currently busy and cannot accept new requests. "
    "Please try again later or on a different instance.",
)
_TOKEN_BACKLOG = ErrorAnswer(
    _BUSY,
    _BUSY.phrase,
    "The engine has reached its prefill token backlog limit. "
    "Please try again later or on a different instance.",
)
_GENERATION_ERROR = ErrorAnswer(
    HTTPStatus.INTERNAL_SERVER_ERROR, "InternalServerError", "Internal server error"
)
_ENGINE_DEAD = ErrorAnswer(
    HTTPStatus.INTERNAL_SERVER_ERROR,
    "InternalServerError",
    "EngineCore encountered an issue. See stack trace (above) for the root cause.",
)
_RETRYABLE = ErrorAnswer(_BUSY, "ServiceUnavailableError", "Request failed; please retry")
_ENGINE_DEAD_0_33 = ErrorAnswer(
    HTTPStatus.INTERNAL_SERVER_ERROR,
    "InternalServerError",
    "The server had an error while processing your request.",
)
_PAUSED = ErrorAnswer(
    _BUSY, "ServiceUnavailableError", "Generation is paused. Please retry after it resumes."
)

_RELEASES: Final = {
    "0.30.0": ReleaseAnswers(
        "0.30.0", _QUEUE_FULL, _TOKEN_BACKLOG, _GENERATION_ERROR, _ENGINE_DEAD, None, False
    ),
    "0.31.0": ReleaseAnswers(
        "0.31.0", _QUEUE_FULL, _TOKEN_BACKLOG, _GENERATION_ERROR, _ENGINE_DEAD, None, False
    ),
    "0.32.0": ReleaseAnswers(
        "0.32.0", _QUEUE_FULL, _TOKEN_BACKLOG, _GENERATION_ERROR, _ENGINE_DEAD, _RETRYABLE, True
    ),
    "0.33.0": ReleaseAnswers(
        "0.33.0",
        _QUEUE_FULL,
        _TOKEN_BACKLOG,
        _GENERATION_ERROR,
        _ENGINE_DEAD_0_33,
        _RETRYABLE,
        True,
        _PAUSED,
    ),
}


def release_answers(version: str) -> ReleaseAnswers:
    """The answers of vLLM `version`; `ValueError` naming the choices for any other."""
    if version not in _RELEASES:
        raise ValueError(
            f"--vllm-version must be one of {', '.join(VLLM_RELEASES)}, got {version!r}"
        )
    return _RELEASES[version]
