"""`serve --vllm-version`'s table against the installed release's own code (E2E-SRV-10).

Run by `make upstream` once per installed release (tests/upstream/conftest.py),
with that release's `vllm` importable. Each answer of
`queueref.runtime.http.releases` is compared with what the release's own
`create_error_response` makes of the release's own exception (for a request
finished with "error", the exception its own `_raise_if_error` raises), and
the rejection counter with the release's `vllm/v1/metrics/loggers.py`. The
teeth: a table with one answer changed is reported, for that answer.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from types import SimpleNamespace
from typing import Any

import pytest
import vllm
import vllm.exceptions
from vllm.entrypoints.generate.base.serving import GenerateBaseServing
from vllm.entrypoints.serve.exception_handling.error_response import create_error_response
from vllm.v1.engine.core import EngineCoreProc
from vllm.v1.engine.exceptions import EngineDeadError
from vllm.v1.metrics import loggers

from queueref.runtime.http.metrics import REJECTION_REASONS
from queueref.runtime.http.releases import ErrorAnswer, ReleaseAnswers, release_answers

pytestmark = pytest.mark.upstream

RELEASE = os.environ["QUEUEREF_UPSTREAM_RELEASE"]


def body_of(error: Exception) -> dict[str, Any]:
    """The release's own answer to `error`, as JSON data."""
    dumped: dict[str, Any] = create_error_response(error).model_dump()
    return dumped


def raised_by_raise_if_error() -> Exception:
    """What the release's `_raise_if_error` raises for finish_reason "error"."""
    try:
        GenerateBaseServing._raise_if_error(object(), "error", "queueref-probe")  # type: ignore[arg-type]
    except Exception as error:  # noqa: BLE001 - whatever the release raises is the point
        return error
    raise AssertionError("_raise_if_error raised nothing for finish_reason 'error'")


def rejected_while_paused() -> Exception | None:
    """What a paused engine core's rejection of a new request becomes (None: no such path).

    The release's own `_reject_add_while_paused`, on a stand-in engine that is
    paused and holds no request, hands the client an error; the output
    processor turns it into an exception with `to_exception()`.
    """
    reject = getattr(EngineCoreProc, "_reject_add_while_paused", None)
    if reject is None:
        return None
    sent: list[Any] = []
    engine = SimpleNamespace(
        reject_new_requests=True,
        scheduler=SimpleNamespace(has_request=lambda request_id: False),
        _send_finish_outputs_to_client=lambda ids, client, reason, error: sent.append(error),
    )
    request = SimpleNamespace(
        request_id="queueref-probe",
        client_index=0,
        abort_immediately=False,
        kv_transfer_params=None,
    )
    assert reject(engine, request) is True
    (error,) = sent
    exception: Exception = error.to_exception()
    return exception


def differences(answers: ReleaseAnswers) -> list[str]:
    """Each answer of `answers` that the installed release does not give."""
    expected: list[tuple[str, ErrorAnswer | None, Exception | None]] = [
        ("queue_full", answers.queue_full, vllm.exceptions.QueueOverflowError()),
        ("token_backlog", answers.token_backlog, vllm.exceptions.MaxQueuedTokensError()),
        ("generation_error", answers.generation_error, raised_by_raise_if_error()),
        ("engine_dead", answers.engine_dead, EngineDeadError()),
    ]
    retryable = getattr(vllm.exceptions, "RetryableRequestError", None)
    expected.append(("retryable", answers.retryable, retryable() if retryable else None))
    expected.append(("paused", answers.paused, rejected_while_paused()))
    found = []
    for name, ours, error in expected:
        theirs = body_of(error) if error is not None else None
        if (ours.body() if ours is not None else None) != theirs:
            found.append(f"{name}: queueref {ours} != vLLM {theirs}")
    reasons = getattr(loggers, "ADMISSION_REASONS", None)
    has_metric = 'name="vllm:admission_rejections"' in inspect.getsource(loggers)
    if answers.rejection_metric != has_metric or (
        has_metric and tuple(reasons or ()) != REJECTION_REASONS[:2]
    ):
        found.append(f"rejection_metric: queueref {answers.rejection_metric}, vLLM {reasons}")
    return found


def test_the_installed_release_is_the_one_named() -> None:
    """E2E-SRV-10: the comparison is with the release it claims."""
    assert vllm.__version__.startswith(RELEASE), vllm.__version__


def test_every_answer_is_the_releases_own() -> None:
    """E2E-SRV-10: queueref's table for this release is what the release answers."""
    assert differences(release_answers(RELEASE)) == []


@pytest.mark.parametrize(
    "field",
    ["queue_full", "generation_error", "engine_dead", "retryable", "paused", "rejection_metric"],
)
def test_a_changed_answer_is_reported(field: str) -> None:
    """E2E-SRV-10: the teeth: one answer changed is named as a difference."""
    answers = release_answers(RELEASE)
    wrong: object
    if field == "rejection_metric":
        wrong = not answers.rejection_metric
    elif field in ("retryable", "paused"):
        wrong = None if getattr(answers, field) is not None else answers.queue_full
    else:
        wrong = dataclasses.replace(getattr(answers, field), message="Something else.")
    found = differences(dataclasses.replace(answers, **{field: wrong}))
    assert [line.split(":")[0] for line in found] == [field]
