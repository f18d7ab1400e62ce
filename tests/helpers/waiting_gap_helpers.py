"""What the lifecycle modules' mutation-gap tests share: the violation an action raises,
requests enqueued and run by their ids, and a snapshot of everything an operation of
`WaitingQueues` could change."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import icontract
import pytest

from queueref import Request, RequestStatus, StepDecision, WaitingQueues
from queueref.waiting.model import LAYOUT_V030


def violation_message(action: Callable[[], object]) -> str:
    """The message of the contract violation `action` raises; anything else fails."""
    try:
        action()
    except icontract.ViolationError as error:
        return str(error)
    except Exception as error:  # noqa: BLE001 - a condition that crashes is a failure too
        pytest.fail(f"expected a contract violation, got {error!r}")
    pytest.fail("expected a contract violation, nothing was raised")


def ids_of(requests: Any) -> list[str]:
    return [r.request_id for r in requests]


def enqueue_ids(
    wq: WaitingQueues, *rids: str, status: RequestStatus = RequestStatus.WAITING, priority: int = 0
) -> None:
    """Enqueue a request per id, arriving in their first letters' order."""
    for rid in rids:
        wq.enqueue(Request(rid, priority, float(ord(rid[0])), status))


def run_all(wq: WaitingQueues, *rids: str) -> list[Any]:
    """Enqueue `rids` (arrival times in their letters' order) and run them all."""
    enqueue_ids(wq, *rids)
    ran = wq.schedule_step(lambda r: StepDecision.RUN)
    assert ids_of(ran) == list(rids)
    return ran


def places_of(wq: WaitingQueues) -> tuple[object, ...]:
    """Everything an operation could change: the places and their order (by identity),
    the statuses, the records."""
    known = {rid: (id(r), r.status) for rid, r in wq._known.items()}
    deferred = sorted(wq.deferred_waiting) if wq.layout != LAYOUT_V030 else None
    return (
        [id(r) for r in wq.waiting],
        [id(r) for r in wq._aside],
        [id(r) for r in wq.running],
        {rid: id(r) for rid, r in wq.finished.items()},
        known,
        dict(wq._where),
        sorted(wq._paused),
        sorted(wq._kv_held),
        deferred,
    )


def answering(*given: bool) -> Callable[[], bool]:
    """A callable answering `given`, one per call."""
    rest: Iterator[bool] = iter(given)
    return lambda: next(rest)


def built_name(layout: str) -> str:
    """`layout` built at run time: an equal string that is not the constant's object."""
    name = "".join(["vllm-", layout.removeprefix("vllm-")])
    assert name == layout and name is not layout
    return name


def refused_in_a_callback(wq: WaitingQueues, action: Callable[[], object], operation: str) -> None:
    """`action`, called from inside a step's callback (which then stops the step), raises
    WL-STEP-9's RuntimeError naming `operation`, once; the step runs nothing."""
    errors: list[Exception] = []

    def check(request: Any) -> StepDecision:
        try:
            action()
        except RuntimeError as error:
            errors.append(error)
        return StepDecision.STOP

    assert wq.schedule_step(check) == []
    assert len(errors) == 1
    assert f"WL-STEP-9: {operation} is not called from a step's callbacks" in str(errors[0])
