"""Streaming sessions: `await_stream`, `continue_stream`, paused sessions (WL-STR-1 to WL-STR-5).

vLLM 0.30.0's `_handle_stopped_request` keeps a stopped resumable request under
its id: WAITING_FOR_STREAMING_REQ in `skipped_waiting` until its update
arrives (vLLM 0.33.0: in `kv_holding_waiting`, deferred). Each test cites the
clause it exercises; the last ones show the contracts catch broken variants.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import icontract
import pytest
from waiting_variants import (
    ForgetsThePause,
    PromotedSessionStaysPaused,
    RequeuesPausedSession,
    SlotsIgnorePausedSessions,
)

from queueref import Request, RequestStatus, StepDecision, WaitingQueues
from queueref.waiting.places import IN_KV_HOLDING, IN_SKIPPED, IN_WAITING

RUN, SKIP, STOP = StepDecision.RUN, StepDecision.SKIP, StepDecision.STOP
STREAM = RequestStatus.WAITING_FOR_STREAMING_REQ
LAYOUTS = ["vllm-0.30", "vllm-0.33"]


def _ids(requests: Any) -> list[str]:
    return [r.request_id for r in requests]


def _aside(wq: WaitingQueues) -> Any:
    return wq.skipped_waiting if wq.layout == "vllm-0.30" else wq.kv_holding_waiting


def _state(wq: WaitingQueues) -> tuple[Any, ...]:
    everything = [*wq.waiting, *_aside(wq), *wq.running, *wq.finished.values()]
    deferred = sorted(wq.deferred_waiting) if wq.layout == "vllm-0.33" else None
    return (
        _ids(wq.waiting),
        _ids(_aside(wq)),
        _ids(wq.running),
        list(wq.finished),
        {r.request_id: r.status for r in everything},
        wq.num_paused_sessions,
        deferred,
    )


def _running(wq: WaitingQueues, *rids: str, policy: str = "fcfs") -> list[Any]:
    for i, rid in enumerate(rids):
        wq.enqueue(Request(rid, arrival_time=float(i)))
    return wq.schedule_step(lambda r: RUN)


@pytest.fixture(params=LAYOUTS)
def layout(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.mark.parametrize("policy", ["fcfs", "priority"])
def test_await_stream_parks_a_paused_session(layout: str, policy: str) -> None:
    """WL-STR-1: running -> WAITING_FOR_STREAMING_REQ, enqueued by the layout's rule."""
    wq = WaitingQueues(policy, layout=layout)
    s, other = _running(wq, "s", "o")
    wq.enqueue(Request("w", arrival_time=5.0))
    wq.await_stream(s)
    assert s.status is STREAM and wq.num_paused_sessions == 1
    assert _ids(wq.running) == ["o"] and _ids(wq.waiting) == ["w"]
    assert _ids(_aside(wq)) == ["s"]  # skipped_waiting (0.30) / kv_holding_waiting (0.33)
    if layout == "vllm-0.33":
        assert wq.deferred_waiting == {"s"}


def test_continue_stream_of_a_running_request(layout: str) -> None:
    """WL-STR-2: an update already queued: WAITING, enqueued (0.30: waiting; 0.33: KV held)."""
    wq = WaitingQueues("fcfs", layout=layout)
    (s,) = _running(wq, "s")
    wq.continue_stream(s)
    assert s.status is RequestStatus.WAITING and wq.num_paused_sessions == 0
    expected = {"vllm-0.30": IN_WAITING, "vllm-0.33": IN_KV_HOLDING}[layout]
    where = IN_WAITING if _ids(wq.waiting) == ["s"] else IN_KV_HOLDING
    assert where == expected and wq.running == []


def test_continue_stream_of_a_paused_session_keeps_its_place(layout: str) -> None:
    """WL-STR-2: the update arrives for a paused session: WAITING where it waits."""
    wq = WaitingQueues("fcfs", layout=layout)
    a, s = _running(wq, "a", "s")
    wq.await_stream(a)
    wq.await_stream(s)
    before = _ids(_aside(wq))
    wq.continue_stream(s)
    assert _ids(_aside(wq)) == before == ["a", "s"]
    assert s.status is RequestStatus.WAITING and a.status is STREAM
    assert wq.num_paused_sessions == 1
    # The next step: `a` is offered to try_promote and skipped, `s` runs.
    assert _ids(wq.schedule_step(lambda r: RUN)) == ["s"]


def test_paused_sessions_hold_running_slots(layout: str) -> None:
    """WL-STR-4: max_running counts running plus paused sessions (vLLM's num_running)."""
    wq = WaitingQueues("fcfs", layout=layout)
    (s,) = _running(wq, "s")
    wq.await_stream(s)
    wq.enqueue(Request("w", arrival_time=3.0))
    asked: list[str] = []

    def promote(request: Any) -> bool:
        asked.append(request.request_id)
        return False

    assert wq.schedule_step(lambda r: RUN, promote, max_running=1) == []
    assert asked == []  # not even the paused head is looked at
    assert _ids(wq.schedule_step(lambda r: RUN, promote, max_running=2)) == ["w"]
    # A request enqueued as WAITING_FOR_STREAMING_REQ is not a paused session.
    wq.enqueue(Request("e", arrival_time=4.0, status=STREAM))
    assert wq.num_paused_sessions == 1


def test_paused_session_is_offered_to_try_promote(layout: str) -> None:
    """WL-STR-5: a paused head is offered to try_promote; vLLM answers False; if a callback
    promotes it, it is WAITING and no longer paused."""
    wq = WaitingQueues("priority", layout=layout)
    (s,) = _running(wq, "s")
    wq.await_stream(s)
    offered: list[str] = []

    def never(request: Any) -> bool:
        offered.append(request.request_id)
        return False

    assert wq.schedule_step(lambda r: RUN, never) == [] and offered == ["s"]
    assert s.status is STREAM and wq.num_paused_sessions == 1
    assert _ids(wq.schedule_step(lambda r: RUN, lambda r: True)) == ["s"]
    assert wq.num_paused_sessions == 0


def test_abort_of_a_paused_session(layout: str) -> None:
    """WL-STR-1, WL-ABT-1: an aborted paused session is finished and no longer paused."""
    wq = WaitingQueues("fcfs", layout=layout)
    (s,) = _running(wq, "s")
    wq.await_stream(s)
    assert wq.abort("s") == [s]
    assert s.status is RequestStatus.FINISHED_ABORTED and wq.num_paused_sessions == 0


@pytest.mark.guard
@pytest.mark.parametrize("operation", ["await_stream", "continue_stream"])
def test_stream_operations_reject_bad_input(layout: str, operation: str) -> None:
    """WL-STR-3: wrong state -> ValueError, non-request -> TypeError; nothing changes."""
    wq = WaitingQueues("fcfs", layout=layout)
    (r,) = _running(wq, "r")
    wq.enqueue(Request("w", arrival_time=2.0))
    wq.enqueue(Request("g", arrival_time=3.0, status=RequestStatus.WAITING_FOR_REMOTE_KVS))
    wq.finish(r)
    call = getattr(wq, operation)
    before = _state(wq)
    targets = [wq.finished["r"], wq.waiting.peek_request(), Request("ghost")]
    targets.append(_aside(wq).peek_request())  # blocked, but not on its stream
    for target in targets:
        with pytest.raises(ValueError, match="WL-STR-3"):
            call(target)
        assert _state(wq) == before
    with pytest.raises(TypeError):
        call(object())
    assert _state(wq) == before


def test_stream_operations_not_from_callbacks(layout: str) -> None:
    """WL-STEP-9, WL-STR-3: await_stream/continue_stream from a callback: RuntimeError."""
    wq = WaitingQueues("fcfs", layout=layout)
    (r,) = _running(wq, "r")
    wq.enqueue(Request("w", arrival_time=1.0))

    def check(request: Any) -> StepDecision:
        wq.await_stream(r)
        return RUN

    with pytest.raises(RuntimeError, match="WL-STEP-9"):
        wq.schedule_step(check)
    assert _ids(wq.running) == ["r"] and wq.num_paused_sessions == 0


# ---------------------------------------------------------------------------
# broken variants (tests/helpers/waiting_variants.py)


def _pause(wq: WaitingQueues) -> Any:
    (s,) = _running(wq, "s")
    wq.await_stream(s)
    return s


def _pause_then_continue(wq: WaitingQueues) -> None:
    _running(wq, "a")
    s = _pause(wq)
    wq.await_stream(wq.running[0])
    wq.continue_stream(s)


def _pause_then_fill(wq: WaitingQueues) -> None:
    _pause(wq)
    wq.enqueue(Request("w", arrival_time=1.0))
    wq.schedule_step(lambda r: RUN, max_running=1)


def _pause_then_promote(wq: WaitingQueues) -> None:
    _pause(wq)
    wq.schedule_step(lambda r: STOP, lambda r: True)


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "scenario", "rule"),
    [
        (ForgetsThePause, _pause, "WL-STR-1"),
        (RequeuesPausedSession, _pause_then_continue, "WL-STR-2"),
        (SlotsIgnorePausedSessions, _pause_then_fill, "WL-STEP-1"),
        (PromotedSessionStaysPaused, _pause_then_promote, "WL-STR-5"),
    ],
)
def test_contracts_catch_broken_sessions(
    variant: type[WaitingQueues], scenario: Callable[[WaitingQueues], Any], rule: str, layout: str
) -> None:
    """WL-STR-1, WL-STR-2, WL-STR-4, WL-STR-5: each broken variant is caught by its clause
    (WL-STR-4's slot count is the WL-STEP-1 max_running contract)."""
    scenario(WaitingQueues("fcfs", layout=layout))
    with pytest.raises(icontract.ViolationError, match=f"{rule}:"):
        scenario(variant("fcfs", layout=layout))


def test_place_names() -> None:
    """WL-STR-1: the second queue's place is named after the layout's queue."""
    assert WaitingQueues("fcfs")._aside_place == IN_SKIPPED
    assert WaitingQueues("fcfs", layout="vllm-0.33")._aside_place == IN_KV_HOLDING
