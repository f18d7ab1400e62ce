"""The errors of admission control: a rejection (HTTP 503) and a corrupt counter.

Models the errors of `vllm/exceptions.py` (vLLM PR #54746). Deliberate
note: `AdmissionRejected` derives from `Exception`, not from `ValueError`, so
that a rejection is never mistaken for bad input (vLLM 0.30.0's
`GracefulHTTPError` derives from `Exception` too, through `VLLMError`).
"""

from __future__ import annotations

from http import HTTPStatus


class AdmissionCounterError(RuntimeError):
    """A slot holds a value no server could have written (a negative count): raised instead
    of deciding, so a corrupt counter never admits."""  # ADM-CTL-8


class AdmissionRejected(Exception):
    """A request was refused by admission control; HTTP 503, retry later."""

    # ADM-ERR-1: HTTP 503 with a message that says to try again.
    http_status: int = HTTPStatus.SERVICE_UNAVAILABLE
    default_message: str = "The server cannot accept the request right now. Please try again later."

    def __init__(self, message: str | None = None) -> None:
        self.message = message if message is not None else self.default_message
        super().__init__(self.message)


class QueueOverflowError(AdmissionRejected):
    """Admitting the request would exceed `max_num_queued_reqs`: `view` is the count the
    check read, `n` the request's weight, `limit` the cap."""  # ADM-ERR-1, ADM-CTL-3

    default_message = (
        "The server is busy: its request queue is full. "
        "Please try again later, or send the request to another instance."
    )

    def __init__(
        self,
        message: str | None = None,
        *,
        view: int | None = None,
        n: int | None = None,
        limit: int | None = None,
    ) -> None:
        super().__init__(message)
        self.view = view
        self.n = n
        self.limit = limit


class MaxQueuedTokensError(AdmissionRejected):
    """The queued prompt tokens reached `max_num_queued_tokens`: `queued_tokens` is what
    the check read, `limit` the cap."""  # ADM-ERR-1, ADM-CTL-4

    default_message = (
        "The server has a backlog of prompt tokens waiting for prefill. "
        "Please try again later, or send the request to another instance."
    )

    def __init__(
        self,
        message: str | None = None,
        *,
        queued_tokens: int | None = None,
        limit: int | None = None,
    ) -> None:
        super().__init__(message)
        self.queued_tokens = queued_tokens
        self.limit = limit
